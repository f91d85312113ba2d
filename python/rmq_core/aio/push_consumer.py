"""AsyncPushConsumer: RocketMQ's push consumer for asyncio code, with an ``async def`` listener, on the caller's loop.

The machinery is the blocking client's: ``rmq_core.client.PushConsumer`` holds the settings (same names and
defaults) and its ``DefaultMQPushConsumerImpl`` does the rest — rebalance (RebalancePushImpl), the pull path with
every check and flow control (``pull_message``, the PullCallback), the offset store, the send-back — over an
``MQClientInstance`` on the caller's loop. ``AsyncPushConsumerImpl`` changes only what blocks in the sync one:
start and shutdown are awaited, and the consume service is ``AsyncConsumeMessageConcurrentlyService`` (the listener
runs as tasks on the loop).

Invariants: start/shutdown are awaited on one loop; ``shutdown`` stops the consume tasks, the pulls in flight and
the instance's services (when no other client uses it), persisting the offsets first, and leaves no task pending.
Thread-safety: none; the caller's loop only.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

from rmq_core.aio.consume_orderly_service import AsyncConsumeMessageOrderlyService, AsyncOrderlyListener
from rmq_core.aio.consume_service import AsyncConcurrentlyListener, AsyncConsumeMessageConcurrentlyService
from rmq_core.aio.lifecycle import AsyncClient, caller_loop_instance, release_instance
from rmq_core.client.consumer.push_consumer import DefaultMQPushConsumerImpl, PushConsumer, ServiceState
from rmq_core.filter.message_selector import MessageSelector

log = logging.getLogger(__name__)


class AsyncPushConsumerImpl(DefaultMQPushConsumerImpl):
    """DefaultMQPushConsumerImpl with awaited start/shutdown and a consume service of tasks."""

    def create_consume_message_service(self, listener: Callable[..., Any]) -> Any:
        if self.consume_orderly:
            return AsyncConsumeMessageOrderlyService(self, listener)
        return AsyncConsumeMessageConcurrentlyService(self, listener, self.send_message_back_async)

    async def start_async(self) -> None:
        self.prepare_start()
        instance = caller_loop_instance(self._client_config())
        self.set_up(instance)
        try:
            await instance.start_async()
            self.service_state = ServiceState.RUNNING
            for topic in list(self.rebalance_impl.subscription_inner):
                await instance.update_topic_route_info_from_name_server(topic)
            await instance.check_client_in_broker()
            await instance.send_heartbeat_to_all_broker_with_lock()
        except BaseException:
            self.service_state = ServiceState.START_FAILED
            await self.consume_message_service.shutdown_async()
            await release_instance(instance, lambda: instance.unregister_consumer_async(self.group_name))
            raise
        log.info("the consumer [%s] start OK.", self.group_name)
        instance.rebalance_immediately()

    async def shutdown_async(self) -> None:
        if self.service_state != ServiceState.RUNNING:
            if self.service_state == ServiceState.CREATE_JUST:
                self.service_state = ServiceState.SHUTDOWN_ALREADY
            return
        await self.consume_message_service.shutdown_async()
        await self.persist_consumer_offset_async()
        self.service_state = ServiceState.SHUTDOWN_ALREADY
        await self._cancel_pull_tasks()
        instance = self.instance
        await release_instance(instance, lambda: instance.unregister_consumer_async(self.group_name))
        await self.rebalance_impl.cancel_background()
        self.rebalance_impl.destroy()
        log.info("the consumer [%s] shutdown OK", self.group_name)


class AsyncPushConsumer(AsyncClient):
    """``AsyncPushConsumer(group, namesrv_addr=..., message_model=..., consume_from_where=..., allocate_strategy=...,
    **settings)`` with ``rmq_core.client.PushConsumer``'s settings; ``consume_thread_min`` bounds the listener calls
    running at once. ``register_message_listener(async def listener(msgs, context) -> ConsumeConcurrentlyStatus)``."""

    def __init__(self, group: str, namesrv_addr: str | None = None, **settings: Any) -> None:
        self.push_consumer = PushConsumer(group, namesrv_addr, **settings)
        self.impl = AsyncPushConsumerImpl(self.push_consumer)
        self.push_consumer.impl = self.impl

    @property
    def consumer_group(self) -> str:
        return self.push_consumer.consumer_group

    @property
    def client_id(self) -> str | None:
        return self.push_consumer.client_id

    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        """Subscribe before ``start()``: tags (``"TagA || TagB"``, ``"*"``) or a ``MessageSelector``."""
        if self.impl.service_state == ServiceState.RUNNING:
            raise RuntimeError("subscribe before start() (a running AsyncPushConsumer keeps its subscriptions)")
        self.push_consumer.subscribe(topic, expression)

    def register_message_listener(self, listener: AsyncConcurrentlyListener) -> None:
        """``async def listener(msgs, context) -> ConsumeConcurrentlyStatus``: CONSUME_SUCCESS, or RECONSUME_LATER
        (also an exception, None or the consume timeout) to have the messages redelivered later."""
        self.push_consumer.register_message_listener(_require_async(listener))

    def register_message_listener_orderly(self, listener: AsyncOrderlyListener) -> None:
        """``async def listener(msgs, context) -> ConsumeOrderlyStatus``: each queue's messages in queue order, one
        call at a time per queue (CLUSTERING: while this consumer holds the queue's broker lock); SUCCESS, or
        SUSPEND_CURRENT_QUEUE_A_MOMENT (also an exception or None) to get the same messages again after
        ``suspend_current_queue_time_millis``."""
        self.push_consumer.register_message_listener_orderly(_require_async(listener))

    async def start(self) -> None:
        await self.impl.start_async()

    async def shutdown(self) -> None:
        await self.impl.shutdown_async()

    def suspend(self) -> None:
        self.impl.suspend()

    def resume(self) -> None:
        self.impl.resume()

    def __repr__(self) -> str:
        return f"AsyncPushConsumer({self.consumer_group}, {self.impl.service_state}, client_id={self.client_id})"


def _require_async(listener: Any) -> Any:
    if not inspect.iscoroutinefunction(listener) and not inspect.iscoroutinefunction(
        getattr(listener, "__call__", None)  # noqa: B004 - an object with an async __call__
    ):
        raise TypeError("AsyncPushConsumer needs an async def listener (msgs, context)")
    return listener
