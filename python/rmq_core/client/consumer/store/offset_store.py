"""The OffsetStore protocol and ReadOffsetType (cl/consumer/store/OffsetStore.java, ReadOffsetType.java).

Offsets are the **next** offset to consume in a queue. ``update_offset(mq, offset, increase_only)`` keeps the larger
value when ``increase_only``. ``read_offset`` answers -1 when nothing is known and -2 when the store could not be
asked (RemoteBrokerOffsetStore: an error talking to the broker). Implementations are thread-safe: consume threads
update, the loop thread reads and persists.
"""

from __future__ import annotations

import enum
import threading
from typing import Protocol

from rmq_core.message import MessageQueue


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


class OffsetStore(Protocol):
    def load(self) -> None: ...

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None: ...

    def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int: ...

    def persist_all(self, mqs: set[MessageQueue]) -> None: ...

    def persist(self, mq: MessageQueue) -> None: ...

    def remove_offset(self, mq: MessageQueue) -> None: ...

    def clone_offset_table(self, topic: str) -> dict[MessageQueue, int]: ...

    def update_consume_offset_to_broker(self, mq: MessageQueue, offset: int, is_oneway: bool) -> None: ...


class OffsetTable:
    """The in-memory offset table both stores keep (the ``offsetTable`` of RocketMQ's two implementations): updates
    (increase-only when asked), the memory side of ``read_offset``, and copies. Thread-safe under one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.offset_table: dict[MessageQueue, int] = {}

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        with self._lock:
            old = self.offset_table.get(mq)
            if old is None or not increase_only or offset > old:
                self.offset_table[mq] = offset

    def _read_from_memory(self, mq: MessageQueue, read_type: ReadOffsetType) -> int | None:
        """The answer ``read_offset`` gives without asking the store (-1 for READ_FROM_MEMORY with nothing
        cached), or None when the store must be asked."""
        if read_type is ReadOffsetType.READ_FROM_STORE:
            return None
        with self._lock:
            off = self.offset_table.get(mq)
        if off is not None:
            return off
        return -1 if read_type is ReadOffsetType.READ_FROM_MEMORY else None

    def clone_offset_table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        with self._lock:
            return {mq: off for mq, off in self.offset_table.items() if not topic or mq.topic == topic}
