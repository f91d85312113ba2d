"""TransactionalMessageBridge (4.9 ``br/transaction/queue/TransactionalMessageBridge.java``): the store operations of
transactional messages.

Owns the half message (``parse_half_message_inner``: ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0), the op message
(``put_op_message``: ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, tag ``d``, body = the half queue offset), the put-backs
(``renew_half_message`` / ``renew_immunity_half_message``), the reads of both queues and the check's offsets (group
``CID_RMQ_SYS_TRANS``). Byte formats: none of its own (records through the MessageStore).
Invariant: every put is a plain ``MessageStore.put_message``; nothing here waits for a flush (4.9's
``waitStoreMsgOK=false``).
Thread-safety: the broker's event loop only.
Details: docs/BROKER_DESIGN.md, 'Transactions: the store operations'.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmq_core.common import mix_all
from rmq_core.common.perm_name import PERM_READ, PERM_WRITE
from rmq_core.message import (
    COMPRESSED_FLAG,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    TRANSACTION_NOT_TYPE,
    Message,
    MessageExt,
    decode_messages,
)
from rmq_core.store_status import GetMessageStatus, PutMessageStatus

if TYPE_CHECKING:
    from rmq_core.broker.consumer_offset_manager import ConsumerOffsetManager
    from rmq_core.broker.topic_config_manager import TopicConfigManager
    from rmq_core.store import MessageStore, PutMessageResult

log = logging.getLogger(__name__)

HALF_TOPIC = mix_all.RMQ_SYS_TRANS_HALF_TOPIC
OP_TOPIC = mix_all.RMQ_SYS_TRANS_OP_HALF_TOPIC
CHECK_GROUP = mix_all.CID_SYS_RMQ_TRANS
REMOVETAG = "d"
TRANSACTION_TYPE_MASK = 0xC  # the sys flag's transaction bits (MessageSysFlag.TRANSACTION_*_TYPE)


def reset_transaction_value(sys_flag: int, transaction_type: int) -> int:
    """MessageSysFlag.resetTransactionValue."""
    return (sys_flag & ~TRANSACTION_TYPE_MASK) | transaction_type


def transaction_value(sys_flag: int) -> int:
    """MessageSysFlag.getTransactionValue."""
    return sys_flag & TRANSACTION_TYPE_MASK


def parse_half_message_inner(msg: Message, queue_id: int, sys_flag: int) -> tuple[int, int]:
    """Turns ``msg`` (sent to ``msg.topic`` queue ``queue_id``) into its half message in place; returns the half
    message's (queue id, sys flag)."""
    msg.properties[PROPERTY_REAL_TOPIC] = msg.topic
    msg.properties[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
    msg.topic = HALF_TOPIC
    return 0, reset_transaction_value(sys_flag, TRANSACTION_NOT_TYPE)


@dataclass
class PullOutcome:
    """What ``getMessage`` found, as 4.9's PullResult: FOUND / NO_NEW_MSG / NO_MATCHED_MSG / OFFSET_ILLEGAL."""

    status: str
    next_begin_offset: int
    messages: list[MessageExt]


_NO_NEW = {GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.OFFSET_OVERFLOW_ONE}


class TransactionalMessageBridge:
    def __init__(
        self,
        message_store: MessageStore,
        topic_config_manager: TopicConfigManager,
        consumer_offset_manager: ConsumerOffsetManager,
        store_host: tuple[str, int],
    ) -> None:
        self.message_store = message_store
        self.topic_config_manager = topic_config_manager
        self.consumer_offset_manager = consumer_offset_manager
        self.store_host = store_host

    # --- offsets of the check --------------------------------------------------------------------------------
    def fetch_consume_offset(self, topic: str, queue_id: int) -> int:
        offset = self.consumer_offset_manager.query_offset(CHECK_GROUP, topic, queue_id)
        if offset == -1:
            offset = self.message_store.get_min_offset_in_queue(topic, queue_id)
        return offset

    def update_consume_offset(self, topic: str, queue_id: int, offset: int) -> None:
        host = f"{self.store_host[0]}:{self.store_host[1]}"
        self.consumer_offset_manager.commit_offset(host, CHECK_GROUP, topic, queue_id, offset)

    def fetch_message_queues(self, topic: str) -> list[int]:
        """The queue ids of ``topic`` (created with 1 queue, RW, when unknown: ``selectTopicConfig``)."""
        config = self.topic_config_manager.select_topic_config(topic)
        if config is None:
            config = self.topic_config_manager.create_topic_in_send_message_back_method(
                topic, 1, PERM_WRITE | PERM_READ, 0
            )
        return list(range(config.read_queue_nums))

    def topic_queue_nums(self, topic: str) -> int:
        """The read queue count of ``topic``, 0 when the broker does not know it (nothing created here)."""
        config = self.topic_config_manager.select_topic_config(topic)
        return config.read_queue_nums if config is not None else 0

    # --- reads -----------------------------------------------------------------------------------------------
    def get_half_message(self, queue_id: int, offset: int, nums: int) -> PullOutcome:
        return self._get_message(HALF_TOPIC, queue_id, offset, nums)

    def get_op_message(self, queue_id: int, offset: int, nums: int) -> PullOutcome:
        return self._get_message(OP_TOPIC, queue_id, offset, nums)

    def _get_message(self, topic: str, queue_id: int, offset: int, nums: int) -> PullOutcome:
        result = self.message_store.get_message(CHECK_GROUP, topic, queue_id, offset, nums)
        status = result.status
        if status == GetMessageStatus.FOUND:
            msgs = decode_messages(result.body, decompress=False) if result.body else []
            return PullOutcome("FOUND", result.next_begin_offset, msgs)
        if status == GetMessageStatus.NO_MATCHED_MESSAGE:
            return PullOutcome("NO_MATCHED_MSG", result.next_begin_offset, [])
        if status in _NO_NEW or (status == GetMessageStatus.NO_MATCHED_LOGIC_QUEUE and offset == 0):
            # a queue never written is empty, not illegal at 0: Apache's store creates a queue on its first read
            # (findConsumeQueue) and answers NO_MESSAGE_IN_QUEUE; ours creates none on a read
            return PullOutcome("NO_NEW_MSG", result.next_begin_offset, [])
        return PullOutcome("OFFSET_ILLEGAL", result.next_begin_offset, [])

    def look_message_by_offset(self, commitlog_offset: int) -> MessageExt | None:
        """The record at ``commitlog_offset`` with its body as stored; None when there is none (a bad offset)."""
        store = self.message_store
        try:
            msg_ext = store.look_message_by_offset(commitlog_offset)
            if msg_ext is None or not (msg_ext.sys_flag & COMPRESSED_FLAG):
                return msg_ext
            raw = store.read_commit_log(commitlog_offset, msg_ext.store_size)
            return decode_messages(raw, decompress=False)[0] if raw else None
        except Exception as e:  # not a record start, negative, past the end: the client's error
            log.warning("look message by offset %d failed: %s", commitlog_offset, e)
            return None

    # --- writes ----------------------------------------------------------------------------------------------
    def put_message(
        self,
        msg: Message,
        queue_id: int,
        born_host: tuple[str, int],
        born_timestamp: int,
        sys_flag: int,
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
    ) -> PutMessageResult:
        return self.message_store.put_message(
            msg,
            queue_id,
            born_host,
            born_timestamp=born_timestamp,
            sys_flag=sys_flag,
            reconsume_times=reconsume_times,
            wait_flush=False,
            prepared_transaction_offset=prepared_transaction_offset,
        )

    def put_op_message(self, half: MessageExt) -> bool:
        """``putOpMessage(msg, REMOVETAG)``: the op message saying half offset ``half.queue_offset`` is resolved."""
        op = Message(OP_TOPIC, str(half.queue_offset).encode(), tags=REMOVETAG)
        result = self.put_message(op, half.queue_id, self.store_host, _now_ms(), 0)
        if result.status != PutMessageStatus.PUT_OK:
            log.error("put op message of half offset %d failed: %s", half.queue_offset, result.status.name)
            return False
        return True

    def renew_half_message(self, msg_ext: MessageExt) -> PutMessageResult:
        """``renewHalfMessageInner`` + put: the half message again at the tail of its queue (same properties,
        body, sys flag, born timestamp and host)."""
        msg = Message(msg_ext.topic, msg_ext.body, flag=msg_ext.flag)
        msg.properties = dict(msg_ext.properties)
        return self.put_message(msg, msg_ext.queue_id, msg_ext.born_host, msg_ext.born_timestamp, msg_ext.sys_flag)

    def renew_immunity_half_message(self, msg_ext: MessageExt) -> bool:
        """``renewImmunityHalfMessageInner`` + put: as ``renew_half_message``, with ``TRAN_PREPARED_QUEUE_OFFSET`` =
        the first half offset of this message."""
        msg_ext.properties.setdefault(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, str(msg_ext.queue_offset))
        return self.renew_half_message(msg_ext).status == PutMessageStatus.PUT_OK


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


__all__ = [
    "CHECK_GROUP",
    "HALF_TOPIC",
    "OP_TOPIC",
    "REMOVETAG",
    "PullOutcome",
    "TransactionalMessageBridge",
    "parse_half_message_inner",
    "reset_transaction_value",
    "transaction_value",
]
