"""The store API as a user calls it, the Python objects' own cost counted, Rust vs the Python twin.

    .venv/bin/python benches/bench_store_api.py [--messages 100000] [--rounds 7] [--decodes 3000] [--json out.json]
    .venv/bin/python benches/bench_store_api.py --index-cost [--messages 100000] [--rounds 7]

What it measures (targets in brackets):
  put+build   build ``--messages`` ``Message(topic, 128 B body, tags=...)`` objects and the ``[(msg, queue_id)]`` batch,
              then ``MessageStore.put_messages(batch)`` (the store assigns UNIQ_KEY with its default generator):
              messages per second of the whole, the objects' construction in the timed part     [≥ 1.5 M msg/s]
  put         the same ``put_messages`` call alone (messages and batch built before the clock starts)
  decode      ``decode_messages`` of a 32 × 1 KiB pull body (from ``get_message``) and reading ``.topic``, ``.body``
              and ``.properties`` of every returned ``MessageExt``; messages per second            [≥ 1.5 M msg/s]
  decode live the same, the messages kept alive as a push consumer's ProcessQueues keep them (the last 32,000)
              beside 100,000 other live objects, the cycle collector on: what a consumer process lives with
  --index-cost  ``put`` with ``message_index_enable`` on and off (RocketMQ's messageIndexEnable; 4.9's default index
              geometry, every message indexed by its UNIQ_KEY and one KEYS value), per backend, rounds alternating
              on/off: the medians, every run and the off/on ratio (the index build's cost on the put path).
Each round uses a fresh store directory (default StoreConfig, fixed clock); rounds alternate the backends; the
medians and every run are printed, with the Rust / Python ratio, on the wall clock and per CPU second of the calling
thread (the figure to read when other work shares the cores). Before timing, the two backends' results are checked
equal: the same CommitLog bytes for the same batch (a fixed clock; the UNIQ_KEY values, time-based, are checked to be
32 uppercase hex digits and distinct, and the records are compared with them blanked), and the same decoded objects.
The machine is shared: read the ratios, they are measured in one run.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

from rmq_core import _backend
from rmq_core.message import Message, MessageExt, decode_messages
from rmq_core.store import MessageStore, StoreConfig

BACKENDS = ("rust", "python")
TOPIC = "BenchTopic"
TAGS = [f"Tag{i}" for i in range(10)]
QUEUES = 4
CLOCK_MS = 1_700_000_000_000
_UNIQ = re.compile(rb"UNIQ_KEY\x01([0-9A-F]{32})\x02")


def _clock() -> int:
    return CLOCK_MS


def _body(size: int) -> bytes:
    return (bytes(range(256)) * (size // 256 + 1))[:size]


def build_batch(n: int, body: bytes, keys: bool = False) -> list[tuple[Message, int]]:
    """What a user writes: one Message per payload, then the (message, queue id) pairs."""
    msgs = [Message(TOPIC, body, tags=TAGS[i % 10], keys=f"order-{i}" if keys else None) for i in range(n)]
    return [(m, i % QUEUES) for i, m in enumerate(msgs)]


def _open(path: str, backend: str, index: bool = True) -> MessageStore:
    return MessageStore(path, StoreConfig(message_index_enable=index), backend=backend, clock=_clock)


def put_round(
    backend: str, n: int, body: bytes, with_build: bool, index: bool = True, keys: bool = False, warm: bool = False
) -> tuple[float, float]:
    d = tempfile.mkdtemp(prefix="rmq-bench-api-")
    try:
        store = _open(d, backend, index)
        try:
            if warm:  # an untimed put first: the files' pages are mapped, as in a broker that has been running
                assert store.put_messages(build_batch(n, body, keys)).all_ok
            batch = None if with_build else build_batch(n, body, keys)
            gc.collect()
            c0, t0 = time.thread_time(), time.perf_counter()
            if batch is None:
                batch = build_batch(n, body)
            results = store.put_messages(batch)
            dt, cpu = time.perf_counter() - t0, time.thread_time() - c0
            assert len(results) == n and results.all_ok
        finally:
            store.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return n / dt, n / cpu


def index_cost(args: argparse.Namespace, body: bytes) -> int:
    """``--index-cost``: put with the index on and off, per backend (keys on every message)."""
    backends = ("rust",) if args.index_rust_only else BACKENDS
    cases = [(b, w) for b in backends for w in (False, True)]
    runs: dict[tuple[str, bool, bool], list[tuple[float, float]]] = {
        (b, w, i): [] for b, w in cases for i in (True, False)
    }
    for b, w in cases:  # warm-up
        for i in (True, False):
            put_round(b, args.messages, body, False, i, True, w)
    for _ in range(args.rounds):
        for b, w in cases:
            for i in (True, False):
                runs[(b, w, i)].append(put_round(b, args.messages, body, False, i, True, w))
    print(f"put_messages of {args.messages} x {args.size} B (UNIQ_KEY + KEYS each), index on vs off, M msg/s")
    print("(fresh: the first put into a new store; warm: a second put, the files' pages already mapped)")
    for k, clock in enumerate(("wall clock", "per CPU second of the calling thread")):
        print(f"-- {clock}")
        print(f"{'backend':<14} {'on':>8} {'off':>8} {'off/on':>7}   every run (on | off)")
        for b, w in cases:
            on = [t[k] for t in runs[(b, w, True)]]
            off = [t[k] for t in runs[(b, w, False)]]
            mon, moff = statistics.median(on), statistics.median(off)
            label = f"{b} {'warm' if w else 'fresh'}"
            print(f"{label:<14} {mon / 1e6:8.3f} {moff / 1e6:8.3f} {moff / mon:7.2f}   {_fmt(on)} | {_fmt(off)}")
    print(f"(the machine is shared with other work, load average {os.getloadavg()[0]:.1f}; medians)")
    return 0


def decode_round(backend: str, pull_body: bytes, reps: int) -> tuple[float, float]:
    impl = _backend.load(backend)
    saved = _backend.impl
    _backend.impl = impl  # rmq_core.message.decode_messages dispatches through _backend.impl
    try:
        gc.collect()
        c0, t0 = time.thread_time(), time.perf_counter()
        count = 0
        for _ in range(reps):
            for m in decode_messages(pull_body):
                m.topic  # noqa: B018 - reading what a consumer reads is the point
                m.body  # noqa: B018
                m.properties  # noqa: B018
                count += 1
        dt, cpu = time.perf_counter() - t0, time.thread_time() - c0
    finally:
        _backend.impl = saved
    return count / dt, count / cpu


class _Live:
    """One of the other objects a consumer process keeps (a client's tables, futures, callbacks)."""

    def __init__(self, i: int) -> None:
        self.i, self.refs = i, [i]


def decode_live_round(backend: str, pull_body: bytes, reps: int, window: int, heap: int) -> tuple[float, float]:
    """``decode_round`` as a push consumer lives it: the decoded messages stay alive in a window of ``window``
    (its ProcessQueues' cache: pullThresholdForQueue 1,000 × 32 queues) beside ``heap`` other live objects; the
    cycle collector runs as it does in a consumer (default thresholds)."""
    from collections import deque

    impl = _backend.load(backend)
    saved = _backend.impl
    _backend.impl = impl
    others = [_Live(i) for i in range(heap)]
    cached: deque[MessageExt] = deque()
    try:
        gc.collect()
        c0, t0 = time.thread_time(), time.perf_counter()
        count = 0
        for _ in range(reps):
            msgs = decode_messages(pull_body)
            for m in msgs:
                m.topic  # noqa: B018 - reading what a consumer reads is the point
                m.body  # noqa: B018
                m.properties  # noqa: B018
            cached.extend(msgs)
            while len(cached) > window:
                cached.popleft()
            count += len(msgs)
        dt, cpu = time.perf_counter() - t0, time.thread_time() - c0
    finally:
        _backend.impl = saved
        del others, cached
    return count / dt, count / cpu


def check_put_equal(body: bytes) -> None:
    """Both backends write the same records for the same batch (UNIQ_KEY values blanked; they are time-based)."""
    images = []
    for backend in BACKENDS:
        d = tempfile.mkdtemp(prefix="rmq-bench-api-eq-")
        try:
            with _open(d, backend) as s:
                batch = build_batch(2000, body)
                assert s.put_messages(batch).all_ok
                raw = s.read_commit_log(0, s.max_physical_offset)
                ids = _UNIQ.findall(raw)
                assert len(ids) == 2000 and len(set(ids)) == 2000, "UNIQ_KEY missing or repeated"
                assert [m.uniq_key.encode() for m, _ in batch] == ids, "UNIQ_KEY on the objects differs from disk"
                images.append(_UNIQ.sub(b"UNIQ_KEY\x01" + b"0" * 32 + b"\x02", raw))
        finally:
            shutil.rmtree(d, ignore_errors=True)
    assert images[0] == images[1], "the backends wrote different records"


def make_pull_body() -> bytes:
    d = tempfile.mkdtemp(prefix="rmq-bench-api-1k-")
    try:
        with _open(d, "rust") as s:
            assert s.put_messages([(Message(TOPIC, _body(1024), tags=TAGS[i % 10]), 0) for i in range(32)]).all_ok
            r = s.get_message("g", TOPIC, 0, 0, 32)
            assert r.message_count == 32
            return r.body
    finally:
        shutil.rmtree(d, ignore_errors=True)


def check_decode_equal(pull_body: bytes) -> None:
    out = []
    for backend in BACKENDS:
        msgs = _backend.load(backend).decode_messages(pull_body)
        assert len(msgs) == 32 and all(type(m) is MessageExt for m in msgs)
        out.append([m.to_dict() for m in msgs])
    assert out[0] == out[1], "the backends decoded different messages"


def _fmt(rates: list[float]) -> str:
    return ", ".join(f"{r / 1e6:.3f}" for r in rates)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--decodes", type=int, default=3000, help="pull bodies decoded per decode round")
    ap.add_argument("--only", choices=("put", "decode"), default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--index-cost", action="store_true", help="put with the index on vs off (see above)")
    ap.add_argument("--index-rust-only", action="store_true", help="--index-cost on the Rust engine only")
    args = ap.parse_args(argv)

    body = _body(args.size)
    if args.index_cost:
        return index_cost(args, body)
    pull_body = make_pull_body()
    check_put_equal(body)
    check_decode_equal(pull_body)

    cases = []
    if args.only in (None, "put"):
        cases += [("put+build", lambda b: put_round(b, args.messages, body, True))]
        cases += [("put", lambda b: put_round(b, args.messages, body, False))]
    if args.only in (None, "decode"):
        cases += [("decode", lambda b: decode_round(b, pull_body, args.decodes))]
        cases += [("decode live", lambda b: decode_live_round(b, pull_body, args.decodes, 32_000, 100_000))]
    runs: dict[str, dict[str, list[tuple[float, float]]]] = {name: {b: [] for b in BACKENDS} for name, _ in cases}
    for _name, fn in cases:  # warm-up: one untimed round each
        for b in BACKENDS:
            fn(b)
    for _ in range(args.rounds):
        for name, fn in cases:
            for b in BACKENDS:
                runs[name][b].append(fn(b))

    print(f"store API as a user calls it ({args.messages} x {args.size} B put, 32 x 1 KiB decode), M msg/s")
    summary: dict[str, dict[str, object]] = {}
    for k, clock in enumerate(("wall clock", "per CPU second of the calling thread (time.thread_time)")):
        print(f"-- {clock}")
        print(f"{'case':<10} {'rust':>8} {'python':>8} {'ratio':>6}   every run (rust | python)")
        for name, _ in cases:
            rr, pr = ([t[k] for t in runs[name][b]] for b in BACKENDS)
            r, p = statistics.median(rr), statistics.median(pr)
            summary.setdefault(name, {})[("wall" if k == 0 else "cpu")] = {
                "rust_median": r,
                "python_median": p,
                "ratio": r / p,
                "rust_runs": rr,
                "python_runs": pr,
            }
            print(f"{name:<10} {r / 1e6:8.3f} {p / 1e6:8.3f} {r / p:6.2f}   {_fmt(rr)} | {_fmt(pr)}")
    print(f"(the machine is shared with other work, load average {os.getloadavg()[0]:.1f}; medians)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
