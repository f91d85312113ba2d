"""SYNC_FLUSH group commit for callers that must not block: ``put_messages(wait_flush=False)`` + ``wait_flushed``
(both backends), and the broker's GroupCommitService sharing one flush among the waits of a loop iteration."""

from __future__ import annotations

import asyncio

from rmq_core.broker.group_commit_service import GroupCommitService
from rmq_core.message import Message
from rmq_core.store import MessageStore, PutMessageStatus

from support.helpers import small_config


def _end(results) -> int:
    return max(r.commitlog_offset + r.wrote_bytes for r in results)


def test_put_without_waiting_then_wait_flushed(backend):
    store = backend.open(config=small_config(flush_disk_type="SYNC_FLUSH"))
    results = store.put_messages([(Message("GC", b"m%d" % i), 0) for i in range(5)], wait_flush=False)
    assert [r.status for r in results] == [PutMessageStatus.PUT_OK] * 5
    assert [r.queue_offset for r in results] == list(range(5))
    assert store.wait_flushed(_end(results)) is True
    single = store.put_message(Message("GC", b"one"), 1, wait_flush=False)
    assert single.status == PutMessageStatus.PUT_OK
    assert store.wait_flushed(single.commitlog_offset + single.wrote_bytes) is True
    assert [m.body for m in store.get_message("g", "GC", 0, 0, 32).decode()] == [b"m%d" % i for i in range(5)]


def test_wait_flushed_on_a_closed_store_is_false(backend):
    store = backend.open(config=small_config(flush_disk_type="SYNC_FLUSH"))
    r = store.put_message(Message("GC", b"x"), 0, wait_flush=False)
    store.close()
    assert store.wait_flushed(r.commitlog_offset + r.wrote_bytes) is False


class _CountingStore:
    """A real store whose ``wait_flushed`` calls are counted (the rounds the service ran)."""

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self.calls: list[int] = []

    def wait_flushed(self, upto: int) -> bool:
        self.calls.append(upto)
        return self.store.wait_flushed(upto)


def test_waits_of_one_iteration_share_one_flush(backend):
    store = backend.open(config=small_config(flush_disk_type="SYNC_FLUSH"))
    counting = _CountingStore(store)

    async def run() -> list[bool]:
        service = GroupCommitService(counting)  # type: ignore[arg-type]
        try:
            futs = []
            for i in range(50):
                r = store.put_message(Message("GC", b"m%d" % i), i % 4, wait_flush=False)
                futs.append(service.wait(r.commitlog_offset + r.wrote_bytes))
            first = await asyncio.gather(*futs)
            r = store.put_message(Message("GC", b"late"), 0, wait_flush=False)
            later = await service.wait(r.commitlog_offset + r.wrote_bytes)
            return [*first, later]
        finally:
            service.close()

    answers = asyncio.run(run())
    assert answers == [True] * 51
    assert len(counting.calls) == 2  # the 50 waits of one iteration share a round; the late one gets its own
    assert counting.calls[1] > counting.calls[0]


def test_waits_after_close_answer_false(backend):
    store = backend.open(config=small_config(flush_disk_type="SYNC_FLUSH"))

    async def run() -> bool:
        service = GroupCommitService(store)
        service.close()
        r = store.put_message(Message("GC", b"x"), 0, wait_flush=False)
        return await service.wait(r.commitlog_offset + r.wrote_bytes)

    assert asyncio.run(run()) is False
