"""Listener statuses and contexts (cl/consumer/listener/*.java); MessageModel and ConsumeFromWhere re-exported from
the heartbeat body, where the wire names live.

A listener for concurrent consumption is ``fn(msgs: list[MessageExt], context: ConsumeConcurrentlyContext) ->
ConsumeConcurrentlyStatus``; for orderly consumption ``fn(msgs, context: ConsumeOrderlyContext) ->
ConsumeOrderlyStatus``. Contexts belong to one consume call (no sharing, no locking).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence

from rmq_core.message import MessageExt, MessageQueue
from rmq_core.remoting.body.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel

__all__ = [
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "ConsumeReturnType",
    "ConsumeType",
    "MessageListenerConcurrently",
    "MessageListenerOrderly",
    "MessageModel",
]


class ConsumeConcurrentlyStatus(str, enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(str, enum.Enum):
    SUCCESS = "SUCCESS"
    ROLLBACK = "ROLLBACK"  # deprecated in RocketMQ
    COMMIT = "COMMIT"  # deprecated in RocketMQ
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


class ConsumeReturnType(str, enum.Enum):
    SUCCESS = "SUCCESS"
    TIME_OUT = "TIME_OUT"
    EXCEPTION = "EXCEPTION"
    RETURNNULL = "RETURNNULL"
    FAILED = "FAILED"


class ConsumeConcurrentlyContext:
    """delay_level_when_next_consume: 0 = broker decides (3 + reconsume times), -1 = straight to the DLQ, >0 = that
    level. ack_index: messages up to this index (inclusive) count as consumed when the status is CONSUME_SUCCESS."""

    __slots__ = ("ack_index", "delay_level_when_next_consume", "message_queue")

    def __init__(self, message_queue: MessageQueue) -> None:
        self.message_queue = message_queue
        self.delay_level_when_next_consume = 0
        self.ack_index = 2**31 - 1


class ConsumeOrderlyContext:
    __slots__ = ("auto_commit", "message_queue", "suspend_current_queue_time_millis")

    def __init__(self, message_queue: MessageQueue) -> None:
        self.message_queue = message_queue
        self.auto_commit = True
        self.suspend_current_queue_time_millis = -1


MessageListenerConcurrently = Callable[[Sequence[MessageExt], ConsumeConcurrentlyContext], ConsumeConcurrentlyStatus]
MessageListenerOrderly = Callable[[Sequence[MessageExt], ConsumeOrderlyContext], ConsumeOrderlyStatus]
