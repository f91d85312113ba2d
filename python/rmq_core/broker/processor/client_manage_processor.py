"""ClientManageProcessor: HEART_BEAT (34), UNREGISTER_CLIENT (35) and CHECK_CLIENT_CONFIG (46), as RocketMQ's
``br/processor/ClientManageProcessor.java`` answers them.

Owns: a heartbeat's registrations (the subscription group, the retry topic ``%RETRY%<group>``, the consumer and
producer managers; 5.x's ``IS_SUPPORT_HEART_BEAT_V2``/``IS_SUB_CHANGE`` answer), their removal, and the SQL92 check of
CHECK_CLIENT_CONFIG.
Invariants: a heartbeat whose body is missing or not HeartbeatData JSON, or that names a consumer group RocketMQ's
validator refuses, is answered SYSTEM_ERROR and registers nothing; a missing ``clientID`` header on
UNREGISTER_CLIENT is answered SYSTEM_ERROR naming it.
Thread-safety: runs on the broker's event loop only.
Details: docs/BROKER_DESIGN.md, 'Heartbeats and client registration'.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from rmq_core.broker.client.client_channel_info import ClientChannelInfo
from rmq_core.common.clock import now_ms
from rmq_core.common.mix_all import get_retry_topic, validate_group
from rmq_core.common.perm_name import PERM_READ, PERM_WRITE
from rmq_core.common.sys_flag import build_topic_sys_flag
from rmq_core.filter.message_selector import ExpressionType
from rmq_core.filter.sql92 import FilterParseError, Sql92Filter
from rmq_core.remoting.body.heartbeat import CheckClientRequestBody, HeartbeatData
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import UnregisterClientRequestHeader, decode_header

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.client.consumer_manager import ConsumerManager
    from rmq_core.broker.client.producer_manager import ProducerManager
    from rmq_core.broker.subscription_group_manager import SubscriptionGroupManager
    from rmq_core.broker.topic_config_manager import TopicConfigManager
    from rmq_core.remoting.connection import Connection

log = logging.getLogger(__name__)

IS_SUPPORT_HEART_BEAT_V2 = "IS_SUPPORT_HEART_BEAT_V2"
IS_SUB_CHANGE = "IS_SUB_CHANGE"


class ClientManageProcessor:
    """``ClientManageProcessor(...collaborators)``; ``await process_request(conn, request)``."""

    request_codes = (RequestCode.HEART_BEAT, RequestCode.UNREGISTER_CLIENT, RequestCode.CHECK_CLIENT_CONFIG)

    def __init__(
        self,
        broker_config: BrokerConfig,
        subscription_group_manager: SubscriptionGroupManager,
        topic_config_manager: TopicConfigManager,
        consumer_manager: ConsumerManager,
        producer_manager: ProducerManager,
        now_ms: Callable[[], int] = now_ms,
    ) -> None:
        self.broker_config = broker_config
        self.subscription_group_manager = subscription_group_manager
        self.topic_config_manager = topic_config_manager
        self.consumer_manager = consumer_manager
        self.producer_manager = producer_manager
        self.now_ms = now_ms

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.HEART_BEAT:
            return self.heart_beat(conn, request)
        if request.code == RequestCode.UNREGISTER_CLIENT:
            return self.unregister_client(conn, request)
        if request.code == RequestCode.CHECK_CLIENT_CONFIG:
            return self.check_client_config(request)
        return RemotingCommand.response_to(
            request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {request.code} not supported"
        )

    def check_client_config(self, request: RemotingCommand) -> RemotingCommand:
        try:
            sub = CheckClientRequestBody.decode(request.body or b"").subscription_data
        except ValueError as e:
            return RemotingCommand.response_to(
                request, ResponseCode.SYSTEM_ERROR, remark=f"the body is not a CheckClientRequestBody: {e}"
            )
        expression_type, expression = sub.expression_type, sub.sub_string or ""
        if ExpressionType.is_tag_type(expression_type):
            return RemotingCommand.response_to(request, ResponseCode.SUCCESS)
        if not self.broker_config.enable_property_filter:
            return RemotingCommand.response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                remark=f"The broker does not support consumer to filter message by {expression_type}",
            )
        if expression_type != ExpressionType.SQL92:
            return RemotingCommand.response_to(
                request,
                ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                remark=f"no filter for expression type {expression_type}",
            )
        try:
            Sql92Filter(expression)
        except FilterParseError as e:
            return RemotingCommand.response_to(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED, remark=str(e))
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def _channel_info(self, conn: Connection, client_id: str, request: RemotingCommand) -> ClientChannelInfo:
        return ClientChannelInfo(conn, client_id, request.language, request.version, self.now_ms())

    # --- HEART_BEAT ------------------------------------------------------------------------------------------
    def heart_beat(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        if not request.body:
            return RemotingCommand.response_to(
                request, ResponseCode.SYSTEM_ERROR, remark="the heartbeat has no body (HeartbeatData expected)"
            )
        try:
            heartbeat = HeartbeatData.decode(request.body)
        except ValueError as e:  # not JSON, or not HeartbeatData: nothing is registered
            return RemotingCommand.response_to(
                request, ResponseCode.SYSTEM_ERROR, remark=f"the heartbeat body is not HeartbeatData: {e}"
            )
        if not heartbeat.client_id:
            return RemotingCommand.response_to(
                request, ResponseCode.SYSTEM_ERROR, remark="the heartbeat has no clientID"
            )
        for data in heartbeat.consumer_data_set:  # Java clients check names first; refuse before registering any
            reason = validate_group(data.group_name)
            if reason is not None:
                return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark=reason)
        info = self._channel_info(conn, heartbeat.client_id, request)
        without_sub = bool(getattr(heartbeat, "without_sub", False))
        for data in heartbeat.consumer_data_set:
            group = data.group_name
            group_config = self.subscription_group_manager.find_subscription_group_config(group)
            notify = True
            if group_config is not None:
                notify = group_config.notify_consumer_ids_changed_enable
                topic_sys_flag = build_topic_sys_flag(False, True) if data.unit_mode else 0
                self.topic_config_manager.create_topic_in_send_message_back_method(
                    get_retry_topic(group), group_config.retry_queue_nums, PERM_WRITE | PERM_READ, topic_sys_flag
                )
            sub_list = list(data.subscription_data_set)
            if without_sub and not sub_list:
                current = self.consumer_manager.get_consumer_group_info(group)
                if current is not None:
                    sub_list = list(current.subscription_table.values())
            changed = self.consumer_manager.register_consumer(
                group, info, data.consume_type, data.message_model, data.consume_from_where, sub_list, notify
            )
            if changed:
                log.info("registerConsumer info changed %s %s", group, conn.remote_address)
        for pdata in heartbeat.producer_data_set:
            self.producer_manager.register_producer(pdata.group_name, info)
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, ext_fields={IS_SUPPORT_HEART_BEAT_V2: "true", IS_SUB_CHANGE: "true"}
        )

    # --- UNREGISTER_CLIENT -----------------------------------------------------------------------------------
    def unregister_client(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_header(UnregisterClientRequestHeader, request.ext_fields)
        info = self._channel_info(conn, header.clientID, request)
        if header.producerGroup is not None:
            self.producer_manager.unregister_producer(header.producerGroup, info)
        if header.consumerGroup is not None:
            group_config = self.subscription_group_manager.find_subscription_group_config(header.consumerGroup)
            notify = True if group_config is None else group_config.notify_consumer_ids_changed_enable
            self.consumer_manager.unregister_consumer(header.consumerGroup, info, notify)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)
