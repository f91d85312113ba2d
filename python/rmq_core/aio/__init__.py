"""rmq_core.aio: RocketMQ's clients for asyncio, running on the caller's event loop (no loop thread).

``AsyncProducer`` (send, send_batch, send_oneway, ordered sends with a selector), ``AsyncTransactionProducer``
(``await send_message_in_transaction``; ``async def`` listener methods allowed), ``AsyncPushConsumer`` (an
``async def`` listener, concurrent or orderly) and ``AsyncPullConsumer`` (``async for msg in
consumer.messages(topic, "TagA || TagB")`` with explicit ``await consumer.commit(...)``), all async context managers.
They drive the same client core as ``rmq_core.client`` (MQClientInstance, MQClientAPIImpl, rebalance, ProcessQueue,
offset stores), on the caller's loop.
"""

from __future__ import annotations

from rmq_core.aio.producer import AsyncProducer
from rmq_core.aio.pull_consumer import AsyncPullConsumer
from rmq_core.aio.push_consumer import AsyncPushConsumer
from rmq_core.aio.transaction_producer import AsyncTransactionProducer
from rmq_core.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)

__all__ = [
    "AsyncProducer",
    "AsyncPullConsumer",
    "AsyncPushConsumer",
    "AsyncTransactionProducer",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
]
