"""EndTransactionProcessor (4.9 ``br/processor/EndTransactionProcessor.java``): END_TRANSACTION (37), a producer's
commit or rollback of a half message, oneway or not.

Owns the steps: a slave → SLAVE_NOT_AVAILABLE; UNKNOW → no answer; only a real half message (else SYSTEM_ERROR
"Find prepared transaction message failed") with 4.9's PGROUP / queue offset / commitlog offset checks; COMMIT puts
it to ``REAL_TOPIC``/``REAL_QID`` (``InnerPutGuard`` first) then writes the op message; ROLLBACK writes the op
message only.
Invariant: a second END_TRANSACTION of a resolved half message answers SUCCESS and stores nothing.
Thread-safety: the broker's event loop only.
Details: docs/BROKER_DESIGN.md, 'Transactions: END_TRANSACTION'.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmq_core.broker.schedule.schedule_message_service import redirect_to_schedule_topic
from rmq_core.broker.transaction.transactional_message_bridge import reset_transaction_value
from rmq_core.common.log_text import clip
from rmq_core.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    Message,
    MessageExt,
)
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import EndTransactionRequestHeader, HeaderError, decode_header
from rmq_core.store_status import PutMessageStatus

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.inner_put_guard import InnerPutGuard
    from rmq_core.broker.schedule.schedule_message_service import ScheduleMessageService
    from rmq_core.broker.stats.broker_stats_manager import BrokerStatsManager
    from rmq_core.broker.transaction.transactional_message_bridge import TransactionalMessageBridge
    from rmq_core.broker.transaction.transactional_message_service import TransactionalMessageService
    from rmq_core.remoting.connection import Connection

log = logging.getLogger(__name__)

_FINAL_OK = {
    PutMessageStatus.PUT_OK,
    PutMessageStatus.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE,
}


class EndTransactionProcessor:
    request_codes = (RequestCode.END_TRANSACTION,)

    def __init__(
        self,
        broker_config: BrokerConfig,
        service: TransactionalMessageService,
        bridge: TransactionalMessageBridge,
        schedule_message_service: ScheduleMessageService,
        broker_stats_manager: BrokerStatsManager,
        max_message_size: int,
        inner_put_guard: InnerPutGuard,
    ) -> None:
        self.inner_put_guard = inner_put_guard
        self.broker_config = broker_config
        self.service = service
        self.bridge = bridge
        self.schedule_message_service = schedule_message_service
        self.broker_stats_manager = broker_stats_manager
        self.max_message_size = max_message_size

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        response = self._process(conn, request)
        if response is None or request.is_oneway:
            return None
        return response

    def _process(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        def answer(code: int, remark: str | None = None) -> RemotingCommand:
            return RemotingCommand.response_to(request, code, remark=remark)

        try:
            header = decode_header(EndTransactionRequestHeader, request.ext_fields)
        except HeaderError as e:
            return answer(ResponseCode.SYSTEM_ERROR, str(e))
        if self.broker_config.is_slave:
            log.warning("message store is slave mode, so end transaction is forbidden")
            return answer(ResponseCode.SLAVE_NOT_AVAILABLE)
        kind = header.commitOrRollback
        origin = "check" if header.fromTransactionCheck else "send"
        if kind == TRANSACTION_NOT_TYPE:
            log.warning(
                "producer %s: end transaction (%s) pending: %s %s",
                conn.remote_address,
                origin,
                clip(header),
                clip(request.remark),
            )
            return None
        if kind == TRANSACTION_COMMIT_TYPE:
            result = self.service.commit_message(header)
        elif kind == TRANSACTION_ROLLBACK_TYPE:
            log.warning(
                "producer %s: rollback (%s): %s %s", conn.remote_address, origin, clip(header), clip(request.remark)
            )
            result = self.service.rollback_message(header)
        else:
            return None
        if result.response_code != ResponseCode.SUCCESS or result.prepare_message is None:
            return answer(result.response_code, result.response_remark)
        half = result.prepare_message
        refused = self._check_prepare_message(half, header)
        if refused is not None:
            return answer(ResponseCode.SYSTEM_ERROR, refused)
        if self.service.is_resolved(half):  # ended before: answer as if done now, store nothing again
            log.warning(
                "half message at %d (queue offset %d) was already ended; %s ignored",
                header.commitLogOffset,
                half.queue_offset,
                "commit" if kind == TRANSACTION_COMMIT_TYPE else "rollback",
            )
            return answer(ResponseCode.SUCCESS)
        if kind == TRANSACTION_ROLLBACK_TYPE:
            self.service.delete_prepare_message(half)
            return answer(ResponseCode.SUCCESS)
        code, remark = self._send_final_message(half)
        if code == ResponseCode.SUCCESS:
            self.service.delete_prepare_message(half)
        return answer(code, remark)

    @staticmethod
    def _check_prepare_message(half: MessageExt, header: EndTransactionRequestHeader) -> str | None:
        if half.properties.get(PROPERTY_PRODUCER_GROUP) != header.producerGroup:
            return "The producer group wrong"
        if half.queue_offset != header.tranStateTableOffset:
            return "The transaction state table offset wrong"
        if half.commitlog_offset != header.commitLogOffset:
            return "The commit log offset wrong"
        return None

    def _send_final_message(self, half: MessageExt) -> tuple[int, str | None]:
        """``endMessageTransaction`` + ``sendFinalMessage``: the committed message stored in its real queue."""
        properties = dict(half.properties)
        topic = properties.pop(PROPERTY_REAL_TOPIC, None)
        try:
            queue_id = int(properties.pop(PROPERTY_REAL_QUEUE_ID, ""))
        except ValueError:
            queue_id = -1
        if not topic or queue_id < 0:
            return ResponseCode.SYSTEM_ERROR, "the half message has no REAL_TOPIC/REAL_QID"
        refusal = self.inner_put_guard.refusal(topic, queue_id)
        if refusal is not None:
            log.warning("commit of the half message at %d refused: %s", half.commitlog_offset, refusal.remark)
            return refusal.code, refusal.remark
        properties.pop(PROPERTY_TRANSACTION_PREPARED, None)
        msg = Message(topic, half.body, flag=half.flag)
        msg.properties = properties
        sys_flag = reset_transaction_value(half.sys_flag, TRANSACTION_COMMIT_TYPE)
        try:  # 4.9's CommitLog: a COMMIT message with DELAY goes through the schedule topic
            queue_id = redirect_to_schedule_topic(msg, queue_id, self.schedule_message_service.max_delay_level)
        except ValueError as e:
            return ResponseCode.MESSAGE_ILLEGAL, str(e)
        result = self.bridge.put_message(
            msg,
            queue_id,
            half.born_host,
            half.born_timestamp,
            sys_flag,
            half.reconsume_times,
            prepared_transaction_offset=half.commitlog_offset,
        )
        status = result.status
        if status in _FINAL_OK:
            self.broker_stats_manager.inc_put(msg.topic, 1, result.wrote_bytes)
            return ResponseCode.SUCCESS, None
        if status == PutMessageStatus.CREATE_MAPPED_FILE_FAILED:
            return ResponseCode.SYSTEM_ERROR, "Create mapped file failed."
        if status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED):
            return ResponseCode.MESSAGE_ILLEGAL, (
                "The message is illegal, maybe msg body or properties length not matched. msg body length limit "
                f"{self.max_message_size}B, msg properties length limit 32KB."
            )
        if status == PutMessageStatus.SERVICE_NOT_AVAILABLE:
            return ResponseCode.SERVICE_NOT_AVAILABLE, "Service not available now."
        if status == PutMessageStatus.OS_PAGECACHE_BUSY:
            return ResponseCode.SYSTEM_ERROR, "OS page cache busy, please try another machine"
        if status == PutMessageStatus.UNKNOWN_ERROR:
            return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"
        return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"
