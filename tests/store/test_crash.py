"""Crash safety: a writer process appends and prints each acknowledged message; it is killed
with SIGKILL mid-stream; on reopen every acknowledged message is present and intact, nothing corrupt is served, every
body decodes, and appends continue where the log ends. SYNC_FLUSH: acknowledged = put_message returned;
ASYNC_FLUSH: acknowledged = flush() returned after the put. Twice in a row, so a recovered store is crashed again.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys

import pytest

from rmq_core.message import Message, decode_messages

from support import spec_parser as sp
from support.helpers import CL_SIZE, cq_dir, drain_queue, put_ok, small_config, subprocess_env

pytestmark = pytest.mark.slow

TOPIC = "Crash"
QUEUES = 4

WRITER = r"""
import sys
from rmq_core.store import MessageStore, StoreConfig
from rmq_core.message import Message

root, backend, mode, start, scale = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
cfg = StoreConfig(mapped_file_size_commit_log=65536, mapped_file_size_consume_queue=2000,
                  flush_disk_type="SYNC_FLUSH" if mode == "sync" else "ASYNC_FLUSH")
s = MessageStore(root, cfg, backend=backend)
rep = s.recovery_report
sys.stdout.write("OPEN %d %d\n" % (int(rep["abnormal"]), rep["commit_log_end"]))
sys.stdout.flush()
i = start
while True:
    qid = i % 4
    body = ("crash-%d-" % i).encode() * (1 + i % 60) * scale
    r = s.put_message(Message("Crash", body, tags="t%d" % (i % 3), keys="k%d" % i), qid)
    if r.status != 0:
        sys.stdout.write("FAIL %d %d\n" % (i, int(r.status)))
        sys.stdout.flush()
        sys.exit(5)
    if mode == "async":
        s.flush()
    sys.stdout.write("ACK %d %d %d %d %d\n" % (i, qid, r.queue_offset, r.commitlog_offset, r.wrote_bytes))
    sys.stdout.flush()
    i += 1
"""


def body_of(i: int, scale: int) -> bytes:
    return (f"crash-{i}-").encode() * (1 + i % 60) * scale


def run_writer_and_kill(root: str, backend: str, mode: str, start: int, acks_wanted: int, scale: int):
    """Start the writer, read ``acks_wanted`` ACK lines, SIGKILL it. Returns (open line, acks)."""
    p = subprocess.Popen(
        [sys.executable, "-c", WRITER, root, backend, mode, str(start), str(scale)],
        env=subprocess_env(backend), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    acks: list[tuple[int, int, int, int, int]] = []
    opened = None
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    buf = b""
    try:
        while len(acks) < acks_wanted:
            if not sel.select(timeout=300):  # a hang guard, not a speed check
                raise AssertionError(f"writer produced nothing for 300 s after {len(acks)} acks")
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                p.wait()
                raise AssertionError(f"writer exited rc={p.returncode}: {p.stderr.read().decode()}")
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                parts = line.decode().split()
                if parts[0] == "OPEN":
                    opened = (bool(int(parts[1])), int(parts[2]))
                elif parts[0] == "ACK":
                    acks.append(tuple(int(x) for x in parts[1:]))  # type: ignore[arg-type]
                else:
                    raise AssertionError(f"writer said {line!r}")
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
        p.stdout.close()
        p.stderr.close()
        sel.close()
    assert p.returncode == -signal.SIGKILL
    return opened, acks  # every line read was an acknowledgement, even past acks_wanted


def verify(store, acks, scale: int) -> None:
    root = store.root_dir
    by_queue: dict[int, list] = {q: [] for q in range(QUEUES)}
    for i, qid, qoff, clo, size in acks:
        m = store.look_message_by_offset(clo)
        assert m is not None, f"acknowledged message {i} at {clo} lost"
        assert (m.topic, m.queue_id, m.queue_offset, m.body, m.store_size) == (
            TOPIC,
            qid,
            qoff,
            body_of(i, scale),
            size,
        )
        assert m.keys == f"k{i}" and m.tags == f"t{i % 3}"
        by_queue[qid].append((qoff, clo, i))
    for q, expected in by_queue.items():
        recs = drain_queue(store, TOPIC, q)  # CRCs checked, nothing corrupt served
        assert [r.queue_offset for r in recs] == list(range(len(recs)))  # no gaps, no duplicates
        decoded = decode_messages(b"".join(r.raw for r in recs))
        assert len(decoded) == len(recs)
        for qoff, clo, i in expected:
            assert recs[qoff].physical_offset == clo
            assert decoded[qoff].body == body_of(i, scale)
    store.flush()
    records, _, end = sp.read_commitlog(root)  # the whole log parses with the spec parser
    assert end == store.max_physical_offset
    assert all(r.crc_ok for _, r in records)
    assert len({o for o, _ in records}) == len(records)
    units = sum(len(sp.read_cq(root, TOPIC, q)) for q in range(QUEUES) if os.path.isdir(cq_dir(root, TOPIC, q)))
    assert units == len(records)  # every record dispatched exactly once


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("acks_wanted, scale", [(1, 1), (450, 1), (120, 40)])  # scale 40: bodies up to ~30 KB
def test_kill_9_keeps_acknowledged_messages(backend, mode, acks_wanted, scale):
    root = os.path.join(backend.tmp, "crash-store")
    opened, acks = run_writer_and_kill(root, backend.name, mode, 0, acks_wanted, scale)
    assert opened == (False, 0)
    assert len(acks) >= acks_wanted
    if acks_wanted > 1:
        assert acks[-1][3] > 2 * CL_SIZE  # the stream crossed CommitLog files
    # crash again, while the second writer continues a recovered store
    opened2, acks2 = run_writer_and_kill(root, backend.name, mode, 100_000, 50, scale)
    assert opened2[0] is True  # abort was left behind: abnormal recovery
    assert opened2[1] >= acks[-1][3] + acks[-1][4]
    store = backend.open(root, config=small_config(flush_disk_type="SYNC_FLUSH" if mode == "sync" else "ASYNC_FLUSH"))
    rep = store.recovery_report
    assert rep["abnormal"] is True
    verify(store, acks + acks2, scale)
    end = store.max_physical_offset
    q0 = store.get_max_offset_in_queue(TOPIC, 0)
    r = put_ok(store, Message(TOPIC, b"after the crash"), 0)
    assert r.queue_offset == q0
    assert r.commitlog_offset == end or (r.commitlog_offset % CL_SIZE == 0 and r.commitlog_offset > end)
