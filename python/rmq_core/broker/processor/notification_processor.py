"""NotificationProcessor: NOTIFICATION (200054), thin over ``broker/pop/pop_service.py``: does the group have something
to pop in the topic (or its POP retry topic; a FIFO one not blocked)? Answered at once when it does or has no
pollTime, else parked (as a waiting pop) until a message arrives or the deadline: SUCCESS with ``hasMsg``.
Thread-safety: the broker's event loop (served inline; a waiting one is its own task).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from rmq_core.broker.pop.pop_service import PopStatus
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    HeaderError,
    NotificationRequestHeader,
    NotificationResponseHeader,
    decode_header,
    encode_header,
)

if TYPE_CHECKING:
    from rmq_core.broker.pop.pop_service import PopResult, PopService
    from rmq_core.remoting.connection import Connection

log = logging.getLogger(__name__)


class NotificationProcessor:
    def __init__(self, pop_service: PopService) -> None:
        self.pop_service = pop_service
        self._parked: set[asyncio.Task[None]] = set()

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        try:
            h = decode_header(NotificationRequestHeader, request.ext_fields)
        except HeaderError as e:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, str(e))
        svc = self.pop_service
        r = await svc.notification(h.consumerGroup, h.topic, h.queueId, 0, bool(h.order), h.attemptId)
        if r.status == PopStatus.FOUND or r.code != ResponseCode.SUCCESS or h.pollTime <= 0:
            return self._response(request, r)
        task = asyncio.get_running_loop().create_task(self._wait(conn, request, h))
        self._parked.add(task)
        task.add_done_callback(self._parked.discard)
        return None

    async def _wait(self, conn: Connection, request: RemotingCommand, h: NotificationRequestHeader) -> None:
        r = await self.pop_service.notification(
            h.consumerGroup, h.topic, h.queueId, h.pollTime, bool(h.order), h.attemptId
        )
        if conn.closed:
            return
        try:
            conn.send(self._response(request, r))
        except ConnectionError as err:
            log.info("notification answer to %s dropped: %s", conn.remote_address, err)

    @staticmethod
    def _response(request: RemotingCommand, r: PopResult) -> RemotingCommand:
        if r.code != ResponseCode.SUCCESS:
            return RemotingCommand.response_to(request, r.code, r.remark)
        fields = encode_header(NotificationResponseHeader(hasMsg=r.status == PopStatus.FOUND))
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, None, fields)
