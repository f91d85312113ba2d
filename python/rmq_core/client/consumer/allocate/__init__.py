"""RocketMQ's queue allocation strategies (client/consumer/rebalance in 4.9)."""

from rmq_core.client.consumer.allocate.averagely import AllocateMessageQueueAveragely
from rmq_core.client.consumer.allocate.averagely_by_circle import AllocateMessageQueueAveragelyByCircle
from rmq_core.client.consumer.allocate.by_config import AllocateMessageQueueByConfig
from rmq_core.client.consumer.allocate.consistent_hash import (
    AllocateMessageQueueConsistentHash,
    ConsistentHashRouter,
    md5_hash,
)
from rmq_core.client.consumer.allocate.strategy import AllocateMessageQueueStrategy

__all__ = [
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "ConsistentHashRouter",
    "md5_hash",
]
