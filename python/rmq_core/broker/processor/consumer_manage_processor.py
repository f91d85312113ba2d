"""ConsumerManageProcessor: QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15) and GET_CONSUMER_LIST_BY_GROUP
(38), as RocketMQ's ``br/processor/ConsumerManageProcessor.java`` answers them.

Owns: the committed offset or 0 for a new group while the queue's head is "hot" (4.9's rule), else QUERY_NOT_FOUND;
a commit only for a topic and queue the broker holds and a valid group name (stricter than 4.9).
Invariants: a missing required header field is answered SYSTEM_ERROR naming it (``HeaderError`` through the
transport); nothing is committed for a request that does not decode.
Thread-safety: runs on the broker's event loop only, like every manager it calls.
Details: docs/BROKER_DESIGN.md, 'Consumer offsets over the wire'.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmq_core.common.mix_all import validate_group
from rmq_core.format.cq_unit import CQ_STORE_UNIT_SIZE, decode_unit
from rmq_core.remoting.body.heartbeat import GetConsumerListByGroupResponseBody
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    GetConsumerListByGroupRequestHeader,
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    decode_header,
    encode_header,
)

if TYPE_CHECKING:
    from rmq_core.broker.client.consumer_manager import ConsumerManager
    from rmq_core.broker.consumer_offset_manager import ConsumerOffsetManager
    from rmq_core.broker.topic_config_manager import TopicConfigManager
    from rmq_core.remoting.connection import Connection
    from rmq_core.store import MessageStore, StoreConfig

log = logging.getLogger(__name__)


class ConsumerManageProcessor:
    """``ConsumerManageProcessor(...collaborators)``; ``await process_request(conn, request)``."""

    request_codes = (
        RequestCode.QUERY_CONSUMER_OFFSET,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        RequestCode.GET_CONSUMER_LIST_BY_GROUP,
    )

    def __init__(
        self,
        consumer_manager: ConsumerManager,
        consumer_offset_manager: ConsumerOffsetManager,
        message_store: MessageStore,
        store_config: StoreConfig,
        topic_config_manager: TopicConfigManager,
    ) -> None:
        self.topic_config_manager = topic_config_manager
        self.consumer_manager = consumer_manager
        self.consumer_offset_manager = consumer_offset_manager
        self.message_store = message_store
        self.store_config = store_config

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        code = request.code
        if code == RequestCode.QUERY_CONSUMER_OFFSET:
            return self.query_consumer_offset(conn, request)
        if code == RequestCode.UPDATE_CONSUMER_OFFSET:
            return self.update_consumer_offset(conn, request)
        if code == RequestCode.GET_CONSUMER_LIST_BY_GROUP:
            return self.get_consumer_list_by_group(conn, request)
        return RemotingCommand.response_to(
            request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {code} not supported"
        )

    # --- GET_CONSUMER_LIST_BY_GROUP --------------------------------------------------------------------------
    def get_consumer_list_by_group(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_header(GetConsumerListByGroupRequestHeader, request.ext_fields)
        info = self.consumer_manager.get_consumer_group_info(header.consumerGroup)
        if info is not None:
            client_ids = list(info.get_all_client_ids())
            if client_ids:
                body = GetConsumerListByGroupResponseBody(consumer_id_list=client_ids)
                return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body.encode())
            log.info("getAllClientId failed, %s %s", header.consumerGroup, conn.remote_address)
        else:
            log.info("getConsumerGroupInfo failed, %s %s", header.consumerGroup, conn.remote_address)
        # INFO, not 4.9's warn: a group's last consumer leaving (every shutdown) makes the others' rebalance ask
        return RemotingCommand.response_to(
            request, ResponseCode.SYSTEM_ERROR, remark=f"no consumer for this group, {header.consumerGroup}"
        )

    # --- UPDATE_CONSUMER_OFFSET ------------------------------------------------------------------------------
    def update_consumer_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_header(UpdateConsumerOffsetRequestHeader, request.ext_fields)
        group, topic, queue_id = header.consumerGroup, header.topic, header.queueId
        problem = validate_group(group)
        if problem is not None:
            return RemotingCommand.response_to(request, ResponseCode.INVALID_PARAMETER, remark=problem[:300])
        config = self.topic_config_manager.select_topic_config(topic)
        if config is None:
            return RemotingCommand.response_to(
                request, ResponseCode.TOPIC_NOT_EXIST, remark=f"Topic {topic[:200]} not exist!"
            )
        if not 0 <= queue_id < max(config.read_queue_nums, config.write_queue_nums):
            return RemotingCommand.response_to(
                request, ResponseCode.INVALID_PARAMETER, remark=f"QueueId {queue_id} is illegal for topic {topic}"
            )
        self.consumer_offset_manager.commit_offset(
            conn.remote_address, header.consumerGroup, header.topic, header.queueId, header.commitOffset
        )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    # --- QUERY_CONSUMER_OFFSET -------------------------------------------------------------------------------
    def query_consumer_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_header(QueryConsumerOffsetRequestHeader, request.ext_fields)
        offset = self.consumer_offset_manager.query_offset(header.consumerGroup, header.topic, header.queueId)
        if offset >= 0:
            return _offset_response(request, offset)
        if header.setZeroIfNotFound is False:
            return RemotingCommand.response_to(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                remark="Not found, do not set to zero, maybe this group boot first",
            )
        store = self.message_store
        min_offset = store.get_min_offset_in_queue(header.topic, header.queueId)
        if min_offset <= 0 and not self.check_in_disk_by_consume_offset(header.topic, header.queueId, 0):
            return _offset_response(request, 0)
        return RemotingCommand.response_to(
            request,
            ResponseCode.QUERY_NOT_FOUND,
            remark="Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
        )

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        """4.9 ``DefaultMessageStore#checkInDiskByConsumeOffset``: is the message at ``consume_offset`` older than the
        share of RAM the store expects to keep in the page cache? A missing unit is "not on disk"."""
        store = self.message_store
        _next, units = store.scan_consume_queue(topic, queue_id, consume_offset, 1)
        if len(units) < CQ_STORE_UNIT_SIZE:
            return False
        phy_offset, _size, _tags_code = decode_unit(units)
        cfg = self.store_config
        memory = cfg.total_physical_memory * cfg.access_message_in_memory_max_ratio // 100
        return store.max_physical_offset - phy_offset > memory


def _offset_response(request: RemotingCommand, offset: int) -> RemotingCommand:
    return RemotingCommand.response_to(
        request, ResponseCode.SUCCESS, ext_fields=encode_header(OffsetResponseHeader(offset=offset))
    )
