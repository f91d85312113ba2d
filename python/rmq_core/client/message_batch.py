"""MessageBatch (4.9 ``org.apache.rocketmq.common.message.MessageBatch``): several messages of one topic sent as one
SEND_BATCH_MESSAGE whose body is ``message_encoding.encode_batch`` of them.

Invariants (``generate_from_list``, RocketMQ's wording in errors): at least one message; all of the same topic; no
delay level; not a retry topic; the same WAIT (waitStoreMsgOK) property. Each inner message gets its UNIQ_KEY
before encoding. Thread-safety: not shared; built and sent by one caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from rmq_core.common import mix_all
from rmq_core.message import PROPERTY_DELAY_TIME_LEVEL, PROPERTY_WAIT_STORE_MSG_OK, Message
from rmq_core.message_encoding import encode_batch


class MessageBatch(Message):
    __slots__ = ("messages",)
    messages: list[Message]

    def __init__(self, messages: list[Message]) -> None:
        super().__init__(messages[0].topic, b"")
        self.messages = messages
        wait = messages[0].properties.get(PROPERTY_WAIT_STORE_MSG_OK)
        if wait is not None:
            self.properties[PROPERTY_WAIT_STORE_MSG_OK] = wait

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)

    def encode(self) -> bytes:
        return encode_batch(self.messages)

    @classmethod
    def generate_from_list(cls, messages: Iterable[Message]) -> MessageBatch:
        """Checks as ``MessageBatch.generateFromList`` does; raises ValueError with RocketMQ's message."""
        msgs = list(messages)
        if not msgs:
            raise ValueError("MessageBatch: the message list is empty")
        first = msgs[0]
        for m in msgs:
            if not isinstance(m, Message):
                raise ValueError(f"MessageBatch: not a Message: {m!r}")
            if PROPERTY_DELAY_TIME_LEVEL in m.properties and m.delay_time_level > 0:  # (no int() per message)
                raise ValueError("TimeDelayLevel is not supported for batching")
            if m.topic.startswith(mix_all.RETRY_GROUP_TOPIC_PREFIX):
                raise ValueError("Retry Group is not supported for batching")
            if m.topic != first.topic:
                raise ValueError("The topic of the messages in one batch should be the same")
            if m.properties.get(PROPERTY_WAIT_STORE_MSG_OK) != first.properties.get(PROPERTY_WAIT_STORE_MSG_OK):
                raise ValueError("The waitStoreMsgOK of the messages in one batch should the same")
        return cls(msgs)
