"""TransactionProducer (4.9 ``TransactionMQProducer`` + the transaction half of ``DefaultMQProducerImpl``): sends a
message as a transaction's half message, runs the local transaction and ends it with END_TRANSACTION; answers the
broker's CHECK_TRANSACTION_STATE for transactions left open.

Owns ``send_message_in_transaction`` (4.9's rules: 1. the half message send, 2. the local transaction, 3. the oneway
END_TRANSACTION to the queue's master) and the check-back (``check_transaction_state``: the listener's
``check_local_transaction`` on the producer's ``executor``, then END_TRANSACTION with fromTransactionCheck=true).
Invariants: a failed half send raises and nothing is to end; a failed END_TRANSACTION is logged, not raised (the
broker checks back); batches are not transactional (``send_batch`` sends a plain batch, as 4.9's).
Thread-safety: as ``Producer``; ``execute_local_transaction`` runs on the calling thread,
``check_local_transaction`` on the executor's threads.
Details (each rule's fields and codes): docs/CLIENT_DESIGN.md, 'Transaction producer'.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from rmq_core.client.exceptions import MQClientException
from rmq_core.client.producer.local_transaction_state import LocalTransactionState
from rmq_core.client.producer.producer import Producer
from rmq_core.client.producer.transaction_listener import TransactionListener
from rmq_core.client.producer.transaction_send_result import TransactionSendResult
from rmq_core.client.send_result import SendResult, SendStatus
from rmq_core.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
    UNIQ_KEY,
    Message,
    MessageExt,
    decode_offset_msg_id,
)
from rmq_core.remoting.header import CheckTransactionStateRequestHeader, EndTransactionRequestHeader

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

_ROLLBACK_STATUSES = (SendStatus.FLUSH_DISK_TIMEOUT, SendStatus.FLUSH_SLAVE_TIMEOUT, SendStatus.SLAVE_NOT_AVAILABLE)


class TransactionProducer(Producer):
    """``TransactionProducer(group, namesrv_addr=..., transaction_listener=..., executor=None, **Producer settings)``."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        transaction_listener: TransactionListener | None = None,
        *,
        executor: concurrent.futures.Executor | None = None,
        **settings: Any,
    ) -> None:
        super().__init__(group, namesrv_addr, **settings)
        self.transaction_listener = transaction_listener
        self._own_executor = executor is None
        self.executor: concurrent.futures.Executor = executor or concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"rmq-transaction-check-{group}"
        )

    def shutdown(self) -> None:
        super().shutdown()
        if self._own_executor:
            self.executor.shutdown(wait=False, cancel_futures=True)

    # --- the transactional send --------------------------------------------------------------------------------
    def prepare_half_message(self, msg: Message) -> TransactionListener:
        """Step 1 before the send: the listener (MQClientException when none), DELAY dropped, the message checked,
        ``TRAN_MSG`` / ``PGROUP`` set. Shared with ``rmq_core.aio.AsyncTransactionProducer``."""
        listener = self.transaction_listener
        if listener is None:
            raise MQClientException(-1, "TransactionListener is null")
        msg.properties.pop(PROPERTY_DELAY_TIME_LEVEL, None)  # 4.9: "ignore DelayTimeLevel parameter"
        self.check_message(msg)
        msg.properties[PROPERTY_TRANSACTION_PREPARED] = "true"
        msg.properties[PROPERTY_PRODUCER_GROUP] = self.producer_group
        return listener

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        listener = self.prepare_half_message(msg)
        if inspect.iscoroutinefunction(listener.execute_local_transaction):
            raise MQClientException(-1, "an async TransactionListener needs rmq_core.aio.AsyncTransactionProducer")
        try:
            send_result = self.send(msg)
        except Exception as e:
            raise MQClientException(-1, "send message Exception", e) from e
        state = LocalTransactionState.UNKNOW
        local_exception: BaseException | None = None
        if send_result.send_status == SendStatus.SEND_OK:
            try:
                state = listener.execute_local_transaction(msg, arg) or LocalTransactionState.UNKNOW
            except Exception as e:
                log.info("executeLocalTransactionBranch exception: %s", e)
                local_exception = e
        elif send_result.send_status in _ROLLBACK_STATUSES:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            self.end_transaction(send_result, state, local_exception)
        except Exception as e:
            log.warning("local transaction execute %s, but end broker transaction failed: %s", state.value, e)
        return self.transaction_send_result(msg, send_result, state)

    @staticmethod
    def transaction_send_result(
        msg: Message, send_result: SendResult, state: LocalTransactionState
    ) -> TransactionSendResult:
        if state != LocalTransactionState.COMMIT_MESSAGE:
            log.info("executeLocalTransactionBranch return %s: %s", state.value, msg)
        return TransactionSendResult(
            send_result.send_status,
            send_result.msg_id,
            send_result.offset_msg_id,
            send_result.message_queue,
            send_result.queue_offset,
            region_id=send_result.region_id,
            trace_on=send_result.trace_on,
            transaction_id=send_result.transaction_id or msg.properties.get(UNIQ_KEY),
            local_transaction_state=state,
        )

    def end_transaction_coro(
        self, send_result: SendResult, state: LocalTransactionState, local_exception: BaseException | None = None
    ) -> Coroutine[Any, Any, None]:
        """The END_TRANSACTION (oneway) for the half message ``send_result`` names, as a coroutine for the loop."""
        instance = self._make_sure_state_ok()
        _host, commitlog_offset = decode_offset_msg_id(send_result.offset_msg_id or send_result.msg_id or "")
        broker_name = send_result.message_queue.broker_name
        addr = instance.find_broker_address_in_publish(broker_name)
        if addr is None:
            raise MQClientException(-1, f"The broker[{broker_name}] not exist")
        header = EndTransactionRequestHeader(
            producerGroup=self.producer_group,
            tranStateTableOffset=send_result.queue_offset,
            commitLogOffset=commitlog_offset,
            commitOrRollback=state.commit_or_rollback,
            fromTransactionCheck=False,
            msgId=send_result.msg_id or "",
            transactionId=send_result.transaction_id,
        )
        remark = f"executeLocalTransactionBranch exception: {local_exception!r}" if local_exception else None
        return instance.mq_client_api.end_transaction_oneway(addr, header, remark, self.send_msg_timeout)

    def end_transaction(
        self, send_result: SendResult, state: LocalTransactionState, local_exception: BaseException | None = None
    ) -> None:
        """END_TRANSACTION (oneway) for the half message ``send_result`` names."""
        instance = self._make_sure_state_ok()
        coro = self.end_transaction_coro(send_result, state, local_exception)
        instance.run_sync(coro, self._sync_wait_s(self.send_msg_timeout))

    # --- the broker's check-back (MQProducerInner.checkTransactionState) -----------------------------------------
    def check_transaction_state(self, addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader) -> None:
        """Called on the client's loop: the check runs on the producer's executor (an ``async def``
        check_local_transaction, rmq_core.aio's, as a task on the loop)."""
        listener = self.transaction_listener
        instance = self.instance
        if listener is not None and instance is not None:
            if inspect.iscoroutinefunction(listener.check_local_transaction):
                instance.loop.create_task(self._check_transaction_state_async(addr, msg, header))
                return
        try:
            self.executor.submit(self._check_transaction_state, addr, msg, header)
        except RuntimeError:  # the executor is shut down: the producer is going away
            log.info("check of transaction %s dropped: the producer is shut down", header.transactionId)

    def _check_transaction_state(self, addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader) -> None:
        listener = self.transaction_listener
        if listener is None:
            log.warning("checkTransactionState, pick transactionCheckListener by group[%s] failed", self.producer_group)
            return
        state = LocalTransactionState.UNKNOW
        exception: BaseException | None = None
        try:
            state = listener.check_local_transaction(msg) or LocalTransactionState.UNKNOW
        except Exception as e:
            log.error("broker call checkTransactionState, but checkLocalTransactionState exception: %s", e)
            exception = e
        instance = self.instance
        if instance is None:
            return
        coro = self._end_after_check(addr, msg, header, state, exception)
        try:
            asyncio.run_coroutine_threadsafe(coro, instance.loop).result(10)
        except Exception as e:
            log.error("endTransactionOneway exception: %s", e)

    async def _check_transaction_state_async(
        self, addr: str, msg: MessageExt, header: CheckTransactionStateRequestHeader
    ) -> None:
        listener = self.transaction_listener
        assert listener is not None
        state = LocalTransactionState.UNKNOW
        exception: BaseException | None = None
        try:
            state = await listener.check_local_transaction(msg) or LocalTransactionState.UNKNOW  # type: ignore[misc]
        except Exception as e:
            log.error("broker call checkTransactionState, but checkLocalTransactionState exception: %s", e)
            exception = e
        try:
            await self._end_after_check(addr, msg, header, state, exception)
        except Exception as e:
            log.error("endTransactionOneway exception: %s", e)

    async def _end_after_check(
        self,
        addr: str,
        msg: MessageExt,
        header: CheckTransactionStateRequestHeader,
        state: LocalTransactionState,
        exception: BaseException | None,
    ) -> None:
        end = EndTransactionRequestHeader(
            producerGroup=self.producer_group,
            tranStateTableOffset=header.tranStateTableOffset,
            commitLogOffset=header.commitLogOffset,
            commitOrRollback=state.commit_or_rollback,
            fromTransactionCheck=True,
            msgId=msg.properties.get(UNIQ_KEY) or msg.msg_id,
            transactionId=header.transactionId,
        )
        remark = f"checkLocalTransactionState Exception: {exception!r}" if exception is not None else None
        instance = self.instance
        if instance is not None:
            await instance.mq_client_api.end_transaction_oneway(addr, end, remark, 3000)

    def __repr__(self) -> str:
        return f"TransactionProducer({self.producer_group}, {self.service_state}, client_id={self.client_id})"
