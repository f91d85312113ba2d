"""decode_columns (Rust and the Python twin) and spark.arrow_rows: every column of every row equals what
rmq_core.message.decode_messages gives for the same bytes (records built by the independent spec parser: v1/v2,
IPv6 hosts, zlib bodies, missing tags/keys, unicode, empty bodies, many and duplicate properties); the two backends
return identical buffers; the tag and start-offset filters; corrupt input raises and returns nothing; the
RecordBatch schema is the one PySpark demands; a 100k-record batch converts to Python/pandas rows equal to the
decode_messages view.
"""

from __future__ import annotations

import random
import struct
import zlib

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq_core import _backend
from rmq_core.errors import CorruptRecordError
from rmq_core.message import decode_messages
from rmq_core.spark.arrow_rows import SCHEMA, SPARK_SCHEMA_DDL, columns_to_record_batch, records_to_record_batch

from support import spec_parser as sp

BACKENDS = ("rust", "python")
COMPRESSED = 0x1
ZLIB_TYPE = 0x300
COLUMNS = [
    "topic", "broker_name", "queue_id", "queue_offset", "commitlog_offset", "msg_id", "tags", "keys", "body",
    "properties", "born_timestamp", "store_timestamp", "reconsume_times",
]  # fmt: skip


def _rec(i: int, **kw) -> bytes:
    args = dict(
        topic="TopicTest",
        body=b"body-%d" % i,
        properties={"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": f"{i:032X}"},
        queue_id=i % 4,
        queue_offset=i,
        physical_offset=1000 * i,
        born_timestamp=1_700_000_000_000 + i,
        store_timestamp=1_700_000_000_500 + i,
        reconsume_times=i % 3,
        born_host=("10.0.0.1", 5555),
        store_host=("127.0.0.1", 10911),
    )
    args.update(kw)
    return sp.build_record(**args)


def _mixed() -> bytes:
    """One buffer holding every shape of record the decoder must handle."""
    many = {f"p{j:03d}": f"v{j}" * (j % 5 + 1) for j in range(300)}
    parts = [
        _rec(0),
        _rec(1, version=2, topic="T" * 200),  # v2: 2-byte topic length
        _rec(2, version=2),
        _rec(3, born_host=("2001:db8::1", 40000), store_host=("fe80::1234:5678", 10911)),
        _rec(4, store_host=("::1", 7)),
        _rec(5, born_host=("::ffff:1.2.3.4", 1)),
        _rec(6, body=zlib.compress(b"compressed " * 500), sys_flag=COMPRESSED),
        _rec(7, body=zlib.compress(b"zlib type 3", 9), sys_flag=COMPRESSED | ZLIB_TYPE),
        _rec(8, properties={}),  # no tags, no keys, no properties at all
        _rec(9, properties={"KEYS": "only-keys"}),
        _rec(10, properties={"TAGS": "only-tags"}),
        _rec(11, body=b""),
        _rec(12, topic="日本語_topic", properties={"TAGS": "😀", "KEYS": "ключ", "名前": "値 with spaces"}),
        _rec(13, properties=many),
        _rec(14, properties=b"TAGS\x01first\x02KEYS\x01k\x02X\x01x\x02TAGS\x01second\x02\x01bad\x02ab\x02"),
        _rec(15, properties=b"TAGS\x01bad\xffutf8\x02K\xfe\x01v\x02"),  # invalid UTF-8 → U+FFFD
        _rec(16, body=bytes(range(256)) * 40, reconsume_times=16),
        _rec(17, queue_offset=2**40, physical_offset=2**50, born_timestamp=0, store_timestamp=-1),
    ]
    return b"".join(parts)


def _expected(buf: bytes, broker_name: str = "broker-a") -> list[dict]:
    """The decode_messages view of ``buf`` (default backend), as rows of the rocketmq schema (timestamps in ms)."""
    return [
        {
            "topic": m.topic,
            "broker_name": broker_name,
            "queue_id": m.queue_id,
            "queue_offset": m.queue_offset,
            "commitlog_offset": m.commitlog_offset,
            "msg_id": m.msg_id,
            "tags": m.properties.get("TAGS"),
            "keys": m.properties.get("KEYS"),
            "body": m.body,
            "properties": list(m.properties.items()),
            "born_timestamp": m.born_timestamp,
            "store_timestamp": m.store_timestamp,
            "reconsume_times": m.reconsume_times,
        }
        for m in decode_messages(buf)
    ]


def _rows(batch: pa.RecordBatch) -> list[dict]:
    """batch.to_pylist() with timestamps back as integer ms (exact: via int64 microseconds)."""
    cols = {name: batch.column(name) for name in batch.schema.names}
    for ts in ("born_timestamp", "store_timestamp"):
        cols[ts] = pa.array([None if v is None else v // 1000 for v in cols[ts].cast(pa.int64()).to_pylist()])
    return pa.RecordBatch.from_pydict(cols).to_pylist()


def _batch(backend: str, buf: bytes, *args) -> pa.RecordBatch:
    return columns_to_record_batch(_backend.load(backend).decode_columns(buf, *args), "broker-a")


# ------------------------------------------------------------------------------------------------ rows = decode_messages


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_column_equals_decode_messages(backend):
    buf = _mixed()
    batch = _batch(backend, buf)
    batch.validate(full=True)
    assert batch.schema == SCHEMA
    assert batch.num_rows == 18
    assert _rows(batch) == _expected(buf)
    rows = _rows(batch)
    # spot checks that do not lean on decode_messages
    assert rows[1]["topic"] == "T" * 200
    assert len(rows[3]["msg_id"]) == 56 and len(rows[0]["msg_id"]) == 32
    assert rows[6]["body"] == b"compressed " * 500 and rows[7]["body"] == b"zlib type 3"
    assert (rows[8]["tags"], rows[8]["keys"], rows[8]["properties"]) == (None, None, [])
    assert (rows[9]["tags"], rows[9]["keys"]) == (None, "only-keys")
    assert rows[11]["body"] == b""
    assert rows[12]["tags"] == "😀" and rows[12]["topic"] == "日本語_topic"
    assert len(rows[13]["properties"]) == 300
    assert rows[14]["tags"] == "second"
    assert rows[14]["properties"] == [("TAGS", "second"), ("KEYS", "k"), ("X", "x")]
    assert rows[15]["tags"] == "bad\ufffdutf8"
    assert rows[17]["store_timestamp"] == -1 and rows[17]["commitlog_offset"] == 2**50
    # nullable string columns carry a validity bitmap only when they hold a null
    assert batch.column("tags").null_count == 3 and batch.column("topic").null_count == 0
    assert batch.column("broker_name").to_pylist() == ["broker-a"] * 18


def test_backends_return_identical_buffers():
    buf = _mixed()
    rust = _backend.load("rust").decode_columns(buf)
    python = _backend.load("python").decode_columns(buf)
    assert rust.keys() == python.keys()
    for key in rust:
        assert rust[key] == python[key], key
    assert rust["topic"][0] is None  # no null → no bitmap
    assert rust["tags"][0] is not None


def test_rust_buffers_are_zero_copy_read_only_and_compare_as_bytes():
    buf = _mixed()
    cols = _backend.load("rust").decode_columns(buf)
    data = cols["body"][2]
    view = memoryview(data)
    assert view.readonly and view.nbytes == len(data) == len(bytes(data))
    assert pa.py_buffer(data).address == pa.py_buffer(data).address  # wraps, does not copy
    with pytest.raises(TypeError):
        view[0] = 1  # read-only
    del view
    python = _backend.load("python").decode_columns(buf)
    assert data == python["body"][2] and python["body"][2] == data and bytes(data) == python["body"][2]
    assert data != b"other" and data == cols["body"][2]
    assert repr(data) == f"<ColumnBuffer {len(data)} bytes>"


_text = st.text(alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=6)
_record = st.builds(
    lambda i, topic, body, props, flags, v6, version: _rec(
        i,
        topic=topic,
        body=zlib.compress(body) if flags else body,
        properties=props,
        sys_flag=flags,
        store_host=("::2", 9) if v6 else ("1.2.3.4", 9),
        version=version,
    ),
    st.integers(0, 10_000),
    st.text(min_size=1, max_size=20).filter(lambda t: len(t.encode()) < 256),
    st.binary(max_size=64),
    st.one_of(st.dictionaries(_text, _text, max_size=6), st.binary(max_size=40).map(lambda b: b.replace(b"\x00", b""))),
    st.sampled_from([0, COMPRESSED, COMPRESSED | ZLIB_TYPE]),
    st.booleans(),
    st.sampled_from([1, 2]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(_record, max_size=8), tags=st.one_of(st.none(), st.lists(_text, max_size=3)))
def test_random_records_same_buffers_and_rows(records, tags):
    buf = b"".join(records)
    rust = _backend.load("rust").decode_columns(buf, tags)
    assert rust == _backend.load("python").decode_columns(buf, tags)
    expected = _expected(buf)
    if tags is not None:
        expected = [r for r in expected if r["tags"] in tags]
    assert _rows(columns_to_record_batch(rust, "broker-a")) == expected


# ------------------------------------------------------------------------------------------------ filters


@pytest.mark.parametrize("backend", BACKENDS)
def test_tag_filter_keeps_exact_tags_and_drops_untagged(backend):
    buf = b"".join(_rec(i, properties={"TAGS": t} if t else {}) for i, t in enumerate(["A", "B", None, "A", "AB", "b"]))
    assert [r["queue_offset"] for r in _rows(_batch(backend, buf, ["A"]))] == [0, 3]
    assert [r["queue_offset"] for r in _rows(_batch(backend, buf, ["A", "b"]))] == [0, 3, 5]
    assert _batch(backend, buf, []).num_rows == 0  # an empty set keeps nothing
    assert _batch(backend, buf, None).num_rows == 6  # None keeps everything (pass None for "*")
    assert _batch(backend, buf, ["*"]).num_rows == 0  # "*" is not special here


@pytest.mark.parametrize("backend", BACKENDS)
def test_min_queue_offset_and_both_filters(backend):
    buf = b"".join(_rec(i, properties={"TAGS": "even" if i % 2 == 0 else "odd"}) for i in range(10))
    assert [r["queue_offset"] for r in _rows(_batch(backend, buf, None, 7))] == [7, 8, 9]
    assert [r["queue_offset"] for r in _rows(_batch(backend, buf, ["even"], 3))] == [4, 6, 8]
    assert _batch(backend, buf, None, 10).num_rows == 0
    assert _batch(backend, buf, None, -5).num_rows == 10
    batch = records_to_record_batch(buf, "bk", tag_filter=("odd",), min_queue_offset=5)
    assert _rows(batch) == [r for r in _expected(buf, "bk") if r["tags"] == "odd" and r["queue_offset"] >= 5]


@pytest.mark.parametrize("backend", BACKENDS)
def test_filtered_out_rows_are_not_inflated_but_still_checked(backend):
    bad_zlib = _rec(1, body=b"not zlib at all", sys_flag=COMPRESSED, properties={"TAGS": "skip"})
    good = _rec(2, properties={"TAGS": "keep"})
    impl = _backend.load(backend)
    assert impl.decode_columns(bad_zlib + good, ["keep"])["num_rows"] == 1
    assert impl.decode_columns(bad_zlib + good, None, 2)["num_rows"] == 1
    truncated = good[:-1]
    with pytest.raises(CorruptRecordError):
        impl.decode_columns(good + truncated, ["nothing-matches"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_arguments(backend):
    impl = _backend.load(backend)
    with pytest.raises(TypeError):
        impl.decode_columns(b"", "TagA")  # a str is not a list of tags
    with pytest.raises(TypeError):
        impl.decode_columns(b"", ["a", 1])
    with pytest.raises(TypeError):
        impl.decode_columns(b"", None, 1.5)
    with pytest.raises(TypeError):
        records_to_record_batch(b"", None)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------ bad input, empty input


@pytest.mark.parametrize("backend", BACKENDS)
def test_corrupt_input_raises_with_the_record_offset(backend):
    impl = _backend.load(backend)
    a, b = _rec(0), _rec(1)
    bad_magic = bytearray(b)
    struct.pack_into(">I", bad_magic, 4, 0xDEADBEEF)
    blank = struct.pack(">iI", 64, 0xCBD43194) + bytes(56)
    bad_lengths = bytearray(b)
    struct.pack_into(">i", bad_lengths, 0, len(b) + 10)
    bad_zlib = _rec(2, body=b"\x78\x9c garbage", sys_flag=COMPRESSED)
    for tail in (b[:-1], b[:5], bytes(bad_magic), blank, bytes(bad_lengths) + bytes(10), bad_zlib):
        with pytest.raises(CorruptRecordError, match=f"offset {len(a)}") as e:
            impl.decode_columns(a + tail)
        assert e.value.offset == len(a)
    with pytest.raises(CorruptRecordError) as e:
        impl.decode_columns(bytes(60))  # zeros: bad magic at 0
    assert e.value.offset == 0
    with pytest.raises(ValueError, match="unsupported compression type 2"):  # LZ4: not built in
        impl.decode_columns(a + _rec(3, body=b"x", sys_flag=COMPRESSED | 0x200))


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_buffer_is_zero_rows(backend):
    cols = _backend.load(backend).decode_columns(b"")
    assert cols["num_rows"] == 0
    batch = columns_to_record_batch(cols, "b")
    batch.validate(full=True)
    assert batch.num_rows == 0 and batch.schema == SCHEMA


# ------------------------------------------------------------------------------------------------ schema


def _ddl_to_struct(ddl: str):
    from pyspark.sql import types as T

    simple = {
        "string": T.StringType(),
        "int": T.IntegerType(),
        "long": T.LongType(),
        "binary": T.BinaryType(),
        "timestamp": T.TimestampType(),
        "map<string,string>": T.MapType(T.StringType(), T.StringType(), True),
    }
    fields = []
    for part in ddl.split(", "):
        name, typ = part.split(" ", 1)
        fields.append(T.StructField(name, simple[typ], True))
    return T.StructType(fields)


def test_schema_is_what_pyspark_expects_for_the_ddl():
    from pyspark.sql.pandas.types import to_arrow_schema

    struct_type = _ddl_to_struct(SPARK_SCHEMA_DDL)
    assert struct_type.fieldNames() == COLUMNS
    # PySpark's Python data source compares a yielded batch's schema with exactly this (plan_data_source_read.py)
    assert to_arrow_schema(struct_type, timezone="UTC").equals(SCHEMA)


# ------------------------------------------------------------------------------------------------ 100k rows


def _bulk(n: int) -> bytes:
    """n records: 1000 distinct templates (tags, keys, compressed, IPv6…) repeated with patched offsets."""
    templates = []
    for i in range(1000):
        kw: dict = {"body": bytes([i % 251]) * 100}
        if i % 10 == 0:
            kw["properties"] = {"UNIQ_KEY": f"{i:032X}"}
        if i % 97 == 0:
            kw.update(body=zlib.compress(b"z" * 100), sys_flag=COMPRESSED)
        if i % 89 == 0:
            kw["store_host"] = ("::1", 10911)
        templates.append(_rec(i, **kw))
    out = bytearray()
    for i in range(n):
        t = templates[i % 1000]
        start = len(out)
        out += t
        struct.pack_into(">qq", out, start + 20, i, start)  # QUEUEOFFSET, PHYSICALOFFSET
    return bytes(out)


def test_record_batch_of_100k_rows_matches_decode_messages_sampled():
    import pandas as pd

    buf = _bulk(100_000)
    batch = records_to_record_batch(buf, "broker-a")
    batch.validate(full=True)
    assert batch.num_rows == 100_000
    assert batch.column("queue_offset").to_pylist() == list(range(100_000))
    starts = batch.column("commitlog_offset").to_pylist()  # _bulk sets PHYSICALOFFSET = index in buf
    assert starts[0] == 0 and starts == sorted(starts)
    ends = starts[1:] + [len(buf)]
    sample = random.Random(5).sample(range(100_000), 1000) + [0, 99_999]
    for i in sample:  # row i == decode_messages of record i alone
        (expected,) = _expected(buf[starts[i] : ends[i]])
        assert _rows(batch.slice(i, 1)) == [expected], i
    frame = batch.to_pandas()
    assert list(frame.columns) == COLUMNS and len(frame) == 100_000
    for i in sample[:200]:
        (expected,) = _expected(buf[starts[i] : ends[i]])
        row = frame.iloc[i]
        for name in ("topic", "broker_name", "queue_id", "queue_offset", "commitlog_offset", "msg_id", "body"):
            assert row[name] == expected[name], (i, name)
        for name in ("tags", "keys"):
            assert (None if pd.isna(row[name]) else row[name]) == expected[name], (i, name)
        assert list(row["properties"]) == expected["properties"]
        assert row["store_timestamp"].value // 1_000_000 == expected["store_timestamp"]
        assert str(row["born_timestamp"].tz) == "UTC"


# --- gather_runs: a ConsumeQueue range's records out of a mapped CommitLog file ------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_gather_runs_concatenates_runs_of_an_mmap_and_refuses_bad_runs(backend, tmp_path):
    import mmap

    import numpy as np

    gather = _backend.load(backend).gather_runs
    path = tmp_path / "f"
    data = bytes(random.Random(7).randrange(256) for _ in range(10_000))
    path.write_bytes(data)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        starts = np.array([9000, 0, 4096, 77, 77, 9990], dtype=np.int64)
        ends = np.array([9100, 10, 4500, 77, 200, 10_000], dtype=np.int64)
        out = gather(m, starts, ends)
        assert out == b"".join(data[a:b] for a, b in zip(starts, ends))
        assert bytes(out) == b"".join(data[a:b] for a, b in zip(starts, ends))
        assert gather(m, np.array([], np.int64), np.array([], np.int64)) == b""
        for bad_starts, bad_ends, match in (
            ([0, 5], [1], "2 run starts but 1 run ends"),
            ([5], [10_001], r"run 0 \[5, 10001\) is outside the 10000-byte source"),
            ([0, 6], [1, 5], r"run 1 \[6, 5\)"),
            ([-1], [3], r"run 0 \[-1, 3\)"),
        ):
            with pytest.raises(ValueError, match=match):
                gather(m, np.array(bad_starts, np.int64), np.array(bad_ends, np.int64))


@pytest.mark.parametrize("backend", BACKENDS)
def test_decode_columns_takes_any_byte_buffer(backend):
    """What gather_runs returns (a Rust ColumnBuffer, or bytes), a memoryview or a bytearray decode like bytes."""
    impl = _backend.load(backend)
    buf = b"".join(_rec(i) for i in range(5))
    want = impl.decode_columns(buf)
    import numpy as np

    gathered = impl.gather_runs(buf, np.array([0], np.int64), np.array([len(buf)], np.int64))
    for other in (gathered, memoryview(buf), bytearray(buf)):
        got = impl.decode_columns(other)
        assert got.keys() == want.keys()
        assert all(got[k] == want[k] for k in want)
