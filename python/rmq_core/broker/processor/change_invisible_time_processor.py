"""ChangeInvisibleTimeProcessor: CHANGE_MESSAGE_INVISIBLETIME (200053), thin over ``broker/pop/pop_service.py``.

A new one-message CK popped now with the new invisible time, then an ACK of the old handle; the answer's header
(popTime, invisibleTime, reviveQid) is what the client builds the new handle from.
Thread-safety: the broker's event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    HeaderError,
    decode_header,
    encode_header,
)

if TYPE_CHECKING:
    from rmq_core.broker.pop.pop_service import PopService
    from rmq_core.remoting.connection import Connection


class ChangeInvisibleTimeProcessor:
    def __init__(self, pop_service: PopService) -> None:
        self.pop_service = pop_service

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        try:
            h = decode_header(ChangeInvisibleTimeRequestHeader, request.ext_fields)
        except HeaderError as e:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, str(e))
        r = self.pop_service.change_invisible_time(
            h.consumerGroup, h.topic, h.extraInfo, h.invisibleTime, h.offset, h.queueId
        )
        if r.code != ResponseCode.SUCCESS:
            return RemotingCommand.response_to(request, r.code, r.remark)
        fields = encode_header(
            ChangeInvisibleTimeResponseHeader(
                popTime=r.pop_time, invisibleTime=r.invisible_time, reviveQid=r.revive_qid
            )
        )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, fields)
