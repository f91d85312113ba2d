"""RocketMQ 5 clients over gRPC: rmq_core's broker serving MessagingService itself (``rmq-core broker`` with
grpcPort, one process) against Apache RocketMQ 5.3.3's broker with the proxy in its JVM (``mqbroker
--enable-proxy``: local mode, plus its name server), the same client programs against both (issue 30, "Measure").

    .venv/bin/python benches/bench_grpc.py [--rounds 1] [--messages 6000] [--brokers rmq_core,apache] [--json out]

(``--brokers rmq_core,apache,rmq_core_aio`` adds rmq_core with its gRPC port on grpc.aio instead of the native front.)

The clients are RocketMQ's 5.x Python SDK (rocketmq-python-client 5.1.2 in ``.venv-rmq5``), each a separate process
(benches/grpc_sdk_client.py), started and made ready (the SDK's startup) before the clock starts, then released
together. Per session (a fresh store, the broker started, one round alternating which broker goes first):

  startup        broker process spawned → the first QueryRoute answered by the service over gRPC (raw grpcio)
  processes      the processes serving (rmq_core: the broker; Apache: name server + broker-with-proxy JVM)
  idle RSS       their summed VmRSS 1 s after start-up; peak RSS: summed VmHWM at the end
  warm-up        --warmup sends and their receive + ack by SimpleConsumers, untimed (Apache's JIT)
  send           --messages 1 KiB sends from --senders processes, --window async sends in flight each: msg/s
                 (all answered / first send → last answer), p50/p99 of send → answer
  simple         that backlog received + acked by --consumers SimpleConsumer processes (2 receive loops each, receive
                 32, acks on a pool of threads): msg/s first receipt → last, and the commit-log bytes the broker
                 wrote during it per consumed message (the POP bookkeeping: CK and ACK records bound for the revive
                 log, through the timer wheel; nothing else writes then: receives here ask for an invisible time of
                 CONSUME_INVISIBLE_S, so no earlier phase's CK falls due and is re-put during a later one)
  push           the same backlog by --consumers PushConsumer processes (another group): msg/s, bytes written
  e2e 100/s      one producer paced at 100 msg/s for --e2e-seconds, one SimpleConsumer: p50/p99 of the time from
                 send to receipt (the send time travels in a user property; same machine, same clock)
  e2e saturated  --senders producers flat out and --consumers SimpleConsumers at once: the consumers' msg/s and
                 their send → receipt p50/p99
  redelivery     --redeliver messages received with invisible 10 s (Apache's minimum) and not acked: each one's
                 second delivery − (first receipt + 10 s): p50/p99 (ms; negative = early)

For each timed part the broker side's CPU (utime + stime of its processes from /proc, before/after) and the clients'
(each client process's own CPU after its go) give the cores each side used: on this 2-core machine the clients
and the broker share the cores, so read msg/s beside both (clients near their share of the cores: the figure is
client-bound). The table: medians per broker, ratio rmq_core / Apache, every run; per-round ratios.
Bounded: every phase has a timeout, processes are stopped in ``finally`` and at exit, temporary stores removed.
"""

from __future__ import annotations

import argparse
import atexit
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
from dataclasses import dataclass, field
from typing import Any

import compare_report
from bench_vs_apache import cpu_seconds, status_kib
from compare_report import OURS, THEIRS, Workload, broker_cell, cell, median, ratio, rounds_order
from lean_clients import p50_p99

from rmq_core.remoting.body.kv_table import KVTable
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import CreateTopicRequestHeader, encode_header
from rmq_core.remoting.remoting_client import BlockingRemotingClient

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from support.apache_proxy import ApacheProxy  # noqa: E402
from support.apache_rocketmq import free_broker_port, free_port  # noqa: E402

CLIENT = os.path.join(ROOT, "benches", "grpc_sdk_client.py")
SDK_PYTHON = os.environ.get("RMQ_CORE_ROCKETMQ5_PYTHON") or os.path.join(ROOT, ".venv-rmq5", "bin", "python")
BROKERS = ("rmq_core", "apache")
# also measurable: rmq_core with its gRPC port on grpc.aio instead of the native front (the transport's own cost)
KINDS = (*BROKERS, "rmq_core_aio")
CLUSTER, BROKER_NAME, QUEUES = "DefaultCluster", "bench-grpc", 4
MIN_INVISIBLE_S = 10  # Apache's minInvisibleTimeMillsForRecv
CONSUME_INVISIBLE_S = 600  # the Simple consumers' invisible time: beyond a session (see "simple" above)
SERVICE = "apache.rocketmq.v2.MessagingService"

# both brokers' settings (Apache's names; rmq_core reads the same broker.conf)
BROKER_CONF = {
    "brokerClusterName": CLUSTER,
    "brokerName": BROKER_NAME,
    "brokerId": "0",
    "brokerIP1": "127.0.0.1",
    "brokerRole": "ASYNC_MASTER",
    "flushDiskType": "ASYNC_FLUSH",
    "mappedFileSizeCommitLog": str(256 * 1024 * 1024),
    "defaultTopicQueueNums": str(QUEUES),
    "autoCreateTopicEnable": "true",
    "autoCreateSubscriptionGroup": "true",
    "diskMaxUsedSpaceRatio": "95",
}


# ------------------------------------------------------------------------------------------------ processes
def first_query_route(endpoint: str, deadline: float, alive: Callable[[], bool]) -> float:
    """Poll QueryRoute over raw grpcio until the service answers it (a topic that does not exist: TOPIC_NOT_FOUND,
    which Apache's proxy answers after asking its name server; TBW102 is a system topic to it); the monotonic time."""
    return query_route(endpoint, "BenchGrpcNoSuchTopic", deadline, alive, found_only=False)


def query_route(endpoint: str, topic: str, deadline: float, alive: Callable[[], bool], found_only: bool) -> float:
    """Poll QueryRoute(topic) until answered OK (or, unless ``found_only``, TOPIC_NOT_FOUND); the monotonic time."""
    import grpc

    from rmq_core.broker.grpc.messaging_v2 import V2, Code

    accepted = (Code.OK,) if found_only else (Code.OK, Code.TOPIC_NOT_FOUND)
    request = V2.QueryRouteRequest()
    request.topic.name = topic
    request.endpoints.scheme = 1
    host, port = endpoint.rsplit(":", 1)
    request.endpoints.addresses.add(host=host, port=int(port))
    metadata = (
        ("x-mq-client-id", f"bench-grpc-{os.getpid()}"),
        ("x-mq-language", "PYTHON"),
        ("x-mq-protocol", "v2"),
        ("x-mq-client-version", "5.1.2"),
        ("x-mq-request-id", "0"),
        ("x-mq-date-time", time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())),
    )
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError("the broker exited while starting")
        with grpc.insecure_channel(endpoint) as channel:
            call = channel.unary_unary(
                f"/{SERVICE}/QueryRoute",
                request_serializer=V2.QueryRouteRequest.SerializeToString,
                response_deserializer=V2.QueryRouteResponse.FromString,
            )
            try:
                if call(request, metadata=metadata, timeout=2).status.code in accepted:
                    return time.monotonic()
            except grpc.RpcError:
                pass
        time.sleep(0.01)
    raise TimeoutError(f"no QueryRoute({topic}) answered {'OK' if found_only else ''} at {endpoint}")


def remoting(addr: str, code: int, fields: dict[str, Any] | None = None) -> RemotingCommand:
    with BlockingRemotingClient() as c:
        r = c.invoke_sync(addr, RemotingCommand.request(code, fields or {}), timeout=5.0)
    if r.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"request {code} to {addr}: {r.code} {r.remark}")
    return r


def create_topic(s: Session, topic: str) -> None:
    """Create ``topic`` on the broker, then wait until gRPC routes it (Apache's proxy asks its name server, which
    learns the topic from the broker's next registration): an SDK client started before would fail every send."""
    h = CreateTopicRequestHeader(topic, "TBW102", QUEUES, QUEUES, 6, "SINGLE_TAG", 0, False)
    remoting(s.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, dict(encode_header(h)))
    query_route(s.endpoint, topic, time.monotonic() + 60, lambda: True, found_only=True)


def commit_log_max_offset(addr: str) -> int:
    body = remoting(addr, RequestCode.GET_BROKER_RUNTIME_INFO).body or b"{}"
    return int(KVTable.decode(body).table["commitLogMaxOffset"])


def broker_ports() -> tuple[int, int]:
    """(remoting port L, gRPC port): L-2, L and L+1 free (the VIP and HA listeners), the gRPC port none of them."""
    port = free_broker_port()
    grpc_port = free_port()
    while grpc_port in range(port - 2, port + 2):
        grpc_port = free_port()
    return port, grpc_port


class Session:
    """One broker side over a fresh store: ``start()`` times its start-up to the first accepted gRPC request."""

    kind = ""

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.startup_s = 0.0

    broker_addr = ""  # remoting host:port (topics, runtime info)
    endpoint = ""  # gRPC host:port

    @property
    def pids(self) -> list[int]:
        raise NotImplementedError

    def start(self, timeout: float) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def cpu(self) -> float:
        return sum(cpu_seconds(p) for p in self.pids)

    def memory_mib(self, key: str) -> float:
        return sum(status_kib(p, key) for p in self.pids) / 1024


class RmqCoreSession(Session):
    kind = "rmq_core"
    native_front = True  # plaintext gRPC on the extension's front (the default); False: on grpc.aio

    def __init__(self, workdir: str) -> None:
        super().__init__(workdir)
        self.port, self.grpc_port = broker_ports()
        self.broker_addr, self.endpoint = f"127.0.0.1:{self.port}", f"127.0.0.1:{self.grpc_port}"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pids(self) -> list[int]:
        assert self.proc is not None
        return [self.proc.pid]

    def start(self, timeout: float) -> None:
        conf = {
            **BROKER_CONF,
            "listenPort": str(self.port),
            "grpcPort": str(self.grpc_port),
            "storePathRootDir": os.path.join(self.workdir, "store"),
        }
        path = os.path.join(self.workdir, "broker.conf")
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(f"{k}={v}\n" for k, v in conf.items())
        t0 = time.monotonic()
        with open(os.path.join(self.workdir, "broker.log"), "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", BROKER_MAIN, str(self.native_front), "broker", "-c", path],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        proc = self.proc
        self.startup_s = first_query_route(self.endpoint, t0 + timeout, lambda: proc.poll() is None) - t0

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


class RmqCoreAioSession(RmqCoreSession):
    kind = "rmq_core_aio"
    native_front = False


# ``rmq-core broker`` with the gRPC transport of argv[1] (grpc_server.NATIVE_FRONT, read at each start)
BROKER_MAIN = (
    "import sys; from rmq_core.broker.grpc import grpc_server; grpc_server.NATIVE_FRONT = sys.argv[1] == 'True'; "
    "from rmq_core.cli import main; sys.exit(main(sys.argv[2:]))"
)


class ApacheSession(Session):
    """Apache 5.3.3's name server and ``ProxyStartup -pm local`` (what ``mqbroker --enable-proxy`` runs: the broker
    and the gRPC proxy in one JVM), tests/support/apache_proxy.py; its start-up timed like rmq_core's."""

    kind = "apache"

    def __init__(self, workdir: str) -> None:
        super().__init__(workdir)
        self.server = ApacheProxy(workdir, broker_name=BROKER_NAME, extra_broker_conf=BROKER_CONF)

    @property
    def pids(self) -> list[int]:
        s = self.server
        assert s.namesrv_proc is not None and s.broker_proc is not None
        return [s.namesrv_proc.pid, s.broker_proc.pid]

    def start(self, timeout: float) -> None:
        s = self.server
        s.start_namesrv(timeout)  # the jars (compat/apache/build.sh 5.3.3), the ports, the name server
        _, br_conf = s.write_files()
        proxy_conf = s.write_proxy_conf()
        self.broker_addr, self.endpoint = s.broker_addr, s.grpc_endpoint
        t0 = time.monotonic()
        proc = s.broker_proc = s._spawn_proxy(["-pm", "local", "-bc", br_conf, "-pc", proxy_conf])
        try:
            self.startup_s = first_query_route(self.endpoint, t0 + timeout, lambda: proc.poll() is None) - t0
        except BaseException:
            print(s.tail("broker")[-3000:], flush=True)
            raise

    def stop(self) -> None:
        self.server.stop()


SESSIONS: dict[str, Callable[[str], Session]] = {
    "rmq_core": RmqCoreSession,
    "apache": ApacheSession,
    "rmq_core_aio": RmqCoreAioSession,
}


_live: set[Session] = set()
_clients: set[subprocess.Popen[str]] = set()


def _stop_all() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the clean-up short
    for p in list(_clients):
        if p.poll() is None:
            p.kill()
            p.wait(10)
        _clients.discard(p)
    for s in list(_live):
        try:
            s.stop()
        except Exception:
            traceback.print_exc()
        _live.discard(s)


def _on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


# ------------------------------------------------------------------------------------------------ clients
@dataclass
class ClientRun:
    """What a group of client processes of one role reported, merged."""

    count: int = 0
    unique: int = 0
    failed: int = 0
    receives: int = 0  # SimpleConsumer receive calls that brought messages
    first: float = 0.0
    last: float = 0.0
    latencies_us: list[int] = field(default_factory=list)
    cpu_s: float = 0.0
    startup_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def wall_s(self) -> float:
        return max(self.last - self.first, 1e-9)

    @property
    def rate(self) -> float:
        return self.count / self.wall_s

    def p50_p99_ms(self) -> tuple[float, float]:
        if len(self.latencies_us) < 2:
            return float("nan"), float("nan")
        a, b = p50_p99(self.latencies_us)
        return a / 1000, b / 1000


class Clients:
    """Client processes of one role: ``ready()`` waits for each one's startup, ``go()`` releases them together,
    ``result()`` waits for their results."""

    def __init__(self, endpoint: str, role: str, args: list[dict[str, Any]], timeout: float) -> None:
        self.role, self.timeout = role, timeout
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.procs = []
        self.stderr: list[Any] = []
        for a in args:
            err = tempfile.TemporaryFile()  # noqa: SIM115 (closed in result(); a dying client's traceback)
            self.stderr.append(err)
            p = subprocess.Popen(
                [SDK_PYTHON, CLIENT, endpoint, role, json.dumps(a)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=env,
            )
            _clients.add(p)
            self.procs.append(p)
        self.startup_s: list[float] = []

    def ready(self) -> Clients:
        for p in self.procs:
            assert p.stdout is not None
            line = p.stdout.readline()
            if not line.startswith("READY "):
                raise RuntimeError(f"{self.role} client did not start (exit {p.poll()}): {line!r}")
            self.startup_s.append(float(line.split()[1]))
        return self

    def go(self) -> Clients:
        for p in self.procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        return self

    def result(self) -> ClientRun:
        out = ClientRun(startup_s=self.startup_s)
        firsts, lasts = [], []
        for p, err in zip(self.procs, self.stderr):
            try:
                stdout, _ = p.communicate(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
                raise RuntimeError(f"{self.role} client overran {self.timeout} s") from None
            _clients.discard(p)  # ended (an interrupted wait leaves it to _stop_all)
            lines = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
            if not lines:
                err.seek(0)
                tail = err.read()[-1500:].decode(errors="replace")
                raise RuntimeError(f"{self.role} client gave no result (exit {p.returncode}): {stdout[-500:]!r} {tail}")
            r = json.loads(lines[-1][len("RESULT ") :])
            out.count += r["count"]
            out.unique += r.get("unique", r["count"])
            out.failed += r["failed"]
            out.receives += r.get("receives", 0)
            out.latencies_us += r["latencies_us"]
            out.cpu_s += r["cpu_s"]
            out.errors += r.get("errors", [])
            if r.get("first"):
                firsts.append(r["first"])
            if r.get("last"):
                lasts.append(r["last"])
        for err in self.stderr:
            err.close()
        out.first, out.last = (min(firsts), max(lasts)) if firsts and lasts else (0.0, 0.0)
        return out


def split(total: int, parts: int) -> list[int]:
    return [total // parts + (i < total % parts) for i in range(parts)]


# ------------------------------------------------------------------------------------------------ workloads
WORKLOADS = [
    Workload("send", "send (async, SDK)", "msg/s", True),
    Workload("send_p50", "send latency p50", "ms", False),
    Workload("send_p99", "send latency p99", "ms", False),
    Workload("simple", "receive+ack, SimpleConsumer", "msg/s", True),
    Workload("simple_bytes", "commit log B / consumed msg (simple)", "B", False),
    Workload("push", "receive+ack, PushConsumer", "msg/s", True),
    Workload("push_bytes", "commit log B / consumed msg (push)", "B", False),
    Workload("e2e_rate_p50", "e2e p50 at 100 msg/s", "ms", False),
    Workload("e2e_rate_p99", "e2e p99 at 100 msg/s", "ms", False),
    Workload("sat_consume", "saturated: consumed", "msg/s", True),
    Workload("sat_p50", "saturated: e2e p50", "ms", False),
    Workload("sat_p99", "saturated: e2e p99", "ms", False),
    Workload("redeliver_p50", "redelivery − due, p50", "ms", False),
    Workload("redeliver_p99", "redelivery − due, p99", "ms", False),
    Workload("startup", "start → first RPC answered", "s", False),
    Workload("processes", "processes", "", False),
    Workload("idle_rss", "idle RSS (sum)", "MiB", False),
    Workload("peak_rss", "peak RSS (VmHWM sum)", "MiB", False),
]


@dataclass
class Run:
    value: float
    failed: int = 0
    note: str = ""
    broker_cores: float | None = None  # the broker side's CPU s per wall-clock s over the active part
    client_cores: float | None = None  # the clients' CPU s per wall-clock s (their own accounting)
    broker_cpu_per_10k: float | None = None  # the broker side's CPU s per 10,000 messages


Results = compare_report.Results[Run]


class Bench:
    def __init__(self, args: argparse.Namespace, results: Results) -> None:
        self.args, self.results = args, results

    def record(self, s: Session, key: str, run: Run) -> None:
        self.results.add(key, s.kind, run)
        unit = next(w.unit for w in WORKLOADS if w.key == key)
        cores = ""
        if run.broker_cores is not None:
            cores = f", cores broker {run.broker_cores:.2f} / clients {run.client_cores or 0:.2f}"
            cores += f", broker CPU {run.broker_cpu_per_10k:.2f} s/10k"
        fail = f", {run.failed} FAILED" if run.failed else ""
        print(f"   {key:<14} {run.value:>12,.3f} {unit}{cores}{fail}{run.note}", flush=True)

    def timed(self, s: Session, key: str, fn: Callable[[], None]) -> None:
        """One phase; an error is recorded and the session goes on."""
        try:
            fn()
        except KeyboardInterrupt:
            raise
        except BaseException as e:
            msg = f"{s.kind} {key}: {type(e).__name__}: {e}"
            self.results.errors.append(msg)
            print(f"   FAILED {msg}", flush=True)
            traceback.print_exc(limit=4)

    def clients(self, s: Session, role: str, args: list[dict[str, Any]]) -> Clients:
        return Clients(s.endpoint, role, args, self.args.phase_timeout + 60)

    @staticmethod
    def load(s: Session, cpu0: float, client_cpu_s: float, wall_s: float, messages: int) -> dict[str, float]:
        """The broker side's and the clients' cores over the active part (first → last message: the clients'
        start and a consumer's closing empty long poll cost next to no CPU) and the broker's CPU per 10k."""
        cpu = s.cpu() - cpu0
        return {
            "broker_cores": cpu / wall_s,
            "client_cores": client_cpu_s / wall_s,
            "broker_cpu_per_10k": cpu / max(messages, 1) * 10_000,
        }

    # --- phases ----------------------------------------------------------------------------------------------
    def send(self, s: Session, topic: str, total: int, record: bool) -> ClientRun:
        a = self.args
        counts = split(total, a.senders)
        procs = [{"topic": topic, "count": n, "window": a.window, "size": a.size} for n in counts]
        c = self.clients(s, "send", procs).ready()
        cpu0 = s.cpu()
        run = c.go().result()
        if record:
            note = f" ({run.count} of {total} answered; {run.errors[:1]})" if run.failed else ""
            load = self.load(s, cpu0, run.cpu_s, run.wall_s, run.count)
            self.record(s, "send", Run(run.rate, failed=run.failed, note=note, **load))
            p50, p99 = run.p50_p99_ms()
            self.record(s, "send_p50", Run(p50))
            self.record(s, "send_p99", Run(p99))
        return run

    def warm(self, s: Session, topic: str, n: int) -> None:
        """Untimed sends, then those received + acked by SimpleConsumers (Apache's JIT compiles both paths)."""
        sent = self.send(s, topic, n, record=False)
        if sent.failed:
            raise RuntimeError(f"{sent.failed} of {n} warm-up sends failed: {sent.errors[:1]}")
        got = self.consumers(s, "simple", topic, "bench_grpc_warm").ready().go().result()
        print(f"   warm-up      {sent.count:,} sent at {sent.rate:,.0f} msg/s, {got.count:,} received", flush=True)

    def consumers(self, s: Session, role: str, topic: str, group: str) -> Clients:
        a = self.args
        procs = [
            {
                "topic": topic,
                "group": group,
                "threads": a.receive_threads,
                "timeout_s": a.phase_timeout,
                "invisible_s": CONSUME_INVISIBLE_S,
            }
            for _ in range(a.consumers)
        ]
        return self.clients(s, role, procs)

    def consume(self, s: Session, role: str, topic: str, group: str, expect: int) -> None:
        c = self.consumers(s, role, topic, group).ready()
        cl0 = commit_log_max_offset(s.broker_addr)
        cpu0 = s.cpu()
        run = c.go().result()
        load = self.load(s, cpu0, run.cpu_s, run.wall_s, run.count)
        wrote = commit_log_max_offset(s.broker_addr) - cl0
        missing = expect - run.unique
        note = f" ({run.unique} of {expect} distinct, {run.count} deliveries)" if missing or run.failed else ""
        if run.receives:
            note += f" ({run.count / run.receives:.1f} messages per receive)"
        self.record(s, role, Run(run.rate, failed=max(missing, 0) + run.failed, note=note, **load))
        self.record(s, f"{role}_bytes", Run(wrote / max(run.count, 1)))

    def e2e_rate(self, s: Session) -> None:
        a = self.args
        n = int(a.e2e_rate * a.e2e_seconds)
        topic, group = "BenchGrpcE2E", "bench_grpc_e2e"
        create_topic(s, topic)
        consumer = self.clients(s, "simple", [{"topic": topic, "group": group, "expect": n, "threads": 1}])
        producer = self.clients(s, "send", [{"topic": topic, "count": n, "rate": a.e2e_rate, "size": a.size}])
        consumer.ready(), producer.ready()
        consumer.go(), producer.go()
        sent, got = producer.result(), consumer.result()
        p50, p99 = got.p50_p99_ms()
        failed = sent.failed + got.failed + max(n - got.unique, 0)
        self.record(s, "e2e_rate_p50", Run(p50, failed=failed))
        self.record(s, "e2e_rate_p99", Run(p99))

    def saturated(self, s: Session) -> None:
        a = self.args
        topic, group = "BenchGrpcSat", "bench_grpc_sat"
        create_topic(s, topic)
        procs = [{"topic": topic, "group": group, "threads": a.receive_threads} for _ in range(a.consumers)]
        consumers = self.clients(s, "simple", procs)
        senders = self.clients(
            s,
            "send",
            [{"topic": topic, "count": n, "window": a.window, "size": a.size} for n in split(a.messages, a.senders)],
        )
        consumers.ready(), senders.ready()
        cpu0 = s.cpu()
        consumers.go(), senders.go()
        sent, got = senders.result(), consumers.result()
        wall = max(got.last, sent.last) - min(got.first, sent.first)
        load = self.load(s, cpu0, sent.cpu_s + got.cpu_s, wall, got.count)
        missing = max(sent.count - got.unique, 0)
        note = f" (sent {sent.rate:,.0f} msg/s)"
        self.record(s, "sat_consume", Run(got.rate, failed=missing + sent.failed, note=note, **load))
        p50, p99 = got.p50_p99_ms()
        self.record(s, "sat_p50", Run(p50))
        self.record(s, "sat_p99", Run(p99))

    def redelivery(self, s: Session) -> None:
        a = self.args
        topic, group = "BenchGrpcRedeliver", "bench_grpc_redeliver"
        create_topic(s, topic)
        self.send(s, topic, a.redeliver, record=False)
        c = self.clients(
            s,
            "redeliver",
            [{"topic": topic, "group": group, "expect": a.redeliver, "invisible_s": MIN_INVISIBLE_S, "timeout_s": 120}],
        )
        run = c.ready().go().result()
        p50, p99 = run.p50_p99_ms()
        note = f" (max {max(run.latencies_us, default=0) / 1000:,.0f} ms)"
        self.record(s, "redeliver_p50", Run(p50, failed=run.failed, note=note))
        self.record(s, "redeliver_p99", Run(p99))

    # --- a session -------------------------------------------------------------------------------------------
    def session(self, kind: str, rnd: int, root: str) -> None:
        a = self.args
        workdir = tempfile.mkdtemp(prefix=f"r{rnd}-{kind}-", dir=root)
        s = SESSIONS[kind](workdir)
        print(f"-- round {rnd}: {kind}, store {workdir}, load average {os.getloadavg()[0]:.2f}", flush=True)
        _live.add(s)
        try:
            try:
                s.start(a.start_timeout)
            except KeyboardInterrupt:
                raise
            except BaseException as e:
                self.results.errors.append(f"{kind} round {rnd}: start: {type(e).__name__}: {e}")
                print(f"   FAILED to start: {e}", flush=True)
                return
            self.record(s, "startup", Run(s.startup_s))
            self.record(s, "processes", Run(len(s.pids)))
            time.sleep(a.idle_seconds)
            self.record(s, "idle_rss", Run(s.memory_mib("VmRSS")))
            topic = "BenchGrpc"
            create_topic(s, topic)
            if a.warmup:
                create_topic(s, "BenchGrpcWarm")
                self.timed(s, "warm-up", lambda: self.warm(s, "BenchGrpcWarm", a.warmup))
            self.timed(s, "send", lambda: self.send(s, topic, a.messages, record=True))
            self.timed(s, "simple", lambda: self.consume(s, "simple", topic, "bench_grpc_simple", a.messages))
            self.timed(s, "push", lambda: self.consume(s, "push", topic, "bench_grpc_push", a.messages))
            self.timed(s, "e2e 100/s", lambda: self.e2e_rate(s))
            self.timed(s, "saturated", lambda: self.saturated(s))
            if a.redeliver:
                self.timed(s, "redelivery", lambda: self.redelivery(s))
            self.record(s, "peak_rss", Run(s.memory_mib("VmHWM")))
        finally:
            s.stop()
            _live.discard(s)
            shutil.rmtree(workdir, ignore_errors=True)


# ------------------------------------------------------------------------------------------------ report
def _fmt(v: float | None, unit: str) -> str:
    if v is None or v != v:
        return "-"
    if unit in ("msg/s", "MiB", "B", ""):
        return f"{v:,.0f}"
    if unit == "ms":
        return f"{v:,.1f}"
    return f"{v:,.2f}"


def summary(results: Results, brokers: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for w in WORKLOADS:
        row: dict[str, Any] = {"label": w.label, "unit": w.unit}
        for b in brokers:
            runs = results.runs.get(w.key, {}).get(b, [])
            row[b] = {
                **broker_cell(runs),
                "broker_cores_median": median([r.broker_cores for r in runs if r.broker_cores is not None]),
                "client_cores_median": median([r.client_cores for r in runs if r.client_cores is not None]),
                "broker_cpu_per_10k_median": median(
                    [r.broker_cpu_per_10k for r in runs if r.broker_cpu_per_10k is not None]
                ),
            }
        row["ratio"] = ratio(*(cell(row, k, "median") for k in (OURS, THEIRS)))
        out[w.key] = row
    return out


def print_table(summ: dict[str, Any], brokers: tuple[str, ...]) -> None:
    print()
    print(
        f"{'workload (1 KiB bodies)':<38}{'unit':>6}{'rmq_core':>11}{'Apache':>11}{'ratio':>7}"
        f"{'cores b/c r':>13}{'cores b/c A':>13}{'CPU/10k r/A':>14}"
    )
    for w in WORKLOADS:
        row = summ[w.key]
        rt = "-" if row["ratio"] is None else f"{row['ratio']:.2f}"
        cores, per = [], []
        for b in (OURS, THEIRS):
            bc, cc = cell(row, b, "broker_cores_median"), cell(row, b, "client_cores_median")
            cores.append("" if bc is None else f"{bc:.2f}/{cc or 0:.2f}")
            p = cell(row, b, "broker_cpu_per_10k_median")
            per.append("" if p is None else f"{p:.1f}")
        print(
            f"{w.label:<38}{w.unit:>6}{_fmt(cell(row, OURS, 'median'), w.unit):>11}"
            f"{_fmt(cell(row, THEIRS, 'median'), w.unit):>11}{rt:>7}{cores[0]:>13}{cores[1]:>13}"
            f"{'/'.join(per) if any(per) else '':>14}"
        )
    print("ratio: rmq_core / Apache (medians; ms, s, B, MiB rows: lower is better). cores b/c: the broker side's CPU")
    print("seconds per wall-clock second / the client processes' (their own CPU after the go), over first → last")
    print("message; CPU/10k: the broker side's CPU seconds per 10,000 messages; r = rmq_core, A = Apache.")
    print("B / consumed msg: commit-log bytes written while consuming (CK and ACK records, via the timer wheel);")
    print("the timer's later re-put of each CK into the revive log, at its due time, falls outside the phase.")
    print()
    compare_report.print_every_run(summ, WORKLOADS, brokers, _fmt)
    if "rmq_core_aio" in brokers:
        print()
        print("rmq_core on grpc.aio (rmq_core_aio) beside the native front: medians, broker CPU s per 10k messages")
        for w in WORKLOADS:
            row = summ[w.key]
            native, aio = (cell(row, b, "broker_cpu_per_10k_median") for b in ("rmq_core", "rmq_core_aio"))
            per = "" if native is None or aio is None else f"CPU/10k {native:.2f} native / {aio:.2f} grpc.aio"
            print(
                f"  {w.label:<38} {_fmt(cell(row, 'rmq_core', 'median'), w.unit):>10} native"
                f" {_fmt(cell(row, 'rmq_core_aio', 'median'), w.unit):>10} grpc.aio   {per}"
            )
    compare_report.print_round_ratios(
        summ,
        WORKLOADS,
        brokers,
        ["per-round ratios (rmq_core / Apache of the same round, back to back) and their median:"],
    )


# ------------------------------------------------------------------------------------------------ driver
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--messages", type=int, default=6000, help="sends timed (and the backlog consumed)")
    p.add_argument("--warmup", type=int, default=2000, help="untimed sends first (Apache's JIT)")
    p.add_argument("--senders", type=int, default=3, help="producer processes")
    p.add_argument("--consumers", type=int, default=2, help="consumer processes")
    p.add_argument("--receive-threads", type=int, default=2, help="receive loops per SimpleConsumer process")
    p.add_argument("--window", type=int, default=64, help="async sends in flight per producer process")
    p.add_argument("--size", type=int, default=1024, help="message body size")
    p.add_argument("--e2e-rate", type=float, default=100.0, help="msg/s of the paced end-to-end run")
    p.add_argument("--e2e-seconds", type=float, default=8.0)
    p.add_argument("--redeliver", type=int, default=64, help="messages of the redelivery check (0: skip)")
    p.add_argument("--idle-seconds", type=float, default=1.0)
    p.add_argument("--brokers", default=",".join(BROKERS))
    p.add_argument("--tiny", action="store_true", help="a smoke run (benches/test_bench_grpc.py): tiny counts")
    p.add_argument("--phase-timeout", type=float, default=240.0)
    p.add_argument("--start-timeout", type=float, default=120.0)
    p.add_argument("--json", default=None, help="write every run and the summary here")
    args = p.parse_args(argv)
    if args.tiny:
        args.messages, args.warmup, args.senders, args.consumers = 40, 0, 1, 1
        args.e2e_seconds, args.e2e_rate, args.redeliver, args.idle_seconds = 1.0, 20.0, 0, 0.1
    args.brokers = tuple(b.strip() for b in args.brokers.split(",") if b.strip())
    if not args.brokers or any(b not in KINDS for b in args.brokers):
        p.error(f"--brokers: a comma-separated subset of {','.join(KINDS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not os.path.exists(SDK_PYTHON):
        print(f"RocketMQ's 5.x Python SDK venv not found ({SDK_PYTHON}): ./dev setup", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    atexit.register(_stop_all)
    results = Results()
    bench = Bench(args, results)
    root = tempfile.mkdtemp(prefix="rmq-bench-grpc-")
    print(f"broker.conf for both (plus ports, store): {' '.join(f'{k}={v}' for k, v in BROKER_CONF.items())}")
    print(f"clients: {args.senders} producer / {args.consumers} consumer processes ({SDK_PYTHON})")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}", flush=True)
    t0 = time.monotonic()
    try:
        for rnd, kind in rounds_order(args.rounds, args.brokers):
            bench.session(kind, rnd, root)
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
            runs = {k: {b: [vars(r) for r in rs] for b, rs in v.items()} for k, v in results.runs.items()}
            json.dump({"args": vars(args), "summary": summ, "runs": runs, "errors": results.errors}, f, indent=2)
    return 1 if results.errors else 0


if __name__ == "__main__":
    sys.exit(main())
