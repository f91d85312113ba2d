"""get_message (DefaultMessageStore.getMessage 4.9): every GetMessageStatus with its exact
next_begin_offset, bodies equal to the stored records byte for byte, batch-full rules in memory and on disk,
filter skips, the 16,000-byte scan cap, one ConsumeQueue file per call, the property filter hook,
suggest_pulling_from_slave and max_phy_offset_pulling.
"""

from __future__ import annotations

import os

import pytest

from rmq_core.errors import StoreError
from rmq_core.filter import MessageSelector
from rmq_core.message import Message
from rmq_core.store import GetMessageStatus as S

from support import spec_parser as sp
from support.helpers import CL_SIZE, cq_dir, put_ok, read_raw, small_config

T = "GM"
OVERHEAD = 91 + len(T) + len(b"UNIQ_KEY\x01") + 32 + 1  # record bytes around the body (no tags)


def sized(n: int) -> bytes:
    """A body that makes a record of exactly ``n`` bytes (no tags)."""
    return b"s" * (n - OVERHEAD)


def fill(store, n, qid=0, body=lambda i: f"msg-{i}".encode(), tags=lambda i: None, topic=T, props=lambda i: None):
    return [put_ok(store, Message(topic, body(i), tags=tags(i), properties=props(i)), qid) for i in range(n)]


def raw_of(store, results, file_size=CL_SIZE) -> bytes:
    return b"".join(read_raw(store.root_dir, r.commitlog_offset, r.wrote_bytes, file_size) for r in results)


def check(res, status, nxt, mn=None, mx=None, count=None):
    assert res.status == status, res
    assert res.next_begin_offset == nxt, res
    if mn is not None:
        assert res.min_offset == mn, res
    if mx is not None:
        assert res.max_offset == mx, res
    if count is not None:
        assert res.message_count == count, res
        if count == 0:
            assert res.body == b"" and res.buffer_total_size == 0


# --- FOUND -----------------------------------------------------------------------------------------------------
def test_found_body_is_the_records_byte_for_byte(backend):
    store = backend.open()
    rs = fill(store, 10, tags=lambda i: "TagA")
    store.flush()
    g = store.get_message("g", T, 0, 0, 32)
    check(g, S.FOUND, 10, 0, 10, 10)
    assert g.body == raw_of(store, rs)
    assert g.buffer_total_size == len(g.body) == sum(r.wrote_bytes for r in rs)
    assert [r.raw for r in sp.parse_records(g.body)] == [
        read_raw(store.root_dir, r.commitlog_offset, r.wrote_bytes) for r in rs
    ]
    assert [m.body for m in g.decode()] == [f"msg-{i}".encode() for i in range(10)]
    g = store.get_message("g", T, 0, 3, 4)
    check(g, S.FOUND, 7, 0, 10, 4)
    assert g.body == raw_of(store, rs[3:7])
    assert [m.queue_offset for m in g.decode()] == [3, 4, 5, 6]
    assert g.suggest_pulling_from_slave is False  # default: the machine's memory, everything "in memory"


def test_found_across_commitlog_files(backend):
    store = backend.open()
    rs = fill(store, 12, body=lambda i: bytes([i]) * 15_000)  # 4 per 64 KiB file
    g = store.get_message("g", T, 0, 2, 32)
    check(g, S.FOUND, 12, 0, 12, 10)
    assert g.body == raw_of(store, rs[2:])


# --- offset checks -----------------------------------------------------------------------------------------------
def test_no_matched_logic_queue(backend):
    store = backend.open()
    fill(store, 3)
    for topic, qid, off in [("Nope", 0, 0), ("Nope", 0, 5), (T, 1, 0), (T, 1, 7)]:
        g = store.get_message("g", topic, qid, off, 32)
        check(g, S.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0, 0)
        assert g.suggest_pulling_from_slave is False
    assert not os.path.exists(cq_dir(store.root_dir, "Nope", 0))
    assert not os.path.exists(cq_dir(store.root_dir, T, 1))
    assert [tuple(x) for x in store.topics()] == [(T, 0)]


def test_no_message_in_queue(backend):
    root = os.path.join(backend.tmp, "store")
    os.makedirs(cq_dir(root, T, 2))  # the queue exists (its directory), with no units
    store = backend.open(root)
    fill(store, 2, qid=0)
    for off in (0, 5):
        check(store.get_message("g", T, 2, off, 32), S.NO_MESSAGE_IN_QUEUE, 0, 0, 0, 0)


def test_not_readable_store_refuses_get_message_until_readable_again(backend):
    """4.9 getMessage returns null while RunningFlags has NOT_READABLE; here it raises StoreError (nothing is lost:
    the units are served once the bit is cleared)."""
    store = backend.open()
    fill(store, 2)
    assert store.running_flags.get_and_make_not_readable() is True
    with pytest.raises(StoreError, match="not readable"):
        store.get_message("g", T, 0, 0, 32)
    assert store.running_flags.get_and_make_not_readable() is False  # already set
    assert store.running_flags.get_and_make_readable() is False
    check(store.get_message("g", T, 0, 0, 32), S.FOUND, 2, 0, 2, 2)


def test_offset_overflow_one(backend):
    store = backend.open()
    fill(store, 5)
    check(store.get_message("g", T, 0, 5, 32), S.OFFSET_OVERFLOW_ONE, 5, 0, 5, 0)


def test_offset_overflow_badly_with_min_zero(backend):
    store = backend.open()
    fill(store, 5)
    for off in (6, 100, 2**40):
        check(store.get_message("g", T, 0, off, 32), S.OFFSET_OVERFLOW_BADLY, 0, 0, 5, 0)


def test_removing_then_too_small_and_overflow_after_correct_min_offsets(backend):
    store = backend.open()
    rs = fill(store, 16, body=lambda i: bytes([65 + i]) * 12_000)  # 5 per file → CommitLog files 0..3
    assert [r.commitlog_offset // CL_SIZE for r in rs] == [0] * 5 + [1] * 5 + [2] * 5 + [3]
    assert store.delete_commit_log_files_before(2 * CL_SIZE) == 2
    # ConsumeQueues are not corrected yet: units 0..9 point at deleted files, the scan skips them
    g = store.get_message("g", T, 0, 0, 32)
    check(g, S.FOUND, 16, 0, 16, 6)
    assert g.body == raw_of(store, rs[10:])
    g = store.get_message("g", T, 0, 0, 3)
    check(g, S.FOUND, 13, 0, 16, 3)
    assert g.body == raw_of(store, rs[10:13])
    store.correct_min_offsets()
    assert store.get_min_offset_in_queue(T, 0) == 10
    for off in (0, 9):
        check(store.get_message("g", T, 0, off, 32), S.OFFSET_TOO_SMALL, 10, 10, 16, 0)
    check(store.get_message("g", T, 0, 10, 32), S.FOUND, 16, 10, 16, 6)
    check(store.get_message("g", T, 0, 16, 32), S.OFFSET_OVERFLOW_ONE, 16, 10, 16, 0)
    for off in (17, 1000):
        check(store.get_message("g", T, 0, off, 32), S.OFFSET_OVERFLOW_BADLY, 16, 10, 16, 0)  # min > 0 → max


def _removing_setup(store):
    """300 records of 235 bytes: units 0..277 in CommitLog file 0, 278..299 in file 1."""
    rs = fill(store, 300, body=lambda i: sized(235))
    first_in_1 = next(i for i, r in enumerate(rs) if r.commitlog_offset >= CL_SIZE)
    assert first_in_1 == 278  # 278 * 235 + 235 + 8 > 65,536
    return rs, first_in_1


def test_message_was_removing(backend):
    store = backend.open()
    rs, first_in_1 = _removing_setup(store)
    assert store.delete_commit_log_files_before(CL_SIZE) == 1
    # CQ file 0 (units 0..99) points only into the deleted CommitLog file: nothing found, the whole file scanned
    check(store.get_message("g", T, 0, 0, 32), S.MESSAGE_WAS_REMOVING, 100, 0, 300, 0)
    check(store.get_message("g", T, 0, 150, 32), S.MESSAGE_WAS_REMOVING, 200, 0, 300, 0)
    # CQ file 2: removed units first, then live ones → FOUND with only the live records
    g = store.get_message("g", T, 0, 250, 64)
    check(g, S.FOUND, 300, 0, 300, 22)
    assert g.body == raw_of(store, rs[first_in_1 : first_in_1 + g.message_count])


def test_correct_min_offsets_deletes_consume_queue_files_below_min(backend):
    store = backend.open()
    rs, first_in_1 = _removing_setup(store)
    store.delete_commit_log_files_before(CL_SIZE)
    store.correct_min_offsets()
    assert store.get_min_offset_in_queue(T, 0) == first_in_1
    assert store.get_max_offset_in_queue(T, 0) == 300
    assert sp.list_files(cq_dir(store.root_dir, T, 0)) == [sp.file_name(4000)]  # 0..99 and 100..199 wholly below
    check(store.get_message("g", T, 0, 150, 32), S.OFFSET_TOO_SMALL, first_in_1, first_in_1, 300, 0)
    g = store.get_message("g", T, 0, first_in_1, 32)
    check(g, S.FOUND, 300, first_in_1, 300, 300 - first_in_1)
    assert g.body == raw_of(store, rs[first_in_1:])
    store.close()
    store = backend.open()
    assert store.get_min_offset_in_queue(T, 0) == first_in_1


def test_offset_found_null_for_a_missing_consume_queue_file(backend):
    store = backend.open(config=small_config(max_transfer_count_on_message_in_memory=1000))
    rs = fill(store, 250)
    store.close()
    os.remove(os.path.join(cq_dir(store.root_dir, T, 0), sp.file_name(2000)))  # units 100..199
    store = backend.open(config=small_config(max_transfer_count_on_message_in_memory=1000))
    assert store.get_max_offset_in_queue(T, 0) == 250
    for off in (100, 150, 199):
        check(store.get_message("g", T, 0, off, 32), S.OFFSET_FOUND_NULL, 200, 0, 250, 0)
    g = store.get_message("g", T, 0, 50, 500)
    check(g, S.FOUND, 100, 0, 250, 50)
    assert g.body == raw_of(store, rs[50:100])
    check(store.get_message("g", T, 0, 200, 500), S.FOUND, 250, 0, 250, 50)


# --- filters -----------------------------------------------------------------------------------------------------
def test_no_matched_message(backend):
    store = backend.open()
    fill(store, 50, tags=lambda i: "TagB")
    check(store.get_message("g", T, 0, 0, 32, "TagA"), S.NO_MATCHED_MESSAGE, 50, 0, 50, 0)
    check(store.get_message("g", T, 0, 10, 32, MessageSelector.by_tag("TagA || TagC")), S.NO_MATCHED_MESSAGE, 50)
    check(store.get_message("g", T, 0, 10, 32, "TagB"), S.FOUND, 42, 0, 50, 32)
    for sel in ("*", None, "", MessageSelector.by_tag("*"), " * "):
        check(store.get_message("g", T, 0, 0, 5, sel), S.FOUND, 5, 0, 50, 5)


def test_filter_skips_are_counted_and_the_full_unit_is_not(backend):
    store = backend.open()
    rs = fill(store, 40, tags=lambda i: "TagA" if i % 2 == 0 else "TagB")
    g = store.get_message("g", T, 0, 0, 5, "TagA")
    check(g, S.FOUND, 9, 0, 40, 5)  # units 0,2,4,6,8 taken; unit 9 found the batch full (checked before the filter)
    assert g.body == raw_of(store, rs[0:10:2])
    g = store.get_message("g", T, 0, 1, 5, "TagA")
    check(g, S.FOUND, 11, 0, 40, 5)
    assert g.body == raw_of(store, rs[2:11:2])
    g = store.get_message("g", T, 0, 0, 5, "TagA || TagB")
    check(g, S.FOUND, 5, 0, 40, 5)
    g = store.get_message("g", T, 0, 30, 32, "TagB")  # the last unit (39) is TagB: the scan reaches the end
    check(g, S.FOUND, 40, 0, 40, 5)
    assert g.body == raw_of(store, rs[31:40:2])


def test_filter_on_negative_and_unicode_tag_codes(backend):
    store = backend.open()
    tags = ["polygenelubricants", "日本", "😀", "TagA"]
    rs = fill(store, 8, tags=lambda i: tags[i % 4])
    for t in tags:
        g = store.get_message("g", T, 0, 0, 32, t)
        check(g, S.FOUND, 8, 0, 8, 2)
        assert [m.tags for m in g.decode()] == [t, t]
    g = store.get_message("g", T, 0, 0, 32, "polygenelubricants || 😀")
    assert g.body == raw_of(store, [rs[0], rs[2], rs[4], rs[6]])


# --- batch full --------------------------------------------------------------------------------------------------
def test_batch_full_by_max_msg_nums(backend):
    store = backend.open()
    rs = fill(store, 50)
    g = store.get_message("g", T, 0, 0, 10)
    check(g, S.FOUND, 10, 0, 50, 10)
    assert g.max_phy_offset_pulling == rs[10].commitlog_offset  # the unit that found the batch full was looked at
    g = store.get_message("g", T, 0, 45, 10)
    check(g, S.FOUND, 50, 0, 50, 5)
    assert g.max_phy_offset_pulling == rs[49].commitlog_offset
    check(store.get_message("g", T, 0, 0, 1), S.FOUND, 1, 0, 50, 1)


def test_batch_full_default_count_in_memory(backend):
    store = backend.open()
    fill(store, 40)
    check(store.get_message("g", T, 0, 0, 64), S.FOUND, 32, 0, 40, 32)


@pytest.mark.parametrize("limit, expected", [(1000, 3), (900, 3), (899, 2), (300, 1), (100, 1)])
def test_batch_full_by_bytes_in_memory(backend, limit, expected):
    store = backend.open(config=small_config(max_transfer_bytes_on_message_in_memory=limit))
    rs = fill(store, 10, body=lambda i: sized(300))
    assert all(r.wrote_bytes == 300 for r in rs)
    g = store.get_message("g", T, 0, 0, 32)
    check(g, S.FOUND, expected, 0, 10, expected)  # the first message is always taken, whatever its size
    assert g.body == raw_of(store, rs[:expected])
    assert g.buffer_total_size == 300 * expected


def test_batch_full_by_count_in_memory_config(backend):
    store = backend.open(
        config=small_config(max_transfer_count_on_message_in_memory=5, max_transfer_count_on_message_in_disk=1)
    )
    fill(store, 12)
    check(store.get_message("g", T, 0, 0, 32), S.FOUND, 5, 0, 12, 5)


def test_batch_full_on_disk_defaults(backend):
    cfg = small_config(total_physical_memory=100)  # in memory = 40 bytes: every record is "on disk"
    store = backend.open(config=cfg)
    rs = fill(store, 20)
    g = store.get_message("g", T, 0, 0, 32)
    check(g, S.FOUND, 8, 0, 20, 8)  # max_transfer_count_on_message_in_disk = 8
    assert g.body == raw_of(store, rs[:8])
    assert g.suggest_pulling_from_slave is True


def test_batch_full_on_disk_by_bytes_default_64k(backend):
    cfg = small_config(total_physical_memory=100, mapped_file_size_commit_log=1024 * 1024)
    store = backend.open(config=cfg)
    rs = fill(store, 10, body=lambda i: sized(10_000))
    g = store.get_message("g", T, 0, 0, 32)
    check(g, S.FOUND, 6, 0, 10, 6)  # 60,000 + 10,000 > 65,536
    assert g.body == raw_of(store, rs[:6], 1024 * 1024)


def test_batch_full_on_disk_configured_limits(backend):
    cfg = small_config(
        total_physical_memory=100, max_transfer_count_on_message_in_disk=3, max_transfer_count_on_message_in_memory=1
    )
    store = backend.open(config=cfg)
    fill(store, 10)
    check(store.get_message("g", T, 0, 0, 32), S.FOUND, 3, 0, 10, 3)
    cfg = small_config(total_physical_memory=100, max_transfer_bytes_on_message_in_disk=2500)
    store.close()
    store = backend.open(os.path.join(backend.tmp, "s2"), config=cfg)
    rs = fill(store, 10, body=lambda i: sized(1000))
    g = store.get_message("g", T, 0, 0, 32)
    check(g, S.FOUND, 2, 0, 10, 2)
    assert g.body == raw_of(store, rs[:2])
    store.close()
    cfg = small_config(total_physical_memory=100, max_transfer_bytes_on_message_in_disk=500)
    store = backend.open(os.path.join(backend.tmp, "s3"), config=cfg)
    rs = fill(store, 10, body=lambda i: sized(1000))
    g = store.get_message("g", T, 0, 4, 32)  # the first message is taken even though it exceeds the limit
    check(g, S.FOUND, 5, 0, 10, 1)
    assert g.body == raw_of(store, rs[4:5])


def test_in_disk_is_decided_per_unit(backend):
    # 20 records of 1000 bytes; memory = 25,000 * 40 / 100 = 10,000: units 0..9 are on disk, 10..19 in memory
    cfg = small_config(
        total_physical_memory=25_000,
        max_transfer_count_on_message_in_disk=3,
        max_transfer_count_on_message_in_memory=32,
    )
    store = backend.open(config=cfg)
    rs = fill(store, 20, body=lambda i: sized(1000))
    assert store.max_physical_offset == 20_000
    g = store.get_message("g", T, 0, 0, 32)
    check(g, S.FOUND, 3, 0, 20, 3)
    assert g.max_phy_offset_pulling == 3000
    assert g.suggest_pulling_from_slave is True  # 20,000 - 3,000 > 10,000
    g = store.get_message("g", T, 0, 10, 32)
    check(g, S.FOUND, 20, 0, 20, 10)
    assert g.max_phy_offset_pulling == 19_000
    assert g.suggest_pulling_from_slave is False
    g = store.get_message("g", T, 0, 8, 32)  # 2 on disk (msg_total 0, 1 ≤ 2), then in memory
    check(g, S.FOUND, 20, 0, 20, 12)
    assert g.body == raw_of(store, rs[8:])
    g = store.get_message("g", T, 0, 9, 32)
    check(g, S.FOUND, 20, 0, 20, 11)


def test_in_disk_boundary_is_strictly_greater(backend):
    # memory = 10,000; unit 10 at 10,000 leaves exactly 10,000 behind it: not more → in memory
    cfg = small_config(total_physical_memory=25_000, max_transfer_count_on_message_in_disk=2)
    store = backend.open(config=cfg)
    rs = fill(store, 20, body=lambda i: sized(1000))
    g = store.get_message("g", T, 0, 8, 32)  # units 8, 9 on disk (2 taken), unit 10 in memory: not full
    check(g, S.FOUND, 20, 0, 20, 12)
    assert g.body == raw_of(store, rs[8:])
    g = store.get_message("g", T, 0, 7, 32)  # units 7, 8 on disk, unit 9 still on disk: full
    check(g, S.FOUND, 9, 0, 20, 2)


def test_suggest_pulling_from_slave_boundary(backend):
    # memory = 10,000; the last looked-at unit at 10,000 leaves exactly 10,000: not more → False
    cfg = small_config(total_physical_memory=25_000)
    store = backend.open(config=cfg)
    fill(store, 20, body=lambda i: sized(1000))
    g = store.get_message("g", T, 0, 9, 1)  # looks at unit 9 (taken) and unit 10 (batch full)
    assert g.max_phy_offset_pulling == 10_000
    assert g.suggest_pulling_from_slave is False
    g = store.get_message("g", T, 0, 8, 1)  # last looked at: unit 9 at 9,000
    assert g.max_phy_offset_pulling == 9000
    assert g.suggest_pulling_from_slave is True


# --- scan limits -------------------------------------------------------------------------------------------------
def _cap_store(backend, **kw):
    return backend.open(config=small_config(mapped_file_size_consume_queue=2000 * 20, **kw))


def test_scan_cap_16000_bytes(backend):
    store = _cap_store(backend)
    rs = fill(store, 1000, body=lambda i: b"c", tags=lambda i: "TagA" if i == 850 else "TagB")
    check(store.get_message("g", T, 0, 0, 32, "TagA"), S.NO_MATCHED_MESSAGE, 800, 0, 1000, 0)
    check(store.get_message("g", T, 0, 10, 32, "TagA"), S.NO_MATCHED_MESSAGE, 810, 0, 1000, 0)
    g = store.get_message("g", T, 0, 100, 32, "TagA")
    check(g, S.FOUND, 900, 0, 1000, 1)
    assert g.body == raw_of(store, [rs[850]])
    check(store.get_message("g", T, 0, 0, 900, "TagA"), S.FOUND, 900, 0, 1000, 1)  # max(16000, 900*20)=18000 bytes
    check(store.get_message("g", T, 0, 0, 820, "TagA"), S.NO_MATCHED_MESSAGE, 820, 0, 1000, 0)
    check(store.get_message("g", T, 0, 851, 32, "TagA"), S.NO_MATCHED_MESSAGE, 1000, 0, 1000, 0)


def test_scan_cap_configured(backend):
    store = _cap_store(backend, max_filter_message_size=4000)
    fill(store, 500, body=lambda i: b"c", tags=lambda i: "TagB")
    check(store.get_message("g", T, 0, 0, 32, "TagA"), S.NO_MATCHED_MESSAGE, 200, 0, 500, 0)
    check(store.get_message("g", T, 0, 0, 300, "TagA"), S.NO_MATCHED_MESSAGE, 300, 0, 500, 0)


def test_scan_stops_at_the_end_of_one_consume_queue_file(backend):
    store = backend.open(config=small_config(max_transfer_count_on_message_in_memory=1000))
    rs = fill(store, 250, tags=lambda i: "TagA")
    g = store.get_message("g", T, 0, 50, 200)
    check(g, S.FOUND, 100, 0, 250, 50)
    assert g.body == raw_of(store, rs[50:100])
    check(store.get_message("g", T, 0, 50, 200, "TagB"), S.NO_MATCHED_MESSAGE, 100, 0, 250, 0)
    check(store.get_message("g", T, 0, 100, 200), S.FOUND, 200, 0, 250, 100)
    check(store.get_message("g", T, 0, 99, 200), S.FOUND, 100, 0, 250, 1)
    check(store.get_message("g", T, 0, 200, 200), S.FOUND, 250, 0, 250, 50)


# --- property filter ---------------------------------------------------------------------------------------------
def test_property_filter_hook(backend):
    store = backend.open()
    rs = fill(store, 20, tags=lambda i: "TagA" if i % 2 == 0 else "TagB", props=lambda i: {"n": str(i), "ü": "✓"})
    seen: list[dict] = []

    def keep_multiples_of_4(p):
        seen.append(dict(p))
        return int(p["n"]) % 4 == 0

    g = store.get_message("g", T, 0, 0, 32, "TagA", property_filter=keep_multiples_of_4)
    check(g, S.FOUND, 20, 0, 20, 5)
    assert g.body == raw_of(store, rs[0:20:4])
    assert [p["n"] for p in seen] == [str(i) for i in range(0, 20, 2)]  # only units that passed the tag filter
    assert all(p["TAGS"] == "TagA" and p["ü"] == "✓" and len(p["UNIQ_KEY"]) == 32 for p in seen)
    seen.clear()
    g = store.get_message("g", T, 0, 0, 32, None, property_filter=lambda p: seen.append(p) or False)
    check(g, S.NO_MATCHED_MESSAGE, 20, 0, 20, 0)  # misses are skipped and counted
    assert len(seen) == 20
    g = store.get_message(
        "g", T, 0, 0, 32, MessageSelector.by_sql("n > 15"), property_filter=lambda p: int(p["n"]) > 15
    )
    check(g, S.FOUND, 20, 0, 20, 4)
    assert g.body == raw_of(store, rs[16:])
    g = store.get_message("g", T, 0, 0, 32, MessageSelector.by_sql("n > 15"))  # SQL92 evaluated on properties
    check(g, S.FOUND, 20, 0, 20, 4)
    g = store.get_message("g", T, 0, 0, 32, MessageSelector.by_sql("n > 15"), property_filter=lambda p: p["n"] != "17")
    check(g, S.FOUND, 20, 0, 20, 3)  # both the SQL and the hook must accept


def test_property_filter_not_called_for_units_after_the_batch_is_full(backend):
    store = backend.open()
    fill(store, 10, props=lambda i: {"n": str(i)})
    seen: list[str] = []
    g = store.get_message("g", T, 0, 0, 3, property_filter=lambda p: seen.append(p["n"]) or True)
    check(g, S.FOUND, 3, 0, 10, 3)
    assert seen == ["0", "1", "2"]


# --- damaged records are never served ------------------------------------------------------------------------------
def _damage(root: str, offset: int, new: bytes) -> None:
    """Overwrite CommitLog bytes at a global offset in the file itself, behind the open store's back (its mapping
    sees the change: the damage a bad disk or a stray write does after the record was checked)."""
    start = offset - offset % CL_SIZE
    with open(os.path.join(root, "commitlog", f"{start:020d}"), "r+b") as f:
        f.seek(offset - start)
        f.write(new)


@pytest.mark.parametrize("what", ["body", "topic"])
def test_a_damaged_record_is_skipped_not_served(backend, what):
    """A body byte (BODYCRC no longer matches) or a topic byte (not the queue's topic) damaged after the store
    checked the record: get_message skips that one record like a filter miss, serves the others, and moves past it
    (RocketMQ 4.9 serves whatever bytes the unit points at)."""
    store = backend.open()
    rs = fill(store, 6)
    raw = read_raw(store.root_dir, rs[3].commitlog_offset, rs[3].wrote_bytes)
    at = raw.find(b"msg-3") + 4 if what == "body" else raw.find(T.encode())
    _damage(store.root_dir, rs[3].commitlog_offset + at, b"#")
    g = store.get_message("g", T, 0, 0, 32)
    check(g, S.FOUND, 6, count=5)
    assert [m.queue_offset for m in g.decode()] == [0, 1, 2, 4, 5]
    g = store.get_message("g", T, 0, 3, 1)  # from the damaged one: the scan moves on to the next record
    check(g, S.FOUND, 5, count=1)
    assert [m.queue_offset for m in g.decode()] == [4]


def test_a_damaged_body_is_served_when_crc_checks_are_off(backend):
    """check_crc_on_recover=False turns the read-side BODYCRC check off too (the other checks stay)."""
    store = backend.open(config=small_config(check_crc_on_recover=False))
    rs = fill(store, 3)
    raw = read_raw(store.root_dir, rs[1].commitlog_offset, rs[1].wrote_bytes)
    _damage(store.root_dir, rs[1].commitlog_offset + raw.find(b"msg-1") + 4, b"#")
    g = store.get_message("g", T, 0, 0, 32)
    check(g, S.FOUND, 3, count=3)
    assert g.decode()[1].body == b"msg-#"


def test_a_unit_pointing_at_another_record_is_skipped(backend):
    """A ConsumeQueue unit whose CommitLog offset was damaged to point at the next record (a whole, valid record,
    but not the one at this queue offset): skipped, never served as queue offset 2."""
    store = backend.open()
    rs = fill(store, 4)
    with open(os.path.join(cq_dir(store.root_dir, T, 0), "0" * 20), "r+b") as f:
        f.seek(2 * 20)
        f.write(rs[3].commitlog_offset.to_bytes(8, "big") + rs[3].wrote_bytes.to_bytes(4, "big"))
    g = store.get_message("g", T, 0, 0, 32)
    check(g, S.FOUND, 4, count=3)
    assert [m.queue_offset for m in g.decode()] == [0, 1, 3]
