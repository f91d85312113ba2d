"""PeekMessageProcessor: PEEK_MESSAGE (200052), thin over ``broker/pop/pop_service.py``: the records a pop would get
next (retry topic first in 20 % of peeks, as Apache), no checkpoint written and no offset moved; nothing → PULL_NOT_FOUND.
The answer's header is a pop's (restNum; the other fields 0), remark the GetMessageStatus name.
Thread-safety: the broker's event loop (served inline: it never waits).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    HeaderError,
    PeekMessageRequestHeader,
    PopMessageResponseHeader,
    decode_header,
    encode_header,
)

if TYPE_CHECKING:
    from rmq_core.broker.pop.pop_service import PopService
    from rmq_core.remoting.connection import Connection


class PeekMessageProcessor:
    def __init__(self, pop_service: PopService) -> None:
        self.pop_service = pop_service

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        try:
            h = decode_header(PeekMessageRequestHeader, request.ext_fields)
        except HeaderError as e:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, str(e))
        r = self.pop_service.peek(h.consumerGroup, h.topic, h.queueId, h.maxMsgNums)
        fields = encode_header(PopMessageResponseHeader(popTime=0, invisibleTime=0, reviveQid=0, restNum=r.rest_num))
        body = r.body if r.code == ResponseCode.SUCCESS else None
        return RemotingCommand.response_to(request, r.code, r.remark, fields, body)
