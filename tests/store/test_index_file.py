"""Index files (RocketMQ 4.9's ``index/<yyyyMMddHHmmssSSS>``) through ``MessageStore``, on both engines: layout and key
hash as 4.9 writes them, query by KEYS and UNIQ_KEY with time range and max_num, files rolling when full, rebuild at
open (4.9's abnormal-exit rule), refused bad files, and parity (the same puts give the same index bytes on both
engines; a store written by one is queried by the other)."""

from __future__ import annotations

import logging
import os
import shutil
import struct
import time

import pytest

from rmq_core.format.index import (
    INDEX_HEADER_SIZE,
    IndexHeader,
    entry_position,
    index_file_size,
    index_key_hash,
    is_index_file_name,
    slot_position,
)
from rmq_core.message import Message
from rmq_core.store import MessageStore

from support.helpers import Clock, UniqIds, small_config

pytestmark = pytest.mark.both_backends

FAR = 1 << 62
TINY = dict(max_hash_slot_num=16, max_index_num=8)  # 7 entries per file: rolls after 3 messages of 2 keys


def index_dir(store: MessageStore) -> str:
    return os.path.join(store.root_dir, "index")


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def index_files(root: str) -> list[tuple[str, bytes]]:
    d = os.path.join(root, "index")
    return [(n, read(os.path.join(d, n))) for n in sorted(os.listdir(d))]


def put_keyed(store: MessageStore, n: int, topic: str = "T", keys=lambda i: f"k{i % 3} all", **kw) -> list:
    out = []
    for i in range(n):
        m = Message(topic, b"body-%d" % i, keys=keys(i))
        out.append(store.put_message(m, i % 2, **kw))
    return out


def java_hash(s: str) -> int:
    h = 0
    for unit in struct.unpack(f">{len(s.encode('utf-16-be')) // 2}H", s.encode("utf-16-be")):
        h = (h * 31 + unit) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    a = abs(h)
    return 0 if a > 2**31 - 1 else a


@pytest.mark.parametrize("topic,key", [("T", "k"), ("TopicTest", "日本😀"), ("A", "polygenelubricants"), ("", "")])
def test_key_hash_is_java_string_hash_of_topic_hash_key(topic, key):
    assert index_key_hash(topic.encode(), key.encode()) == java_hash(f"{topic}#{key}")


def test_layout_as_4_9_writes_it(backend):
    clock = Clock(start=1_700_000_000_000, step=1000)
    store = backend.open(config=small_config(max_hash_slot_num=100, max_index_num=50), clock=clock)
    puts = put_keyed(store, 3, keys=lambda i: "order-1")
    store.flush()
    [(name, raw)] = index_files(store.root_dir)
    assert is_index_file_name(name) and len(raw) == index_file_size(100, 50)
    h = IndexHeader.decode(raw[:INDEX_HEADER_SIZE])
    # 3 records x (UNIQ_KEY + one key): indexCount starts at 1
    assert h.index_count == 7 and h.begin_phy_offset == puts[0].commitlog_offset
    assert h.end_phy_offset == puts[2].commitlog_offset
    assert (h.begin_timestamp, h.end_timestamp) == (1_700_000_000_000, 1_700_000_002_000)
    kh = java_hash("T#order-1")
    newest = struct.unpack_from(">i", raw, slot_position(kh % 100))[0]
    assert newest == 6  # the last entry written (record 2's KEYS entry)
    chain = []
    i = newest
    while i:
        key_hash, phy, diff, prev = struct.unpack_from(">iqii", raw, entry_position(100, i))
        chain.append((key_hash, phy, diff))
        i = prev
    assert chain == [(kh, p.commitlog_offset, d) for p, d in zip(reversed(puts), (2, 1, 0))]
    # the checkpoint's indexMsgTimestamp is the index's endTimestamp once flushed
    cp = read(os.path.join(store.root_dir, "checkpoint"))
    assert struct.unpack_from(">q", cp, 16)[0] == h.end_timestamp


def _checkpoint_times(store: MessageStore) -> tuple[int, int]:
    """The checkpoint's (physicMsgTimestamp, indexMsgTimestamp); zeros before its first write."""
    cp = read(os.path.join(store.root_dir, "checkpoint"))
    if len(cp) < 24:
        return 0, 0
    return struct.unpack_from(">q", cp, 0)[0], struct.unpack_from(">q", cp, 16)[0]


def _wait_for_a_tick(store: MessageStore, physic_ts: int) -> None:
    """Until the flush thread's periodic checkpoint has recorded ``physic_ts`` (the last put's store time)."""
    deadline = time.monotonic() + 10
    while _checkpoint_times(store)[0] != physic_ts:
        assert time.monotonic() < deadline, "no periodic checkpoint within 10 s"
        time.sleep(0.01)


def test_the_periodic_checkpoint_msyncs_full_index_files_only(backend):
    """4.9 flushes an index file once, when it is full: the flush thread's tick does not msync the file being
    written (its slot pages would be write-protected under the next puts), so the checkpoint's indexMsgTimestamp is
    the newest *full* file's endTimestamp until ``flush`` (or close) msyncs every file."""
    clock = Clock(start=1_700_000_000_000, step=1000)
    store = backend.open(config=small_config(flush_interval_commit_log=20, **TINY), clock=clock)
    put_keyed(store, 1)
    _wait_for_a_tick(store, 1_700_000_000_000)
    assert len(index_files(store.root_dir)) == 1 and _checkpoint_times(store)[1] == 0
    n = 1
    while len(index_files(store.root_dir)) < 2:  # until the first file is full and the second one started
        put_keyed(store, 1)
        n += 1
    put_keyed(store, 1)  # the file being written now ends later than the full one
    last_ts = 1_700_000_000_000 + n * 1000
    _wait_for_a_tick(store, last_ts)
    [(_, first), (_, second)] = index_files(store.root_dir)
    full = IndexHeader.decode(first[:INDEX_HEADER_SIZE])
    assert full.index_count == 8 and full.end_timestamp < last_ts
    assert IndexHeader.decode(second[:INDEX_HEADER_SIZE]).end_timestamp == last_ts
    assert _checkpoint_times(store)[1] == full.end_timestamp
    store.flush()
    assert _checkpoint_times(store)[1] == last_ts
    store.close()


def test_query_by_key_uniq_key_time_and_max_num(backend):
    clock = Clock(start=1_700_000_000_000, step=1000)
    store = backend.open(config=small_config(**TINY), clock=clock)
    puts = put_keyed(store, 10)
    assert len(os.listdir(index_dir(store))) > 3  # rolled
    got = store.query_message("T", "all", 64, 0, FAR)
    assert [m.commitlog_offset for m in got] == [p.commitlog_offset for p in puts]
    assert [m.body for m in store.query_message("T", "k1", 64, 0, FAR)] == [b"body-1", b"body-4", b"body-7"]
    uniq = got[5].properties["UNIQ_KEY"]
    assert [m.body for m in store.query_message("T", uniq, 64, 0, FAR)] == [b"body-5"]
    assert store.query_message("Other", "all", 64, 0, FAR) == []
    assert store.query_message("T", "absent", 64, 0, FAR) == []
    assert len(store.query_message("T", "all", 3, 0, FAR)) == 3
    # newest first: max_num keeps the newest ones (then returned in CommitLog order)
    assert [m.body for m in store.query_message("T", "all", 2, 0, FAR)] == [b"body-8", b"body-9"]
    window = store.query_message("T", "all", 64, 1_700_000_004_000, 1_700_000_006_000)
    assert [m.body for m in window] == [b"body-4", b"body-5", b"body-6"]
    r = store.query_message_result("T", "all", 64, 0, FAR)
    assert r.count == 10 and r.index_last_update_phyoffset == puts[-1].commitlog_offset
    assert r.index_last_update_timestamp == 1_700_000_009_000


def test_max_num_is_capped_by_max_msgs_num_batch(backend):
    store = backend.open(config=small_config(max_msgs_num_batch=64))
    put_keyed(store, 70, keys=lambda i: "same")
    assert len(store.query_message("T", "same", 1000, 0, FAR)) == 64


def test_rollback_not_indexed_prepared_indexed(backend):
    store = backend.open()
    store.put_message(Message("T", b"rb", keys="tx"), 0, sys_flag=0xC)
    store.put_message(Message("T", b"prep", keys="tx"), 0, sys_flag=0x4)
    assert [m.body for m in store.query_message("T", "tx", 64, 0, FAR)] == [b"prep"]


def test_disabled_writes_no_index(backend):
    store = backend.open(config=small_config(message_index_enable=False))
    put_keyed(store, 2)
    assert store.query_message("T", "all", 64, 0, FAR) == []
    assert not os.path.exists(index_dir(store))


def test_reopen_keeps_and_rebuilds(backend, tmp_path):
    root = str(tmp_path / "s")
    cfg = small_config(**TINY)
    store = backend.open(root, cfg, clock=Clock(step=1000))
    put_keyed(store, 6)
    store.close()
    before = index_files(root)
    store = backend.open(root, cfg)
    assert store.recovery_report["index_rebuilt"] == 0
    assert len(store.query_message("T", "all", 64, 0, FAR)) == 6
    store.close()
    assert index_files(root) == before
    shutil.rmtree(os.path.join(root, "index"))
    store = backend.open(root, cfg)
    assert store.recovery_report["index_rebuilt"] == 6
    store.close()
    assert [raw for _n, raw in index_files(root)] == [raw for _n, raw in before]


def _crash_image(backend, tmp_path, abort: bytes | None) -> tuple[str, object]:
    """A copy of a store taken while it is open (its abort file there: an abnormal exit), 3 records indexed and
    checkpointed, 2 more indexed after; ``abort``: the abort file's content to give the copy (None: as written)."""
    root = str(tmp_path / "s")
    cfg = small_config(flush_interval_commit_log=600_000)  # no periodic checkpoint during the test
    store = backend.open(root, cfg, clock=Clock(step=1000))
    put_keyed(store, 3)
    store.flush()  # checkpoint indexMsgTimestamp = the 3rd record's time
    put_keyed(store, 2)
    crashed = str(tmp_path / "crashed")
    shutil.copytree(root, crashed, ignore=shutil.ignore_patterns("lock"))
    store.close()
    if abort is not None:
        with open(os.path.join(crashed, "abort"), "wb") as f:
            f.write(abort)
    return crashed, cfg


@pytest.mark.parametrize(
    "abort", [b"", b"00000000-1111-2222-3333-444444444444"], ids=["empty-as-4.9-writes-it", "another-boot"]
)
def test_abnormal_exit_of_another_boot_drops_files_newer_than_the_checkpoint(backend, tmp_path, abort):
    crashed, cfg = _crash_image(backend, tmp_path, abort)
    store2 = backend.open(crashed, cfg)
    rep = store2.recovery_report
    assert rep["abnormal"] and rep["index_files_dropped"] == 1 and rep["index_rebuilt"] == 5
    assert len(store2.query_message("T", "all", 64, 0, FAR)) == 5
    store2.close()


def test_a_process_crash_within_this_boot_keeps_the_index_files(backend, tmp_path):
    with open("/proc/sys/kernel/random/boot_id", "rb") as f:
        boot = f.read().strip()
    crashed, cfg = _crash_image(backend, tmp_path, None)
    with open(os.path.join(crashed, "abort"), "rb") as f:
        assert f.read() == boot  # the open store wrote this boot's id
    before = index_files(crashed)
    store2 = backend.open(crashed, cfg)
    rep = store2.recovery_report
    assert rep["abnormal"] and rep["index_files_dropped"] == 0 and rep["index_rebuilt"] == 0
    assert len(store2.query_message("T", "all", 64, 0, FAR)) == 5
    store2.close()
    assert [raw for _n, raw in index_files(crashed)] == [raw for _n, raw in before]


def test_a_key_put_cut_short_by_a_process_crash_is_undone(backend, tmp_path, caplog):
    # the crash hit a put between its slot write and its header write: the slot names the entry at indexCount,
    # which the header does not count; at reopen the slot gets back the entry's saved prevIndex
    crashed, cfg = _crash_image(backend, tmp_path, None)
    name, raw = index_files(crashed)[-1]
    hdr = IndexHeader.decode(raw[:INDEX_HEADER_SIZE])
    slots, count = cfg.max_hash_slot_num, hdr.index_count
    key_hash = index_key_hash(b"T", b"all")
    slot_at = slot_position(key_hash % slots)
    (prev,) = struct.unpack_from(">i", raw, slot_at)
    assert 0 < prev < count
    torn = bytearray(raw)
    struct.pack_into(">iqii", torn, entry_position(slots, count), key_hash, 999_999, 0, prev)
    struct.pack_into(">i", torn, slot_at, count)
    with open(os.path.join(crashed, "index", name), "r+b") as f:
        f.write(torn)
    with caplog.at_level(logging.WARNING):
        store2 = backend.open(crashed, cfg)
    assert any("slot(s) of a key put cut short by the crash restored" in r.getMessage() for r in caplog.records)
    assert store2.recovery_report["index_files_dropped"] == 0
    assert len(store2.query_message("T", "all", 64, 0, FAR)) == 5  # not the torn entry's offset
    put_keyed(store2, 2)  # the chain goes on from the repaired slot: no loop, no duplicate
    found = store2.query_message("T", "all", 64, 0, FAR)
    assert len(found) == 7 and len({m.commitlog_offset for m in found}) == 7
    store2.close()


def test_truncated_index_file_is_refused_logged_and_rebuilt(backend, tmp_path, caplog):
    root = str(tmp_path / "s")
    cfg = small_config(**TINY)
    store = backend.open(root, cfg)
    put_keyed(store, 6)
    store.close()
    names = sorted(os.listdir(os.path.join(root, "index")))
    with open(os.path.join(root, "index", names[0]), "r+b") as f:
        f.truncate(30)
    with caplog.at_level(logging.WARNING, logger="rmq_core.store"):
        store = backend.open(root, cfg)
    assert any("refused" in r.getMessage() and names[0] in r.getMessage() for r in caplog.records)
    assert store.recovery_report["index_files_refused"] == len(names)
    assert sorted(os.listdir(os.path.join(root, "index_refused"))) == names
    assert [m.body for m in store.query_message("T", "all", 64, 0, FAR)] == [b"body-%d" % i for i in range(6)]


def test_corrupt_index_header_is_refused(backend, tmp_path):
    root = str(tmp_path / "s")
    cfg = small_config(**TINY)
    store = backend.open(root, cfg)
    put_keyed(store, 2)
    store.close()
    [name] = os.listdir(os.path.join(root, "index"))
    with open(os.path.join(root, "index", name), "r+b") as f:
        f.seek(36)
        f.write(struct.pack(">i", 1_000_000))  # indexCount beyond maxIndexNum
    store = backend.open(root, cfg)
    assert store.recovery_report["index_files_refused"] == 1
    assert len(store.query_message("T", "all", 64, 0, FAR)) == 2


def test_garbage_entries_never_serve_a_wrong_record(backend, tmp_path):
    root = str(tmp_path / "s")
    cfg = small_config(max_hash_slot_num=16, max_index_num=64)
    store = backend.open(root, cfg)
    puts = put_keyed(store, 8, keys=lambda i: f"key{i}")
    store.close()
    [name] = os.listdir(os.path.join(root, "index"))
    path = os.path.join(root, "index", name)
    raw = bytearray(read(path))
    # every entry points at record 0, and links form a cycle
    for i in range(1, 17):
        pos = entry_position(16, i)
        struct.pack_into(">qii", raw, pos + 4, puts[0].commitlog_offset, 0, (i % 16) + 1)
    with open(path, "wb") as f:
        f.write(bytes(raw))
    store = backend.open(root, cfg)
    for i in range(1, 7):
        assert store.query_message("T", f"key{i}", 64, 0, FAR) == []
    # the last record's entries are not at the index's tail any more: open indexed it again
    assert store.recovery_report["index_rebuilt"] == 1
    assert [m.body for m in store.query_message("T", "key7", 64, 0, FAR)] == [b"body-7"]
    got = store.query_message("T", "key0", 64, 0, FAR)
    assert [m.body for m in got] == [b"body-0"]


def test_parity_same_puts_same_index_bytes(tmp_path):
    results = {}
    for b in ("rust", "python"):
        root = str(tmp_path / b)
        store = MessageStore(
            root,
            small_config(**TINY),
            backend=b,
            clock=Clock(start=1_700_000_000_000, step=777),
            uniq_id=UniqIds(),
        )
        put_keyed(store, 9, keys=lambda i: ["", " a  b ", "日本 😀", "x" * 300][i % 4])
        store.put_message(Message("T", b"rb", keys="a"), 0, sys_flag=0xC)
        store.put_messages([(Message("U", b"u%d" % i, keys="a"), 0) for i in range(4)])
        store.close()
        results[b] = [raw for _n, raw in index_files(root)]
    assert len(results["rust"]) > 2
    assert results["rust"] == results["python"]
    # each engine answers from the other's files
    for writer, reader in (("rust", "python"), ("python", "rust")):
        store = MessageStore(str(tmp_path / writer), small_config(**TINY), backend=reader)
        assert [m.body for m in store.query_message("T", "a", 64, 0, FAR)] == [b"body-1", b"body-5"]
        assert [m.body for m in store.query_message("T", "😀", 64, 0, FAR)] == [b"body-2", b"body-6"]
        assert len(store.query_message("U", "a", 64, 0, FAR)) == 4
        assert store.recovery_report["index_rebuilt"] == 0
        store.close()


def test_expired_index_files_follow_the_commit_log(backend, tmp_path):
    """4.9's deleteExpiredFile: after CommitLog files are deleted, correct_min_offsets deletes the leading index files
    whose endPhyOffset is below the CommitLog's min offset (never the last file)."""
    cfg = small_config(mapped_file_size_commit_log=4096, **TINY)
    store = backend.open(str(tmp_path / "s"), cfg)
    put_keyed(store, 40)
    before = sorted(os.listdir(index_dir(store)))
    assert len(before) > 4
    assert store.delete_commit_log_files_before(store.max_physical_offset) > 0
    store.correct_min_offsets()
    after = sorted(os.listdir(index_dir(store)))
    assert 1 <= len(after) < len(before) and after == before[-len(after) :]
    for name in after[:-1]:
        with open(os.path.join(index_dir(store), name), "rb") as f:
            assert IndexHeader.decode(f.read(INDEX_HEADER_SIZE)).end_phy_offset >= store.min_physical_offset
    kept = store.query_message("T", "all", 64, 0, FAR)
    assert kept and all(m.commitlog_offset >= store.min_physical_offset for m in kept)


INDEX_STOP_SCRIPT = r"""
import json, resource, signal, sys
from rmq_core.store import MessageStore, StoreConfig
from rmq_core.message import Message

root, backend = sys.argv[1], sys.argv[2]
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
# an index file is 40 + 4 * 1000 + 20 * 8 = 4200 bytes: above the limit set below; the CommitLog file (4096) and the
# ConsumeQueue file are created before it
cfg = StoreConfig(mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=2000, max_hash_slot_num=1000,
                  max_index_num=8)
s = MessageStore(root, cfg, backend=backend)
out = {"first": int(s.put_message(Message("T", b"x0", keys="k"), 0).status)}
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (4100, hard))
n = int(sys.argv[3]) if len(sys.argv) > 3 else 0
if n:  # one batch: with the Rust engine its index is built by the builder thread after the put returns
    batch = [(Message("T", b"x%d" % i, keys="k"), 0) for i in range(1, n + 1)]
    out["puts"] = [int(x.status) for x in s.put_messages(batch)]
else:
    out["puts"] = [int(s.put_message(Message("T", b"x%d" % i, keys="k"), 0).status) for i in range(1, 6)]
out["notes"] = s.index_notes
out["found_while_stopped"] = len(s.query_message("T", "k", 64, 0, 1 << 62))
resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
s.close()
s = MessageStore(root, cfg, backend=backend)
out["rebuilt"] = s.recovery_report["index_rebuilt"]
out["found_after_reopen"] = sorted(m.body.decode() for m in s.query_message("T", "k", 64, 0, 1 << 62))
if n:  # every message of the batch by its UNIQ_KEY
    out["uniq_found_after_reopen"] = sum(
        len(s.query_message("T", m.properties["UNIQ_KEY"], 64, 0, 1 << 62)) for m, _q in batch
    )
s.close()
print(json.dumps(out))
"""


def _run_index_stop_script(tmp_path, backend_name: str, *args: str) -> dict:  # type: ignore[no-untyped-def]
    """INDEX_STOP_SCRIPT in a child process (its file-size limit is its own); what it printed last, as JSON."""
    import json
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-c", INDEX_STOP_SCRIPT, str(tmp_path / "s"), backend_name, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, f"rc={p.returncode}\n{p.stdout}\n{p.stderr}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_no_space_for_an_index_file_stops_indexing_not_the_puts(backend, tmp_path):
    """4.9's makeIndexFileError: a new index file that cannot be created (RLIMIT_FSIZE here, a full disk in life)
    stops the index, never the puts (and never a SIGBUS: index files are reserved, not sparse); the next open
    re-indexes the records after the last entry."""
    out = _run_index_stop_script(tmp_path, backend.name)
    assert out["first"] == 0 and out["puts"] == [0] * 5
    assert any("building the index stopped" in n for n in out["notes"]), out["notes"]
    assert out["found_while_stopped"] == 3  # 3 records x 2 keys fill the first 7-entry file
    assert out["rebuilt"] == 3
    assert out["found_after_reopen"] == [f"x{i}" for i in range(6)]


def test_no_space_for_an_index_file_stops_the_index_built_after_a_large_put(backend, tmp_path):
    """The same with one put of 100 messages (its index built off the put path with the Rust engine, inline by the
    twin): the put succeeds, the builder stops at the first key that needs a new file, ``index_notes`` says so once it
    has, a query serves what was indexed, and the next open re-indexes the rest."""
    out = _run_index_stop_script(tmp_path, backend.name, "100")
    assert out["first"] == 0 and out["puts"] == [0] * 100
    assert any("building the index stopped" in n for n in out["notes"]), out["notes"]
    assert out["found_while_stopped"] == 3  # x0, x1, x2 (x3's UNIQ_KEY fills the file; its "k" needs the next one)
    assert out["rebuilt"] == 98  # x3's missing key, then x4..x100
    assert len(out["found_after_reopen"]) == 64  # maxMsgsNumBatch
    assert out["uniq_found_after_reopen"] == 100


def test_query_does_not_serve_a_damaged_body(backend):
    """A record's body damaged after it was stored (BODYCRC no longer matches): the query by key skips it, as
    get_message does (found by fuzz/targets.py store_recovery); with check_crc_on_recover off it is served."""
    for check in (True, False):
        store = backend.open(os.path.join(backend.tmp, f"crc-{check}"), config=small_config(check_crc_on_recover=check))
        puts = put_keyed(store, 3)
        record = bytes(read_cl_byte(store.root_dir, puts[1].commitlog_offset + i) for i in range(puts[1].wrote_bytes))
        write_cl_byte(store.root_dir, puts[1].commitlog_offset + record.index(b"body-1") + 5, ord("#"))
        got = [m.body for m in store.query_message("T", "all", 64, 0, FAR)]
        assert got == ([b"body-0", b"body-2"] if check else [b"body-0", b"body-#", b"body-2"]), (check, got)


def _cl_path(root: str, offset: int) -> tuple[str, int]:
    size = small_config().mapped_file_size_commit_log
    start = offset - offset % size
    return os.path.join(root, "commitlog", f"{start:020d}"), offset - start


def read_cl_byte(root: str, offset: int) -> int:
    path, pos = _cl_path(root, offset)
    with open(path, "rb") as f:
        f.seek(pos)
        return f.read(1)[0]


def write_cl_byte(root: str, offset: int, value: int) -> None:
    path, pos = _cl_path(root, offset)
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(bytes([value]))
