"""CommitLog: roll-over with the 8-byte BLANK, records larger than a file, raw reads by (offset, size),
look_message_by_offset, max/min physical offsets, deleting old files.
"""

from __future__ import annotations

import os
import struct

from rmq_core.message import Message
from rmq_core.store import GetMessageStatus, PutMessageStatus

from support import spec_parser as sp
from support.helpers import CL_SIZE, UniqIds, cl_dir, put_ok, read_raw

TOPIC = "CL"
PROPS_LEN = len(b"UNIQ_KEY\x01") + 32 + 1  # the facade adds a 32-char UNIQ_KEY, nothing else
OVERHEAD = 91 + len(TOPIC) + PROPS_LEN


def body_for(record_len: int) -> bytes:
    assert record_len >= OVERHEAD
    return b"b" * (record_len - OVERHEAD)


def test_record_length_arithmetic():
    assert sp.record_length(TOPIC, 10, b"UNIQ_KEY\x01" + UniqIds()().encode() + b"\x02") == OVERHEAD + 10


def test_roll_over_writes_blank_when_record_does_not_fit(backend):
    store = backend.open()
    l1 = 1000
    r1 = put_ok(store, Message(TOPIC, body_for(l1)), 0)
    remaining = CL_SIZE - l1
    l2 = remaining - 7  # l2 + 8 > remaining by one byte: must go to the next file
    r2 = put_ok(store, Message(TOPIC, body_for(l2)), 0)
    assert r1.commitlog_offset == 0 and r1.wrote_bytes == l1
    assert r2.commitlog_offset == CL_SIZE
    assert r2.queue_offset == 1
    assert store.max_physical_offset == CL_SIZE + l2
    store.flush()
    names = sp.list_files(cl_dir(store.root_dir))
    assert names == [sp.file_name(0), sp.file_name(CL_SIZE)]
    with open(os.path.join(cl_dir(store.root_dir), names[0]), "rb") as f:
        first = f.read()
    assert first[l1 : l1 + 8] == struct.pack(">iI", remaining, 0xCBD43194)
    assert struct.unpack_from(">i", first, l1 + 4)[0] == sp.BLANK_MAGIC_SIGNED
    assert first[l1 + 8 :] == bytes(remaining - 8)  # only 8 bytes of BLANK are written
    records, blanks, end = sp.read_commitlog(store.root_dir)
    assert blanks == [(l1, remaining)]
    assert [o for o, _ in records] == [0, CL_SIZE]
    assert end == CL_SIZE + l2
    m = store.look_message_by_offset(CL_SIZE)
    assert m.commitlog_offset == CL_SIZE and m.body == body_for(l2) and m.queue_offset == 1
    g = store.get_message("g", TOPIC, 0, 0, 32)
    assert g.status == GetMessageStatus.FOUND and g.message_count == 2
    assert g.body == read_raw(store.root_dir, 0, l1) + read_raw(store.root_dir, CL_SIZE, l2)


def test_record_that_leaves_exactly_eight_bytes_fits(backend):
    store = backend.open()
    l1 = 500
    put_ok(store, Message(TOPIC, body_for(l1)), 0)
    l2 = CL_SIZE - l1 - 8  # l2 + 8 == remaining: fits in this file
    r2 = put_ok(store, Message(TOPIC, body_for(l2)), 0)
    assert r2.commitlog_offset == l1
    assert store.max_physical_offset == CL_SIZE - 8
    r3 = put_ok(store, Message(TOPIC, body_for(OVERHEAD)), 0)  # an 8-byte BLANK, then the next file
    assert r3.commitlog_offset == CL_SIZE
    store.flush()
    assert read_raw(store.root_dir, CL_SIZE - 8, 8) == struct.pack(">iI", 8, sp.BLANK_MAGIC)
    records, blanks, _ = sp.read_commitlog(store.root_dir)
    assert blanks == [(CL_SIZE - 8, 8)]
    assert [o for o, _ in records] == [0, l1, CL_SIZE]
    assert all(r.crc_ok for _, r in records)


def test_record_filling_a_whole_file_but_eight_bytes(backend):
    store = backend.open()
    put_ok(store, Message(TOPIC, body_for(200)), 0)
    big = CL_SIZE - 8
    r = put_ok(store, Message(TOPIC, body_for(big)), 0)
    assert r.commitlog_offset == CL_SIZE and r.wrote_bytes == big
    assert store.look_message_by_offset(CL_SIZE).body == body_for(big)


def test_record_larger_than_a_file_is_illegal(backend):
    store = backend.open()
    put_ok(store, Message(TOPIC, b"before"), 0)
    before = store.max_physical_offset
    r = store.put_message(Message(TOPIC, b"x" * (CL_SIZE + 1)), 0)  # below max_message_size (4 MiB)
    assert r.status == PutMessageStatus.MESSAGE_ILLEGAL
    assert (r.commitlog_offset, r.queue_offset, r.wrote_bytes) == (-1, -1, 0)
    assert r.msg_id is None
    assert store.max_physical_offset == before
    assert store.get_max_offset_in_queue(TOPIC, 0) == 1
    assert sp.list_files(cl_dir(store.root_dir)) == [sp.file_name(0)]
    r = put_ok(store, Message(TOPIC, b"after"), 0)  # the store keeps working
    assert r.commitlog_offset == before and r.queue_offset == 1


def test_read_commit_log_by_offset_and_size(backend):
    store = backend.open()
    rs = [put_ok(store, Message(TOPIC, bytes([65 + i]) * 9000), 0) for i in range(9)]  # crosses into file 2
    store.flush()
    root = store.root_dir
    for r in rs:
        assert store.read_commit_log(r.commitlog_offset, r.wrote_bytes) == read_raw(
            root, r.commitlog_offset, r.wrote_bytes
        )
    two = rs[0].wrote_bytes + rs[1].wrote_bytes
    assert store.read_commit_log(0, two) == read_raw(root, 0, two)
    assert store.read_commit_log(10, 5) == read_raw(root, 10, 5)
    last_in_first = [r for r in rs if r.commitlog_offset < CL_SIZE][-1]
    span = CL_SIZE - last_in_first.commitlog_offset + 10  # reaches into the next file
    assert store.read_commit_log(last_in_first.commitlog_offset, span) is None
    end = store.max_physical_offset
    assert store.read_commit_log(end, 1) is None
    assert store.read_commit_log(end - 5, 10) is None  # beyond the written end
    assert store.read_commit_log(end - 5, 5) == read_raw(root, end - 5, 5)
    assert store.read_commit_log(10 * CL_SIZE, 4) is None


def test_look_message_by_offset(backend):
    store = backend.open()
    rs = [put_ok(store, Message(TOPIC, f"m{i}".encode(), tags=f"t{i}"), i % 3) for i in range(20)]
    for i, r in enumerate(rs):
        m = store.look_message_by_offset(r.commitlog_offset)
        assert (m.body, m.tags, m.queue_id, m.queue_offset) == (f"m{i}".encode(), f"t{i}", i % 3, i // 3)
        assert m.commitlog_offset == r.commitlog_offset and m.store_size == r.wrote_bytes
        assert m.msg_id == r.msg_id
    assert store.look_message_by_offset(store.max_physical_offset) is None
    assert store.look_message_by_offset(store.max_physical_offset + 1000) is None


def test_max_min_physical_offset_and_delete(backend):
    store = backend.open()
    assert (store.min_physical_offset, store.max_physical_offset) == (0, 0)
    rs = [put_ok(store, Message(TOPIC, b"q" * 12_000), 0) for _ in range(16)]  # 5 per file → 4 files
    end = rs[-1].commitlog_offset + rs[-1].wrote_bytes
    assert store.max_physical_offset == end
    assert store.min_physical_offset == 0
    files = sp.list_files(cl_dir(store.root_dir))
    assert files == [sp.file_name(i * CL_SIZE) for i in range(4)]
    assert store.delete_commit_log_files_before(CL_SIZE - 1) == 0
    assert store.delete_commit_log_files_before(CL_SIZE) == 1  # file 0 ends at CL_SIZE
    assert store.min_physical_offset == CL_SIZE
    assert store.delete_commit_log_files_before(10 * CL_SIZE) == 2  # never the last file
    assert sp.list_files(cl_dir(store.root_dir)) == [sp.file_name(3 * CL_SIZE)]
    assert store.min_physical_offset == 3 * CL_SIZE
    assert store.max_physical_offset == end
    assert store.read_commit_log(0, 10) is None
    assert store.look_message_by_offset(0) is None
    assert store.look_message_by_offset(rs[-1].commitlog_offset).body == b"q" * 12_000
    store.close()
    store = backend.open()
    assert (store.min_physical_offset, store.max_physical_offset) == (3 * CL_SIZE, end)
    r = put_ok(store, Message(TOPIC, b"next"), 0)
    assert r.commitlog_offset == end and r.queue_offset == 16


def test_default_uniq_key_assigned_once_per_message_without_one(backend):
    """With the store's default generator (ids made for the whole batch at once), every message without a UNIQ_KEY
    gets a distinct 32-hex-digit one, on the object and in its record; a producer's own UNIQ_KEY is kept."""
    import re

    from rmq_core.message import create_uniq_id

    s = backend.open(uniq_id=create_uniq_id)
    msgs = [Message("UniqTopic", b"x", tags="A") for _ in range(300)]
    msgs[7].put_property("UNIQ_KEY", "MINE")
    assert s.put_messages([(m, 0) for m in msgs]).all_ok
    s.put_message(msgs[0], 1)  # already has one now: kept
    ids = [m.uniq_key for m in msgs]
    assert ids[7] == "MINE"
    others = ids[:7] + ids[8:]
    assert all(re.fullmatch("[0-9A-F]{32}", u) for u in others) and len(set(others)) == 299
    assert len({u[:20] for u in others}) == 1  # ip + pid + generator hash
    got = s.get_message("g", "UniqTopic", 0, 0, 32).decode() + s.get_message("g", "UniqTopic", 1, 0, 1).decode()
    assert [m.uniq_key for m in got] == ids[:32] + [ids[0]]
    assert [list(m.properties) for m in got[:2]] == [["TAGS", "UNIQ_KEY"]] * 2
