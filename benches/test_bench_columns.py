"""decode_columns (the Spark executors' hot path), Rust vs the pure-Python twin, on 100,000 records with 100-byte
bodies as a producer writes them (TAGS, KEYS, UNIQ_KEY, WAIT); results are asserted equal before timing. Beside it:
the whole ``records_to_record_batch`` (decode + pyarrow wrapping) and, for scale, ``decode_messages`` (one
MessageExt per record) on the same bytes.

Run: .venv/bin/python -m pytest benches/test_bench_columns.py --benchmark-enable
(``extra_info["messages_per_round"]`` lets ``benches/report.py`` print rows/s.)
"""

from __future__ import annotations

import pytest

from rmq_core import _backend
from rmq_core.format.message import encode_host, encode_properties, encode_record
from rmq_core.message import decode_messages
from rmq_core.spark.arrow_rows import records_to_record_batch

N = 100_000
BODY = 100
BACKENDS = ["rust", "python"]


def _records(n: int = N, size: int = BODY) -> bytes:
    born, store = encode_host(("10.0.0.7", 53211)), encode_host(("10.0.0.1", 10911))
    body = bytes(range(256))[:size]
    out = bytearray()
    for i in range(n):
        props = encode_properties(
            {"TAGS": f"Tag{i % 10}", "KEYS": f"order-{i}", "UNIQ_KEY": f"0A00000700002A9F{i:016X}", "WAIT": "true"}
        )
        out += encode_record(
            queue_id=i % 8, flag=0, queue_offset=i // 8, physical_offset=len(out), sys_flag=0,
            born_timestamp=1_700_000_000_000 + i, born_host_raw=born, store_timestamp=1_700_000_000_001 + i,
            store_host_raw=store, reconsume_times=0, prepared_transaction_offset=0, body=body,
            topic=b"BenchTopic", properties=props,
        )  # fmt: skip
    return bytes(out)


@pytest.fixture(scope="module")
def records() -> bytes:
    buf = _records()
    rust = _backend.load("rust").decode_columns(buf)
    assert rust["num_rows"] == N
    assert rust == _backend.load("python").decode_columns(buf)  # same buffers before timing
    return buf


@pytest.mark.parametrize("backend", BACKENDS)
def test_decode_columns_100k_x_100b(benchmark, backend, records):
    benchmark.group = "decode_columns-100k-100B"
    benchmark.extra_info["messages_per_round"] = N
    impl = _backend.load(backend)
    if backend == "python":
        cols = benchmark.pedantic(impl.decode_columns, args=(records,), rounds=3)
    else:
        cols = benchmark(impl.decode_columns, records)
    assert cols["num_rows"] == N


@pytest.mark.parametrize("backend", ["rust"])
def test_decode_columns_100k_tag_filter_10pct(benchmark, backend, records):
    benchmark.group = "decode_columns-100k-100B-tag-10pct"
    benchmark.extra_info["messages_per_round"] = N
    cols = benchmark(_backend.load(backend).decode_columns, records, ["Tag3"])
    assert cols["num_rows"] == N // 10


@pytest.mark.parametrize("backend", ["rust"])
def test_record_batch_100k_x_100b(benchmark, backend, records):
    benchmark.group = "record_batch-100k-100B"
    benchmark.extra_info["messages_per_round"] = N
    batch = benchmark(records_to_record_batch, records, "broker-a")
    assert batch.num_rows == N


@pytest.mark.parametrize("backend", ["rust"])
def test_decode_messages_100k_x_100b(benchmark, backend, records):
    benchmark.group = "decode_messages-100k-100B"
    benchmark.extra_info["messages_per_round"] = N
    msgs = benchmark.pedantic(decode_messages, args=(records,), rounds=5)
    assert len(msgs) == N


@pytest.fixture(scope="module")
def interleaved(tmp_path_factory: pytest.TempPathFactory):
    """A 16 MiB mapped file and 8,192 runs of 253 bytes 2,024 bytes apart: one queue's records of a chunk the
    ``path`` source reads, written round robin over 8 queues (the layout of benches/bench_spark.py's store)."""
    import mmap

    import numpy as np

    path = tmp_path_factory.mktemp("gather") / "commitlog"
    path.write_bytes(bytes(range(256)) * (16 * 4096))
    starts = np.arange(8192, dtype=np.int64) * 2024
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        yield m, starts, starts + 253


@pytest.mark.parametrize("backend", BACKENDS)
def test_gather_runs_8192_records_of_an_mmap(benchmark, backend, interleaved):
    benchmark.group = "gather_runs-8192x253B"
    benchmark.extra_info["messages_per_round"] = 8192
    m, starts, ends = interleaved
    out = benchmark(_backend.load(backend).gather_runs, m, starts, ends)
    assert len(out) == 8192 * 253
    del out  # a view of the mmap must not outlive the fixture
