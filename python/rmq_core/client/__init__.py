"""RocketMQ clients in Python: producer, push consumer, pull consumer (docs/CLIENT_DESIGN.md).

One import line per module (concurrent edits merge easily)."""

from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI
from rmq_core.client.client_config import ClientConfig
from rmq_core.client.consumer.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
)
from rmq_core.client.consumer.consume_message_concurrently_service import ConsumeMessageConcurrentlyService
from rmq_core.client.consumer.consume_message_orderly_service import ConsumeMessageOrderlyService
from rmq_core.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageModel,
)
from rmq_core.client.consumer.process_queue import ProcessQueue
from rmq_core.client.consumer.pull_api_wrapper import PullAPIWrapper
from rmq_core.client.consumer.pull_consumer import PullConsumer
from rmq_core.client.consumer.pull_message_service import PullMessageService
from rmq_core.client.consumer.pull_request import PullRequest
from rmq_core.client.consumer.push_consumer import DefaultMQPushConsumerImpl, PushConsumer
from rmq_core.client.consumer.rebalance_impl import RebalanceImpl, RebalancePullImpl, RebalancePushImpl
from rmq_core.client.consumer.rebalance_service import RebalanceService
from rmq_core.client.consumer.store.local_file_offset_store import LocalFileOffsetStore
from rmq_core.client.consumer.store.offset_store import OffsetStore, ReadOffsetType
from rmq_core.client.consumer.store.remote_broker_offset_store import RemoteBrokerOffsetStore
from rmq_core.client.exceptions import MQBrokerException, MQClientException, RemotingTimeoutError, RocketMQRpcError
from rmq_core.client.mq_client_api import MQClientAPIImpl
from rmq_core.client.mq_client_instance import ClientParts, FindBrokerResult, MQClientInstance
from rmq_core.client.mq_client_manager import MQClientManager
from rmq_core.client.producer import (
    LocalTransactionState,
    MessageQueueSelector,
    Producer,
    SelectMessageQueueByHash,
    SelectMessageQueueByRandom,
    SendResult,
    SendStatus,
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)
from rmq_core.client.pull_result import PullResult, PullResultExt, PullStatus

# the composition root: the parts an instance starts (see MQClientInstance.parts), set here, where every client
# module is imported, so that the instance imports none of the consumers and the producer that use it
MQClientInstance.parts = ClientParts(
    pull_message_service=PullMessageService, rebalance_service=RebalanceService, inner_producer=Producer
)


__all__ = [
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "BlockingMQClientAPI",
    "ClientConfig",
    "ClientParts",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeMessageConcurrentlyService",
    "ConsumeMessageOrderlyService",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "DefaultMQPushConsumerImpl",
    "FindBrokerResult",
    "LocalFileOffsetStore",
    "LocalTransactionState",
    "MQBrokerException",
    "MQClientAPIImpl",
    "MQClientException",
    "MQClientInstance",
    "MQClientManager",
    "MessageModel",
    "MessageQueueSelector",
    "OffsetStore",
    "ProcessQueue",
    "Producer",
    "PullAPIWrapper",
    "PullConsumer",
    "PullMessageService",
    "PullRequest",
    "PullResult",
    "PullResultExt",
    "PullStatus",
    "PushConsumer",
    "ReadOffsetType",
    "RebalanceImpl",
    "RebalancePullImpl",
    "RebalancePushImpl",
    "RebalanceService",
    "RemoteBrokerOffsetStore",
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
