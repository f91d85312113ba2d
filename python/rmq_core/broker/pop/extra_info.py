"""POP names and receipt handles: RocketMQ 5's ``KeyBuilder``, ``PopAckConstants`` and ``ExtraInfoUtil``.

A receipt handle (the ``POP_CK`` property, a request's ``extraInfo``) is space-separated:
``ckStartOffset popTime invisibleTime reviveQid retryFlag brokerName queueId [queueOffset]``; retryFlag is ``0``
(the topic itself), ``1`` (``%RETRY%{group}_{topic}``) or ``2`` (``%RETRY%{group}+{topic}``, retry topic v2).
A POP response's ``startOffsetInfo``/``msgOffsetInfo``/``orderCountInfo`` are ``;``-joined ``retryFlag queueId value``
entries (msg offsets ``,``-joined). The revive topic is ``rmq_sys_REVIVE_LOG_{cluster}``; FIFO pops use revive
queue 999 (no checkpoint is written for them).
Thread-safety: pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmq_core.common.mix_all import RETRY_GROUP_TOPIC_PREFIX, REVIVE_TOPIC_PREFIX
from rmq_core.message import KEY_SEPARATOR, PROPERTY_POP_CK

if TYPE_CHECKING:
    from rmq_core.message import MessageExt

REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
SPLIT = "@"
REVIVE_GROUP_HOST = "127.0.0.1"  # the "client host" the revive offsets are committed with (PopAckConstants.LOCAL_HOST)
ACK_TIME_INTERVAL_MS = 1000  # a CK is due this long before its revive time (PopAckConstants.ackTimeInterval)
POP_ORDER_REVIVE_QUEUE = 999
RETRY_QUEUE_NUM = 1
NORMAL_TOPIC, RETRY_TOPIC, RETRY_TOPIC_V2 = "0", "1", "2"


def revive_topic(cluster: str) -> str:
    return REVIVE_TOPIC_PREFIX + cluster


def pop_retry_topic(topic: str, group: str, v2: bool = False) -> str:
    """``KeyBuilder.buildPopRetryTopic``: ``%RETRY%{group}_{topic}`` (``+`` with retry topic v2)."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}{'+' if v2 else '_'}{topic}"


def is_pop_retry_topic_v2(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and "+" in topic


def parse_normal_topic(topic: str, group: str) -> str:
    """``KeyBuilder.parseNormalTopic(topic, cid)``: the topic a POP retry topic belongs to."""
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return topic
    v2 = RETRY_GROUP_TOPIC_PREFIX + group + "+"
    if topic.startswith(v2):
        return topic[len(v2) :]
    return topic[len(RETRY_GROUP_TOPIC_PREFIX + group + "_") :]


def retry_flag(topic: str) -> str:
    """``ExtraInfoUtil.getRetry(topic)``."""
    if is_pop_retry_topic_v2(topic):
        return RETRY_TOPIC_V2
    return RETRY_TOPIC if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else NORMAL_TOPIC


def real_topic(topic: str, group: str, flag: str) -> str:
    """``ExtraInfoUtil.getRealTopic``: the topic a handle's queue belongs to (a topic already a retry one stays)."""
    if flag == NORMAL_TOPIC or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return topic
    if flag == RETRY_TOPIC:
        return pop_retry_topic(topic, group)
    if flag == RETRY_TOPIC_V2:
        return pop_retry_topic(topic, group, v2=True)
    raise ValueError(f"retry flag {flag!r} is not 0, 1 or 2")


def build_extra_info(
    ck_offset: int,
    pop_time: int,
    invisible_time: int,
    revive_qid: int,
    topic: str,
    broker_name: str,
    queue_id: int,
    queue_offset: int | None = None,
) -> str:
    """``ExtraInfoUtil.buildExtraInfo`` (``topic`` is the stored one: its retry flag is written)."""
    parts = [ck_offset, pop_time, invisible_time, revive_qid, retry_flag(topic), broker_name, queue_id]
    if queue_offset is not None:
        parts.append(queue_offset)
    return KEY_SEPARATOR.join(str(p) for p in parts)


@dataclass(frozen=True)
class ReceiptHandle:
    """A parsed ``extraInfo``; ``queue_offset`` is -1 when the handle has none (a 7-field handle)."""

    ck_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    queue_offset: int

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    @property
    def is_order(self) -> bool:
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE

    def real_topic(self, topic: str, group: str) -> str:
        return real_topic(topic, group, self.retry)


def parse_receipt_handle(handle: str) -> ReceiptHandle | None:
    """The handle's fields, or None when it is malformed (fewer than 7 fields, a number that is not one, a retry
    flag other than 0/1/2)."""
    if not isinstance(handle, str):
        return None
    parts = handle.split(KEY_SEPARATOR)
    if len(parts) < 7 or parts[4] not in (NORMAL_TOPIC, RETRY_TOPIC, RETRY_TOPIC_V2) or not parts[5]:
        return None
    try:
        return ReceiptHandle(
            int(parts[0]),
            int(parts[1]),
            int(parts[2]),
            int(parts[3]),
            parts[4],
            parts[5],
            int(parts[6]),
            int(parts[7]) if len(parts) > 7 else -1,
        )
    except ValueError:
        return None


def _append(info: list[str], topic: str, queue_id: int, value: str) -> None:
    info.append(f"{retry_flag(topic)}{KEY_SEPARATOR}{queue_id}{KEY_SEPARATOR}{value}")


def start_offset_entry(info: list[str], topic: str, queue_id: int, start_offset: int) -> None:
    """``ExtraInfoUtil.buildStartOffsetInfo`` (join the list with ``;``)."""
    _append(info, topic, queue_id, str(start_offset))


def msg_offset_entry(info: list[str], topic: str, queue_id: int, offsets: list[int]) -> None:
    """``ExtraInfoUtil.buildMsgOffsetInfo`` (join the list with ``;``)."""
    _append(info, topic, queue_id, ",".join(str(o) for o in offsets))


def order_count_entry(info: list[str], topic: str, queue_id: int, queue_offset: int, count: int) -> None:
    """``ExtraInfoUtil.buildQueueOffsetOrderCountInfo``: ``retryFlag qo{queueId}%{offset} count``."""
    info.append(f"{retry_flag(topic)}{KEY_SEPARATOR}qo{queue_id}%{queue_offset}{KEY_SEPARATOR}{count}")


def receipt_handles(answer: Mapping[str, str], messages: Sequence[MessageExt], broker_name: str) -> list[str]:
    """Each message's receipt handle from a POP answer's header fields, as the Java client's ``processPopResponse``
    builds it (the message's stored topic gives the retry flag; a message that carries ``POP_CK`` keeps it)."""
    start: dict[tuple[str, int], int] = {}
    for one in (answer.get("startOffsetInfo") or "").split(";"):
        if one:
            flag, qid, off = one.split(KEY_SEPARATOR)
            start[(flag, int(qid))] = int(off)
    pop_time, invisible = int(answer["popTime"]), int(answer["invisibleTime"])
    revive_qid = int(answer["reviveQid"])
    out = []
    for m in messages:
        own = m.properties.get(PROPERTY_POP_CK)
        if own:
            out.append(own)
            continue
        ck = start[(retry_flag(m.topic), m.queue_id)]
        out.append(
            build_extra_info(ck, pop_time, invisible, revive_qid, m.topic, broker_name, m.queue_id, m.queue_offset)
        )
    return out
