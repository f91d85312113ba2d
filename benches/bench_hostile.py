"""Hostile clients against a real name server and broker (`rmq-core namesrv` and `rmq-core broker`, each in its own
process so its memory is measurable): each attack of issue 28's "bounded work" item, one after another, with a
normal client alongside; each prints the servers' peak memory and the normal client's worst wait.

    .venv/bin/python benches/bench_hostile.py                # every attack
    .venv/bin/python benches/bench_hostile.py --only bomb    # one attack (names below)

Attacks:
- bomb: REGISTER_BROKER with a 2 MiB zlib body of zeros (2 GiB inflated) to the name server;
- bare_keys: a 14 MiB HEART_BEAT body of fastjson bare keys to the broker, and a 14 MiB REGISTER_BROKER body of
  them to the name server;
- config_pipeline: 3,000 GET_BROKER_CONFIG pipelined on one connection that never reads;
- topics_pipeline: 3,000 GET_ALL_TOPIC_CONFIG over 2,000 topics pipelined on one connection that never reads;
- idle: 2,000 connections opened and left idle (the broker runs with serverChannelMaxIdleTimeSeconds=5 here: how
  many are still open 10 s later);
- partial_frame: 20 connections each sending 15 MiB of a 16 MiB frame and holding (serverFrameDeadlineSeconds=5);
- deep_header: a header nested 200,000 deep (the servers must survive: one log line);
- kv_log: 5,000 PUT_KV_CONFIG values of 7 KiB each (the name server's log growth).

The normal client is one connection to the broker doing a send then a pull of what it sent, in a loop, and one to
the name server asking GET_ROUTEINFO_BY_TOPIC, both throughout each attack; "worst wait" is the longest one of
those took (a wait still open at the end counts as its age). Memory is the process's anonymous RSS
(``exhaust_broker.rss_bytes``: the store's mapped files excluded), sampled every 50 ms. Only 127.0.0.1; every wait
has a deadline; the processes are killed on exit.
Thread-safety: the normal client and the RSS samplers are threads; the attacks run on the main thread.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import struct
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from exhaust_broker import TOPIC, BrokerProcess, RssSampler, read_frame, rss_bytes  # noqa: E402
from lean_clients import pull_request, send_request  # noqa: E402

from rmq_core.remoting.codes import RequestCode  # noqa: E402
from rmq_core.remoting.command import RemotingCommand  # noqa: E402
from rmq_core.remoting.header import (  # noqa: E402
    GetRouteInfoRequestHeader,
    PutKVConfigRequestHeader,
    RegisterBrokerRequestHeader,
    encode_header,
)

MiB = 1024 * 1024
IDLE_S = 5  # the bench broker's serverChannelMaxIdleTimeSeconds (the default, 120 s, is too long to wait for)
FRAME_DEADLINE_S = 5  # its serverFrameDeadlineSeconds
WAIT_CAP_S = 60.0  # a normal request not answered within this counts as this


def frame(code: int, ext: dict[str, str] | None = None, body: bytes | None = None) -> bytes:
    return RemotingCommand.request(code, ext, body).encode()


class NormalClient:
    """A send + pull loop on the broker and a route lookup loop on the name server, each on its own thread and
    connection; ``worst`` is the longest round trip seen (or the age of one still waiting)."""

    def __init__(self, broker: tuple[str, int], namesrv: tuple[str, int]) -> None:
        self.broker, self.namesrv = broker, namesrv
        self.worst_broker = self.worst_namesrv = 0.0
        self.rounds = 0
        self._started: dict[str, float | None] = {"broker": None, "namesrv": None}
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._loop, args=("broker",), daemon=True),
            threading.Thread(target=self._loop, args=("namesrv",), daemon=True),
        ]

    def _loop(self, which: str) -> None:
        addr = self.broker if which == "broker" else self.namesrv
        route = frame(RequestCode.GET_ROUTEINFO_BY_TOPIC, encode_header(GetRouteInfoRequestHeader(topic=TOPIC)))
        with socket.create_connection(addr, timeout=WAIT_CAP_S) as s:
            while not self._stop.is_set():
                t0 = time.monotonic()
                self._started[which] = t0
                try:
                    if which == "broker":
                        s.sendall(send_request(TOPIC, 0, b"normal", {"TAGS": "N"}).encode())
                        answer = _answer(s)
                        offset = int(answer.ext_fields.get("queueOffset", 0))
                        s.sendall(pull_request(TOPIC, 0, offset, 1, suspend_ms=0).encode())
                        _answer(s)
                    else:
                        s.sendall(route)
                        _answer(s)
                except OSError:
                    self._note(which, WAIT_CAP_S)
                    return
                self._started[which] = None
                self._note(which, time.monotonic() - t0)
                self.rounds += 1
                self._stop.wait(0.01)

    def _note(self, which: str, took: float) -> None:
        if which == "broker":
            self.worst_broker = max(self.worst_broker, took)
        else:
            self.worst_namesrv = max(self.worst_namesrv, took)

    def __enter__(self) -> NormalClient:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        now = time.monotonic()
        for which, t0 in self._started.items():
            if t0 is not None:
                self._note(which, now - t0)
        self._stop.set()
        for t in self._threads:
            t.join(1.0)


def _answer(s: socket.socket) -> RemotingCommand:
    while True:
        cmd = read_frame(s)
        if cmd.flag & 1:
            return cmd


@dataclass
class Row:
    name: str
    what: str
    broker_rss: tuple[int, int, int] = (0, 0, 0)  # before, peak, after
    namesrv_rss: tuple[int, int, int] = (0, 0, 0)
    worst_broker_s: float = 0.0
    worst_namesrv_s: float = 0.0
    figures: dict[str, object] = field(default_factory=dict)

    def line(self) -> str:
        def mib(t: tuple[int, int, int]) -> str:
            return " / ".join(f"{v / MiB:.0f}" for v in t)

        figs = ", ".join(f"{k} {v}" for k, v in self.figures.items())
        return (
            f"| {self.name} | {self.what} | {mib(self.broker_rss)} | {mib(self.namesrv_rss)} | "
            f"{self.worst_broker_s * 1000:.0f} ms | {self.worst_namesrv_s * 1000:.0f} ms | {figs} |"
        )


def measured(b: BrokerProcess, name: str, what: str, attack: Callable[[Row], None], settle_s: float = 1.0) -> Row:
    row = Row(name, what)
    ns_pid = b.namesrv.proc.pid if b.namesrv.proc is not None else 0
    before = (rss_bytes(b.pid), rss_bytes(ns_pid))
    with RssSampler(b.pid) as bs, RssSampler(ns_pid) as ns, NormalClient(b.addr, ("127.0.0.1", b.ns_port)) as n:
        try:
            attack(row)
        except Exception as e:  # an attack that breaks is reported, the others still run
            row.figures["error"] = f"{type(e).__name__}: {e}"
        time.sleep(settle_s)
    row.broker_rss = (before[0], bs.peak, _rss_or_zero(b.pid))
    row.namesrv_rss = (before[1], ns.peak, _rss_or_zero(ns_pid))
    row.worst_broker_s, row.worst_namesrv_s = n.worst_broker, n.worst_namesrv
    row.figures["normal rounds"] = n.rounds
    for child, who in ((b.broker, "broker"), (b.namesrv, "name server")):
        if child.proc is None or child.proc.poll() is not None:
            row.figures["died"] = who
    return row


def _rss_or_zero(pid: int) -> int:
    try:
        return rss_bytes(pid)
    except OSError:
        return 0


def _send_quietly(s: socket.socket, data: bytes, timeout: float) -> bool:
    """``data`` written unless the server stops reading it or closes first; True when all of it went."""
    s.settimeout(timeout)
    try:
        s.sendall(data)
        return True
    except OSError:
        return False


def _wait_answer(s: socket.socket, timeout: float) -> str:
    s.settimeout(timeout)
    try:
        cmd = _answer(s)
        return f"{cmd.code} {str(cmd.remark or '')[:60]!r}"
    except (OSError, ConnectionError) as e:
        return f"no answer: {type(e).__name__}"


# --- attacks ----------------------------------------------------------------------------------------------------------
def _register_ext(compressed: bool) -> dict[str, str]:
    h = RegisterBrokerRequestHeader(
        brokerName="hostile", brokerAddr="127.0.0.1:1", clusterName="c", haServerAddr="127.0.0.1:2", brokerId=0
    )
    h.compressed = compressed
    return encode_header(h)


def attack_bomb(b: BrokerProcess, row: Row) -> None:
    deflater = zlib.compressobj(9)
    zeros = bytes(16 * MiB)
    parts = []
    size = 0
    while size < 2 * MiB:
        piece = deflater.compress(zeros)
        parts.append(piece)
        size += len(piece)
    parts.append(deflater.flush())
    body = b"".join(parts)
    row.figures["compressed"] = f"{len(body) / MiB:.1f} MiB"
    with socket.create_connection(("127.0.0.1", b.ns_port), timeout=120) as s:
        t0 = time.monotonic()
        s.sendall(frame(RequestCode.REGISTER_BROKER, _register_ext(True), body))
        row.figures["answer"] = _wait_answer(s, 120)
        row.figures["answered in"] = f"{time.monotonic() - t0:.2f} s"


def _bare_key_body(size: int) -> bytes:
    """fastjson's bare integer keys, each with a 100-character string (what a per-character scan is slowest on)."""
    item = b'1234567:"' + b"x" * 100 + b'",'
    return b"{" + item * (size // len(item)) + b'0:"v"}'


def attack_bare_keys(b: BrokerProcess, row: Row) -> None:
    body = _bare_key_body(14 * MiB)
    for where, addr, code, ext in (
        ("broker", b.addr, RequestCode.HEART_BEAT, None),
        ("namesrv", ("127.0.0.1", b.ns_port), RequestCode.REGISTER_BROKER, _register_ext(False)),
    ):
        with socket.create_connection(addr, timeout=60) as s:
            t0 = time.monotonic()
            s.sendall(frame(code, ext, body))
            answer = _wait_answer(s, 60)
            row.figures[where] = f"{answer} in {time.monotonic() - t0:.2f} s"


def _pipeline(b: BrokerProcess, row: Row, code: int, n: int, hold_s: float) -> None:
    s = socket.create_connection(b.addr, timeout=30)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    data = b"".join(frame(code) for _ in range(n))
    sender = threading.Thread(target=_send_quietly, args=(s, data, hold_s + 30), daemon=True)
    sender.start()
    time.sleep(hold_s)  # the client never reads; the normal client runs meanwhile
    row.figures["all requests written"] = not sender.is_alive()
    s.close()


def attack_config_pipeline(b: BrokerProcess, row: Row) -> None:
    _pipeline(b, row, RequestCode.GET_BROKER_CONFIG, 3000, 15.0)


def attack_topics_pipeline(b: BrokerProcess, row: Row) -> None:
    _pipeline(b, row, RequestCode.GET_ALL_TOPIC_CONFIG, 3000, 15.0)


def attack_idle(b: BrokerProcess, row: Row) -> None:
    conns = []
    for _ in range(2000):
        try:
            conns.append(socket.create_connection(b.addr, timeout=5))
        except OSError as e:
            row.figures["connect failed"] = f"{type(e).__name__} after {len(conns)}"
            break
    row.figures["opened"] = len(conns)
    time.sleep(2 * IDLE_S)
    still = 0
    for c in conns:
        c.setblocking(False)
        try:
            still += c.recv(1) != b""
        except BlockingIOError:
            still += 1
        except OSError:
            pass
        c.close()
    row.figures[f"open after {2 * IDLE_S} s"] = still


def attack_partial_frame(b: BrokerProcess, row: Row) -> None:
    conns = []
    part = struct.pack(">ii", 16 * MiB - 1, 100) + bytes(15 * MiB)
    for _ in range(20):
        s = socket.create_connection(b.addr, timeout=30)
        _send_quietly(s, part, 30)
        conns.append(s)
    time.sleep(3 * FRAME_DEADLINE_S)
    closed = 0
    for s in conns:
        s.setblocking(False)
        try:
            closed += s.recv(1) == b""
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
        s.close()
    row.figures[f"closed after {3 * FRAME_DEADLINE_S} s"] = f"{closed}/20"


def attack_deep_header(b: BrokerProcess, row: Row) -> None:
    header = b'{"code":105,"extFields":' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    raw = struct.pack(">ii", 4 + len(header), len(header)) + header
    for where, addr in (("broker", b.addr), ("namesrv", ("127.0.0.1", b.ns_port))):
        with socket.create_connection(addr, timeout=10) as s:
            s.sendall(raw)
            row.figures[where] = _wait_answer(s, 10)
    logs = (b.work / "broker.log").read_text(errors="replace") + (b.work / "namesrv.log").read_text(errors="replace")
    row.figures["RecursionError tracebacks in the logs"] = logs.count("RecursionError")


def attack_kv_log(b: BrokerProcess, row: Row) -> None:
    log = b.work / "namesrv.log"
    size0 = log.stat().st_size
    value = "v" * 7 * 1024
    with socket.create_connection(("127.0.0.1", b.ns_port), timeout=60) as s:
        for i in range(5000):
            ext = encode_header(PutKVConfigRequestHeader(namespace="hostile", key=f"k{i}", value=value))
            s.sendall(frame(RequestCode.PUT_KV_CONFIG, ext))
            _answer(s)
    row.figures["name server log growth"] = f"{(log.stat().st_size - size0) / MiB:.1f} MiB"


ATTACKS: dict[str, tuple[str, Callable[[BrokerProcess, Row], None]]] = {
    "bomb": ("REGISTER_BROKER, 2 MiB of zlib zeros", attack_bomb),
    "bare_keys": ("14 MiB of bare keys: HEART_BEAT, REGISTER_BROKER", attack_bare_keys),
    "config_pipeline": ("3,000 GET_BROKER_CONFIG never read", attack_config_pipeline),
    "topics_pipeline": ("3,000 GET_ALL_TOPIC_CONFIG (2,000 topics) never read", attack_topics_pipeline),
    "idle": (f"2,000 idle connections (idle timeout {IDLE_S} s)", attack_idle),
    "partial_frame": (f"20 x 15 MiB of a 16 MiB frame (deadline {FRAME_DEADLINE_S} s)", attack_partial_frame),
    "deep_header": ("a header nested 200,000 deep", attack_deep_header),
    "kv_log": ("5,000 PUT_KV_CONFIG of 7 KiB", attack_kv_log),
}


def _write_topics(store: Path, n: int) -> None:
    """``n`` topics in the store's topics.json before the broker starts (creating them over the wire persists the
    growing file once per topic)."""
    table = {
        f"HostileTopic{i:05d}": {
            "topicName": f"HostileTopic{i:05d}",
            "readQueueNums": 8,
            "writeQueueNums": 8,
            "perm": 6,
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": 0,
            "order": False,
            "attributes": {},
        }
        for i in range(n)
    }
    (store / "config").mkdir(parents=True, exist_ok=True)
    doc = {"topicConfigTable": table, "dataVersion": {"counter": 1, "timestamp": int(time.time() * 1000)}}
    (store / "config" / "topics.json").write_text(json.dumps(doc))


def run(only: list[str] | None = None, keep: bool = False) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        work = Path(tmp)
        store = work / "store"
        _write_topics(store, 2000)
        b = BrokerProcess(
            work,
            store,
            extra=[f"serverChannelMaxIdleTimeSeconds={IDLE_S}", f"serverFrameDeadlineSeconds={FRAME_DEADLINE_S}"],
        )
        try:
            b.start()
            for name, (what, attack) in ATTACKS.items():
                if only and name not in only:
                    continue
                row = measured(b, name, what, lambda r, a=attack: a(b, r))  # type: ignore[misc]
                print(row.line(), flush=True)
                rows.append(row)
                if "died" in row.figures:
                    break
        finally:
            b.stop()
            if keep:
                with contextlib.suppress(OSError):
                    kept = Path(tempfile.mkdtemp(prefix="bench-hostile-logs-"))
                    for f in ("broker.log", "namesrv.log"):
                        (kept / f).write_bytes((work / f).read_bytes())
                    print(f"logs kept in {kept}")
    return rows


HEADER = (
    "| attack | what | broker RSS MiB (before / peak / after) | name server RSS MiB | normal client's worst wait: "
    "broker (send + pull) | name server (route) | figures |\n|---|---|---|---|---|---|---|"
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", choices=sorted(ATTACKS), help="run only this attack (repeatable)")
    ap.add_argument("--keep-logs", action="store_true", help="copy the servers' logs somewhere kept")
    args = ap.parse_args()
    print(HEADER, flush=True)
    run(args.only, args.keep_logs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
