"""AdminBrokerProcessor: the admin and offset-lookup commands of RocketMQ's ``br/processor/AdminBrokerProcessor.java``
that the consumption path needs.

Owns: UPDATE_AND_CREATE_TOPIC (17), UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_ALL_TOPIC_CONFIG (21),
GET_TOPIC_CONFIG (351, 5.x),
GET_MAX/MIN_OFFSET (30/31), SEARCH_OFFSET_BY_TIMESTAMP (29), GET_EARLIEST_MSG_STORETIME (32), DELETE_TOPIC_IN_BROKER
(215), DELETE_SUBSCRIPTIONGROUP (207), GET/UPDATE_BROKER_CONFIG (26/25), DELETE_EXPIRED_COMMITLOG (329),
LOCK/UNLOCK_BATCH_MQ (41/42); the rest of 4.9.7's admin codes answer REQUEST_CODE_NOT_SUPPORTED (``UNSUPPORTED``).
The changing ones are refused on a slave and validate names as RocketMQ does.
Invariants: nothing is changed by a request that fails validation or does not decode; a missing required header field
is answered SYSTEM_ERROR naming it.
Thread-safety: runs on the broker's event loop only.
Details: docs/BROKER_DESIGN.md, 'Admin requests'.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rmq_core.broker.broker_config import parse_properties
from rmq_core.broker.remote_config_policy import MAX_UPDATE_BODY, ConfigRefused
from rmq_core.broker.topic_config_manager import topic_config_json
from rmq_core.common.log_text import clip
from rmq_core.common.mix_all import is_system_topic, validate_group, validate_topic
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.common.topic_config import TopicConfig
from rmq_core.remoting import fastjson
from rmq_core.remoting.body.lock_batch import (
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetBrokerConfigResponseHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetTopicConfigRequestHeader,
    OffsetResponseHeader,
    SearchOffsetRequestHeader,
    decode_header,
    encode_header,
)
from rmq_core.remoting.request_limits import FASTJSON_FALLBACK_MAX

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.broker_configuration import BrokerConfiguration
    from rmq_core.broker.client.rebalance_lock_manager import RebalanceLockManager
    from rmq_core.broker.consumer_offset_manager import ConsumerOffsetManager
    from rmq_core.broker.subscription_group_manager import SubscriptionGroupManager
    from rmq_core.broker.topic_config_manager import TopicConfigManager
    from rmq_core.remoting.connection import Connection
    from rmq_core.store import MessageStore

log = logging.getLogger(__name__)

SLAVE_REMARK = "Can't modify topic or subscription group from slave broker, please execute it from master broker."


# 4.9.7 admin requests rmq_core's broker does not serve, with the reason given to the caller
UNSUPPORTED: dict[int, str] = {
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: "ACL is not supported by rmq_core",
    RequestCode.DELETE_ACL_CONFIG: "ACL is not supported by rmq_core",
    RequestCode.GET_BROKER_CLUSTER_ACL_INFO: "ACL is not supported by rmq_core",
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: "ACL is not supported by rmq_core",
    RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: "ACL is not supported by rmq_core",
    RequestCode.QUERY_CONSUME_TIME_SPAN: "QUERY_CONSUME_TIME_SPAN is not supported by rmq_core yet",
    RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: "cleaning expired ConsumeQueues on request is not supported by rmq_core",
    RequestCode.QUERY_CORRECTION_OFFSET: "QUERY_CORRECTION_OFFSET is not supported by rmq_core",
    RequestCode.CLONE_GROUP_OFFSET: "cloneGroupOffset is not supported by rmq_core yet",
    RequestCode.VIEW_BROKER_STATS_DATA: "per-minute stats (statsAll) are not kept by rmq_core: its counters are "
    "cumulative; see GET_BROKER_RUNTIME_INFO or the Prometheus endpoint",
    RequestCode.CLEAN_UNUSED_TOPIC: "cleaning unused topics on request is not supported by rmq_core",
    RequestCode.GET_BROKER_CONSUME_STATS: "brokerConsumeStats is not supported by rmq_core yet; use consumerProgress",
    RequestCode.QUERY_CONSUME_QUEUE: "queryCq is not supported by rmq_core",
    RequestCode.RESUME_CHECK_HALF_MESSAGE: "transactional half messages are not supported by rmq_core",
    RequestCode.ADD_WRITE_PERM_OF_BROKER: "use updateBrokerConfig -k brokerPermission on rmq_core",
    RequestCode.GET_ALL_PRODUCER_INFO: "GET_ALL_PRODUCER_INFO is not supported by rmq_core; use producerConnection",
}


class TopicAttributesError(ValueError):
    """A topic ``attributes`` modification string that does not parse (AttributeParser's rules)."""


def parse_attributes(modification: str | None) -> dict[str, str]:
    """AttributeParser.parseToMap: ``+key1=value1,+key2=value2,-key3`` → ``{"+key1": "value1", …, "-key3": ""}``."""
    out: dict[str, str] = {}
    if not modification:
        return out
    for kv in modification.split(","):
        if "=" in kv:
            key, value = kv.split("=", 1)
            if "+" not in key:
                raise TopicAttributesError(f"add/alter attribute format is wrong: {key}")
        else:
            key, value = kv, ""
            if "-" not in key:
                raise TopicAttributesError(f"delete attribute format is wrong: {key}")
        if key in out:
            raise TopicAttributesError(f"key duplication: {key}")
        out[key] = value
    return out


def alter_attributes(current: dict[str, str] | None, modification: dict[str, str]) -> dict[str, str] | None:
    """Apply ``+k=v`` (set) and ``-k`` (remove) to a topic's current attributes."""
    result = dict(current or {})
    for key, value in modification.items():
        if key.startswith("+"):
            result[key[1:]] = value
        elif key.startswith("-"):
            result.pop(key[1:], None)
    return result or None


class AdminBrokerProcessor:
    """``AdminBrokerProcessor(...collaborators)``; ``await process_request(conn, request)``."""

    request_codes = (
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.GET_ALL_TOPIC_CONFIG,
        RequestCode.GET_TOPIC_CONFIG,
        RequestCode.GET_MAX_OFFSET,
        RequestCode.GET_MIN_OFFSET,
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
        RequestCode.GET_EARLIEST_MSG_STORETIME,
        RequestCode.LOCK_BATCH_MQ,
        RequestCode.UNLOCK_BATCH_MQ,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        RequestCode.GET_BROKER_CONFIG,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_EXPIRED_COMMITLOG,
        *UNSUPPORTED,
    )

    def __init__(
        self,
        broker_config: BrokerConfig,
        message_store: MessageStore,
        topic_config_manager: TopicConfigManager,
        subscription_group_manager: SubscriptionGroupManager,
        rebalance_lock_manager: RebalanceLockManager,
        register_broker_all: Callable[[], None],
        consumer_offset_manager: ConsumerOffsetManager | None = None,
        configuration: BrokerConfiguration | None = None,
    ) -> None:
        self.broker_config = broker_config
        self.message_store = message_store
        self.topic_config_manager = topic_config_manager
        self.subscription_group_manager = subscription_group_manager
        self.rebalance_lock_manager = rebalance_lock_manager
        self.register_broker_all = register_broker_all  # re-register with the name servers soon (coalesced)
        self.consumer_offset_manager = consumer_offset_manager
        self.configuration = configuration
        self._handlers = {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_and_create_subscription_group,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            RequestCode.GET_TOPIC_CONFIG: self.get_topic_config,
            RequestCode.GET_MAX_OFFSET: self.get_max_offset,
            RequestCode.GET_MIN_OFFSET: self.get_min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset_by_timestamp,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.get_earliest_msg_storetime,
            RequestCode.LOCK_BATCH_MQ: self.lock_batch_mq,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch_mq,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_subscription_group,
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commit_log,
        }

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        handler = self._handlers.get(request.code)  # type: ignore[call-overload]
        if handler is None and request.code in UNSUPPORTED:
            return RemotingCommand.response_to(
                request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=UNSUPPORTED[request.code]
            )
        if handler is None:
            return RemotingCommand.response_to(
                request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {request.code} not supported"
            )
        return handler(conn, request)

    # --- topics and groups -----------------------------------------------------------------------------------
    def update_and_create_topic(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        if self.broker_config.is_slave:
            return _error(request, SLAVE_REMARK)
        header = decode_header(CreateTopicRequestHeader, request.ext_fields)
        topic = header.topic
        log.info("updateAndCreateTopic %s called by %s", clip(topic), conn.remote_address)
        reason = validate_topic(topic)
        if reason is not None:
            return _error(request, reason)
        if is_system_topic(topic):
            return _error(request, f"The topic[{topic}] is conflict with system topic.")
        if header.readQueueNums < 0 or header.writeQueueNums < 0:
            return _error(
                request,
                f"readQueueNums ({header.readQueueNums}) and writeQueueNums "
                f"({header.writeQueueNums}) must not be negative",
            )
        manager = self.topic_config_manager
        current: TopicConfig | None = manager.select_topic_config(topic)
        try:
            attributes = alter_attributes(current.attributes if current else None, parse_attributes(header.attributes))
        except TopicAttributesError as e:
            return _error(request, str(e))
        config = TopicConfig(
            topic_name=topic,
            read_queue_nums=header.readQueueNums,
            write_queue_nums=header.writeQueueNums,
            perm=header.perm,
            topic_filter_type=header.topicFilterType or "SINGLE_TAG",
            topic_sys_flag=header.topicSysFlag or 0,
            order=bool(header.order),
            attributes=attributes,
        )
        if config == current:  # idempotent (5.x): nothing to store or announce
            return RemotingCommand.response_to(request, ResponseCode.SUCCESS)
        manager.update_topic_config(config)
        self.register_broker_all()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def update_and_create_subscription_group(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        if self.broker_config.is_slave:
            return _error(request, SLAVE_REMARK)
        if not request.body:
            return _error(request, "the request has no body (SubscriptionGroupConfig JSON expected)")
        try:
            doc = fastjson.loads(request.body, int_keys=False, fallback_max=FASTJSON_FALLBACK_MAX)
            config = SubscriptionGroupConfig.from_json_dict(doc)
        except (ValueError, KeyError, TypeError, RecursionError) as e:
            return _error(request, f"the body is not a SubscriptionGroupConfig: {type(e).__name__}: {e}")
        reason = validate_group(config.group_name)
        if reason is not None:
            return _error(request, reason)
        log.info("updateAndCreateSubscriptionGroup %s called by %s", config.group_name, conn.remote_address)
        self.subscription_group_manager.update_subscription_group_config(config)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def delete_topic(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        if self.broker_config.is_slave:
            return _error(request, SLAVE_REMARK)
        topic = decode_header(DeleteTopicRequestHeader, request.ext_fields).topic
        log.info("deleteTopic %s called by %s", clip(topic), conn.remote_address)
        reason = validate_topic(topic)
        if reason is not None:
            return _error(request, reason)
        if is_system_topic(topic):
            return _error(request, f"The topic[{topic}] is conflict with system topic.")
        self.topic_config_manager.delete_topic_config(topic)
        self.register_broker_all()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def delete_subscription_group(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        if self.broker_config.is_slave:
            return _error(request, SLAVE_REMARK)
        h = decode_header(DeleteSubscriptionGroupRequestHeader, request.ext_fields)
        log.info("deleteSubscriptionGroup %s called by %s", clip(h.groupName), conn.remote_address)
        self.subscription_group_manager.delete_subscription_group_config(h.groupName)
        if h.removeOffset and self.consumer_offset_manager is not None:
            self.consumer_offset_manager.remove_offset(h.groupName)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    # --- the store -------------------------------------------------------------------------------------------
    def delete_expired_commit_log(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """4.9 ``deleteExpiredCommitLog``: the store's next clean passes delete expired files at any hour."""
        log.warning("invoke deleteExpiredCommitLog start (from %s).", conn.remote_address)
        self.message_store.execute_delete_files_manually()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    # --- broker configuration --------------------------------------------------------------------------------
    def get_broker_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        if self.configuration is None:
            return _error(request, "this broker has no configuration to report")
        version = fastjson.dumps(self.configuration.data_version.to_json_dict())
        return RemotingCommand.response_to(
            request,
            ResponseCode.SUCCESS,
            body=self.configuration.all_configs_format_string().encode("utf-8"),
            ext_fields=encode_header(GetBrokerConfigResponseHeader(version=version)),
        )

    def update_broker_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        if self.configuration is None:
            return _error(request, "this broker has no configuration to update")
        log.info("updateBrokerConfig called by %s", conn.remote_address)
        if not request.body:
            return RemotingCommand.response_to(request, ResponseCode.SUCCESS)
        if len(request.body) > MAX_UPDATE_BODY:
            return _refused(request, f"the update is {len(request.body)} bytes; at most {MAX_UPDATE_BODY}")
        try:
            props = parse_properties(bytes(request.body).decode("utf-8"))
        except UnicodeDecodeError as e:
            return _error(request, f"string2Properties error: {e}")
        persisted = dict(self.configuration.updated)
        try:
            previous = self.configuration.update(props)
        except ConfigRefused as e:
            log.warning("updateBrokerConfig from %s refused: %s", conn.remote_address, str(e)[:500])
            return _refused(request, f"Can not update config: {e}")
        if not self.configuration.persist():
            self.configuration.revert(previous, persisted)
            return _error(request, "the update could not be persisted (see the broker's log); nothing changed")
        if "brokerPermission" in previous:
            self.topic_config_manager.data_version.next_version()
            self.register_broker_all()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def get_all_topic_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        content = self.topic_config_manager.encode(False)
        if not content:
            return _error(request, "No topic in this broker")
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=content.encode("utf-8"))

    def get_topic_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """5.x GET_TOPIC_CONFIG: the topic's TopicConfigAndQueueMapping JSON. ``mappingDetail`` (static topics, asked
        for with ``lo``) is absent: rmq_core has no logic-queue mappings, and fastjson leaves a null field out."""
        topic = decode_header(GetTopicConfigRequestHeader, request.ext_fields).topic
        config = self.topic_config_manager.select_topic_config(topic)
        if config is None:
            return RemotingCommand.response_to(
                request, ResponseCode.TOPIC_NOT_EXIST, remark=f"No topic in this broker. topic: {clip(topic)}"
            )
        body = fastjson.dumps(topic_config_json(config)).encode("utf-8")
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    # --- offsets ---------------------------------------------------------------------------------------------
    def get_max_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetMaxOffsetRequestHeader, request.ext_fields)
        return _offset(request, self.message_store.get_max_offset_in_queue(h.topic, h.queueId))

    def get_min_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetMinOffsetRequestHeader, request.ext_fields)
        return _offset(request, self.message_store.get_min_offset_in_queue(h.topic, h.queueId))

    def search_offset_by_timestamp(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(SearchOffsetRequestHeader, request.ext_fields)
        return _offset(request, self.message_store.get_offset_in_queue_by_time(h.topic, h.queueId, h.timestamp))

    def get_earliest_msg_storetime(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetEarliestMsgStoretimeRequestHeader, request.ext_fields)
        timestamp = self.message_store.get_earliest_message_time(h.topic, h.queueId)
        return RemotingCommand.response_to(
            request,
            ResponseCode.SUCCESS,
            ext_fields=encode_header(GetEarliestMsgStoretimeResponseHeader(timestamp=timestamp)),
        )

    # --- ordered-consumption locks ---------------------------------------------------------------------------
    def lock_batch_mq(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        body = _decode_body(LockBatchRequestBody, request)
        if isinstance(body, str):
            return _error(request, body)
        locked = self.rebalance_lock_manager.try_lock_batch(body.consumer_group, set(body.mq_set), body.client_id)
        response_body = LockBatchResponseBody(lock_ok_mq_set=set(locked))
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=response_body.encode())

    def unlock_batch_mq(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        body = _decode_body(UnlockBatchRequestBody, request)
        if isinstance(body, str):
            return _error(request, body)
        self.rebalance_lock_manager.unlock_batch(body.consumer_group, set(body.mq_set), body.client_id)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)


def _decode_body(cls: Any, request: RemotingCommand) -> Any:
    """The decoded body, or the reason it could not be decoded."""
    if not request.body:
        return f"the request has no body ({cls.__name__} expected)"
    try:
        body = cls.decode(request.body)
    except ValueError as e:
        return f"the body is not a {cls.__name__}: {type(e).__name__}: {e}"
    if not body.consumer_group or not body.client_id:
        return f"the {cls.__name__} needs consumerGroup and clientId"
    return body


def _error(request: RemotingCommand, remark: str) -> RemotingCommand:
    return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark=remark)


def _refused(request: RemotingCommand, remark: str) -> RemotingCommand:
    return RemotingCommand.response_to(request, ResponseCode.NO_PERMISSION, remark=remark)


def _offset(request: RemotingCommand, offset: int) -> RemotingCommand:
    return RemotingCommand.response_to(
        request, ResponseCode.SUCCESS, ext_fields=encode_header(OffsetResponseHeader(offset=offset))
    )
