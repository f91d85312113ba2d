"""Recovery (CORE_API §7; RocketMQ CommitLog.recoverNormally/recoverAbnormally): a clean close keeps everything; an
unclean stop (``abort`` left behind) with a torn tail — garbage, half a record, a bad CRC — truncates the CommitLog
at the last valid record, removes ConsumeQueue units pointing past it, says so in recovery_report, never serves a
corrupt record, and new puts continue at the right offsets. ConsumeQueues are rebuilt from the CommitLog.

An unclean stop is simulated by copying the store directory while the store is open (after flush()): the copy has
``abort`` and the flushed bytes, exactly what a killed process leaves. test_crash.py does it with SIGKILL.
"""

from __future__ import annotations

import os
import shutil
import struct

import pytest

from rmq_core.format.message import QUEUE_OFFSET_POSITION
from rmq_core.message import Message
from rmq_core.store import GetMessageStatus as S

from support import spec_parser as sp
from support.helpers import CL_SIZE, CLOCK_START, Clock, cl_dir, cq_dir, drain_queue, put_ok, small_config

T = "Rec"


def populate(store, n=30, queues=3, body=lambda i: f"recover-{i}".encode() * 3):
    return [put_ok(store, Message(T, body(i), tags=f"t{i % 4}"), i % queues) for i in range(n)]


def crash_copy(store, dest: str) -> str:
    """What a killed process leaves: the flushed files and ``abort``."""
    store.flush()
    shutil.copytree(store.root_dir, dest)
    assert os.path.exists(os.path.join(dest, "abort"))
    return dest


def cl_file_of(root: str, offset: int) -> str:
    return os.path.join(cl_dir(root), sp.file_name(offset - offset % CL_SIZE))


def patch(path: str, pos: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(data)


def snapshot(store):
    """Everything a consumer can observe, per queue."""
    return {
        (t, q): (
            store.get_min_offset_in_queue(t, q),
            store.get_max_offset_in_queue(t, q),
            [r.raw for r in drain_queue(store, t, q)],
        )
        for t, q in (tuple(x) for x in store.topics())
    }


def test_close_and_reopen_keeps_everything(backend):
    store = backend.open()
    rs = [put_ok(store, Message(f"T{i % 2}", bytes([i % 256]) * (500 + 37 * i), tags="x"), i % 3) for i in range(200)]
    before = snapshot(store)
    end = store.max_physical_offset
    assert end > 2 * CL_SIZE  # several CommitLog files
    store.close()
    records_before = [(o, r.raw) for o, r in sp.read_commitlog(store.root_dir)[0]]
    assert [o for o, _ in records_before] == [r.commitlog_offset for r in rs]
    store = backend.open()
    rep = store.recovery_report
    assert rep["abnormal"] is False
    assert rep["commit_log_end"] == end
    assert rep["truncated_bytes"] == 0 and rep["cq_truncated_units"] == 0
    assert store.max_physical_offset == end
    assert snapshot(store) == before
    r = put_ok(store, Message("T0", b"after reopen"), 0)
    assert r.commitlog_offset == end
    assert r.queue_offset == before[("T0", 0)][1]
    store.close()
    after = [(o, r.raw) for o, r in sp.read_commitlog(store.root_dir)[0]]
    assert after[:-1] == records_before  # old records untouched, the new one after them
    assert after[-1][0] == end


def test_abnormal_reopen_of_intact_data(backend):
    store = backend.open()
    populate(store)
    before = snapshot(store)
    end = store.max_physical_offset
    copy = crash_copy(store, os.path.join(backend.tmp, "crashed"))
    s2 = backend.open(copy)
    rep = s2.recovery_report
    assert rep["abnormal"] is True
    assert rep["commit_log_end"] == end == s2.max_physical_offset
    assert rep["truncated_bytes"] == 0 and rep["cq_truncated_units"] == 0
    assert snapshot(s2) == before


@pytest.mark.parametrize("tail", ["garbage", "half_record"])
def test_torn_tail_is_truncated(backend, tail):
    store = backend.open()
    rs = populate(store)
    before = snapshot(store)
    end = store.max_physical_offset
    copy = crash_copy(store, os.path.join(backend.tmp, "crashed"))
    if tail == "garbage":
        junk = b"\xde\xad\xbe\xef" * 64
    else:  # the first half of the record the next put would have written
        full = sp.build_record(
            topic=T, body=b"never acknowledged" * 20, queue_id=0, queue_offset=10, physical_offset=end,
            store_timestamp=CLOCK_START + 99,
        )  # fmt: skip
        junk = full[: len(full) // 2]
    patch(cl_file_of(copy, end), end % CL_SIZE, junk)
    s2 = backend.open(copy)
    rep = s2.recovery_report
    assert rep["abnormal"] is True
    assert rep["commit_log_end"] == end == s2.max_physical_offset
    assert rep["truncated_bytes"] > 0
    assert snapshot(s2) == before
    r = put_ok(s2, Message(T, b"next"), 0)
    assert r.commitlog_offset == end
    assert r.queue_offset == 10
    assert s2.look_message_by_offset(end).body == b"next"
    s2.close()
    records, _, new_end = sp.read_commitlog(copy)  # the tail after the new record is zero again
    assert new_end == end + r.wrote_bytes
    with open(cl_file_of(copy, end), "rb") as f:
        data = f.read()
    assert data[new_end % CL_SIZE :] == bytes(CL_SIZE - new_end % CL_SIZE)
    assert len(records) == len(rs) + 1 and all(rec.crc_ok for _, rec in records)


def test_bad_crc_in_last_record_is_truncated_with_its_unit(backend):
    store = backend.open()
    rs = populate(store)
    last = rs[-1]  # queue 29 % 3 == 2, queue offset 9
    assert (last.queue_offset, store.get_max_offset_in_queue(T, 2)) == (9, 10)
    copy = crash_copy(store, os.path.join(backend.tmp, "crashed"))
    body_pos = last.commitlog_offset % CL_SIZE + 88  # BODY starts at 84 + 4 for IPv4 hosts
    with open(cl_file_of(copy, last.commitlog_offset), "rb") as f:
        f.seek(body_pos)
        b = f.read(1)
    patch(cl_file_of(copy, last.commitlog_offset), body_pos, bytes([b[0] ^ 0xFF]))
    s2 = backend.open(copy)
    rep = s2.recovery_report
    assert rep["abnormal"] is True
    assert rep["commit_log_end"] == last.commitlog_offset == s2.max_physical_offset
    assert rep["truncated_bytes"] >= last.wrote_bytes
    assert rep["cq_truncated_units"] == 1
    assert s2.get_max_offset_in_queue(T, 2) == 9
    assert s2.get_max_offset_in_queue(T, 0) == 10 and s2.get_max_offset_in_queue(T, 1) == 10
    assert s2.read_commit_log(last.commitlog_offset, last.wrote_bytes) is None
    assert s2.look_message_by_offset(last.commitlog_offset) is None
    assert sp.read_cq(copy, T, 2)[-1][0] == rs[-4].commitlog_offset  # the unit was removed from the file
    g = s2.get_message("g", T, 2, 9, 32)
    assert (g.status, g.next_begin_offset, g.body) == (S.OFFSET_OVERFLOW_ONE, 9, b"")
    assert [r.physical_offset for r in drain_queue(s2, T, 2)] == [r.commitlog_offset for r in rs[2:-1:3]]
    r = put_ok(s2, Message(T, b"replacement"), 2)
    assert (r.commitlog_offset, r.queue_offset) == (last.commitlog_offset, 9)
    assert drain_queue(s2, T, 2)[-1].body == b"replacement"


def test_bad_crc_is_kept_when_crc_check_is_off(backend):
    store = backend.open()
    rs = populate(store)
    last = rs[-1]
    copy = crash_copy(store, os.path.join(backend.tmp, "crashed"))
    patch(cl_file_of(copy, last.commitlog_offset), last.commitlog_offset % CL_SIZE + 8, b"\x00\x00\x00\x01")
    s2 = backend.open(copy, config=small_config(check_crc_on_recover=False))
    assert s2.max_physical_offset == last.commitlog_offset + last.wrote_bytes
    assert s2.get_max_offset_in_queue(T, 2) == 10


def test_corrupt_record_in_the_middle_ends_the_log(backend):
    store = backend.open()
    rs = populate(store)
    bad = rs[12]  # queue 0, offset 4
    copy = crash_copy(store, os.path.join(backend.tmp, "crashed"))
    patch(cl_file_of(copy, bad.commitlog_offset), bad.commitlog_offset % CL_SIZE + 4, b"\x12\x34\x56\x78")  # magic
    s2 = backend.open(copy)
    rep = s2.recovery_report
    assert rep["commit_log_end"] == bad.commitlog_offset == s2.max_physical_offset
    assert rep["truncated_bytes"] > 0
    assert rep["cq_truncated_units"] == len(rs) - 12
    for q in range(3):
        assert s2.get_max_offset_in_queue(T, q) == 4  # records 0..11 survive, 4 per queue
        recs = drain_queue(s2, T, q)
        assert all(r.physical_offset < bad.commitlog_offset for r in recs)
    r = put_ok(s2, Message(T, b"resumed"), 0)
    assert (r.commitlog_offset, r.queue_offset) == (bad.commitlog_offset, 4)


def test_record_missing_from_consume_queue_is_redispatched(backend):
    store = backend.open()
    populate(store)
    end = store.max_physical_offset
    copy = crash_copy(store, os.path.join(backend.tmp, "crashed"))
    # a whole, valid record reached the CommitLog but the process died before its ConsumeQueue unit did
    rec = sp.build_record(
        topic=T, body=b"late", properties={"TAGS": "late", "UNIQ_KEY": "U"}, queue_id=1, queue_offset=10,
        physical_offset=end, store_timestamp=CLOCK_START + 1000,
    )  # fmt: skip
    patch(cl_file_of(copy, end), end % CL_SIZE, rec)
    s2 = backend.open(copy)
    rep = s2.recovery_report
    assert rep["abnormal"] is True
    assert rep["commit_log_end"] == end + len(rec) == s2.max_physical_offset
    assert rep["redispatched"] >= 1
    assert s2.get_max_offset_in_queue(T, 1) == 11
    assert sp.read_cq(copy, T, 1)[10] == (end, len(rec), sp.java_string_hash("late"))
    g = s2.get_message("g", T, 1, 10, 32)
    assert g.status == S.FOUND and g.body == rec
    for q in (0, 2):
        assert s2.get_max_offset_in_queue(T, q) == 10  # idempotent: nothing dispatched twice


def test_a_damaged_queue_offset_does_not_make_recovery_fill_a_huge_gap(backend):
    """A record whose QUEUEOFFSET (no checksum covers it) was damaged to a million, met by re-dispatch after an
    unclean stop: its unit is refused instead of creating every ConsumeQueue file up to it (fuzzing found one flipped
    byte making 20,000 files); the records after it are dispatched and served (the skipped one is a pre-blank unit)."""
    store = backend.open()
    rs = [put_ok(store, Message(T, b"q-%d" % i), 0) for i in range(8)]
    copy = crash_copy(store, os.path.join(backend.tmp, "crashed"))
    shutil.rmtree(cq_dir(copy, T, 0))  # re-dispatch the whole queue (from the first file: no checkpoint)
    os.remove(os.path.join(copy, "checkpoint"))
    r5 = rs[5]
    patch(cl_file_of(copy, r5.commitlog_offset), r5.commitlog_offset % CL_SIZE + QUEUE_OFFSET_POSITION,
          struct.pack(">q", 1_000_000))  # fmt: skip
    s2 = backend.open(copy)
    assert len(os.listdir(cq_dir(copy, T, 0))) == 1
    assert s2.get_max_offset_in_queue(T, 0) == 8
    assert [m.body for m in s2.get_message("g", T, 0, 0, 32).decode()] == [b"q-%d" % i for i in range(5)]
    assert [m.body for m in s2.get_message("g", T, 0, 6, 32).decode()] == [b"q-6", b"q-7"]


def test_consume_queues_rebuilt_when_deleted(backend):
    store = backend.open()
    for i in range(300):
        put_ok(store, Message(f"T{i % 2}", f"{i}".encode() * 50, tags=f"tag{i % 5}"), i % 4)
    before = snapshot(store)
    copy = crash_copy(store, os.path.join(backend.tmp, "crashed"))
    cq_before = {}
    for dirpath, _, files in os.walk(os.path.join(copy, "consumequeue")):
        for n in files:
            with open(os.path.join(dirpath, n), "rb") as f:
                cq_before[os.path.relpath(os.path.join(dirpath, n), copy)] = f.read()
    shutil.rmtree(os.path.join(copy, "consumequeue"))
    os.remove(os.path.join(copy, "checkpoint"))
    s2 = backend.open(copy)
    rep = s2.recovery_report
    assert rep["abnormal"] is True and rep["redispatched"] == 300
    assert snapshot(s2) == before
    s2.flush()
    for rel, data in cq_before.items():
        with open(os.path.join(copy, rel), "rb") as f:
            assert f.read() == data, rel


def test_deleted_last_consume_queue_file_rebuilt(backend):
    store = backend.open()
    rs = [put_ok(store, Message(T, f"{i}".encode(), tags="a"), 0) for i in range(150)]
    put_ok(store, Message("Other", b"o"), 0)
    before = snapshot(store)
    copy = crash_copy(store, os.path.join(backend.tmp, "crashed"))
    p = os.path.join(cq_dir(copy, T, 0), sp.file_name(2000))
    with open(p, "rb") as f:
        saved = f.read()
    os.remove(p)  # units 100..149
    s2 = backend.open(copy)
    assert s2.recovery_report["abnormal"] is True
    assert s2.get_max_offset_in_queue(T, 0) == 150
    assert snapshot(s2) == before
    s2.flush()
    with open(p, "rb") as f:
        assert f.read() == saved
    assert rs[-1].queue_offset == 149


def test_normal_reopen_truncates_garbage_and_bad_tail_too(backend):
    store = backend.open()
    rs = populate(store)
    last = rs[-1]
    store.close()
    root = store.root_dir
    assert not os.path.exists(os.path.join(root, "abort"))
    # bad CRC in the last record and garbage after it, then a clean-shutdown reopen (no abort file)
    patch(cl_file_of(root, last.commitlog_offset), last.commitlog_offset % CL_SIZE + 88, b"\xff\xfe")
    end = last.commitlog_offset + last.wrote_bytes
    patch(cl_file_of(root, end), end % CL_SIZE, b"\x01" * 100)
    s2 = backend.open()
    rep = s2.recovery_report
    assert rep["abnormal"] is False
    assert rep["commit_log_end"] == last.commitlog_offset == s2.max_physical_offset
    assert rep["truncated_bytes"] > 0
    # RocketMQ 4.9 recoverNormally also truncates dirty ConsumeQueue units (truncateDirtyLogicFiles)
    assert s2.get_max_offset_in_queue(T, 2) == 9
    for q in range(3):
        drain_queue(s2, T, q)  # nothing corrupt served
    r = put_ok(s2, Message(T, b"again"), 2)
    assert (r.commitlog_offset, r.queue_offset) == (last.commitlog_offset, 9)
    assert [x.body for x in drain_queue(s2, T, 2)][-1] == b"again"


def test_queue_whose_only_record_was_truncated(backend):
    store = backend.open()
    populate(store, n=6)
    r = put_ok(store, Message(T, b"only one"), 7)
    copy = crash_copy(store, os.path.join(backend.tmp, "crashed"))
    patch(cl_file_of(copy, r.commitlog_offset), r.commitlog_offset % CL_SIZE + 88, b"X")
    s2 = backend.open(copy)
    assert s2.get_max_offset_in_queue(T, 7) == 0
    g = s2.get_message("g", T, 7, 0, 32)
    assert g.status in (S.NO_MESSAGE_IN_QUEUE, S.NO_MATCHED_LOGIC_QUEUE)
    assert (g.next_begin_offset, g.body, g.max_offset) == (0, b"", 0)
    r2 = put_ok(s2, Message(T, b"new only"), 7)
    assert (r2.commitlog_offset, r2.queue_offset) == (r.commitlog_offset, 0)


def test_checkpoint_layout(backend):
    clock = Clock(step=7)
    store = backend.open(clock=clock)
    populate(store, n=12)
    end = store.max_physical_offset
    last_ts = clock.calls[-1]
    store.close()
    path = os.path.join(store.root_dir, "checkpoint")
    assert os.path.getsize(path) == 4096
    with open(path, "rb") as f:
        data = f.read()
    physic, logics, index, master_flushed, confirm = struct.unpack_from(">qqqqq", data, 0)
    assert confirm == end  # big-endian: a little-endian write would read as a huge or negative number
    assert master_flushed == 0
    # StoreCheckpoint: store time of the last message flushed to the CommitLog / dispatched to a ConsumeQueue /
    # indexed (every message has a UNIQ_KEY, so the index's endTimestamp is the last message's store time)
    assert index == last_ts
    assert physic == last_ts
    assert logics == last_ts
    assert data[40:] == bytes(4096 - 40)


def test_abort_and_lock_lifecycle(backend):
    store = backend.open()
    root = store.root_dir
    assert os.path.exists(os.path.join(root, "abort"))
    put_ok(store, Message(T, b"a"), 0)
    store.close()
    assert not os.path.exists(os.path.join(root, "abort"))
    store.close()  # idempotent
    s2 = backend.open(root)
    assert s2.recovery_report["abnormal"] is False
    assert os.path.exists(os.path.join(root, "abort"))
