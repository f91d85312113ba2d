"""A client connection's receiving side, a fast path beside ``frame_protocol.FrameProtocol`` (the path it must
equal): the answers at the head of a chunk, while nothing is queued before them, go to their waiters in
``data_received`` itself (no wake-up of the read loop: on a client nearly every command is an answer), a
``SendAnswerWaiter``'s as the few fields it reads (the backend's ``split_client_frames``: no command built). From the
server's first request in a chunk on, everything goes through ``inbox`` in order, as in ``FrameProtocol``. Parity:
tests/remoting/test_client_frames_parity.py (the splitter), tests/remoting/test_response_waiter.py (the waiters).

Invariants (numbered in docs/REMOTING_DESIGN.md): 1 and 2, as ``FrameProtocol``.

Thread-safety: on the connection's loop; its connection takes writes from other threads
(``Connection.enable_thread_writes``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from rmq_core import _backend
from rmq_core.remoting.command import MAX_FRAME_LENGTH, RPC_TYPE_RESPONSE, RemotingCommand, RemotingCommandError
from rmq_core.remoting.frame_codec import split_frames
from rmq_core.remoting.frame_protocol import FrameProtocol
from rmq_core.remoting.header import SEND_ANSWER_FIELDS
from rmq_core.remoting.response_waiter import SendAnswerWaiter

log = logging.getLogger(__name__)


class ClientFrameProtocol(FrameProtocol):
    """The client's receiving side: the responses at the head of a chunk, while nothing is queued before them, go
    to their waiters at once (no wake-up of the read loop for them: on a client nearly every command is one; a
    ``SendAnswerWaiter``'s as the few fields it reads, with no command built); the
    rest, from the first request of the server on, through ``inbox`` in order, as ``FrameProtocol``. Its connection
    takes writes from other threads (``Connection.send_frame_from_thread``)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        assert self.conn is not None
        self.conn.enable_thread_writes()

    def _split(self, buf: bytearray) -> tuple[list[Any], int, RemotingCommandError | None]:
        """``split_frames``, with the answers of the ``SendAnswerWaiter``s at the head of the chunk read as their
        fields (the backend's ``split_client_frames``: no command per answer), their waiters out of ``pending``;
        while ``inbox`` holds commands, every frame is a command (they are served in order behind them)."""
        conn = self.conn
        if self.inbox or conn is None:
            return split_frames(buf)
        items, used, error = _backend.impl.split_client_frames(
            buf,
            conn.pending,
            SendAnswerWaiter,
            SEND_ANSWER_FIELDS,
            RPC_TYPE_RESPONSE,
            RemotingCommand,
            RemotingCommand.decode_frame,
            RemotingCommandError,
            MAX_FRAME_LENGTH,
        )
        return items, used, None if error is None else RemotingCommandError(error)

    def _take(self, cmds: list[Any]) -> None:
        if self.inbox or self.conn is None:
            self.inbox.extend(cmds)
            return
        pending = self.conn.pending
        for i, cmd in enumerate(cmds):
            if cmd.__class__ is tuple:  # a SendAnswerWaiter's answer, its waiter already out of pending
                cmd[0].set_fields(cmd)
                continue
            if not cmd.flag & RPC_TYPE_RESPONSE:
                self.inbox.extend(cmds[i:])
                return
            fut = pending.pop(cmd.opaque, None)
            if fut is not None and not fut.done():
                fut.set_result(cmd)
            else:
                log.debug("response %d from %s has no waiter", cmd.opaque, self.conn.remote_address)
