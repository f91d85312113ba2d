"""AdminConsumerProcessor: the admin requests 4.9's ``AdminBrokerProcessor`` answers by asking the group's clients
(through BrokerToClient):

- INVOKE_BROKER_TO_RESET_OFFSET (222, ``mqadmin resetOffsetByTime``): header ResetOffsetRequestHeader → the reset
  offsets sent to every client of the group, answered with ResetOffsetBody.
- INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223, ``mqadmin getConsumerStatus``): header GetConsumerStatusRequestHeader →
  GetConsumerStatusBody gathered from the clients.
- GET_CONSUMER_RUNNING_INFO (307, ``mqadmin consumerStatus``) and CONSUME_MESSAGE_DIRECTLY (309,
  ``mqadmin consumeMessage``): forwarded to the client named by ``clientId`` (the message's bytes attached for 309,
  ``brokerName`` added, as 4.9 does); "The Consumer <G> <id> not online" when it is not connected here, and a
  client older than V3_1_8_SNAPSHOT is refused.

Invariants: the broker changes nothing itself; what the clients answer is passed on unchanged.
Thread-safety: runs on the broker's event loop; 223/307/309 await the clients (5 s each at most).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from rmq_core.common.mq_version import V3_1_8_SNAPSHOT, version_desc
from rmq_core.message import decode_offset_msg_id
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    ResetOffsetRequestHeader,
    decode_header,
)

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.client.broker_to_client import BrokerToClient
    from rmq_core.broker.client.consumer_manager import ConsumerManager
    from rmq_core.remoting.connection import Connection
    from rmq_core.store import MessageStore

log = logging.getLogger(__name__)


class AdminConsumerProcessor:
    """``AdminConsumerProcessor(...collaborators)``; ``await process_request(conn, request)``."""

    request_codes = (
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
        RequestCode.GET_CONSUMER_RUNNING_INFO,
        RequestCode.CONSUME_MESSAGE_DIRECTLY,
    )

    def __init__(
        self,
        broker_config: BrokerConfig,
        message_store: MessageStore,
        consumer_manager: ConsumerManager,
        broker_to_client: BrokerToClient,
    ) -> None:
        self.broker_config = broker_config
        self.message_store = message_store
        self.consumer_manager = consumer_manager
        self.broker_to_client = broker_to_client
        self._handlers: dict[int, Callable[[Connection, RemotingCommand], Awaitable[RemotingCommand]]] = {
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: self.get_consumer_status,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.get_consumer_running_info,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly,
        }

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        handler = self._handlers.get(request.code)
        if handler is None:
            return RemotingCommand.response_to(
                request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {request.code} not supported"
            )
        return await handler(conn, request)

    async def reset_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(ResetOffsetRequestHeader, request.ext_fields)
        log.info(
            "[reset-offset] reset offset started by %s. topic=%s, group=%s, timestamp=%s, isForce=%s",
            conn.remote_address,
            h.topic,
            h.group,
            h.timestamp,
            h.isForce,
        )
        return self.broker_to_client.reset_offset(request, h.topic, h.group, h.timestamp, h.isForce)

    async def get_consumer_status(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetConsumerStatusRequestHeader, request.ext_fields)
        log.info(
            "[get-consumer-status] get consumer status by %s. topic=%s, group=%s", conn.remote_address, h.topic, h.group
        )
        return await self.broker_to_client.get_consume_status(request, h.topic, h.group, h.clientAddr)

    async def get_consumer_running_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(GetConsumerRunningInfoRequestHeader, request.ext_fields)
        return await self._call_consumer(RequestCode.GET_CONSUMER_RUNNING_INFO, request, h.consumerGroup, h.clientId)

    async def consume_message_directly(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        h = decode_header(ConsumeMessageDirectlyResultRequestHeader, request.ext_fields)
        request.ext_fields["brokerName"] = self.broker_config.broker_name
        if h.msgId:
            try:
                _host, offset = decode_offset_msg_id(h.msgId)
                msg = self.message_store.look_message_by_offset(offset)
                if msg is not None:
                    size = int.from_bytes(self.message_store.read_commit_log(offset, 4) or b"\0\0\0\0", "big")
                    request.body = self.message_store.read_commit_log(offset, size)
            except (ValueError, OSError) as e:
                log.warning("consumeMessageDirectly: message %s not read: %s", h.msgId, e)
        return await self._call_consumer(RequestCode.CONSUME_MESSAGE_DIRECTLY, request, h.consumerGroup, h.clientId)

    async def _call_consumer(
        self, code: int, request: RemotingCommand, group: str, client_id: str | None
    ) -> RemotingCommand:
        channel = self.consumer_manager.find_channel(group, client_id or "")
        if channel is None:
            return _error(request, f"The Consumer <{group}> <{client_id}> not online")
        if channel.version < V3_1_8_SNAPSHOT:
            return _error(
                request,
                f"The Consumer <{client_id}> Version <{version_desc(channel.version)}> too low to finish, please "
                "upgrade it to V3_1_8_SNAPSHOT",
            )
        return await self.broker_to_client.call_client(request, channel.conn, group, client_id or "", code)


def _error(request: RemotingCommand, remark: str) -> RemotingCommand:
    return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark=remark)
