"""PushConsumer (DefaultMQPushConsumer) and DefaultMQPushConsumerImpl, following 4.9's Java classes step by step.

Owns the settings (4.9's defaults) and public API (``PushConsumer``) and what the client instance and the
PullMessageService call (``DefaultMQPushConsumerImpl``, ``.impl``): ``start()``, ``pull_message`` (dropped, state,
pause, flow control, lock and subscription checks, then the pull and its callback) and ``send_message_back``
(CONSUMER_SEND_MSG_BACK, falling back to a resend to ``%RETRY%<group>``).
Thread-safety: pull_message and the callback run on the instance loop; consume threads call ``send_message_back``
(blocking, via ``instance.run_sync``), the ProcessQueue and the offset store (both thread-safe). Public blocking
methods must not be called on the loop thread.
Details (each step, its delays and thresholds): docs/CLIENT_DESIGN.md, 'Push consumer'.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from rmq_core.client.consumer.consume_message_concurrently_service import ConsumeMessageConcurrentlyService
from rmq_core.client.consumer.consumer_stats import ConsumerStatsManager
from rmq_core.client.consumer.listener import ConsumeFromWhere, ConsumeType, MessageModel
from rmq_core.client.consumer.process_queue import ProcessQueue
from rmq_core.client.consumer.pull_api_wrapper import PullAPIWrapper
from rmq_core.client.consumer.pull_request import PullRequest
from rmq_core.client.consumer.store.local_file_offset_store import LocalFileOffsetStore
from rmq_core.client.consumer.store.offset_store import ReadOffsetType
from rmq_core.client.consumer.store.remote_broker_offset_store import RemoteBrokerOffsetStore
from rmq_core.client.pull_result import PullResultExt, PullStatus
from rmq_core.common import mix_all, perm_name
from rmq_core.common.sys_flag import build_pull_sys_flag
from rmq_core.common.tasks import cancel_and_wait
from rmq_core.filter.message_selector import ExpressionType, MessageSelector
from rmq_core.filter.subscription_data import SubscriptionData, build_subscription_data
from rmq_core.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_RETRY_TOPIC,
    UNIQ_KEY,
    Message,
    MessageExt,
    MessageQueue,
)
from rmq_core.message_encoding import properties_to_string
from rmq_core.remoting.body.consumer_running_info import (
    PROP_CONSUME_ORDERLY,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_THREADPOOL_CORE_SIZE,
    ConsumerRunningInfo,
    ProcessQueueInfo,
)
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.header import SendMessageRequestHeader

log = logging.getLogger(__name__)

PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION = 3000
PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL = 50
PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL = 20
PULL_TIME_DELAY_MILLS_WHEN_SUSPEND = 1000
BROKER_SUSPEND_MAX_TIME_MILLIS = 15000
CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND = 30000
SEND_MESSAGE_BACK_TIMEOUT_MILLIS = 5000
OFFSET_ILLEGAL_FIX_DELAY_MILLIS = 10000  # PullCallback: fix and persist the offset, remove the queue, 10 s later
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"

_CLIENT_CONFIG_SETTINGS = (
    "client_ip",
    "instance_name",
    "unit_name",
    "unit_mode",
    "poll_name_server_interval",
    "heartbeat_broker_interval",
    "persist_consumer_offset_interval",
    "mq_client_api_timeout",
    "language",
    "access_key",  # RocketMQ 4.9's ACL credentials: requests signed (remoting/acl_signer.py)
    "secret_key",
)

_DEFAULTS: dict[str, Any] = {
    "consume_thread_min": 20,
    "consume_thread_max": 20,
    "consume_concurrently_max_span": 2000,
    "pull_threshold_for_queue": 1000,
    "pull_threshold_size_for_queue": 100,
    "pull_threshold_for_topic": -1,
    "pull_threshold_size_for_topic": -1,
    "pull_interval": 0,
    "pull_batch_size": 32,
    "consume_message_batch_max_size": 1,
    "post_subscription_when_pull": False,
    "max_reconsume_times": -1,
    "suspend_current_queue_time_millis": 1000,
    "consume_timeout": 15,
    "consume_timestamp": None,
    "offset_store_dir": None,
    "rebalance_interval_ms": 20000,
    "adjust_thread_pool_nums_threshold": 100000,
    "await_termination_millis_when_shutdown": 0,
}


class ServiceState:
    CREATE_JUST = "CREATE_JUST"
    RUNNING = "RUNNING"
    SHUTDOWN_ALREADY = "SHUTDOWN_ALREADY"
    START_FAILED = "START_FAILED"


def _client_exception(message: str) -> Exception:
    from rmq_core.client.exceptions import MQClientException

    return MQClientException(-1, message)


class PushConsumer:
    """DefaultMQPushConsumer. Settings are keyword arguments in snake_case (see ``_DEFAULTS``) plus ClientConfig's."""

    # the settings (values from ``_DEFAULTS`` unless given), declared for type checkers
    consume_thread_min: int
    consume_thread_max: int
    consume_concurrently_max_span: int
    pull_threshold_for_queue: int
    pull_threshold_size_for_queue: int
    pull_threshold_for_topic: int
    pull_threshold_size_for_topic: int
    pull_interval: int
    pull_batch_size: int
    consume_message_batch_max_size: int
    post_subscription_when_pull: bool
    max_reconsume_times: int
    suspend_current_queue_time_millis: int
    consume_timeout: int
    consume_timestamp: str | None
    offset_store_dir: str | None
    rebalance_interval_ms: int
    adjust_thread_pool_nums_threshold: int
    await_termination_millis_when_shutdown: int

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        allocate_strategy: Any = None,
        **settings: Any,
    ) -> None:
        unknown = set(settings) - set(_DEFAULTS) - set(_CLIENT_CONFIG_SETTINGS)
        if unknown:
            raise TypeError(f"unknown PushConsumer settings: {sorted(unknown)}")
        self.consumer_group = group
        self.namesrv_addr = namesrv_addr
        self.message_model = MessageModel(message_model)
        self.consume_from_where = ConsumeFromWhere(consume_from_where)
        if allocate_strategy is None:
            try:
                from rmq_core.client.consumer.allocate.averagely import AllocateMessageQueueAveragely

                allocate_strategy = AllocateMessageQueueAveragely()
            except ImportError:  # pragma: no cover - the strategies ship with the package
                allocate_strategy = None
        self.allocate_message_queue_strategy = allocate_strategy
        for k, v in _DEFAULTS.items():
            setattr(self, k, settings.get(k, v))
        if self.consume_timestamp is None:
            self.consume_timestamp = (datetime.now() - timedelta(minutes=30)).strftime("%Y%m%d%H%M%S")
        self.client_settings: dict[str, Any] = {k: settings[k] for k in _CLIENT_CONFIG_SETTINGS if k in settings}
        self.impl = DefaultMQPushConsumerImpl(self)

    # --- the public API -------------------------------------------------------------------------------------------
    def subscribe(self, topic: str, expression: str | MessageSelector | None = "*") -> None:
        self.impl.subscribe(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        self.impl.unsubscribe(topic)

    def register_message_listener(self, listener: Callable[[Sequence[MessageExt], Any], Any]) -> None:
        self.impl.register_message_listener(listener, orderly=False)

    def register_message_listener_orderly(self, listener: Callable[[Sequence[MessageExt], Any], Any]) -> None:
        self.impl.register_message_listener(listener, orderly=True)

    def start(self) -> None:
        self.impl.start()

    def shutdown(self) -> None:
        self.impl.shutdown()

    def suspend(self) -> None:
        self.impl.suspend()

    def resume(self) -> None:
        self.impl.resume()

    def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str | None = None) -> None:
        self.impl.send_message_back(msg, delay_level, broker_name if broker_name is not None else msg.broker_name)

    def update_core_pool_size(self, n: int) -> None:
        self.impl.update_core_pool_size(n)

    @property
    def client_id(self) -> str | None:
        inst = self.impl.instance
        return None if inst is None else str(inst.client_id)

    def __enter__(self) -> PushConsumer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


class DefaultMQPushConsumerImpl:
    """The push consumer's machinery; registered with the MQClientInstance as its MQConsumerInner."""

    def __init__(self, push_consumer: PushConsumer) -> None:
        self.push_consumer = push_consumer
        self.default_mq_push_consumer = push_consumer
        self.service_state = ServiceState.CREATE_JUST
        self.instance: Any = None
        self.pull_api_wrapper: PullAPIWrapper | None = None
        self.offset_store: Any = None
        self.consume_message_service: Any = None
        self.message_listener_inner: Callable[..., Any] | None = None
        self.consume_orderly = False
        self.pause = False
        self.stats = ConsumerStatsManager()
        self.queue_flow_control_times = 0
        self.queue_max_span_flow_control_times = 0
        self.consumer_start_timestamp = int(time.time() * 1000)
        self._pull_tasks: set[asyncio.Task[Any]] = set()
        self.rebalance_impl: Any = self._create_rebalance_impl()

    # --- MQConsumerInner --------------------------------------------------------------------------------------
    @property
    def impl(self) -> DefaultMQPushConsumerImpl:
        return self

    @property
    def group_name(self) -> str:
        return self.push_consumer.consumer_group

    @property
    def consumer_group(self) -> str:
        return self.push_consumer.consumer_group

    @property
    def message_model(self) -> MessageModel:
        return self.push_consumer.message_model

    @property
    def consume_type(self) -> ConsumeType:
        return ConsumeType.CONSUME_PASSIVELY

    @property
    def consume_from_where(self) -> ConsumeFromWhere:
        return self.push_consumer.consume_from_where

    def subscriptions(self) -> list[SubscriptionData]:
        return list(self.rebalance_impl.subscription_inner.values())

    def do_rebalance(self) -> Any:
        if not self.pause:
            return self.rebalance_impl.do_rebalance(self.consume_orderly)
        return None

    def persist_consumer_offset(self) -> Any:
        """Persist the assigned queues' offsets: blocking off the loop; on the loop thread it returns the coroutine
        to await (the instance's scheduled task awaits it)."""
        try:
            self.make_sure_state_ok()
        except Exception as e:
            log.error("group: %s persistConsumerOffset exception: %s", self.group_name, e)
            return None
        mqs = set(self.rebalance_impl.process_queue_table.keys())
        if self._on_loop():
            return self.offset_store.persist_all_async(mqs)
        self.offset_store.persist_all(mqs)
        return None

    async def persist_consumer_offset_async(self) -> None:
        if self.service_state != ServiceState.RUNNING:
            return
        await self.offset_store.persist_all_async(set(self.rebalance_impl.process_queue_table.keys()))

    def update_topic_subscribe_info(self, topic: str, info: set[MessageQueue]) -> None:
        if topic in self.rebalance_impl.subscription_inner:
            self.rebalance_impl.topic_subscribe_info_table[topic] = set(info)

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        if topic in self.rebalance_impl.subscription_inner:
            return topic not in self.rebalance_impl.topic_subscribe_info_table
        return False

    def is_unit_mode(self) -> bool:
        return bool(self.push_consumer.client_settings.get("unit_mode", False))

    def consumer_running_info(self) -> ConsumerRunningInfo:
        """GET_CONSUMER_RUNNING_INFO as 4.9's consumerRunningInfo builds it: the consumer's settings (Java's field
        names) and PROP_CONSUMEORDERLY / PROP_THREADPOOL_CORE_SIZE / PROP_CONSUMER_START_TIMESTAMP, the
        subscriptions, each assigned queue's ProcessQueueInfo with its commit offset, and per topic the consume
        statistics (averages since the consumer started: rmq_core keeps running totals, not 4.9's one-minute
        samples). The instance adds the name server, consume type and client version."""
        c = self.push_consumer
        props = {
            "consumerGroup": c.consumer_group,
            "messageModel": c.message_model.value,
            "consumeFromWhere": c.consume_from_where.value,
        }
        for name in _DEFAULTS:
            value = getattr(c, name, None)
            if value is not None:
                props[_java_name(name)] = str(value).lower() if isinstance(value, bool) else str(value)
        svc = self.consume_message_service
        props[PROP_CONSUME_ORDERLY] = "true" if self.consume_orderly else "false"
        props[PROP_THREADPOOL_CORE_SIZE] = str(svc.get_core_pool_size() if svc is not None else 0)
        props[PROP_CONSUMER_START_TIMESTAMP] = str(self.consumer_start_timestamp)
        info = ConsumerRunningInfo(properties=props, subscription_set=self.subscriptions())
        for mq, pq in list(self.rebalance_impl.process_queue_table.items()):
            pq_info = ProcessQueueInfo()
            if self.offset_store is not None:
                pq_info.commit_offset = self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
            pq.fill_process_queue_info(pq_info)
            info.mq_table[mq] = pq_info
        elapsed_s = max(1e-3, time.time() - self.consumer_start_timestamp / 1000)
        for sub in info.subscription_set:
            info.status_table[sub.topic] = self.stats.consume_status(self.group_name, sub.topic, elapsed_s)
        return info

    # --- set-up -----------------------------------------------------------------------------------------------
    def _create_rebalance_impl(self) -> Any:
        try:
            from rmq_core.client.consumer.rebalance_impl import RebalancePushImpl
        except ImportError:
            log.warning("rebalance_impl is not available yet: this consumer will not get queues assigned")
            return _NoRebalance()
        rb = RebalancePushImpl(self)
        for name, value in (
            ("consumer_group", self.push_consumer.consumer_group),
            ("message_model", self.push_consumer.message_model),
            ("allocate_message_queue_strategy", self.push_consumer.allocate_message_queue_strategy),
        ):
            if getattr(rb, name, None) is None:
                setattr(rb, name, value)
        return rb

    def subscribe(self, topic: str, expression: str | MessageSelector | None) -> None:
        err = mix_all.validate_topic(topic)
        if err is not None:
            raise _client_exception(err)
        if isinstance(expression, MessageSelector) and expression.expression_type == ExpressionType.SQL92:
            from rmq_core.filter.sql92 import compile_sql92

            try:
                compile_sql92(expression.expression)
            except ValueError as e:
                raise _client_exception(f"subscription exception: {e}") from e
        sd = build_subscription_data(topic, expression)
        self.rebalance_impl.subscription_inner[topic] = sd
        if self.instance is not None and self.service_state == ServiceState.RUNNING:
            self.instance.run_sync(self.instance.send_heartbeat_to_all_broker_with_lock(), self._api_timeout_s())

    def unsubscribe(self, topic: str) -> None:
        self.rebalance_impl.subscription_inner.pop(topic, None)

    def register_message_listener(self, listener: Callable[..., Any], orderly: bool) -> None:
        if not callable(listener):
            raise TypeError("a message listener must be callable")
        self.message_listener_inner = listener
        self.consume_orderly = orderly

    def _api_timeout_s(self) -> float:
        cfg = getattr(self.instance, "client_config", None)
        return float(getattr(cfg, "mq_client_api_timeout", 3000)) / 1000.0 * 3 + 1.0

    def check_config(self) -> None:
        c = self.push_consumer
        err = mix_all.validate_group(c.consumer_group)
        if err is not None:
            raise _client_exception(err)
        if c.consumer_group == mix_all.DEFAULT_CONSUMER_GROUP:
            raise _client_exception(
                f"consumerGroup can not equal {mix_all.DEFAULT_CONSUMER_GROUP}, please specify another one."
            )
        try:
            datetime.strptime(str(c.consume_timestamp), "%Y%m%d%H%M%S")
        except ValueError:
            raise _client_exception(
                f"consumeTimestamp is invalid, the valid format is yyyyMMddHHmmss,but received {c.consume_timestamp}"
            ) from None
        if c.allocate_message_queue_strategy is None:
            raise _client_exception("allocateMessageQueueStrategy is null")
        if self.message_listener_inner is None:
            raise _client_exception("messageListener is null")

        def rng(name: str, lo: int, hi: int, allow: tuple[int, ...] = ()) -> None:
            v = getattr(c, name)
            if not isinstance(v, int) or isinstance(v, bool) or ((v < lo or v > hi) and v not in allow):
                raise _client_exception(f"{name} Out of range [{lo}, {hi}]: {v!r}")

        rng("consume_thread_min", 1, 1000)
        rng("consume_thread_max", 1, 1000)
        if c.consume_thread_min > c.consume_thread_max:
            raise _client_exception(
                f"consumeThreadMin ({c.consume_thread_min}) is larger than consumeThreadMax ({c.consume_thread_max})"
            )
        rng("consume_concurrently_max_span", 1, 65535)
        rng("pull_threshold_for_queue", 1, 65535)
        rng("pull_threshold_for_topic", 1, 6553500, allow=(-1,))
        rng("pull_threshold_size_for_queue", 1, 1024)
        rng("pull_threshold_size_for_topic", 1, 102400, allow=(-1,))
        rng("pull_interval", 0, 65535)
        rng("consume_message_batch_max_size", 1, 1024)
        rng("pull_batch_size", 1, 1024)
        rng("consume_timeout", 1, 2**31 - 1)

    def copy_subscription(self) -> None:
        if self.push_consumer.message_model == MessageModel.CLUSTERING:
            retry = mix_all.get_retry_topic(self.push_consumer.consumer_group)
            self.rebalance_impl.subscription_inner[retry] = build_subscription_data(retry, "*")

    def _client_config(self) -> Any:
        from rmq_core.client.client_config import ClientConfig

        cfg = ClientConfig()
        if self.push_consumer.namesrv_addr is not None:
            cfg.namesrv_addr = self.push_consumer.namesrv_addr
        for k, v in self.push_consumer.client_settings.items():
            setattr(cfg, k, v)
        # for the instance's RebalanceService (not a ClientConfig field in 4.9: a system property there)
        cfg.rebalance_interval_ms = self.push_consumer.rebalance_interval_ms
        if self.push_consumer.message_model == MessageModel.CLUSTERING:
            cfg.change_instance_name_to_pid()
        return cfg

    def start(self) -> None:
        self.prepare_start()
        from rmq_core.client.mq_client_manager import MQClientManager

        self.set_up(MQClientManager.get_instance().get_or_create_mq_client_instance(self._client_config()))
        try:
            self.instance.start()
            self.service_state = ServiceState.RUNNING
            self.update_topic_subscribe_info_when_subscription_changed()
            self.instance.run_sync(self.instance.check_client_in_broker(), self._api_timeout_s())
            self.instance.run_sync(self.instance.send_heartbeat_to_all_broker_with_lock(), self._api_timeout_s())
        except BaseException:
            self.service_state = ServiceState.START_FAILED
            self._abandon_start()
            raise
        log.info("the consumer [%s] start OK.", self.push_consumer.consumer_group)
        self.instance.rebalance_immediately()

    def prepare_start(self) -> None:
        """start's first steps (state, config, retry subscription): shared with rmq_core.aio.AsyncPushConsumer."""
        if self.service_state != ServiceState.CREATE_JUST:
            raise _client_exception(f"The PushConsumer service state not OK, maybe started once, {self.service_state}")
        self.service_state = ServiceState.START_FAILED
        self.check_config()
        self.copy_subscription()

    def create_consume_message_service(self, listener: Callable[..., Any]) -> Any:
        """The consume service for ``listener`` (threads here; rmq_core.aio's impl returns one running tasks)."""
        if self.consume_orderly:
            from rmq_core.client.consumer.consume_message_orderly_service import ConsumeMessageOrderlyService

            return ConsumeMessageOrderlyService(self, listener)
        return ConsumeMessageConcurrentlyService(self, listener)

    def set_up(self, instance: Any) -> None:
        """Wire the consumer to ``instance`` (not started here): rebalance, PullAPIWrapper, offset store, consume
        service (started), registration. MQClientException when the group is registered there already."""
        c = self.push_consumer
        self.instance = instance
        rb = self.rebalance_impl
        rb.consumer_group = c.consumer_group
        rb.message_model = c.message_model
        rb.allocate_message_queue_strategy = c.allocate_message_queue_strategy
        rb.mq_client_factory = self.instance
        rb.instance = self.instance
        self.pull_api_wrapper = PullAPIWrapper(self.instance, c.consumer_group, self.is_unit_mode())
        if c.message_model == MessageModel.BROADCASTING:
            self.offset_store = LocalFileOffsetStore(self.instance, c.consumer_group, c.offset_store_dir)
        else:
            self.offset_store = RemoteBrokerOffsetStore(self.instance, c.consumer_group)
        self.offset_store.load()
        listener = self.message_listener_inner
        assert listener is not None  # checked by check_config
        self.consume_message_service = self.create_consume_message_service(listener)
        self.consume_message_service.start()
        if not self.instance.register_consumer(c.consumer_group, self):
            self.service_state = ServiceState.CREATE_JUST
            self.consume_message_service.shutdown()
            raise _client_exception(
                f"The consumer group[{c.consumer_group}] has been created before, specify another name please."
            )

    def _abandon_start(self) -> None:
        try:
            self.consume_message_service.shutdown()
            self.instance.unregister_consumer(self.push_consumer.consumer_group)
            self.instance.shutdown()
        except Exception:
            log.exception("cleaning up after a failed start")

    def update_topic_subscribe_info_when_subscription_changed(self) -> None:
        for topic in list(self.rebalance_impl.subscription_inner):
            try:
                self.instance.run_sync(
                    self.instance.update_topic_route_info_from_name_server(topic), self._api_timeout_s()
                )
            except Exception as e:
                log.warning("update route of %s failed: %s", topic, e)

    def shutdown(self) -> None:
        if self.service_state != ServiceState.RUNNING:
            if self.service_state == ServiceState.CREATE_JUST:
                self.service_state = ServiceState.SHUTDOWN_ALREADY
            return
        c = self.push_consumer
        self.consume_message_service.shutdown(c.await_termination_millis_when_shutdown)
        self.persist_consumer_offset()
        self.service_state = ServiceState.SHUTDOWN_ALREADY
        self.instance.unregister_consumer(c.consumer_group)
        try:
            self.instance.run_sync(self._cancel_pull_tasks(), 5.0)
        except Exception:
            log.exception("cancelling the pulls of %s", c.consumer_group)
        self.instance.shutdown()
        destroy = getattr(self.rebalance_impl, "destroy", None)
        if destroy is not None:
            destroy()
        log.info("the consumer [%s] shutdown OK", c.consumer_group)

    async def _cancel_pull_tasks(self) -> None:
        await cancel_and_wait(list(self._pull_tasks))

    def suspend(self) -> None:
        self.pause = True
        log.info("suspend this consumer, %s", self.group_name)

    def resume(self) -> None:
        self.pause = False
        log.info("resume this consumer, %s", self.group_name)
        if self.instance is not None and self.service_state == ServiceState.RUNNING:
            self.instance.rebalance_immediately()

    def is_pause(self) -> bool:
        return self.pause

    def update_core_pool_size(self, n: int) -> None:
        if self.consume_message_service is not None:
            self.consume_message_service.update_core_pool_size(n)

    def make_sure_state_ok(self) -> None:
        if self.service_state != ServiceState.RUNNING:
            raise _client_exception(f"The consumer service state not OK, {self.service_state}")

    def _on_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self.instance.loop
        except RuntimeError:
            return False

    # --- pull scheduling ----------------------------------------------------------------------------------------
    def execute_pull_request_immediately(self, pull_request: PullRequest) -> None:
        self.instance.pull_message_service.execute_pull_request_immediately(pull_request)

    def execute_pull_request_later(self, pull_request: PullRequest, time_delay_ms: int) -> None:
        self.instance.pull_message_service.execute_pull_request_later(pull_request, time_delay_ms)

    def execute_task_later(self, task: Callable[[], Any], time_delay_ms: int) -> None:
        self.instance.pull_message_service.execute_task_later(task, time_delay_ms)

    def correct_tags_offset(self, pull_request: PullRequest) -> None:
        if pull_request.process_queue.msg_count == 0:
            self.offset_store.update_offset(pull_request.message_queue, pull_request.next_offset, True)

    # --- pullMessage (4.9 DefaultMQPushConsumerImpl#pullMessage) ------------------------------------------------------
    async def pull_message(self, pull_request: PullRequest) -> None:
        pq: ProcessQueue = pull_request.process_queue
        if pq.dropped:
            log.info("the pull request[%s] is dropped.", pull_request)
            return
        pq.last_pull_timestamp = time.time_ns() // 1_000_000
        try:
            self.make_sure_state_ok()
        except Exception as e:
            log.warning("pullMessage exception, consumer state not ok: %s", e)
            self.execute_pull_request_later(pull_request, PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION)
            return
        if self.pause:
            log.warning("consumer was paused, execute pull request later. group=%s", self.group_name)
            self.execute_pull_request_later(pull_request, PULL_TIME_DELAY_MILLS_WHEN_SUSPEND)
            return
        c = self.push_consumer
        mq = pull_request.message_queue
        cached_count = pq.msg_count
        cached_size_mib = pq.msg_size // (1024 * 1024)
        if cached_count > c.pull_threshold_for_queue:
            self.execute_pull_request_later(pull_request, PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL)
            if self.queue_flow_control_times % 1000 == 0:
                log.warning(
                    "the cached message count exceeds the threshold %d, so do flow control, minOffset=%s, "
                    "maxOffset=%s, count=%d, size=%d MiB, pullRequest=%s, flowControlTimes=%d",
                    c.pull_threshold_for_queue,
                    pq.first_offset(),
                    pq.queue_offset_max,
                    cached_count,
                    cached_size_mib,
                    pull_request,
                    self.queue_flow_control_times,
                )
            self.queue_flow_control_times += 1
            return
        if cached_size_mib > c.pull_threshold_size_for_queue:
            self.execute_pull_request_later(pull_request, PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL)
            if self.queue_flow_control_times % 1000 == 0:
                log.warning(
                    "the cached message size exceeds the threshold %d MiB, so do flow control, "
                    "minOffset=%s, maxOffset=%s, count=%d, size=%d MiB, pullRequest=%s, "
                    "flowControlTimes=%d",
                    c.pull_threshold_size_for_queue,
                    pq.first_offset(),
                    pq.queue_offset_max,
                    cached_count,
                    cached_size_mib,
                    pull_request,
                    self.queue_flow_control_times,
                )
            self.queue_flow_control_times += 1
            return
        if not self.consume_orderly:
            span = pq.get_max_span()
            if span > c.consume_concurrently_max_span:
                self.execute_pull_request_later(pull_request, PULL_TIME_DELAY_MILLS_WHEN_CACHE_FLOW_CONTROL)
                if self.queue_max_span_flow_control_times % 1000 == 0:
                    log.warning(
                        "the queue's messages, span too long, so do flow control, minOffset=%s, "
                        "maxOffset=%s, maxSpan=%d, pullRequest=%s, flowControlTimes=%d",
                        pq.first_offset(),
                        pq.queue_offset_max,
                        span,
                        pull_request,
                        self.queue_max_span_flow_control_times,
                    )
                self.queue_max_span_flow_control_times += 1
                return
        else:
            if pq.locked:
                if not pull_request.locked_first:
                    rb = self.rebalance_impl
                    compute = getattr(rb, "compute_pull_from_where_with_exception", None) or rb.compute_pull_from_where
                    try:
                        offset = compute(mq)
                        if asyncio.iscoroutine(offset):
                            offset = await offset
                    except Exception as e:
                        log.warning("computePullFromWhere of %s failed: %s", mq, e)
                        self.execute_pull_request_later(pull_request, PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION)
                        return
                    if offset < 0:
                        log.warning(
                            "the first time to pull message, but computed offset %d < 0, retry later: %s",
                            offset,
                            pull_request,
                        )
                        self.execute_pull_request_later(pull_request, PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION)
                        return
                    broker_busy = offset < pull_request.next_offset
                    log.info(
                        "the first time to pull message, so fix offset from broker. pullRequest: %s "
                        "NewOffset: %d brokerBusy: %s",
                        pull_request,
                        offset,
                        broker_busy,
                    )
                    if broker_busy:
                        log.info(
                            "[NOTIFYME]the first time to pull message, but pull request offset larger than "
                            "broker consume offset. pullRequest: %s NewOffset: %d",
                            pull_request,
                            offset,
                        )
                    pull_request.locked_first = True
                    pull_request.next_offset = offset
            else:
                self.execute_pull_request_later(pull_request, PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION)
                log.info("pull message later because not locked in broker, %s", pull_request)
                return
        sd: SubscriptionData | None = self.rebalance_impl.subscription_inner.get(mq.topic)
        if sd is None:
            self.execute_pull_request_later(pull_request, PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION)
            log.warning("find the consumer's subscription failed, %s", pull_request)
            return
        commit_offset_enable = False
        commit_offset_value = 0
        if c.message_model == MessageModel.CLUSTERING:
            commit_offset_value = self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
            if commit_offset_value > 0:
                commit_offset_enable = True
            else:
                commit_offset_value = 0
        sub_expression: str | None = None
        class_filter = False
        if c.post_subscription_when_pull and not sd.class_filter_mode:
            sub_expression = sd.sub_string
        class_filter = sd.class_filter_mode
        sys_flag = build_pull_sys_flag(commit_offset_enable, True, sub_expression is not None, class_filter)
        t = asyncio.ensure_future(
            self._pull_and_process(pull_request, sd, sub_expression, sys_flag, commit_offset_value)
        )
        self._pull_tasks.add(t)
        t.add_done_callback(self._pull_tasks.discard)

    async def _pull_and_process(
        self,
        pull_request: PullRequest,
        sd: SubscriptionData,
        sub_expression: str | None,
        sys_flag: int,
        commit_offset_value: int,
    ) -> None:
        begin = time.monotonic()
        assert self.pull_api_wrapper is not None
        try:
            result = await self.pull_api_wrapper.pull_kernel_impl(
                pull_request.message_queue,
                sub_expression,
                sd.expression_type,
                sd.sub_version,
                pull_request.next_offset,
                self.push_consumer.pull_batch_size,
                sys_flag,
                commit_offset_value,
                BROKER_SUSPEND_MAX_TIME_MILLIS,
                CONSUMER_TIMEOUT_MILLIS_WHEN_SUSPEND,
            )
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._on_pull_exception(pull_request, e)
            return
        try:
            self._on_pull_success(pull_request, sd, result, begin)
        except Exception as e:
            log.exception("pull callback failed for %s", pull_request)
            self._on_pull_exception(pull_request, e)

    # --- PullCallback (4.9, in pullMessage) ---------------------------------------------------------------------------
    def _on_pull_success(
        self, pull_request: PullRequest, sd: SubscriptionData, result: PullResultExt, begin: float
    ) -> None:
        if self.service_state != ServiceState.RUNNING:
            return
        assert self.pull_api_wrapper is not None
        mq = pull_request.message_queue
        result = self.pull_api_wrapper.process_pull_result(mq, result, sd)
        status = result.pull_status
        if status is PullStatus.FOUND:
            prev_request_offset = pull_request.next_offset
            pull_request.next_offset = result.next_begin_offset
            self.stats.inc_pull_rt(self.group_name, mq.topic, int((time.monotonic() - begin) * 1000))
            first_msg_offset = 2**63 - 1
            msgs = result.msg_found_list
            if not msgs:
                self.execute_pull_request_immediately(pull_request)
            else:
                first_msg_offset = msgs[0].queue_offset
                self.stats.inc_pull_tps(self.group_name, mq.topic, len(msgs))
                pq = pull_request.process_queue
                dispatch = pq.put_message(msgs)
                self.consume_message_service.submit_consume_request(msgs, pq, mq, dispatch)
                if self.push_consumer.pull_interval > 0:
                    self.execute_pull_request_later(pull_request, self.push_consumer.pull_interval)
                else:
                    self.execute_pull_request_immediately(pull_request)
            if result.next_begin_offset < prev_request_offset or first_msg_offset < prev_request_offset:
                log.warning(
                    "[BUG] pull message result maybe data wrong, nextBeginOffset: %d firstMsgOffset: %d "
                    "prevRequestOffset: %d",
                    result.next_begin_offset,
                    first_msg_offset,
                    prev_request_offset,
                )
        elif status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            pull_request.next_offset = result.next_begin_offset
            self.correct_tags_offset(pull_request)
            self.execute_pull_request_immediately(pull_request)
        elif status is PullStatus.OFFSET_ILLEGAL:
            log.warning("the pull request offset illegal, %s %s", pull_request, result)
            pull_request.next_offset = result.next_begin_offset
            pull_request.process_queue.dropped = True

            async def fix_offset() -> None:
                try:
                    self.offset_store.update_offset(mq, pull_request.next_offset, False)
                    await self.offset_store.persist_async(mq)
                    remove = self.rebalance_impl.remove_process_queue(mq)
                    if asyncio.iscoroutine(remove):
                        await remove
                    log.warning("fix the pull request offset, %s", pull_request)
                except Exception:
                    log.exception("executeTaskLater Exception")

            self.execute_task_later(fix_offset, OFFSET_ILLEGAL_FIX_DELAY_MILLIS)

    def _on_pull_exception(self, pull_request: PullRequest, e: BaseException) -> None:
        if not pull_request.message_queue.topic.startswith(mix_all.RETRY_GROUP_TOPIC_PREFIX):
            log.warning("execute the pull request exception: %s", e)
        if self.service_state != ServiceState.RUNNING:
            return
        if getattr(e, "response_code", None) == ResponseCode.FLOW_CONTROL:
            self.execute_pull_request_later(pull_request, PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL)
        else:
            self.execute_pull_request_later(pull_request, PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION)

    # --- retry ------------------------------------------------------------------------------------------------
    def get_max_reconsume_times(self) -> int:
        v = self.push_consumer.max_reconsume_times
        return 16 if v == -1 else int(v)

    def reset_retry_and_namespace(self, msgs: Sequence[MessageExt], consumer_group: str) -> None:
        group_topic = mix_all.get_retry_topic(consumer_group)
        for m in msgs:
            if m.topic == group_topic:
                retry_topic = m.properties.get(PROPERTY_RETRY_TOPIC)
                if retry_topic is not None:
                    m.topic = retry_topic

    def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str | None = None) -> None:
        """Blocking (consume threads): CONSUMER_SEND_MSG_BACK, else the resend fallback. Raises when both fail."""
        if self._on_loop():
            raise RuntimeError("send_message_back blocks: call send_message_back_async on the client's loop thread")
        self.instance.run_sync(
            self.send_message_back_async(msg, delay_level, broker_name),
            SEND_MESSAGE_BACK_TIMEOUT_MILLIS / 1000.0 * 2 + 2.0,
        )

    async def send_message_back_async(self, msg: MessageExt, delay_level: int, broker_name: str | None = None) -> None:
        inst = self.instance
        try:
            addr = inst.find_broker_address_in_publish(broker_name) if broker_name else None
            if addr is None:
                host, port = msg.store_host
                addr = f"{host}:{port}"
            await inst.mq_client_api.consumer_send_message_back(
                addr,
                broker_name or "",
                msg,
                self.group_name,
                delay_level,
                SEND_MESSAGE_BACK_TIMEOUT_MILLIS,
                self.get_max_reconsume_times(),
            )
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.error("sendMessageBack Exception, %s: %s", self.group_name, e)
            await self._resend_to_retry_topic(msg)

    async def _resend_to_retry_topic(self, msg: MessageExt) -> None:
        inst = self.instance
        retry = mix_all.get_retry_topic(self.group_name)
        props = dict(msg.properties)
        origin = props.get(PROPERTY_ORIGIN_MESSAGE_ID)
        props[PROPERTY_ORIGIN_MESSAGE_ID] = origin if origin else (props.get(UNIQ_KEY) or msg.msg_id)
        props[PROPERTY_RETRY_TOPIC] = msg.topic
        props.pop(PROPERTY_TRANSACTION_PREPARED, None)
        props.pop(PROPERTY_RECONSUME_TIME, None)
        props.pop(PROPERTY_MAX_RECONSUME_TIMES, None)
        props[PROPERTY_DELAY_TIME_LEVEL] = str(3 + msg.reconsume_times)
        new_msg = Message(retry, msg.body, properties=props, flag=msg.flag)
        route = inst.topic_route_table.get(retry) if hasattr(inst, "topic_route_table") else None
        if route is None:
            await inst.update_topic_route_info_from_name_server(retry)
            route = inst.topic_route_table.get(retry)
        if route is None:
            raise _client_exception(f"No route info of this topic: {retry}")
        targets = [
            (qd.broker_name, qid)
            for qd in route.queue_datas
            if perm_name.is_writeable(qd.perm)
            for qid in range(qd.write_queue_nums)
        ]
        if not targets:
            raise _client_exception(f"No writable queue of this topic: {retry}")
        broker, queue_id = random.choice(targets)
        addr = inst.find_broker_address_in_publish(broker)
        if addr is None:
            raise _client_exception(f"The broker[{broker}] not exist")
        header = SendMessageRequestHeader(
            producerGroup=mix_all.CLIENT_INNER_PRODUCER_GROUP,
            topic=retry,
            defaultTopic=mix_all.AUTO_CREATE_TOPIC_KEY_TOPIC,
            defaultTopicQueueNums=4,
            queueId=queue_id,
            sysFlag=0,
            bornTimestamp=int(time.time() * 1000),
            flag=msg.flag,
            properties=properties_to_string(props),
            reconsumeTimes=msg.reconsume_times + 1,
            unitMode=False,
            maxReconsumeTimes=self.get_max_reconsume_times(),
            batch=False,
        )
        await inst.mq_client_api.send_message(addr, broker, new_msg, header, SEND_MESSAGE_BACK_TIMEOUT_MILLIS, "SYNC")


def _java_name(snake: str) -> str:
    """``pull_batch_size`` → ``pullBatchSize`` (DefaultMQPushConsumer's field names)."""
    head, *rest = snake.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


class _NoRebalance:
    """Stand-in while rebalance_impl.py is missing: holds the subscriptions, assigns nothing."""

    def __init__(self) -> None:
        self.subscription_inner: dict[str, SubscriptionData] = {}
        self.process_queue_table: dict[MessageQueue, ProcessQueue] = {}
        self.topic_subscribe_info_table: dict[str, set[MessageQueue]] = {}
        self.consumer_group: str | None = None
        self.message_model: Any = None
        self.allocate_message_queue_strategy: Any = None
        self.mq_client_factory: Any = None

    def do_rebalance(self, is_order: bool) -> None:
        pass

    def remove_process_queue(self, mq: MessageQueue) -> None:
        pq = self.process_queue_table.pop(mq, None)
        if pq is not None:
            pq.dropped = True

    def compute_pull_from_where(self, mq: MessageQueue) -> int:
        return -1

    def destroy(self) -> None:
        for pq in self.process_queue_table.values():
            pq.dropped = True
        self.process_queue_table.clear()
