"""AsyncConsumeMessageOrderlyService: orderly consumption for ``AsyncPushConsumer`` with an ``async def`` listener,
as tasks on the consumer's loop.

It is ``ConsumeMessageOrderlyService`` with its threads replaced: the ConsumeRequest's steps (``may_consume``,
``next_batch``, ``listener_status``, ``process_consume_result`` with the suspend / commit / DLQ rules) are the sync
service's own; here the listener is awaited, one queue at a time per queue (an ``asyncio.Lock`` per message queue,
and the ProcessQueue's ``consume_lock`` held around the listener so a rebalance never unlocks a queue mid-batch),
broker locks are awaited (``RebalanceImpl.lock`` / ``lock_all`` / ``unlock_all``), the DLQ send-backs are awaited
before the result is processed, and timers are the loop's (``call_later``).

Invariants: CLUSTERING consumes a queue only while its broker lock is held (relocked every 20 s, first after 1 s);
``shutdown_async`` cancels every consume task and timer, awaits them, and unlocks the queues on their brokers.
Thread-safety: none; the consumer's loop only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from rmq_core.client.consumer.consume_directly import directly_queue, run_directly_async
from rmq_core.client.consumer.consume_message_orderly_service import ConsumeMessageOrderlyService, _now_ms
from rmq_core.client.consumer.listener import ConsumeOrderlyContext, ConsumeOrderlyStatus
from rmq_core.common.tasks import cancel_and_wait
from rmq_core.message import MessageExt, MessageQueue
from rmq_core.remoting.body.consumer_running_info import ConsumeMessageDirectlyResult
from rmq_core.remoting.body.heartbeat import MessageModel

log = logging.getLogger(__name__)

AsyncOrderlyListener = Callable[[Sequence[MessageExt], ConsumeOrderlyContext], Awaitable[Any]]


class AsyncConsumeMessageOrderlyService(ConsumeMessageOrderlyService):
    def __init__(self, push_impl: Any, listener: AsyncOrderlyListener) -> None:
        super().__init__(push_impl, listener)  # type: ignore[arg-type]  # the async listener is awaited below
        self.async_listener = listener
        self._queue_locks: dict[MessageQueue, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._timers: set[asyncio.TimerHandle] = set()

    # --- life cycle ---------------------------------------------------------------------------------------------

    async def consume_message_directly_async(self, msg: MessageExt, broker_name: str) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY with the ``async def`` listener, awaited on the loop."""
        msgs = [msg]
        context = ConsumeOrderlyContext(directly_queue(msg, broker_name))
        self._reset_retry(msgs)
        return await run_directly_async(
            lambda: self.async_listener(tuple(msgs), context), True, lambda: context.auto_commit
        )

    def start(self) -> None:
        self.stopped = False
        if self._message_model() == MessageModel.CLUSTERING:
            self._spawn(self._lock_periodically())

    async def _lock_periodically(self) -> None:
        await asyncio.sleep(1.0)
        while not self.stopped:
            try:
                await self.rebalance_impl.lock_all()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.error("lockMQPeriodically exception: %r", e)
            await asyncio.sleep(self.lock_interval_ms / 1000.0)

    def shutdown(self, await_terminate_millis: int = 0) -> None:
        """Stop: no new consume requests; timers and consume tasks cancelled (``shutdown_async`` awaits them and
        unlocks the queues on the brokers)."""
        self.stopped = True
        for h in self._timers:
            h.cancel()
        self._timers.clear()
        for t in self._tasks:
            t.cancel()

    async def shutdown_async(self) -> None:
        self.shutdown()
        await cancel_and_wait(list(self._tasks))
        if self._message_model() == MessageModel.CLUSTERING:
            try:
                await self.rebalance_impl.unlock_all(False)
            except Exception as e:
                log.error("unlockAllMQ exception: %r", e)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- scheduling ---------------------------------------------------------------------------------------------
    def schedule(self, delay_ms: int, fn: Callable[[], Any]) -> None:
        if self.stopped:
            return
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            self._timers.discard(handle)
            if not self.stopped:
                fn()

        handle = asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000.0, fire)
        self._timers.add(handle)

    def try_lock_later_and_reconsume(self, mq: MessageQueue, pq: Any, delay_ms: int) -> None:
        async def relock() -> None:
            ok = False
            try:
                ok = bool(await self.rebalance_impl.lock(mq))
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("lock %s failed: %r", mq, e)
            self.submit_consume_request_later(pq, mq, 10 if ok else 3000)

        self.schedule(delay_ms, lambda: self._spawn(relock()))

    def submit_consume_request(
        self,
        msgs: Sequence[MessageExt] | None,
        process_queue: Any,
        message_queue: MessageQueue,
        dispatch_to_consume: bool,
    ) -> None:
        if not dispatch_to_consume or self.stopped:
            return
        self._spawn(self._consume_request_async(process_queue, message_queue))

    # --- the ConsumeRequest -------------------------------------------------------------------------------------
    async def _consume_request_async(self, pq: Any, mq: MessageQueue) -> None:
        try:
            lock = self._queue_locks.setdefault(mq, asyncio.Lock())
            async with lock:
                await self._run_consume_request_async(pq, mq)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.error("orderly consume request for %s failed: %r", mq, e)
            if not pq.dropped:
                self.submit_consume_request_later(pq, mq, 3000)

    async def _run_consume_request_async(self, pq: Any, mq: MessageQueue) -> None:
        clustering = self._message_model() == MessageModel.CLUSTERING
        if not self.may_consume(pq, mq, clustering):
            return
        begin = _now_ms()
        while True:
            msgs = self.next_batch(pq, mq, clustering, begin)
            if msgs is None:
                break
            context = ConsumeOrderlyContext(mq)
            status: Any = None
            if not pq.consume_lock.acquire(blocking=False):  # only the rebalance takes it, never across an await
                self.submit_consume_request_later(pq, mq, 10)
                pq.make_message_to_consume_again(msgs)
                break
            try:
                if self.dropped_before_listener(pq, mq):
                    break
                started = time.monotonic()
                try:
                    status = await self.async_listener(tuple(msgs), context)
                except Exception as e:
                    self.log_listener_exception(e, msgs, mq)
                self.count_consume_rt(mq, started)
            finally:
                pq.consume_lock.release()
            result = self.listener_status(status, msgs, mq)
            sent: dict[int, bool] = {}
            if result is ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT:
                for m in self.over_max_reconsume_times(msgs):
                    sent[id(m)] = await self.send_message_back_async(m, mq)
            if not self.process_consume_result(msgs, result, context, pq, mq, _answers(sent)):
                break


def _answers(sent: dict[int, bool]) -> Callable[[MessageExt], bool]:
    """The DLQ send-backs' answers, by message, as process_consume_result asks for them."""

    def sent_to_dlq(msg: MessageExt) -> bool:
        return sent.get(id(msg), False)

    return sent_to_dlq
