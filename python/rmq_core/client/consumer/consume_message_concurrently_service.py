"""ConsumeMessageConcurrentlyService (cl/impl/consumer/ConsumeMessageConcurrentlyService.java).

Owns concurrent consumption: pulled messages cut into batches of ``consume_message_batch_max_size``, run on a lean
pool of ``consume_thread_min`` threads, their results (CLUSTERING: send back the failed ones; BROADCASTING: drop them
with a warning), the offset update and the periodic clean of expired messages.
Invariants: the offset store gets the ProcessQueue's answer (the smallest offset still cached, increase-only) unless
the queue was dropped; a listener exception or ``None`` counts as RECONSUME_LATER.
Thread-safety: ``submit_consume_request`` from any thread; results are processed on consume threads.
Details: docs/CLIENT_DESIGN.md, 'Concurrent consumption'.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rmq_core.client.consumer.consume_directly import directly_queue, run_directly
from rmq_core.client.consumer.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeReturnType,
    MessageModel,
)
from rmq_core.client.consumer.process_queue import ProcessQueue
from rmq_core.message import PROPERTY_CONSUME_START_TIMESTAMP, MessageExt, MessageQueue
from rmq_core.remoting.body.consumer_running_info import ConsumeMessageDirectlyResult

if TYPE_CHECKING:
    from rmq_core.client.consumer.consume_message_service import PushConsumerImplView

log = logging.getLogger(__name__)

_STOP = object()


class ConsumePool:
    """A fixed pool of daemon threads running callables from a SimpleQueue (ThreadPoolExecutor without Futures)."""

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self._q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._seq = 0
        self._shutdown = False
        self.resize(size)

    def submit(self, fn: Callable[[], Any]) -> None:
        if self._shutdown:
            raise RuntimeError(f"{self.name} is shut down")
        self._q.put(fn)

    def resize(self, size: int) -> None:
        if size < 1:
            raise ValueError("a consume pool needs at least one thread")
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            while len(self._threads) < size:
                self._seq += 1
                t = threading.Thread(target=self._work, name=f"{self.name}_{self._seq}", daemon=True)
                t.start()
                self._threads.append(t)
            extra = len(self._threads) - size
            for _ in range(extra):
                self._q.put(_STOP)
            # threads that take _STOP exit; they are pruned on the next resize

    @property
    def size(self) -> int:
        with self._lock:
            return sum(1 for t in self._threads if t.is_alive())

    def _work(self) -> None:
        get = self._q.get
        while True:
            fn = get()
            if fn is _STOP:
                return
            try:
                fn()
            except BaseException:
                log.exception("%s: consume task failed", self.name)

    def shutdown(self, wait: bool = True, timeout_s: float = 5.0) -> None:
        with self._lock:
            self._shutdown = True
            threads = list(self._threads)
        for _ in threads:
            self._q.put(_STOP)
        if wait:
            deadline = time.monotonic() + timeout_s
            for t in threads:
                if t is not threading.current_thread():
                    t.join(max(0.0, deadline - time.monotonic()))


class ConsumeRequest:
    __slots__ = ("message_queue", "msgs", "process_queue", "service")

    def __init__(
        self,
        service: ConsumeMessageConcurrentlyService,
        msgs: list[MessageExt],
        process_queue: ProcessQueue,
        message_queue: MessageQueue,
    ) -> None:
        self.service = service
        self.msgs = msgs
        self.process_queue = process_queue
        self.message_queue = message_queue

    def run(self) -> None:
        context = self.begin()
        if context is None:
            return
        status: Any = None
        has_exception = False
        begin = time.monotonic()
        try:
            status = self.service.listener(self.msgs, context)
        except Exception:
            has_exception = True
            self.log_listener_exception()
        status = self.end(status, has_exception, begin)
        if status is not None:
            self.service.process_consume_result(status, context, self)

    def begin(self) -> ConsumeConcurrentlyContext | None:
        """Before the listener (also for rmq_core.aio's service): None when the queue was dropped; else the retry
        topic reset and CONSUME_START_TIME stamped, and the listener's context."""
        if self.process_queue.dropped:
            log.info("the message queue not be able to consume, because it's dropped. %s", self.message_queue)
            return None
        svc = self.service
        svc.impl.reset_retry_and_namespace(self.msgs, svc.consumer_group)
        if self.msgs:
            now = str(time.time_ns() // 1_000_000)
            for m in self.msgs:
                m.properties[PROPERTY_CONSUME_START_TIMESTAMP] = now
        return ConsumeConcurrentlyContext(self.message_queue)

    def log_listener_exception(self) -> None:
        log.warning(
            "consumeMessage exception, Group: %s Msgs: %d MQ: %s",
            self.service.consumer_group,
            len(self.msgs),
            self.message_queue,
            exc_info=True,
        )

    def end(self, status: Any, has_exception: bool, begin: float) -> ConsumeConcurrentlyStatus | None:
        """After the listener: its answer as a ConsumeConcurrentlyStatus (an exception or None counts as
        RECONSUME_LATER), consume RT counted; None when the queue was dropped meanwhile (nothing to acknowledge)."""
        svc = self.service
        msgs = self.msgs
        pq = self.process_queue
        consume_rt = int((time.monotonic() - begin) * 1000)
        if status is None:
            return_type = ConsumeReturnType.EXCEPTION if has_exception else ConsumeReturnType.RETURNNULL
        elif consume_rt >= svc.consume_timeout_ms:
            return_type = ConsumeReturnType.TIME_OUT
        elif status == ConsumeConcurrentlyStatus.RECONSUME_LATER:
            return_type = ConsumeReturnType.FAILED
        else:
            return_type = ConsumeReturnType.SUCCESS
        if status is None:
            log.warning(
                "consumeMessage return null, Group: %s Msgs: %d MQ: %s (%s)",
                svc.consumer_group,
                len(msgs),
                self.message_queue,
                return_type.value,
            )
            status = ConsumeConcurrentlyStatus.RECONSUME_LATER
        elif not isinstance(status, ConsumeConcurrentlyStatus):
            try:
                status = ConsumeConcurrentlyStatus(status)
            except ValueError:
                log.warning("consumeMessage returned %r, not a ConsumeConcurrentlyStatus: RECONSUME_LATER", status)
                status = ConsumeConcurrentlyStatus.RECONSUME_LATER
        svc.stats.inc_consume_rt(svc.consumer_group, self.message_queue.topic, consume_rt)
        if not pq.dropped:
            return status  # type: ignore[no-any-return]
        # not acked: the queue's next owner gets these again (at shutdown, every queue is dropped: debug)
        log.log(
            logging.DEBUG if svc.is_stopping() else logging.WARNING,
            "processQueue is dropped without process consume result. messageQueue=%s, msgs=%d",
            self.message_queue,
            len(msgs),
        )
        return None


class ConsumeMessageConcurrentlyService:
    CLEAN_EXPIRED_CHECK_S = 1.0  # how often the cleaner looks at the clock (the period is consume_timeout)

    def __init__(
        self,
        impl: PushConsumerImplView,
        listener: Callable[[Sequence[MessageExt], ConsumeConcurrentlyContext], Any],
    ) -> None:
        self.impl = impl
        self.listener = listener
        consumer = impl.push_consumer
        self.consumer_group: str = consumer.consumer_group
        self.consume_batch_size = max(1, int(consumer.consume_message_batch_max_size))
        self.consume_timeout_ms = int(consumer.consume_timeout) * 60 * 1000
        self.stats = impl.stats
        self._pool: ConsumePool | None = None
        self._stop = threading.Event()
        self._cleaner: threading.Thread | None = None

    def start(self) -> None:
        consumer = self.impl.push_consumer
        self._pool = ConsumePool(f"ConsumeMessageThread_{self.consumer_group}", int(consumer.consume_thread_min))
        self._stop.clear()
        self._cleaner = threading.Thread(
            target=self._clean_loop, name=f"CleanExpireMsg_{self.consumer_group}", daemon=True
        )
        self._cleaner.start()

    def shutdown(self, await_terminate_millis: int = 0) -> None:
        self._stop.set()
        if self._pool is not None:
            self._pool.shutdown(wait=True, timeout_s=max(await_terminate_millis, 1000) / 1000.0)
        if self._cleaner is not None and self._cleaner is not threading.current_thread():
            self._cleaner.join(2.0)

    def update_core_pool_size(self, core_pool_size: int) -> None:
        if self._pool is not None and 0 < core_pool_size < 32767:
            self._pool.resize(core_pool_size)

    def inc_core_pool_size(self) -> None:
        pass

    def dec_core_pool_size(self) -> None:
        pass

    def get_core_pool_size(self) -> int:
        return self._pool.size if self._pool is not None else 0

    def lock_mqs_periodically(self) -> None:
        pass  # orderly only

    def consume_message_directly(self, msg: MessageExt, broker_name: str) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY: the listener on ``msg`` alone, on the calling thread (nothing acknowledged)."""
        msgs = [msg]
        context = ConsumeConcurrentlyContext(directly_queue(msg, broker_name))
        self.impl.reset_retry_and_namespace(msgs, self.consumer_group)
        log.info("consumeMessageDirectly receive new message: %s", msg)
        return run_directly(lambda: self.listener(msgs, context), False, lambda: True)

    # --- submitting ---------------------------------------------------------------------------------------------
    def submit_consume_request(
        self,
        msgs: list[MessageExt],
        process_queue: ProcessQueue,
        message_queue: MessageQueue,
        dispatch_to_consume: bool,
    ) -> None:
        pool = self._pool
        if pool is None:
            raise RuntimeError("the consume service is not started")
        if self._stop.is_set():
            self.log_left_unconsumed(msgs, message_queue)
            return
        submit = pool.submit
        try:
            for request in self.consume_requests(msgs, process_queue, message_queue):
                submit(request.run)
        except RuntimeError:  # the pool shut down between the check above and the submit
            if not self._stop.is_set():
                raise
            log.info(
                "consume service of %s shut down; pulled messages of %s left unconsumed",
                self.consumer_group,
                message_queue,
            )

    def consume_requests(
        self, msgs: list[MessageExt], process_queue: ProcessQueue, message_queue: MessageQueue
    ) -> list[ConsumeRequest]:
        """The pulled messages cut into ConsumeRequests of ``consume_message_batch_max_size``."""
        n = self.consume_batch_size
        if len(msgs) <= n:
            return [ConsumeRequest(self, msgs, process_queue, message_queue)]
        return [ConsumeRequest(self, msgs[i : i + n], process_queue, message_queue) for i in range(0, len(msgs), n)]

    def log_left_unconsumed(self, msgs: list[MessageExt], message_queue: MessageQueue) -> None:
        # a pull answered while the consumer shuts down: its queue is being dropped and nothing was acked, so
        # the messages come back to whoever owns the queue next (Java: the rejected request is dropped likewise)
        log.info(
            "consume service of %s is shutting down; %d pulled messages of %s left unconsumed",
            self.consumer_group,
            len(msgs),
            message_queue,
        )

    def submit_consume_request_later(
        self, msgs: list[MessageExt], process_queue: ProcessQueue, message_queue: MessageQueue, delay_ms: int = 5000
    ) -> None:
        def later() -> None:
            if self._pool is not None and not self._stop.is_set():
                self.submit_consume_request(msgs, process_queue, message_queue, True)

        self.impl.execute_task_later(later, delay_ms)

    # --- results --------------------------------------------------------------------------------------------------
    def is_stopping(self) -> bool:
        return self._stop.is_set()

    def process_consume_result(
        self, status: ConsumeConcurrentlyStatus, context: ConsumeConcurrentlyContext, request: ConsumeRequest
    ) -> None:
        to_send_back = self.acknowledge(status, context, request)
        back_failed = [m for m in to_send_back if not self.send_message_back(m, context)]
        self.finish_consume_result(request, back_failed)

    def acknowledge(
        self, status: ConsumeConcurrentlyStatus, context: ConsumeConcurrentlyContext, request: ConsumeRequest
    ) -> list[MessageExt]:
        """processConsumeResult's first half: count the outcome and return the messages to send back (CLUSTERING:
        those after ``ack_index``; BROADCASTING drops them with a warning and returns none)."""
        msgs = request.msgs
        if not msgs:
            return []
        ack_index = context.ack_index
        topic = request.message_queue.topic
        if status == ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            if ack_index >= len(msgs):
                ack_index = len(msgs) - 1
            ok = ack_index + 1
            self.stats.inc_consume_ok_tps(self.consumer_group, topic, ok)
            if len(msgs) - ok:
                self.stats.inc_consume_failed_tps(self.consumer_group, topic, len(msgs) - ok)
        else:
            ack_index = -1
            self.stats.inc_consume_failed_tps(self.consumer_group, topic, len(msgs))

        if self.impl.push_consumer.message_model == MessageModel.BROADCASTING:
            for m in msgs[ack_index + 1 :]:
                log.warning("BROADCASTING, the message consume failed, drop it, %r", m)
            return []
        return msgs[ack_index + 1 :]

    def finish_consume_result(self, request: ConsumeRequest, back_failed: list[MessageExt]) -> None:
        """processConsumeResult's second half: the messages whose send-back failed are consumed again locally 5 s
        later; the rest leave the ProcessQueue and the offset store gets its answer (unless the queue was dropped)."""
        msgs = request.msgs
        if not msgs:
            return
        if back_failed:
            for m in back_failed:
                m.reconsume_times += 1
            failed_ids = {id(m) for m in back_failed}
            msgs = [m for m in msgs if id(m) not in failed_ids]
            request.msgs = msgs
            self.submit_consume_request_later(back_failed, request.process_queue, request.message_queue)
        offset = request.process_queue.remove_message(msgs)
        if offset >= 0 and not request.process_queue.dropped:
            self.impl.offset_store.update_offset(request.message_queue, offset, True)

    def send_message_back(self, msg: MessageExt, context: ConsumeConcurrentlyContext) -> bool:
        try:
            self.impl.send_message_back(msg, context.delay_level_when_next_consume, context.message_queue.broker_name)
            return True
        except Exception as e:
            log.error("sendMessageBack exception, group: %s msg: %r: %s", self.consumer_group, msg, e)
            return False

    # --- consume timeout --------------------------------------------------------------------------------------
    def clean_expire_msg(self) -> None:
        for pq in list(self.impl.rebalance_impl.process_queue_table.values()):
            try:
                pq.clean_expired_msg(self.impl.push_consumer)
            except Exception:
                log.exception("cleanExpiredMsg failed")

    def _clean_loop(self) -> None:
        period = self.consume_timeout_ms / 1000.0
        next_at = time.monotonic() + period
        while not self._stop.wait(min(self.CLEAN_EXPIRED_CHECK_S, max(0.0, next_at - time.monotonic()))):
            if time.monotonic() >= next_at:
                next_at = time.monotonic() + period
                self.clean_expire_msg()
