"""RebalanceLockManager (br/client/rebalance/RebalanceLockManager.java): per consumer group, which client holds the
lock on each MessageQueue (orderly consumption).

Rules (RocketMQ's): a lock lives ``lock_max_live_time_ms`` (``rocketmq.broker.rebalance.lockMaxLiveTime``, 60 000 ms)
after its last refresh. ``try_lock_batch`` grants a queue that is unlocked, already held by the same client
(refreshing it), or whose lock expired (taking it over); a queue held by another client with an unexpired lock is
not granted. Checking ``is_locked`` for the holder refreshes its lock too (as Java's isLocked does).
``unlock_batch`` releases only the queues the client holds. Every method takes an optional ``now_ms`` (default: the
wall clock) so expiry can be tested without sleeping.

Not thread-safe: owned by the broker's event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

from rmq_core.message import MessageQueue

log = logging.getLogger(__name__)

REBALANCE_LOCK_MAX_LIVE_TIME_MS = 60_000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class LockEntry:
    client_id: str
    last_update_timestamp: int

    def is_expired(self, now_ms: int, max_live_ms: int) -> bool:
        return now_ms - self.last_update_timestamp > max_live_ms

    def is_locked(self, client_id: str, now_ms: int, max_live_ms: int) -> bool:
        return self.client_id == client_id and not self.is_expired(now_ms, max_live_ms)


class RebalanceLockManager:
    def __init__(self, lock_max_live_time_ms: int = REBALANCE_LOCK_MAX_LIVE_TIME_MS) -> None:
        self.lock_max_live_time_ms = lock_max_live_time_ms
        self.mq_lock_table: dict[str, dict[MessageQueue, LockEntry]] = {}

    def is_locked(self, group: str, mq: MessageQueue, client_id: str, now_ms: int | None = None) -> bool:
        now = _now_ms() if now_ms is None else now_ms
        entry = self.mq_lock_table.get(group, {}).get(mq)
        if entry is None:
            return False
        locked = entry.is_locked(client_id, now, self.lock_max_live_time_ms)
        if locked:
            entry.last_update_timestamp = now
        return locked

    def try_lock(self, group: str, mq: MessageQueue, client_id: str, now_ms: int | None = None) -> bool:
        return mq in self.try_lock_batch(group, [mq], client_id, now_ms)

    def try_lock_batch(
        self, group: str, mqs: Iterable[MessageQueue], client_id: str, now_ms: int | None = None
    ) -> set[MessageQueue]:
        now = _now_ms() if now_ms is None else now_ms
        table = self.mq_lock_table.setdefault(group, {})
        locked: set[MessageQueue] = set()
        for mq in mqs:
            entry = table.get(mq)
            if entry is None:
                table[mq] = LockEntry(client_id, now)
                log.info(
                    "tryLockBatch, message queue not locked, I got it. Group: %s NewClientId: %s %s",
                    group,
                    client_id,
                    mq,
                )
                locked.add(mq)
            elif entry.is_locked(client_id, now, self.lock_max_live_time_ms):
                entry.last_update_timestamp = now
                locked.add(mq)
            elif entry.is_expired(now, self.lock_max_live_time_ms):
                log.warning(
                    "tryLockBatch, message queue lock expired, I got it. Group: %s OldClientId: %s NewClientId: %s %s",
                    group,
                    entry.client_id,
                    client_id,
                    mq,
                )
                entry.client_id, entry.last_update_timestamp = client_id, now
                locked.add(mq)
            else:
                log.warning(
                    "tryLockBatch, message queue locked by other client. Group: %s OtherClientId: %s "
                    "NewClientId: %s %s",
                    group,
                    entry.client_id,
                    client_id,
                    mq,
                )
        return locked

    def unlock_batch(self, group: str, mqs: Iterable[MessageQueue], client_id: str) -> None:
        table = self.mq_lock_table.get(group)
        if table is None:
            log.warning("unlockBatch, group not exist, Group: %s %s", group, client_id)
            return
        for mq in mqs:
            entry = table.get(mq)
            if entry is None:
                log.warning("unlockBatch, but mq not locked, Group: %s %s %s", group, mq, client_id)
            elif entry.client_id == client_id:
                del table[mq]
                log.info("unlockBatch, Group: %s %s %s", group, mq, client_id)
            else:
                log.warning(
                    "unlockBatch, but mq locked by other client: %s, Group: %s %s %s",
                    entry.client_id,
                    group,
                    mq,
                    client_id,
                )

    def is_lock_all_expired(self, group: str, now_ms: int | None = None) -> bool:
        now = _now_ms() if now_ms is None else now_ms
        return all(e.is_expired(now, self.lock_max_live_time_ms) for e in self.mq_lock_table.get(group, {}).values())
