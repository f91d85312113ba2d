"""ClientRemotingProcessor (4.9 ``org.apache.rocketmq.client.impl.ClientRemotingProcessor``): the requests a broker
sends to a client, served on the instance's ``RemotingClient`` (its ``request_handler``).

NOTIFY_CONSUMER_IDS_CHANGED wakes the rebalance; RESET_CONSUMER_CLIENT_OFFSET (oneway) resets offsets in a task of the
instance; GET_CONSUMER_STATUS_FROM_CLIENT, GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY answer ``mqadmin``;
CHECK_TRANSACTION_STATE (oneway) hands the half message to its transactional producer's check. Unknown codes get
REQUEST_CODE_NOT_SUPPORTED; a request that does not decode gets SYSTEM_ERROR (a oneway one, a log line). Every answer
carries the client's ``language``.

The processor sees its instance through ``ProcessorHost`` (the instance builds it; it imports nothing of the
instance). Thread-safety: the instance's loop only.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from rmq_core.message import PROPERTY_PRODUCER_GROUP, decode_messages
from rmq_core.remoting.body.queue_offsets import GetConsumerStatusBody, ResetOffsetBody
from rmq_core.remoting.body.route import BodyDecodeError
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand, RemotingCommandError
from rmq_core.remoting.header import (
    CheckTransactionStateRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    ResetOffsetRequestHeader,
    decode_header,
)

if TYPE_CHECKING:
    import asyncio

    from rmq_core.client.client_config import ClientConfig
    from rmq_core.message import MessageExt, MessageQueue
    from rmq_core.remoting.body.consumer_running_info import ConsumeMessageDirectlyResult, ConsumerRunningInfo
    from rmq_core.remoting.connection import Connection

log = logging.getLogger(__name__)


class ProcessorHost(Protocol):
    """What the processor needs of its ``MQClientInstance``."""

    client_config: ClientConfig

    def rebalance_immediately(self) -> None: ...
    def spawn(self, coro: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task[Any]: ...
    def reset_offset(
        self, topic: str, group: str, offset_table: dict[MessageQueue, int]
    ) -> Coroutine[Any, Any, None]: ...
    def get_consumer_status(self, topic: str, group: str) -> dict[MessageQueue, int]: ...
    def consumer_running_info(self, group: str) -> ConsumerRunningInfo | None: ...
    def consume_message_directly(
        self, msg: MessageExt, group: str, broker_name: str
    ) -> Awaitable[ConsumeMessageDirectlyResult | None]: ...
    def select_producer(self, group: str) -> Any: ...


class ClientRemotingProcessor:
    def __init__(self, instance: ProcessorHost) -> None:
        self.instance = instance

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            try:
                h = decode_header(NotifyConsumerIdsChangedRequestHeader, request.ext_fields)
                log.info(
                    "receive broker's notification[%s], the consumer group: %s changed, rebalance immediately",
                    conn.remote_address,
                    h.consumerGroup,
                )
            except ValueError as e:
                log.warning("bad NOTIFY_CONSUMER_IDS_CHANGED from %s: %s", conn.remote_address, e)
            self.instance.rebalance_immediately()
            return None
        handler = self._request_handlers.get(request.code)
        if handler is not None:
            try:
                response = await handler(self, conn, request)
            except (ValueError, RemotingCommandError, BodyDecodeError) as e:
                log.warning("bad request %d from %s: %s", request.code, conn.remote_address, e)
                if request.is_oneway:
                    return None
                response = RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark=str(e))
            if response is None:
                return None
        else:
            response = RemotingCommand.response_to(
                request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {request.code} not supported"
            )
        response.language = self.instance.client_config.language
        return response

    async def _on_reset_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        """RESET_CONSUMER_CLIENT_OFFSET (oneway from the broker: no answer)."""
        # isForce is not used here; a broker that leaves it out (rmq_core's did) still gets its reset done
        h = decode_header(ResetOffsetRequestHeader, {"isForce": "false", **request.ext_fields})
        log.info(
            "invoke reset offset operation from broker. brokerAddr=%s, topic=%s, group=%s, timestamp=%s",
            conn.remote_address,
            h.topic,
            h.group,
            h.timestamp,
        )
        table = ResetOffsetBody.decode(bytes(request.body)).offset_table if request.body else {}
        self.instance.spawn(self.instance.reset_offset(h.topic, h.group, table), "reset-offset")
        return None

    async def _on_get_consumer_status(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetConsumerStatusRequestHeader, request.ext_fields)
        body = GetConsumerStatusBody(message_queue_table=self.instance.get_consumer_status(h.topic, h.group))
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body.encode())

    async def _on_get_consumer_running_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetConsumerRunningInfoRequestHeader, request.ext_fields)
        info = self.instance.consumer_running_info(h.consumerGroup)
        if info is None:
            return RemotingCommand.response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                remark=f"The Consumer Group <{h.consumerGroup}> not exist in this consumer",
            )
        if h.jstackEnable:
            info.jstack = thread_stacks()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=info.encode())

    async def _on_consume_message_directly(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(ConsumeMessageDirectlyResultRequestHeader, request.ext_fields)
        msgs = decode_messages(bytes(request.body or b""))
        if len(msgs) != 1:
            raise ValueError(f"CONSUME_MESSAGE_DIRECTLY carries {len(msgs)} messages, not one")
        result = await self.instance.consume_message_directly(msgs[0], h.consumerGroup, h.brokerName or "")
        if result is None:
            return RemotingCommand.response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                remark=f"The Consumer Group <{h.consumerGroup}> not exist in this consumer",
            )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=result.encode())

    async def _on_check_transaction_state(self, conn: Connection, request: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE (oneway from the broker): the half message's producer runs its check on its own
        executor and ends the transaction (4.9 ClientRemotingProcessor.checkTransactionState)."""
        h = decode_header(CheckTransactionStateRequestHeader, request.ext_fields)
        msgs = decode_messages(bytes(request.body or b""))
        if not msgs:
            log.warning("checkTransactionState, decode message failed")
            return None
        msg = msgs[0]
        group = msg.properties.get(PROPERTY_PRODUCER_GROUP)
        if group is None:
            log.warning("checkTransactionState, pick producer group failed")
            return None
        producer = self.instance.select_producer(group)
        check = getattr(producer, "check_transaction_state", None)
        if check is None:
            log.debug("checkTransactionState, pick producer by group[%s] failed", group)
            return None
        check(conn.remote_address, msg, h)
        return None

    _request_handlers: ClassVar[
        dict[int, Callable[[ClientRemotingProcessor, Connection, RemotingCommand], Awaitable[RemotingCommand | None]]]
    ] = {
        RequestCode.RESET_CONSUMER_CLIENT_OFFSET: _on_reset_offset,
        RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT: _on_get_consumer_status,
        RequestCode.GET_CONSUMER_RUNNING_INFO: _on_get_consumer_running_info,
        RequestCode.CONSUME_MESSAGE_DIRECTLY: _on_consume_message_directly,
        RequestCode.CHECK_TRANSACTION_STATE: _on_check_transaction_state,
    }


def thread_stacks() -> str:
    """Every thread's stack, as ``jstack`` prints them for GET_CONSUMER_RUNNING_INFO's ``jstackEnable``."""
    names = {t.ident: t.name for t in threading.enumerate()}
    out = []
    for ident, frame in sys._current_frames().items():
        out.append(f"Thread: {names.get(ident, ident)}\n" + "".join(traceback.format_stack(frame)))
    return "\n".join(out)
