"""The OffsetStore protocol and ReadOffsetType (cl/consumer/store/OffsetStore.java, ReadOffsetType.java).

Offsets are the **next** offset to consume in a queue. ``update_offset(mq, offset, increase_only)`` keeps the larger
value when ``increase_only``. ``read_offset`` answers -1 when nothing is known and -2 when the store could not be
asked (RemoteBrokerOffsetStore: an error talking to the broker). Implementations are thread-safe: consume threads
update, the loop thread reads and persists.
"""

from __future__ import annotations

import enum
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
