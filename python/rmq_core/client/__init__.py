"""RocketMQ clients in Python: producer, push consumer, pull consumer (docs/CLIENT_DESIGN.md).

One import line per module (concurrent edits merge easily)."""

from rmq_core.client.client_config import ClientConfig  # noqa: F401
from rmq_core.client.exceptions import MQBrokerException, MQClientException, RemotingTimeoutError  # noqa: F401
from rmq_core.client.mq_client_instance import FindBrokerResult, MQClientInstance  # noqa: F401
from rmq_core.client.mq_client_manager import MQClientManager  # noqa: F401
from rmq_core.client.producer import MessageQueueSelector, Producer, SelectMessageQueueByHash, SelectMessageQueueByRandom, SendResult, SendStatus  # noqa: F401,E501
from rmq_core.client.consumer.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueAveragelyByCircle, AllocateMessageQueueByConfig, AllocateMessageQueueConsistentHash, AllocateMessageQueueStrategy  # noqa: F401,E501
from rmq_core.client.consumer.rebalance_impl import RebalanceImpl, RebalancePullImpl, RebalancePushImpl  # noqa: F401
from rmq_core.client.consumer.rebalance_service import RebalanceService  # noqa: F401
from rmq_core.client.consumer.consume_message_orderly_service import ConsumeMessageOrderlyService  # noqa: F401
from rmq_core.client.consumer.pull_consumer import PullConsumer  # noqa: F401
from rmq_core.client.consumer.push_consumer import DefaultMQPushConsumerImpl, PushConsumer  # noqa: F401
from rmq_core.client.consumer.listener import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, ConsumeFromWhere, ConsumeOrderlyContext, ConsumeOrderlyStatus, MessageModel  # noqa: F401,E501
from rmq_core.client.consumer.pull_result import PullResult, PullResultExt, PullStatus  # noqa: F401
from rmq_core.client.consumer.pull_request import PullRequest  # noqa: F401
from rmq_core.client.consumer.process_queue import ProcessQueue  # noqa: F401
from rmq_core.client.consumer.pull_message_service import PullMessageService  # noqa: F401
from rmq_core.client.consumer.pull_api_wrapper import PullAPIWrapper  # noqa: F401
from rmq_core.client.consumer.consume_message_concurrently_service import ConsumeMessageConcurrentlyService  # noqa: F401,E501
from rmq_core.client.consumer.store.offset_store import OffsetStore, ReadOffsetType  # noqa: F401
from rmq_core.client.consumer.store.remote_broker_offset_store import RemoteBrokerOffsetStore  # noqa: F401
from rmq_core.client.consumer.store.local_file_offset_store import LocalFileOffsetStore  # noqa: F401
