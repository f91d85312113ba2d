"""Replication at the store level (rust/rmq-store/src/replica.rs, _reference/replica.py): a "master" store's CommitLog
copied into a "slave" store through ``get_commit_log_data`` / ``append_commit_log`` in batches that cut records and
cross files gives the same CommitLog bytes and ConsumeQueues that serve the same pulls; gaps, overlaps, a batch
crossing a file end and bytes that are not records are refused and lose nothing; both engines agree byte for byte.
"""

from __future__ import annotations

import os

import pytest

from rmq_core.errors import CorruptRecordError
from rmq_core.message import Message

from support.helpers import CL_SIZE, Clock, UniqIds, cl_dir, small_config

pytestmark = pytest.mark.both_backends


def fill(store, n: int, topics=("TA", "TB"), body_size: int = 700) -> None:
    for i in range(n):
        props = {"TAGS": f"t{i % 3}", "KEYS": f"k{i}"}
        store.put_message(
            Message(topics[i % len(topics)], bytes([i % 251]) * (body_size + i % 50), properties=props), i % 4
        )


def replicate(master, slave, start: int, batch: int) -> int:
    off = start
    while True:
        data = master.get_commit_log_data(off, batch)
        if data is None:
            return off
        slave.append_commit_log(off, data)
        off += len(data)


def read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def commit_log_files(root: str) -> dict[str, bytes]:
    d = cl_dir(root)
    return {n: read_file(os.path.join(d, n)) for n in sorted(os.listdir(d))}


def pulls(store) -> list:
    out = []
    for topic in ("TA", "TB"):
        for q in range(4):
            r = store.get_message("g", topic, q, 0, 1000)
            out.append((r.status, r.next_begin_offset, r.min_offset, r.max_offset, [m.msg_id for m in r.decode()]))
            out.append((store.get_max_offset_in_queue(topic, q), store.get_min_offset_in_queue(topic, q)))
    return out


@pytest.mark.parametrize("batch", [7, 1000, 32 * 1024])
def test_replicated_store_equals_master(backend, tmp_path, batch: int) -> None:
    master = backend.open(tmp_path / "m")
    slave = backend.open(tmp_path / "s", clock=Clock(), uniq_id=UniqIds())
    fill(master, 300)  # ~220 KB: several 64 KiB files, BLANKs included
    assert master.max_physical_offset > 3 * CL_SIZE
    arrivals: list[tuple] = []
    slave.add_arrival_listener(lambda *a: arrivals.append(a))
    end = replicate(master, slave, 0, batch)
    assert end == master.max_physical_offset == slave.max_physical_offset
    assert commit_log_files(str(tmp_path / "m")) == commit_log_files(str(tmp_path / "s"))
    assert pulls(slave) == pulls(master)
    # each queue's arrivals end at its max offset; tags and properties are not given for appended records
    last = {(a[0], a[1]): a[2] for a in arrivals}
    want = {(t, q): master.get_max_offset_in_queue(t, q) for t in ("TA", "TB") for q in range(4)}
    assert last == {k: v for k, v in want.items() if v}
    assert all(a[3] is None and a[4] is None for a in arrivals)
    # the index was built on the slave too
    assert [m.msg_id for m in slave.query_message("TA", "k10", 10, 0, 2**62)] == [
        m.msg_id for m in master.query_message("TA", "k10", 10, 0, 2**62)
    ]


def test_get_commit_log_data_stays_in_one_file(backend, tmp_path) -> None:
    master = backend.open(tmp_path / "m")
    fill(master, 120)
    assert master.get_commit_log_data(CL_SIZE - 100, 10**6) == master.read_commit_log(CL_SIZE - 100, 100)
    assert len(master.get_commit_log_data(0, 1000)) == 1000
    assert master.get_commit_log_data(master.max_physical_offset, 100) is None
    with pytest.raises(ValueError):
        master.get_commit_log_data(0, 0)


def test_slave_restarts_and_resumes_from_its_own_offset(backend, tmp_path) -> None:
    master = backend.open(tmp_path / "m")
    fill(master, 200)
    slave = backend.open(tmp_path / "s")
    half = master.get_commit_log_data(0, 50_000)
    slave.append_commit_log(0, half[:45_001])  # ends inside a record
    slave.close()
    slave = backend.open(tmp_path / "s")
    resumed = slave.max_physical_offset
    assert resumed < 45_001  # recovery drops the partial record
    replicate(master, slave, resumed, 4096)
    assert commit_log_files(str(tmp_path / "m")) == commit_log_files(str(tmp_path / "s"))
    assert pulls(slave) == pulls(master)


def test_refusals_lose_nothing(backend, tmp_path) -> None:
    master = backend.open(tmp_path / "m")
    fill(master, 100)
    slave = backend.open(tmp_path / "s")
    with pytest.raises(ValueError, match="file boundary"):
        slave.append_commit_log(100, b"x" * 10)
    data = master.get_commit_log_data(0, 5000)
    slave.append_commit_log(0, data[:3000])
    with pytest.raises(ValueError, match="gap"):
        slave.append_commit_log(3001, data[3001:])
    with pytest.raises(ValueError, match="gap"):
        slave.append_commit_log(2999, data[2999:])
    with pytest.raises(ValueError, match="crosses the end"):
        slave.append_commit_log(3000, b"\0" * CL_SIZE)
    garbage = bytearray(data[3000:5000])
    garbage[600:604] = b"\xde\xad\xbe\xef"  # somewhere in the next records: a bad magic or bad lengths
    with pytest.raises(CorruptRecordError):
        slave.append_commit_log(3000, bytes(garbage) + bytes(garbage))
    assert slave.max_physical_offset == 3000
    replicate(master, slave, 3000, 2222)
    assert commit_log_files(str(tmp_path / "m")) == commit_log_files(str(tmp_path / "s"))
    assert pulls(slave) == pulls(master)


def test_a_record_at_the_wrong_offset_is_refused(backend, tmp_path) -> None:
    master = backend.open(tmp_path / "m")
    fill(master, 5)
    first = master.read_commit_log(0, master.look_message_by_offset(0).store_size)
    slave = backend.open(tmp_path / "s")
    slave.append_commit_log(0, first)
    with pytest.raises(CorruptRecordError, match="PHYSICALOFFSET"):
        slave.append_commit_log(len(first), first)  # the same record again: it says offset 0
    assert slave.max_physical_offset == len(first)


def test_empty_slave_starts_at_a_later_file(backend, tmp_path) -> None:
    """4.9's master streams an empty slave from the start of its last file: the ConsumeQueues start mid-way."""
    master = backend.open(tmp_path / "m")
    fill(master, 300)
    last_file = master.max_physical_offset - master.max_physical_offset % CL_SIZE
    slave = backend.open(tmp_path / "s")
    replicate(master, slave, last_file, 32 * 1024)
    assert slave.min_physical_offset == last_file
    checked = 0
    for topic in ("TA", "TB"):
        for q in range(4):
            if slave.get_max_offset_in_queue(topic, q) == 0:  # no record of this queue in the last file
                continue
            checked += 1
            assert slave.get_max_offset_in_queue(topic, q) == master.get_max_offset_in_queue(topic, q)
            mn = slave.get_min_offset_in_queue(topic, q)
            got = [m.msg_id for m in slave.get_message("g", topic, q, mn, 1000).decode()]
            want = [m.msg_id for m in master.get_message("g", topic, q, mn, 1000).decode()]
            assert got == want and got
    assert checked >= 2


def test_engines_agree(tmp_path) -> None:
    """The Rust and the Python engine replicate a Rust master into identical files (CommitLog, ConsumeQueues)."""
    from support.helpers import Backend

    rust, py = Backend("rust", str(tmp_path / "r")), Backend("python", str(tmp_path / "p"))
    try:
        master = rust.open(tmp_path / "m", small_config())
        fill(master, 250)
        roots = []
        for b, name in ((rust, "sr"), (py, "sp")):
            s = b.open(tmp_path / name)
            replicate(master, s, 0, 3333)
            s.close()
            roots.append(str(tmp_path / name))
        for sub in ("commitlog", "consumequeue/TA/0", "consumequeue/TB/3"):
            a, b2 = (os.path.join(r, sub) for r in roots)
            assert sorted(os.listdir(a)) == sorted(os.listdir(b2))
            for n in os.listdir(a):
                assert read_file(os.path.join(a, n)) == read_file(os.path.join(b2, n)), (sub, n)
    finally:
        rust.close_all()
        py.close_all()
