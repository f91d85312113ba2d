"""AllocateMessageQueueByConfig ("CONFIG"): always the configured queue list, whatever the group looks like.

As in 4.9 no check is made (not even that ``current_cid`` is in ``cid_all``). ``message_queue_list`` is set at
construction or with ``set_message_queue_list`` before the consumer starts; ``allocate`` returns a copy, so callers
cannot change the configuration. Thread-safe once configured.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rmq_core.client.consumer.allocate.strategy import AllocateMessageQueueStrategy
from rmq_core.message import MessageQueue


class AllocateMessageQueueByConfig(AllocateMessageQueueStrategy):
    def __init__(self, message_queue_list: Iterable[MessageQueue] = ()) -> None:
        self.message_queue_list: list[MessageQueue] = []
        self.set_message_queue_list(message_queue_list)

    def set_message_queue_list(self, message_queue_list: Iterable[MessageQueue]) -> None:
        mqs = list(message_queue_list)
        for mq in mqs:
            if not isinstance(mq, MessageQueue):
                raise TypeError(f"AllocateMessageQueueByConfig needs MessageQueue objects, not {mq!r}")
        self.message_queue_list = mqs

    def name(self) -> str:
        return "CONFIG"

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        return list(self.message_queue_list)
