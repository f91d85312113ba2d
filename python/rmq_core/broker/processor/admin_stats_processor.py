"""AdminStatsProcessor: the read-only admin and introspection requests of 4.9's ``AdminBrokerProcessor`` (what
``mqadmin clusterList / brokerStatus / topicStatus / consumerProgress / consumerConnection / producerConnection``
and ``queryMsgById``'s message track ask a broker), answered with 4.9.7's bodies.

Owns: GET_BROKER_RUNTIME_INFO (28), GET_TOPIC_STATS_INFO (202), GET_CONSUME_STATS (208),
GET_CONSUMER/PRODUCER_CONNECTION_LIST (203/204), QUERY_TOPIC_CONSUME_BY_WHO (300),
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), GET_ALL_CONSUMER/DELAY_OFFSET (43/45), GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305).
Invariants: nothing here changes state. Thread-safety: runs on the broker's event loop.
Details: docs/BROKER_DESIGN.md, 'Admin statistics requests'.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from rmq_core.broker.stats.broker_runtime_stats import GET, PUT, java_double
from rmq_core.common.disk_usage import disk_partition_space_used_percent, human_readable_byte_count
from rmq_core.common.mix_all import RMQ_SYS_SCHEDULE_TOPIC
from rmq_core.common.mq_version import version_desc
from rmq_core.format.cq_unit import CQ_STORE_UNIT_SIZE, decode_unit
from rmq_core.message import MessageQueue
from rmq_core.remoting.body.connection import Connection as ConnectionBody
from rmq_core.remoting.body.connection import ConsumerConnection, ProducerConnection
from rmq_core.remoting.body.group_list import GroupList
from rmq_core.remoting.body.kv_table import KVTable
from rmq_core.remoting.body.queue_offsets import ConsumeStats, OffsetWrapper, TopicOffset, TopicStatsTable
from rmq_core.remoting.body.route import TopicList
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import DEFAULT_VERSION, RemotingCommand
from rmq_core.remoting.header import (
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    decode_header,
)

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.client.client_channel_info import ClientChannelInfo
    from rmq_core.broker.client.consumer_manager import ConsumerManager
    from rmq_core.broker.client.producer_manager import ProducerManager
    from rmq_core.broker.consumer_offset_manager import ConsumerOffsetManager
    from rmq_core.broker.pop.pop_inflight_counter import PopInflightCounter
    from rmq_core.broker.schedule.schedule_message_service import ScheduleMessageService
    from rmq_core.broker.stats.broker_runtime_stats import BrokerRuntimeStats
    from rmq_core.broker.subscription_group_manager import SubscriptionGroupManager
    from rmq_core.broker.topic_config_manager import TopicConfigManager
    from rmq_core.remoting.connection import Connection
    from rmq_core.store import MessageStore

log = logging.getLogger(__name__)

# 4.9's BrokerConfig defaults for the thread-pool queue capacities the runtime info reports
SEND_THREAD_POOL_QUEUE_CAPACITY = 10000
PULL_THREAD_POOL_QUEUE_CAPACITY = 100000
QUERY_THREAD_POOL_QUEUE_CAPACITY = 20000
END_TRANSACTION_POOL_QUEUE_CAPACITY = 100000


def format_runtime(ms: int) -> str:
    """StoreStatsService#getFormatRuntime: ``[ 0 days, 1 hours, 2 minutes, 3 seconds ]``."""
    s = ms // 1000
    return f"[ {s // 86400} days, {s % 86400 // 3600} hours, {s % 3600 // 60} minutes, {s % 60} seconds ]"


class AdminStatsProcessor:
    """``AdminStatsProcessor(...collaborators)``; ``await process_request(conn, request)``."""

    request_codes = (
        RequestCode.GET_BROKER_RUNTIME_INFO,
        RequestCode.GET_TOPIC_STATS_INFO,
        RequestCode.GET_CONSUME_STATS,
        RequestCode.GET_CONSUMER_CONNECTION_LIST,
        RequestCode.GET_PRODUCER_CONNECTION_LIST,
        RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        RequestCode.GET_ALL_CONSUMER_OFFSET,
        RequestCode.GET_ALL_DELAY_OFFSET,
        RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER,
    )

    def __init__(
        self,
        broker_config: BrokerConfig,
        message_store: MessageStore,
        topic_config_manager: TopicConfigManager,
        subscription_group_manager: SubscriptionGroupManager,
        consumer_offset_manager: ConsumerOffsetManager,
        consumer_manager: ConsumerManager,
        producer_manager: ProducerManager,
        schedule_message_service: ScheduleMessageService,
        runtime_stats: BrokerRuntimeStats,
        now_ms: Callable[[], int],
    ) -> None:
        self.broker_config = broker_config
        self.message_store = message_store
        self.topic_config_manager = topic_config_manager
        self.subscription_group_manager = subscription_group_manager
        self.consumer_offset_manager = consumer_offset_manager
        self.consumer_manager = consumer_manager
        self.producer_manager = producer_manager
        self.schedule_message_service = schedule_message_service
        self.runtime_stats = runtime_stats
        self.now_ms = now_ms
        self.pop_inflight: PopInflightCounter | None = None  # the POP service's, once it exists
        self._handlers: dict[int, Callable[[Connection, RemotingCommand], RemotingCommand]] = {
            RequestCode.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
            RequestCode.GET_TOPIC_STATS_INFO: self.get_topic_stats_info,
            RequestCode.GET_CONSUME_STATS: self.get_consume_stats,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.get_consumer_connection_list,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.get_producer_connection_list,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.query_topic_consume_by_who,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all_subscription_group,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.get_all_consumer_offset,
            RequestCode.GET_ALL_DELAY_OFFSET: self.get_all_delay_offset,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.get_system_topic_list,
        }

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        handler = self._handlers.get(request.code)
        if handler is None:
            return RemotingCommand.response_to(
                request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {request.code} not supported"
            )
        return handler(conn, request)

    # --- the store's facts ------------------------------------------------------------------------------------
    def message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """DefaultMessageStore#getMessageStoreTimeStamp: the store time of the message at a ConsumeQueue offset,
        -1 when there is none."""
        _next, units = self.message_store.scan_consume_queue(topic, queue_id, offset, 1)
        if len(units) < CQ_STORE_UNIT_SIZE:
            return -1
        phy, _size, _tags_code = decode_unit(units)
        msg = self.message_store.look_message_by_offset(phy)
        return msg.store_timestamp if msg is not None else -1

    def earliest_message_time(self) -> int:
        store = self.message_store
        if store.max_physical_offset <= store.min_physical_offset:
            return -1
        try:
            msg = store.look_message_by_offset(store.min_physical_offset)
        except Exception:  # the first file's head may be a blank or trimmed record
            return -1
        return msg.store_timestamp if msg is not None else -1

    # --- runtime info -----------------------------------------------------------------------------------------
    def runtime_info(self) -> dict[str, str]:
        stats = self.runtime_stats
        put_total, get_total = stats.totals()
        put_sizes = self.runtime_stats.stats_manager.snapshot().get("TOPIC_PUT_SIZE", {})
        put_size_total = sum(int(v["value"]) for v in put_sizes.values())
        times_total = max(put_total, 1)
        store = self.message_store
        cfg = self.broker_config
        root = cfg.store_path_root_dir
        commit_log_dir = os.path.join(root, "commitlog")
        cq_dir = os.path.join(root, "consumequeue")
        cl_ratio = disk_partition_space_used_percent(commit_log_dir)
        now = self.now_ms()
        info: dict[str, str] = {
            "brokerVersionDesc": version_desc(DEFAULT_VERSION),
            "brokerVersion": str(DEFAULT_VERSION),
            "bootTimestamp": str(stats.boot_ms),
            "runtime": format_runtime(now - stats.boot_ms),
            "msgPutTotalYesterdayMorning": str(stats.msg_put_total_yesterday_morning),
            "msgPutTotalTodayMorning": str(stats.msg_put_total_today_morning),
            "msgPutTotalTodayNow": str(put_total),
            "msgGetTotalYesterdayMorning": str(stats.msg_get_total_yesterday_morning),
            "msgGetTotalTodayMorning": str(stats.msg_get_total_today_morning),
            "msgGetTotalTodayNow": str(get_total),
            "putTps": stats.tps_triple(PUT),
            "getTransferedTps": stats.tps_triple(GET),
            "getTotalTps": stats.tps_triple(GET),
            "putMessageTimesTotal": str(times_total),
            "putMessageSizeTotal": str(put_size_total),
            "putMessageAverageSize": java_double(put_size_total / times_total),
            "sendThreadPoolQueueSize": "0",
            "sendThreadPoolQueueCapacity": str(SEND_THREAD_POOL_QUEUE_CAPACITY),
            "pullThreadPoolQueueSize": "0",
            "pullThreadPoolQueueCapacity": str(PULL_THREAD_POOL_QUEUE_CAPACITY),
            "queryThreadPoolQueueSize": "0",
            "queryThreadPoolQueueCapacity": str(QUERY_THREAD_POOL_QUEUE_CAPACITY),
            "EndTransactionQueueSize": "0",
            "EndTransactionThreadPoolQueueCapacity": str(END_TRANSACTION_POOL_QUEUE_CAPACITY),
            "sendThreadPoolQueueHeadWaitTimeMills": "0",
            "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "queryThreadPoolQueueHeadWaitTimeMills": "0",
            "dispatchBehindBytes": "0",  # the store dispatches to the ConsumeQueues in the put itself
            "pageCacheLockTimeMills": "0",  # no put lock is held across calls
            "earliestMessageTimeStamp": str(self.earliest_message_time()),
            "startAcceptSendRequestTimeStamp": "0",
            "commitLogMinOffset": str(store.min_physical_offset),
            "commitLogMaxOffset": str(store.max_physical_offset),
            "commitLogDiskRatio": java_double(cl_ratio),
            f"commitLogDiskRatio_{commit_log_dir}": java_double(cl_ratio),
            "consumeQueueDiskRatio": java_double(disk_partition_space_used_percent(cq_dir)),
        }
        if os.path.isdir(root):
            st = os.statvfs(root)
            total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
            info["commitLogDirCapacity"] = (
                f"Total : {human_readable_byte_count(total)}, Free : {human_readable_byte_count(usable)}."
            )
        info.update(self.schedule_message_service_running_stats())
        return info

    def schedule_message_service_running_stats(self) -> dict[str, str]:
        """ScheduleMessageService#buildRunningStats: ``scheduleMessageOffset_<level>`` = ``"<delay offset>,<max>"``."""
        out: dict[str, str] = {}
        for level, delay_offset in sorted(self.schedule_message_service.offset_table.items()):
            max_offset = self.message_store.get_max_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, int(level) - 1)
            out[f"scheduleMessageOffset_{level}"] = f"{delay_offset},{max_offset}"
        return out

    def get_broker_runtime_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        body = KVTable(self.runtime_info()).encode()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    # --- topics -----------------------------------------------------------------------------------------------
    def get_topic_stats_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetTopicStatsInfoRequestHeader, request.ext_fields)
        config = self.topic_config_manager.select_topic_config(h.topic)
        if config is None:
            return RemotingCommand.response_to(
                request, ResponseCode.TOPIC_NOT_EXIST, remark=f"topic[{h.topic}] not exist"
            )
        table = TopicStatsTable()
        store = self.message_store
        for qid in range(config.write_queue_nums):
            lo = max(store.get_min_offset_in_queue(h.topic, qid), 0)
            hi = max(store.get_max_offset_in_queue(h.topic, qid), 0)
            ts = self.message_store_timestamp(h.topic, qid, hi - 1) if hi > 0 else 0
            mq = MessageQueue(h.topic, self.broker_config.broker_name, qid)
            table.offset_table[mq] = TopicOffset(min_offset=lo, max_offset=hi, last_update_timestamp=ts)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=table.encode())

    def get_system_topic_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        topics = {
            t for t in self.topic_config_manager.topic_config_table if self.topic_config_manager.is_system_topic(t)
        }
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=TopicList(topics).encode())

    # --- groups -----------------------------------------------------------------------------------------------
    def get_consume_stats(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetConsumeStatsRequestHeader, request.ext_fields)
        group = h.consumerGroup
        topics = (
            {h.topic} if h.topic and h.topic.strip() else self.consumer_offset_manager.which_topic_by_consumer(group)
        )
        stats = ConsumeStats()
        store = self.message_store
        for topic in sorted(topics):
            config = self.topic_config_manager.select_topic_config(topic)
            if config is None:
                log.warning("consumeStats, topic config not exist, %s", topic)
                continue
            if (
                self.consumer_manager.find_subscription_data(group, topic) is None
                and self.consumer_manager.find_subscription_data_count(group) > 0
            ):
                log.warning("consumeStats, the consumer group[%s], topic[%s] not exist", group, topic)
                continue
            for qid in range(config.read_queue_nums):
                broker_offset = max(store.get_max_offset_in_queue(topic, qid), 0)
                pull_offset = max(self.consumer_offset_manager.query_offset(group, topic, qid), 0)
                # a POP group's offset is its pop offset: what is popped and not acked is still to consume
                inflight = self.pop_inflight.get(group, topic, qid) if self.pop_inflight is not None else 0
                consumer_offset = max(pull_offset - inflight, 0)
                last = 0
                if consumer_offset - 1 >= 0:
                    ts = self.message_store_timestamp(topic, qid, consumer_offset - 1)
                    last = ts if ts > 0 else 0
                mq = MessageQueue(topic, self.broker_config.broker_name, qid)
                stats.offset_table[mq] = OffsetWrapper(broker_offset, consumer_offset, last, pull_offset)
            stats.consume_tps += self.runtime_stats.group_get_tps(group, topic)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=stats.encode())

    def get_consumer_connection_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetConsumerConnectionListRequestHeader, request.ext_fields)
        info = self.consumer_manager.get_consumer_group_info(h.consumerGroup)
        if info is None:
            return RemotingCommand.response_to(
                request, ResponseCode.CONSUMER_NOT_ONLINE, remark=f"the consumer group[{h.consumerGroup}] not online"
            )
        body = ConsumerConnection(
            consume_type=info.consume_type.value,
            message_model=info.message_model.value,
            consume_from_where=info.consume_from_where.value,
            connection_set=[_connection(c) for c in info.channel_info_table.values()],
            subscription_table=dict(info.subscription_table),
        )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body.encode())

    def get_producer_connection_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetProducerConnectionListRequestHeader, request.ext_fields)
        table = self.producer_manager.group_channel_table.get(h.producerGroup)
        if table is None:
            return RemotingCommand.response_to(
                request, ResponseCode.SYSTEM_ERROR, remark=f"the producer group[{h.producerGroup}] not exist"
            )
        body = ProducerConnection([_connection(c) for c in table.values()])
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body.encode())

    def query_topic_consume_by_who(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(QueryTopicConsumeByWhoRequestHeader, request.ext_fields)
        groups = set(self.consumer_manager.query_topic_consume_by_who(h.topic))
        groups |= self.consumer_offset_manager.which_group_by_topic(h.topic)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=GroupList(groups).encode())

    # --- config files -----------------------------------------------------------------------------------------
    def get_all_subscription_group(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return _config_file(request, self.subscription_group_manager.encode(), "No subscription group in this broker")

    def get_all_consumer_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return _config_file(request, self.consumer_offset_manager.encode(), "No consumer offset in this broker")

    def get_all_delay_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        return _config_file(request, self.schedule_message_service.encode(), "No delay offset in this broker")


def _config_file(request: RemotingCommand, content: str, none_remark: str) -> RemotingCommand:
    """A config file's content as the answer's body (UTF-8); SYSTEM_ERROR ``none_remark`` where it is empty."""
    if not content:
        return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark=none_remark)
    return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=content.encode("utf-8"))


def _connection(info: ClientChannelInfo) -> ConnectionBody:
    addr = getattr(info.conn, "remote_address", None) or str(info.conn)
    return ConnectionBody(client_id=info.client_id, client_addr=addr, language=info.language, version=info.version)
