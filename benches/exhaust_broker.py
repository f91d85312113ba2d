"""Resource exhaustion: `rmq-core broker` in its own process, pushed by clients that hold resources, and its memory
measured throughout; each scenario prints a figure and a verdict.

    .venv/bin/python benches/exhaust_broker.py                      # every scenario at full size
    .venv/bin/python benches/exhaust_broker.py --quick              # the small sizes the test suite uses
    .venv/bin/python benches/exhaust_broker.py --only non_reader    # one scenario

Scenarios (full size; ``--quick`` shrinks them):
- idle: 5,000 idle TCP connections held open, then a send and a pull on another connection;
- slowloris: 500 connections each trickling one valid SEND frame a byte at a time (one byte per connection per
  round, a round per 0.1 s in the quick size), while a probe connection sends and pulls;
- non_reader: a client pipelines 20,000 PULL requests (32 x 1 KiB per answer, ~660 MiB of answers) and never reads
  one; the broker must stop serving it (its write buffer full, then its reading paused) rather than buffer them;
- pipeline: a client writes 100,000 SEND requests without waiting for any answer (far past the 128 in flight of a
  producer) while reading the answers: every one answered SUCCESS, memory bounded;
- group_churn: a consumer group of 200 rmq_core push consumers (one process, one client instance each) on a topic of
  64 queues: all join, half leave, 50 more join; after each step the rebalance must settle with every queue owned by
  exactly one live consumer (checked every 0.25 s until it holds for 1 s);
- disk_full: the broker's store on a 24 MiB tmpfs (a user + mount namespace: ``unshare -rm``) with a ballast file;
  sends until the disk refuses (an error code, not a hang), pulls keep working, the ballast removed, sends succeed
  again, and every acknowledged message is read back intact.

Each scenario records the broker's anonymous RSS (``RssAnon``: the mapped store files excluded) before, its peak
(sampled every 50 ms) and after, and checks it against a stated bound (growth over the baseline); "probe" is a send + pull round trip on a fresh connection during the
load (must succeed). Bounded: every wait has a deadline; the processes are killed on exit. Only 127.0.0.1.
Thread-safety: one RSS sampler thread; everything else on the main thread.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from lean_clients import pull_request, send_request  # noqa: E402
from soak_broker import Child, free_port, rmq_core_cmd  # noqa: E402

from rmq_core.remoting.codes import ResponseCode  # noqa: E402
from rmq_core.remoting.command import RemotingCommand  # noqa: E402

TOPIC = "ExhaustTopic"
MiB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    """The process's anonymous resident memory (``RssAnon``: heap, stacks, buffers). The store's mapped files are
    file-backed pages (``RssFile``), counted by the kernel's page cache, not by this bound: a broker that stored
    100 MiB has 100 MiB more ``VmRSS`` however little memory it holds."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


class RssSampler:
    """Samples a process's RSS every ``interval`` seconds on a thread; ``peak`` is the largest seen."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.pid, self.interval = pid, interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self.peak = max(self.peak, rss_bytes(self.pid))
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self.peak = rss_bytes(self.pid)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def read_frame(sock: socket.socket) -> RemotingCommand:
    def exactly(n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return bytes(out)

    (length,) = struct.unpack(">i", exactly(4))
    return RemotingCommand.decode_frame(exactly(length))


def call(addr: tuple[str, int], cmd: RemotingCommand, timeout: float = 10.0) -> RemotingCommand:
    """One request on a fresh connection, its answer."""
    with socket.create_connection(addr, timeout=timeout) as s:
        s.sendall(cmd.encode())
        return read_frame(s)


def probe(addr: tuple[str, int], timeout: float = 10.0, send: bool = True) -> float:
    """A send (unless ``send`` is false) and a pull of queue 0 from offset 0 on a fresh connection; seconds taken.
    Raises if either fails."""
    t0 = time.monotonic()
    if send:
        r = call(addr, send_request(TOPIC, 0, b"probe", {"TAGS": "P"}), timeout)
        if r.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"probe send answered {r.code} {r.remark}")
    r = call(addr, pull_request(TOPIC, 0, 0, 1, suspend_ms=0), timeout)
    if r.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"probe pull answered {r.code} {r.remark}")
    return time.monotonic() - t0


@dataclass
class Result:
    name: str
    what: str
    rss_before: int = 0
    rss_peak: int = 0
    rss_after: int = 0
    bound: int = 0  # allowed RSS growth over rss_before
    probe_s: float | None = None
    figures: dict[str, object] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures and self.rss_peak - self.rss_before <= self.bound

    def row(self) -> str:
        growth = (self.rss_peak - self.rss_before) / MiB
        probe = f"{self.probe_s * 1000:.0f} ms" if self.probe_s is not None else "-"
        figs = ", ".join(f"{k} {v}" for k, v in self.figures.items())
        verdict = "ok" if self.ok else "FAIL: " + "; ".join(self.failures or [f"RSS grew {growth:.0f} MiB"])
        return (
            f"| {self.name} | {self.what} | {self.rss_before / MiB:.0f} / {self.rss_peak / MiB:.0f} / "
            f"{self.rss_after / MiB:.0f} MiB | +{growth:.0f} MiB (bound {self.bound / MiB:.0f}) | {probe} | {figs} | "
            f"{verdict} |"
        )


class BrokerProcess:
    """`rmq-core broker` (and a name server) in their own processes over ``store``; ``wrap`` prefixes the broker's
    command line (the disk-full scenario runs it inside ``unshare``)."""

    def __init__(self, work: Path, store: Path, wrap: list[str] | None = None, extra: list[str] | None = None) -> None:
        self.work = work
        self.port = free_port()
        self.ns_port = free_port()
        conf = work / "broker.conf"
        lines = [
            "brokerClusterName=ExhaustCluster",
            "brokerName=broker-exhaust",
            "brokerId=0",
            f"listenPort={self.port}",
            f"namesrvAddr=127.0.0.1:{self.ns_port}",
            f"storePathRootDir={store}",
            "mappedFileSizeCommitLog=4194304",
            "mappedFileSizeConsumeQueue=60000",
            "autoCreateTopicEnable=true",
            "autoCreateSubscriptionGroup=true",
            *(extra or []),
        ]
        conf.write_text("\n".join(lines) + "\n")
        cli = rmq_core_cmd()
        self.namesrv = Child([*cli, "namesrv", "--port", str(self.ns_port)], work / "namesrv.log")
        self.broker = Child([*(wrap or []), *cli, "broker", "-c", str(conf)], work / "broker.log")
        self.addr = ("127.0.0.1", self.port)

    def start(self, deadline_s: float = 30.0) -> None:
        """The name server, once it accepts connections the broker (whose first registration would otherwise find
        no name server and wait 30 s for the next), then until the broker serves and the name server lists it."""
        end = time.monotonic() + deadline_s
        self.namesrv.start()
        while not self._accepts(("127.0.0.1", self.ns_port)):
            if time.monotonic() > end or (self.namesrv.proc is not None and self.namesrv.proc.poll() is not None):
                log = (self.work / "namesrv.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the name server did not listen within {deadline_s} s:\n{log}")
            time.sleep(0.05)
        self.broker.start()
        while time.monotonic() < end:
            with contextlib.suppress(OSError, ConnectionError, RuntimeError):
                probe(self.addr, timeout=2.0)
                if self._registered():
                    return
            if self.broker.proc is not None and self.broker.proc.poll() is not None:
                break
            time.sleep(0.05)
        log = (self.work / "broker.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"the broker did not serve and register within {deadline_s} s:\n{log}")

    @staticmethod
    def _accepts(addr: tuple[str, int]) -> bool:
        try:
            socket.create_connection(addr, timeout=1.0).close()
            return True
        except OSError:
            return False

    def _registered(self) -> bool:
        from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI

        with BlockingMQClientAPI(f"127.0.0.1:{self.ns_port}", 2000) as api:
            return "broker-exhaust" in api.master_addrs()

    @property
    def pid(self) -> int:
        """The broker's pid (``unshare`` and ``sh`` exec into it, so it is the child's own)."""
        assert self.broker.proc is not None
        return self.broker.proc.pid

    def stop(self) -> None:
        self.broker.kill()
        self.namesrv.kill()


def _measured(
    b: BrokerProcess, name: str, what: str, bound_mib: int, body: Callable[[Result], None], settle_s: float = 0.5
) -> Result:
    res = Result(name, what, bound=bound_mib * MiB)
    res.rss_before = rss_bytes(b.pid)
    with RssSampler(b.pid) as sampler:
        try:
            body(res)
        except Exception as e:  # a scenario that breaks is a failure with its reason, the others still run
            res.failures.append(f"{type(e).__name__}: {e}")
        time.sleep(settle_s)
        res.rss_peak = sampler.peak
    res.rss_after = rss_bytes(b.pid)
    if b.broker.proc is None or b.broker.proc.poll() is not None:
        res.failures.append("the broker process died")
    return res


# --- scenarios ------------------------------------------------------------------------------------------------------
def scenario_idle(b: BrokerProcess, n: int) -> Result:
    def body(res: Result) -> None:
        socks: list[socket.socket] = []
        try:
            t0 = time.monotonic()
            for _ in range(n):
                socks.append(socket.create_connection(b.addr, timeout=10))
            res.figures["connect"] = f"{time.monotonic() - t0:.1f} s"
            time.sleep(1.0)
            res.probe_s = probe(b.addr)
            res.figures["held"] = len(socks)
        finally:
            for s in socks:
                s.close()

    return _measured(b, "idle", f"{n} idle connections", bound_mib=max(32, n * 8 // 1024), body=body)


def scenario_slowloris(b: BrokerProcess, n: int, rounds: int, interval: float) -> Result:
    frame = send_request(TOPIC, 1, b"s" * 1024, {"TAGS": "S"}).encode()

    def body(res: Result) -> None:
        socks = [socket.create_connection(b.addr, timeout=10) for _ in range(n)]
        try:
            probes = []
            for i in range(rounds):
                for s in socks:
                    s.send(frame[i : i + 1])
                if i % max(1, rounds // 5) == 0:
                    probes.append(probe(b.addr))
                time.sleep(interval)
            res.probe_s = max(probes)
            res.figures["bytes trickled"] = n * rounds
        finally:
            for s in socks:
                s.close()

    return _measured(b, "slowloris", f"{n} connections x 1 byte per {interval} s", bound_mib=32, body=body)


def scenario_non_reader(b: BrokerProcess, n: int) -> Result:
    body_1k = b"n" * 1024
    for q in range(4):  # 32 messages per queue to pull, so each answer is ~33 KiB
        frames = b"".join(send_request(TOPIC, q, body_1k, {"TAGS": "N"}).encode() for _ in range(32))
        with socket.create_connection(b.addr, timeout=10) as s:
            s.sendall(frames)
            for _ in range(32):
                read_frame(s)
    pulls = [pull_request(TOPIC, i % 4, 0, 32, suspend_ms=0).encode() for i in range(n)]

    def body(res: Result) -> None:
        s = socket.create_connection(b.addr, timeout=10)
        s.setblocking(False)
        sent = 0
        try:
            end = time.monotonic() + 20
            data = memoryview(b"".join(pulls))
            while sent < len(data) and time.monotonic() < end:
                try:
                    sent += s.send(data[sent : sent + 65536])
                except BlockingIOError:
                    time.sleep(0.01)  # the broker stopped reading us: what should happen
            res.figures["requests written"] = f"{sent * n // len(data)} of {n}"
            res.figures["answers pending"] = f"~{n * 33 // 1024} MiB"
            time.sleep(1.0)
            res.probe_s = probe(b.addr)
        finally:
            s.close()

    return _measured(b, "non_reader", f"{n} pulls (32 x 1 KiB each), answers never read", bound_mib=64, body=body)


def scenario_pipeline(b: BrokerProcess, n: int) -> Result:
    frames = [send_request(TOPIC, i % 4, b"p" * 1024, {"TAGS": "Q", "KEYS": f"k{i}"}).encode() for i in range(n)]
    blob = b"".join(frames)

    def body(res: Result) -> None:
        s = socket.create_connection(b.addr, timeout=30)
        answers: dict[str, int] = {"ok": 0, "other": 0}
        reader_err: list[BaseException] = []

        def read_all() -> None:
            try:
                for _ in range(n):
                    r = read_frame(s)
                    answers["ok" if r.code == ResponseCode.SUCCESS else "other"] += 1
            except BaseException as e:
                reader_err.append(e)

        t = threading.Thread(target=read_all, daemon=True)
        t0 = time.monotonic()
        t.start()
        s.sendall(blob)
        res.probe_s = probe(b.addr)
        t.join(120)
        s.close()
        took = time.monotonic() - t0
        res.figures["answered SUCCESS"] = f"{answers['ok']} of {n}"
        res.figures["rate"] = f"{n / took:,.0f} msg/s"
        if reader_err:
            res.failures.append(f"reading the answers: {reader_err[0]}")
        if answers["ok"] != n:
            res.failures.append(f"{n - answers['ok']} sends not answered SUCCESS")

    return _measured(b, "pipeline", f"{n} sends written without waiting", bound_mib=96, body=body)


def scenario_group_churn(b: BrokerProcess, n: int, queues: int) -> Result:
    from rmq_core.client import ConsumeConcurrentlyStatus, PushConsumer

    topic, group = "ChurnTopic", "ChurnGroup"
    r = subprocess.run(
        [*rmq_core_cmd(), "topic", "create", topic, "-n", f"127.0.0.1:{b.ns_port}", "--queues", str(queues)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    if r.returncode != 0:
        raise RuntimeError(f"topic create failed: {r.stdout} {r.stderr}")

    def new_consumer(i: int) -> PushConsumer:
        c = PushConsumer(
            group,
            namesrv_addr=f"127.0.0.1:{b.ns_port}",
            instance_name=f"churn-{i}",
            consume_thread_min=1,
            consume_thread_max=1,
            heartbeat_broker_interval=1000,
            rebalance_interval_ms=2000,
            poll_name_server_interval=1000,
        )
        c.subscribe(topic, "*")
        c.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
        c.start()
        return c

    def owners(live: list[PushConsumer]) -> tuple[int, int]:
        """(queues owned by no live consumer, queues owned by more than one)."""
        count: dict[int, int] = {}
        for c in live:
            for mq, pq in list(c.impl.rebalance_impl.process_queue_table.items()):
                if mq.topic == topic and not pq.dropped:
                    count[mq.queue_id] = count.get(mq.queue_id, 0) + 1
        return queues - len(count), sum(1 for v in count.values() if v > 1)

    def settle(live: list[PushConsumer], step: str, res: Result, deadline_s: float = 90.0) -> None:
        t0 = time.monotonic()
        held_since = None
        while time.monotonic() - t0 < deadline_s:
            unowned, twice = owners(live)
            if unowned == 0 and twice == 0:
                held_since = held_since or time.monotonic()
                if time.monotonic() - held_since >= 1.0:
                    res.figures[step] = f"settled {held_since - t0:.1f} s after"
                    return
            else:
                held_since = None
            time.sleep(0.25)
        unowned, twice = owners(live)
        res.failures.append(f"{step}: not settled in {deadline_s:.0f} s ({unowned} unowned, {twice} owned twice)")

    def body(res: Result) -> None:
        live: list[PushConsumer] = []
        try:
            t0 = time.monotonic()
            for i in range(n):
                live.append(new_consumer(i))
            res.figures["start"] = f"{time.monotonic() - t0:.1f} s"
            settle(live, f"{n} joined", res)
            t0 = time.monotonic()
            for c in live[: n // 2]:
                c.shutdown()
            res.figures["shutdown"] = f"{time.monotonic() - t0:.1f} s"
            live = live[n // 2 :]
            settle(live, f"{n // 2} left", res)
            for i in range(n, n + n // 4):
                live.append(new_consumer(i))
            settle(live, f"{n // 4} joined", res)
            res.probe_s = probe(b.addr)
        finally:
            for c in live:
                with contextlib.suppress(Exception):
                    c.shutdown()

    return _measured(b, "group_churn", f"{n} push consumers, {queues} queues", bound_mib=64, body=body)


def scenario_disk_full(work: Path, tmpfs_mib: int, ballast_mib: int) -> Result:
    """The broker inside ``unshare -rm`` with its store on a small tmpfs; the harness reaches the mount through
    /proc/<broker pid>/root (root's view of the broker's mount namespace)."""
    res = Result("disk_full", f"store on a {tmpfs_mib} MiB tmpfs, {ballast_mib} MiB ballast", bound=64 * MiB)
    if shutil.which("unshare") is None:
        res.failures.append("unshare(1) not found")
        return res
    mnt = work / "tmpfs"
    mnt.mkdir()
    script = (
        f'mount -t tmpfs -o size={tmpfs_mib}m tmpfs "{mnt}" && mkdir -p "{mnt}/store" && '
        f'head -c {ballast_mib * MiB} /dev/zero > "{mnt}/ballast" && exec "$@"'
    )
    b = BrokerProcess(work, mnt / "store", wrap=["unshare", "-rm", "sh", "-c", script, "sh"])
    try:
        b.start()
    except RuntimeError as e:
        b.stop()
        res.failures.append(f"could not start the broker on a tmpfs (user namespaces?): {e}")
        return res
    view = Path(f"/proc/{b.pid}/root") / str(mnt).lstrip("/")
    acked: list[tuple[int, int, bytes]] = []  # (queue, offset, body)
    codes: dict[int, int] = {}
    try:
        res.rss_before = rss_bytes(b.pid)
        with RssSampler(b.pid) as sampler, socket.create_connection(b.addr, timeout=30) as s:

            def send(i: int) -> int:
                body = (b"%08d" % i) * 1024  # 8 KiB, its index in every 8 bytes
                s.sendall(send_request(TOPIC, i % 4, body, {"TAGS": "D"}).encode())
                r = read_frame(s)
                if r.code == ResponseCode.SUCCESS:
                    acked.append((i % 4, int(r.ext_fields["queueOffset"]), body))
                else:
                    codes[r.code] = codes.get(r.code, 0) + 1
                return r.code

            i, first_refusal = 0, None
            t0 = time.monotonic()
            while time.monotonic() - t0 < 60:
                code = send(i)
                i += 1
                if code != ResponseCode.SUCCESS:
                    first_refusal = i
                    if sum(codes.values()) >= 20:  # refused again and again, each answered
                        break
            res.figures["acked before full"] = len(acked)
            res.figures["refusals"] = json.dumps({str(k): v for k, v in codes.items()})
            if first_refusal is None:
                res.failures.append("the disk never filled")
            res.probe_s = probe(b.addr, send=False)  # pulls keep working while sends are refused
            (view / "ballast").unlink()
            resumed = None
            t1 = time.monotonic()
            while time.monotonic() - t1 < 30:
                if send(i) == ResponseCode.SUCCESS:
                    resumed = time.monotonic() - t1
                    break
                i += 1
                time.sleep(0.1)
            if resumed is None:
                res.failures.append("sends did not resume after space returned")
            else:
                res.figures["resumed after"] = f"{resumed:.2f} s"
                for _ in range(50):
                    i += 1
                    if send(i) != ResponseCode.SUCCESS:
                        res.failures.append("a send failed after space returned")
                        break
            lost = _read_back(b, acked)
            res.figures["acked"] = len(acked)
            res.figures["lost"] = lost
            if lost:
                res.failures.append(f"{lost} acknowledged messages not read back intact")
            res.rss_peak = sampler.peak
        res.rss_after = rss_bytes(b.pid)
    except Exception as e:
        res.failures.append(f"{type(e).__name__}: {e}")
    finally:
        b.stop()
    return res


def _read_back(b: BrokerProcess, acked: list[tuple[int, int, bytes]]) -> int:
    """How many acknowledged (queue, offset, body) are not served back byte for byte."""
    from rmq_core.message import decode_messages

    want = {(q, off): body for q, off, body in acked}
    got: dict[tuple[int, int], bytes] = {}
    with socket.create_connection(b.addr, timeout=30) as s:
        for q in range(4):
            off = 0
            while True:
                s.sendall(pull_request(TOPIC, q, off, 32, suspend_ms=0).encode())
                r = read_frame(s)
                if r.code != ResponseCode.SUCCESS or not r.body:
                    break
                msgs = decode_messages(r.body)
                for m in msgs:
                    got[(q, m.queue_offset)] = m.body
                off = msgs[-1].queue_offset + 1
    return sum(1 for k, body in want.items() if got.get(k) != body)


@contextlib.contextmanager
def workdir(keep: bool) -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="rmq-exhaust-"))
    try:
        yield d
    finally:
        if keep:
            print(f"work directory kept: {d}", file=sys.stderr)
        else:
            shutil.rmtree(d, ignore_errors=True)


SIZES = {
    "full": {"idle": 5000, "slowloris": (500, 60, 0.1), "non_reader": 20000, "pipeline": 100000, "churn": (200, 64),
             "disk": (24, 12)},
    "quick": {"idle": 500, "slowloris": (100, 20, 0.05), "non_reader": 4000, "pipeline": 20000, "churn": (20, 16),
              "disk": (16, 8)},
}  # fmt: skip
NAMES = ("idle", "slowloris", "non_reader", "pipeline", "group_churn", "disk_full")


def run(size: str = "full", only: list[str] | None = None, keep: bool = False) -> list[Result]:
    sz = SIZES[size]
    want = only or list(NAMES)
    results: list[Result] = []
    with workdir(keep) as work:
        shared = [n for n in want if n != "disk_full"]
        if shared:
            (work / "shared").mkdir()
            b = BrokerProcess(work / "shared", work / "shared" / "store")
            try:
                b.start()
                for name in shared:
                    if name == "idle":
                        results.append(scenario_idle(b, sz["idle"]))
                    elif name == "slowloris":
                        results.append(scenario_slowloris(b, *sz["slowloris"]))
                    elif name == "non_reader":
                        results.append(scenario_non_reader(b, sz["non_reader"]))
                    elif name == "pipeline":
                        results.append(scenario_pipeline(b, sz["pipeline"]))
                    elif name == "group_churn":
                        results.append(scenario_group_churn(b, *sz["churn"]))
            finally:
                b.stop()
        if "disk_full" in want:
            (work / "disk").mkdir()
            results.append(scenario_disk_full(work / "disk", *sz["disk"]))
    return results


def format_table(results: list[Result]) -> str:
    head = (
        "| scenario | load | broker RssAnon before / peak / after | growth (bound) | probe | figures | verdict |\n"
        "|---|---|---|---|---|---|---|"
    )
    return "\n".join([head, *(r.row() for r in results)])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="the small sizes the test suite uses")
    p.add_argument("--only", action="append", choices=NAMES, help="run only this scenario (repeatable)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs, stores)")
    a = p.parse_args()
    results = run("quick" if a.quick else "full", a.only, a.keep)
    print(format_table(results))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
