"""AsyncProducer: RocketMQ's producer for asyncio code, on the caller's event loop.

It is the blocking ``rmq_core.client.Producer`` driven differently: the same object holds the settings, the publish
routes (MQProducerInner) and the send path (``send_on_loop``: sendDefaultImpl with its retries, sendSelectImpl for
ordered sends, batches, compression), over an ``MQClientInstance`` that runs on the loop that awaited ``start()``
(``MQClientManager.get_or_create_async_instance``) instead of a loop thread. Nothing here speaks the wire.

Invariants: every method is awaited on the loop that started the producer (a RuntimeError otherwise); cancelling
an awaiting ``send`` (or an ``asyncio.timeout`` around it) abandons only that request: its response, if it comes,
is dropped, and the connection stays open for the next send.
Thread-safety: none; one event loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rmq_core.aio.lifecycle import AsyncClient, caller_loop_instance, release_instance, start_instance
from rmq_core.client.producer.producer import ONEWAY, SYNC, Producer, Selector
from rmq_core.client.send_result import SendResult
from rmq_core.message import Message, MessageQueue


class AsyncProducer(AsyncClient):
    """``AsyncProducer(group, namesrv_addr=..., **settings)``: the settings of ``rmq_core.client.Producer``."""

    def __init__(self, group: str, namesrv_addr: str | None = None, **settings: Any) -> None:
        self.producer = Producer(group, namesrv_addr, **settings)

    @property
    def producer_group(self) -> str:
        return self.producer.producer_group

    @property
    def client_id(self) -> str | None:
        return self.producer.client_id

    # --- lifecycle ---------------------------------------------------------------------------------------------
    async def start(self) -> None:
        p = self.producer
        p.prepare_start()
        instance = caller_loop_instance(p.client_config)
        p.register_with(instance)
        await start_instance(instance, lambda: instance.unregister_producer_async(p.producer_group))
        p.service_state = "RUNNING"
        await instance.send_heartbeat_to_all_broker_with_lock()

    async def shutdown(self) -> None:
        p = self.producer
        instance = p.instance
        if p.service_state != "RUNNING" or instance is None:
            return
        p.service_state = "SHUTDOWN_ALREADY"
        await release_instance(instance, lambda: instance.unregister_producer_async(p.producer_group))

    # --- sends -------------------------------------------------------------------------------------------------
    async def send(
        self, msg: Message, selector: Selector | None = None, arg: Any = None, timeout_ms: int | None = None
    ) -> SendResult:
        """Send and await the broker's answer. With ``selector`` (a ``MessageQueueSelector`` or a function
        ``(mqs, msg, arg) -> MessageQueue``) the message goes to the queue it picks, without retry: ordered sends."""
        result = await self.producer.send_on_loop(msg, selector, arg, SYNC, timeout_ms)
        assert result is not None
        return result

    async def send_to_queue(self, msg: Message, mq: MessageQueue, timeout_ms: int | None = None) -> SendResult:
        """Send to this queue, no retry."""
        return await self.send(msg, lambda _mqs, _m, q: q, mq, timeout_ms)

    async def send_oneway(self, msg: Message, selector: Selector | None = None, arg: Any = None) -> None:
        """Send without waiting for an answer (returns once the frame is written)."""
        await self.producer.send_on_loop(msg, selector, arg, ONEWAY)

    async def send_batch(self, msgs: Iterable[Message], timeout_ms: int | None = None) -> SendResult:
        """One SEND_BATCH_MESSAGE (same topic; no delay level): ``msg_id`` is the comma-joined ids."""
        return await self.send(self.producer.batch(msgs), timeout_ms=timeout_ms)

    def __repr__(self) -> str:
        return f"AsyncProducer({self.producer_group}, {self.producer.service_state}, client_id={self.client_id})"
