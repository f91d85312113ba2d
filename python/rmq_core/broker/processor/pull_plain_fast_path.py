"""PlainPullFastPath: the common pull of a batch run (``PullMessageProcessor.process_batch``) answered without the
header dataclass, the per-pull checks, the filter objects or the answer header object. It must answer what
``PullMessageProcessor._process_request`` answers, byte for byte, with the same side effects (store reads, stats,
commit offsets, parked pulls, offset-moved events): tests/broker/test_pull_plain_parity.py; every fast path:
docs/FAST_PATHS.md (P2). Thread-safety: the broker's loop, within one ``process_batch`` call.

The gate, all of it here: a pull is plain when
1. its header's fields read as the general decoder reads them (strings short enough to be in their Java range);
2. its key (code, group, topic, subscription flag, subscription, expression type) passes once per run
   (``_verdict``): the broker and topic readable, LITE_PULL allowed, the group found and consuming, and a subscription
   that filters nothing (``*`` or tag-less TAG, no class filter; without the SUBSCRIPTION flag the heartbeat's, of a
   CLUSTERING group; a retry topic only without ``filter_support_retry``);
3. its queue id is in the topic's read queues and its subVersion not newer than the broker's subscription.
A plain pull's store read is the general path's (no filters); a FOUND answer without consume-message hooks is built
here, every other result goes to the general ``_answer_by_result`` with the objects it takes. A pull that is not
plain goes to the general path whole (``NOT_PLAIN``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from rmq_core.common import perm_name
from rmq_core.common.mix_all import MASTER_ID, RETRY_GROUP_TOPIC_PREFIX
from rmq_core.common.sys_flag import FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION, FLAG_SUSPEND
from rmq_core.errors import StoreError
from rmq_core.filter.message_selector import SUB_ALL, ExpressionType
from rmq_core.filter.subscription_data import SubscriptionData
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RPC_TYPE_RESPONSE, RemotingCommand
from rmq_core.remoting.header import FIELD_RANGES, PullMessageRequestHeader, PullMessageResponseHeader, decode_header
from rmq_core.store_status import GetMessageStatus

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.client.consumer_manager import ConsumerManager
    from rmq_core.broker.consumer_offset_manager import ConsumerOffsetManager
    from rmq_core.broker.filter.expression_message_filter import ExpressionMessageFilter
    from rmq_core.broker.stats.broker_stats_manager import BrokerStatsManager
    from rmq_core.broker.subscription_group_manager import SubscriptionGroupManager
    from rmq_core.broker.topic_config_manager import TopicConfigManager
    from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
    from rmq_core.remoting.connection import Connection
    from rmq_core.store import MessageStore

log = logging.getLogger("rmq_core.broker.processor.pull_message_processor")  # the general path's log

_INT32_CHARS: Final = FIELD_RANGES["int32"][2]  # the general decoder's: shorter texts are within the Java type's range
_LONG_CHARS: Final = FIELD_RANGES["int"][2]
_PULL: Final = int(RequestCode.PULL_MESSAGE)
_LITE_PULL: Final = int(RequestCode.LITE_PULL_MESSAGE)
_SUCCESS: Final = int(ResponseCode.SUCCESS)
_FOUND: Final = GetMessageStatus.FOUND
_FOUND_REMARK: Final = GetMessageStatus.FOUND.name
_SLAVE: Final = "SLAVE"
_CLUSTERING: Final = "CLUSTERING"


class NotPlain:
    """The answer of a pull the fast path leaves to the general path."""


NOT_PLAIN: Final = NotPlain()

# a key's verdict: (read queue nums, the group's config, the heartbeat's subscription or None with the flag)
Verdict = tuple[int, "SubscriptionGroupConfig", SubscriptionData | None]
Verdicts = dict[tuple[int, str, str, int, str | None, str | None], Verdict | None]


class GeneralPullPath(Protocol):
    """What the fast path takes from the path it must equal (``PullMessageProcessor``): its collaborators, its clock
    and the parts of its answer, so that each exists once."""

    broker_config: BrokerConfig
    message_store: MessageStore
    subscription_group_manager: SubscriptionGroupManager
    topic_config_manager: TopicConfigManager
    consumer_manager: ConsumerManager
    consumer_offset_manager: ConsumerOffsetManager
    broker_stats_manager: BrokerStatsManager
    now_ms: Callable[[], int]

    def request_subscription(
        self, topic: str, sub_string: str | None, expression_type: str | None
    ) -> SubscriptionData: ...

    def message_filter(
        self, subscription_data: SubscriptionData, consumer_filter_data: Any
    ) -> ExpressionMessageFilter: ...

    @property
    def _answer_by_result(self) -> Callable[..., RemotingCommand | None]:
        """Its step 10 and after, for a result not answered here."""


class PlainPullFastPath:
    """``PlainPullFastPath(general)``; ``answer(conn, request, verdicts)`` per pull of a run (``verdicts``: a dict
    the run owns, one entry per key)."""

    def __init__(self, general: GeneralPullPath) -> None:
        self.general = general

    def answer(
        self, conn: Connection, request: RemotingCommand, verdicts: Verdicts
    ) -> RemotingCommand | NotPlain | None:
        ext: Mapping[str, str] = request.ext_fields
        get = ext.get
        group, topic = get("consumerGroup"), get("topic")
        q, o, n, f = get("queueId"), get("queueOffset"), get("maxMsgNums"), get("sysFlag")
        c, s, v, b = get("commitOffset"), get("suspendTimeoutMillis"), get("subVersion"), get("maxMsgBytes")
        try:
            if (
                group is None
                or topic is None
                or len(q) >= _INT32_CHARS  # type: ignore[arg-type]  # None: TypeError, not plain
                or len(n) >= _INT32_CHARS  # type: ignore[arg-type]
                or len(f) >= _INT32_CHARS  # type: ignore[arg-type]
                or len(o) >= _LONG_CHARS  # type: ignore[arg-type]
                or len(c) >= _LONG_CHARS  # type: ignore[arg-type]
                or len(s) >= _LONG_CHARS  # type: ignore[arg-type]
                or len(v) >= _LONG_CHARS  # type: ignore[arg-type]
                or (b is not None and len(b) >= _INT32_CHARS)
            ):
                return NOT_PLAIN
            if b is not None:
                int(b)  # read, unused, as the general decoder reads it: a bad one is its HeaderError
            queue_id, offset, max_nums, flag = int(q), int(o), int(n), int(f)  # type: ignore[arg-type]
            commit_offset, suspend_timeout, sub_version = int(c), int(s), int(v)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return NOT_PLAIN
        subscription, expression_type = get("subscription"), get("expressionType")
        key = (request.code, group, topic, flag & FLAG_SUBSCRIPTION, subscription, expression_type)
        verdict = verdicts[key] if key in verdicts else verdicts.setdefault(key, self._verdict(*key))
        if verdict is None:
            return NOT_PLAIN
        read_queue_nums, group_config, heartbeat_subscription = verdict
        if not 0 <= queue_id < read_queue_nums or (
            heartbeat_subscription is not None and heartbeat_subscription.sub_version < sub_version
        ):
            return NOT_PLAIN

        general = self.general
        cfg = general.broker_config
        begin_time_mills = general.now_ms()
        try:
            result = general.message_store.get_message(
                group, topic, queue_id, offset, max_nums, None, property_filter=None
            )
        except StoreError as e:  # as the general path: Java's getMessage returns null when the store is shut down
            log.warning("getMessage failed: %s", e)
            result = None

        response: RemotingCommand | None
        stats = general.broker_stats_manager
        if result is None:
            response = RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, "store getMessage return null")
        elif result.status == _FOUND and not stats.has_consume_message_hook():
            if cfg.slave_read_enable:
                suggest = (
                    group_config.which_broker_when_consume_slowly
                    if result.suggest_pulling_from_slave
                    else group_config.broker_id
                )
            else:
                suggest = MASTER_ID
            fall_behind = latency = None
            if cfg.transfer_msg_by_heap:
                now = general.now_ms()
                fall_behind, latency = now - result.last_store_timestamp(), now - begin_time_mills
            stats.inc_get(group, topic, queue_id, result.message_count, result.buffer_total_size, fall_behind, latency)
            response = RemotingCommand(
                _SUCCESS,
                "JAVA",
                request.version,
                request.opaque,
                RPC_TYPE_RESPONSE,
                _FOUND_REMARK,
                {  # PullMessageResponseHeader's fields in their order, as encode_header writes them
                    "suggestWhichBrokerId": str(suggest),
                    "nextBeginOffset": str(result.next_begin_offset),
                    "minOffset": str(result.min_offset),
                    "maxOffset": str(result.max_offset),
                },
                result.body,
                request.serialize_type,
            )
        else:
            subscription_data = (
                heartbeat_subscription
                if heartbeat_subscription is not None
                else general.request_subscription(topic, subscription, expression_type)
            )
            response = general._answer_by_result(
                conn,
                request,
                decode_header(PullMessageRequestHeader, ext),
                PullMessageResponseHeader(),
                result,
                group_config,
                subscription_data,
                general.message_filter(subscription_data, None),
                True,
                flag & FLAG_SUSPEND == FLAG_SUSPEND,
                suspend_timeout if flag & FLAG_SUSPEND == FLAG_SUSPEND else 0,
                begin_time_mills,
            )

        if flag & FLAG_COMMIT_OFFSET == FLAG_COMMIT_OFFSET and cfg.broker_role != _SLAVE:
            general.consumer_offset_manager.commit_offset(conn.remote_address, group, topic, queue_id, commit_offset)
        return response

    def _verdict(
        self,
        code: int,
        group: str,
        topic: str,
        with_subscription: int,
        subscription: str | None,
        expression_type: str | None,
    ) -> Verdict | None:
        """The key's checks, once per run: its verdict, or None when its pulls are not plain."""
        general = self.general
        cfg = general.broker_config
        if not perm_name.is_readable(cfg.broker_permission):
            return None
        if code != _PULL and not (code == _LITE_PULL and cfg.lite_pull_message_enable):
            return None
        group_config = general.subscription_group_manager.find_subscription_group_config(group)
        if group_config is None or not group_config.consume_enable:
            return None
        topic_config = general.topic_config_manager.select_topic_config(topic)
        if topic_config is None or not perm_name.is_readable(topic_config.perm):
            return None
        if with_subscription:
            if subscription != SUB_ALL or not (expression_type is None or expression_type == ExpressionType.TAG):
                return None
            if cfg.filter_support_retry and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                return None
            return topic_config.read_queue_nums, group_config, None
        info = general.consumer_manager.get_consumer_group_info(group)
        if info is None:
            return None
        model = info.message_model  # only clustering groups: the general path judges broadcasting
        if str(getattr(model, "name", model)) != _CLUSTERING:
            return None
        data = info.find_subscription_data(topic)
        if (
            data is None
            or data.class_filter_mode
            or not ExpressionType.is_tag_type(data.expression_type)
            or not (data.sub_string == SUB_ALL or not data.tags_set)
            or (cfg.filter_support_retry and data.topic.startswith(RETRY_GROUP_TOPIC_PREFIX))
        ):
            return None
        return topic_config.read_queue_nums, group_config, data
