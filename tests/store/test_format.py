"""On-disk format: what the engines write is decoded by the independent spec parser (tests/support/spec_parser.py, written
from RocketMQ 4.9's ``MessageDecoder``/``CommitLog``/``ConsumeQueue`` layouts) and compared field by field; hand-built v2 and IPv6 records (which the
engines never write) are read by decode_messages; file names and sizes follow RocketMQ's layout.
"""

from __future__ import annotations

import os
import struct
import zlib

import pytest

from rmq_core.errors import CorruptRecordError
from rmq_core.message import COMPRESSED_FLAG, Message, decode_messages

from support import spec_parser as sp
from support.helpers import (
    CL_SIZE,
    CLOCK_START,
    CQ_SIZE,
    STORE_HOST,
    UniqIds,
    cl_dir,
    cq_dir,
    cq_file_bytes,
    put_ok,
    small_config,
)

TOPIC = "TopicTest"
BORN_TS = 1_234_567_890_123
BORN_HOST = ("10.1.2.3", 5555)

EXT_SLOTS = (
    "topic", "body", "flag", "properties", "queue_id", "queue_offset", "commitlog_offset", "store_size", "body_crc",
    "sys_flag", "born_timestamp", "born_host", "store_timestamp", "store_host", "reconsume_times",
    "prepared_transaction_offset", "msg_id", "broker_name",
)  # fmt: skip


def _first_uniq() -> str:
    return UniqIds()()


def _assert_ext_matches(ext, rec: sp.Record, offset: int) -> None:
    """A decoded MessageExt equals what the spec parser read at ``offset``."""
    for slot in EXT_SLOTS:  # every slot is set (the engine builds instances without __init__)
        getattr(ext, slot)
    assert ext.topic == rec.topic
    assert ext.body == rec.body
    assert ext.flag == rec.flag
    assert ext.properties == rec.properties
    assert ext.queue_id == rec.queue_id
    assert ext.queue_offset == rec.queue_offset
    assert ext.commitlog_offset == rec.physical_offset == offset
    assert ext.store_size == rec.total_size
    assert ext.body_crc == rec.body_crc
    assert ext.sys_flag == rec.sys_flag
    assert ext.born_timestamp == rec.born_timestamp
    assert tuple(ext.born_host) == rec.born_host
    assert ext.store_timestamp == rec.store_timestamp
    assert tuple(ext.store_host) == rec.store_host
    assert ext.reconsume_times == rec.reconsume_times
    assert ext.prepared_transaction_offset == rec.prepared_transaction_offset
    assert ext.msg_id == sp.offset_msg_id(rec.store_host, offset)
    assert ext.broker_name is None


def test_record_bytes_field_by_field(backend):
    store = backend.open()
    msg = Message(TOPIC, b"Hello RocketMQ", tags="TagA", keys=["k1", "k2"], properties={"color": "red"}, flag=7)
    r = put_ok(store, msg, 3, born_host=BORN_HOST, born_timestamp=BORN_TS, reconsume_times=2)
    expected_props = b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02color\x01red\x02UNIQ_KEY\x01" + _first_uniq().encode() + b"\x02"
    expected_len = 91 + len(b"Hello RocketMQ") + len(TOPIC) + len(expected_props)
    assert (r.commitlog_offset, r.queue_offset, r.wrote_bytes) == (0, 0, expected_len)
    assert r.msg_id == sp.offset_msg_id(STORE_HOST, 0)
    store.flush()

    with open(os.path.join(cl_dir(store.root_dir), sp.file_name(0)), "rb") as f:
        data = f.read()
    rec = sp.parse_record(data, 0)
    assert isinstance(rec, sp.Record)
    assert rec.total_size == expected_len
    assert rec.magic == sp.MAGIC_V1
    assert struct.unpack_from(">i", data, 4)[0] == sp.MAGIC_V1_SIGNED
    assert rec.body_crc == zlib.crc32(b"Hello RocketMQ") & 0x7FFFFFFF
    assert rec.queue_id == 3
    assert rec.flag == 7
    assert rec.queue_offset == 0
    assert rec.physical_offset == 0
    assert rec.sys_flag == 0
    assert rec.born_timestamp == BORN_TS
    assert rec.born_host == BORN_HOST
    assert rec.store_timestamp == CLOCK_START
    assert rec.store_host == STORE_HOST
    assert rec.reconsume_times == 2
    assert rec.prepared_transaction_offset == 0
    assert rec.body == b"Hello RocketMQ"
    assert data[84:88] == struct.pack(">i", 14)  # BODYLENGTH at 84 for IPv4 hosts
    assert data[88 + 14] == len(TOPIC)  # 1-byte topic length (v1)
    assert rec.topic == TOPIC
    assert rec.properties_raw == expected_props
    assert rec.properties["TAGS"] == "TagA"
    assert rec.properties["KEYS"] == "k1 k2"
    assert rec.properties["UNIQ_KEY"] == _first_uniq()
    # the engine wrote exactly this (the spec encoder reproduces it byte for byte)
    assert data[:expected_len] == sp.build_record(
        topic=TOPIC, body=b"Hello RocketMQ", properties=expected_props, queue_id=3, flag=7, queue_offset=0,
        physical_offset=0, born_timestamp=BORN_TS, born_host=BORN_HOST, store_timestamp=CLOCK_START,
        store_host=STORE_HOST, reconsume_times=2,
    )  # fmt: skip
    assert data[expected_len:] == bytes(len(data) - expected_len)  # nothing else written


def test_consecutive_records_offsets(backend):
    store = backend.open()
    results = [put_ok(store, Message(TOPIC, bytes([i]) * (10 + i), tags="T"), i % 2) for i in range(6)]
    store.flush()
    records, blanks, end = sp.read_commitlog(store.root_dir)
    assert blanks == []
    assert [off for off, _ in records] == [r.commitlog_offset for r in results]
    pos = 0
    per_queue = {0: 0, 1: 0}
    for i, ((off, rec), res) in enumerate(zip(records, results)):
        assert off == pos == rec.physical_offset
        assert rec.queue_id == i % 2
        assert rec.queue_offset == res.queue_offset == per_queue[i % 2]
        assert rec.total_size == res.wrote_bytes
        assert rec.crc_ok
        per_queue[i % 2] += 1
        pos += rec.total_size
    assert end == pos == store.max_physical_offset


@pytest.mark.parametrize(
    "tags, code",
    [
        ("TagA", 2598919),
        ("TagB", 2598920),
        ("polygenelubricants", -2147483648),  # hashCode == Integer.MIN_VALUE: sign extension matters
        ("日本", 835047),  # UTF-16 code units 0x65E5, 0x672C
        ("😀", 1772899),  # surrogate pair 0xD83D 0xDE00, not the code point 0x1F600
        (None, 0),
    ],
)
def test_consume_queue_unit_bytes(backend, tags, code):
    assert tags is None or sp.java_string_hash(tags) == code  # the table agrees with Java's algorithm
    store = backend.open()
    put_ok(store, Message(TOPIC, b"x", tags="Other"), 0)
    r = put_ok(store, Message(TOPIC, b"payload", tags=tags), 0)
    store.flush()
    data = cq_file_bytes(store.root_dir, TOPIC, 0)
    assert len(data) == CQ_SIZE
    unit = data[20:40]
    assert unit == struct.pack(">qiq", r.commitlog_offset, r.wrote_bytes, code)
    assert sp.parse_cq_units(unit) == [(r.commitlog_offset, r.wrote_bytes, code)]
    assert data[40:] == bytes(CQ_SIZE - 40)


def test_decode_of_stored_record_matches_spec_parser(backend):
    store = backend.open()
    put_ok(store, Message(TOPIC, b"first", tags="TagA"), 1, born_host=BORN_HOST, born_timestamp=BORN_TS)
    r = put_ok(
        store, Message(TOPIC, "ünïcode body ✓".encode(), tags="标签", keys="a b", flag=-5), 1,
        born_host=BORN_HOST, born_timestamp=BORN_TS, reconsume_times=16,
    )  # fmt: skip
    store.flush()
    raw = sp.read_commitlog(store.root_dir)[0]
    off, rec = raw[1]
    assert off == r.commitlog_offset
    for ext in (backend.impl.decode_messages(rec.raw)[0], decode_messages(rec.raw)[0]):
        _assert_ext_matches(ext, rec, off)
    assert rec.flag == -5
    # two records concatenated decode to two messages, in order
    both = raw[0][1].raw + rec.raw
    exts = backend.impl.decode_messages(both)
    assert [e.body for e in exts] == [b"first", "ünïcode body ✓".encode()]
    looked = store.look_message_by_offset(off)
    _assert_ext_matches(looked, rec, off)


def test_decode_v2_record(backend):
    long_topic = "T" * 200  # v2 exists for topics longer than 127 chars
    props = {"TAGS": "TagV2", "UNIQ_KEY": "ABC"}
    for topic in (long_topic, "short"):
        raw = sp.build_record(
            topic=topic, body=b"v2 body", properties=props, queue_id=2, queue_offset=9, physical_offset=4096,
            born_timestamp=BORN_TS, born_host=BORN_HOST, store_timestamp=BORN_TS + 1, version=2,
        )  # fmt: skip
        assert struct.unpack_from(">I", raw, 4)[0] == 0xDAA320AB
        rec = sp.parse_record(raw)
        (ext,) = backend.impl.decode_messages(raw)
        _assert_ext_matches(ext, rec, 4096)
        assert ext.topic == topic
        assert ext.properties == props
        # mixed v1 + v2 in one body
        v1 = sp.build_record(topic="v1topic", body=b"one", physical_offset=0)
        exts = backend.impl.decode_messages(v1 + raw)
        assert [(e.topic, e.body) for e in exts] == [("v1topic", b"one"), (topic, b"v2 body")]


def test_decode_ipv6_hosts(backend):
    born = ("2001:db8::1", 40000)
    store_h = ("fe80::1234:5678", 10911)
    raw = sp.build_record(
        topic="V6", body=b"six", properties={"TAGS": "x"}, physical_offset=77, born_host=born, store_host=store_h,
        born_timestamp=BORN_TS, store_timestamp=BORN_TS,
    )  # fmt: skip
    assert len(raw) == sp.record_length("V6", 3, {"TAGS": "x"}, v6_hosts=2)
    rec = sp.parse_record(raw)
    assert rec.sys_flag == 0x30
    (ext,) = backend.impl.decode_messages(raw)
    _assert_ext_matches(ext, rec, 77)
    assert tuple(ext.born_host) == born
    assert tuple(ext.store_host) == store_h
    assert len(ext.msg_id) == 56  # 16 + 4 + 8 bytes


def test_store_writes_ipv6_born_host(backend):
    store = backend.open()
    r = put_ok(store, Message(TOPIC, b"b", tags="t"), 0, born_host=("::1", 7), born_timestamp=BORN_TS)
    store.flush()
    (off, rec), = sp.read_commitlog(store.root_dir)[0]  # fmt: skip
    assert rec.sys_flag & 0x10 and not rec.sys_flag & 0x20
    assert rec.born_host == ("::1", 7)
    assert rec.total_size == r.wrote_bytes == sp.record_length(TOPIC, 1, rec.properties_raw, v6_hosts=1)
    _assert_ext_matches(store.look_message_by_offset(off), rec, off)


def test_store_writes_ipv6_store_host(backend):
    store = backend.open(config=small_config(store_host=("2001:db8::2", 10911)))
    r = put_ok(store, Message(TOPIC, b"b"), 0)
    store.flush()
    (_off, rec), = sp.read_commitlog(store.root_dir)[0]  # fmt: skip
    assert rec.sys_flag & 0x20 and not rec.sys_flag & 0x10
    assert rec.store_host == ("2001:db8::2", 10911)
    assert r.msg_id == sp.offset_msg_id(("2001:db8::2", 10911), 0)
    assert len(r.msg_id) == 56


def test_compressed_body_stored_as_is(backend):
    plain = b"compress me " * 100
    stored = zlib.compress(plain)
    store = backend.open()
    put_ok(store, Message(TOPIC, stored), 0, sys_flag=COMPRESSED_FLAG)
    store.flush()
    (_off, rec), = sp.read_commitlog(store.root_dir)[0]  # fmt: skip
    assert rec.sys_flag == COMPRESSED_FLAG
    assert rec.body == stored and rec.body_crc == sp.masked_crc32(stored)
    assert backend.impl.decode_messages(rec.raw)[0].body == stored  # the engine returns the stored body
    assert decode_messages(rec.raw)[0].body == plain  # the facade inflates
    assert decode_messages(rec.raw, decompress=False)[0].body == stored


def test_file_names_and_sizes(backend):
    store = backend.open()
    body = b"z" * 10_000
    for _i in range(14):  # > 2 CommitLog files of 64 KiB
        put_ok(store, Message(TOPIC, body), 0)
    for _i in range(230):  # 3 ConsumeQueue files of 100 units
        put_ok(store, Message("small", b"s"), 5)
    store.flush()
    root = store.root_dir
    cl = sp.list_files(cl_dir(root))
    assert len(cl) >= 3
    assert cl[:3] == ["00000000000000000000", "00000000000000065536", "00000000000000131072"]
    for name in cl:
        assert len(name) == 20 and name.isdigit() and int(name) % CL_SIZE == 0
        assert os.path.getsize(os.path.join(cl_dir(root), name)) == CL_SIZE
    cq = sp.list_files(cq_dir(root, "small", 5))
    assert cq == ["00000000000000000000", "00000000000000002000", "00000000000000004000"]
    for name in cq:
        assert os.path.getsize(os.path.join(cq_dir(root, "small", 5), name)) == CQ_SIZE
    assert os.path.isdir(os.path.join(root, "config"))
    assert os.path.exists(os.path.join(root, "abort"))
    assert os.path.exists(os.path.join(root, "lock"))
    assert os.path.getsize(os.path.join(root, "checkpoint")) == 4096
    store.close()
    assert not os.path.exists(os.path.join(root, "abort"))


def test_consume_queue_size_rounded_up_to_units(backend):
    store = backend.open(config=small_config(mapped_file_size_consume_queue=2010))
    for _ in range(102):
        put_ok(store, Message(TOPIC, b"r"), 0)
    store.flush()
    d = cq_dir(store.root_dir, TOPIC, 0)
    assert sp.list_files(d) == ["00000000000000000000", "00000000000000002020"]  # 101 units per file
    assert all(os.path.getsize(os.path.join(d, n)) == 2020 for n in sp.list_files(d))
    assert len(sp.read_cq(store.root_dir, TOPIC, 0)) == 102


def test_decode_rejects_blank_and_truncated(backend):
    good = sp.build_record(topic="t", body=b"ok")
    blank = struct.pack(">iI", 64, sp.BLANK_MAGIC) + bytes(56)
    with pytest.raises(CorruptRecordError) as ei:
        backend.impl.decode_messages(good + blank)
    assert ei.value.offset == len(good)
    assert f"offset {len(good)}" in str(ei.value)
    with pytest.raises(CorruptRecordError) as ei:
        backend.impl.decode_messages(good + good[:50])
    assert ei.value.offset == len(good)
    with pytest.raises(CorruptRecordError) as ei:
        backend.impl.decode_messages(b"\x00\x00\x00\x70" + b"\x12\x34\x56\x78" + bytes(104))
    assert ei.value.offset == 0
    assert backend.impl.decode_messages(b"") == []


def test_properties_codec(backend):
    impl = backend.impl
    props = {"TAGS": "TagA", "KEYS": "k1 k2", "ünï": "cødé ✓", "UNIQ_KEY": "ABC"}
    enc = impl.encode_properties(props)
    assert enc == sp.encode_properties(props)
    assert impl.decode_properties(enc) == props
    # string2messageProperties edge rules: short segments skipped, separator at 0 or last char skipped, later wins
    raw = b"ab\x02\x01xy\x02k\x01\x02a\x011\x02a\x012\x02zz\x02q\x01r"
    assert impl.decode_properties(raw) == sp.parse_properties(raw) == {"a": "2", "q": "r"}
    assert impl.decode_properties(b"") == {}
    assert impl.decode_properties(b"k\x01\xff\xfe\x02") == {"k": "\ufffd\ufffd"}
    assert impl.decode_properties(b"k\x01v\x01w\x02") == {"k": "v\x01w"}  # split at the first \x01 only


def test_offset_msg_id_and_tags_hash_functions(backend):
    impl = backend.impl
    assert impl.create_offset_msg_id(("127.0.0.1", 10911), 0) == "7F00000100002A9F0000000000000000"
    assert impl.create_offset_msg_id(("10.1.2.3", 5555), 123456789) == sp.offset_msg_id(("10.1.2.3", 5555), 123456789)
    assert impl.create_offset_msg_id(("::1", 1), 5) == sp.offset_msg_id(("::1", 1), 5)
    for s in ("TagA", "", "polygenelubricants", "日本", "😀", "*", "a" * 1000):
        assert impl.tags_hash(s) == sp.java_string_hash(s)


@pytest.mark.parametrize(
    "born,store_h",
    [(("10.1.2.3", 5555), ("127.0.0.1", 10911)), (("2001:db8::1", 40000), ("10.0.0.9", 10911)),
     (("10.0.0.8", 1), ("fe80::1234:5678", 10911))],
)  # fmt: skip
def test_record_accessors_equal_the_decoder(born, store_h):
    """The format module's per-field accessors (what the pull and query processors use) read what decode_messages
    and the independent spec parser read, for IPv4 and IPv6 hosts, at any position of a pull body."""
    from rmq_core.format import message as fm

    recs = [
        sp.build_record(
            topic="Acc", body=b"x" * n, properties={"TAGS": "t"}, physical_offset=1000 + n, born_host=born,
            store_host=store_h, born_timestamp=BORN_TS + n, store_timestamp=BORN_TS + 2 * n,
        )
        for n in (1, 7, 300)
    ]  # fmt: skip
    body = b"".join(recs)
    walked = list(fm.walk_records(body))
    assert walked == [(sum(len(r) for r in recs[:i]), len(recs[i])) for i in range(3)]
    for (pos, size), ext, raw in zip(walked, decode_messages(body), recs, strict=True):
        rec = sp.parse_record(raw)
        assert fm.record_total_size(body, pos) == size == ext.store_size
        assert fm.is_message_magic(fm.record_magic(body, pos))
        assert fm.record_physical_offset(body, pos) == ext.commitlog_offset == rec.physical_offset
        assert fm.record_queue_offset(body, pos) == ext.queue_offset
        assert fm.record_sys_flag(body, pos) == ext.sys_flag == rec.sys_flag
        assert fm.record_born_timestamp(body, pos) == ext.born_timestamp
        assert fm.record_born_host(body, pos) == tuple(ext.born_host) == born
        assert fm.record_store_timestamp(body, pos) == ext.store_timestamp
        assert fm.record_store_host(body, pos) == tuple(ext.store_host) == store_h
        assert fm.record_offset_msg_id(body, pos) == ext.msg_id
        assert fm.decode_offset_msg_id(ext.msg_id) == (store_h, ext.commitlog_offset)
        assert fm.record_head_matches(raw, ext.commitlog_offset)
        assert not fm.record_head_matches(raw, ext.commitlog_offset + 1)
    assert not fm.is_message_magic(fm.BLANK_MAGIC)
    assert list(fm.walk_records(body[:-1]))[-1] == walked[-1]  # a torn last record is still walked; callers check
    assert fm.compression_type(fm.COMPRESSED_FLAG | fm.SYSFLAG_COMPRESSION_ZLIB) == fm.COMPRESSION_CODE_ZLIB
    assert fm.compression_type(fm.COMPRESSED_FLAG) == 0
