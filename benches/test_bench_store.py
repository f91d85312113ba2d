"""Store hot paths, Rust vs the pure-Python twin, on the same fixtures; results are asserted equal before timing.

Run: ./dev bench   (or: .venv/bin/python -m pytest benches --benchmark-enable)
``benches/report.py`` turns a ``--benchmark-json`` file into the ratio table quoted in closing notes.

Targets: Rust ≥ 10x the twin on append and decode, ≥ 30x on the filtered scan; the filtered scan
≥ 100 M units/s; batch append of 128 B messages ≥ 1.5 M messages/s.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile

import pytest

from rmq_core import _backend
from rmq_core.message import Message, MessageExt
from rmq_core.store import GetMessageStatus, MessageStore, StoreConfig

BACKENDS = ["rust", "python"]
APPEND_N = 1000  # messages per timed round
SCAN_UNITS = 1_000_000
TAGS = [f"Tag{i}" for i in range(10)]  # the scan filter matches one of ten: 10%


def _clock() -> int:
    return 1_700_000_000_000


def _uniq() -> str:
    return "0" * 32


def _open(path: str, backend: str, **cfg: object) -> MessageStore:
    return MessageStore(path, StoreConfig(**cfg), backend=backend, clock=_clock, uniq_id=_uniq)


def _messages(n: int, size: int) -> list[Message]:
    body = bytes(range(256)) * (size // 256 + 1)
    return [
        Message("BenchTopic", body[:size], tags=TAGS[i % 10], properties={"UNIQ_KEY": f"{i:032X}"}) for i in range(n)
    ]


@pytest.fixture
def tmpdir_factory_clean():
    dirs: list[str] = []

    def make() -> str:
        d = tempfile.mkdtemp(prefix="rmq-bench-")
        dirs.append(d)
        return d

    yield make
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


# --- append ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [128, 1024], ids=["128B", "1KiB"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_append_single(benchmark, backend, size, tmpdir_factory_clean):
    benchmark.group = f"append-single-{size}B"
    store = _open(tmpdir_factory_clean(), backend)
    msgs = _messages(APPEND_N, size)

    def run() -> int:
        last = None
        for m in msgs:
            last = store.put_message(m, 0)
        return last.queue_offset

    try:
        benchmark.extra_info["messages_per_round"] = APPEND_N
        benchmark(run)
        assert store.get_max_offset_in_queue("BenchTopic", 0) % APPEND_N == 0
    finally:
        store.close()


@pytest.mark.parametrize("size", [128, 1024], ids=["128B", "1KiB"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_append_batch(benchmark, backend, size, tmpdir_factory_clean):
    benchmark.group = f"append-batch-{size}B"
    store = _open(tmpdir_factory_clean(), backend)
    batch = [(m, 0) for m in _messages(APPEND_N, size)]
    try:
        benchmark.extra_info["messages_per_round"] = APPEND_N
        results = benchmark(store.put_messages, batch)
        assert results.all_ok and len(results) == APPEND_N
    finally:
        store.close()


def test_append_bytes_identical(tmpdir_factory_clean):
    """The append benchmarks' two backends write the same bytes (checked once, untimed)."""
    contents = []
    for backend in BACKENDS:
        d = tmpdir_factory_clean()
        with _open(d, backend, mapped_file_size_commit_log=1 << 20) as s:
            s.put_messages([(m, i % 2) for i, m in enumerate(_messages(200, 128))])
            s.put_message(_messages(1, 1024)[0], 1)
            contents.append((s.read_commit_log(0, s.max_physical_offset), s.max_physical_offset))
    assert contents[0] == contents[1]


# --- get_message of 32 x 1 KiB ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def store_1k():
    """4096 messages of 1 KiB in one queue, and the reference answer for offset 0 (from the Rust engine)."""
    d = tempfile.mkdtemp(prefix="rmq-bench-1k-")
    with _open(d, "rust") as s:
        s.put_messages([(m, 0) for m in _messages(4096, 1024)])
        first = s.get_message("g", "BenchTopic", 0, 0, 32)
    yield d, (first.body, first.next_begin_offset)
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_get_message_32x1k(benchmark, backend, store_1k):
    benchmark.group = "get_message-32x1KiB"
    path, want = store_1k
    with _open(path, backend) as s:
        offsets = itertools.cycle(range(0, 4096 - 32, 32))
        benchmark.extra_info["messages_per_round"] = 32
        r = benchmark(lambda: s.get_message("g", "BenchTopic", 0, next(offsets), 32))
        assert r.status == GetMessageStatus.FOUND and r.message_count == 32
        first = s.get_message("g", "BenchTopic", 0, 0, 32)
        assert (first.body, first.next_begin_offset) == want


# --- ConsumeQueue scan of 1,000,000 units with a 10% tag filter -------------------------------------------------
@pytest.fixture(scope="module")
def store_1m():
    d = tempfile.mkdtemp(prefix="rmq-bench-1m-")
    msgs = [
        Message("ScanTopic", b"x" * 16, tags=TAGS[i % 10], properties={"UNIQ_KEY": "0" * 32}) for i in range(10_000)
    ]
    with _open(d, "rust") as s:
        for _ in range(SCAN_UNITS // len(msgs)):
            assert s.put_messages([(m, 0) for m in msgs]).all_ok
        assert s.get_max_offset_in_queue("ScanTopic", 0) == SCAN_UNITS
    yield d
    shutil.rmtree(d, ignore_errors=True)


_SCAN_EXPECTED: dict[str, tuple[int, bytes]] = {}


@pytest.mark.parametrize("backend", BACKENDS)
def test_scan_1m_units_tag_filter_10pct(benchmark, backend, store_1m):
    benchmark.group = "cq-scan-1M-units-10pct"
    code = _backend.load("rust").tags_hash(TAGS[3])
    with _open(store_1m, backend) as s:
        benchmark.extra_info["units_per_round"] = SCAN_UNITS
        if backend == "python":
            result = benchmark.pedantic(s.scan_consume_queue, args=("ScanTopic", 0, 0, SCAN_UNITS, [code]), rounds=3)
        else:
            result = benchmark(s.scan_consume_queue, "ScanTopic", 0, 0, SCAN_UNITS, [code])
    nxt, matched = result
    assert nxt == SCAN_UNITS and len(matched) == SCAN_UNITS // 10 * 20
    prev = _SCAN_EXPECTED.setdefault("r", result)
    assert prev == result


# --- decode of a 32-message pull body ----------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_decode_32_messages(benchmark, backend, store_1k):
    benchmark.group = "decode-32-messages"
    body = store_1k[1][0]
    impl = _backend.load(backend)
    benchmark.extra_info["messages_per_round"] = 32
    msgs = benchmark(impl.decode_messages, body)
    assert len(msgs) == 32 and all(isinstance(m, MessageExt) for m in msgs)
    other = _backend.load("python" if backend == "rust" else "rust").decode_messages(body)
    assert [m.to_dict() for m in msgs] == [m.to_dict() for m in other]
