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
