"""QueryMessageProcessor: VIEW_MESSAGE_BY_ID (33) and QUERY_MESSAGE (12), as RocketMQ's
``br/processor/QueryMessageProcessor.java`` answers them.

Owns: the one record at a commit-log offset (SYSTEM_ERROR "can not find message by the offset, <offset>" when it is
not a record's start), and the records a key or UNIQ_KEY finds in the store's index files (4.9's remark when none).
Invariants: a response body is only ever a whole record the store wrote; a missing header field is SYSTEM_ERROR
naming it.
Thread-safety: runs on the broker's event loop only (store reads are thread-safe).
Details: docs/BROKER_DESIGN.md, 'Queries by offset and key'.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmq_core.format.index import DEFAULT_QUERY_MAX_NUM
from rmq_core.format.message import (
    MIN_RECORD_LEN_V1_IPV4,
    RECORD_HEADER_LEN,
    is_message_magic,
    record_magic,
    record_physical_offset,
    record_total_size,
)
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    UNIQUE_MSG_QUERY_FLAG,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
    decode_header,
    encode_header,
)

if TYPE_CHECKING:
    from rmq_core.remoting.connection import Connection
    from rmq_core.store import MessageStore, StoreConfig

RECORD_SIZE_SLACK = 64 * 1024  # a record may be this much larger than max_message_size (headers, topic, properties)

NOT_FOUND_REMARK = "can not find message, maybe time range not correct"


class QueryMessageProcessor:
    """``QueryMessageProcessor(message_store, store_config)``; ``await process_request(conn, request)``."""

    request_codes = (RequestCode.VIEW_MESSAGE_BY_ID, RequestCode.QUERY_MESSAGE)

    def __init__(self, message_store: MessageStore, store_config: StoreConfig) -> None:
        self.message_store = message_store
        self.store_config = store_config

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.VIEW_MESSAGE_BY_ID:
            return self.view_message_by_id(conn, request)
        if request.code == RequestCode.QUERY_MESSAGE:
            return self.query_message(conn, request)
        return RemotingCommand.response_to(
            request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {request.code} not supported"
        )

    def view_message_by_id(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_header(ViewMessageRequestHeader, request.ext_fields)
        record = self.select_one_message_by_offset(header.offset)
        if record is None:
            return RemotingCommand.response_to(
                request, ResponseCode.SYSTEM_ERROR, remark=f"can not find message by the offset, {header.offset}"
            )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=record)

    def select_one_message_by_offset(self, offset: int) -> bytes | None:
        """The whole record starting at ``offset``, or None when no message record starts there."""
        store = self.message_store
        if offset < 0 or offset < store.min_physical_offset or offset >= store.max_physical_offset:
            return None
        head = store.read_commit_log(offset, RECORD_HEADER_LEN)
        if head is None or len(head) < RECORD_HEADER_LEN:
            return None
        if not is_message_magic(record_magic(head)):
            return None
        size = record_total_size(head)
        if size < MIN_RECORD_LEN_V1_IPV4 or size > self.store_config.max_message_size + RECORD_SIZE_SLACK:
            return None
        record = store.read_commit_log(offset, size)
        if record is None or len(record) != size:
            return None
        if record_physical_offset(record) != offset:
            return None
        return bytes(record)

    def query_message(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_header(QueryMessageRequestHeader, request.ext_fields)
        max_num = header.maxNum
        if (request.ext_fields or {}).get(UNIQUE_MSG_QUERY_FLAG) == "true":
            max_num = DEFAULT_QUERY_MAX_NUM
        result = self.message_store.query_message_result(
            header.topic, header.key, max_num, header.beginTimestamp, header.endTimestamp
        )
        ext = encode_header(
            QueryMessageResponseHeader(
                indexLastUpdateTimestamp=result.index_last_update_timestamp,
                indexLastUpdatePhyoffset=result.index_last_update_phyoffset,
            )
        )
        if result.count > 0:
            return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=result.records, ext_fields=ext)
        return RemotingCommand.response_to(
            request, ResponseCode.QUERY_NOT_FOUND, remark=NOT_FOUND_REMARK, ext_fields=ext
        )
