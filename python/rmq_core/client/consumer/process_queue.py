"""ProcessQueue (cl/impl/consumer/ProcessQueue.java): the client-side cache of one message queue's pulled messages.

Invariants:
1. ``msg_tree`` holds the pulled, not yet consumed messages ordered by queue offset; ``msg_count``/``msg_size`` are
   the count and body bytes of ``msg_tree`` plus the orderly ``consuming`` map (taken, not yet committed).
2. ``remove_message`` returns the offset to commit: the smallest offset still cached, or ``queue_offset_max + 1``
   when the removal emptied the cache, or -1 when the cache was already empty. The committed offset is therefore
   never ahead of an unfinished message.
3. ``queue_offset_max`` is the largest offset ever put (RocketMQ's queueOffsetMax).

Thread-safety: every method takes ``self._lock`` (a plain ``threading.Lock``; RocketMQ uses a read-write lock). The
pull path (loop thread), the consume threads and the rebalance touch a ProcessQueue concurrently. ``consume_lock``
is the orderly service's per-queue lock (one consumer thread per queue at a time).
"""

from __future__ import annotations

import logging
import threading
import time
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from rmq_core.message import PROPERTY_CONSUME_START_TIMESTAMP, PROPERTY_MAX_OFFSET, MessageExt

if TYPE_CHECKING:
    from rmq_core.client.consumer.consume_message_service import ExpiredMessageSender
    from rmq_core.remoting.body.consumer_running_info import ProcessQueueInfo

log = logging.getLogger(__name__)

REBALANCE_LOCK_MAX_LIVE_TIME = 30000  # rocketmq.client.rebalance.lockMaxLiveTime
REBALANCE_LOCK_INTERVAL = 20000  # rocketmq.client.rebalance.lockInterval
PULL_MAX_IDLE_TIME = 120000  # rocketmq.client.pull.pullMaxIdleTime


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class OffsetMap:
    """A map queue offset → message iterated in offset order (RocketMQ's TreeMap<Long, MessageExt>).

    A dict plus a sorted key list with lazy deletion: keys arrive mostly in increasing order (append), removals
    mostly at the front; ``first_key``/``last_key`` skip keys no longer in the dict and the list is compacted when
    more than half of it is stale. Amortised O(1) for the common cases, O(log n + n) for an out-of-order insert.
    Not thread-safe on its own (the ProcessQueue's lock guards it).
    """

    __slots__ = ("_d", "_head", "_keys")

    def __init__(self) -> None:
        self._d: dict[int, MessageExt] = {}
        self._keys: list[int] = []
        self._head = 0

    def __len__(self) -> int:
        return len(self._d)

    def __bool__(self) -> bool:
        return bool(self._d)

    def __contains__(self, key: int) -> bool:
        return key in self._d

    def get(self, key: int) -> MessageExt | None:
        return self._d.get(key)

    def put(self, key: int, msg: MessageExt) -> MessageExt | None:
        d = self._d
        old = d.get(key)
        d[key] = msg
        if old is None:
            keys = self._keys
            if not keys or key > keys[-1]:
                keys.append(key)
            else:
                i = bisect_left(keys, key, self._head)
                if i == len(keys) or keys[i] != key:  # not a stale entry for the same key
                    if i < self._head:
                        self._head = i
                    insort(keys, key, self._head)
        return old

    def remove(self, key: int) -> MessageExt | None:
        msg = self._d.pop(key, None)
        if msg is not None and not self._d:
            self._keys.clear()
            self._head = 0
        return msg

    def first_key(self) -> int | None:
        d, keys = self._d, self._keys
        if not d:
            return None
        h = self._head
        while keys[h] not in d:
            h += 1
        if h > 64 and h > len(keys) // 2:
            del keys[:h]
            h = 0
        self._head = h
        return keys[h]

    def last_key(self) -> int | None:
        d, keys = self._d, self._keys
        if not d:
            return None
        while keys[-1] not in d:
            keys.pop()
        return keys[-1]

    def poll_first(self) -> tuple[int, MessageExt] | None:
        k = self.first_key()
        if k is None:
            return None
        return k, self.remove(k)  # type: ignore[return-value]

    def first_value(self) -> MessageExt | None:
        k = self.first_key()
        return None if k is None else self._d[k]

    def values(self) -> list[MessageExt]:
        """The messages in offset order (a copy)."""
        d = self._d
        return [d[k] for k in self._keys[self._head :] if k in d]

    def clear(self) -> None:
        self._d.clear()
        self._keys.clear()
        self._head = 0


class ProcessQueue:
    __slots__ = (
        "_lock",
        "_now_ms",
        "consume_lock",
        "consuming",
        "consuming_msg_orderly_tree",
        "dropped",
        "last_consume_timestamp",
        "last_lock_timestamp",
        "last_pull_timestamp",
        "locked",
        "msg_acc_cnt",
        "msg_count",
        "msg_size",
        "msg_tree",
        "queue_offset_max",
        "try_unlock_times",
    )

    def __init__(self, now_ms: Callable[[], int] = _now_ms) -> None:
        self._lock = threading.Lock()
        self._now_ms = now_ms
        self.msg_tree = OffsetMap()
        self.consuming_msg_orderly_tree = OffsetMap()
        self.msg_count = 0
        self.msg_size = 0
        self.queue_offset_max = 0
        self.dropped = False
        self.locked = False
        now = now_ms()
        self.last_pull_timestamp = now
        self.last_consume_timestamp = now
        self.last_lock_timestamp = now
        self.consuming = False
        self.try_unlock_times = 0
        self.msg_acc_cnt = 0
        self.consume_lock = threading.Lock()

    # --- expiry -----------------------------------------------------------------------------------------------
    def is_lock_expired(self, now_ms: int | None = None) -> bool:
        now = self._now_ms() if now_ms is None else now_ms
        return now - self.last_lock_timestamp > REBALANCE_LOCK_MAX_LIVE_TIME

    def is_pull_expired(self, now_ms: int | None = None) -> bool:
        now = self._now_ms() if now_ms is None else now_ms
        return now - self.last_pull_timestamp > PULL_MAX_IDLE_TIME

    def inc_try_unlock_times(self) -> None:
        with self._lock:
            self.try_unlock_times += 1

    # --- the message cache ------------------------------------------------------------------------------------
    def put_message(self, msgs: Sequence[MessageExt]) -> bool:
        """Cache pulled messages; True when the caller should dispatch them (orderly: nobody is consuming yet)."""
        dispatch = False
        with self._lock:
            tree = self.msg_tree
            added = 0
            size = 0
            for m in msgs:
                if tree.put(m.queue_offset, m) is None:
                    added += 1
                    self.queue_offset_max = m.queue_offset
                    size += len(m.body)
            self.msg_count += added
            self.msg_size += size
            if tree and not self.consuming:
                dispatch = True
                self.consuming = True
            if msgs:
                last = msgs[-1]
                prop = last.properties.get(PROPERTY_MAX_OFFSET)
                if prop is not None:
                    try:
                        acc = int(prop) - last.queue_offset
                    except ValueError:
                        acc = 0
                    if acc > 0:
                        self.msg_acc_cnt = acc
        return dispatch

    def get_max_span(self) -> int:
        with self._lock:
            tree = self.msg_tree
            if tree:
                return tree.last_key() - tree.first_key()  # type: ignore[operator]
            return 0

    def remove_message(self, msgs: Iterable[MessageExt]) -> int:
        """Drop consumed messages; the offset to commit (see invariant 2)."""
        with self._lock:
            self.last_consume_timestamp = self._now_ms()
            tree = self.msg_tree
            if not tree:
                return -1
            removed = 0
            size = 0
            remove = tree.remove
            for m in msgs:
                if remove(m.queue_offset) is not None:
                    removed += 1
                    size += len(m.body)
            self.msg_count -= removed
            self.msg_size -= size
            first = tree.first_key()
            return self.queue_offset_max + 1 if first is None else first

    def has_temp_message(self) -> bool:
        with self._lock:
            return bool(self.msg_tree)

    def first_offset(self) -> int | None:
        """The smallest cached offset (None when empty)."""
        with self._lock:
            return self.msg_tree.first_key()

    def messages(self) -> list[MessageExt]:
        """The cached (not taken) messages in offset order (a copy)."""
        with self._lock:
            return self.msg_tree.values()

    def fill_process_queue_info(self, info: ProcessQueueInfo) -> None:
        """This queue's cache and lock state into ``info`` (GET_CONSUMER_RUNNING_INFO's mqTable)."""
        with self._lock:
            if self.msg_tree:
                info.cached_msg_min_offset = self.msg_tree.first_key() or 0
                info.cached_msg_max_offset = self.msg_tree.last_key() or 0
                info.cached_msg_count = len(self.msg_tree)
                info.cached_msg_size_in_mib = self.msg_size // (1024 * 1024)
            if self.consuming_msg_orderly_tree:
                info.transaction_msg_min_offset = self.consuming_msg_orderly_tree.first_key() or 0
                info.transaction_msg_max_offset = self.consuming_msg_orderly_tree.last_key() or 0
                info.transaction_msg_count = len(self.consuming_msg_orderly_tree)
            info.locked = self.locked
            info.try_unlock_times = self.try_unlock_times
            info.last_lock_timestamp = self.last_lock_timestamp
            info.dropped = self.dropped
            info.last_pull_timestamp = self.last_pull_timestamp
            info.last_consume_timestamp = self.last_consume_timestamp

    def clear(self) -> None:
        with self._lock:
            self.msg_tree.clear()
            self.consuming_msg_orderly_tree.clear()
            self.msg_count = 0
            self.msg_size = 0
            self.queue_offset_max = 0

    # --- orderly ----------------------------------------------------------------------------------------------
    def take_messages(self, batch_size: int) -> list[MessageExt]:
        """Move up to ``batch_size`` first messages into the consuming map; empty result clears ``consuming``."""
        out: list[MessageExt] = []
        with self._lock:
            self.last_consume_timestamp = self._now_ms()
            tree, consuming = self.msg_tree, self.consuming_msg_orderly_tree
            for _ in range(batch_size):
                e = tree.poll_first()
                if e is None:
                    break
                out.append(e[1])
                consuming.put(e[0], e[1])
            if not out:
                self.consuming = False
        return out

    def commit(self) -> int:
        """Forget the taken messages; the offset after the last of them, or -1 when none were taken."""
        with self._lock:
            consuming = self.consuming_msg_orderly_tree
            last = consuming.last_key()
            taken = consuming.values()
            self.msg_count -= len(taken)
            self.msg_size -= sum(len(m.body) for m in taken)
            consuming.clear()
            return -1 if last is None else last + 1

    def rollback(self) -> None:
        """Put every taken message back into the cache."""
        with self._lock:
            for m in self.consuming_msg_orderly_tree.values():
                self.msg_tree.put(m.queue_offset, m)
            self.consuming_msg_orderly_tree.clear()

    def make_message_to_consume_again(self, msgs: Iterable[MessageExt]) -> None:
        with self._lock:
            for m in msgs:
                self.consuming_msg_orderly_tree.remove(m.queue_offset)
                self.msg_tree.put(m.queue_offset, m)

    # --- consume timeout --------------------------------------------------------------------------------------
    def clean_expired_msg(self, push_consumer: ExpiredMessageSender, now_ms: int | None = None) -> int:
        """Send back (delay level 3) up to 16 first messages whose consumption started more than
        ``consume_timeout`` minutes ago and drop them from the cache; returns how many were sent back.
        Nothing for orderly consumers."""
        impl = getattr(push_consumer, "impl", push_consumer)
        if getattr(impl, "consume_orderly", False):
            return 0
        timeout_ms = int(push_consumer.consume_timeout) * 60 * 1000
        cleaned = 0
        with self._lock:
            loops = min(len(self.msg_tree), 16)
        for _ in range(loops):
            now = self._now_ms() if now_ms is None else now_ms
            with self._lock:
                msg = self.msg_tree.first_value()
                if msg is None:
                    break
                start = msg.properties.get(PROPERTY_CONSUME_START_TIMESTAMP)
                if not start or now - int(start) <= timeout_ms:
                    break
            try:
                push_consumer.send_message_back(msg, 3)
            except Exception as e:
                log.error("send expired msg back failed, msg=%r: %s", msg, e)
                break
            with self._lock:
                if self.msg_tree.first_key() == msg.queue_offset:
                    if self.msg_tree.remove(msg.queue_offset) is not None:
                        self.msg_count -= 1
                        self.msg_size -= len(msg.body)
                    cleaned += 1
        return cleaned

    def __repr__(self) -> str:
        return (
            f"ProcessQueue(msg_count={self.msg_count}, msg_size={self.msg_size}, dropped={self.dropped}, "
            f"locked={self.locked}, queue_offset_max={self.queue_offset_max})"
        )
