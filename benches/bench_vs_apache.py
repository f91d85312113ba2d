"""rmq_core's broker against Apache RocketMQ 4.9.7's, side by side in one run: the figure every change to the send
path is judged by.

    .venv/bin/python benches/bench_vs_apache.py [--rounds 5] [--warmup 100000] [--quick] [--brokers rmq_core,apache]
                                                [--no-java] [--ceiling] [--json out.json]

Each broker runs in its own processes (rmq_core: ``rmq-core namesrv`` and ``rmq-core broker``; Apache: the
NamesrvStartup and BrokerStartup JVMs of tests/support/apache_rocketmq.py, jars from compat/apache/build.sh) from the SAME
broker.conf settings (BROKER_CONF below: 256 MiB CommitLog files, 4 queues per auto-created topic,
autoCreateTopicEnable, ASYNC_FLUSH or SYNC_FLUSH) and the same store layout (``<session>/store/broker``) under a
fresh temporary directory per session. Rounds alternate the brokers (round 0 rmq_core first, round 1 Apache
first...); in each round each broker gets a fresh ASYNC_FLUSH session and a fresh SYNC_FLUSH session:

  ASYNC_FLUSH session: start-up (broker process spawned until it answers GET_MAX_OFFSET and the name server lists
      it), idle RSS (1 s later), a warm-up of --warmup lean sends (Apache's JIT needs ~100,000), then
    lean send    --messages sends, one connection, --window in flight, frames built before the run starts
    backlog fill --backlog sends by the same sender into a fresh topic (nobody consumes it)
    pull         that backlog drained 32 per PULL_MESSAGE, one pull in flight per queue (lean puller)
    wake-up      --wakeups pulls parked by long polling, each answered after one send: p50 / p99 (ms)
    java sync    Apache's Java 4.9.7 producer (compat/java BenchProduce), --java-threads threads, sync sends,
                 --java-messages timed after --java-warmup untimed (the client's JVM JIT-compiles its send path;
                 a cold client's first sends measure its compiler more than the broker)
    java async   the same producer, --window async sends in flight
    java batch   the same producer, --java-threads threads, each sending send(Collection) of --java-batch messages
                 (SEND_BATCH_MESSAGE; --java-batch-messages messages after as many untimed)
    java consume the backlog consumed by Apache's Java 4.9.7 push consumer (compat/java BenchConsume: a new group
                 from the first offset, consume batches of 32, pulls of 32, 20 threads; clock from the first delivery)
  SYNC_FLUSH session: --sync-warmup lean sends, then --sync-messages timed (flushDiskType=SYNC_FLUSH).

--ceiling adds a third broker to every round, rmq_core without its store (benches/no_store_broker.py: the plain
sends' put answers PUT_OK and stores nothing; transport, parsing, checks, answers and socket I/O kept), for the
workloads that need nothing stored (start-up, idle RSS, lean send, the Java producer): its figure is the ceiling the
store leaves the send path, so a change can be judged by how much of the gap to it it closes.

Every response is checked (a send answered with anything but SUCCESS is a failure, counted and shown). For each run:
the figure, the broker's CPU seconds per 10,000 messages (utime + stime of the broker process, for Apache the
broker JVM, from /proc/<pid>/stat before and after the timed part), the cores it used (that CPU per wall-clock
second), the benchmark process's own CPU (the lean sender's) and the broker's peak RSS (VmHWM) after it. The table
gives the median per broker, the ratio rmq_core / Apache and every run. The sender shares the machine's cores with
the broker, as in the issue's figures. On a machine shared with other work a one-thread broker gets a smaller share
of the cores than a many-thread one: say so when quoting figures, and read msg/s beside the CPU and cores columns.

Bounded: every phase has a timeout and every loop a count; processes are stopped in ``finally`` and at exit (also on
Ctrl-C and SIGTERM), temporary directories removed. A phase that fails prints its error and the run goes on (its
figure is missing from the table). Ports come from FIRST_PORT..LAST_PORT.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import compare_report
from compare_report import OURS, THEIRS, Workload, broker_cell, cell, median, ratio, rounds_order
from lean_clients import QUEUES, lean_pull, lean_send, p50_p99, send_frames, wakeups

from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import GetMaxOffsetRequestHeader, encode_header
from rmq_core.remoting.remoting_client import BlockingRemotingClient

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from bench_client import java_result  # noqa: E402

from support.apache_rocketmq import ApacheRocketMQ, _port_free, server_classpath  # noqa: E402

FIRST_PORT, LAST_PORT = 20000, 20999
BROKER_NAME = "bench-broker"
CLK_TCK = os.sysconf("SC_CLK_TCK")
BROKERS = ("rmq_core", "apache")
NO_STORE = "rmq_core_no_store"  # --ceiling: rmq_core with the send path's put a counter (benches/no_store_broker.py)

# The settings both brokers run with (Apache's own names; rmq_core reads the same broker.conf).
BROKER_CONF = {
    "brokerClusterName": "DefaultCluster",
    "brokerName": BROKER_NAME,
    "brokerId": "0",
    "brokerIP1": "127.0.0.1",
    "brokerRole": "ASYNC_MASTER",
    "mappedFileSizeCommitLog": str(256 * 1024 * 1024),
    "mappedFileSizeConsumeQueue": str(300_000 * 20),
    "defaultTopicQueueNums": str(QUEUES),
    "autoCreateTopicEnable": "true",
    "autoCreateSubscriptionGroup": "true",
    "diskMaxUsedSpaceRatio": "95",
}


# ------------------------------------------------------------------------------------------------ processes
def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15 of stat(5))


def status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for ln in f:
            if ln.startswith(key + ":"):
                return int(ln.split()[1])
    raise KeyError(key)


_next_port = FIRST_PORT


def take_ports() -> tuple[int, int]:
    """(name server port, broker port L) from our range, with L-2 and L+1 also free (Apache's VIP and HA
    listeners); ports are handed out in turn so a session never reuses the last one's."""
    global _next_port
    for _ in range((LAST_PORT - FIRST_PORT) // 5 + 1):
        ns, br = _next_port, _next_port + 3
        _next_port = _next_port + 5 if _next_port + 10 <= LAST_PORT else FIRST_PORT
        if all(_port_free(p) for p in (ns, br - 2, br, br + 1)):
            return ns, br
    raise RuntimeError(f"no free ports in {FIRST_PORT}-{LAST_PORT}")


def _request_ok(client: BlockingRemotingClient, addr: str, cmd: RemotingCommand) -> RemotingCommand | None:
    try:
        r = client.invoke_sync(addr, cmd, timeout=2.0)
    except (OSError, TimeoutError):
        return None
    return r if r.code == ResponseCode.SUCCESS else None


def wait_ready(proc: subprocess.Popen[Any], namesrv: str, broker: str, timeout: float) -> float:
    """Poll until the broker answers GET_MAX_OFFSET(TBW102, 0) and the name server's cluster info names it; the
    monotonic time it was first seen ready."""
    header = encode_header(GetMaxOffsetRequestHeader(topic="TBW102", queueId=0))
    deadline = time.monotonic() + timeout
    with BlockingRemotingClient() as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"broker exited {proc.returncode} while starting")
            if _request_ok(client, broker, RemotingCommand.request(RequestCode.GET_MAX_OFFSET, dict(header))):
                info = _request_ok(client, namesrv, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
                if info is not None and info.body and BROKER_NAME.encode() in info.body:
                    return time.monotonic()
            time.sleep(0.005)
    raise TimeoutError(f"broker {broker} not ready in {timeout} s")


class Session:
    """One broker (with its name server) over a fresh store; ``start()`` times the broker's start-up."""

    kind = ""

    def __init__(self, workdir: str, flush: str) -> None:
        self.workdir, self.flush = workdir, flush
        self.namesrv_port, self.broker_port = take_ports()
        self.startup_s = 0.0

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def pid(self) -> int:
        raise NotImplementedError

    def start(self, timeout: float) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError


class RmqCoreSession(Session):
    kind = "rmq_core"
    launcher = ["-m", "rmq_core.cli"]

    def __init__(self, workdir: str, flush: str) -> None:
        super().__init__(workdir, flush)
        self.procs: list[subprocess.Popen[bytes]] = []

    def _spawn(self, args: list[str], log: str) -> subprocess.Popen[bytes]:
        with open(os.path.join(self.workdir, log), "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, *self.launcher, *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stopped as one, not by the terminal's Ctrl-C
            )
        self.procs.append(proc)
        return proc

    def start(self, timeout: float) -> None:
        store = os.path.join(self.workdir, "store", "broker")
        conf = {
            **BROKER_CONF,
            "listenPort": str(self.broker_port),
            "namesrvAddr": self.namesrv,
            "storePathRootDir": store,
            "flushDiskType": self.flush,
        }
        path = os.path.join(self.workdir, "broker.conf")
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(f"{k}={v}\n" for k, v in conf.items())
        ns = self._spawn(["namesrv", "--port", str(self.namesrv_port)], "namesrv.log")
        deadline = time.monotonic() + timeout
        with BlockingRemotingClient() as client:
            cluster = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
            while _request_ok(client, self.namesrv, cluster) is None:
                if ns.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"rmq_core name server did not start (exit {ns.poll()})")
                time.sleep(0.01)
        t0 = time.monotonic()
        broker = self._spawn(["broker", "-c", path], "broker.log")
        self.startup_s = wait_ready(broker, self.namesrv, self.broker, timeout) - t0

    @property
    def pid(self) -> int:
        return self.procs[1].pid

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
        self.procs.clear()


class NoStoreSession(RmqCoreSession):
    """rmq_core's processes, the broker's send-path put a counter (``--ceiling``)."""

    kind = NO_STORE
    launcher = [os.path.join(ROOT, "benches", "no_store_broker.py")]


class ApacheSession(Session):
    kind = "apache"

    def __init__(self, workdir: str, flush: str) -> None:
        super().__init__(workdir, flush)
        self.server = ApacheRocketMQ(
            workdir, broker_name=BROKER_NAME, extra_broker_conf={**BROKER_CONF, "flushDiskType": self.flush}
        )

    def start(self, timeout: float) -> None:
        # the launcher's own start() polls its log every 0.1 s; here the broker's start-up is timed like rmq_core's
        s = self.server
        s.namesrv_port, s.broker_port = self.namesrv_port, self.broker_port
        ns_conf, br_conf = s.write_files()
        s.namesrv_proc = s._spawn("org.apache.rocketmq.namesrv.NamesrvStartup", ns_conf, "namesrv")
        s._wait_for(s.namesrv_proc, "namesrv", "boot success", timeout)
        t0 = time.monotonic()
        s.broker_proc = s._spawn("org.apache.rocketmq.broker.BrokerStartup", br_conf, "broker")
        self.startup_s = wait_ready(s.broker_proc, self.namesrv, self.broker, timeout) - t0

    @property
    def pid(self) -> int:
        assert self.server.broker_proc is not None
        return self.server.broker_proc.pid

    def stop(self) -> None:
        self.server.stop()


_live: set[Session] = set()


def _stop_all() -> None:
    for s in list(_live):
        try:
            s.stop()
        except Exception:
            traceback.print_exc()
        _live.discard(s)


def _on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


# ------------------------------------------------------------------------------------------------ workloads
WORKLOADS = [
    Workload("send", "lean send, 1 conn, window in flight", "msg/s", True),
    Workload("backlog", "backlog fill (same sender)", "msg/s", True),
    Workload("sync_flush", "SYNC_FLUSH lean send", "msg/s", True),
    Workload("java_sync", "Java 4.9.7 producer, sync", "msg/s", True),
    Workload("java_async", "Java 4.9.7 producer, async", "msg/s", True),
    Workload("java_batch", "Java 4.9.7 producer, sync batches", "msg/s", True),
    Workload("pull", "pull, 32/request, 4 queues", "msg/s", True),
    Workload("java_consume", "Java 4.9.7 push consumer, batch 32", "msg/s", True),
    Workload("wakeup_p50", "long-poll wake-up p50", "ms", False),
    Workload("wakeup_p99", "long-poll wake-up p99", "ms", False),
    Workload("idle_rss", "idle RSS", "MiB", False),
    Workload("startup", "start-up", "s", False),
]


@dataclass
class Run:
    value: float
    messages: int = 0
    cpu_s: float | None = None
    hwm_mib: float | None = None
    failed: int = 0
    note: str = ""
    sender_cpu_s: float | None = None  # this process (the lean sender / puller) over the same part
    broker_cores: float | None = None  # the broker's CPU seconds per wall-clock second over the same part

    @property
    def cpu_per_10k(self) -> float | None:
        return None if self.cpu_s is None or not self.messages else self.cpu_s / self.messages * 10_000


Results = compare_report.Results[Run]


class Bench:
    def __init__(self, args: argparse.Namespace, results: Results) -> None:
        self.args, self.results = args, results
        body = os.urandom(args.size)
        t0 = time.perf_counter()
        self.warm_frames = send_frames("BenchWarm", args.warmup, body)
        self.send_frames = send_frames("BenchSend", args.messages, body)
        self.backlog_frames = send_frames("BenchBacklog", args.backlog, body)
        self.sync_warm_frames = self.warm_frames[: args.sync_warmup]
        self.sync_frames = send_frames("BenchSyncSend", args.sync_messages, body)
        gc.collect()
        gc.freeze()  # the frames are never collected: keep the collector off them during the timed runs
        n = args.warmup + args.messages + args.backlog + args.sync_messages
        print(f"{n:,} frames of {args.size} B bodies built in {time.perf_counter() - t0:.1f} s", flush=True)

    # --- helpers -----------------------------------------------------------------------------------------
    def phase(self, s: Session, key: str, fn: Callable[[], Run]) -> Run | None:
        """Run one timed part, with the broker's CPU and peak RSS around it; errors recorded, the run goes on."""
        try:
            cpu0, own0, wall0 = cpu_seconds(s.pid), time.process_time(), time.perf_counter()
            run = fn()
            if run.cpu_s is None and run.messages:
                run.cpu_s = cpu_seconds(s.pid) - cpu0
                if not key.startswith("java"):  # the Java producer is its own process (and its JVM start-up)
                    run.sender_cpu_s = time.process_time() - own0
                    run.broker_cores = run.cpu_s / (time.perf_counter() - wall0)
            run.hwm_mib = status_kib(s.pid, "VmHWM") / 1024
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # the broker process gone included (its /proc entry with it)
            msg = f"{s.kind} {s.flush} {key}: {type(e).__name__}: {e}"
            self.results.errors.append(msg)
            print(f"   FAILED {msg}", flush=True)
            traceback.print_exc(limit=4)
            return None
        self.results.add(key, s.kind, run)
        cpu = "" if run.cpu_per_10k is None else f", broker CPU {run.cpu_per_10k:.3f} s/10k"
        if run.sender_cpu_s is not None:
            cpu += (
                f" (this process {run.sender_cpu_s / run.messages * 10_000:.3f}), broker cores {run.broker_cores:.2f}"
            )
        fail = f", {run.failed} FAILED" if run.failed else ""
        print(f"   {key:<11} {run.value:>12,.3f} {_unit(key)}{cpu}, VmHWM {run.hwm_mib:.0f} MiB{fail}{run.note}")
        return run

    def send(self, s: Session, frames: list[bytes]) -> Run:
        r = asyncio.run(lean_send(s.broker, frames, self.args.window, timeout=self.args.phase_timeout))
        note = f" (failure codes {r.failure_codes})" if r.failed else ""
        return Run(r.msgs_per_s, messages=r.answered, failed=r.failed, note=note)

    def warm(self, s: Session, frames: list[bytes]) -> None:
        if not frames:
            return
        r = asyncio.run(lean_send(s.broker, frames, self.args.window, timeout=self.args.phase_timeout))
        print(f"   warm-up     {len(frames):,} sends at {r.msgs_per_s:,.0f} msg/s ({r.failed} failed)", flush=True)

    def java(self, s: Session, mode: str) -> Run:
        a = self.args
        extra = {
            "sync": ["--threads", a.java_threads],
            "async": ["--window", a.window],
            "batch": ["--threads", a.java_threads, "--batch", a.java_batch],
        }[mode]
        count, warmup = (
            (a.java_batch_messages, a.java_batch_messages) if mode == "batch" else (a.java_messages, a.java_warmup)
        )
        res = java_result(
            "BenchProduce",
            ["--namesrv", s.namesrv, "--topic", f"BenchJava_{mode}", "--count", count, "--size", a.size]
            + extra
            + ["--mode", mode, "--warmup", warmup],
            a.phase_timeout,
        )
        # the broker's CPU is read around the whole program: per send over all it made, warm-up included
        sends = int(res["count"]) + int(res["failed"]) + 1 + int(res.get("warmup", 0))
        return Run(float(res["msgsPerSec"]), messages=sends, failed=int(res["failed"]))

    def java_consume(self, s: Session) -> Run:
        """The backlog consumed by Apache's Java push consumer (compat/java BenchConsume: a new group from the first
        offset, batches of 32, a listener that counts; its clock from the first delivery to the last)."""
        a = self.args
        n = len(self.backlog_frames)
        res = java_result(
            "BenchConsume",
            ["--namesrv", s.namesrv, "--group", "BenchJavaConsume", "--topic", "BenchBacklog", "--expect", n]
            + ["--batch", 32, "--pull-batch", 32, "--timeout-ms", int(a.phase_timeout * 1000)],
            a.phase_timeout + 60,
        )
        if res.get("timedOut"):
            raise RuntimeError(f"the Java consumer got {res.get('count')} of {n} messages in time")
        return Run(float(res["msgsPerSec"]), messages=int(res["count"]))

    def pull(self, s: Session) -> Run:
        n = len(self.backlog_frames)
        targets = [n // QUEUES + (q < n % QUEUES) for q in range(QUEUES)]  # send_frames goes round robin
        pulled, dt = asyncio.run(lean_pull(s.broker, "BenchBacklog", QUEUES, 32, targets, self.args.phase_timeout))
        return Run(pulled / dt, messages=pulled, failed=n - pulled)

    # --- sessions ----------------------------------------------------------------------------------------
    def session(self, kind: str, flush: str, rnd: int, root: str) -> None:
        a = self.args
        workdir = tempfile.mkdtemp(prefix=f"r{rnd}-{kind}-{flush.lower()}-", dir=root)
        sessions: dict[str, Callable[[str, str], Session]] = {
            "rmq_core": RmqCoreSession,
            "apache": ApacheSession,
            NO_STORE: NoStoreSession,
        }
        s = sessions[kind](workdir, flush)
        print(f"-- round {rnd}: {kind}, {flush}, store {workdir}", flush=True)
        _live.add(s)
        try:
            try:
                s.start(a.start_timeout)
            except KeyboardInterrupt:
                raise
            except BaseException as e:
                self.results.errors.append(f"{kind} {flush} round {rnd}: start: {type(e).__name__}: {e}")
                print(f"   FAILED to start: {e}", flush=True)
                return
            if flush == "SYNC_FLUSH":
                self.warm(s, self.sync_warm_frames)
                self.phase(s, "sync_flush", lambda: self.send(s, self.sync_frames))
                return
            self.phase(s, "startup", lambda: Run(s.startup_s))
            time.sleep(a.idle_seconds)
            self.phase(s, "idle_rss", lambda: Run(status_kib(s.pid, "VmRSS") / 1024))
            self.warm(s, self.warm_frames)
            self.phase(s, "send", lambda: self.send(s, self.send_frames))
            if kind == NO_STORE:  # nothing stored: no backlog to pull, no message to wake a long poll with
                self.java_rows(s)
                return
            self.phase(s, "backlog", lambda: self.send(s, self.backlog_frames))
            self.phase(s, "pull", lambda: self.pull(s))
            wake: dict[str, float] = {}

            def wake_p(q: str) -> Run:
                if not wake:
                    deltas = asyncio.run(wakeups(s.broker, "BenchWake", a.wakeups, a.phase_timeout))
                    wake["p50"], wake["p99"] = p50_p99(deltas)
                return Run(wake[q])

            self.phase(s, "wakeup_p50", lambda: wake_p("p50"))
            self.phase(s, "wakeup_p99", lambda: wake_p("p99"))
            self.java_rows(s)
            if not a.no_java:
                self.phase(s, "java_consume", lambda: self.java_consume(s))
        finally:
            s.stop()
            _live.discard(s)
            shutil.rmtree(workdir, ignore_errors=True)

    def java_rows(self, s: Session) -> None:
        if not self.args.no_java:
            self.phase(s, "java_sync", lambda: self.java(s, "sync"))
            self.phase(s, "java_async", lambda: self.java(s, "async"))
            if s.kind != NO_STORE:  # a batch is not a plain send: the no-store broker would store it
                self.phase(s, "java_batch", lambda: self.java(s, "batch"))


def _unit(key: str) -> str:
    return next(w.unit for w in WORKLOADS if w.key == key)


# ------------------------------------------------------------------------------------------------ report
def _fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "msg/s":
        return f"{v:,.0f}"
    if unit == "MiB":
        return f"{v:,.0f}"
    return f"{v:,.3f}"


def summary(results: Results, brokers: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for w in WORKLOADS:
        row: dict[str, Any] = {"label": w.label, "unit": w.unit}
        for b in brokers:
            runs = results.runs.get(w.key, {}).get(b, [])
            cpus = [c for r in runs if (c := r.cpu_per_10k) is not None]
            hwms = [r.hwm_mib for r in runs if r.hwm_mib is not None]
            row[b] = {
                **broker_cell(runs),
                "cpu_s_per_10k_median": median(cpus),
                "cpu_s_per_10k_runs": cpus,
                "broker_cores_median": median([r.broker_cores for r in runs if r.broker_cores is not None]),
                "peak_rss_mib_max": max(hwms) if hwms else None,
            }
        b = cell(row, THEIRS, "median")
        row["ratio"] = ratio(cell(row, OURS, "median"), b)
        row["cpu_ratio"] = ratio(*(cell(row, k, "cpu_s_per_10k_median") for k in (OURS, THEIRS)))
        row["no_store_ratio"] = ratio(cell(row, NO_STORE, "median"), b)
        out[w.key] = row
    return out


def print_table(summ: dict[str, Any], brokers: tuple[str, ...]) -> None:
    print()
    print(
        f"{'workload (1 KiB messages)':<38}{'unit':>6}{'rmq_core':>11}{'Apache':>11}{'ratio':>7}"
        f"{'CPU s/10k r':>13}{'CPU s/10k A':>13}{'CPU ratio':>10}{'cores r/A':>13}{'HWM MiB r/A':>13}"
    )
    for w in WORKLOADS:
        row = summ[w.key]
        rt = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
        cr = "-" if row["cpu_ratio"] is None else f"{row['cpu_ratio']:.2f}"
        ca, cb = (cell(row, b, "cpu_s_per_10k_median") for b in ("rmq_core", "apache"))
        ha, hb = (cell(row, b, "peak_rss_mib_max") for b in ("rmq_core", "apache"))
        ka, kb = (cell(row, b, "broker_cores_median") for b in ("rmq_core", "apache"))
        cores = "-" if ka is None and kb is None else f"{ka or 0:.2f} / {kb or 0:.2f}"
        print(
            f"{w.label:<38}{w.unit:>6}{_fmt(cell(row, 'rmq_core', 'median'), w.unit):>11}"
            f"{_fmt(cell(row, 'apache', 'median'), w.unit):>11}{rt:>7}"
            f"{'-' if ca is None else f'{ca:.3f}':>13}{'-' if cb is None else f'{cb:.3f}':>13}{cr:>10}"
            f"{cores:>13}{('-' if ha is None else f'{ha:.0f}') + ' / ' + ('-' if hb is None else f'{hb:.0f}'):>13}"
        )
    print("ratio: rmq_core / Apache (medians); for ms, MiB and s rows lower is better. CPU: the broker process's")
    print("utime+stime per 10,000 messages over the timed part (Java rows: over the whole program, per send it made,")
    print("warm-up included, or per message consumed); cores: that CPU per wall-clock second (lean runs); HWM: the")
    print("broker's peak RSS (VmHWM), highest run. On a loaded machine a one-thread broker gets a smaller share of")
    print("the cores than a many-thread one: read msg/s beside the cores and CPU columns.")
    print()
    if NO_STORE in brokers:
        print()
        print("ceiling (--ceiling): rmq_core without its store, the same workloads in the same rounds")
        print(f"{'workload':<38}{'no store':>11}{'/ Apache':>10}{'rmq_core / no store':>21}   every run")
        for w in WORKLOADS:
            row = summ[w.key]
            c, a = cell(row, NO_STORE, "median"), cell(row, "rmq_core", "median")
            if c is None:
                continue
            rt = "-" if row["no_store_ratio"] is None else f"{row['no_store_ratio']:.2f}"
            share = "-" if a is None or not c else f"{a / c:.2f}"
            every = ", ".join(_fmt(v, w.unit) for v in cell(row, NO_STORE, "runs") or [])
            print(f"{w.label:<38}{_fmt(c, w.unit):>11}{rt:>10}{share:>21}   {every}")
    print()
    compare_report.print_every_run(summ, WORKLOADS, brokers, _fmt, _cpu_runs)
    compare_report.print_round_ratios(
        summ,
        WORKLOADS,
        brokers,
        [
            "per-round ratios (rmq_core / Apache of the runs of the same round, which ran back to back: the slow",
            "drift of a shared machine's load cancels), and their median:",
        ],
    )


def _cpu_runs(row: dict[str, Any], broker: str) -> str:
    cpus = cell(row, broker, "cpu_s_per_10k_runs") or []
    return " [CPU " + ", ".join(f"{c:.3f}" for c in cpus) + "]" if cpus else ""


# ------------------------------------------------------------------------------------------------ driver
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=100_000, help="lean sends before the timed parts of a session")
    p.add_argument("--messages", type=int, default=100_000, help="lean sends timed")
    p.add_argument("--backlog", type=int, default=100_000, help="messages of the backlog fill (then pulled)")
    p.add_argument("--sync-warmup", type=int, default=20_000, help="warm-up sends of a SYNC_FLUSH session")
    p.add_argument("--sync-messages", type=int, default=20_000, help="timed sends of a SYNC_FLUSH session")
    p.add_argument("--java-messages", type=int, default=20_000, help="sends of each Java producer run")
    p.add_argument("--java-threads", type=int, default=4, help="threads of the sync Java producer")
    p.add_argument("--java-batch", type=int, default=32, help="messages per batch of the Java batch producer")
    p.add_argument(
        "--java-batch-messages", type=int, default=100_000, help="messages of the batch run (and as many to warm up)"
    )
    p.add_argument(
        "--java-warmup",
        type=int,
        default=20_000,
        help="untimed sends each Java producer run makes first, the same way (its JVM's JIT; 0: a cold client)",
    )
    p.add_argument("--window", type=int, default=128, help="requests in flight (lean sender, async Java producer)")
    p.add_argument("--size", type=int, default=1024, help="message body size")
    p.add_argument("--wakeups", type=int, default=1000, help="long-poll wake-up rounds")
    p.add_argument("--idle-seconds", type=float, default=1.0, help="idle time before the idle RSS is read")
    p.add_argument("--brokers", default=",".join(BROKERS), help="which brokers (rmq_core,apache)")
    p.add_argument("--no-java", action="store_true", help="skip the Java client runs (producer and consumer)")
    p.add_argument("--ceiling", action="store_true", help=f"add {NO_STORE} (its store's put a counter) to every round")
    p.add_argument("--quick", action="store_true", help="a smoke run of about a minute (1 round, small counts)")
    p.add_argument("--phase-timeout", type=float, default=300.0, help="seconds any one timed part may take")
    p.add_argument("--start-timeout", type=float, default=90.0)
    p.add_argument("--json", default=None, help="write every run and the summary here")
    args = p.parse_args(argv)
    if args.quick:
        args.rounds, args.warmup, args.messages, args.backlog = 1, 10_000, 20_000, 20_000
        args.sync_warmup, args.sync_messages, args.java_messages, args.wakeups = 2_000, 5_000, 5_000, 200
        args.java_warmup = min(args.java_warmup, 5_000)
        args.java_batch_messages = 20_000
        args.idle_seconds = 0.5
    args.brokers = tuple(b.strip() for b in args.brokers.split(",") if b.strip())
    if not args.brokers or any(b not in BROKERS for b in args.brokers):
        p.error(f"--brokers: a comma-separated subset of {','.join(BROKERS)}")
    if args.ceiling:
        args.brokers += (NO_STORE,)
    if args.sync_warmup > args.warmup:
        p.error("--sync-warmup cannot exceed --warmup (the SYNC_FLUSH warm-up reuses the warm-up frames)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also when started with SIGINT ignored (a `cmd &`)
    atexit.register(_stop_all)
    if "apache" in args.brokers:
        server_classpath()  # compat/apache/build.sh: fetched once, before any clock
    results = Results()
    bench = Bench(args, results)
    root = tempfile.mkdtemp(prefix="rmq-bench-vs-apache-")
    conf = " ".join(f"{k}={v}" for k, v in BROKER_CONF.items())
    print(f"broker.conf for both (plus ports, namesrvAddr, storePathRootDir, flushDiskType): {conf}", flush=True)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}", flush=True)
    t0 = time.monotonic()
    try:
        for rnd, kind in rounds_order(args.rounds, args.brokers):
            for flush in ("ASYNC_FLUSH",) if kind == NO_STORE else ("ASYNC_FLUSH", "SYNC_FLUSH"):
                bench.session(kind, flush, rnd, root)
    finally:
        _stop_all()
        shutil.rmtree(root, ignore_errors=True)
    print(f"\n{args.rounds} round(s) in {time.monotonic() - t0:.0f} s, load average now {os.getloadavg()[0]:.2f}")
    summ = summary(results, args.brokers)
    print_table(summ, args.brokers)
    for e in results.errors:
        print(f"FAILED: {e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "args": vars(args),
                    "broker_conf": BROKER_CONF,
                    "summary": summ,
                    "runs": {k: {b: [vars(r) for r in rs] for b, rs in v.items()} for k, v in results.runs.items()},
                    "errors": results.errors,
                },
                f,
                indent=2,
                default=str,
            )
    return 1 if results.errors else 0


if __name__ == "__main__":
    sys.exit(main())
