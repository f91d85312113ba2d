"""A store costs the disk what it holds plus a bounded reserve, on both backends: with the default geometry (1 GiB
CommitLog files, 4.9's 420 MB index files) a fresh store holding one message has 64 MiB of CommitLog blocks reserved
(``RESERVE_STEP``), not 1 GiB, and its index file its hash slots plus 16 MiB of entries, not 401 MB; the CommitLog's
next step is reserved when the writer reaches it; a store reopened keeps writing. (The full disk, which the
reservation turns into an error instead of a SIGBUS, is tests/store/test_bad_input.py's.)"""

from __future__ import annotations

import os

from rmq_core.message import Message
from rmq_core.store import PutMessageStatus, StoreConfig

MiB = 1 << 20
STEP = 64 * MiB


def allocated(path: str) -> int:
    return os.stat(path).st_blocks * 512


def tree_allocated(root: str) -> int:
    return sum(allocated(os.path.join(d, f)) for d, _, files in os.walk(root) for f in files)


def test_default_store_reserves_a_step_not_the_files(backend, tmp_path) -> None:
    root = str(tmp_path / "store")
    cfg = StoreConfig()  # the defaults: 1 GiB CommitLog files, 5,000,000 slots x 20,000,000 index entries
    store = backend.open(root, cfg)
    r = store.put_message(Message("ReserveT", b"hello", tags="TagA", keys="k1"), queue_id=0)
    assert r.status == PutMessageStatus.PUT_OK
    store.flush()
    cl = os.path.join(root, "commitlog", "00000000000000000000")
    assert os.path.getsize(cl) == 1 << 30  # the file keeps its size: offsets and names as RocketMQ's
    assert STEP <= allocated(cl) < 2 * STEP  # (the warm-ahead thread may fault a few pages past the step)
    [index] = os.listdir(os.path.join(root, "index"))
    index_path = os.path.join(root, "index", index)
    assert os.path.getsize(index_path) == 40 + 5_000_000 * 4 + 20_000_000 * 20
    assert allocated(index_path) <= 40 + 5_000_000 * 4 + 17 * MiB
    assert tree_allocated(root) < 128 * MiB  # was ~1.4 GB

    body = b"x" * (4 * MiB - 1024)
    for _ in range(17):  # past the first step
        assert store.put_message(Message("ReserveT", body), queue_id=1).status == PutMessageStatus.PUT_OK
    assert 2 * STEP <= allocated(cl) < 3 * STEP
    backend.close_all()

    store = backend.open(root, cfg)  # reopened: the file's blocks are reserved from the recovered end on
    for _ in range(16):
        assert store.put_message(Message("ReserveT", body), queue_id=1).status == PutMessageStatus.PUT_OK
    assert 3 * STEP <= allocated(cl) < 4 * STEP
    got = store.get_message("g", "ReserveT", 0, 0, 1)
    assert [m.body for m in got.decode()] == [b"hello"]
