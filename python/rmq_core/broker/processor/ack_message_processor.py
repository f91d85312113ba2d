"""AckMessageProcessor: ACK_MESSAGE (200051) and BATCH_ACK_MESSAGE (200151), thin over ``broker/pop/pop_service.py``.

ACK_MESSAGE's header names the real topic (the retry topic for a retried message), the queue, the handle
(``extraInfo``) and the offset acked; BATCH_ACK_MESSAGE's body is ``{"brokerName", "acks": [BatchAck...]}``
(an empty or missing list → NO_MESSAGE, as Apache). Departure: a malformed handle → INVALID_PARAMETER (Apache
throws: SYSTEM_ERROR).
Thread-safety: the broker's event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rmq_core.remoting import fastjson
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import AckMessageRequestHeader, HeaderError, decode_header

if TYPE_CHECKING:
    from rmq_core.broker.pop.pop_service import PopService
    from rmq_core.remoting.connection import Connection


class AckMessageProcessor:
    request_codes = (RequestCode.ACK_MESSAGE, RequestCode.BATCH_ACK_MESSAGE)

    def __init__(self, pop_service: PopService) -> None:
        self.pop_service = pop_service

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.BATCH_ACK_MESSAGE:
            try:
                doc = fastjson.loads(request.body or b"null", int_keys=False)
            except (ValueError, UnicodeDecodeError) as e:
                return RemotingCommand.response_to(request, ResponseCode.INVALID_PARAMETER, f"malformed body: {e}")
            acks = doc.get("acks") if isinstance(doc, dict) else None
            if not acks or not isinstance(acks, list) or not all(isinstance(a, dict) for a in acks):
                return RemotingCommand.response_to(request, ResponseCode.NO_MESSAGE)
            r = self.pop_service.batch_ack_entries(doc.get("brokerName"), acks)
            return RemotingCommand.response_to(request, r.code, r.remark)
        try:
            h = decode_header(AckMessageRequestHeader, request.ext_fields)
        except HeaderError as e:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, str(e))
        r = self.pop_service.ack(h.consumerGroup, h.topic, h.extraInfo, h.offset, h.queueId)
        return RemotingCommand.response_to(request, r.code, r.remark)
