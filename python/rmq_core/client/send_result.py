"""SendResult and SendStatus (4.9 ``org.apache.rocketmq.client.producer``): what a send returns.

``msg_id`` is the producer's UNIQ_KEY (comma-joined for a batch), ``offset_msg_id`` the broker's id (store host +
commitlog offset; comma-joined for a batch). Thread-safety: immutable-by-convention value objects.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from rmq_core.message import MessageQueue

DEFAULT_TRACE_REGION_ID = "DefaultRegion"


class SendStatus(str, enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass
class SendResult:
    send_status: SendStatus
    msg_id: str | None
    offset_msg_id: str | None
    message_queue: MessageQueue
    queue_offset: int
    region_id: str = DEFAULT_TRACE_REGION_ID
    trace_on: bool = True
    transaction_id: str | None = None

    def __str__(self) -> str:
        return (
            f"SendResult [sendStatus={self.send_status.value}, msgId={self.msg_id}, offsetMsgId="
            f"{self.offset_msg_id}, messageQueue={self.message_queue}, queueOffset={self.queue_offset}]"
        )
