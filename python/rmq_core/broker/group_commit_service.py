"""GroupCommitService: the broker's side of SYNC_FLUSH group commit (4.9's ``CommitLog.GroupCommitService``).

A send appends without waiting (``put_messages(wait_flush=False)``), then awaits ``wait(end_offset)``.
Invariants:
1. A future resolves True only once the CommitLog is flushed at least up to its ``upto``; False when the flush timed
   out (``sync_flush_timeout``) or failed, or the store is closed.
2. At most one round is in flight; the waits that arrive during a round form the next one, which starts as soon as
   the round ends, so many in-flight sync sends (any connection) share one msync and one thread hop.
3. A round starts on the loop iteration after the wait that opened it, so the sends handled in the same iteration
   join it.
Thread-safety: ``wait`` and the round bookkeeping run on the broker's loop only; the worker thread only calls
``MessageStore.wait_flushed`` (GIL released). Details: docs/BROKER_DESIGN.md, 'Threading model'.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmq_core.store import MessageStore


class GroupCommitService:
    """``GroupCommitService(store)``; ``await wait(upto)`` → flushed in time; ``close()`` ends the worker thread."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self._waiting: list[tuple[int, asyncio.Future[bool]]] = []
        self._round_open = False  # a round is scheduled or in flight
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._closed = False

    def wait(self, upto: int) -> asyncio.Future[bool]:
        """A future (on the running loop) resolved once a flush covers ``upto`` (True) or fails / times out."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        if self._closed:
            fut.set_result(False)
            return fut
        self._waiting.append((upto, fut))
        if not self._round_open:
            self._round_open = True
            loop.call_soon(self._begin_round, loop)
        return fut

    def _begin_round(self, loop: asyncio.AbstractEventLoop) -> None:
        batch, self._waiting = self._waiting, []
        if not batch:
            self._round_open = False
            return
        if self._closed:
            self._answer(batch, False)
            self._round_open = False
            return
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rmq-group-commit")
        target = max(upto for upto, _ in batch)
        done = loop.run_in_executor(self._executor, self._store.wait_flushed, target)
        done.add_done_callback(lambda f: self._end_round(loop, batch, f))

    def _end_round(
        self, loop: asyncio.AbstractEventLoop, batch: list[tuple[int, asyncio.Future[bool]]], f: asyncio.Future[bool]
    ) -> None:
        ok = not f.cancelled() and f.exception() is None and bool(f.result())
        self._answer(batch, ok)
        if self._waiting:
            self._begin_round(loop)
        else:
            self._round_open = False

    @staticmethod
    def _answer(batch: list[tuple[int, asyncio.Future[bool]]], ok: bool) -> None:
        for _, fut in batch:
            if not fut.done():
                fut.set_result(ok)

    def close(self) -> None:
        """Later waits answer False at once; the worker thread ends after its current round."""
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=False)
