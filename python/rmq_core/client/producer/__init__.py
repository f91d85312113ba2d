"""Producer side of the client (DefaultMQProducer), see docs/CLIENT_DESIGN.md."""

from rmq_core.client.message_batch import MessageBatch
from rmq_core.client.producer.local_transaction_state import LocalTransactionState
from rmq_core.client.producer.message_queue_selector import (
    MessageQueueSelector,
    SelectMessageQueueByHash,
    SelectMessageQueueByRandom,
)
from rmq_core.client.producer.producer import Producer
from rmq_core.client.producer.transaction_listener import TransactionListener
from rmq_core.client.producer.transaction_producer import TransactionProducer
from rmq_core.client.producer.transaction_send_result import TransactionSendResult
from rmq_core.client.send_result import SendResult, SendStatus
from rmq_core.client.topic_publish_info import TopicPublishInfo

__all__ = [
    "LocalTransactionState",
    "MessageBatch",
    "MessageQueueSelector",
    "Producer",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SendResult",
    "SendStatus",
    "TopicPublishInfo",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
]
