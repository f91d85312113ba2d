"""PullMessageProcessor: PULL_MESSAGE (11), RocketMQ 4.9's broker/processor/PullMessageProcessor.java#processRequest
step by step, in its order, and LITE_PULL_MESSAGE (361) (5.x's lite pull consumers: one more check,
``lite_pull_message_enable``).

Owns the pull's 13 steps (permissions, group, topic, queue, subscription and filter checks; ``get_message``; the
status → response code table; hooks; statistics; parking with the PullRequestHoldService; OffsetMovedEvent; the
client's commit offset) and ``execute_request_when_wakeup``; a few deliberate deviations from 4.9.
Invariants: every response echoes the request's opaque; a request is either answered once or parked (None).
Thread-safety: runs on the broker loop. The processing itself is synchronous (store calls are inline, as the
threading model says), so a wake-up or a shutdown can answer a parked pull without awaiting.
Details (the steps, the deviations): docs/BROKER_DESIGN.md, 'Pull requests'.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rmq_core.broker.consumer_filter_manager import ConsumerFilterManager
from rmq_core.broker.filter.expression_message_filter import (
    ExpressionForRetryMessageFilter,
    ExpressionMessageFilter,
)
from rmq_core.broker.longpolling.pull_request_hold_service import PullRequest
from rmq_core.broker.processor.pull_plain_fast_path import NOT_PLAIN, NotPlain, PlainPullFastPath, Verdicts
from rmq_core.broker.stats.broker_stats_manager import (
    COMMERCIAL_OWNER,
    SIZE_PER_COUNT,
    ConsumeMessageContext,
    ConsumeMessageHook,
    StatsType,
)
from rmq_core.common import perm_name, sys_flag
from rmq_core.common.clock import now_ms
from rmq_core.common.mix_all import MASTER_ID, RMQ_SYS_OFFSET_MOVED_EVENT
from rmq_core.errors import StoreError
from rmq_core.filter.message_selector import ExpressionType
from rmq_core.filter.subscription_data import SubscriptionData, build_subscription_data
from rmq_core.format.message import walk_records
from rmq_core.message import PROPERTY_DELAY_TIME_LEVEL, Message
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RPC_TYPE_RESPONSE, RemotingCommand
from rmq_core.remoting.header import (
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    decode_header,
    encode_header,
)
from rmq_core.store import GetMessageResult
from rmq_core.store_status import GetMessageStatus

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.client.consumer_manager import ConsumerManager
    from rmq_core.broker.consumer_offset_manager import ConsumerOffsetManager
    from rmq_core.broker.longpolling.pull_request_hold_service import PullRequestHoldService
    from rmq_core.broker.stats.broker_stats_manager import BrokerStatsManager
    from rmq_core.broker.subscription_group_manager import SubscriptionGroupManager
    from rmq_core.broker.topic_config_manager import TopicConfigManager
    from rmq_core.remoting.connection import Connection
    from rmq_core.store import MessageStore

log = logging.getLogger(__name__)

# FAQUrl (common/help/FAQUrl.java)
FAQ_URL = "http://rocketmq.apache.org/docs/faq/"
APPLY_TOPIC_URL = FAQ_URL
SUBSCRIPTION_GROUP_NOT_EXIST_URL = FAQ_URL
SAME_GROUP_DIFFERENT_TOPIC_URL = FAQ_URL


def suggest_todo(url: str) -> str:
    """FAQUrl.suggestTodo."""
    return f"\nSee {url} for further details."


BROADCASTING = "BROADCASTING"
SLAVE = "SLAVE"


def _enum_name(v: Any) -> str:
    return str(getattr(v, "name", None) or getattr(v, "value", None) or v)


def filter_api_build(topic: str, sub_string: str | None, expression_type: str | None) -> SubscriptionData:
    """FilterAPI.build: TAG (or no type) → FilterAPI.buildSubscriptionData; another type needs an expression."""
    if expression_type is None or ExpressionType.is_tag_type(expression_type):
        return build_subscription_data(topic, sub_string)
    if sub_string is None or len(sub_string) < 1:
        raise ValueError(f"Expression can't be null! {expression_type}")
    return SubscriptionData(topic, sub_string=sub_string, expression_type=expression_type)


def msg_count_for_commercial(body: bytes) -> int:
    """GetMessageResult.getMsgCount4Commercial: Σ ceil(record size / 64 KiB) over the records of a pull body."""
    return sum(math.ceil(size / SIZE_PER_COUNT) for _pos, size in walk_records(body))


def encode_offset_moved_event(
    consumer_group: str, topic: str, broker_name: str, queue_id: int, offset_request: int, offset_new: int
) -> bytes:
    """OffsetMovedEvent#encode as fastjson writes it: fields in alphabetical order, the MessageQueue nested."""
    doc = {
        "consumerGroup": consumer_group,
        "messageQueue": {"brokerName": broker_name, "queueId": queue_id, "topic": topic},
        "offsetNew": offset_new,
        "offsetRequest": offset_request,
    }
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class PullMessageProcessor:
    """``PullMessageProcessor(...collaborators)``; ``await process_request(conn, request)``, or
    ``process_batch(conn, requests)`` for a run of them."""

    def __init__(
        self,
        broker_config: BrokerConfig,
        broker_addr: str,
        message_store: MessageStore,
        pull_request_hold_service: PullRequestHoldService,
        subscription_group_manager: SubscriptionGroupManager,
        topic_config_manager: TopicConfigManager,
        consumer_manager: ConsumerManager,
        consumer_filter_manager: ConsumerFilterManager,
        consumer_offset_manager: ConsumerOffsetManager,
        broker_stats_manager: BrokerStatsManager,
        now_ms: Callable[[], int] = now_ms,
    ) -> None:
        self.broker_config = broker_config
        self.broker_addr = broker_addr  # host:port of this broker, the born host of the offset-moved events it stores
        self.message_store = message_store
        self.pull_request_hold_service = pull_request_hold_service
        self.subscription_group_manager = subscription_group_manager
        self.topic_config_manager = topic_config_manager
        self.consumer_manager = consumer_manager
        self.consumer_filter_manager = consumer_filter_manager
        self.consumer_offset_manager = consumer_offset_manager
        self.broker_stats_manager = broker_stats_manager
        self.now_ms = now_ms
        self.plain_pull_fast_path: PlainPullFastPath | None = PlainPullFastPath(self)

    # --- entry points ------------------------------------------------------------------------------------------
    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        return self._process_request(conn, request, True)

    def process_batch(self, conn: Connection, requests: list[RemotingCommand]) -> list[RemotingCommand | bytes | None]:
        """The pulls read together from one connection (the transport's batch path: no task, coroutine or write per
        pull), each answered as ``process_request`` answers it alone, in order: None for a parked pull, and
        SYSTEM_ERROR with its text for one that fails (as the transport answers a failing processor)."""
        answers: list[RemotingCommand | bytes | None] = []
        # the plain pulls on their fast path (docs/FAST_PATHS.md P2), the others here; its checks once per key a run
        fast = self.plain_pull_fast_path  # None: every pull on the general path
        plain = None if fast is None or log.isEnabledFor(logging.DEBUG) else fast.answer
        verdicts: Verdicts = {}
        for request in requests:
            try:
                answer = NOT_PLAIN if plain is None else plain(conn, request, verdicts)
                if isinstance(answer, NotPlain):
                    answer = self._process_request(conn, request, True)
                answers.append(answer)
            except Exception as e:
                log.exception("processor for code %d failed", request.code)
                remark = f"{type(e).__name__}: {e}"
                answers.append(RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark=remark))
        return answers

    async def execute_request_when_wakeup(self, conn: Connection, request: RemotingCommand) -> None:
        """Re-run a parked pull with suspension disallowed and write the response on ``conn``."""
        self.run_request_when_wakeup(conn, request)

    def run_request_when_wakeup(self, conn: Connection, request: RemotingCommand) -> None:
        """The synchronous body of ``execute_request_when_wakeup`` (the hold service calls it from loop callbacks).
        A closed connection drops the answer with a log line."""
        try:
            response = self._process_request(conn, request, False)
        except Exception as e:  # answered as the transport answers a failing processor
            log.exception("excuteRequestWhenWakeup run")
            response = RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, f"{type(e).__name__}: {e}")
        if response is None or request.is_oneway:
            return
        response.opaque = request.opaque
        response.flag |= RPC_TYPE_RESPONSE
        if conn.closed:
            log.info("processRequestWrapper response to %s dropped: connection closed", conn.remote_address)
            return
        try:
            conn.send(response)
        except (ConnectionError, OSError, RuntimeError) as e:
            log.error("processRequestWrapper response to %s failed: %s", conn.remote_address, e)

    # --- hooks (Java keeps the list on the processor; here it lives in the BrokerStatsManager) -----------------
    def register_consume_message_hook(self, hook: ConsumeMessageHook) -> None:
        self.broker_stats_manager.register_consume_message_hook(hook)

    def has_consume_message_hook(self) -> bool:
        return bool(self.broker_stats_manager.has_consume_message_hook())

    # --- processRequest ----------------------------------------------------------------------------------------
    def _process_request(
        self, conn: Connection, request: RemotingCommand, broker_allow_suspend: bool
    ) -> RemotingCommand | None:
        cfg = self.broker_config
        begin_time_mills = self.now_ms()
        request_header = decode_header(PullMessageRequestHeader, request.ext_fields)
        response_header = PullMessageResponseHeader()
        group, topic, queue_id = request_header.consumerGroup, request_header.topic, request_header.queueId
        client_addr = conn.remote_address

        log.debug("receive PullMessage request command, %s", request)

        def answer(code: int, remark: str | None) -> RemotingCommand:
            return RemotingCommand.response_to(request, code, remark)

        if not perm_name.is_readable(cfg.broker_permission):
            return answer(ResponseCode.NO_PERMISSION, f"the broker[{cfg.broker_ip1}] pulling message is forbidden")
        if request.code == RequestCode.LITE_PULL_MESSAGE and not cfg.lite_pull_message_enable:
            return answer(
                ResponseCode.NO_PERMISSION, f"the broker[{cfg.broker_ip1}] for lite pull consumer is forbidden"
            )

        subscription_group_config = self.subscription_group_manager.find_subscription_group_config(group)
        if subscription_group_config is None:
            return answer(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{group}] does not exist, {suggest_todo(SUBSCRIPTION_GROUP_NOT_EXIST_URL)}",
            )

        if not subscription_group_config.consume_enable:
            return answer(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")

        has_suspend_flag = sys_flag.has_suspend_flag(request_header.sysFlag)
        has_commit_offset_flag = sys_flag.has_commit_offset_flag(request_header.sysFlag)
        has_subscription_flag = sys_flag.has_subscription_flag(request_header.sysFlag)

        suspend_timeout_millis_long = request_header.suspendTimeoutMillis if has_suspend_flag else 0

        topic_config = self.topic_config_manager.select_topic_config(topic)
        if topic_config is None:
            log.error("the topic %s not exist, consumer: %s", topic, client_addr)
            return answer(
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{topic}] not exist, apply first please! {suggest_todo(APPLY_TOPIC_URL)}",
            )

        if not perm_name.is_readable(topic_config.perm):
            return answer(ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden")

        if queue_id < 0 or queue_id >= topic_config.read_queue_nums:
            error_info = (
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                f"[{topic_config.read_queue_nums}] consumer:[/{client_addr}]"
            )
            log.warning(error_info)
            return answer(ResponseCode.SYSTEM_ERROR, error_info)

        subscription_data: SubscriptionData | None = None
        consumer_filter_data: Any = None
        if has_subscription_flag:
            try:
                subscription_data = self.request_subscription(
                    topic, request_header.subscription, request_header.expressionType
                )
                if not ExpressionType.is_tag_type(subscription_data.expression_type):
                    consumer_filter_data = ConsumerFilterManager.build(
                        topic,
                        group,
                        subscription_data.sub_string,  # the request's, checked non-empty by filter_api_build
                        subscription_data.expression_type,
                        request_header.subVersion,
                    )
                    if consumer_filter_data is None:  # Java: assert consumerFilterData != null
                        raise ValueError(f"cannot compile {request_header.subscription!r}")
            except ValueError:  # FilterParseError is a ValueError
                log.warning(
                    "Parse the consumer's subscription[%s] failed, group: %s", request_header.subscription, group
                )
                return answer(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
        else:
            consumer_group_info = self.consumer_manager.get_consumer_group_info(group)
            if consumer_group_info is None:
                log.warning("the consumer's group info not exist, group: %s", group)
                return answer(
                    ResponseCode.SUBSCRIPTION_NOT_EXIST,
                    "the consumer's group info not exist" + suggest_todo(SAME_GROUP_DIFFERENT_TOPIC_URL),
                )

            if (
                not subscription_group_config.consume_broadcast_enable
                and _enum_name(consumer_group_info.message_model) == BROADCASTING
            ):
                return answer(
                    ResponseCode.NO_PERMISSION, f"the consumer group[{group}] can not consume by broadcast way"
                )

            subscription_data = consumer_group_info.find_subscription_data(topic)
            if subscription_data is None:
                log.warning("the consumer's subscription not exist, group: %s, topic:%s", group, topic)
                return answer(
                    ResponseCode.SUBSCRIPTION_NOT_EXIST,
                    "the consumer's subscription not exist" + suggest_todo(SAME_GROUP_DIFFERENT_TOPIC_URL),
                )

            if subscription_data.sub_version < request_header.subVersion:
                log.warning(
                    "The broker's subscription is not latest, group: %s %s", group, subscription_data.sub_string
                )
                return answer(ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
            if not ExpressionType.is_tag_type(subscription_data.expression_type):
                consumer_filter_data = self.consumer_filter_manager.get(topic, group)
                if consumer_filter_data is None:
                    return answer(
                        ResponseCode.FILTER_DATA_NOT_EXIST,
                        "The broker's consumer filter data is not exist!Your expression may be wrong!",
                    )
                if consumer_filter_data.client_version < request_header.subVersion:
                    log.warning(
                        "The broker's consumer filter data is not latest, group: %s, topic: %s, serverV: %s,"
                        " clientV: %s",
                        group,
                        topic,
                        consumer_filter_data.client_version,
                        request_header.subVersion,
                    )
                    return answer(ResponseCode.FILTER_DATA_NOT_LATEST, "the consumer's consumer filter data not latest")

        assert subscription_data is not None
        if not ExpressionType.is_tag_type(subscription_data.expression_type) and not cfg.enable_property_filter:
            return answer(
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {subscription_data.expression_type}",
            )

        message_filter = self.message_filter(subscription_data, consumer_filter_data)

        get_message_result: GetMessageResult | None
        try:
            get_message_result = self.message_store.get_message(
                group,
                topic,
                queue_id,
                request_header.queueOffset,
                request_header.maxMsgNums,
                message_filter.store_message_filter,
                property_filter=message_filter.store_property_filter,
            )
        except StoreError as e:  # Java's getMessage returns null when the store is shut down
            log.warning("getMessage failed: %s", e)
            get_message_result = None

        response: RemotingCommand | None
        if get_message_result is not None:
            response = self._answer_by_result(
                conn,
                request,
                request_header,
                response_header,
                get_message_result,
                subscription_group_config,
                subscription_data,
                message_filter,
                broker_allow_suspend,
                has_suspend_flag,
                suspend_timeout_millis_long,
                begin_time_mills,
            )
        else:
            response = answer(ResponseCode.SYSTEM_ERROR, "store getMessage return null")

        store_offset_enable = broker_allow_suspend
        store_offset_enable = store_offset_enable and has_commit_offset_flag
        store_offset_enable = store_offset_enable and cfg.broker_role != SLAVE
        if store_offset_enable:
            self.consumer_offset_manager.commit_offset(client_addr, group, topic, queue_id, request_header.commitOffset)
        return response

    def _answer_by_result(
        self,
        conn: Connection,
        request: RemotingCommand,
        request_header: PullMessageRequestHeader,
        response_header: PullMessageResponseHeader,
        result: GetMessageResult,
        subscription_group_config: Any,
        subscription_data: SubscriptionData,
        message_filter: ExpressionMessageFilter,
        broker_allow_suspend: bool,
        has_suspend_flag: bool,
        suspend_timeout_millis_long: int,
        begin_time_mills: int,
    ) -> RemotingCommand | None:
        cfg = self.broker_config
        group, topic, queue_id = request_header.consumerGroup, request_header.topic, request_header.queueId
        status = result.status
        remark = status.name
        response_header.nextBeginOffset = result.next_begin_offset
        response_header.minOffset = result.min_offset
        response_header.maxOffset = result.max_offset

        if result.suggest_pulling_from_slave:
            response_header.suggestWhichBrokerId = subscription_group_config.which_broker_when_consume_slowly
        else:
            response_header.suggestWhichBrokerId = MASTER_ID

        code: int = ResponseCode.SYSTEM_ERROR
        if cfg.broker_role == SLAVE and not cfg.slave_read_enable:
            code = ResponseCode.PULL_RETRY_IMMEDIATELY  # overwritten by the status table below, as in 4.9
            response_header.suggestWhichBrokerId = MASTER_ID

        if cfg.slave_read_enable:
            if result.suggest_pulling_from_slave:  # consume too slow, redirect to another machine
                response_header.suggestWhichBrokerId = subscription_group_config.which_broker_when_consume_slowly
            else:  # consume ok
                response_header.suggestWhichBrokerId = subscription_group_config.broker_id
        else:
            response_header.suggestWhichBrokerId = MASTER_ID

        if status == GetMessageStatus.FOUND:
            code = ResponseCode.SUCCESS
        elif status == GetMessageStatus.MESSAGE_WAS_REMOVING:
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
        elif status in (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE):
            if request_header.queueOffset != 0:
                code = ResponseCode.PULL_OFFSET_MOVED
                log.info(
                    "the broker store no queue data, fix the request offset %d to %d, Topic: %s QueueId: %d "
                    "Consumer Group: %s",
                    request_header.queueOffset,
                    result.next_begin_offset,
                    topic,
                    queue_id,
                    group,
                )
            else:
                code = ResponseCode.PULL_NOT_FOUND
        elif status == GetMessageStatus.NO_MATCHED_MESSAGE:
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
        elif status == GetMessageStatus.OFFSET_FOUND_NULL:
            code = ResponseCode.PULL_NOT_FOUND
        elif status == GetMessageStatus.OFFSET_OVERFLOW_BADLY:
            code = ResponseCode.PULL_OFFSET_MOVED
            log.info(
                "the request offset: %d over flow badly, broker max offset: %d, consumer: /%s",
                request_header.queueOffset,
                result.max_offset,
                conn.remote_address,
            )
        elif status == GetMessageStatus.OFFSET_OVERFLOW_ONE:
            code = ResponseCode.PULL_NOT_FOUND
        elif status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_RESET):
            code = ResponseCode.PULL_OFFSET_MOVED
            log.info(
                "the request offset too small. group=%s, topic=%s, requestOffset=%d, brokerMinOffset=%d, clientIp=/%s",
                group,
                topic,
                request_header.queueOffset,
                result.min_offset,
                conn.remote_address,
            )
        else:  # pragma: no cover - every GetMessageStatus is handled above
            raise AssertionError(f"unknown GetMessageStatus {status!r}")

        stats = self.broker_stats_manager
        if stats.has_consume_message_hook():
            context = ConsumeMessageContext(consumer_group=group, topic=topic, queue_id=queue_id)
            owner = request.ext_fields.get(COMMERCIAL_OWNER)
            if code == ResponseCode.SUCCESS:
                commercial_base_count = cfg.commercial_base_count
                context.commercial_rcv_stats = StatsType.RCV_SUCCESS
                context.commercial_rcv_times = msg_count_for_commercial(result.body) * commercial_base_count
                context.commercial_rcv_size = result.buffer_total_size
                context.commercial_owner = owner
            elif code == ResponseCode.PULL_NOT_FOUND:
                if not broker_allow_suspend:
                    context.commercial_rcv_stats = StatsType.RCV_EPOLLS
                    context.commercial_rcv_times = 1
                    context.commercial_owner = owner
            elif code in (ResponseCode.PULL_RETRY_IMMEDIATELY, ResponseCode.PULL_OFFSET_MOVED):
                context.commercial_rcv_stats = StatsType.RCV_EPOLLS
                context.commercial_rcv_times = 1
                context.commercial_owner = owner
            stats.execute_consume_message_hook_before(context)

        body: bytes | None = None
        if code == ResponseCode.SUCCESS:
            body = result.body
            # incGroupGetNums, incGroupGetSize, incBrokerGetNums; with transferMsgByHeap readGetMessageResult's
            # recordDiskFallBehindTime (the last record's store time) and incGroupGetLatency: one call
            fall_behind = latency = None
            if cfg.transfer_msg_by_heap:
                now = self.now_ms()
                fall_behind, latency = now - result.last_store_timestamp(), now - begin_time_mills
            stats.inc_get(group, topic, queue_id, result.message_count, result.buffer_total_size, fall_behind, latency)
        elif code == ResponseCode.PULL_NOT_FOUND:
            if broker_allow_suspend and has_suspend_flag:
                polling_time_mills = suspend_timeout_millis_long
                if not cfg.long_polling_enable:
                    polling_time_mills = cfg.short_polling_time_mills
                pull_request = PullRequest(
                    request,
                    conn,
                    polling_time_mills,
                    self.now_ms(),
                    request_header.queueOffset,
                    subscription_data,
                    message_filter,
                )
                self.pull_request_hold_service.suspend_pull_request(topic, queue_id, pull_request)
                return None
        elif code == ResponseCode.PULL_OFFSET_MOVED:
            if cfg.broker_role != SLAVE or cfg.offset_check_in_slave:
                self.generate_offset_moved_event(
                    group, topic, queue_id, request_header.queueOffset, result.next_begin_offset
                )
                log.warning(
                    "PULL_OFFSET_MOVED:correction offset. topic=%s, groupId=%s, requestOffset=%d, "
                    "newOffset=%d, suggestBrokerId=%d",
                    topic,
                    group,
                    request_header.queueOffset,
                    result.next_begin_offset,
                    response_header.suggestWhichBrokerId,
                )
            else:
                response_header.suggestWhichBrokerId = subscription_group_config.broker_id
                code = ResponseCode.PULL_RETRY_IMMEDIATELY
                log.warning(
                    "PULL_OFFSET_MOVED:none correction. topic=%s, groupId=%s, requestOffset=%d, suggestBrokerId=%d",
                    topic,
                    group,
                    request_header.queueOffset,
                    response_header.suggestWhichBrokerId,
                )

        return RemotingCommand.response_to(request, code, remark, encode_header(response_header), body)

    def request_subscription(self, topic: str, sub_string: str | None, expression_type: str | None) -> SubscriptionData:
        """The subscription a pull with the SUBSCRIPTION flag carries (FilterAPI.build; ValueError: a bad one)."""
        return filter_api_build(topic, sub_string, expression_type)

    def message_filter(self, subscription_data: SubscriptionData, consumer_filter_data: Any) -> ExpressionMessageFilter:
        """The pull's MessageFilter: with ``filter_support_retry`` the one that also filters retry topics."""
        if self.broker_config.filter_support_retry:
            return ExpressionForRetryMessageFilter(
                subscription_data, consumer_filter_data, self.consumer_filter_manager
            )
        return ExpressionMessageFilter(subscription_data, consumer_filter_data, self.consumer_filter_manager)

    def generate_offset_moved_event(
        self, consumer_group: str, topic: str, queue_id: int, offset_request: int, offset_new: int
    ) -> None:
        """PullMessageProcessor#generateOffsetMovedEvent: one message to ``OFFSET_MOVED_EVENT`` queue 0, tags and
        keys = the group, body = the OffsetMovedEvent JSON. A failure is logged, never answered."""
        broker_name = self.broker_config.broker_name
        try:
            body = encode_offset_moved_event(consumer_group, topic, broker_name, queue_id, offset_request, offset_new)
            msg = Message(RMQ_SYS_OFFSET_MOVED_EVENT, body, tags=consumer_group)
            msg.put_property(PROPERTY_DELAY_TIME_LEVEL, "0")  # setDelayTimeLevel(0) writes DELAY=0
            msg.keys = consumer_group
            host, _, port = self.broker_addr.rpartition(":")
            result = self.message_store.put_message(msg, 0, (host, int(port)), sys_flag=0, reconsume_times=0)
            if not result.ok:
                log.warning("generateOffsetMovedEvent put failed: %s", result.status.name)
        except Exception:
            log.warning(
                "generateOffsetMovedEvent Exception, OffsetMovedEvent [consumerGroup=%s, messageQueue="
                "MessageQueue [topic=%s, brokerName=%s, queueId=%d], offsetRequest=%d, offsetNew=%d]",
                consumer_group,
                topic,
                broker_name,
                queue_id,
                offset_request,
                offset_new,
                exc_info=True,
            )
