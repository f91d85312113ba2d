"""AsyncConsumeMessageConcurrentlyService: the concurrent consume service of ``AsyncPushConsumer``, running an
``async def`` listener as tasks on the consumer's event loop instead of on consume threads.

Owns only the pool: ``consume_thread_min`` worker tasks take consume requests from an ``asyncio.Queue``, await the
listener and the send-back (``send_message_back_async``); the batching, status rules and acknowledgement are the
sync ``ConsumeMessageConcurrentlyService``'s own steps. A watchdog task (one check per second) cancels a listener
call running past ``consume_timeout`` minutes; its messages count as RECONSUME_LATER.
Invariants: ``shutdown_async`` cancels every worker and awaits it (nothing is left pending on the loop); a
cancelled consume acknowledges nothing, so its messages are delivered again to the queue's next owner.
Thread-safety: none; the consumer's loop only.
Details: docs/CLIENT_DESIGN.md, 'Async concurrent consumption'.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from rmq_core.client.consumer.consume_directly import directly_queue, run_directly_async
from rmq_core.client.consumer.consume_message_concurrently_service import (
    ConsumeMessageConcurrentlyService,
    ConsumeRequest,
)
from rmq_core.client.consumer.consume_message_service import PushConsumerImplView
from rmq_core.client.consumer.listener import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from rmq_core.client.consumer.process_queue import ProcessQueue
from rmq_core.common.tasks import cancel_and_wait
from rmq_core.message import MessageExt, MessageQueue
from rmq_core.remoting.body.consumer_running_info import ConsumeMessageDirectlyResult

log = logging.getLogger(__name__)

AsyncConcurrentlyListener = Callable[[Sequence[MessageExt], ConsumeConcurrentlyContext], Awaitable[Any]]


class AsyncConsumeMessageConcurrentlyService(ConsumeMessageConcurrentlyService):
    WATCHDOG_PERIOD_S = 1.0  # how often the consume timeout is checked

    def __init__(self, impl: PushConsumerImplView, listener: AsyncConcurrentlyListener, send_back: Any) -> None:
        super().__init__(impl, listener)
        self.async_listener = listener
        self._send_back = send_back  # impl.send_message_back_async(msg, delay_level, broker_name)
        self._queue: asyncio.Queue[ConsumeRequest | None] | None = None
        self._workers: list[asyncio.Task[None]] = []
        self._started: list[float] = []  # per worker: when its listener call began (0.0: idle)
        self._expired: list[bool] = []  # per worker: the watchdog cancelled its listener call
        self._watchdog: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._stop.clear()
        self._queue = asyncio.Queue()  # unbounded: the pull thresholds bound what is pulled, hence queued
        self._add_workers(max(1, int(self.impl.push_consumer.consume_thread_min)))
        self._watchdog = asyncio.get_running_loop().create_task(
            self._watch(), name=f"ConsumeTimeout_{self.consumer_group}"
        )

    def _add_workers(self, n: int) -> None:
        loop = asyncio.get_running_loop()
        for _ in range(n):
            slot = len(self._workers)
            self._started.append(0.0)
            self._expired.append(False)
            self._workers.append(
                loop.create_task(self._work(slot), name=f"ConsumeMessage_{self.consumer_group}_{slot}")
            )

    def shutdown(self, await_terminate_millis: int = 0) -> None:
        """Stop taking requests and cancel the workers (``shutdown_async`` also awaits them)."""
        self._stop.set()
        for t in [*self._workers, *([self._watchdog] if self._watchdog is not None else [])]:
            t.cancel()

    async def shutdown_async(self) -> None:
        self.shutdown()
        await cancel_and_wait([*self._workers, *([self._watchdog] if self._watchdog is not None else [])])
        self._workers.clear()
        self._watchdog = None

    def update_core_pool_size(self, core_pool_size: int) -> None:
        """More workers (listener calls at once); fewer: as many workers leave once they are idle."""
        if not 0 < core_pool_size < 32767 or self._queue is None:
            return
        live = sum(1 for t in self._workers if not t.done())
        if core_pool_size > live:
            self._add_workers(core_pool_size - live)
        for _ in range(live - core_pool_size):
            self._queue.put_nowait(None)

    def get_core_pool_size(self) -> int:
        return sum(1 for t in self._workers if not t.done())

    async def consume_message_directly_async(self, msg: MessageExt, broker_name: str) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY with the ``async def`` listener, awaited on the loop."""
        msgs = (msg,)
        context = ConsumeConcurrentlyContext(directly_queue(msg, broker_name))
        self.impl.reset_retry_and_namespace(msgs, self.consumer_group)
        return await run_directly_async(lambda: self.async_listener(msgs, context), False, lambda: True)

    @property
    def in_flight(self) -> int:
        """Consume requests submitted and not finished (queued or in the listener)."""
        queued = self._queue.qsize() if self._queue is not None else 0
        return queued + sum(1 for t in self._started if t)

    # --- submitting ---------------------------------------------------------------------------------------------
    def submit_consume_request(
        self,
        msgs: list[MessageExt],
        process_queue: ProcessQueue,
        message_queue: MessageQueue,
        dispatch_to_consume: bool,
    ) -> None:
        queue = self._queue
        if self._stop.is_set() or queue is None:
            self.log_left_unconsumed(msgs, message_queue)
            return
        for request in self.consume_requests(msgs, process_queue, message_queue):
            queue.put_nowait(request)

    # --- workers ------------------------------------------------------------------------------------------------
    async def _work(self, slot: int) -> None:
        assert self._queue is not None
        queue = self._queue
        task = asyncio.current_task()
        assert task is not None
        while True:
            request = await queue.get()
            if request is None:  # fewer workers wanted
                return
            try:
                await self._consume(request, slot)
            except asyncio.CancelledError:
                if not self._expired[slot] or self._stop.is_set():
                    raise
                # the watchdog's cancel, landing after the listener returned: this worker goes on
                task.uncancel()
                self._expired[slot] = False

    async def _consume(self, request: ConsumeRequest, slot: int) -> None:
        context = request.begin()
        if context is None:
            return
        status: Any = None
        has_exception = False
        begin = time.monotonic()
        self._started[slot] = begin
        try:
            status = await self.async_listener(request.msgs, context)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not self._expired[slot] or self._stop.is_set() or task is None:
                raise
            task.uncancel()
            self._expired[slot] = False
            has_exception = True
            log.warning("consume of %d messages of %s timed out", len(request.msgs), request.message_queue)
        except Exception:
            has_exception = True
            request.log_listener_exception()
        finally:
            self._started[slot] = 0.0
        result = request.end(status, has_exception, begin)
        if result is not None:
            await self.process_consume_result_async(result, context, request)

    async def _watch(self) -> None:
        """The consume timeout: a listener call running longer than ``consume_timeout`` minutes is cancelled and
        counts as RECONSUME_LATER (one check per second for all workers, not a timer per call)."""
        while True:
            timeout_s = self.consume_timeout_ms / 1000.0
            await asyncio.sleep(min(self.WATCHDOG_PERIOD_S, timeout_s))
            now = time.monotonic()
            for slot, started in enumerate(self._started):
                if started and now - started > timeout_s and not self._expired[slot]:
                    self._expired[slot] = True
                    self._workers[slot].cancel()

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
