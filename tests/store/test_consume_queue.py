"""ConsumeQueue: one 20-byte unit per dispatched message in its (topic, queue), min/max offsets,
lookup by store time, earliest message time, topics(), scan_consume_queue across CQ files, transaction records.
"""

from __future__ import annotations

import os
import struct

from rmq_core.message import Message

from support import spec_parser as sp
from support.helpers import CLOCK_START, CQ_UNITS, Clock, cq_dir, put_ok

TOPIC = "CQTopic"


def test_units_dispatched_per_queue(backend):
    store = backend.open()
    expected: dict[int, list[tuple[int, int, int]]] = {0: [], 1: [], 2: []}
    for i in range(30):
        q = (i * 7) % 3
        tags = ["TagA", "TagB", None][i % 3]
        r = put_ok(store, Message(TOPIC, f"body-{i}".encode(), tags=tags), q)
        assert r.queue_offset == len(expected[q])
        expected[q].append((r.commitlog_offset, r.wrote_bytes, sp.java_string_hash(tags) if tags else 0))
    store.flush()
    for q in range(3):
        assert sp.read_cq(store.root_dir, TOPIC, q) == expected[q]
        assert store.get_max_offset_in_queue(TOPIC, q) == len(expected[q])
        assert store.get_min_offset_in_queue(TOPIC, q) == 0
    assert store.get_max_offset_in_queue(TOPIC, 3) == 0
    assert store.get_min_offset_in_queue(TOPIC, 3) == 0
    assert store.get_max_offset_in_queue("NoSuchTopic", 0) == 0
    assert not os.path.exists(cq_dir(store.root_dir, "NoSuchTopic", 0))  # reads never create queues
    # each unit points at a record of that queue with that queue offset
    records = dict(sp.read_commitlog(store.root_dir)[0])
    for q, units in expected.items():
        for qo, (off, size, _) in enumerate(units):
            assert records[off].queue_id == q and records[off].queue_offset == qo and records[off].total_size == size


def test_consume_queue_roll_over(backend):
    store = backend.open()
    rs = [put_ok(store, Message(TOPIC, b"r", tags="T"), 0) for _ in range(250)]
    store.flush()
    d = cq_dir(store.root_dir, TOPIC, 0)
    assert sp.list_files(d) == [sp.file_name(0), sp.file_name(2000), sp.file_name(4000)]
    units = sp.read_cq(store.root_dir, TOPIC, 0)
    assert units == [(r.commitlog_offset, r.wrote_bytes, sp.java_string_hash("T")) for r in rs]
    assert store.get_max_offset_in_queue(TOPIC, 0) == 250


def test_offset_in_queue_by_time(backend):
    clock = Clock(step=10)  # one clock call per put: store timestamps CLOCK_START, +10, +20, ...
    store = backend.open(clock=clock)
    for i in range(40):
        put_ok(store, Message(TOPIC, f"{i}".encode()), 1)
    ts = [store.look_message_by_offset(sp.read_cq(store.root_dir, TOPIC, 1)[i][0]).store_timestamp for i in range(40)]
    assert ts == [CLOCK_START + 10 * i for i in range(40)]
    f = store.get_offset_in_queue_by_time
    assert f(TOPIC, 1, 0) == 0
    assert f(TOPIC, 1, CLOCK_START) == 0
    assert f(TOPIC, 1, CLOCK_START + 1) == 1
    assert f(TOPIC, 1, CLOCK_START + 10) == 1
    assert f(TOPIC, 1, CLOCK_START + 255) == 26
    assert f(TOPIC, 1, CLOCK_START + 390) == 39
    assert f(TOPIC, 1, CLOCK_START + 391) == 40  # after the last → max offset
    assert f(TOPIC, 1, CLOCK_START + 10**9) == 40
    assert f(TOPIC, 7, CLOCK_START) == 0
    assert f("NoSuchTopic", 0, CLOCK_START) == 0


def test_offset_in_queue_by_time_across_cq_files(backend):
    clock = Clock(step=3)
    store = backend.open(clock=clock)
    for _i in range(CQ_UNITS * 2 + 50):
        put_ok(store, Message(TOPIC, b"x"), 0)
    for target in (0, 99, 100, 101, 199, 200, 249):
        assert store.get_offset_in_queue_by_time(TOPIC, 0, CLOCK_START + 3 * target) == target
        assert store.get_offset_in_queue_by_time(TOPIC, 0, CLOCK_START + 3 * target - 1) == target


def test_earliest_message_time(backend):
    store = backend.open(clock=Clock(start=CLOCK_START + 5, step=100))
    assert store.get_earliest_message_time(TOPIC, 0) == -1
    put_ok(store, Message("Other", b"o"), 0)  # store ts CLOCK_START+5
    for _i in range(3):
        put_ok(store, Message(TOPIC, b"x"), 0)  # +105, +205, +305
    assert store.get_earliest_message_time(TOPIC, 0) == CLOCK_START + 105
    assert store.get_earliest_message_time("Other", 0) == CLOCK_START + 5
    assert store.get_earliest_message_time(TOPIC, 1) == -1


def test_topics_sorted(backend):
    store = backend.open()
    assert store.topics() == []
    for t, q in [("b", 3), ("a", 10), ("b", 0), ("a", 2), ("%RETRY%g", 0), ("a", 2)]:
        put_ok(store, Message(t, b"."), q)
    expected = [("%RETRY%g", 0), ("a", 2), ("a", 10), ("b", 0), ("b", 3)]
    assert [tuple(x) for x in store.topics()] == expected
    store.close()
    store = backend.open()
    assert [tuple(x) for x in store.topics()] == expected


def test_scan_consume_queue_with_tag_filter_across_files(backend):
    store = backend.open()
    tags = ["TagA", "TagB", "TagC", "TagA", "标签"]
    for i in range(260):
        put_ok(store, Message(TOPIC, f"{i}".encode(), tags=tags[i % len(tags)]), 0)
    store.flush()
    units = sp.read_cq(store.root_dir, TOPIC, 0)
    codes = [sp.java_string_hash("TagA"), sp.java_string_hash("标签")]

    def expect(start: int, stop: int) -> bytes:  # the matching units, raw, in order
        return b"".join(struct.pack(">qiq", *u) for u in units[start:stop] if u[2] in codes)

    nxt, matched = store.scan_consume_queue(TOPIC, 0, 50, 150, codes)  # crosses CQ files at 100 and 200
    assert nxt == 200
    assert matched == expect(50, 200)
    assert len(matched) == 20 * sum(1 for u in units[50:200] if u[2] in codes)
    nxt, matched = store.scan_consume_queue(TOPIC, 0, 0, 10_000, codes)  # stops at the queue's max
    assert nxt == 260 and matched == expect(0, 260)
    nxt, matched = store.scan_consume_queue(TOPIC, 0, 95, 10, None)  # None = everything
    assert nxt == 105
    assert matched == b"".join(struct.pack(">qiq", *u) for u in units[95:105])
    nxt, matched = store.scan_consume_queue(TOPIC, 0, 0, 260, [sp.java_string_hash("nope")])
    assert (nxt, matched) == (260, b"")
    nxt, matched = store.scan_consume_queue(TOPIC, 0, 260, 10, None)
    assert (nxt, matched) == (260, b"")


def test_scan_consume_queue_skips_missing_files(backend):
    store = backend.open()
    for i in range(250):
        put_ok(store, Message(TOPIC, b"m", tags="TagA" if i % 2 else "TagB"), 0)
    store.close()
    os.remove(os.path.join(cq_dir(store.root_dir, TOPIC, 0), sp.file_name(2000)))  # units 100..199
    store = backend.open()
    units = sp.read_cq(store.root_dir, TOPIC, 0)  # file 0 then file 2 (units 0..99, 200..249)
    code = sp.java_string_hash("TagA")
    nxt, matched = store.scan_consume_queue(TOPIC, 0, 0, 1000, [code])
    assert nxt == 250
    assert matched == b"".join(struct.pack(">qiq", *u) for u in units if u[2] == code)


def test_consume_queue_units_raw(backend):
    store = backend.open()
    for _i in range(120):
        put_ok(store, Message(TOPIC, b"u", tags="T"), 4)
    store.flush()
    engine = store._engine
    raw = engine.consume_queue_units(TOPIC, 4, 95, 10)
    units = sp.read_cq(store.root_dir, TOPIC, 4)
    assert sp.parse_cq_units(raw) == units[95:105]


def test_transaction_prepared_and_rollback_not_dispatched(backend):
    store = backend.open()
    put_ok(store, Message(TOPIC, b"normal"), 0)
    prepared = put_ok(store, Message(TOPIC, b"prepared"), 0, sys_flag=0x4)
    rollback = put_ok(store, Message(TOPIC, b"rollback"), 0, sys_flag=0xC)
    commit = put_ok(store, Message(TOPIC, b"commit"), 0, sys_flag=0x8)
    assert prepared.queue_offset == 0 and rollback.queue_offset == 0
    assert commit.queue_offset == 1
    assert store.get_max_offset_in_queue(TOPIC, 0) == 2
    store.flush()
    records = dict(sp.read_commitlog(store.root_dir)[0])
    assert records[prepared.commitlog_offset].queue_offset == 0
    assert records[prepared.commitlog_offset].sys_flag == 0x4
    assert records[rollback.commitlog_offset].queue_offset == 0
    assert records[commit.commitlog_offset].queue_offset == 1
    assert [u[0] for u in sp.read_cq(store.root_dir, TOPIC, 0)] == [0, commit.commitlog_offset]
    g = store.get_message("g", TOPIC, 0, 0, 32)
    assert [m.body for m in g.decode()] == [b"normal", b"commit"]


def test_prepared_transaction_offset_is_written(backend):
    """A committed transactional message records its half message's commitlog offset (4.9's EndTransactionProcessor),
    byte for byte in the record, under both engines; other puts write 0."""
    store = backend.open()
    half = put_ok(store, Message(TOPIC, b"half"), 0)
    commit = store.put_message(Message(TOPIC, b"commit"), 1, sys_flag=0x8, prepared_transaction_offset=777)
    assert commit.ok
    store.flush()
    records = dict(sp.read_commitlog(store.root_dir)[0])
    assert records[commit.commitlog_offset].prepared_transaction_offset == 777
    assert records[half.commitlog_offset].prepared_transaction_offset == 0
    assert store.look_message_by_offset(commit.commitlog_offset).prepared_transaction_offset == 777
