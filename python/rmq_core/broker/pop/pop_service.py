"""PopService: RocketMQ 5's POP consumption on the broker (``PopMessageProcessor``, ``AckMessageProcessor``,
``ChangeInvisibleTimeProcessor``), with a plain API the remoting processors and the gRPC endpoint both call.

What is stored where (docs/POP_DESIGN.md): a pop reads the queue(s) from the group's consumer offset, writes one
checkpoint (CK, ``pop_records``) per queue read to ``rmq_sys_REVIVE_LOG_{cluster}`` queue ``reviveQid`` as a timer
message due at popTime + invisibleTime − 1 s, and advances the consumer offset once the CK is stored. An ACK goes
to the same revive queue, due at popTime + invisibleTime. ``PopReviveService`` matches them and re-puts what was
not acked. FIFO pops (order=True) write no CK: ``ConsumerOrderInfoManager`` blocks the queue instead.
Receipt handles are Apache's (``extra_info``). Invariant: everything here runs on the broker's event loop and a pop's
reads, CK puts and offset commits happen with no await between them (the loop is the queue lock).
"""

from __future__ import annotations

import asyncio
import base64
import enum
import itertools
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rmq_core.broker.pop import extra_info as ei
from rmq_core.broker.pop.pop_inflight_counter import PopInflightCounter
from rmq_core.broker.pop.pop_records import AckMsg, PopCheckPoint, ck_unique_id
from rmq_core.broker.pop.pop_results import AckResult, ChangeInvisibleResult
from rmq_core.broker.timer.timer_message_hook import TimerMessageRefused, transform_timer_message
from rmq_core.common import mix_all
from rmq_core.common.perm_name import is_readable
from rmq_core.filter import ExpressionType, MessageSelector
from rmq_core.filter.subscription_data import build_subscription_data
from rmq_core.message import (
    PROPERTY_FIRST_POP_TIME,
    PROPERTY_POP_CK,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    Message,
    MessageExt,
    decode_messages,
)
from rmq_core.remoting.body.heartbeat import ConsumeType
from rmq_core.remoting.codes import ResponseCode
from rmq_core.store_status import GetMessageStatus, PutMessageStatus

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.client.consumer_manager import ConsumerManager
    from rmq_core.broker.consumer_offset_manager import ConsumerOffsetManager
    from rmq_core.broker.pop.consumer_order_info_manager import ConsumerOrderInfoManager
    from rmq_core.broker.subscription_group_manager import SubscriptionGroupManager
    from rmq_core.broker.timer.timer_message_store import TimerMessageStore
    from rmq_core.broker.topic_config_manager import TopicConfigManager
    from rmq_core.store import MessageStore

log = logging.getLogger(__name__)

MAX_POP_NUMS = 32  # a pop asks for at most this many messages (PopMessageProcessor)
POP_FROM_RETRY_PROBABILITY = 20  # % of pops that read the retry topic first (BrokerConfig.popFromRetryProbability)
CONSUME_INIT_MODE_MIN, CONSUME_INIT_MODE_MAX = 0, 1  # ConsumeInitMode
_STORED = (
    PutMessageStatus.PUT_OK,
    PutMessageStatus.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE,
)
_REREAD = (
    GetMessageStatus.OFFSET_TOO_SMALL,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY,
    GetMessageStatus.OFFSET_FOUND_NULL,
)
_SKIPPED = (
    GetMessageStatus.NO_MATCHED_MESSAGE,
    GetMessageStatus.OFFSET_FOUND_NULL,
    GetMessageStatus.MESSAGE_WAS_REMOVING,
    GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
)


def now_ms() -> int:
    return int(time.time() * 1000)


class PopStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    POLLING_FULL = "POLLING_FULL"
    POLLING_NOT_FOUND = "POLLING_NOT_FOUND"


@dataclass
class PopResult:
    """A pop's answer. ``messages`` carry ``POP_CK`` (their receipt handle) and the requested topic (a retry topic's
    message keeps its stored topic in ``stored_topics``); ``body`` is the records as stored (the remoting answer)."""

    code: int
    remark: str | None
    status: PopStatus
    messages: list[MessageExt] = field(default_factory=list)
    pop_time: int = 0
    invisible_time: int = 0
    revive_qid: int = 0
    rest_num: int = 0
    start_offset_info: str = ""
    msg_offset_info: str = ""
    order_count_info: str | None = None
    body: bytes = b""


class _Refused(Exception):
    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class PopService:
    """``PopService(broker_config, message_store, topic_config_manager, subscription_group_manager,
    consumer_offset_manager, order_info_manager, timer_message_store, store_host)``: ``pop``, ``ack``,
    ``batch_ack``, ``change_invisible_time`` (coroutines / functions on the broker's loop)."""

    def __init__(
        self,
        broker_config: BrokerConfig,
        message_store: MessageStore,
        topic_config_manager: TopicConfigManager,
        subscription_group_manager: SubscriptionGroupManager,
        consumer_offset_manager: ConsumerOffsetManager,
        order_info_manager: ConsumerOrderInfoManager,
        timer_message_store: TimerMessageStore | None,
        store_host: tuple[str, int],
    ) -> None:
        self.broker_config = broker_config
        self.message_store = message_store
        self.topic_config_manager = topic_config_manager
        self.subscription_group_manager = subscription_group_manager
        self.consumer_offset_manager = consumer_offset_manager
        self.order_info_manager = order_info_manager
        self.timer_message_store = timer_message_store
        self.store_host = store_host
        self.revive_topic = ei.revive_topic(broker_config.broker_cluster_name)
        self._ck_counter = itertools.count()
        self._random = random.Random()
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self.consumer_manager: ConsumerManager | None = None  # told who pops (admin's consumer progress), if set
        self.inflight = PopInflightCounter()  # popped, not yet acked or revived, per (group, topic, queue)
        self._reset_offsets: dict[tuple[str, str, int], int] = {}  # admin resets the next pop applies
        message_store.add_arrival_listener(self._on_arrival, active=lambda: bool(self._waiters))

    @property
    def broker_name(self) -> str:
        return self.broker_config.broker_name

    # --- pop -----------------------------------------------------------------------------------------------------
    async def pop(
        self,
        group: str,
        topic: str,
        queue_id: int = -1,
        max_msg_nums: int = MAX_POP_NUMS,
        invisible_time_ms: int = 60_000,
        poll_time_ms: int = 0,
        init_mode: int = CONSUME_INIT_MODE_MAX,
        expression_type: str | None = ExpressionType.TAG,
        expression: str | None = "*",
        order: bool = False,
        attempt_id: str | None = None,
        gone: Callable[[], bool] | None = None,
    ) -> PopResult:
        """Pop up to ``max_msg_nums`` messages (Apache 5.3's rules); with ``poll_time_ms`` > 0, wait up to that long
        for one to arrive. Refusals come back as the code and remark Apache's broker answers. ``gone``: asked after
        each wait; True (the client left) ends the wait with nothing popped, so no message is made invisible for a
        client that cannot get it."""
        deadline = time.monotonic() + max(poll_time_ms, 0) / 1000.0
        while True:
            if gone is not None and gone():
                return PopResult(ResponseCode.POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE", PopStatus.POLLING_NOT_FOUND)
            result = self.pop_now(
                group,
                topic,
                queue_id,
                max_msg_nums,
                invisible_time_ms,
                init_mode,
                expression_type,
                expression,
                order,
                attempt_id,
            )
            left = deadline - time.monotonic()
            if result.code != ResponseCode.POLLING_TIMEOUT or left <= 0:
                if result.code == ResponseCode.POLLING_TIMEOUT and poll_time_ms > 0:
                    result.status = PopStatus.POLLING_NOT_FOUND
                return result
            keys = [topic, ei.pop_retry_topic(topic, group)]
            await self._wait_arrival(keys, left)

    def pop_now(
        self,
        group: str,
        topic: str,
        queue_id: int = -1,
        max_msg_nums: int = MAX_POP_NUMS,
        invisible_time_ms: int = 60_000,
        init_mode: int = CONSUME_INIT_MODE_MAX,
        expression_type: str | None = ExpressionType.TAG,
        expression: str | None = "*",
        order: bool = False,
        attempt_id: str | None = None,
    ) -> PopResult:
        """One pass of ``pop`` (no waiting): POLLING_TIMEOUT when nothing was found."""
        try:
            selector = self._check_pop(group, topic, queue_id, max_msg_nums, expression_type, expression)
        except _Refused as e:
            return PopResult(e.code, e.remark, PopStatus.NO_NEW_MSG)
        self._compensate(group, topic, expression_type, expression)
        cfg = self.topic_config_manager.select_topic_config(topic)
        assert cfg is not None
        pop_time = now_ms()
        revive_qid = ei.POP_ORDER_REVIVE_QUEUE if order else next(self._ck_counter) % mix_all.REVIVE_QUEUE_NUM
        pop = _PopRun(self, group, invisible_time_ms, init_mode, selector, order, attempt_id, pop_time, revive_qid)
        pop.max_nums = max_msg_nums
        random_q = self._random.randrange(100)
        retry_topic = ei.pop_retry_topic(topic, group)
        need_retry = random_q < POP_FROM_RETRY_PROBABILITY
        if need_retry and not order:
            pop.from_topic(retry_topic, True, random_q)
        if queue_id < 0:
            pop.from_topic(topic, False, random_q)
        else:
            pop.from_queue(topic, False, queue_id)
        if not need_retry and len(pop.messages) < max_msg_nums and not order:
            pop.from_topic(retry_topic, True, random_q)
        if pop.messages:
            code, status, remark = ResponseCode.SUCCESS, PopStatus.FOUND, "FOUND"
        else:
            code, status, remark = ResponseCode.POLLING_TIMEOUT, PopStatus.NO_NEW_MSG, "NO_MESSAGE_IN_QUEUE"
        for m in pop.messages:
            m.topic = topic
        return PopResult(
            code,
            remark,
            status,
            pop.messages,
            pop_time,
            invisible_time_ms,
            revive_qid,
            pop.rest_num,
            ";".join(pop.start_offset_info),
            ";".join(pop.msg_offset_info),
            ";".join(pop.order_count_info) if order else None,
            b"".join(pop.bodies),
        )

    def _compensate(self, group: str, topic: str, expression_type: str | None, expression: str | None) -> None:
        """The popping group and what it reads, in the ConsumerManager's compensation table (a POP consumer sends no
        heartbeat): 5.x's ``compensateBasicConsumerInfo`` and ``compensateSubscribeData`` (topic and its retry)."""
        manager = self.consumer_manager
        if manager is None:
            return
        manager.compensate_basic_consumer_info(group, ConsumeType.CONSUME_POP)
        selector: str | MessageSelector | None = expression
        if expression and expression_type == ExpressionType.SQL92:
            selector = MessageSelector.by_sql(expression)
        manager.compensate_subscribe_data(group, topic, build_subscription_data(topic, selector))
        retry = ei.pop_retry_topic(topic, group)
        manager.compensate_subscribe_data(group, retry, build_subscription_data(retry, None))

    def _check_pop(
        self,
        group: str,
        topic: str,
        queue_id: int,
        max_msg_nums: int,
        expression_type: str | None,
        expression: str | None,
        peek: bool = False,
    ) -> MessageSelector | str | None:
        """A pop's (or, ``peek``, a peek's) checks in Apache's order; the message filter, or ``_Refused``."""
        ip = self.broker_config.broker_ip1
        if not is_readable(self.broker_config.broker_permission):
            what = "peeking" if peek else "pop"
            raise _Refused(ResponseCode.NO_PERMISSION, f"the broker[{ip}] {what} message is forbidden")
        if peek:
            pass  # no message count or timer rule
        elif max_msg_nums > MAX_POP_NUMS:
            raise _Refused(ResponseCode.SYSTEM_ERROR, f"the broker[{ip}] pop message's num is greater than 32")
        elif self.timer_message_store is None:
            raise _Refused(
                ResponseCode.SYSTEM_ERROR,
                f"the broker[{ip}] pop message is forbidden because timerWheelEnable is false",
            )
        cfg = self.topic_config_manager.select_topic_config(topic)
        if cfg is None:
            raise _Refused(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if not is_readable(cfg.perm):
            raise _Refused(ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
        if queue_id >= cfg.read_queue_nums:
            raise _Refused(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{cfg.read_queue_nums}]",
            )
        group_cfg = self.subscription_group_manager.find_subscription_group_config(group)
        if group_cfg is None:
            raise _Refused(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist")
        if not group_cfg.consume_enable:
            raise _Refused(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        if not expression:
            return None
        if ExpressionType.is_tag_type(expression_type):
            return expression
        if expression_type != ExpressionType.SQL92:
            raise _Refused(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
        try:
            from rmq_core.filter.sql92 import Sql92Filter

            Sql92Filter(expression)
        except Exception:
            raise _Refused(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed") from None
        return MessageSelector.by_sql(expression)

    # --- peek and notification ------------------------------------------------------------------------------
    def _queues(self, group: str, topic: str, queue_id: int, retry_first: bool) -> list[tuple[str, int]]:
        """The (topic, queue) pairs a peek or notification looks at, in Apache's order (retry topic first in 20 %)."""
        random_q = self._random.randrange(100)
        retry = ei.pop_retry_topic(topic, group)
        retry_cfg = self.topic_config_manager.select_topic_config(retry)
        retry_qs = (
            [(retry, (random_q + i) % retry_cfg.read_queue_nums) for i in range(retry_cfg.read_queue_nums)]
            if retry_cfg
            else []
        )
        cfg = self.topic_config_manager.select_topic_config(topic)
        n = cfg.read_queue_nums if cfg is not None else 0
        own = [(topic, (random_q + i) % n) for i in range(n)] if queue_id < 0 else [(topic, queue_id)]
        if retry_first and random_q < POP_FROM_RETRY_PROBABILITY:
            return retry_qs + own
        return own + retry_qs

    def peek(self, group: str, topic: str, queue_id: int = -1, max_msg_nums: int = MAX_POP_NUMS) -> PopResult:
        """PEEK_MESSAGE: the messages a pop would get next, with no checkpoint and no offset moved (PULL_NOT_FOUND
        when none)."""
        try:
            self._check_pop(group, topic, queue_id, max_msg_nums, None, None, peek=True)
        except _Refused as e:
            return PopResult(e.code, e.remark, PopStatus.NO_NEW_MSG)
        store = self.message_store
        bodies: list[bytes] = []
        msgs: list[MessageExt] = []
        rest = 0
        for t, q in self._queues(group, topic, queue_id, retry_first=True):
            offset = self.consumer_offset_manager.query_offset(group, t, q)
            if offset < 0:
                offset = store.get_min_offset_in_queue(t, q)
            rest += store.get_max_offset_in_queue(t, q) - offset
            want = max_msg_nums - len(msgs)
            if want <= 0:
                continue
            r = store.get_message(group, t, q, offset, want)
            if r.status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY):
                r = store.get_message(group, t, q, r.next_begin_offset, want)
            if r.status == GetMessageStatus.FOUND and r.message_count > 0:
                bodies.append(r.body)
                msgs.extend(decode_messages(r.body))
        if msgs:
            return PopResult(ResponseCode.SUCCESS, "FOUND", PopStatus.FOUND, msgs, rest_num=rest, body=b"".join(bodies))
        return PopResult(ResponseCode.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE", PopStatus.NO_NEW_MSG, rest_num=rest)

    def has_message(
        self, group: str, topic: str, queue_id: int = -1, order: bool = False, attempt_id: str | None = None
    ) -> bool:
        """NOTIFICATION's test: a queue (or the retry topic) holds messages past the group's pop offset and, for a
        FIFO pop, is not blocked."""
        store = self.message_store
        for t, q in self._queues(group, topic, queue_id, retry_first=True):
            if order and self.order_info_manager.check_block(attempt_id, topic, group, q, 0):
                continue
            offset = self.consumer_offset_manager.query_offset(group, t, q)
            if offset < 0:
                offset = store.get_min_offset_in_queue(t, q)
            if store.get_max_offset_in_queue(t, q) - offset > 0:
                return True
        return False

    async def notification(
        self,
        group: str,
        topic: str,
        queue_id: int = -1,
        poll_time_ms: int = 0,
        order: bool = False,
        attempt_id: str | None = None,
    ) -> PopResult:
        """NOTIFICATION (200054): SUCCESS with ``status`` FOUND when there is something to pop, waiting up to
        ``poll_time_ms`` for it; refusals as a pop's."""
        try:
            self._check_pop(group, topic, queue_id, 1, None, None)
        except _Refused as e:
            return PopResult(e.code, e.remark, PopStatus.NO_NEW_MSG)
        deadline = time.monotonic() + max(poll_time_ms, 0) / 1000.0
        while True:
            if self.has_message(group, topic, queue_id, order, attempt_id):
                return PopResult(ResponseCode.SUCCESS, None, PopStatus.FOUND)
            left = deadline - time.monotonic()
            if left <= 0:
                return PopResult(ResponseCode.SUCCESS, None, PopStatus.POLLING_NOT_FOUND)
            await self._wait_arrival([topic, ei.pop_retry_topic(topic, group)], left)

    # --- offsets -------------------------------------------------------------------------------------------------
    def assign_reset_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """An admin offset reset (resetOffsetByTime): the queue's next pop starts at ``offset``, its FIFO lock
        cleared (5.x ``assignResetOffset`` then ``resetPopOffset``); its in-flight count is cleared now."""
        self._reset_offsets[(group, topic, queue_id)] = offset
        self.inflight.clear(group, topic, queue_id)

    def _apply_reset_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        offset = self._reset_offsets.pop((group, topic, queue_id), None)
        if offset is not None:
            self.order_info_manager.clear_block(topic, group, queue_id)
            self.consumer_offset_manager.commit_offset("ResetPopOffset", group, topic, queue_id, offset)
        return offset

    def pop_offset(
        self, group: str, topic: str, queue_id: int, init_mode: int, init: bool, check_reset: bool = False
    ) -> int:
        """``getPopOffset``: a pending admin reset (``check_reset``: the pop path), else the group's offset, else
        the initial one (committed when ``init``)."""
        if check_reset and self._reset_offsets:
            reset = self._apply_reset_offset(group, topic, queue_id)
            if reset is not None:
                return reset
        offset = self.consumer_offset_manager.query_offset(group, topic, queue_id)
        if offset >= 0:
            return offset
        store = self.message_store
        if init_mode == CONSUME_INIT_MODE_MIN or topic.startswith(mix_all.RETRY_GROUP_TOPIC_PREFIX):
            offset = store.get_min_offset_in_queue(topic, queue_id)
        elif store.get_min_offset_in_queue(topic, queue_id) <= 0:
            offset = 0  # initPopOffsetByCheckMsgInMem: a queue whose first message is still there starts at 0
        else:
            offset = max(store.get_max_offset_in_queue(topic, queue_id) - 1, 0)
        if init:
            self.consumer_offset_manager.commit_offset("getPopOffset", group, topic, queue_id, offset)
        return offset

    def recover_offsets(self, since_ms: int) -> int:
        """After a crash: the pop offsets the offsets file may have missed, read back from the CKs stored since
        ``since_ms`` (in the timer topic, or already in the revive queues): each CK's group offset is moved past the
        offsets it holds. Returns how many offsets moved."""
        store = self.message_store
        moved = 0
        sources = [(mix_all.RMQ_SYS_WHEEL_TIMER, 0)] + [(self.revive_topic, q) for q in range(mix_all.REVIVE_QUEUE_NUM)]
        for topic, qid in sources:
            offset = max(store.get_offset_in_queue_by_time(topic, qid, since_ms), 0)
            while True:
                r = store.get_message(ei.REVIVE_GROUP, topic, qid, offset, 256)
                if r.status != GetMessageStatus.FOUND:
                    break
                for m in decode_messages(r.body, decompress=False):
                    if m.tags != ei.CK_TAG or (
                        topic != self.revive_topic and m.properties.get(PROPERTY_REAL_TOPIC) != self.revive_topic
                    ):
                        continue
                    try:
                        ck = PopCheckPoint.decode(m.body)
                    except (ValueError, TypeError, KeyError):
                        continue
                    end = ck.start_offset + (max(ck.queue_offset_diff) if ck.queue_offset_diff else ck.num - 1) + 1
                    com = self.consumer_offset_manager
                    if ck.topic and ck.cid and end > com.query_offset(ck.cid, ck.topic, ck.queue_id):
                        com.commit_offset("popRecover", ck.cid, ck.topic, ck.queue_id, end)
                        moved += 1
                if r.next_begin_offset <= offset:
                    break
                offset = r.next_begin_offset
        if moved:
            log.warning(
                "pop: %d consumer offsets moved past the checkpoints stored since %d (recovery)", moved, since_ms
            )
        return moved

    # --- revive-log writes ---------------------------------------------------------------------------------------
    def put_revive(self, body: bytes, tag: str, revive_qid: int, deliver_ms: int, uniq_key: str) -> bool:
        """Store a CK/ACK record to the revive queue as a timer message due at ``deliver_ms``."""
        msg = Message(self.revive_topic, body, tags=tag)
        msg.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = uniq_key
        msg.properties[PROPERTY_TIMER_DELIVER_MS] = str(deliver_ms)
        cfg = self.broker_config
        now = now_ms()
        try:
            qid = transform_timer_message(
                msg,
                revive_qid,
                0,
                timer_wheel_enable=cfg.timer_wheel_enable,
                timer_max_delay_sec=cfg.timer_max_delay_sec,
                timer_precision_ms=cfg.timer_precision_ms,
                now_ms=now,
            )
        except TimerMessageRefused as e:
            log.error("pop: %s record to %s:%d refused: %s", tag, self.revive_topic, revive_qid, e.remark)
            return False
        result = self.message_store.put_message(msg, qid, self.store_host, born_timestamp=now, wait_flush=False)
        if result.status not in _STORED:
            log.error("pop: put of a %s record to %s:%d failed: %s", tag, self.revive_topic, revive_qid, result)
            return False
        return True

    def put_ck(self, ck: PopCheckPoint, revive_qid: int) -> bool:
        deliver = ck.revive_time - ei.ACK_TIME_INTERVAL_MS
        return self.put_revive(ck.encode(), ei.CK_TAG, revive_qid, deliver, ck_unique_id(ck))

    def put_ack(self, ack: AckMsg, revive_qid: int, revive_time: int) -> bool:
        tag = ei.BATCH_ACK_TAG if ack.batch else ei.ACK_TAG
        return self.put_revive(ack.encode(), tag, revive_qid, revive_time, ack.unique_id())

    # --- ack -----------------------------------------------------------------------------------------------------
    def _resolve(
        self, group: str, topic: str, extra_info: str, offset: int | None, queue_id: int | None
    ) -> tuple[ei.ReceiptHandle, str, int, int]:
        handle = ei.parse_receipt_handle(extra_info)
        if handle is None:
            raise _Refused(ResponseCode.INVALID_PARAMETER, f"the receipt handle is malformed: {extra_info[:200]!r}")
        if handle.broker_name != self.broker_name:
            raise _Refused(
                ResponseCode.INVALID_PARAMETER,
                f"the receipt handle is from broker {handle.broker_name}, not {self.broker_name}",
            )
        real = handle.real_topic(topic, group)
        qid = handle.queue_id if queue_id is None else queue_id
        off = handle.queue_offset if offset is None else offset
        cfg = self.topic_config_manager.select_topic_config(real)
        if cfg is None:
            raise _Refused(ResponseCode.TOPIC_NOT_EXIST, f"topic[{real}] not exist, apply first please!")
        if not 0 <= qid < cfg.read_queue_nums:
            raise _Refused(
                ResponseCode.MESSAGE_ILLEGAL,
                f"queueId[{qid}] is illegal, topic:[{real}] topicConfig.readQueueNums:[{cfg.read_queue_nums}]",
            )
        lo = self.message_store.get_min_offset_in_queue(real, qid)
        hi = self.message_store.get_max_offset_in_queue(real, qid)
        if off < lo or off > hi:
            raise _Refused(
                ResponseCode.NO_MESSAGE, f"offset is illegal, key:{real}@{qid}, commit:{off}, store:{lo}~{hi}"
            )
        return handle, real, qid, off

    def ack(
        self, group: str, topic: str, extra_info: str, offset: int | None = None, queue_id: int | None = None
    ) -> AckResult:
        """ACK_MESSAGE: ``topic`` the original or the real (retry) topic; ``offset``/``queue_id`` default to the
        handle's. A malformed handle or one of another broker → INVALID_PARAMETER, nothing acked."""
        try:
            handle, real, qid, off = self._resolve(group, topic, extra_info, offset, queue_id)
        except _Refused as e:
            return AckResult(e.code, e.remark)
        if handle.is_order:
            return self.order_info_manager.ack_orderly(self, group, real, qid, off, handle)
        ack = AckMsg(off, handle.ck_offset, group, real, qid, handle.pop_time, handle.broker_name)
        if not self.put_ack(ack, handle.revive_qid, handle.revive_time):
            return AckResult(ResponseCode.SYSTEM_ERROR, "the ack could not be stored")
        self.inflight.decrement(group, real, qid, handle.pop_time)
        return AckResult(ResponseCode.SUCCESS)

    def batch_ack(self, group: str, topic: str, extra_infos: list[str]) -> list[AckResult]:
        """Ack several handles; one result each (Apache's BATCH_ACK_MESSAGE answers one code for all)."""
        return [self.ack(group, topic, h) for h in extra_infos]

    def batch_ack_entries(self, broker_name: str | None, entries: list[Mapping[str, Any]]) -> AckResult:
        """BATCH_ACK_MESSAGE's body entries (``BatchAck``: c, t, r, so, q, rq, pt, it, and b = the acked bits
        relative to ``so``, a ``BitSet.toByteArray`` written as base64 by fastjson)."""
        for e in entries:
            group = str(e.get("c") or e.get("consumerGroup") or "")
            flag = str(e.get("r") or e.get("retry") or ei.NORMAL_TOPIC)
            try:
                real = ei.real_topic(str(e.get("t") or e.get("topic") or ""), group, flag)
                qid, rqid = int(e.get("q", e.get("queueId", 0))), int(e.get("rq", e.get("reviveQueueId", 0)))
                start, pop_time = int(e.get("so", e.get("startOffset", 0))), int(e.get("pt", e.get("popTime", 0)))
                invisible = int(e.get("it", e.get("invisibleTime", 0)))
                raw = e.get("b", e.get("bitSet")) or ""
                data = base64.b64decode(raw, validate=True) if isinstance(raw, str) else bytes(x & 0xFF for x in raw)
            except (TypeError, ValueError) as err:
                return AckResult(ResponseCode.INVALID_PARAMETER, f"malformed batch ack entry: {err}")
            bits = int.from_bytes(data, "little")
            lo = self.message_store.get_min_offset_in_queue(real, qid)
            hi = self.message_store.get_max_offset_in_queue(real, qid)
            if lo == -1 or hi == -1:
                continue
            offsets = [start + i for i in range(bits.bit_length()) if (bits >> i) & 1 and lo <= start + i <= hi]
            if not offsets:
                continue
            if rqid == ei.POP_ORDER_REVIVE_QUEUE:
                handle = ei.ReceiptHandle(start, pop_time, invisible, rqid, flag, broker_name or "", qid, -1)
                for off in offsets:
                    self.order_info_manager.ack_orderly(self, group, real, qid, off, handle)
                continue
            ack = AckMsg(-1, start, group, real, qid, pop_time, broker_name, offsets, batch=True)
            if self.put_ack(ack, rqid, pop_time + invisible):
                self.inflight.decrement(group, real, qid, pop_time, len(offsets))
        return AckResult(ResponseCode.SUCCESS)

    # --- change invisible time -----------------------------------------------------------------------------------
    def change_invisible_time(
        self,
        group: str,
        topic: str,
        extra_info: str,
        invisible_time_ms: int,
        offset: int | None = None,
        queue_id: int | None = None,
    ) -> ChangeInvisibleResult:
        """CHANGE_MESSAGE_INVISIBLETIME: a new one-message CK popped now, then an ACK of the old handle. The result's
        ``receipt_handle`` is the new handle."""
        try:
            handle, real, qid, off = self._resolve(group, topic, extra_info, offset, queue_id)
        except _Refused as e:
            return ChangeInvisibleResult(e.code, e.remark)
        if handle.is_order:
            return self.order_info_manager.change_invisible_orderly(
                self, group, real, qid, off, handle, invisible_time_ms
            )
        now = now_ms()
        ck = PopCheckPoint(off, now, invisible_time_ms, 1, qid, real, group, handle.broker_name, queue_offset_diff=[0])
        if not self.put_ck(ck, handle.revive_qid):
            return ChangeInvisibleResult(ResponseCode.SYSTEM_ERROR, "the checkpoint could not be stored")
        self.inflight.increment(group, real, qid, 1)  # the new CK's message; the old handle's ack below
        ack = AckMsg(off, handle.ck_offset, group, real, qid, handle.pop_time, handle.broker_name)
        if self.put_ack(ack, handle.revive_qid, handle.revive_time):
            self.inflight.decrement(group, real, qid, handle.pop_time)
        new_handle = ei.build_extra_info(
            off, now, invisible_time_ms, handle.revive_qid, real, handle.broker_name, qid, off
        )
        return ChangeInvisibleResult(ResponseCode.SUCCESS, None, new_handle, now, invisible_time_ms, handle.revive_qid)

    # --- long polling --------------------------------------------------------------------------------------------
    def _on_arrival(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int | None, properties: Mapping[str, str] | None
    ) -> None:
        waiters = self._waiters.pop(topic, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def notify(self, topic: str) -> None:
        """Wake the pops waiting on ``topic`` (an ack of a FIFO queue unblocks it)."""
        self._on_arrival(topic, -1, 0, None, None)

    async def _wait_arrival(self, topics: list[str], timeout_s: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for t in topics:
            self._waiters.setdefault(t, set()).add(fut)
        try:
            await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            pass
        finally:
            for t in topics:
                ws = self._waiters.get(t)
                if ws is not None:
                    ws.discard(fut)
                    if not ws:
                        del self._waiters[t]


class _PopRun:
    """One pop request's pass over its queues: the messages, their records and the answer's offset infos."""

    def __init__(
        self,
        service: PopService,
        group: str,
        invisible_time: int,
        init_mode: int,
        selector: MessageSelector | str | None,
        order: bool,
        attempt_id: str | None,
        pop_time: int,
        revive_qid: int,
    ) -> None:
        self.s = service
        self.group = group
        self.invisible_time = invisible_time
        self.init_mode = init_mode
        self.selector = selector
        self.order = order
        self.attempt_id = attempt_id
        self.pop_time = pop_time
        self.revive_qid = revive_qid
        self.max_nums = MAX_POP_NUMS
        self.messages: list[MessageExt] = []
        self.bodies: list[bytes] = []
        self.rest_num = 0
        self.start_offset_info: list[str] = []
        self.msg_offset_info: list[str] = []
        self.order_count_info: list[str] = []

    def from_topic(self, topic: str, is_retry: bool, random_q: int) -> None:
        cfg = self.s.topic_config_manager.select_topic_config(topic)
        if cfg is None:
            return
        n = cfg.read_queue_nums
        for i in range(n):
            self.from_queue(topic, is_retry, (random_q + i) % n)

    def from_queue(self, topic: str, is_retry: bool, queue_id: int) -> None:
        s = self.s
        store = s.message_store
        offset = s.pop_offset(self.group, topic, queue_id, self.init_mode, init=True, check_reset=True)
        if self.order and s.order_info_manager.check_block(
            self.attempt_id, topic, self.group, queue_id, self.invisible_time
        ):
            return
        want = self.max_nums - len(self.messages)
        if want <= 0:
            self.rest_num += store.get_max_offset_in_queue(topic, queue_id) - offset
            return
        r = store.get_message(self.group, topic, queue_id, offset, want, self.selector)
        if r.status in _REREAD:
            log.warning(
                "pop: offset %d of %s@%s@%d corrected to %d", offset, topic, self.group, queue_id, r.next_begin_offset
            )
            s.consumer_offset_manager.commit_offset("pop", self.group, topic, queue_id, r.next_begin_offset)
            offset = r.next_begin_offset
            r = store.get_message(self.group, topic, queue_id, offset, want, self.selector)
        if r.status == GetMessageStatus.FOUND and r.message_count > 0:
            msgs = decode_messages(r.body)
            offsets = [m.queue_offset for m in msgs]
            if self.order:
                counts = s.order_info_manager.update(
                    self.attempt_id, is_retry, topic, self.group, queue_id, self.pop_time, self.invisible_time, offsets
                )
                s.consumer_offset_manager.commit_offset("pop", self.group, topic, queue_id, offset)
                for off, count in counts:
                    ei.order_count_entry(self.order_count_info, topic, queue_id, off, count)
                handle_ck = offset
            else:
                ck = PopCheckPoint(
                    offset,
                    self.pop_time,
                    self.invisible_time,
                    len(msgs),
                    queue_id,
                    topic,
                    self.group,
                    s.broker_name,
                    queue_offset_diff=[o - offset for o in offsets],
                )
                if not s.put_ck(ck, self.revive_qid):
                    self.rest_num += r.max_offset - offset
                    return
                s.consumer_offset_manager.commit_offset("pop", self.group, topic, queue_id, r.next_begin_offset)
                s.inflight.increment(self.group, topic, queue_id, len(msgs))
                handle_ck = offset
            ei.start_offset_entry(self.start_offset_info, topic, queue_id, offset)
            ei.msg_offset_entry(self.msg_offset_info, topic, queue_id, offsets)
            for m in msgs:
                m.properties[PROPERTY_POP_CK] = ei.build_extra_info(
                    handle_ck,
                    self.pop_time,
                    self.invisible_time,
                    self.revive_qid,
                    m.topic,
                    s.broker_name,
                    queue_id,
                    m.queue_offset,
                )
                m.properties.setdefault(PROPERTY_FIRST_POP_TIME, str(self.pop_time))
                m.broker_name = s.broker_name
            self.messages.extend(msgs)
            self.bodies.append(r.body)
        elif r.status in _SKIPPED and r.next_begin_offset > -1 and r.next_begin_offset != offset:
            s.consumer_offset_manager.commit_offset("pop", self.group, topic, queue_id, r.next_begin_offset)
        self.rest_num += max(r.max_offset - r.next_begin_offset, 0) if r.next_begin_offset >= 0 else 0
