"""AsyncConsumeMessageConcurrentlyService: the concurrent consume service of ``AsyncPushConsumer``, running an
``async def`` listener as tasks on the consumer's event loop instead of on consume threads.

It is ``ConsumeMessageConcurrentlyService`` with the pool replaced: the batching, the listener's context, the status
rules (an exception or None is RECONSUME_LATER), the acknowledgement (``acknowledge`` / ``finish_consume_result``:
send back after ``ack_index``, re-consume locally when the send-back fails, ProcessQueue removal and the offset
store) are the sync service's own steps; only the listener call and the send-back are awaited here
(``send_message_back_async``). At most ``consume_thread_min`` listener calls run at once (a semaphore; tasks, not
threads); messages stay in the ProcessQueue until acknowledged, so the push consumer's pull thresholds bound what
is cached. The consume timeout (``consume_timeout`` minutes) is an ``asyncio.timeout`` around the listener: a
listener still running then is cancelled and its messages count as RECONSUME_LATER (the sync service's periodic
clean-up of expired messages is this, done the asyncio way).

Invariants: ``shutdown_async`` cancels every consume task and awaits it (nothing is left pending on the loop); a
cancelled consume acknowledges nothing, so its messages are delivered again to the queue's next owner.
Thread-safety: none; the consumer's loop only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from rmq_core.client.consumer.consume_message_concurrently_service import (
    ConsumeMessageConcurrentlyService,
    ConsumeRequest,
)
from rmq_core.client.consumer.consume_message_service import PushConsumerImplView
from rmq_core.client.consumer.listener import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from rmq_core.client.consumer.process_queue import ProcessQueue
from rmq_core.common.tasks import cancel_and_wait
from rmq_core.message import MessageExt, MessageQueue

log = logging.getLogger(__name__)

AsyncConcurrentlyListener = Callable[[Sequence[MessageExt], ConsumeConcurrentlyContext], Awaitable[Any]]


class AsyncConsumeMessageConcurrentlyService(ConsumeMessageConcurrentlyService):
    def __init__(self, impl: PushConsumerImplView, listener: AsyncConcurrentlyListener, send_back: Any) -> None:
        super().__init__(impl, listener)
        self.async_listener = listener
        self._send_back = send_back  # impl.send_message_back_async(msg, delay_level, broker_name)
        self._tasks: set[asyncio.Task[None]] = set()
        self._semaphore: asyncio.Semaphore | None = None

    def start(self) -> None:
        self._stop.clear()
        self._semaphore = asyncio.Semaphore(max(1, int(self.impl.push_consumer.consume_thread_min)))

    def shutdown(self, await_terminate_millis: int = 0) -> None:
        """Stop taking requests and cancel the consume tasks (``shutdown_async`` also awaits them)."""
        self._stop.set()
        for t in self._tasks:
            t.cancel()

    async def shutdown_async(self) -> None:
        self.shutdown()
        await cancel_and_wait(list(self._tasks))
        self._tasks.clear()

    def update_core_pool_size(self, core_pool_size: int) -> None:
        if 0 < core_pool_size < 32767:
            self._semaphore = asyncio.Semaphore(core_pool_size)

    def get_core_pool_size(self) -> int:
        sem = self._semaphore
        return 0 if sem is None else int(getattr(sem, "_value", 0))

    @property
    def in_flight(self) -> int:
        """Consume requests submitted and not finished (waiting for a permit or in the listener)."""
        return len(self._tasks)

    # --- submitting ---------------------------------------------------------------------------------------------
    def submit_consume_request(
        self,
        msgs: list[MessageExt],
        process_queue: ProcessQueue,
        message_queue: MessageQueue,
        dispatch_to_consume: bool,
    ) -> None:
        if self._stop.is_set() or self._semaphore is None:
            log.info(
                "consume service of %s is shutting down; %d pulled messages of %s left unconsumed",
                self.consumer_group,
                len(msgs),
                message_queue,
            )
            return
        n = self.consume_batch_size
        loop = asyncio.get_running_loop()
        for i in range(0, len(msgs), n):
            request = ConsumeRequest(self, msgs[i : i + n], process_queue, message_queue)
            task = loop.create_task(self._consume(request))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _consume(self, request: ConsumeRequest) -> None:
        assert self._semaphore is not None
        async with self._semaphore:
            context = request.begin()
            if context is None:
                return
            status: Any = None
            has_exception = False
            begin = time.monotonic()
            try:
                async with asyncio.timeout(self.consume_timeout_ms / 1000.0):
                    status = await self.async_listener(request.msgs, context)
            except TimeoutError:
                has_exception = True
                log.warning("consume of %d messages of %s timed out", len(request.msgs), request.message_queue)
            except Exception:
                has_exception = True
                request.log_listener_exception()
            result = request.end(status, has_exception, begin)
            if result is not None:
                await self.process_consume_result_async(result, context, request)

    async def process_consume_result_async(
        self, status: ConsumeConcurrentlyStatus, context: ConsumeConcurrentlyContext, request: ConsumeRequest
    ) -> None:
        back_failed: list[MessageExt] = []
        for m in self.acknowledge(status, context, request):
            try:
                await self._send_back(m, context.delay_level_when_next_consume, context.message_queue.broker_name)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.error("sendMessageBack exception, group: %s msg: %r: %s", self.consumer_group, m, e)
                back_failed.append(m)
        self.finish_consume_result(request, back_failed)
