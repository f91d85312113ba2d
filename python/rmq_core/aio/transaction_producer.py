"""AsyncTransactionProducer: ``rmq_core.client.TransactionProducer`` on the caller's event loop.

``await send_message_in_transaction(msg, arg)``: the half message (``send_on_loop``), the listener's
``execute_local_transaction`` (awaited when it is ``async def``, else called on the loop: keep it short), and
END_TRANSACTION oneway, as the blocking producer does. The broker's check-back runs an ``async def``
``check_local_transaction`` as a task on the loop, a plain one on the producer's executor.

Thread-safety: none; one event loop (as ``AsyncProducer``).
"""

from __future__ import annotations

import concurrent.futures
import inspect
import logging
from typing import Any

from rmq_core.aio.producer import AsyncProducer
from rmq_core.client.exceptions import MQClientException
from rmq_core.client.producer.local_transaction_state import LocalTransactionState
from rmq_core.client.producer.producer import SYNC
from rmq_core.client.producer.transaction_producer import TransactionProducer
from rmq_core.client.producer.transaction_send_result import TransactionSendResult
from rmq_core.client.send_result import SendStatus
from rmq_core.message import Message

log = logging.getLogger(__name__)

_ROLLBACK_STATUSES = (SendStatus.FLUSH_DISK_TIMEOUT, SendStatus.FLUSH_SLAVE_TIMEOUT, SendStatus.SLAVE_NOT_AVAILABLE)


class AsyncTransactionProducer(AsyncProducer):
    """``AsyncTransactionProducer(group, namesrv_addr=..., transaction_listener=..., executor=None, **settings)``:
    the listener's methods may be ``async def``."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        transaction_listener: Any = None,
        *,
        executor: concurrent.futures.Executor | None = None,
        **settings: Any,
    ) -> None:
        self.producer: TransactionProducer = TransactionProducer(
            group, namesrv_addr, transaction_listener, executor=executor, **settings
        )

    async def shutdown(self) -> None:
        await super().shutdown()
        if self.producer._own_executor:
            self.producer.executor.shutdown(wait=False, cancel_futures=True)

    async def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        p = self.producer
        listener = p.prepare_half_message(msg)
        try:
            send_result = await p.send_on_loop(msg, None, None, SYNC)
        except Exception as e:
            raise MQClientException(-1, "send message Exception", e) from e
        assert send_result is not None
        state = LocalTransactionState.UNKNOW
        local_exception: BaseException | None = None
        if send_result.send_status == SendStatus.SEND_OK:
            try:
                result = listener.execute_local_transaction(msg, arg)
                if inspect.isawaitable(result):
                    result = await result
                state = result or LocalTransactionState.UNKNOW
            except Exception as e:
                log.info("executeLocalTransactionBranch exception: %s", e)
                local_exception = e
        elif send_result.send_status in _ROLLBACK_STATUSES:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            await p.end_transaction_coro(send_result, state, local_exception)
        except Exception as e:
            log.warning("local transaction execute %s, but end broker transaction failed: %s", state.value, e)
        return p.transaction_send_result(msg, send_result, state)

    def __repr__(self) -> str:
        return f"AsyncTransactionProducer({self.producer_group}, {self.producer.service_state})"
