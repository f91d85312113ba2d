"""TransactionalMessageService (4.9 ``br/transaction/queue/TransactionalMessageServiceImpl.java``): which half
messages are still open, and the check that asks their producers about them.

Owns ``check(transaction_timeout, transaction_check_max, listener)`` (4.9's rules: op map, immunity,
``TRANSACTION_CHECK_TIMES``, discard, put back), ``commit_message`` / ``rollback_message`` (only a real half
message), ``delete_prepare_message`` (its op message) and ``is_resolved`` (the resolved-half-message set, read at
start by ``load()``), so a second END_TRANSACTION stores nothing.
Thread-safety: the broker's event loop only (the check is a synchronous pass over the store).
Details: docs/BROKER_DESIGN.md, 'Transactions: the check'.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from rmq_core.broker.transaction.transactional_message_bridge import (
    HALF_TOPIC,
    OP_TOPIC,
    REMOVETAG,
    PullOutcome,
    TransactionalMessageBridge,
)
from rmq_core.message import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    MessageExt,
)
from rmq_core.remoting.codes import ResponseCode
from rmq_core.store_status import PutMessageStatus

if TYPE_CHECKING:
    from rmq_core.remoting.header import EndTransactionRequestHeader

log = logging.getLogger(__name__)

PULL_MSG_RETRY_NUMBER = 1
MAX_PROCESS_TIME_LIMIT_MS = 60_000
MAX_RETRY_COUNT_WHEN_HALF_NULL = 1
OP_PULL_NUMS = 32
MAX_REMEMBERED_RESOLVED = 1_000_000


class CheckListener(Protocol):
    """AbstractTransactionalMessageCheckListener: what the check does with a half message."""

    def resolve_half_msg(self, msg_ext: MessageExt) -> None: ...

    def resolve_discard_msg(self, msg_ext: MessageExt) -> None: ...


def is_half_message(msg: MessageExt) -> bool:
    """A transaction's half message: stored in ``RMQ_SYS_TRANS_HALF_TOPIC`` by a send carrying ``TRAN_MSG=true``
    (the send processor's ``parse_half_message_inner``, or the check's put-back of one)."""
    return msg.topic == HALF_TOPIC and msg.properties.get(PROPERTY_TRANSACTION_PREPARED, "").lower() == "true"


@dataclass
class OperationResult:
    prepare_message: MessageExt | None
    response_code: int
    response_remark: str | None = None


def _get_long(s: str) -> int:
    try:
        return int(s)
    except ValueError:
        log.error("GetLong error: %r", s)
        return -1


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TransactionalMessageService:
    def __init__(self, bridge: TransactionalMessageBridge, file_reserved_time_hours: int = 72) -> None:
        self.bridge = bridge
        self.file_reserved_time_hours = file_reserved_time_hours
        # (half queue id, half queue offset) of the half messages an op message resolves: those written since start
        # and, after ``load()``, those the op queue holds past the check's op offset (not yet consolidated)
        self._resolved: set[tuple[int, int]] = set()

    def load(self) -> None:
        """Remember the half messages the op queues resolve past the check's op offsets (after a restart)."""
        for queue_id in range(self.bridge.topic_queue_nums(OP_TOPIC)):
            offset = self.bridge.fetch_consume_offset(OP_TOPIC, queue_id)
            while offset >= 0:
                pull = self.bridge.get_op_message(queue_id, offset, OP_PULL_NUMS)
                if pull.status != "FOUND" or not pull.messages:
                    break
                for op in pull.messages:
                    if op.tags == REMOVETAG:
                        self._remember(queue_id, _get_long(op.body.decode("utf-8", "replace")))
                offset = pull.next_begin_offset
        if self._resolved:
            log.info("%d resolved half messages not yet consolidated by the check", len(self._resolved))

    def is_resolved(self, msg_ext: MessageExt) -> bool:
        """An op message already resolves this half message (an END_TRANSACTION or check answer came before)."""
        return (msg_ext.queue_id, msg_ext.queue_offset) in self._resolved

    def _remember(self, queue_id: int, half_offset: int) -> None:
        resolved = self._resolved
        resolved.add((queue_id, half_offset))
        if len(resolved) > MAX_REMEMBERED_RESOLVED:  # keep the newest: old duplicates are not worth the memory
            for key in sorted(resolved)[: MAX_REMEMBERED_RESOLVED // 10]:
                resolved.discard(key)

    # --- END_TRANSACTION -------------------------------------------------------------------------------------
    def _half_message_by_offset(self, commitlog_offset: int) -> OperationResult:
        msg = self.bridge.look_message_by_offset(commitlog_offset)
        if msg is not None and not is_half_message(msg):
            log.warning("end transaction: the record at commitlog offset %d is no half message", commitlog_offset)
            msg = None
        if msg is None:
            return OperationResult(None, ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
        return OperationResult(msg, ResponseCode.SUCCESS)

    def commit_message(self, header: EndTransactionRequestHeader) -> OperationResult:
        return self._half_message_by_offset(header.commitLogOffset)

    def rollback_message(self, header: EndTransactionRequestHeader) -> OperationResult:
        return self._half_message_by_offset(header.commitLogOffset)

    def delete_prepare_message(self, msg_ext: MessageExt) -> bool:
        if not self.bridge.put_op_message(msg_ext):
            return False
        self._remember(msg_ext.queue_id, msg_ext.queue_offset)
        return True

    # --- the check -------------------------------------------------------------------------------------------
    def _need_discard(self, msg_ext: MessageExt, transaction_check_max: int) -> bool:
        check_times = msg_ext.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES)
        check_time = 1
        if check_times is not None:
            try:
                check_time = int(check_times)
            except ValueError:
                check_time = -1
            if check_time >= transaction_check_max:
                return True
            check_time += 1
        msg_ext.properties[PROPERTY_TRANSACTION_CHECK_TIMES] = str(check_time)
        return False

    def _need_skip(self, msg_ext: MessageExt) -> bool:
        if _now_ms() - msg_ext.born_timestamp > self.file_reserved_time_hours * 3600 * 1000:
            log.info("half message exceeds the file reserved time, so skip it: %s", msg_ext.msg_id)
            return True
        return False

    def _put_back_half_msg_queue(self, msg_ext: MessageExt) -> bool:
        """Put the half message again; ``msg_ext`` then names the new record (offsets, msg id)."""
        try:
            result = self.bridge.renew_half_message(msg_ext)
        except Exception:
            log.exception("put back half message failed")
            return False
        if result.status != PutMessageStatus.PUT_OK:
            log.error("put back half message failed: %s", result.status.name)
            return False
        msg_ext.queue_offset = result.queue_offset
        msg_ext.commitlog_offset = result.commitlog_offset
        msg_ext.msg_id = result.msg_id or msg_ext.msg_id
        return True

    def _fill_op_remove_map(
        self,
        remove_map: dict[int, int],
        op_queue_id: int,
        pull_offset_of_op: int,
        mini_offset: int,
        done_op_offset: list[int],
    ) -> PullOutcome:
        pull = self.bridge.get_op_message(op_queue_id, pull_offset_of_op, OP_PULL_NUMS)
        if pull.status in ("OFFSET_ILLEGAL", "NO_MATCHED_MSG"):
            log.warning("the op offset %d in queue %d is illegal: %s", pull_offset_of_op, op_queue_id, pull.status)
            self.bridge.update_consume_offset(OP_TOPIC, op_queue_id, pull.next_begin_offset)
            return pull
        if pull.status == "NO_NEW_MSG":
            return pull
        for op in pull.messages:
            half_offset = _get_long(op.body.decode("utf-8", "replace"))
            if op.tags == REMOVETAG:
                if half_offset < mini_offset:
                    done_op_offset.append(op.queue_offset)
                else:
                    remove_map[half_offset] = op.queue_offset
            else:
                log.error("found an illegal tag in op message: %r", op.tags)
        return pull

    def _check_prepare_queue_offset(
        self, remove_map: dict[int, int], done_op_offset: list[int], msg_ext: MessageExt
    ) -> bool:
        """True: skip this message (resolved under its first offset, or put back with its immunity)."""
        prepared = msg_ext.properties.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
        if prepared is None:
            return self.bridge.renew_immunity_half_message(msg_ext)
        prepare_queue_offset = _get_long(prepared)
        if prepare_queue_offset == -1:
            return False
        if prepare_queue_offset in remove_map:
            done_op_offset.append(remove_map.pop(prepare_queue_offset))
            return True
        return self.bridge.renew_immunity_half_message(msg_ext)

    def _immunity_time(self, text: str, transaction_timeout: int) -> int:
        value = _get_long(text)
        return transaction_timeout if value == -1 else value * 1000

    def check(self, transaction_timeout: int, transaction_check_max: int, listener: CheckListener) -> None:
        try:
            queue_ids = self.bridge.fetch_message_queues(HALF_TOPIC)
            for queue_id in queue_ids:
                self._check_queue(queue_id, transaction_timeout, transaction_check_max, listener)
        except Exception:
            log.exception("transaction check failed")

    def _check_queue(
        self, queue_id: int, transaction_timeout: int, transaction_check_max: int, listener: CheckListener
    ) -> None:
        bridge = self.bridge
        start_time = _now_ms()
        half_offset = bridge.fetch_consume_offset(HALF_TOPIC, queue_id)
        op_offset = bridge.fetch_consume_offset(OP_TOPIC, queue_id)
        if half_offset < 0 or op_offset < 0:
            log.error("half queue %d: illegal offset read: %d, op offset: %d", queue_id, half_offset, op_offset)
            return
        done_op_offset: list[int] = []
        remove_map: dict[int, int] = {}
        pull = self._fill_op_remove_map(remove_map, queue_id, op_offset, half_offset, done_op_offset)
        get_message_null_count = 1
        new_offset = half_offset
        i = half_offset
        while True:
            if _now_ms() - start_time > MAX_PROCESS_TIME_LIMIT_MS:
                log.info("half queue %d: process time reached max %d ms", queue_id, MAX_PROCESS_TIME_LIMIT_MS)
                break
            if i in remove_map:
                done_op_offset.append(remove_map.pop(i))
            else:
                half = bridge.get_half_message(queue_id, i, PULL_MSG_RETRY_NUMBER)
                msg_ext = half.messages[0] if half.messages else None
                if msg_ext is None:
                    get_message_null_count += 1
                    if get_message_null_count - 1 > MAX_RETRY_COUNT_WHEN_HALF_NULL:
                        break
                    if half.status == "NO_NEW_MSG":
                        break
                    log.info(
                        "half queue %d: illegal offset %d (%s), go on at %d",
                        queue_id,
                        i,
                        half.status,
                        half.next_begin_offset,
                    )
                    i = half.next_begin_offset
                    new_offset = i
                    continue
                if self._need_discard(msg_ext, transaction_check_max) or self._need_skip(msg_ext):
                    listener.resolve_discard_msg(msg_ext)
                    new_offset = i + 1
                    i += 1
                    continue
                if msg_ext.store_timestamp >= start_time:
                    break  # stored after this check began: check it later
                value_of_current_minus_born = _now_ms() - msg_ext.born_timestamp
                check_immunity_time = transaction_timeout
                immunity = msg_ext.properties.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
                if immunity is not None:
                    check_immunity_time = self._immunity_time(immunity, transaction_timeout)
                    if value_of_current_minus_born < check_immunity_time:
                        if self._check_prepare_queue_offset(remove_map, done_op_offset, msg_ext):
                            new_offset = i + 1
                            i += 1
                            continue
                elif 0 <= value_of_current_minus_born < check_immunity_time:
                    break  # new arrived: check it later
                op_msgs = pull.messages if pull.status == "FOUND" and pull.messages else None
                is_need_check = (
                    (op_msgs is None and value_of_current_minus_born > check_immunity_time)
                    or (op_msgs is not None and op_msgs[-1].born_timestamp - start_time > transaction_timeout)
                    or value_of_current_minus_born <= -1
                )
                if is_need_check:
                    if not self._put_back_half_msg_queue(msg_ext):
                        continue
                    listener.resolve_half_msg(msg_ext)
                else:
                    pull = self._fill_op_remove_map(
                        remove_map, queue_id, pull.next_begin_offset, half_offset, done_op_offset
                    )
                    if op_msgs is None and pull.status != "FOUND":
                        break  # no op message to wait for and none coming now: look again next check (4.9 spins)
                    continue
            new_offset = i + 1
            i += 1
        if new_offset != half_offset:
            bridge.update_consume_offset(HALF_TOPIC, queue_id, new_offset)
        new_op_offset = _calculate_op_offset(done_op_offset, op_offset)
        if new_op_offset != op_offset:
            bridge.update_consume_offset(OP_TOPIC, queue_id, new_op_offset)


def _calculate_op_offset(done_offset: list[int], old_offset: int) -> int:
    new_offset = old_offset
    for offset in sorted(done_offset):
        if offset == new_offset:
            new_offset += 1
        else:
            break
    return new_offset
