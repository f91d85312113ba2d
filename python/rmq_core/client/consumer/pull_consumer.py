"""PullConsumer (4.9 DefaultMQPullConsumer + DefaultMQPullConsumerImpl): the application pulls queues itself.

Owns the pull API (``pull``, ``pull_block_if_not_found``: PULL_MESSAGE with the subscription flag, the latter with the
suspend flag: broker holds 20 s, client waits 30 s), the automatic ``*`` subscription of pulled topics for the
rebalance, the registered topics in the heartbeat, and the offsets (RemoteBrokerOffsetStore when clustering,
LocalFileOffsetStore when broadcasting), persisted every ``persist_consumer_offset_interval`` and at shutdown.
Invariant (a reported difference from 4.9): persisting covers the rebalanced queues and every queue given an offset
with ``update_consume_offset``.
Thread-safety: the public methods block on the client instance's loop (``instance.run_sync``), never call them on
that loop's thread; the MQConsumerInner hooks run on the loop; start/shutdown are serialized by a lock.
Details (usage example, 4.9 behaviour): docs/CLIENT_DESIGN.md, 'Pull consumer'.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from rmq_core.client.client_config import ClientConfig
from rmq_core.client.consumer.allocate import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy
from rmq_core.client.consumer.pull_api_wrapper import PullAPIWrapper
from rmq_core.client.consumer.rebalance_impl import RebalancePullImpl, fetch_max_offset, fetch_min_offset, search_offset
from rmq_core.client.consumer.store.offset_store import ReadOffsetType
from rmq_core.client.exceptions import MQClientException
from rmq_core.client.pull_result import PullResult
from rmq_core.common import mix_all
from rmq_core.common import sys_flag as pull_sys_flag
from rmq_core.filter.message_selector import SUB_ALL, ExpressionType, MessageSelector
from rmq_core.filter.subscription_data import SubscriptionData, build_subscription_data
from rmq_core.message import MessageExt, MessageQueue
from rmq_core.remoting.body.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel

log = logging.getLogger("rmq_core.client.pull_consumer")

CREATE_JUST, RUNNING, SHUTDOWN_ALREADY, START_FAILED = "CREATE_JUST", "RUNNING", "SHUTDOWN_ALREADY", "START_FAILED"

MessageQueueListener = Callable[[str, set[MessageQueue], set[MessageQueue]], Any]


class PullConsumer:
    def __init__(
        self,
        consumer_group: str,
        namesrv_addr: str | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        allocate_strategy: AllocateMessageQueueStrategy | None = None,
        *,
        register_topics: Iterable[str] = (),
        broker_suspend_max_time_millis: int = 20000,
        consumer_timeout_millis_when_suspend: int = 30000,
        consumer_pull_timeout_millis: int = 10000,
        max_reconsume_times: int = 16,
        offset_store: Any = None,
        offset_store_dir: str | None = None,
        **client_settings: Any,
    ) -> None:
        unknown = set(client_settings) - ClientConfig.setting_names()
        if unknown:
            raise TypeError(f"PullConsumer got unknown settings: {', '.join(sorted(unknown))}")
        cfg_kwargs = dict(client_settings)
        if namesrv_addr is not None:
            cfg_kwargs["namesrv_addr"] = namesrv_addr
        self.client_config = ClientConfig(**cfg_kwargs)
        self.consumer_group = consumer_group
        self.message_model = MessageModel(message_model)
        self.allocate_message_queue_strategy = allocate_strategy or AllocateMessageQueueAveragely()
        self.register_topics: set[str] = set(register_topics)
        self.broker_suspend_max_time_millis = broker_suspend_max_time_millis
        self.consumer_timeout_millis_when_suspend = consumer_timeout_millis_when_suspend
        self.consumer_pull_timeout_millis = consumer_pull_timeout_millis
        self.max_reconsume_times = max_reconsume_times
        self.message_queue_listener: MessageQueueListener | None = None
        self.offset_store: Any = offset_store
        self.offset_store_dir = offset_store_dir
        self.consume_type = ConsumeType.CONSUME_ACTIVELY
        self.consume_from_where = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
        self.instance: Any = None
        self.pull_api_wrapper: PullAPIWrapper | None = None
        self.rebalance_impl = RebalancePullImpl(
            self, consumer_group, self.message_model, self.allocate_message_queue_strategy
        )
        self.service_state = CREATE_JUST
        self._state_lock = threading.Lock()
        self._topics_lock = threading.Lock()

    # -- MQConsumerInner -----------------------------------------------------------------------------------------
    @property
    def group_name(self) -> str:
        return self.consumer_group

    def subscriptions(self) -> list[SubscriptionData]:
        with self._topics_lock:
            topics = sorted(self.register_topics)
        out = []
        for t in topics:
            sd = build_subscription_data(t, SUB_ALL)
            sd.sub_version = 0
            out.append(sd)
        return out

    async def do_rebalance(self) -> None:
        await self.rebalance_impl.do_rebalance(False)

    def _queues_to_persist(self) -> set[MessageQueue]:
        mqs = set(self.rebalance_impl.process_queue_table)
        clone = getattr(self.offset_store, "clone_offset_table", None)
        if clone is not None:
            mqs |= set(clone(None))
        return mqs

    async def persist_consumer_offset(self) -> None:
        if self.service_state != RUNNING or self.offset_store is None:
            return
        mqs = self._queues_to_persist()
        if not mqs:
            return
        try:
            fn = getattr(self.offset_store, "persist_all_async", None)
            if fn is not None:
                await fn(mqs)
            else:
                self.offset_store.persist_all(mqs)
        except Exception as e:
            log.error("group: %s persistConsumerOffset exception: %r", self.consumer_group, e)

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        if topic in self.rebalance_impl.subscription_inner:
            self.rebalance_impl.topic_subscribe_info_table[topic] = set(mqs)

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        if topic in self.rebalance_impl.subscription_inner:
            return topic not in self.rebalance_impl.topic_subscribe_info_table
        return False

    def is_unit_mode(self) -> bool:
        return bool(self.client_config.unit_mode)

    # -- life cycle ----------------------------------------------------------------------------------------------
    def _check_config(self) -> None:
        from rmq_core.common.mix_all import DEFAULT_CONSUMER_GROUP

        g = self.consumer_group
        if not g or not g.strip():
            raise MQClientException(-1, "consumerGroup is null")
        if len(g) > mix_all.GROUP_MAX_LENGTH:
            raise MQClientException(
                -1, f"the specified group is longer than group max length {mix_all.GROUP_MAX_LENGTH}."
            )
        if mix_all.is_topic_or_group_illegal(g):  # ASCII letters and digits only (str.isalnum takes any script)
            raise MQClientException(
                -1, f"the specified group[{g}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
            )
        if g == DEFAULT_CONSUMER_GROUP:
            raise MQClientException(
                -1, f"consumerGroup can not equal {DEFAULT_CONSUMER_GROUP}, please specify another one."
            )
        if self.consumer_timeout_millis_when_suspend < self.broker_suspend_max_time_millis:
            raise MQClientException(
                -1,
                "Long polling mode, the consumer consumerTimeoutMillisWhenSuspend must "
                "greater than brokerSuspendMaxTimeMillis",
            )

    def start(self) -> None:
        with self._state_lock:
            if self.service_state != CREATE_JUST:
                raise MQClientException(
                    -1, f"The PullConsumer service state not OK, maybe started once, {self.service_state}"
                )
            self.service_state = START_FAILED
            try:
                self.prepare_start()
                from rmq_core.client.mq_client_manager import MQClientManager

                self.set_up(MQClientManager.get_instance().get_or_create_mq_client_instance(self.client_config))
                try:
                    self.instance.start()
                except BaseException:
                    self.instance.unregister_consumer(self.consumer_group)
                    raise
                self.service_state = RUNNING
                log.info("the consumer [%s] start OK", self.consumer_group)
            except MQClientException:
                raise
            except Exception as e:
                raise MQClientException(-1, f"PullConsumer {self.consumer_group} failed to start: {e}", e) from e

    def prepare_start(self) -> None:
        """start's first steps (config, registered topics, instance name → pid): shared with rmq_core.aio."""
        self._check_config()
        for t in sorted(self.register_topics):
            self.rebalance_impl.subscription_inner[t] = build_subscription_data(t, SUB_ALL)
        if self.message_model == MessageModel.CLUSTERING:
            self.client_config.change_instance_name_to_pid()

    def set_up(self, instance: Any) -> None:
        """Wire the consumer to ``instance`` (not started here): rebalance, PullAPIWrapper, offset store, registration
        (MQClientException when the group is registered there already)."""
        self.instance = instance
        ri = self.rebalance_impl
        ri.consumer_group, ri.message_model = self.consumer_group, self.message_model
        ri.allocate_message_queue_strategy = self.allocate_message_queue_strategy
        ri.instance = self.instance
        self.pull_api_wrapper = PullAPIWrapper(self.instance, self.consumer_group, self.is_unit_mode())
        if self.offset_store is None:
            if self.message_model == MessageModel.BROADCASTING:
                from rmq_core.client.consumer.store.local_file_offset_store import LocalFileOffsetStore

                self.offset_store = LocalFileOffsetStore(self.instance, self.consumer_group, self.offset_store_dir)
            else:
                from rmq_core.client.consumer.store.remote_broker_offset_store import RemoteBrokerOffsetStore

                self.offset_store = RemoteBrokerOffsetStore(self.instance, self.consumer_group)
        self.offset_store.load()
        if not self.instance.register_consumer(self.consumer_group, self):
            self.service_state = CREATE_JUST
            raise MQClientException(
                -1,
                f"The consumer group[{self.consumer_group}] has been created before, specify another name please.",
            )

    def shutdown(self) -> None:
        with self._state_lock:
            if self.service_state != RUNNING:
                return
            try:
                self.instance.run_sync(self.persist_consumer_offset(), self._rpc_timeout_s() * 2)
            except Exception as e:
                log.error("persist offsets at shutdown failed: %r", e)
            self.instance.unregister_consumer(self.consumer_group)
            self.instance.shutdown()
            self.service_state = SHUTDOWN_ALREADY
            log.info("the consumer [%s] shutdown OK", self.consumer_group)

    def __enter__(self) -> PullConsumer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # -- helpers -------------------------------------------------------------------------------------------------
    def _is_running(self) -> None:
        if self.service_state != RUNNING:
            raise MQClientException(-1, f"The consumer is not in running status, {self.service_state}")

    def _rpc_timeout_s(self) -> float:
        return self.client_config.mq_client_api_timeout / 1000.0 + 1.0

    def subscription_automatically(self, topic: str) -> None:
        if topic not in self.rebalance_impl.subscription_inner:
            self.rebalance_impl.subscription_inner.setdefault(topic, build_subscription_data(topic, SUB_ALL))

    def unsubscribe(self, topic: str) -> None:
        self.rebalance_impl.subscription_inner.pop(topic, None)

    def register_message_queue_listener(self, topic: str, listener: MessageQueueListener | None) -> None:
        """Java's registerMessageQueueListener: the topic joins the heartbeat; ``listener(topic, mq_all, mq_divided)``
        is called when the rebalance changes this consumer's share."""
        with self._topics_lock:
            self.register_topics.add(topic)
        if listener is not None:
            self.message_queue_listener = listener
        if self.service_state == RUNNING:
            self.rebalance_impl.subscription_inner.setdefault(topic, build_subscription_data(topic, SUB_ALL))

    # -- queues --------------------------------------------------------------------------------------------------
    async def _fetch_subscribe_message_queues(self, topic: str) -> set[MessageQueue]:
        inst = self.instance
        route = await inst.mq_client_api.get_topic_route_info_from_name_server(
            topic, self.client_config.mq_client_api_timeout
        )
        mqs = route.subscribe_message_queues(topic)
        if not mqs:
            raise MQClientException(-1, f"Can not find Message Queue for this topic, {topic} Namesrv return empty")
        return set(mqs)

    def fetch_subscribe_message_queues(self, topic: str) -> set[MessageQueue]:
        """The readable queues of ``topic`` (the rebalance's table when known, else the name server's route)."""
        self._is_running()
        if not topic:
            raise MQClientException(-1, "topic is null")
        known = self.rebalance_impl.topic_subscribe_info_table.get(topic)
        if known:
            return set(known)
        try:
            return set(self.instance.run_sync(self._fetch_subscribe_message_queues(topic), self._rpc_timeout_s()))
        except MQClientException as e:
            raise MQClientException(-1, f"Can not find Message Queue for this topic, {topic}", e) from e

    def fetch_message_queues_in_balance(self, topic: str) -> set[MessageQueue]:
        self._is_running()
        if not topic:
            raise ValueError("topic is null")
        return {mq for mq in list(self.rebalance_impl.process_queue_table) if mq.topic == topic}

    def max_offset(self, mq: MessageQueue) -> int:
        self._is_running()
        return int(self.instance.run_sync(fetch_max_offset(self.instance, mq), self._rpc_timeout_s() * 2))

    def min_offset(self, mq: MessageQueue) -> int:
        self._is_running()
        return int(self.instance.run_sync(fetch_min_offset(self.instance, mq), self._rpc_timeout_s() * 2))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        self._is_running()
        return int(self.instance.run_sync(search_offset(self.instance, mq, timestamp_ms), self._rpc_timeout_s() * 2))

    # -- pulling -------------------------------------------------------------------------------------------------
    def _subscription_data(self, mq: MessageQueue, expression: str | MessageSelector | None) -> SubscriptionData:
        if mq is None:
            raise MQClientException(-1, "mq is null")
        try:
            return build_subscription_data(mq.topic, expression)
        except Exception as e:
            raise MQClientException(-1, f"parse subscription error: {e}", e) from e

    async def _pull_async(
        self, mq: MessageQueue, sd: SubscriptionData, offset: int, max_nums: int, block: bool, timeout_ms: int
    ) -> PullResult:
        assert self.pull_api_wrapper is not None
        sys_flag = pull_sys_flag.build_pull_sys_flag(False, block, True, False)
        is_tag = sd.expression_type in (None, ExpressionType.TAG)
        result = await self.pull_api_wrapper.pull_kernel_impl(
            mq,
            sd.sub_string,
            sd.expression_type,
            0 if is_tag else sd.sub_version,
            offset,
            max_nums,
            sys_flag,
            0,
            self.broker_suspend_max_time_millis,
            timeout_ms,
        )
        return self.pull_api_wrapper.process_pull_result(mq, result, sd)

    def _pull_sync(
        self, mq: MessageQueue, sd: SubscriptionData, offset: int, max_nums: int, block: bool, timeout_ms: int
    ) -> PullResult:
        self._is_running()
        if mq is None:
            raise MQClientException(-1, "mq is null")
        if offset < 0:
            raise MQClientException(-1, "offset < 0")
        if max_nums <= 0:
            raise MQClientException(-1, "maxNums <= 0")
        self.subscription_automatically(mq.topic)
        t = self.consumer_timeout_millis_when_suspend if block else timeout_ms
        result: PullResult = self.instance.run_sync(
            self._pull_async(mq, sd, offset, max_nums, block, t), t / 1000.0 + 1.0
        )
        return result

    def pull(
        self,
        mq: MessageQueue,
        expression: str | MessageSelector | None,
        offset: int,
        max_nums: int,
        timeout_ms: int | None = None,
    ) -> PullResult:
        """One PULL_MESSAGE without suspension: FOUND / NO_NEW_MSG / NO_MATCHED_MSG / OFFSET_ILLEGAL."""
        sd = self._subscription_data(mq, expression)
        return self._pull_sync(
            mq, sd, offset, max_nums, False, self.consumer_pull_timeout_millis if timeout_ms is None else timeout_ms
        )

    def pull_block_if_not_found(
        self, mq: MessageQueue, expression: str | MessageSelector | None, offset: int, max_nums: int
    ) -> PullResult:
        """Long polling: the broker holds the pull until a message arrives or ``broker_suspend_max_time_millis``."""
        sd = self._subscription_data(mq, expression)
        return self._pull_sync(mq, sd, offset, max_nums, True, self.consumer_pull_timeout_millis)

    # -- offsets -------------------------------------------------------------------------------------------------
    def fetch_consume_offset(self, mq: MessageQueue, from_store: bool) -> int:
        """The stored offset (-1 when none): from the broker/file when ``from_store``, else memory first."""
        self._is_running()
        return int(
            self.offset_store.read_offset(
                mq, ReadOffsetType.READ_FROM_STORE if from_store else ReadOffsetType.MEMORY_FIRST_THEN_STORE
            )
        )

    def update_consume_offset(self, mq: MessageQueue, offset: int) -> None:
        """Remember ``offset`` as the next to consume; persisted every few seconds and at shutdown."""
        self._is_running()
        if offset < 0:
            raise MQClientException(-1, f"offset < 0: {offset}")
        self.offset_store.update_offset(mq, offset, False)

    def update_consume_offset_to_broker(self, mq: MessageQueue, offset: int, is_oneway: bool = False) -> None:
        self._is_running()
        self.offset_store.update_consume_offset_to_broker(mq, offset, is_oneway)

    def send_message_back(
        self, msg: MessageExt, delay_level: int, broker_name: str | None = None, consumer_group: str | None = None
    ) -> None:
        """CONSUMER_SEND_MSG_BACK to the message's broker (retry topic, or DLQ with delay level -1)."""
        self._is_running()
        inst = self.instance
        addr = (
            inst.find_broker_address_in_publish(broker_name)
            if broker_name
            else f"{msg.store_host[0]}:{msg.store_host[1]}"
        )
        if addr is None:
            raise MQClientException(-1, f"The broker[{broker_name}] not exist")
        inst.run_sync(
            inst.mq_client_api.consumer_send_message_back(
                addr,
                broker_name or "",
                msg,
                consumer_group or self.consumer_group,
                delay_level,
                self.client_config.mq_client_api_timeout,
                self.max_reconsume_times,
            ),
            self._rpc_timeout_s(),
        )

    def __repr__(self) -> str:
        return f"PullConsumer(group={self.consumer_group!r}, state={self.service_state})"
