"""ConsumeMessageOrderlyService (4.9 client/impl/consumer/ConsumeMessageOrderlyService): orderly consumption.

Owns the orderly consume loop: per-queue consume requests, the broker queue locks (relocked every 20 s), the
results (commit, suspend and resubmit, DLQ past ``max_reconsume_times``) and the unlock at shutdown.
Invariants (as 4.9): one consume thread per message queue at a time, the listener under the ProcessQueue's
``consume_lock``; CLUSTERING consumes a queue only while it is locked and the lock is not expired (30 s); a
committed offset is written unless the queue was dropped. Deviation (reported): a message past
``max_reconsume_times`` goes to the DLQ with CONSUMER_SEND_MSG_BACK, delay level -1.
Thread-safety: listeners on this service's pool; timers on one scheduler thread; broker calls via
``instance.run_sync``; ``submit_consume_request`` from any thread (never blocks).
Details (retry delays, batch loop, results with and without auto_commit): docs/CLIENT_DESIGN.md, 'Orderly consumption'.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rmq_core.client.consumer.consume_directly import directly_queue, run_directly
from rmq_core.client.consumer.listener import ConsumeOrderlyContext, ConsumeOrderlyStatus
from rmq_core.common.mix_all import MASTER_ID, get_retry_topic
from rmq_core.message import PROPERTY_RECONSUME_TIME, PROPERTY_RETRY_TOPIC, MessageExt, MessageQueue
from rmq_core.remoting.body.consumer_running_info import ConsumeMessageDirectlyResult
from rmq_core.remoting.body.heartbeat import MessageModel

log = logging.getLogger("rmq_core.client.consume")

MAX_TIME_CONSUME_CONTINUOUSLY_MS = 60000  # rocketmq.client.maxTimeConsumeContinuously
REBALANCE_LOCK_INTERVAL_MS = 20000  # ProcessQueue.REBALANCE_LOCK_INTERVAL (rocketmq.client.rebalance.lockInterval)
INTEGER_MAX_VALUE = 2**31 - 1


def _now_ms() -> int:
    return int(time.time() * 1000)


class MessageQueueLock:
    """One lock object per message queue (created on first use, never removed — as 4.9)."""

    def __init__(self) -> None:
        self._table: dict[MessageQueue, threading.Lock] = {}
        self._guard = threading.Lock()

    def fetch_lock_object(self, mq: MessageQueue) -> threading.Lock:
        lock = self._table.get(mq)
        if lock is None:
            with self._guard:
                lock = self._table.setdefault(mq, threading.Lock())
        return lock


class _Scheduler:
    """A single timer thread: ``schedule(delay_ms, fn)``; ``shutdown()`` drops pending tasks and joins the thread."""

    def __init__(self, name: str) -> None:
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def schedule(self, delay_ms: float, fn: Callable[[], None]) -> None:
        with self._cond:
            if self._stopped:
                return
            heapq.heappush(self._heap, (time.monotonic() + delay_ms / 1000.0, next(self._seq), fn))
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._heap or self._heap[0][0] > time.monotonic()):
                    self._cond.wait(None if not self._heap else max(0.0, self._heap[0][0] - time.monotonic()))
                if self._stopped:
                    return
                _, _, fn = heapq.heappop(self._heap)
            try:
                fn()
            except Exception as e:
                log.error("scheduled task failed: %r", e)

    def shutdown(self) -> None:
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join()


class ConsumeMessageOrderlyService:
    """``ConsumeMessageOrderlyService(push_impl, listener)``; settings are read from the push consumer."""

    def __init__(
        self,
        push_impl: Any,
        message_listener: Callable[[Sequence[MessageExt], ConsumeOrderlyContext], ConsumeOrderlyStatus],
    ) -> None:
        self.push_impl = push_impl
        self.message_listener = message_listener
        conf = self._conf()
        self.consumer_group: str = conf.consumer_group if hasattr(conf, "consumer_group") else conf.group_name
        self.message_queue_lock = MessageQueueLock()
        self.stopped = False
        self.lock_interval_ms = REBALANCE_LOCK_INTERVAL_MS
        self.max_time_consume_continuously_ms = MAX_TIME_CONSUME_CONTINUOUSLY_MS
        threads = max(1, int(getattr(conf, "consume_thread_min", 20)))
        self._threads = threads
        prefix = f"ConsumeMessageThread_{self.consumer_group[:100]}_"
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=prefix)
        self._scheduler: _Scheduler | None = None
        self._guard = threading.Lock()  # Java's synchronized lockMQPeriodically / lockOneMQ / unlockAllMQ

    # -- collaborators -------------------------------------------------------------------------------------------
    def _conf(self) -> Any:
        return (
            getattr(self.push_impl, "push_consumer", None)
            or getattr(self.push_impl, "default_mq_push_consumer", None)
            or self.push_impl
        )

    @property
    def rebalance_impl(self) -> Any:
        return self.push_impl.rebalance_impl

    @property
    def instance(self) -> Any:
        return self.rebalance_impl.instance

    def _message_model(self) -> MessageModel:
        return MessageModel(self.rebalance_impl.message_model)

    def _timeout_s(self) -> float:
        return float(getattr(self.instance.client_config, "mq_client_api_timeout", 3000)) / 1000.0 + 2.0

    # -- life cycle ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        self._scheduler = _Scheduler(f"ConsumeMessageScheduledThread_{self.consumer_group[:100]}")
        if self._message_model() == MessageModel.CLUSTERING:
            self._scheduler.schedule(1000, self._lock_periodically_tick)

    def _lock_periodically_tick(self) -> None:
        try:
            self.lock_mqs_periodically()
        except Exception as e:
            log.error("scheduleAtFixedRate lockMQPeriodically exception: %r", e)
        if not self.stopped and self._scheduler is not None:
            self._scheduler.schedule(self.lock_interval_ms, self._lock_periodically_tick)

    def shutdown(self, await_terminate_millis: int = 0) -> None:
        self.stopped = True
        if self._scheduler is not None:
            self._scheduler.shutdown()
        self._executor.shutdown(wait=True, cancel_futures=True)
        if self._message_model() == MessageModel.CLUSTERING:
            self.unlock_all_mq()

    def unlock_all_mq(self) -> None:
        with self._guard:
            try:
                self.instance.run_sync(self.rebalance_impl.unlock_all(False), self._timeout_s())
            except Exception as e:
                log.error("unlockAllMQ exception: %r", e)

    def update_core_pool_size(self, core_pool_size: int) -> None:
        """Fixed-size pool here: accepted and ignored as long as it is in Java's range (logged otherwise)."""
        if not (0 < core_pool_size <= 32767):
            log.warning("updateCorePoolSize ignored: %s", core_pool_size)

    def inc_core_pool_size(self) -> None:
        pass

    def dec_core_pool_size(self) -> None:
        pass

    # -- broker locks --------------------------------------------------------------------------------------------
    def lock_mqs_periodically(self) -> None:
        with self._guard:
            if not self.stopped:
                self.instance.run_sync(self.rebalance_impl.lock_all(), self._timeout_s())

    def lock_one_mq(self, mq: MessageQueue) -> bool:
        with self._guard:
            if self.stopped:
                return False
            return bool(self.instance.run_sync(self.rebalance_impl.lock(mq), self._timeout_s()))

    def try_lock_later_and_reconsume(self, mq: MessageQueue, pq: Any, delay_ms: int) -> None:
        def run() -> None:
            ok = False
            try:
                ok = self.lock_one_mq(mq)
            except Exception as e:
                log.warning("lock %s failed: %r", mq, e)
            self.submit_consume_request_later(pq, mq, 10 if ok else 3000)

        if self._scheduler is not None:
            self._scheduler.schedule(delay_ms, run)

    # -- submission ----------------------------------------------------------------------------------------------
    def submit_consume_request(
        self,
        msgs: Sequence[MessageExt] | None,
        process_queue: Any,
        message_queue: MessageQueue,
        dispatch_to_consume: bool,
    ) -> None:
        if not dispatch_to_consume or self.stopped:
            return
        try:
            self._executor.submit(self._consume_request, process_queue, message_queue)
        except RuntimeError:  # the pool is shut down
            log.debug("consume request for %s after shutdown ignored", message_queue)

    def submit_consume_request_later(
        self, process_queue: Any, message_queue: MessageQueue, suspend_time_millis: int
    ) -> None:
        t = suspend_time_millis
        if t == -1:
            t = int(getattr(self._conf(), "suspend_current_queue_time_millis", 1000))
        t = min(max(t, 10), 30000)
        self.schedule(t, lambda: self.submit_consume_request(None, process_queue, message_queue, True))

    def schedule(self, delay_ms: int, fn: Callable[[], Any]) -> None:
        """Run ``fn`` after ``delay_ms`` (the scheduler thread here; the loop in rmq_core.aio's service)."""
        if self._scheduler is not None:
            self._scheduler.schedule(delay_ms, fn)

    def count_consume_rt(self, mq: MessageQueue, started: float) -> None:
        """The listener call begun at ``started`` (time.monotonic) into the consumer's consume RT."""
        stats = getattr(self.push_impl, "stats", None)
        if stats is not None:
            stats.inc_consume_rt(self.consumer_group, mq.topic, int((time.monotonic() - started) * 1000))

    def get_core_pool_size(self) -> int:
        return self._threads

    def consume_message_directly(self, msg: MessageExt, broker_name: str) -> ConsumeMessageDirectlyResult:
        """CONSUME_MESSAGE_DIRECTLY: the listener on ``msg`` alone, on the calling thread (no queue lock, nothing
        acknowledged); ``autoCommit`` as the listener left the context."""
        msgs = [msg]
        context = ConsumeOrderlyContext(directly_queue(msg, broker_name))
        self._reset_retry(msgs)
        log.info("consumeMessageDirectly receive new message: %s", msg)
        return run_directly(lambda: self.message_listener(msgs, context), True, lambda: context.auto_commit)

    # -- the ConsumeRequest --------------------------------------------------------------------------------------
    def _reset_retry(self, msgs: list[MessageExt]) -> None:
        reset = getattr(self.push_impl, "reset_retry_and_namespace", None)
        if reset is not None:
            reset(msgs, self.consumer_group)
            return
        retry_topic = get_retry_topic(self.consumer_group)
        for m in msgs:
            origin = m.get_property(PROPERTY_RETRY_TOPIC)
            if origin is not None and m.topic == retry_topic:
                m.topic = origin

    def _consume_request(self, pq: Any, mq: MessageQueue) -> None:
        try:
            self._run_consume_request(pq, mq)
        except Exception as e:
            log.error("orderly consume request for %s failed: %r", mq, e)
            if not pq.dropped:
                self.submit_consume_request_later(pq, mq, 3000)

    def _run_consume_request(self, pq: Any, mq: MessageQueue) -> None:
        clustering = self._message_model() == MessageModel.CLUSTERING
        with self.message_queue_lock.fetch_lock_object(mq):
            if not self.may_consume(pq, mq, clustering):
                return
            begin = _now_ms()
            while True:
                msgs = self.next_batch(pq, mq, clustering, begin)
                if msgs is None:
                    break
                context = ConsumeOrderlyContext(mq)
                status: ConsumeOrderlyStatus | None = None
                with pq.consume_lock:
                    if self.dropped_before_listener(pq, mq):
                        break
                    started = time.monotonic()
                    try:
                        status = self.message_listener(tuple(msgs), context)
                    except Exception as e:
                        self.log_listener_exception(e, msgs, mq)
                    self.count_consume_rt(mq, started)
                status = self.listener_status(status, msgs, mq)
                if not self.process_consume_result(msgs, status, context, pq, mq):
                    break

    # the steps of a ConsumeRequest (shared with rmq_core.aio's orderly service, which awaits the listener)
    def may_consume(self, pq: Any, mq: MessageQueue, clustering: bool) -> bool:
        """On entry: False (and a retry scheduled when needed) when the queue is dropped or not locked."""
        if pq.dropped:
            log.warning("run, the message queue not be able to consume, because it's dropped. %s", mq)
            return False
        if clustering and not (pq.locked and not pq.is_lock_expired()):
            if pq.dropped:
                log.warning("the message queue not be able to consume, because it's dropped. %s", mq)
                return False
            self.try_lock_later_and_reconsume(mq, pq, 100)
            return False
        return True

    def next_batch(self, pq: Any, mq: MessageQueue, clustering: bool, begin_ms: int) -> list[MessageExt] | None:
        """The next batch to hand the listener, or None to stop (dropped, lock lost or expired, 60 s of continuous
        consumption, or nothing cached), with the retry scheduled when one is needed."""
        if pq.dropped:
            log.warning("the message queue not be able to consume, because it's dropped. %s", mq)
            return None
        if clustering and not pq.locked:
            log.warning("the message queue not locked, so consume later, %s", mq)
            self.try_lock_later_and_reconsume(mq, pq, 10)
            return None
        if clustering and pq.is_lock_expired():
            log.warning("the message queue lock expired, so consume later, %s", mq)
            self.try_lock_later_and_reconsume(mq, pq, 10)
            return None
        if _now_ms() - begin_ms > self.max_time_consume_continuously_ms:
            self.submit_consume_request_later(pq, mq, 10)
            return None
        batch = int(getattr(self._conf(), "consume_message_batch_max_size", 1))
        msgs: list[MessageExt] = pq.take_messages(batch)
        self._reset_retry(msgs)
        return msgs or None

    def dropped_before_listener(self, pq: Any, mq: MessageQueue) -> bool:
        if pq.dropped:
            log.warning("consumeMessage, the message queue not be able to consume, because it's dropped. %s", mq)
            return True
        return False

    def log_listener_exception(self, e: BaseException, msgs: list[MessageExt], mq: MessageQueue) -> None:
        log.warning(
            "consumeMessage exception: %r Group: %s Msgs: %d MQ: %s",
            e,
            self.consumer_group,
            len(msgs),
            mq,
        )

    def listener_status(self, status: Any, msgs: list[MessageExt], mq: MessageQueue) -> ConsumeOrderlyStatus:
        """The listener's answer as a ConsumeOrderlyStatus (an exception or None: SUSPEND_CURRENT_QUEUE_A_MOMENT)."""
        if status is None or status in (
            ConsumeOrderlyStatus.ROLLBACK,
            ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT,
        ):
            log.warning(
                "consumeMessage Orderly return not OK, Group: %s Msgs: %d MQ: %s",
                self.consumer_group,
                len(msgs),
                mq,
            )
        if status is None:
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus(status)

    def process_consume_result(
        self,
        msgs: list[MessageExt],
        status: ConsumeOrderlyStatus,
        context: ConsumeOrderlyContext,
        pq: Any,
        mq: MessageQueue,
        sent_to_dlq: Callable[[MessageExt], bool] | None = None,
    ) -> bool:
        """``sent_to_dlq(msg)``: whether a message past max_reconsume_times went to the DLQ; by default it is sent
        now (``send_message_back``); rmq_core.aio's service passes the answers of its awaited sends."""
        continue_consume = True
        commit_offset = -1
        S = ConsumeOrderlyStatus
        stats = getattr(self.push_impl, "stats", None)
        if stats is not None:
            if status == S.SUCCESS or (context.auto_commit and status in (S.COMMIT, S.ROLLBACK)):
                stats.inc_consume_ok_tps(self.consumer_group, mq.topic, len(msgs))
            elif status == S.SUSPEND_CURRENT_QUEUE_A_MOMENT:
                stats.inc_consume_failed_tps(self.consumer_group, mq.topic, len(msgs))
        if context.auto_commit:
            if status in (S.COMMIT, S.ROLLBACK):
                log.warning(
                    "the message queue consume result is illegal, we think you want to ack these message %s", mq
                )
            if status in (S.COMMIT, S.ROLLBACK, S.SUCCESS):
                commit_offset = pq.commit()
            elif status == S.SUSPEND_CURRENT_QUEUE_A_MOMENT:
                if self.check_reconsume_times(msgs, mq, sent_to_dlq):
                    pq.make_message_to_consume_again(msgs)
                    self.submit_consume_request_later(pq, mq, context.suspend_current_queue_time_millis)
                    continue_consume = False
                else:
                    commit_offset = pq.commit()
        else:
            if status == S.COMMIT:
                commit_offset = pq.commit()
            elif status == S.ROLLBACK:
                pq.rollback()
                self.submit_consume_request_later(pq, mq, context.suspend_current_queue_time_millis)
                continue_consume = False
            elif status == S.SUSPEND_CURRENT_QUEUE_A_MOMENT:
                if self.check_reconsume_times(msgs, mq, sent_to_dlq):
                    pq.make_message_to_consume_again(msgs)
                    self.submit_consume_request_later(pq, mq, context.suspend_current_queue_time_millis)
                    continue_consume = False
        if commit_offset >= 0 and not pq.dropped:
            self.push_impl.offset_store.update_offset(mq, commit_offset, False)
        return continue_consume

    def get_max_reconsume_times(self) -> int:
        n = int(getattr(self._conf(), "max_reconsume_times", -1))
        return INTEGER_MAX_VALUE if n == -1 else n

    def over_max_reconsume_times(self, msgs: list[MessageExt]) -> list[MessageExt]:
        """The messages that go to the DLQ rather than being consumed again."""
        max_times = self.get_max_reconsume_times()
        return [m for m in msgs if m.reconsume_times >= max_times]

    def check_reconsume_times(
        self, msgs: list[MessageExt], mq: MessageQueue, sent_to_dlq: Callable[[MessageExt], bool] | None = None
    ) -> bool:
        """True when the batch must be consumed again (some message is under the maximum or could not go to the DLQ)."""
        suspend = False
        max_times = self.get_max_reconsume_times()
        for msg in msgs:
            if msg.reconsume_times >= max_times:
                msg.put_property(PROPERTY_RECONSUME_TIME, str(msg.reconsume_times))
                sent = sent_to_dlq(msg) if sent_to_dlq is not None else self.send_message_back(msg, mq)
                if not sent:
                    suspend = True
                    msg.reconsume_times += 1
            else:
                suspend = True
                msg.reconsume_times += 1
        return suspend

    def send_message_back(self, msg: MessageExt, mq: MessageQueue) -> bool:
        """Over the maximum: CONSUMER_SEND_MSG_BACK with delay level -1 (to ``%DLQ%group``). False on failure."""
        try:
            return bool(self.instance.run_sync(self.send_message_back_async(msg, mq), self._timeout_s()))
        except Exception as e:
            log.error("sendMessageBack exception, group: %s msg: %s: %r", self.consumer_group, msg.msg_id, e)
            return False

    async def send_message_back_async(self, msg: MessageExt, mq: MessageQueue) -> bool:
        """send_message_back on the instance's loop."""
        inst = self.instance
        try:
            addr = inst.find_broker_address_in_publish(mq.broker_name)
            if addr is None:
                found = inst.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, True)
                addr = found.broker_addr if found is not None else f"{msg.store_host[0]}:{msg.store_host[1]}"
            await inst.mq_client_api.consumer_send_message_back(
                addr,
                mq.broker_name,
                msg,
                self.consumer_group,
                -1,
                inst.client_config.mq_client_api_timeout,
                self.get_max_reconsume_times(),
            )
            return True
        except Exception as e:
            log.error("sendMessageBack exception, group: %s msg: %s: %r", self.consumer_group, msg.msg_id, e)
            return False
