"""Broker2Client (br/client/net/Broker2Client.java): the requests a broker sends to its clients on their own
connections for the admin tools.

Owns ``reset_offset`` (INVOKE_BROKER_TO_RESET_OFFSET 222 → RESET_CONSUMER_CLIENT_OFFSET to each client),
``get_consume_status`` (INVOKE_BROKER_TO_GET_CONSUMER_STATUS 223 → GET_CONSUMER_STATUS_FROM_CLIENT) and the
pass-through ``call_client`` (GET_CONSUMER_RUNNING_INFO 307, CONSUME_MESSAGE_DIRECTLY 309).
Invariants: the committed offsets are not changed here — the clients commit the reset offsets themselves; a POP
group's next pop of each queue starts at the reset offset (``PopService.assign_reset_offset``, as 5.3).
Thread-safety: runs on the broker's event loop (``Connection.send`` must be called from it).
Details: docs/BROKER_DESIGN.md, 'Requests to clients'.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from rmq_core.common.mq_version import V3_0_7_SNAPSHOT, version_desc
from rmq_core.message import MessageQueue
from rmq_core.remoting import fastjson
from rmq_core.remoting.body.queue_offsets import GetConsumerStatusBody, ResetOffsetBody
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import GetConsumerStatusRequestHeader, ResetOffsetRequestHeader, encode_header
from rmq_core.remoting.request_limits import FASTJSON_FALLBACK_MAX

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.client.consumer_manager import ConsumerManager
    from rmq_core.broker.consumer_offset_manager import ConsumerOffsetManager
    from rmq_core.broker.topic_config_manager import TopicConfigManager
    from rmq_core.remoting.connection import Connection
    from rmq_core.remoting.remoting_server import RemotingServer
    from rmq_core.store import MessageStore

log = logging.getLogger(__name__)

CALL_CLIENT_TIMEOUT_S = 5.0
CONSUME_MSG_TIMEOUT = 207  # ResponseCode.CONSUME_MSG_TIMEOUT


class PopResets(Protocol):
    """The POP side of an offset reset (``PopService``; seen through this, the broker's packages form no cycle)."""

    def assign_reset_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None: ...


class BrokerToClient:
    """``BrokerToClient(...collaborators)``; see the module docstring."""

    def __init__(
        self,
        broker_config: BrokerConfig,
        message_store: MessageStore,
        topic_config_manager: TopicConfigManager,
        consumer_offset_manager: ConsumerOffsetManager,
        consumer_manager: ConsumerManager,
        remoting_server: RemotingServer,
    ) -> None:
        self.broker_config = broker_config
        self.message_store = message_store
        self.topic_config_manager = topic_config_manager
        self.consumer_offset_manager = consumer_offset_manager
        self.consumer_manager = consumer_manager
        self.remoting_server = remoting_server
        self.pop_service: PopResets | None = None  # told of resets (POP groups' offsets), if set

    def reset_offset(
        self, request: RemotingCommand, topic: str, group: str, timestamp: int, is_force: bool
    ) -> RemotingCommand:
        config = self.topic_config_manager.select_topic_config(topic)
        if config is None:
            return _error(request, f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}")
        table: dict[MessageQueue, int] = {}
        store = self.message_store
        for qid in range(config.write_queue_nums):
            mq = MessageQueue(topic, self.broker_config.broker_name, qid)
            committed = self.consumer_offset_manager.query_offset(group, topic, qid)
            if committed == -1:
                return _error(request, f"THe consumer group <{group}> not exist")
            if timestamp == -1:
                at_time = store.get_max_offset_in_queue(topic, qid)
            else:
                at_time = store.get_offset_in_queue_by_time(topic, qid, timestamp)
            at_time = max(at_time, 0)
            table[mq] = at_time if is_force or at_time < committed else committed
        body = ResetOffsetBody(table).encode()
        header = ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp, isForce=is_force)
        ext = encode_header(header)
        ext["isForce"] = "false"  # 4.9's Broker2Client leaves isForce unset: its primitive false goes on the wire
        info = self.consumer_manager.get_consumer_group_info(group)
        if info is None or not info.channel_info_table:
            return RemotingCommand.response_to(
                request,
                ResponseCode.CONSUMER_NOT_ONLINE,
                remark=f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic} "
                f"Timestamp: {timestamp}",
            )
        if self.pop_service is not None:  # a POP group's offsets are the broker's: its next pops start there
            for mq, offset in table.items():
                self.pop_service.assign_reset_offset(group, topic, mq.queue_id, offset)
        for conn, channel in list(info.channel_info_table.items()):
            if channel.version < V3_0_7_SNAPSHOT:
                return _error(
                    request, f"the client does not support this feature. version={version_desc(channel.version)}"
                )
            to_client = RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, dict(ext), body)
            try:
                conn.send(to_client.mark_oneway())
                log.info(
                    "[reset-offset] reset offset success. topic=%s, group=%s, clientId=%s",
                    topic,
                    group,
                    channel.client_id,
                )
            except ConnectionError as e:
                log.error("[reset-offset] reset offset exception. topic=%s, group=%s, error=%s", topic, group, e)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    async def get_consume_status(
        self, request: RemotingCommand, topic: str, group: str, client_id: str | None
    ) -> RemotingCommand:
        info = self.consumer_manager.get_consumer_group_info(group)
        if info is None or not info.channel_info_table:
            return _error(request, f"No Any Consumer online in the consumer group: [{group}]")
        ext = encode_header(GetConsumerStatusRequestHeader(topic=topic, group=group))
        tables: dict[str, fastjson.RawValue] = {}
        for conn, channel in list(info.channel_info_table.items()):
            if channel.version < V3_0_7_SNAPSHOT:
                return _error(
                    request, f"the client does not support this feature. version={version_desc(channel.version)}"
                )
            if client_id and client_id != channel.client_id:
                continue
            to_client = RemotingCommand.request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, dict(ext))
            try:
                response = await self.remoting_server.invoke(conn, to_client, CALL_CLIENT_TIMEOUT_S)
                if response.code == ResponseCode.SUCCESS and response.body:
                    if len(response.body) > FASTJSON_FALLBACK_MAX:  # (a per-character scan: request_limits)
                        raise ValueError(f"the client's answer of {len(response.body)} bytes is too large")
                    raw = fastjson.raw_field(bytes(response.body), "messageQueueTable")
                    if raw is not None:
                        tables[channel.client_id] = fastjson.RawValue(raw)
            except (TimeoutError, ConnectionError, ValueError) as e:
                log.error(
                    "[get-consumer-status] get consumer status exception. topic=%s, group=%s, error=%s", topic, group, e
                )
            if client_id:
                break
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=GetConsumerStatusBody(tables).encode())

    async def call_client(
        self, request: RemotingCommand, conn: Connection, group: str, client_id: str, code: int
    ) -> RemotingCommand:
        forward = RemotingCommand.request(code, dict(request.ext_fields), request.body)
        try:
            response = await self.remoting_server.invoke(conn, forward, CALL_CLIENT_TIMEOUT_S)
        except TimeoutError as e:
            return RemotingCommand.response_to(
                request, CONSUME_MSG_TIMEOUT, remark=f"consumer <{group}> <{client_id}> Timeout: {e}"
            )
        except (ConnectionError, OSError) as e:
            return _error(request, f"invoke consumer <{group}> <{client_id}> Exception: {e}")
        return RemotingCommand.response_to(
            request, response.code, remark=response.remark, ext_fields=dict(response.ext_fields), body=response.body
        )


def _error(request: RemotingCommand, remark: str) -> RemotingCommand:
    return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark=remark)
