"""PopMessageProcessor: POP_MESSAGE (200050) over remoting, a thin layer over ``broker/pop/pop_service.py``.

The answer is Apache 5.3's: header popTime, invisibleTime, reviveQid, restNum, startOffsetInfo, msgOffsetInfo
(orderCountInfo for FIFO pops), remark the GetMessageStatus name, body the records as stored (a POP retry topic's
records keep their stored topic: the Java client rewrites the topic and reads the retry flag from it, as with
Apache's ``popResponseReturnActualRetryTopic``). Nothing found → POLLING_TIMEOUT, after ``pollTime`` of waiting.
Thread-safety: the broker's event loop; each request runs as its own task (a long poll awaits).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    HeaderError,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    decode_header,
    encode_header,
)

if TYPE_CHECKING:
    from rmq_core.broker.pop.pop_service import PopService
    from rmq_core.remoting.transport import Connection


class PopMessageProcessor:
    def __init__(self, pop_service: PopService) -> None:
        self.pop_service = pop_service

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        try:
            h = decode_header(PopMessageRequestHeader, request.ext_fields)
        except HeaderError as e:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, str(e))
        r = await self.pop_service.pop(
            h.consumerGroup,
            h.topic,
            h.queueId,
            h.maxMsgNums,
            h.invisibleTime,
            h.pollTime,
            h.initMode,
            h.expType,
            h.exp,
            bool(h.order),
            h.attemptId,
        )
        fields = encode_header(
            PopMessageResponseHeader(
                popTime=r.pop_time,
                invisibleTime=r.invisible_time,
                reviveQid=r.revive_qid,
                restNum=r.rest_num,
                startOffsetInfo=r.start_offset_info,
                msgOffsetInfo=r.msg_offset_info,
                orderCountInfo=r.order_count_info,
            )
        )
        body = r.body if r.code == ResponseCode.SUCCESS else None
        return RemotingCommand.response_to(request, r.code, r.remark, fields, body)
