"""PopMessageProcessor: POP_MESSAGE (200050) over remoting, a thin layer over ``broker/pop/pop_service.py``.

The answer is Apache 5.3's: header popTime, invisibleTime, reviveQid, restNum, startOffsetInfo, msgOffsetInfo
(orderCountInfo for FIFO pops), remark the GetMessageStatus name, body the records as stored (a POP retry topic's
records keep their stored topic: the Java client rewrites the topic and reads the retry flag from it, as with
Apache's ``popResponseReturnActualRetryTopic``). Nothing found → POLLING_TIMEOUT, after ``pollTime`` of waiting.
Registered inline (no task per request): a pop that finds messages, or has no pollTime, is answered at once; one
that must wait is parked as a task that answers when a message arrives or at its deadline (at most
``MAX_POLLING`` parked: POLLING_FULL, as Apache's ``maxPopPollingSize``).
Thread-safety: the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
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
    from rmq_core.broker.pop.pop_service import PopResult, PopService
    from rmq_core.remoting.connection import Connection

log = logging.getLogger(__name__)
MAX_POLLING = 100_000  # parked pops at most (BrokerConfig.maxPopPollingSize)


class PopMessageProcessor:
    def __init__(self, pop_service: PopService) -> None:
        self.pop_service = pop_service
        self._parked: set[asyncio.Task[None]] = set()

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        try:
            h = decode_header(PopMessageRequestHeader, request.ext_fields)
        except HeaderError as e:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, str(e))
        args = (
            h.consumerGroup,
            h.topic,
            h.queueId,
            h.maxMsgNums,
            h.invisibleTime,
            h.initMode,
            h.expType,
            h.exp,
            bool(h.order),
            h.attemptId,
        )
        r = self.pop_service.pop_now(*args)
        if r.code != ResponseCode.POLLING_TIMEOUT or h.pollTime <= 0:
            return self._response(request, r)
        if len(self._parked) >= MAX_POLLING:
            return RemotingCommand.response_to(request, ResponseCode.POLLING_FULL, "POLLING_FULL")
        task = asyncio.get_running_loop().create_task(self._long_poll(conn, request, h.pollTime, args))
        self._parked.add(task)
        task.add_done_callback(self._parked.discard)
        return None

    async def _long_poll(self, conn: Connection, request: RemotingCommand, poll_ms: int, args: tuple) -> None:
        g, t, q, n, inv, init, et, e, order, attempt = args
        r = await self.pop_service.pop(g, t, q, n, inv, poll_ms, init, et, e, order, attempt, lambda: conn.closed)
        if conn.closed:
            return  # closed after the pop: what it popped stays invisible until its CK is due, then comes back
        try:
            conn.send(self._response(request, r))
        except ConnectionError as err:
            log.info("pop answer to %s dropped: %s", conn.remote_address, err)

    @staticmethod
    def _response(request: RemotingCommand, r: PopResult) -> RemotingCommand:
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
