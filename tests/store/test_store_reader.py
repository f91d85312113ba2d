"""The read-only ``StoreReader`` (rust/rmq-store/src/store_reader.rs and its twin _reference/store_reader.py): equal to
the engine on a store it wrote (rolled files, tag filters, deleted CommitLog files), the Rust and Python readers
equal on every call, torn tails and files being created never served, and reading while another process appends
and rolls files."""

from __future__ import annotations

import os
import selectors
import struct
import subprocess
import sys
import time

import pytest

from rmq_core import _backend
from rmq_core.message import Message, decode_messages
from rmq_core.store import MessageStore
from rmq_core.store_reader import StoreReader

from support.helpers import CL_SIZE, CQ_SIZE, cl_dir, cq_dir, small_config, subprocess_env

TOPIC = "Reader"
QUEUES = 3
READERS = ("rust", "python")


def reader(name: str, root: str, **kw: int) -> StoreReader:
    return _backend.load(name).StoreReader(root, **kw)


def fill(store, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        msg = Message(TOPIC, f"body-{i}-".encode() * (2 + i % 80), tags=f"Tag{i % 5}", keys=f"k{i}")
        r = store.put_message(msg, i % QUEUES)
        assert r.status == 0


def engine_records(store, topic: str, qid: int, start: int, end: int, tag_codes=None) -> list[bytes]:
    """The records of units [start, end) as the engine's own ConsumeQueue scan and CommitLog read give them."""
    out = []
    _next, units = store.scan_consume_queue(topic, qid, start, end - start, tag_codes)
    for off, size, _tags in struct.iter_unpack(">qiq", units):
        if size == 0x7FFFFFFF or off < store.min_physical_offset:
            continue
        rec = store.read_commit_log(off, size)
        assert rec is not None
        out.append(bytes(rec))
    return out


def split(buf, count: int) -> list[bytes]:
    raw = bytes(buf)
    out, pos = [], 0
    while pos < len(raw):
        (size,) = struct.unpack_from(">i", raw, pos)
        out.append(raw[pos : pos + size])
        pos += size
    assert len(out) == count
    return out


def snapshot(name: str, root: str) -> dict[str, object]:
    """Every answer of one reader on a store at rest: parity compares these whole."""
    with reader(name, root) as r:
        out: dict[str, object] = {
            "topics": r.topics(),
            "queues": r.queues(),
            "sizes": (r.commit_log_file_size, r.consume_queue_file_size),
            "min_phys": r.min_physical_offset,
        }
        for t, q in r.queues():
            lo, hi = r.min_offset(t, q), r.max_offset(t, q)
            out[f"{t}:{q}:range"] = (lo, hi)
            for s, e in ((0, hi + 5), (lo, hi), (hi // 3, hi // 2), (hi, hi + 10), (-5, 3)):
                buf, n, nxt = r.read_records(t, q, s, e)
                out[f"{t}:{q}:{s}:{e}"] = (bytes(buf), n, nxt)
            codes = [_backend.load(name).tags_hash("Tag1"), _backend.load(name).tags_hash("Tag2") + 2**32]
            buf, n, nxt = r.read_records(t, q, 0, hi, codes)
            out[f"{t}:{q}:tags"] = (bytes(buf), n, nxt)
        # record_at: every record start, the byte after it, and a stride over the whole CommitLog
        starts = [
            m.commitlog_offset for t, q in r.queues() for m in decode_messages(bytes(r.read_records(t, q, 0, 10**9)[0]))
        ]
        files = sorted(int(n) for n in os.listdir(cl_dir(root)))
        end = files[-1] + (r.commit_log_file_size or 0) if files else 0
        probes = sorted({*starts, *(o + 1 for o in starts), *range(-1, end, max(end // 1500, 1))})
        out["record_at"] = [r.record_at(o) for o in probes]
    return out


@pytest.fixture
def written(backend):
    """A store of 400 messages over 3 queues on small files (CommitLog and ConsumeQueue files roll), closed."""
    root = os.path.join(backend.tmp, "store")
    store = backend.open(root)
    fill(store, 400)
    store.flush()
    return backend, root, store


def test_reader_equals_the_engine(written):
    backend, root, store = written
    with reader(backend.name, root) as r:
        assert r.queues() == sorted(store.topics())
        assert r.topics() == [TOPIC]
        assert r.commit_log_file_size == CL_SIZE and r.consume_queue_file_size == CQ_SIZE
        assert len(os.listdir(cl_dir(root))) > 3 and len(os.listdir(cq_dir(root, TOPIC, 0))) > 1  # files rolled
        assert r.min_physical_offset == store.min_physical_offset
        for q in range(QUEUES):
            lo, hi = store.get_min_offset_in_queue(TOPIC, q), store.get_max_offset_in_queue(TOPIC, q)
            assert (r.min_offset(TOPIC, q), r.max_offset(TOPIC, q)) == (lo, hi)
            buf, n, nxt = r.read_records(TOPIC, q, lo, hi)
            assert (n, nxt) == (hi - lo, hi)
            assert split(buf, n) == engine_records(store, TOPIC, q, lo, hi)
            assert [m.queue_offset for m in decode_messages(bytes(buf))] == list(range(lo, hi))
            codes = [backend.impl.tags_hash("Tag2")]
            buf, n, nxt = r.read_records(TOPIC, q, 10, hi - 3, codes)
            assert nxt == hi - 3
            assert split(buf, n) == engine_records(store, TOPIC, q, 10, hi - 3, codes)
            assert {m.tags for m in decode_messages(bytes(buf))} == {"Tag2"}
            # beyond the end: nothing, and the read says where the written units end
            assert r.read_records(TOPIC, q, hi, hi + 10)[1:] == (0, hi)
        # record_at: every record start gives that record, an offset inside a record gives None
        for q in range(QUEUES):
            for m in decode_messages(bytes(r.read_records(TOPIC, q, 0, 20)[0])):
                assert r.record_at(m.commitlog_offset) == store.read_commit_log(m.commitlog_offset, m.store_size)
                assert r.record_at(m.commitlog_offset + 4) is None
        assert r.record_at(store.max_physical_offset) is None
        assert r.record_at(-1) is None
        assert r.max_offset("Nope", 0) == r.min_offset("Nope", 0) == 0
        assert r.read_records("Nope", 0, 0, 10)[1:] == (0, 0)


def test_deleted_commit_log_files_move_min_like_the_engine(written):
    backend, root, store = written
    first_files = sorted(os.listdir(cl_dir(root)))
    store.delete_commit_log_files_before(int(first_files[2]))
    store.correct_min_offsets()
    with reader(backend.name, root) as r:
        assert r.min_physical_offset == store.min_physical_offset == int(first_files[2])
        for q in range(QUEUES):
            lo, hi = store.get_min_offset_in_queue(TOPIC, q), store.get_max_offset_in_queue(TOPIC, q)
            assert lo > 0
            assert (r.min_offset(TOPIC, q), r.max_offset(TOPIC, q)) == (lo, hi)
            # units of deleted data are skipped, never served
            buf, n, nxt = r.read_records(TOPIC, q, 0, hi)
            assert (n, nxt) == (hi - lo, hi)
            assert split(buf, n) == engine_records(store, TOPIC, q, lo, hi)


def test_given_sizes_and_bad_roots(written, tmp_path):
    backend, root, _store = written
    impl = backend.impl
    assert impl.mapped_file_size(cl_dir(root)) == CL_SIZE
    assert impl.mapped_file_size(cq_dir(root, TOPIC, 1)) == CQ_SIZE
    assert impl.mapped_file_size(str(tmp_path / "missing")) is None
    with reader(backend.name, root, commit_log_file_size=CL_SIZE, consume_queue_file_size=CQ_SIZE) as r:
        assert r.max_offset(TOPIC, 0) > 0
    with pytest.raises(FileNotFoundError, match="not a RocketMQ store directory"):
        reader(backend.name, str(tmp_path))
    with pytest.raises(ValueError, match="commit_log_file_size must be positive"):
        reader(backend.name, root, commit_log_file_size=0)


def tamper(root: str) -> None:
    """A torn tail as a crash or a writer mid-append leaves it: queue 0 gets a unit past the CommitLog's written
    records; queue 1's last record loses its magic; queue 2 gets a unit whose offset points inside a record; a
    CommitLog file of length 0 appears (being created); a zero-length queue file follows queue 0's last."""
    with reader("rust", root) as r:
        ends = {q: r.max_offset(TOPIC, q) for q in range(QUEUES)}
        last = {q: decode_messages(bytes(r.read_records(TOPIC, q, ends[q] - 1, ends[q])[0]))[0] for q in range(QUEUES)}
    cl_files = sorted(os.listdir(cl_dir(root)))
    last_cl = int(cl_files[-1])

    def put_unit(q: int, index: int, offset: int, size: int) -> None:
        path = os.path.join(cq_dir(root, TOPIC, q), f"{index * 20 - index * 20 % CQ_SIZE:020d}")
        with open(path, "r+b") as f:
            f.seek(index * 20 % CQ_SIZE)
            f.write(struct.pack(">qiq", offset, size, 0))

    put_unit(0, ends[0], last_cl + CL_SIZE - 200, 150)  # record not there (zeros)
    m1 = last[1]
    with open(os.path.join(cl_dir(root), f"{m1.commitlog_offset - m1.commitlog_offset % CL_SIZE:020d}"), "r+b") as f:
        f.seek(m1.commitlog_offset % CL_SIZE + 4)
        f.write(b"\0\0\0\0")
    m2 = last[2]
    put_unit(2, ends[2], m2.commitlog_offset + 8, m2.store_size)
    open(os.path.join(cl_dir(root), f"{last_cl + 5 * CL_SIZE:020d}"), "wb").close()
    start0 = ends[0] * 20 - ends[0] * 20 % CQ_SIZE + CQ_SIZE
    open(os.path.join(cq_dir(root, TOPIC, 0), f"{start0:020d}"), "wb").close()


def test_torn_tails_are_never_served(written):
    backend, root, store = written
    ends = {q: store.get_max_offset_in_queue(TOPIC, q) for q in range(QUEUES)}
    store.close()
    tamper(root)
    with reader(backend.name, root) as r:
        assert r.max_offset(TOPIC, 0) == ends[0]  # the unit past the written records is not counted
        assert r.max_offset(TOPIC, 1) == ends[1] - 1  # the record without magic is not counted
        assert r.max_offset(TOPIC, 2) == ends[2]
        for q, stop in ((0, ends[0]), (1, ends[1] - 1), (2, ends[2])):
            buf, n, nxt = r.read_records(TOPIC, q, 0, ends[q] + 5)
            assert nxt == stop and n == stop
            msgs = decode_messages(bytes(buf))  # every served record whole
            assert [m.queue_offset for m in msgs] == list(range(stop))


@pytest.mark.both_backends
def test_rust_and_python_readers_agree(tmp_path):
    root = str(tmp_path / "store")
    with MessageStore(root, small_config()) as store:
        fill(store, 310)
        store.delete_commit_log_files_before(int(sorted(os.listdir(cl_dir(root)))[1]))
        store.correct_min_offsets()
    assert snapshot("rust", root) == snapshot("python", root)
    tamper(root)
    assert snapshot("rust", root) == snapshot("python", root)


WRITER = r"""
import sys
import time
from rmq_core.store import MessageStore, StoreConfig
from rmq_core.message import Message

root, count = sys.argv[1], int(sys.argv[2])
cfg = StoreConfig(mapped_file_size_commit_log=16384, mapped_file_size_consume_queue=400)
with MessageStore(root, cfg) as s:
    sys.stdout.write("OPEN\n")
    sys.stdout.flush()
    for i in range(count):
        body = ("live-%d-" % i).encode() * (1 + i % 30)
        r = s.put_message(Message("Reader", body, tags="t%d" % (i % 2)), i % 3)
        assert r.status == 0, r
        if i % 10 == 9:
            time.sleep(0.001)  # a steady stream rather than one burst: the readers get many looks at it
    s.flush()
sys.stdout.write("DONE\n")
sys.stdout.flush()
"""


@pytest.mark.slow
@pytest.mark.parametrize("writer_backend", ["rust", "python"])
def test_reading_while_another_process_appends_and_rolls(tmp_path, writer_backend):
    """A writer process appends 3,000 messages on 16 KiB CommitLog / 20-unit ConsumeQueue files (hundreds of rolls);
    meanwhile both readers read every queue's tail (from 0 every 10th round) up to its max again and again: max never
    goes back, every read serves exactly the units up to ``max`` as whole records with consecutive queue offsets,
    the Rust and Python readers serve the same bytes below the smaller of their maxima, and at the end both equal the
    finished store."""
    root = str(tmp_path / "live")
    count = 3000
    p = subprocess.Popen(
        [sys.executable, "-c", WRITER, root, str(count)],
        env=subprocess_env(writer_backend), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    assert sel.select(timeout=120), "the writer did not open the store"
    assert p.stdout.readline() == b"OPEN\n"
    readers = {name: reader(name, root) for name in READERS}
    seen = {(name, q): 0 for name in READERS for q in range(QUEUES)}
    rounds = served = 0
    totals: set[int] = set()  # the store's size as the rounds saw it
    try:
        while True:
            running = p.poll() is None
            for q in range(QUEUES):
                got = {}
                # the tail (the same start for both readers), and from 0 every 10th round
                lo = max(0, min(seen[(name, q)] for name in READERS) - 150) if rounds % 10 else 0
                for name, r in readers.items():
                    hi = r.max_offset("Reader", q)
                    assert hi >= seen[(name, q)], f"{name}: max went back"
                    seen[(name, q)] = hi
                    buf, n, nxt = r.read_records("Reader", q, lo, hi)
                    assert (n, nxt) == (hi - lo, hi), f"{name} q{q}: served {n} of {lo}..{hi}, stopped at {nxt}"
                    msgs = decode_messages(bytes(buf))
                    assert [m.queue_offset for m in msgs] == list(range(lo, hi))
                    got[name] = split(buf, n)
                    served += n
                common = min(len(v) for v in got.values())  # the same start: the same records up to the smaller max
                assert got["rust"][:common] == got["python"][:common]
            rounds += 1
            totals.add(sum(seen[("rust", q)] for q in range(QUEUES)))
            if not running:
                break
            time.sleep(0.01)
        assert p.wait(timeout=60) == 0, p.stderr.read().decode()
        assert p.stdout.readline() == b"DONE\n"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for r in readers.values():
            r.close()
        sel.close()
        p.stdout.close()
        p.stderr.close()
    print(f"{rounds} rounds, {len(totals)} distinct sizes seen, {served} records served")
    assert len(totals) >= 5 and served > 0  # the readers read while the writer wrote, many times
    assert len(os.listdir(cl_dir(root))) > 20  # the writer rolled files while the readers read
    assert sum(seen[("rust", q)] for q in range(QUEUES)) == count
    assert snapshot("rust", root) == snapshot("python", root)
