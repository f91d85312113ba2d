"""Many cores: a node of N rmq_core brokers against one rmq_core broker, one Apache RocketMQ 4.9.7 broker and (with
--apache-n) N Apache brokers, with 1..N independent client processes sending and pulling (issue 27's yardstick).

    .venv/bin/python benches/bench_scale.py [--brokers N] [--clients 1,2,4] [--rounds 3] [--messages 100000]
        [--queues 32] [--sides node,rmq_core,apache] [--apache-n] [--apache-jvm test|runbroker] [--quick] [--json F]
        [--pin [BROKER_CPUS:CLIENT_CPUS]]

Sides (each a fresh cluster under a temporary directory, the same broker.conf settings as bench_vs_apache.py):
  node      ``rmq-core serve --brokers N``: N broker processes (benches run them as users do: one command)
  rmq_core  the same command with --brokers 1: one broker process
  apache    one Apache 4.9.7 name server + broker (tests/support/apache_rocketmq.py; --apache-jvm runbroker gives
            runbroker.sh's JVM settings: G1, 8 GiB heap, AlwaysPreTouch; the default is the test suite's 512 MiB)
  apache_n  with --apache-n: N Apache brokers on one name server (memory permitting: 8 GiB heap each with runbroker)
The topic has --queues queues split evenly over the side's brokers. Per side and client count k:
  send  k client processes (lean senders: pre-built 1 KiB SEND_MESSAGE_V2 frames, --window in flight per broker
        connection), each --messages spread over every broker of the side
  pull  that backlog drained by k puller processes (its (broker, queue) pairs dealt round robin; 32 per request,
        one request in flight per queue)
Each side first runs an untimed send + pull of --warmup messages (Apache's JIT compiles its paths). Each phase starts
when every client has built its frames and connected (a "go" line on their stdin). Reported per
run: msg/s over the phase's wall clock (first start to last end), the brokers' cores (utime+stime of every broker
process per wall second, from /proc) and the clients' cores (the same for the client processes: a client count
whose clients use ~1 core each means the clients, not the brokers, are the limit: add clients). Idle RSS per broker
after start. Medians over --rounds, every run beside them; sides alternate order per round. Say the machine's
cores when quoting figures: on 2 cores the clients and brokers share them, unless --pin gives them disjoint cores
(``--pin 0:1``: every broker-side process, threads included, on core 0, the clients on core 1; ``--pin`` alone
splits the cores in halves). Every run also reports messages per broker CPU-second (msg/s over the brokers' cores):
the figure that matters where the brokers are the limit (issue 27 item 6: more connections must not cost more).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from bench_vs_apache import BROKER_CONF, cpu_seconds, status_kib
from lean_clients import lean_pull, lean_send, send_frames

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from support import apache_rocketmq  # noqa: E402
from support.admin_helpers import create_topic  # noqa: E402

TOPIC = "BenchScale"
BODY = b"x" * 1024
RUNBROKER_JVM = [  # 4.9.7 distribution/bin/runbroker.sh (Java 9+ branch)
    "-server", "-Xms8g", "-Xmx8g", "-XX:+UseG1GC", "-XX:G1HeapRegionSize=16m", "-XX:G1ReservePercent=25",
    "-XX:InitiatingHeapOccupancyPercent=30", "-XX:SoftRefLRUPolicyMSPerMB=0", "-XX:-OmitStackTraceInFastThrow",
    "-XX:+AlwaysPreTouch", "-XX:MaxDirectMemorySize=15g", "-XX:-UseLargePages",
    *[o for o in apache_rocketmq.SERVER_JVM_OPTS if o.startswith(("--add", "java.base"))],
]  # fmt: skip


# ------------------------------------------------------------------------------------------------ clusters
class Cluster:
    """A side's name server and brokers: ``start``, ``broker_addrs`` (name -> address), ``broker_pids``, ``stop``."""

    namesrv = ""
    broker_addrs: dict[str, str]

    def start(self, timeout: float) -> None:
        raise NotImplementedError

    def broker_pids(self) -> list[int]:
        raise NotImplementedError

    def root_pids(self) -> list[int]:
        """The side's processes whose trees hold all of it (name servers and brokers)."""
        return self.broker_pids()

    def stop(self) -> None:
        raise NotImplementedError


class NodeCluster(Cluster):
    """``rmq-core serve --brokers N`` as a user starts it; its broker processes are the serve process's children."""

    def __init__(self, workdir: str, brokers: int, port: int, namesrv_port: int) -> None:
        self.workdir, self.brokers, self.port, self.namesrv_port = workdir, brokers, port, namesrv_port
        self.proc: subprocess.Popen[bytes] | None = None
        self.namesrv = f"127.0.0.1:{namesrv_port}"
        self.broker_addrs = {f"bench-{i}": f"127.0.0.1:{port + 4 * i}" for i in range(brokers)}

    def start(self, timeout: float) -> None:
        conf = os.path.join(self.workdir, "broker.conf")
        with open(conf, "w", encoding="utf-8") as f:
            f.writelines(f"{k}={v}\n" for k, v in BROKER_CONF.items())
        log = os.path.join(self.workdir, "serve.log")
        cmd = [sys.executable, "-m", "rmq_core.cli", "serve", "--brokers", str(self.brokers), "-c", conf]
        cmd += ["--dir", os.path.join(self.workdir, "store"), "--port", str(self.port)]
        cmd += ["--namesrv-port", str(self.namesrv_port), "--name", "bench"]
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        last = f"  bench-{self.brokers - 1}@"
        deadline = time.monotonic() + timeout
        while True:
            with open(log, encoding="utf-8", errors="replace") as f:
                if last in f.read():
                    return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"rmq-core serve --brokers {self.brokers} did not start; see {log}")
            time.sleep(0.05)

    def broker_pids(self) -> list[int]:
        assert self.proc is not None
        pids: list[int] = []
        for tid in os.listdir(f"/proc/{self.proc.pid}/task"):
            with open(f"/proc/{self.proc.pid}/task/{tid}/children", encoding="ascii") as f:
                pids += [int(p) for p in f.read().split()]
        return pids

    def root_pids(self) -> list[int]:
        return [] if self.proc is None else [self.proc.pid]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class ApacheCluster(Cluster):
    """One Apache name server and ``brokers`` Apache brokers registered with it."""

    def __init__(self, workdir: str, brokers: int) -> None:
        self.workdir, self.brokers = workdir, brokers
        self.servers: list[apache_rocketmq.ApacheRocketMQ] = []
        self.broker_addrs = {}

    def start(self, timeout: float) -> None:
        for i in range(self.brokers):
            server = apache_rocketmq.ApacheRocketMQ(
                os.path.join(self.workdir, f"apache-{i}"), broker_name=f"bench-{i}", extra_broker_conf=BROKER_CONF_N
            )
            self.servers.append(server)
            if i == 0:
                server.start(timeout)
                self.namesrv = server.namesrv_addr
            else:
                server.start_broker_only(self.namesrv, timeout)
            self.broker_addrs[f"bench-{i}"] = server.broker_addr

    def broker_pids(self) -> list[int]:
        return [s.broker_proc.pid for s in self.servers if s.broker_proc is not None]

    def root_pids(self) -> list[int]:
        procs = [p for s in self.servers for p in (s.namesrv_proc, s.broker_proc)]
        return [p.pid for p in procs if p is not None]

    def stop(self) -> None:
        for server in reversed(self.servers):
            server.stop()


BROKER_CONF_N = {k: v for k, v in BROKER_CONF.items() if k != "brokerName"}


# ------------------------------------------------------------------------------------------------ clients
def client_main(spec: dict[str, Any]) -> None:
    """A client process: build everything, say "ready", wait for "go", run, print one JSON line."""
    role, topic = spec["role"], spec["topic"]
    plan: dict[str, list[int]] = spec["plan"]  # broker address -> queue ids (this client's share)
    if role == "send":
        per_broker = spec["messages"] // len(plan)
        # round robin over queues 0..k-1: every broker of a side holds the topic's queues 0..k-1
        frames = {a: send_frames(topic, per_broker, BODY, len(qs)) for a, qs in plan.items()}
    print("ready", flush=True)
    sys.stdin.readline()
    cpu0 = _own_cpu()
    start = time.time()

    async def run() -> dict[str, Any]:
        if role == "send":
            runs = await asyncio.gather(*(lean_send(a, frames[a], spec["window"]) for a in plan))
            return {"count": sum(r.answered - r.failed for r in runs), "failed": sum(r.failed for r in runs)}
        targets: dict[str, list[int]] = spec["targets"]
        pulled = await asyncio.gather(*(lean_pull(a, topic, qs, 32, targets[a]) for a, qs in plan.items()))
        return {"count": sum(n for n, _ in pulled), "failed": 0}

    out = asyncio.run(run())
    out.update(start=start, end=time.time(), cpu=_own_cpu() - cpu0)
    print(json.dumps(out), flush=True)


def _own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@dataclass
class Phase:
    msgs_per_s: float
    broker_cores: float
    client_cores: float
    failed: int

    @property
    def per_broker_cpu_s(self) -> float:
        """Messages per broker CPU-second: what a broker's core yields where the brokers are the limit."""
        return self.msgs_per_s / self.broker_cores if self.broker_cores else 0.0


def run_phase(cluster: Cluster, specs: list[dict[str, Any]], timeout: float, cpus: set[int] | None = None) -> Phase:
    """One phase: a client process per spec (on ``cpus`` if given), started together."""
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--client", json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=None if cpus is None else partial(os.sched_setaffinity, 0, cpus),
        )
        for spec in specs
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError("a client did not get ready")
        pids = cluster.broker_pids()
        cpu0 = sum(cpu_seconds(pid) for pid in pids)
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [json.loads(p.communicate(timeout=timeout)[0]) for p in procs]
        cpu1 = sum(cpu_seconds(pid) for pid in pids)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    wall = max(r["end"] for r in results) - min(r["start"] for r in results)
    return Phase(
        sum(r["count"] for r in results) / wall,
        (cpu1 - cpu0) / wall,
        sum(r["cpu"] for r in results) / wall,
        sum(r["failed"] for r in results),
    )


def measure(cluster: Cluster, k: int, args: argparse.Namespace, messages: int | None = None) -> dict[str, Phase]:
    """Send then pull with ``k`` client processes over a fresh topic spread over the cluster's brokers (each sender
    ``messages``, default --messages)."""
    messages = args.messages if messages is None else messages
    topic = f"{TOPIC}_{k}_{int(time.time() * 1000) % 1_000_000}"
    per_broker = max(1, args.queues // len(cluster.broker_addrs))
    addrs = list(cluster.broker_addrs.values())
    create_topic(addrs, topic, per_broker, namesrv=cluster.namesrv)
    plan = {a: list(range(per_broker)) for a in addrs}
    send = [
        {"role": "send", "topic": topic, "plan": plan, "messages": messages, "window": args.window} for _ in range(k)
    ]
    cpus = None if args.pin is None else args.pin[1]
    out = {"send": run_phase(cluster, send, args.phase_timeout, cpus)}
    # each sender sent messages // brokers frames to every broker, round robin over its queues
    frames = messages // len(addrs)
    sent = [k * (frames // per_broker + (1 if q < frames % per_broker else 0)) for q in range(per_broker)]
    pairs = [(a, q) for a in addrs for q in range(per_broker)]
    pulls = []
    for i in range(k):
        mine: dict[str, list[int]] = {}
        for a, q in pairs[i::k]:
            mine.setdefault(a, []).append(q)
        targets = {a: [sent[q] for q in qs] for a, qs in mine.items()}
        pulls.append({"role": "pull", "topic": topic, "plan": mine, "targets": targets})
    out["pull"] = run_phase(cluster, pulls, args.phase_timeout, cpus)
    return out


# ------------------------------------------------------------------------------------------------ the run
@dataclass
class Results:
    runs: dict[tuple[str, str, int], list[Phase]] = field(default_factory=dict)  # (side, load, k) -> every run
    idle_rss_mib: dict[str, list[float]] = field(default_factory=dict)


def parse_cpus(text: str) -> set[int]:
    """``0-3,6`` -> {0, 1, 2, 3, 6}."""
    cpus: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def pin_tree(pid: int, cpus: set[int]) -> None:
    """Every thread of ``pid`` and of its descendants on ``cpus`` (a process started later inherits it)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                children = [int(c) for c in f.read().split()]
        except (FileNotFoundError, ProcessLookupError):  # a thread that ended meanwhile
            continue
        for child in children:
            pin_tree(child, cpus)


def make_cluster(side: str, workdir: str, args: argparse.Namespace, port: int) -> Cluster:
    if side == "node":
        return NodeCluster(workdir, args.brokers, port, port - 1)
    if side == "rmq_core":
        return NodeCluster(workdir, 1, port, port - 1)
    return ApacheCluster(workdir, args.brokers if side == "apache_n" else 1)


def rounds(args: argparse.Namespace) -> Iterator[tuple[int, list[str]]]:
    for r in range(args.rounds):
        sides = list(args.sides)
        yield r, sides if r % 2 == 0 else sides[::-1]


def run(args: argparse.Namespace) -> Results:
    res = Results()
    port = 22000
    for r, sides in rounds(args):
        for side in sides:
            workdir = tempfile.mkdtemp(prefix=f"bench-scale-{side}-")
            cluster = make_cluster(side, workdir, args, port)
            port += 4 * args.brokers + 8
            try:
                cluster.start(args.start_timeout)
                time.sleep(1.0)
                if args.pin is not None:  # the name server, brokers and their threads on the brokers' cores
                    for pid in cluster.broker_pids() + cluster.root_pids():
                        pin_tree(pid, args.pin[0])
                pids = cluster.broker_pids()
                rss = sum(status_kib(pid, "VmRSS") for pid in pids) / 1024 / len(pids)
                res.idle_rss_mib.setdefault(side, []).append(rss)
                if args.warmup:  # untimed: Apache's JIT compiles its send and pull paths (~100,000 sends)
                    measure(cluster, 1, args, messages=args.warmup)
                for k in args.clients:
                    phases = measure(cluster, k, args)
                    for load, phase in phases.items():
                        res.runs.setdefault((side, load, k), []).append(phase)
                        print(
                            f"round {r} {side:9} {load} k={k}: {phase.msgs_per_s:,.0f} msg/s, brokers "
                            f"{phase.broker_cores:.2f} cores, clients {phase.client_cores:.2f} cores, "
                            f"{phase.per_broker_cpu_s:,.0f} msg per broker CPU-s"
                            + (f", {phase.failed} failed" if phase.failed else ""),
                            flush=True,
                        )
            except Exception:
                traceback.print_exc()
            finally:
                cluster.stop()
                shutil.rmtree(workdir, ignore_errors=True)
    return res


def table(res: Results, args: argparse.Namespace) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    print(f"\n{os.cpu_count()} cores here; node = {args.brokers} brokers; medians of {args.rounds} rounds")
    print(f"{'load':5} {'k':>3} " + " ".join(f"{s:>30}" for s in args.sides) + "   node/apache")
    for load in ("send", "pull"):
        for k in args.clients:
            cells, med = [], {}
            for side in args.sides:
                runs = res.runs.get((side, load, k), [])
                if not runs:
                    cells.append(f"{'-':>30}")
                    continue
                m = statistics.median(p.msgs_per_s for p in runs)
                bc = statistics.median(p.broker_cores for p in runs)
                cc = statistics.median(p.client_cores for p in runs)
                med[side] = m
                cells.append(f"{m:>12,.0f} ({bc:4.2f} / {cc:4.2f} cores)")
                rows[f"{side} {load} k={k}"] = {
                    "median": m,
                    "runs": [p.msgs_per_s for p in runs],
                    "broker_cores": [p.broker_cores for p in runs],
                    "client_cores": [p.client_cores for p in runs],
                    "per_broker_cpu_s": [p.per_broker_cpu_s for p in runs],
                }
            ratio = f"{med['node'] / med['apache']:.2f}" if "node" in med and "apache" in med else "-"
            print(f"{load:5} {k:>3} " + " ".join(cells) + f"   {ratio}")
    for load in ("send", "pull"):
        for k in args.clients:
            for side in args.sides:
                runs = res.runs.get((side, load, k), [])
                if runs:
                    print(f"  every run {side} {load} k={k}: " + " / ".join(f"{p.msgs_per_s:,.0f}" for p in runs))
                    per_cpu = [p.per_broker_cpu_s for p in runs]
                    print(
                        f"    msg per broker CPU-s: median {statistics.median(per_cpu):,.0f}; "
                        + " / ".join(f"{v:,.0f}" for v in per_cpu)
                    )
    for side, v in res.idle_rss_mib.items():
        print(f"idle RSS per broker, {side}: {statistics.median(v):.0f} MiB")
    rows["idle_rss_mib"] = {s: statistics.median(v) for s, v in res.idle_rss_mib.items()}
    return rows


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    cores = len(os.sched_getaffinity(0))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", type=int, default=cores, help=f"the node's brokers (default: the cores, {cores})")
    ap.add_argument("--clients", default=None, help="client process counts, e.g. 1,4,8 (default 1 and --brokers)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--messages", type=int, default=None, help="messages each sender sends (100,000; --quick 20,000)")
    ap.add_argument("--window", type=int, default=128, help="sends in flight per broker connection")
    ap.add_argument("--warmup", type=int, default=None, help="untimed sends + pulls per side first (100,000; quick 0)")
    ap.add_argument("--queues", type=int, default=32, help="the topic's queues, split over a side's brokers")
    ap.add_argument("--sides", default="node,rmq_core,apache")
    ap.add_argument("--apache-n", action="store_true", help="add N Apache brokers (apache_n)")
    ap.add_argument("--apache-jvm", choices=("test", "runbroker"), default="test")
    ap.add_argument("--quick", action="store_true", help="1 round, 20,000 messages, k = 1 and --brokers")
    ap.add_argument("--start-timeout", type=float, default=120.0)
    ap.add_argument("--phase-timeout", type=float, default=300.0)
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--pin",
        nargs="?",
        const="",
        default=None,
        help="brokers and clients on disjoint cores: BROKER_CPUS:CLIENT_CPUS (e.g. 0:1, 0-7:8-15); alone: halves",
    )
    args = ap.parse_args(argv)
    if args.pin is not None:
        if args.pin:
            brokers_cpus, _, client_cpus = args.pin.partition(":")
            args.pin = (parse_cpus(brokers_cpus), parse_cpus(client_cpus))
        else:
            own = sorted(os.sched_getaffinity(0))
            if len(own) < 2:
                ap.error("--pin needs 2 cores or more")
            args.pin = (set(own[: len(own) // 2]), set(own[len(own) // 2 :]))
        if args.pin[0] & args.pin[1]:
            ap.error("--pin: the brokers' and the clients' cores overlap")
    args.sides = args.sides.split(",") + (["apache_n"] if args.apache_n else [])
    args.clients = sorted({1, args.brokers}) if args.clients is None else [int(x) for x in args.clients.split(",")]
    if args.quick:
        args.rounds = 1
    if args.messages is None:
        args.messages = 20_000 if args.quick else 100_000
    if args.warmup is None:
        args.warmup = 0 if args.quick else 100_000
    return args


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--client":
        client_main(json.loads(sys.argv[2]))
        return 0
    args = parse_args(argv)
    if args.apache_jvm == "runbroker":
        apache_rocketmq.SERVER_JVM_OPTS[:] = RUNBROKER_JVM
    rows = table(run(args), args)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1, default=sorted)  # (--pin's sets)
    return 0


if __name__ == "__main__":
    sys.exit(main())
