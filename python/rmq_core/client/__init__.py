"""RocketMQ clients in Python: producer, push consumer, pull consumer, admin (docs/CLIENT_DESIGN.md).

``__all__`` names what users construct and receive: the clients, their listeners' and sends' value types, the queue
selectors and allocation strategies, and the errors. The machinery (MQClientInstance, the RPC layer, rebalance, process
queues, offset stores, the pull and consume services) is imported from its own module. Importing this package wires
nothing: each MQClientInstance builds its own parts. One import line per module (concurrent edits merge easily).
"""

from rmq_core.client.admin import Admin
from rmq_core.client.consumer.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
)
from rmq_core.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageModel,
)
from rmq_core.client.consumer.pull_consumer import PullConsumer
from rmq_core.client.consumer.push_consumer import PushConsumer
from rmq_core.client.exceptions import MQBrokerException, MQClientException, RemotingTimeoutError, RocketMQRpcError
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
from rmq_core.client.pull_result import PullResult, PullStatus
from rmq_core.client.send_result import SendResult, SendStatus

__all__ = [
    "Admin",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "LocalTransactionState",
    "MQBrokerException",
    "MQClientException",
    "MessageModel",
    "MessageQueueSelector",
    "Producer",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "RemotingTimeoutError",
    "RocketMQRpcError",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SendResult",
    "SendStatus",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
]
