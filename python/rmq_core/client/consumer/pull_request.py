"""PullRequest (cl/impl/consumer/PullRequest.java): one per assigned message queue, reused across pulls.

Created by the rebalance (RebalancePushImpl) and handed to the PullMessageService; ``next_offset`` and
``locked_first`` are only touched on the client instance's loop thread (the pull path), so no locking.
Equality and hash follow RocketMQ: (consumer group, message queue).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmq_core.message import MessageQueue

if TYPE_CHECKING:
    from rmq_core.client.consumer.process_queue import ProcessQueue


class PullRequest:
    __slots__ = ("consumer_group", "locked_first", "message_queue", "next_offset", "process_queue")

    def __init__(
        self,
        consumer_group: str,
        message_queue: MessageQueue,
        process_queue: ProcessQueue,
        next_offset: int,
        locked_first: bool = False,
    ) -> None:
        self.consumer_group = consumer_group
        self.message_queue = message_queue
        self.process_queue = process_queue
        self.next_offset = next_offset
        self.locked_first = locked_first

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PullRequest):
            return NotImplemented
        return self.consumer_group == other.consumer_group and self.message_queue == other.message_queue

    def __hash__(self) -> int:
        return hash((self.consumer_group, self.message_queue))

    def __repr__(self) -> str:
        return (
            f"PullRequest [consumerGroup={self.consumer_group}, messageQueue={self.message_queue}, "
            f"nextOffset={self.next_offset}]"
        )
