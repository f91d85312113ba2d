"""GroupTransferService: SYNC_MASTER's wait for a slave's acknowledgement (4.9 ``HAService.GroupTransferService``),
grouped on the broker's loop like ``broker/group_commit_service.py`` groups SYNC_FLUSH waits.

A send appends, then awaits ``wait(upto)``; each acknowledgement answers every waiting send it covers; a send not
covered within ``timeout_ms`` (``syncFlushTimeout``) gets False (FLUSH_SLAVE_TIMEOUT). Invariants:
1. A future resolves True only once ``acked >= upto``; False at its deadline or at ``close()``.
2. Waits are kept in arrival order; sends on the loop append in CommitLog order, so ``upto`` and the deadlines both
   grow along the queue and one acknowledgement or one timer pops a prefix (O(1) per send; a wait that arrives with a
   smaller ``upto`` than the tail is still answered, by a later pass).
3. One timer at a time: the head's deadline.
Thread-safety: the broker's loop only.
Details: docs/BROKER_DESIGN.md, 'Replication: SYNC_MASTER waits'.
"""

from __future__ import annotations

import asyncio
import collections


class GroupTransferService:
    def __init__(self, timeout_ms: int) -> None:
        self.timeout_s = timeout_ms / 1000.0
        self.acked = 0  # push2SlaveMaxOffset
        self._waiting: collections.deque[tuple[int, float, asyncio.Future[bool]]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    def wait(self, upto: int) -> asyncio.Future[bool]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        if self._closed:
            fut.set_result(False)
        elif self.acked >= upto:
            fut.set_result(True)
        else:
            self._waiting.append((upto, loop.time() + self.timeout_s, fut))
            if self._timer is None:
                self._arm(loop)
        return fut

    def notify_transfer_some(self, offset: int) -> None:
        """A slave acknowledged ``offset`` (``HAService.notifyTransferSome``)."""
        if offset <= self.acked:
            return
        self.acked = offset
        w = self._waiting
        while w and w[0][0] <= offset:
            fut = w.popleft()[2]
            if not fut.done():
                fut.set_result(True)
        if len(w) > 1 and any(upto <= offset for upto, _, _ in w):  # out-of-order waits (invariant 2)
            keep: collections.deque[tuple[int, float, asyncio.Future[bool]]] = collections.deque()
            for item in w:
                if item[0] <= offset:
                    if not item[2].done():
                        item[2].set_result(True)
                else:
                    keep.append(item)
            self._waiting = keep

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        if self._waiting:
            self._timer = loop.call_at(self._waiting[0][1], self._expire, loop)

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        w = self._waiting
        while w and w[0][1] <= now:
            fut = w.popleft()[2]
            if not fut.done():
                fut.set_result(False)
        self._arm(loop)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def close(self) -> None:
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._waiting:
            fut = self._waiting.popleft()[2]
            if not fut.done():
                fut.set_result(False)
