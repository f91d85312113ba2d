"""Broker crash soak: `rmq-core broker` in its own process, producers (sync, async, batch) and a push consumer (its own
process) at work, the broker SIGKILLed at random moments and restarted on the same store, N cycles per flush mode;
now and then the name server and the consumer are SIGKILLed and restarted too.

    .venv/bin/python benches/soak_broker.py --cycles 50 --flush both          # the long version (100 kill cycles)
    .venv/bin/python benches/soak_broker.py --cycles 3 --flush ASYNC_FLUSH    # a quick look

What is checked (each a count in the report; the soak fails when a "must be 0" is not):
- lost: a message acknowledged SEND_OK that is not in the store at the (queue, offset) the broker answered, or that
  the consumer never delivered (must be 0);
- corrupt served: a delivered body that is not the body sent for its key, or a stored record whose body CRC is wrong
  (must be 0);
- offset passed: a consumer offset the broker had committed (its consumerOffset.json read right after each kill) at or
  below which some message had not been delivered by then (must be 0);
- duplicates: deliveries past the first of a key (allowed: messages in flight at a kill, resent after a lost answer or
  re-consumed after a consumer kill); stored twice: keys stored more than once (a send whose answer a kill lost, then
  retried by the producer);
- configs: topics.json / consumerOffset.json parse after every kill (or their .bak does);
- restart: seconds from starting the broker process until a send through it succeeds again.

Bounded: every wait has a deadline; processes are killed on exit. Only 127.0.0.1. Threads: producer threads and a
reader thread per child process record into one lock-guarded ledger.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from soak_consumer import soak_body  # noqa: E402

TOPIC = "SoakTopic"
GROUP = "SoakGroup"
QUEUES = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rmq_core_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("rmq-core")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "rmq_core.cli"]


@dataclass
class Ledger:
    """What producers had acknowledged and what the consumer delivered (thread-safe)."""

    acked: dict[str, tuple[int, int]] = field(default_factory=dict)  # key -> (queue id, queue offset)
    send_failures: int = 0
    first_delivery: dict[str, float] = field(default_factory=dict)  # key -> monotonic time of its first delivery
    deliveries: Counter[str] = field(default_factory=Counter)
    corrupt_delivered: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ack(self, key: str, queue_id: int, queue_offset: int) -> None:
        with self.lock:
            self.acked[key] = (queue_id, queue_offset)

    def fail(self) -> None:
        with self.lock:
            self.send_failures += 1

    def delivered(self, keys: list[str], bad: list[str]) -> None:
        now = time.monotonic()
        with self.lock:
            for k in keys:
                self.deliveries[k] += 1
                self.first_delivery.setdefault(k, now)
            self.corrupt_delivered.extend(bad)


class Child:
    """A child process whose stdout lines go to ``on_line`` from a reader thread; SIGKILLed by ``kill()``."""

    def __init__(self, argv: list[str], log_path: Path, on_line: object = None) -> None:
        self.argv = argv
        self.log_path = log_path
        self.on_line = on_line
        self.proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115  (handed to the child)
        self.proc = subprocess.Popen(
            self.argv,
            stdout=subprocess.PIPE if self.on_line else log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        if self.on_line is not None:
            self._reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
            self._reader.start()

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            self.on_line(raw.decode("utf-8", "replace"))  # type: ignore[operator]

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self._reap()

    def terminate(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reap()

    def _reap(self) -> None:
        if self._reader is not None:
            self._reader.join(5)
            self._reader = None
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None


@dataclass
class SoakReport:
    flush: str
    cycles: int = 0
    namesrv_kills: int = 0
    consumer_kills: int = 0
    acked: int = 0
    send_failures: int = 0
    lost: int = 0
    corrupt_served: int = 0
    offset_passed: int = 0
    duplicates: int = 0
    stored_twice: int = 0
    config_failures: int = 0
    restart_s: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.corrupt_served or self.offset_passed or self.config_failures or self.problems)


def _read_json_config(path: Path) -> dict | None:
    from rmq_core.remoting import fastjson

    for candidate in (path, path.with_name(path.name + ".bak")):
        if candidate.exists():
            try:
                doc = fastjson.loads(candidate.read_text(encoding="utf-8"), int_keys=False)
            except ValueError:
                continue
            if isinstance(doc, dict):
                return doc
    return None


def _committed_offsets(store_dir: Path) -> dict[int, int] | None:
    doc = _read_json_config(store_dir / "config" / "consumerOffset.json")
    if doc is None:
        return None
    table = (doc.get("offsetTable") or {}).get(f"{TOPIC}@{GROUP}") or {}
    return {int(q): int(o) for q, o in table.items()}


def evaluate(
    ledger: Ledger, stored: dict[tuple[int, int], str], snapshots: list[tuple[float, dict[int, int]]], rep: SoakReport
) -> None:
    """Fill ``rep``'s counts from what was acknowledged and delivered (``ledger``), what the store holds at each
    (queue, offset) (``stored``) and the consumer offsets committed at each kill (``snapshots``)."""
    rep.acked = len(ledger.acked)
    rep.send_failures = ledger.send_failures
    rep.duplicates = sum(n - 1 for k, n in ledger.deliveries.items() if n > 1 and not k.startswith("probe"))
    rep.corrupt_served += len(ledger.corrupt_delivered)
    for key, at in ledger.acked.items():
        if stored.get(at) != key:
            rep.lost += 1
            rep.problems.append(f"acknowledged {key} at {at} is not in the store ({stored.get(at)!r} is)")
        elif key not in ledger.first_delivery:
            rep.lost += 1
            rep.problems.append(f"acknowledged {key} at {at} was never delivered")
    by_key = Counter(stored.values())
    rep.stored_twice = sum(n - 1 for k, n in by_key.items() if n > 1 and not k.startswith("probe"))
    slack = 1.0  # a consumed line may still be in the pipe when the kill happens
    for taken_at, committed in snapshots:
        for q, offset in committed.items():
            for o in range(offset):
                held = stored.get((q, o))
                if held is None:
                    continue
                first = ledger.first_delivery.get(held)
                if first is None or first > taken_at + slack:
                    rep.offset_passed += 1
                    rep.problems.append(f"offset {offset} of queue {q} committed before {held} at {o} was consumed")
                    break
    del rep.problems[20:]


class Soak:
    def __init__(self, flush: str, work: Path, seed: int, run_s: tuple[float, float], kill_namesrv_every: int,
                 kill_consumer_every: int) -> None:  # fmt: skip
        self.flush = flush
        self.work = work
        self.rng = random.Random(seed)
        self.run_s = run_s
        self.kill_namesrv_every = kill_namesrv_every
        self.kill_consumer_every = kill_consumer_every
        self.store_dir = work / "store"
        self.ns_port = free_port()
        self.broker_port = free_port()
        self.namesrv_addr = f"127.0.0.1:{self.ns_port}"
        self.ledger = Ledger()
        self.report = SoakReport(flush)
        self.snapshots: list[tuple[float, dict[int, int]]] = []
        conf = work / "broker.conf"
        conf.write_text(
            "\n".join(
                [
                    "brokerClusterName=SoakCluster",
                    "brokerName=broker-soak",
                    "brokerId=0",
                    f"listenPort={self.broker_port}",
                    f"namesrvAddr={self.namesrv_addr}",
                    f"storePathRootDir={self.store_dir}",
                    f"flushDiskType={flush}",
                    "mappedFileSizeCommitLog=4194304",  # 4 MiB files: the soak crosses many of them
                    "mappedFileSizeConsumeQueue=60000",
                    "flushConsumerOffsetInterval=500",
                    "autoCreateTopicEnable=true",
                ]
            )
            + "\n"
        )
        cli = rmq_core_cmd()
        self.namesrv = Child([*cli, "namesrv", "--port", str(self.ns_port)], work / "namesrv.log")
        self.broker = Child([*cli, "broker", "-c", str(conf)], work / "broker.log")
        self.consumer = Child(
            [sys.executable, str(HERE / "soak_consumer.py"), "--namesrv", self.namesrv_addr, "--group", GROUP,
             "--topic", TOPIC],
            work / "consumer.log",
            on_line=self._consumer_line,
        )  # fmt: skip
        self._stop = threading.Event()
        self._seq = 0
        self._seq_lock = threading.Lock()

    # --- children -----------------------------------------------------------------------------------------------
    def _consumer_line(self, line: str) -> None:
        try:
            doc = json.loads(line)
        except ValueError:
            return
        if "k" in doc:
            self.ledger.delivered(doc["k"], doc.get("bad") or [])

    def _wait_port(self, port: int, deadline_s: float) -> None:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
            time.sleep(0.02)
        raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {deadline_s} s")

    def _create_topic(self) -> None:
        r = subprocess.run(
            [*rmq_core_cmd(), "topic", "create", TOPIC, "-n", self.namesrv_addr, "--queues", str(QUEUES)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        if r.returncode != 0:
            raise RuntimeError(f"topic create failed: {r.stdout} {r.stderr}")

    # --- producers ----------------------------------------------------------------------------------------------
    def _next_key(self) -> str:
        with self._seq_lock:
            self._seq += 1
            return f"k-{self._seq}"

    def _message(self, key: str):  # type: ignore[no-untyped-def]
        from rmq_core.message import Message

        return Message(TOPIC, soak_body(key), keys=key)

    def _sync_sender(self, producer) -> None:  # type: ignore[no-untyped-def]
        from rmq_core.client import SendStatus

        while not self._stop.is_set():
            key = self._next_key()
            try:
                r = producer.send(self._message(key))
            except Exception:
                self.ledger.fail()
                time.sleep(0.05)
                continue
            if r.send_status == SendStatus.SEND_OK:
                self.ledger.ack(key, r.message_queue.queue_id, r.queue_offset)

    def _batch_sender(self, producer) -> None:  # type: ignore[no-untyped-def]
        from rmq_core.client import SendStatus

        while not self._stop.is_set():
            keys = [self._next_key() for _ in range(8)]
            try:
                r = producer.send_batch([self._message(k) for k in keys])
            except Exception:
                self.ledger.fail()
                time.sleep(0.05)
                continue
            if r.send_status == SendStatus.SEND_OK:
                for i, k in enumerate(keys):  # a batch lands in one queue at consecutive offsets
                    self.ledger.ack(k, r.message_queue.queue_id, r.queue_offset + i)
            time.sleep(0.01)

    def _async_sender(self, producer) -> None:  # type: ignore[no-untyped-def]
        from rmq_core.client import SendStatus

        window = threading.Semaphore(32)

        def done(fut, key: str) -> None:  # type: ignore[no-untyped-def]
            try:
                r = fut.result()
            except Exception:
                self.ledger.fail()
            else:
                if r.send_status == SendStatus.SEND_OK:
                    self.ledger.ack(key, r.message_queue.queue_id, r.queue_offset)
            finally:
                window.release()

        while not self._stop.is_set():
            if not window.acquire(timeout=1.0):
                continue
            key = self._next_key()
            try:
                fut = producer.send_async(self._message(key))
            except Exception:
                self.ledger.fail()
                window.release()
                time.sleep(0.05)
                continue
            fut.add_done_callback(lambda f, key=key: done(f, key))

    # --- the soak -----------------------------------------------------------------------------------------------
    def _restart_broker(self) -> float:
        begin = time.monotonic()
        self.broker.start()
        self._wait_port(self.broker_port, 60)
        from rmq_core.client import Producer

        probe = Producer("SoakProbe", namesrv_addr=self.namesrv_addr)
        probe.start()
        try:
            end = begin + 60
            while True:
                try:
                    probe.send(self._message("probe-0"))  # not in the ledger; delivered, never counted
                    break
                except Exception:
                    if time.monotonic() > end:
                        raise
                    time.sleep(0.05)
        finally:
            probe.shutdown()
        return time.monotonic() - begin

    def _check_configs(self) -> None:
        for name in ("topics.json", "consumerOffset.json"):
            path = self.store_dir / "config" / name
            if (path.exists() or path.with_name(name + ".bak").exists()) and _read_json_config(path) is None:
                self.report.config_failures += 1
                self.report.problems.append(f"{name} and its .bak unreadable after a kill")

    def run(self, cycles: int) -> SoakReport:
        from rmq_core.client import Producer

        self.namesrv.start()
        self._wait_port(self.ns_port, 30)
        self._restart_broker()
        self._create_topic()
        self.consumer.start()
        producer = Producer("SoakProducer", namesrv_addr=self.namesrv_addr, send_msg_timeout=3000)
        producer.start()
        threads = [
            threading.Thread(target=t, args=(producer,), daemon=True, name=t.__name__)
            for t in (self._sync_sender, self._sync_sender, self._async_sender, self._batch_sender)
        ]
        for t in threads:
            t.start()
        try:
            for cycle in range(1, cycles + 1):
                time.sleep(self.rng.uniform(*self.run_s))
                self.broker.kill()
                self.snapshots.append((time.monotonic(), _committed_offsets(self.store_dir) or {}))
                self._check_configs()
                if self.kill_namesrv_every and cycle % self.kill_namesrv_every == 0:
                    self.namesrv.kill()  # clients keep the routes they have while it is down
                    time.sleep(self.rng.uniform(0.2, 1.0))
                    self.namesrv.start()
                    self._wait_port(self.ns_port, 30)
                    self.report.namesrv_kills += 1
                if self.kill_consumer_every and cycle % self.kill_consumer_every == 0:
                    self.consumer.kill()
                    self.consumer.start()
                    self.report.consumer_kills += 1
                self.report.restart_s.append(self._restart_broker())
                self.report.cycles = cycle
        finally:
            self._stop.set()
            for t in threads:
                t.join(30)
            producer.shutdown()
        self._drain_and_verify()
        return self.report

    def _drain_and_verify(self) -> None:
        ledger = self.ledger
        end = time.monotonic() + 120
        while time.monotonic() < end:
            with ledger.lock:
                missing = [k for k in ledger.acked if k not in ledger.first_delivery]
            if not missing:
                break
            time.sleep(0.2)
        self.consumer.terminate()
        self.broker.terminate()
        self.namesrv.terminate()
        stored = self._read_store()  # (queue, offset) -> key, CRCs and bodies checked
        evaluate(ledger, stored, self.snapshots, self.report)

    def _read_store(self) -> dict[tuple[int, int], str]:
        from rmq_core.store import MessageStore, StoreConfig

        out: dict[tuple[int, int], str] = {}
        cfg = StoreConfig(mapped_file_size_commit_log=4194304, mapped_file_size_consume_queue=60000)
        with MessageStore(str(self.store_dir), cfg) as store:
            for q in range(QUEUES):
                offset = store.get_min_offset_in_queue(TOPIC, q)
                while True:
                    r = store.get_message("soak-verify", TOPIC, q, offset, 32)
                    msgs = r.decode()
                    if not msgs:
                        break
                    for m in msgs:
                        if (zlib.crc32(m.body) & 0x7FFFFFFF) != m.body_crc or m.body != soak_body(m.keys or "x-0"):
                            self.report.corrupt_served += 1
                        out[(q, m.queue_offset)] = m.keys or ""
                    offset = r.next_begin_offset
        return out


@contextlib.contextmanager
def workdir(keep: bool) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="rmq-soak-"))
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)


def run_soak(flush: str, cycles: int, seed: int = 1, run_s: tuple[float, float] = (0.5, 2.0),
             kill_namesrv_every: int = 5, kill_consumer_every: int = 3, keep: bool = False) -> SoakReport:  # fmt: skip
    with workdir(keep) as work:
        soak = Soak(flush, work, seed, run_s, kill_namesrv_every, kill_consumer_every)
        try:
            return soak.run(cycles)
        finally:
            for child in (soak.consumer, soak.broker, soak.namesrv):
                child.kill()


def format_report(reports: list[SoakReport]) -> str:
    rows = [
        "| flush | kill cycles | name-server kills | consumer kills | acknowledged | send failures | lost | corrupt "
        "served | offset passed | duplicates delivered | stored twice | config failures | restart s (median / max) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in reports:
        restart = f"{statistics.median(r.restart_s):.2f} / {max(r.restart_s):.2f}" if r.restart_s else "-"
        rows.append(
            f"| {r.flush} | {r.cycles} | {r.namesrv_kills} | {r.consumer_kills} | {r.acked} | {r.send_failures} | "
            f"{r.lost} | {r.corrupt_served} | {r.offset_passed} | {r.duplicates} | {r.stored_twice} | "
            f"{r.config_failures} | {restart} |"
        )
    return "\n".join(rows)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cycles", type=int, default=50, help="broker kill cycles per flush mode (default 50)")
    p.add_argument("--flush", default="both", choices=["both", "ASYNC_FLUSH", "SYNC_FLUSH"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--min-run", type=float, default=0.5, help="seconds of traffic before a kill, at least")
    p.add_argument("--max-run", type=float, default=2.0, help="... at most")
    p.add_argument("--kill-namesrv-every", type=int, default=5, help="kill the name server every N cycles (0: never)")
    p.add_argument("--kill-consumer-every", type=int, default=3, help="kill the consumer every N cycles (0: never)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs, store)")
    p.add_argument("--verbose", action="store_true", help="show the clients' log (retries while the broker is down)")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.CRITICAL)
    modes = ["ASYNC_FLUSH", "SYNC_FLUSH"] if args.flush == "both" else [args.flush]
    reports = []
    for i, mode in enumerate(modes):
        began = time.monotonic()
        r = run_soak(mode, args.cycles, args.seed + i, (args.min_run, args.max_run), args.kill_namesrv_every,
                     args.kill_consumer_every, args.keep)  # fmt: skip
        print(f"{mode}: {r.cycles} cycles in {time.monotonic() - began:.0f} s; ok={r.ok}", flush=True)
        for line in r.problems:
            print("  problem:", line)
        reports.append(r)
    print(format_report(reports))
    return 0 if all(r.ok for r in reports) else 1


if __name__ == "__main__":
    raise SystemExit(main())
