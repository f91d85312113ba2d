"""Bad input (docs/CORE_API.md §3/§6): a clear error and nothing stored lost or altered — oversized
bodies and properties, all-or-nothing batches, illegal topics, corrupt records, a full disk (RLIMIT_FSIZE, and a
real small tmpfs when user namespaces allow mounting one), a second open of the same directory, a closed store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from rmq_core.errors import CorruptRecordError, IllegalTopicError, StoreError
from rmq_core.format.message import COMPRESSED_FLAG, SYSFLAG_POSITION
from rmq_core.message import Message, decode_messages
from rmq_core.store import MessageStore, StoreConfig
from rmq_core.store import PutMessageStatus as P

from support import spec_parser as sp
from support.helpers import put_ok, small_config, subprocess_env

T = "Bad_input"


def state(store):
    return (store.max_physical_offset, [tuple(x) for x in store.topics()],
            {tuple(x): store.get_max_offset_in_queue(*x) for x in store.topics()})  # fmt: skip


def assert_failed(results, status):
    for r in results:
        assert (r.status, r.commitlog_offset, r.queue_offset, r.wrote_bytes) == (status, -1, -1, 0), r
        assert not r.ok and r.msg_id is None


# --- sizes -------------------------------------------------------------------------------------------------------
def test_body_over_max_message_size(backend):
    store = backend.open(config=small_config(max_message_size=1024))
    put_ok(store, Message(T, b"first"), 0)
    before = state(store)
    r = store.put_message(Message(T, b"x" * 1025), 0)
    assert_failed([r], P.MESSAGE_ILLEGAL)
    assert state(store) == before
    r = put_ok(store, Message(T, b"x" * 1024), 0)  # exactly the limit is fine
    assert r.queue_offset == 1 and r.commitlog_offset == before[0]
    put_ok(store, Message(T, b""), 0)  # an empty body is legal


@pytest.mark.parametrize(
    "value, ok", [("v" * 32752, True), ("v" * 32753, False), ("é" * 16376, True), ("é" * 16377, False)]
)
def test_properties_over_32767_bytes(backend, value, ok):
    store = backend.open()
    put_ok(store, Message(T, b"first"), 0)
    before = state(store)
    msg = Message(T, b"b", properties={"p": value, "UNIQ_KEY": "U1"})  # encoded: 3 + len + 12 bytes
    assert len(sp.encode_properties(msg.properties)) == 15 + len(value.encode())
    r = store.put_message(msg, 0)
    if ok:
        assert r.status == P.PUT_OK
        assert store.look_message_by_offset(r.commitlog_offset).properties["p"] == value
    else:
        assert_failed([r], P.PROPERTIES_SIZE_EXCEEDED)
        assert state(store) == before


def test_batch_with_one_bad_message_writes_nothing(backend):
    store = backend.open(config=small_config(max_message_size=100))
    put_ok(store, Message(T, b"first"), 0)
    before = state(store)
    batch = [(Message(T, b"ok-1"), 0), (Message(T, b"x" * 101), 0), (Message(T, b"ok-3"), 1)]
    assert_failed(store.put_messages(batch), P.MESSAGE_ILLEGAL)
    assert state(store) == before
    assert (T, 1) not in before[1]
    big_props = Message(T, b"p", properties={"p": "v" * 40_000})
    res = store.put_messages([(Message(T, b"ok"), 0), (Message(T, b"x" * 101), 0), (big_props, 0)])
    assert_failed(res, P.MESSAGE_ILLEGAL)  # every tuple carries the first failing status
    res = store.put_messages([(big_props, 0), (Message(T, b"x" * 101), 0)])
    assert_failed(res, P.PROPERTIES_SIZE_EXCEEDED)
    assert state(store) == before
    res = store.put_messages([(Message(T, b"a"), 0), (Message(T, b"b"), 1)])
    assert res.all_ok
    assert next(r.commitlog_offset for r in res) == before[0]


# --- topics and queue ids -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("topic", ["bad topic", "a/b", "t" * 128, "", "中文", "tab\t", "dot.ted", "new\nline"])
def test_illegal_topic(backend, topic):
    store = backend.open()
    put_ok(store, Message(T, b"first"), 0)
    before = state(store)
    with pytest.raises(IllegalTopicError) as ei:
        store.put_message(Message(topic, b"x"), 0)
    assert isinstance(ei.value, ValueError) and isinstance(ei.value, StoreError)
    msg = str(ei.value)
    if topic:
        assert topic in msg or repr(topic) in msg, msg  # names the topic
    else:
        assert "topic" in msg.lower() and ("''" in msg or '""' in msg or "empty" in msg.lower()), msg
    with pytest.raises(IllegalTopicError):  # one illegal topic in a batch: nothing written
        store.put_messages([(Message(T, b"ok"), 0), (Message(topic, b"x"), 0)])
    assert state(store) == before


@pytest.mark.parametrize("topic", ["t" * 127, "%RETRY%group_1", "a|b-c_D%9", "x"])
def test_legal_topic_edges(backend, topic):
    store = backend.open()
    r = put_ok(store, Message(topic, b"x"), 0)
    assert store.look_message_by_offset(r.commitlog_offset).topic == topic


def test_negative_queue_id(backend):
    store = backend.open()
    put_ok(store, Message(T, b"first"), 0)
    before = state(store)
    with pytest.raises(ValueError):
        store.put_message(Message(T, b"x"), -1)
    with pytest.raises(ValueError):
        store.put_messages([(Message(T, b"x"), 0), (Message(T, b"x"), -3)])
    assert state(store) == before


# --- corrupt records ----------------------------------------------------------------------------------------------
def test_look_message_at_a_non_record_offset(backend):
    store = backend.open()
    body = b"\x00\x00\x00\x40" + b"\x11" * 100  # at the body's offset: TOTALSIZE 64, MAGIC 0x11111111
    r = put_ok(store, Message(T, body), 0)
    off = r.commitlog_offset + 88
    with pytest.raises(CorruptRecordError) as ei:
        store.look_message_by_offset(off)
    assert ei.value.offset == off
    assert f"offset {off}" in str(ei.value)
    with pytest.raises(CorruptRecordError) as ei:
        store._engine.look_message_by_offset(off)  # the engine itself, not only the facade's decode
    assert ei.value.offset == off
    assert store.look_message_by_offset(r.commitlog_offset).body == body  # the real record is intact


# --- lock and closed store ----------------------------------------------------------------------------------------
def test_second_open_of_the_same_directory_fails(backend):
    store = backend.open()
    put_ok(store, Message(T, b"first"), 0)
    with pytest.raises(StoreError):
        MessageStore(store.root_dir, small_config(), backend=backend.name)
    code = textwrap.dedent(
        f"""
        import sys
        from rmq_core.store import MessageStore, StoreConfig
        from rmq_core.errors import StoreError
        try:
            MessageStore({store.root_dir!r}, StoreConfig(mapped_file_size_commit_log=65536,
                         mapped_file_size_consume_queue=2000), backend={backend.name!r})
        except StoreError as e:
            print("StoreError", e)
            sys.exit(0)
        sys.exit(3)
        """
    )
    p = subprocess.run([sys.executable, "-c", code], env=subprocess_env(backend.name), capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("StoreError")
    assert store.look_message_by_offset(0).body == b"first"  # the failed open did not disturb the open store
    put_ok(store, Message(T, b"second"), 0)
    store.close()
    s2 = backend.open(store.root_dir)
    assert s2.get_max_offset_in_queue(T, 0) == 2


def test_closed_store_raises(backend):
    store = backend.open()
    put_ok(store, Message(T, b"first"), 0)
    store.close()
    store.close()
    calls = [
        lambda: store.put_message(Message(T, b"x"), 0),
        lambda: store.put_messages([(Message(T, b"x"), 0)]),
        lambda: store.get_message("g", T, 0, 0, 32),
        lambda: store.flush(),
        lambda: store.max_physical_offset,
        lambda: store.min_physical_offset,
        lambda: store.get_max_offset_in_queue(T, 0),
        lambda: store.get_min_offset_in_queue(T, 0),
        lambda: store.get_offset_in_queue_by_time(T, 0, 0),
        lambda: store.get_earliest_message_time(T, 0),
        lambda: store.read_commit_log(0, 10),
        lambda: store.look_message_by_offset(0),
        lambda: store.topics(),
        lambda: store.scan_consume_queue(T, 0, 0, 10),
        lambda: store.delete_commit_log_files_before(0),
        lambda: store.correct_min_offsets(),
        lambda: store.recovery_report,
    ]
    for _i, call in enumerate(calls):
        with pytest.raises(StoreError):
            call()


def test_closed_engine_raises(backend):
    store = backend.open()
    put_ok(store, Message(T, b"first"), 0)
    eng = store._engine
    eng.close()
    eng.close()  # idempotent
    with pytest.raises(StoreError):
        eng.get_message(T, 0, 0, 32, None, None)
    with pytest.raises(StoreError):
        eng.put_messages([Message(T, b"x")], [0], 0, 0, ("127.0.0.1", 0), 0, 0)
    with pytest.raises(StoreError):
        eng.flush()
    with pytest.raises(StoreError):
        eng.look_message_by_offset(0)


def test_config_validation():
    with pytest.raises(ValueError):
        StoreConfig(flush_disk_type="SOMETIMES")
    with pytest.raises(ValueError):
        StoreConfig(mapped_file_size_commit_log=100)
    with pytest.raises(ValueError):
        StoreConfig(max_message_size=0)


# --- full disk -------------------------------------------------------------------------------------------------------
FULL_DISK_SCRIPT = r"""
import errno, json, os, resource, signal, sys
from rmq_core.store import MessageStore, StoreConfig
from rmq_core.message import Message, decode_messages
from rmq_core.errors import StoreError

mode, root, backend = sys.argv[1], sys.argv[2], sys.argv[3]
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
cfg = StoreConfig(mapped_file_size_commit_log=65536, mapped_file_size_consume_queue=2000)
out = {}

def put(s, body):
    try:
        r = s.put_message(Message("Full", body), 0)
        return [int(r.status), r.commitlog_offset, r.queue_offset]
    except StoreError as e:
        return ["StoreError", str(e)]

s = MessageStore(root, cfg, backend=backend)
out["before"] = [put(s, b"a" * 10000) for _ in range(3)]
ballast = os.path.join(os.path.dirname(root), "ballast")
if mode == "rlimit":
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (65536 - 1, hard))  # no new 64 KiB file can be created
else:
    chunk = b"\xab" * 4096
    with open(ballast, "wb", buffering=0) as f:  # fill the tmpfs
        try:
            while True:
                f.write(chunk)
        except OSError as e:
            out["ballast_errno"] = e.errno
out["full"] = [put(s, b"b" * 10000) for _ in range(6)]
out["max_phys_when_full"] = s.max_physical_offset
g = s.get_message("g", "Full", 0, 0, 32)
out["get_when_full"] = [int(g.status), g.message_count, [m.body[:1].decode() for m in g.decode()]]
if mode == "rlimit":
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
else:
    os.remove(ballast)
out["after"] = [put(s, b"c" * 10000) for _ in range(2)]
s.close()
s = MessageStore(root, cfg, backend=backend)
g = s.get_message("g", "Full", 0, 0, 32)
out["reopened"] = [int(g.status), g.message_count, [m.body[:1].decode() for m in g.decode()],
                   [m.queue_offset for m in g.decode()]]
s.close()
print(json.dumps(out))
"""


def _check_full_disk(out: dict) -> None:
    assert out["before"] == [[0, i * 10137, i] for i in range(3)]  # records of 91 + 10000 + 4 + 42 bytes
    full = out["full"]
    assert full[:3] == [[0, i * 10137, i] for i in range(3, 6)], full  # still room in the first file
    for f in full[3:]:  # the 7th record needs a new file, which cannot be created
        assert f[0] in (P.CREATE_MAPPED_FILE_FAILED.value, "StoreError"), full
        if f[0] != "StoreError":
            assert f[1:] == [-1, -1]
    assert out["max_phys_when_full"] == 6 * 10137
    assert out["get_when_full"] == [0, 6, list("aaabbb")]  # earlier data stays readable
    assert out["after"] == [[0, 65536, 6], [0, 65536 + 10137, 7]]  # space is back: no gap in offsets
    assert out["reopened"] == [0, 8, list("aaabbbcc"), list(range(8))]


def test_full_disk_rlimit(backend, tmp_path):
    root = str(tmp_path / "fs" / "store")
    os.makedirs(os.path.dirname(root))
    p = subprocess.run(
        [sys.executable, "-c", FULL_DISK_SCRIPT, "rlimit", root, backend.name],
        env=subprocess_env(backend.name), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, f"rc={p.returncode}\n{p.stdout}\n{p.stderr}"
    _check_full_disk(json.loads(p.stdout.strip().splitlines()[-1]))


def _tmpfs_available(d: str) -> bool:
    try:
        p = subprocess.run(
            ["unshare", "-rm", "sh", "-c", 'mount -t tmpfs -o size=1m tmpfs "$0"', d],
            capture_output=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0


def test_full_disk_real_tmpfs(backend, tmp_path):
    mnt = tmp_path / "fs"
    mnt.mkdir()
    if not _tmpfs_available(str(mnt)):
        pytest.skip("unshare -rm + mount -t tmpfs is not permitted here; the RLIMIT_FSIZE variant covers full disks")
    root = str(mnt / "store")
    shell = 'mount -t tmpfs -o size=1m tmpfs "$0" && exec "$1" -c "$2" ballast "$3" "$4"'
    p = subprocess.run(
        ["unshare", "-rm", "sh", "-c", shell, str(mnt), sys.executable, FULL_DISK_SCRIPT, root, backend.name],
        env=subprocess_env(backend.name), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, f"rc={p.returncode}\n{p.stdout}\n{p.stderr}"
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["ballast_errno"] == 28  # ENOSPC: the filesystem really was full
    _check_full_disk(out)


def test_message_body_types():
    """Message takes bytes as they are and copies bytes-like bodies into bytes; anything else is a TypeError."""

    class Sub(bytes):
        pass

    raw = b"abc"
    assert Message(T, raw).body is raw
    for like in (bytearray(raw), memoryview(raw), Sub(raw)):
        m = Message(T, like)
        assert type(m.body) is bytes and m.body == raw
    for bad in ("abc", None, 3, [1, 2]):
        with pytest.raises(TypeError, match="body must be bytes"):
            Message(T, bad)  # type: ignore[arg-type]
    m = Message(T, raw, tags="A", keys=["k1", "k2"], properties={"x": 1}, delay_time_level=3)
    assert m.properties == {"TAGS": "A", "KEYS": "k1 k2", "DELAY": "3", "x": "1"}
    assert list(Message(T, raw, tags="").properties) == [] and Message(T, raw).tags is None


def test_a_compressed_flag_on_a_body_that_does_not_inflate_is_a_corrupt_record(backend):
    """decode_messages of a pull body whose second record says COMPRESSED (sys flag bit 0, a field no checksum covers)
    over a plain body: CorruptRecordError naming where that record starts, not zlib's own error."""
    store = backend.open()
    rs = [put_ok(store, Message("Z", b"plain-%d" % i), 0) for i in range(3)]
    g = store.get_message("g", "Z", 0, 0, 32)
    body = bytearray(g.body)
    second = rs[1].commitlog_offset - rs[0].commitlog_offset
    body[second + SYSFLAG_POSITION + 3] |= COMPRESSED_FLAG  # the big-endian int32's lowest byte
    with pytest.raises(CorruptRecordError, match="does not inflate") as e:
        decode_messages(bytes(body))
    assert e.value.offset == second
