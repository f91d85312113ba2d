"""RebalanceImpl (4.9 client/impl/consumer/RebalanceImpl + RebalancePushImpl + RebalancePullImpl).

Owns a consumer's share of its topics' queues (``do_rebalance``: all of them when BROADCASTING, the allocation
strategy's pick when CLUSTERING), the process queue table (queues dropped and created, with their PullRequests) and
the broker queue locks (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ).
Invariants: ``do_rebalance`` calls are serialized by an asyncio lock, so two wake-ups never create two PullRequests
for one queue; orderly queues get a PullRequest only once their broker lock is held.
Thread-safety: every ``async def`` on the instance loop; ``process_queue_table`` changed on the loop only, read by
other threads (iterate over a copy); consume threads reach the async methods through ``instance.run_sync``.
Details (the steps, the subclass hooks, the collaborators): docs/CLIENT_DESIGN.md, 'Rebalance'.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from abc import ABC, abstractmethod
from datetime import datetime
from typing import Any

from rmq_core.client.consumer.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy
from rmq_core.common.mix_all import MASTER_ID, RETRY_GROUP_TOPIC_PREFIX
from rmq_core.common.tasks import cancel_and_wait
from rmq_core.filter.subscription_data import SubscriptionData
from rmq_core.message import MessageQueue
from rmq_core.remoting.body.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel
from rmq_core.remoting.body.lock_batch import LockBatchRequestBody, UnlockBatchRequestBody

log = logging.getLogger("rmq_core.client.rebalance")

LOCK_TIMEOUT_MS = 1000  # RebalanceImpl: lockBatchMQ / unlockBatchMQ timeout
UNLOCK_DELAY_TIME_MS = 20000  # RebalancePushImpl.UNLOCK_DELAY_TIME_MILLS (rocketmq.client.unlockDelayTimeMills)


async def _resolve(value: Any) -> Any:
    """Await ``value`` when it is awaitable (async collaborator), else return it (plain collaborator)."""
    if inspect.isawaitable(value):
        return await value
    return value


async def _store_call(store: Any, name: str, *args: Any) -> Any:
    """Call an offset-store method from the loop: its ``<name>_async`` variant when it has one (the plain one may
    block on ``instance.run_sync``), else the plain method (awaited when it returns an awaitable)."""
    fn = getattr(store, name + "_async", None)
    if fn is not None:
        return await fn(*args)
    return await _resolve(getattr(store, name)(*args))


def _now_ms() -> int:
    return int(time.time() * 1000)


def parse_consume_timestamp(ts: str | None) -> int:
    """``yyyyMMddHHmmss`` (UtilAll.YYYYMMDDHHMMSS, local time) → epoch milliseconds; ValueError when malformed."""
    try:
        return int(datetime.strptime(ts, "%Y%m%d%H%M%S").timestamp() * 1000)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"consume_timestamp {ts!r} is not yyyyMMddHHmmss") from None


async def broker_addr_for_admin(instance: Any, mq: MessageQueue) -> str:
    """MQAdminImpl's address lookup: the master in the publish route, refreshing the route once when unknown."""
    addr = instance.find_broker_address_in_publish(mq.broker_name)
    if addr is None:
        await instance.update_topic_route_info_from_name_server(mq.topic)
        addr = instance.find_broker_address_in_publish(mq.broker_name)
    if addr is None:
        from rmq_core.client.exceptions import MQClientException

        raise MQClientException(-1, f"The broker[{mq.broker_name}] not exist")
    found: str = addr
    return found


async def fetch_max_offset(instance: Any, mq: MessageQueue) -> int:
    """MQAdminImpl.maxOffset: GET_MAX_OFFSET on the queue's master."""
    addr = await broker_addr_for_admin(instance, mq)
    return int(
        await instance.mq_client_api.get_max_offset(
            addr, mq.topic, mq.queue_id, instance.client_config.mq_client_api_timeout
        )
    )


async def fetch_min_offset(instance: Any, mq: MessageQueue) -> int:
    """MQAdminImpl.minOffset: GET_MIN_OFFSET on the queue's master."""
    addr = await broker_addr_for_admin(instance, mq)
    return int(
        await instance.mq_client_api.get_min_offset(
            addr, mq.topic, mq.queue_id, instance.client_config.mq_client_api_timeout
        )
    )


async def search_offset(instance: Any, mq: MessageQueue, timestamp_ms: int) -> int:
    """MQAdminImpl.searchOffset: SEARCH_OFFSET_BY_TIMESTAMP on the queue's master."""
    addr = await broker_addr_for_admin(instance, mq)
    return int(
        await instance.mq_client_api.search_offset(
            addr, mq.topic, mq.queue_id, timestamp_ms, instance.client_config.mq_client_api_timeout
        )
    )


async def compute_pull_from_where(
    instance: Any, offset_store: Any, mq: MessageQueue, cfw: ConsumeFromWhere, consume_timestamp: str | None
) -> int:
    """RebalancePushImpl.computePullFromWhereWithException: where a consumer starts on ``mq`` — the stored offset
    when there is one, else by ``cfw`` (first: 0; timestamp: the broker's search; last: the max offset; a retry
    topic from 0, or its max for timestamp); -1 when the store failed. Shared by the push consumer and
    rmq_core.aio's pull consumer."""
    from rmq_core.client.consumer.store.offset_store import ReadOffsetType

    last = int(await _store_call(offset_store, "read_offset", mq, ReadOffsetType.READ_FROM_STORE))
    if last >= 0:
        return last
    if last != -1:
        return -1
    retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
    if cfw == ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
        return 0
    if cfw == ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
        if retry:
            return await fetch_max_offset(instance, mq)
        return await search_offset(instance, mq, parse_consume_timestamp(consume_timestamp))
    # LAST_OFFSET and the deprecated LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST / MIN_OFFSET / MAX_OFFSET
    if retry:
        return 0
    return await fetch_max_offset(instance, mq)


class RebalanceImpl(ABC):
    """The part shared by push and pull consumers; subclasses supply the hooks below."""

    def __init__(
        self,
        consumer_group: str | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        allocate_message_queue_strategy: AllocateMessageQueueStrategy | None = None,
        instance: Any = None,
    ) -> None:
        self.consumer_group = consumer_group
        self.message_model = message_model
        self.allocate_message_queue_strategy: AllocateMessageQueueStrategy = (
            allocate_message_queue_strategy or AllocateMessageQueueAveragely()
        )
        self.instance = instance  # MQClientInstance (set at the consumer's start)
        self.process_queue_table: dict[MessageQueue, Any] = {}
        self.topic_subscribe_info_table: dict[str, set[MessageQueue]] = {}
        self.subscription_inner: dict[str, SubscriptionData] = {}
        self._rebalance_lock: asyncio.Lock | None = None

    # -- hooks ---------------------------------------------------------------------------------------------------
    @abstractmethod
    def consume_type(self) -> ConsumeType: ...

    @abstractmethod
    async def message_queue_changed(
        self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]
    ) -> None: ...

    @abstractmethod
    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: Any) -> bool: ...

    @abstractmethod
    async def remove_dirty_offset(self, mq: MessageQueue) -> None: ...

    @abstractmethod
    async def compute_pull_from_where_with_exception(self, mq: MessageQueue) -> int: ...

    @abstractmethod
    def dispatch_pull_request(self, pull_requests: list[Any]) -> None: ...

    def new_process_queue(self) -> Any:
        from rmq_core.client.consumer.process_queue import ProcessQueue

        return ProcessQueue()

    def new_pull_request(self, mq: MessageQueue, pq: Any, next_offset: int) -> Any:
        from rmq_core.client.consumer.pull_request import PullRequest

        return PullRequest(
            consumer_group=self.consumer_group or "", message_queue=mq, process_queue=pq, next_offset=next_offset
        )

    # -- broker locks --------------------------------------------------------------------------------------------
    def _master_addr(self, broker_name: str) -> str | None:
        found = self.instance.find_broker_address_in_subscribe(broker_name, MASTER_ID, True)
        return found.broker_addr if found is not None else None

    def _by_broker_name(self) -> dict[str, set[MessageQueue]]:
        out: dict[str, set[MessageQueue]] = {}
        for mq in list(self.process_queue_table):
            out.setdefault(mq.broker_name, set()).add(mq)
        return out

    async def lock(self, mq: MessageQueue) -> bool:
        """LOCK_BATCH_MQ for one queue; every queue the broker reports locked gets ``locked`` + a fresh timestamp."""
        addr = self._master_addr(mq.broker_name)
        if addr is None:
            return False
        body = LockBatchRequestBody(consumer_group=self.consumer_group, client_id=self.instance.client_id, mq_set={mq})
        try:
            locked: set[MessageQueue] = await self.instance.mq_client_api.lock_batch_mq(addr, body, LOCK_TIMEOUT_MS)
        except Exception as e:
            log.error("lockBatchMQ exception, %s: %s", mq, e)
            return False
        now = _now_ms()
        for m in locked:
            pq = self.process_queue_table.get(m)
            if pq is not None:
                pq.locked = True
                pq.last_lock_timestamp = now
        ok = mq in locked
        log.info("the message queue lock %s, %s %s", "OK" if ok else "Failed", self.consumer_group, mq)
        return ok

    async def lock_all(self) -> None:
        """Relock every queue in the table, per broker; queues the broker refuses become unlocked."""
        for broker_name, mqs in self._by_broker_name().items():
            addr = self._master_addr(broker_name)
            if addr is None or not mqs:
                continue
            body = LockBatchRequestBody(
                consumer_group=self.consumer_group, client_id=self.instance.client_id, mq_set=set(mqs)
            )
            try:
                ok_set: set[MessageQueue] = await self.instance.mq_client_api.lock_batch_mq(addr, body, LOCK_TIMEOUT_MS)
            except Exception as e:
                log.error("lockBatchMQ exception, %s: %s", sorted(mqs), e)
                continue
            now = _now_ms()
            for mq in ok_set:
                pq = self.process_queue_table.get(mq)
                if pq is not None:
                    if not pq.locked:
                        log.info("the message queue locked OK, Group: %s %s", self.consumer_group, mq)
                    pq.locked = True
                    pq.last_lock_timestamp = now
            for mq in mqs - ok_set:
                pq = self.process_queue_table.get(mq)
                if pq is not None:
                    pq.locked = False
                    log.warning("the message queue locked Failed, Group: %s %s", self.consumer_group, mq)

    async def unlock(self, mq: MessageQueue, oneway: bool) -> None:
        addr = self._master_addr(mq.broker_name)
        if addr is None:
            return
        body = UnlockBatchRequestBody(
            consumer_group=self.consumer_group, client_id=self.instance.client_id, mq_set={mq}
        )
        try:
            await self.instance.mq_client_api.unlock_batch_mq(addr, body, LOCK_TIMEOUT_MS, oneway)
            log.warning(
                "unlock messageQueue. group:%s, clientId:%s, mq:%s", self.consumer_group, self.instance.client_id, mq
            )
        except Exception as e:
            log.error("unlockBatchMQ exception, %s: %s", mq, e)

    async def unlock_all(self, oneway: bool) -> None:
        for broker_name, mqs in self._by_broker_name().items():
            addr = self._master_addr(broker_name)
            if addr is None or not mqs:
                continue
            body = UnlockBatchRequestBody(
                consumer_group=self.consumer_group, client_id=self.instance.client_id, mq_set=set(mqs)
            )
            try:
                await self.instance.mq_client_api.unlock_batch_mq(addr, body, LOCK_TIMEOUT_MS, oneway)
            except Exception as e:
                log.error("unlockBatchMQ exception, %s: %s", sorted(mqs), e)
                continue
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is not None:
                    pq.locked = False
                    log.info("the message queue unlock OK, Group: %s %s", self.consumer_group, mq)

    # -- rebalance -----------------------------------------------------------------------------------------------
    async def do_rebalance(self, is_order: bool) -> None:
        if self._rebalance_lock is None:
            self._rebalance_lock = asyncio.Lock()
        async with self._rebalance_lock:
            for topic in list(self.subscription_inner):
                try:
                    await self.rebalance_by_topic(topic, is_order)
                except Exception as e:
                    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                        log.warning("rebalanceByTopic Exception, %s %s: %r", self.consumer_group, topic, e)
            self.truncate_message_queue_not_my_topic()

    async def rebalance_by_topic(self, topic: str, is_order: bool) -> None:
        if self.message_model == MessageModel.BROADCASTING:
            mq_set = self.topic_subscribe_info_table.get(topic)
            if mq_set is None:
                log.warning("doRebalance, %s, but the topic[%s] not exist.", self.consumer_group, topic)
                return
            if await self.update_process_queue_table_in_rebalance(topic, set(mq_set), is_order):
                log.info("messageQueueChanged %s %s %s", self.consumer_group, topic, sorted(mq_set))
                await self.message_queue_changed(topic, set(mq_set), set(mq_set))
            return
        mq_set = self.topic_subscribe_info_table.get(topic)
        cid_all = await _resolve(self.instance.find_consumer_id_list(topic, self.consumer_group))
        if mq_set is None and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            log.warning("doRebalance, %s, but the topic[%s] not exist.", self.consumer_group, topic)
        if cid_all is None:
            log.warning("doRebalance, %s %s, get consumer id list failed", self.consumer_group, topic)
        if mq_set is None or cid_all is None:
            return
        mq_all = sorted(mq_set)
        cids = sorted(cid_all)
        strategy = self.allocate_message_queue_strategy
        try:
            allocated = strategy.allocate(self.consumer_group or "", self.instance.client_id, mq_all, cids)
        except Exception as e:
            log.error(
                "AllocateMessageQueueStrategy.allocate Exception. allocateMessageQueueStrategyName=%s: %r",
                strategy.name(),
                e,
            )
            return
        allocate_result_set = set(allocated or ())
        if await self.update_process_queue_table_in_rebalance(topic, allocate_result_set, is_order):
            log.info(
                "rebalanced result changed. allocateMessageQueueStrategyName=%s, group=%s, topic=%s, "
                "clientId=%s, mqAllSize=%d, cidAllSize=%d, rebalanceResultSize=%d, rebalanceResultSet=%s",
                strategy.name(),
                self.consumer_group,
                topic,
                self.instance.client_id,
                len(mq_set),
                len(cids),
                len(allocate_result_set),
                sorted(allocate_result_set),
            )
            await self.message_queue_changed(topic, set(mq_set), allocate_result_set)

    def truncate_message_queue_not_my_topic(self) -> None:
        for mq in list(self.process_queue_table):
            if mq.topic not in self.subscription_inner:
                pq = self.process_queue_table.pop(mq, None)
                if pq is not None:
                    pq.dropped = True
                    log.info(
                        "doRebalance, %s, truncateMessageQueueNotMyTopic remove unnecessary mq, %s",
                        self.consumer_group,
                        mq,
                    )

    async def update_process_queue_table_in_rebalance(
        self, topic: str, mq_set: set[MessageQueue], is_order: bool
    ) -> bool:
        changed = False
        for mq, pq in list(self.process_queue_table.items()):
            if mq.topic != topic:
                continue
            if mq not in mq_set:
                pq.dropped = True
                if await self.remove_unnecessary_message_queue(mq, pq):
                    self.process_queue_table.pop(mq, None)
                    changed = True
                    log.info("doRebalance, %s, remove unnecessary mq, %s", self.consumer_group, mq)
            elif self.consume_type() == ConsumeType.CONSUME_PASSIVELY and pq.is_pull_expired():
                pq.dropped = True
                if await self.remove_unnecessary_message_queue(mq, pq):
                    self.process_queue_table.pop(mq, None)
                    changed = True
                    log.error(
                        "[BUG]doRebalance, %s, remove unnecessary mq, %s, because pull is pause, so try to fixed it",
                        self.consumer_group,
                        mq,
                    )

        pull_requests: list[Any] = []
        for mq in sorted(mq_set):
            if mq in self.process_queue_table:
                continue
            if is_order and not await self.lock(mq):
                log.warning("doRebalance, %s, add a new mq failed, %s, because lock failed", self.consumer_group, mq)
                continue
            await self.remove_dirty_offset(mq)
            pq = self.new_process_queue()
            pq.locked = True  # as 4.9: a new queue starts locked (orderly: it was just locked on the broker)
            try:
                next_offset = await self.compute_pull_from_where_with_exception(mq)
            except Exception as e:
                log.info("doRebalance, %s, compute offset failed, %s: %r", self.consumer_group, mq, e)
                continue
            if next_offset < 0:
                log.warning("doRebalance, %s, add new mq failed, %s", self.consumer_group, mq)
                continue
            if mq in self.process_queue_table:
                log.info("doRebalance, %s, mq already exists, %s", self.consumer_group, mq)
                continue
            self.process_queue_table[mq] = pq
            log.info("doRebalance, %s, add a new mq, %s", self.consumer_group, mq)
            pull_requests.append(self.new_pull_request(mq, pq, next_offset))
            changed = True

        self.dispatch_pull_request(pull_requests)
        return changed

    async def remove_process_queue(self, mq: MessageQueue) -> None:
        """Drop one queue (OFFSET_ILLEGAL handling): mark it dropped and run the subclass clean-up."""
        prev = self.process_queue_table.pop(mq, None)
        if prev is not None:
            was_dropped = prev.dropped
            prev.dropped = True
            await self.remove_unnecessary_message_queue(mq, prev)
            log.info("Fix Offset, %s, remove unnecessary mq, %s Droped: %s", self.consumer_group, mq, was_dropped)

    def destroy(self) -> None:
        for pq in list(self.process_queue_table.values()):
            pq.dropped = True
        self.process_queue_table.clear()

    def message_queues_of(self, topic: str) -> set[MessageQueue]:
        return {mq for mq in list(self.process_queue_table) if mq.topic == topic}


class RebalancePushImpl(RebalanceImpl):
    """The push consumer's rebalance: pull requests go to the PullMessageService; orderly queues unlock on removal."""

    unlock_delay_time_ms: int = UNLOCK_DELAY_TIME_MS

    def __init__(
        self,
        push_impl: Any,
        consumer_group: str | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        allocate_message_queue_strategy: AllocateMessageQueueStrategy | None = None,
        instance: Any = None,
    ) -> None:
        super().__init__(consumer_group, message_model, allocate_message_queue_strategy, instance)
        self.push_impl = push_impl
        self._delayed_unlocks: set[asyncio.Handle] = set()

    # settings live on the user-facing consumer (DefaultMQPushConsumer); the impl may hold them itself
    def _conf(self) -> Any:
        return (
            getattr(self.push_impl, "push_consumer", None)
            or getattr(self.push_impl, "default_mq_push_consumer", None)
            or self.push_impl
        )

    def consume_type(self) -> ConsumeType:
        return ConsumeType.CONSUME_PASSIVELY

    async def message_queue_changed(self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]) -> None:
        sd = self.subscription_inner.get(topic)
        new_version = _now_ms()
        if sd is not None:
            log.info("%s Rebalance changed, also update version: %s, %s", topic, sd.sub_version, new_version)
            sd.sub_version = new_version
        current = len(self.process_queue_table)
        if current:
            conf = self._conf()
            t = getattr(conf, "pull_threshold_for_topic", -1)
            if t != -1:
                new_val = max(1, t // current)
                log.info(
                    "The pullThresholdForQueue is changed from %s to %s",
                    getattr(conf, "pull_threshold_for_queue", None),
                    new_val,
                )
                conf.pull_threshold_for_queue = new_val
            ts = getattr(conf, "pull_threshold_size_for_topic", -1)
            if ts != -1:
                new_val = max(1, ts // current)
                log.info(
                    "The pullThresholdSizeForQueue is changed from %s to %s",
                    getattr(conf, "pull_threshold_size_for_queue", None),
                    new_val,
                )
                conf.pull_threshold_size_for_queue = new_val
        await _resolve(self.instance.send_heartbeat_to_all_broker_with_lock())

    def _is_consume_orderly(self) -> bool:
        return bool(getattr(self.push_impl, "consume_orderly", False))

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: Any) -> bool:
        store = self.push_impl.offset_store
        await _store_call(store, "persist", mq)
        await _store_call(store, "remove_offset", mq)
        if self._is_consume_orderly() and self.message_model == MessageModel.CLUSTERING:
            # tryLock(1000 ms) without blocking the loop: poll the consume lock every 10 ms
            lock = pq.consume_lock
            deadline = time.monotonic() + 1.0
            while not lock.acquire(blocking=False):
                if time.monotonic() >= deadline:
                    log.warning(
                        "[WRONG]mq is consuming, so can not unlock it, %s. maybe hanged for a while, %s",
                        mq,
                        getattr(pq, "try_unlock_times", 0),
                    )
                    inc = getattr(pq, "inc_try_unlock_times", None)
                    if inc is not None:
                        inc()
                    return False
                await asyncio.sleep(0.01)
            try:
                return await self.unlock_delay(mq, pq)
            finally:
                lock.release()
        return True

    async def unlock_delay(self, mq: MessageQueue, pq: Any) -> bool:
        if pq.has_temp_message():
            log.info("unlockDelay, begin %s", mq)
            loop = asyncio.get_running_loop()

            def fire() -> None:
                self._delayed_unlocks.discard(handle)
                log.info("unlockDelay, execute at once %s", mq)
                task = loop.create_task(self.unlock(mq, True))
                self._background(task)

            handle = loop.call_later(self.unlock_delay_time_ms / 1000.0, fire)
            self._delayed_unlocks.add(handle)
        else:
            await self.unlock(mq, True)
        return True

    _tasks: set[asyncio.Task[Any]] | None = None

    def _background(self, task: asyncio.Task[Any]) -> None:
        if self._tasks is None:
            self._tasks = set()
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def cancel_delayed_unlocks(self) -> None:
        """Cancel pending delayed unlocks (consumer shutdown); call on the loop."""
        for h in list(self._delayed_unlocks):
            h.cancel()
        self._delayed_unlocks.clear()

    async def cancel_background(self) -> None:
        """Cancel the delayed unlocks and await the background unlocks (a consumer on a loop that lives on)."""
        self.cancel_delayed_unlocks()
        await cancel_and_wait(list(self._tasks or ()))

    async def remove_dirty_offset(self, mq: MessageQueue) -> None:
        await _store_call(self.push_impl.offset_store, "remove_offset", mq)

    async def compute_pull_from_where_with_exception(self, mq: MessageQueue) -> int:
        conf = self._conf()
        cfw = ConsumeFromWhere(getattr(conf, "consume_from_where", ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET))
        return await compute_pull_from_where(
            self.instance, self.push_impl.offset_store, mq, cfw, getattr(conf, "consume_timestamp", None)
        )

    def dispatch_pull_request(self, pull_requests: list[Any]) -> None:
        for pr in pull_requests:
            self.push_impl.execute_pull_request_immediately(pr)
            log.info("doRebalance, %s, add a new pull request %s", self.consumer_group, pr)


class RebalancePullImpl(RebalanceImpl):
    """The pull consumer's rebalance: it only tracks the queues; the user pulls them."""

    def __init__(
        self,
        pull_impl: Any,
        consumer_group: str | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        allocate_message_queue_strategy: AllocateMessageQueueStrategy | None = None,
        instance: Any = None,
    ) -> None:
        super().__init__(consumer_group, message_model, allocate_message_queue_strategy, instance)
        self.pull_impl = pull_impl

    def consume_type(self) -> ConsumeType:
        return ConsumeType.CONSUME_ACTIVELY

    async def message_queue_changed(self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]) -> None:
        listener = getattr(self.pull_impl, "message_queue_listener", None)
        if listener is not None:
            try:
                listener(topic, set(mq_all), set(mq_divided))
            except Exception as e:
                log.error("messageQueueChanged exception: %r", e)

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: Any) -> bool:
        store = self.pull_impl.offset_store
        await _store_call(store, "persist", mq)
        await _store_call(store, "remove_offset", mq)
        return True

    async def remove_dirty_offset(self, mq: MessageQueue) -> None:
        await _store_call(self.pull_impl.offset_store, "remove_offset", mq)

    async def compute_pull_from_where_with_exception(self, mq: MessageQueue) -> int:
        return 0

    def dispatch_pull_request(self, pull_requests: list[Any]) -> None:
        pass
