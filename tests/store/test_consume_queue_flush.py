"""The flush thread's tick and the ConsumeQueues (4.9's FlushConsumeQueueService: flushConsumeQueueLeastPages 2,
flushConsumeQueueThoroughInterval 60 s): a queue is msynced by a tick only once 2 pages of it are dirty, every queue
at an explicit ``flush()``/close (and by the tick once a minute); the checkpoint's logicsMsgTimestamp advances only
with a flush that left no unit unflushed, so an abnormal recovery that trusts it (Apache's, reading this store) never
skips a unit that was not durable. Read from the checkpoint file, on both engines.
"""

from __future__ import annotations

import os
import struct
import time

import pytest

from rmq_core.message import Message

from support.helpers import Backend, Clock, small_config

pytestmark = pytest.mark.both_backends


def _checkpoint(root: str) -> tuple[int, int]:
    with open(os.path.join(root, "checkpoint"), "rb") as f:
        data = f.read(16)
    if len(data) < 16:  # not written yet
        return 0, 0
    physic, logics = struct.unpack(">qq", data)
    return physic, logics


def _after_a_tick(root: str, physic: int) -> tuple[int, int]:
    deadline = time.monotonic() + 10
    while _checkpoint(root)[0] != physic:
        assert time.monotonic() < deadline, "no tick wrote the checkpoint"
        time.sleep(0.01)
    time.sleep(0.1)  # and one more tick
    return _checkpoint(root)


def test_a_tick_leaves_queues_with_few_dirty_pages_and_the_logics_timestamp(backend: Backend) -> None:
    clock = Clock(step=1000)
    store = backend.open(
        config=small_config(
            mapped_file_size_commit_log=4 << 20,
            mapped_file_size_consume_queue=300_000 * 20,
            flush_interval_commit_log=20,
        ),
        clock=clock,
    )
    root = store.root_dir
    assert store.put_messages([(Message("Cqf", b"one"), 0)]).all_ok
    t1 = clock.calls[-1]
    assert _after_a_tick(root, t1) == (t1, 0)  # queue 0 holds one 20-byte unit: not msynced, logics not advanced
    store.flush()
    assert _checkpoint(root) == (t1, t1)  # an explicit flush msyncs every queue
    assert store.put_messages([(Message("Cqf", b"two"), 0)]).all_ok
    t2 = clock.calls[-1]
    assert _after_a_tick(root, t2) == (t2, t1)
    # 500 units (10,000 bytes, 2+ pages) to queue 1: the tick msyncs that queue, queue 0 still has a unit dirty
    assert store.put_messages([(Message("Cqf", b"x"), 1) for _ in range(500)]).all_ok
    t3 = clock.calls[-1]
    assert _after_a_tick(root, t3) == (t3, t1)
    store.close()
    assert _checkpoint(root) == (t3, t3)
