"""One connection's receiving side and its read loop: ``FrameProtocol`` splits the frames out of each received chunk
(no await per frame) into ``inbox``; ``serve_connection`` drains it in order, the answers to their waiters, the
requests to its server's (or client's) handlers. ``FrameBudget``: a server's bytes held in unfinished frames.

Invariants it enforces (numbered in docs/REMOTING_DESIGN.md, "Invariants"): 1 (a bad frame closes that connection
only), 2 (answers matched by opaque), 5 (reading pauses past ``HIGH_WATER`` unserved commands; nothing is served while
the peer does not read its answers), 6 (inline requests in arrival order; the ``serve_now`` fast path, a chunk of
inline batch requests handled in ``data_received``, must equal their serving by ``serve_connection``), 7 (the frame
budget: its part), 8 (``SERVE_BUDGET``, ``SERVE_SLICE_S``).

Thread-safety: on the connection's loop only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from types import MappingProxyType
from typing import Any, cast

from rmq_core.remoting.command import RPC_TYPE_RESPONSE, RemotingCommand, RemotingCommandError
from rmq_core.remoting.connection import Connection
from rmq_core.remoting.frame_codec import split_frames

log = logging.getLogger(__name__)

SERVE_BUDGET = 16  # requests of one connection handled or started per loop iteration, at most (invariant 8)
SERVE_SLICE_S = 0.005  # a connection's turn past this long: it yields, and starts fewer before the next (same)
REFUSED_LOG_INTERVAL_S = 10.0  # at most one log line per this many seconds for the connections refused or paused
# a server's bytes in unfinished frames are counted per connection past this many (FrameBudget, invariant 7)
PARTIAL_FRAME_COUNTED = 1024 * 1024


class FrameBudget:
    """A server's bytes held in unfinished frames, counting each connection's only past PARTIAL_FRAME_COUNTED (a
    large frame arriving): past ``limit`` the connections adding to it stop being read until frames complete or
    connections close (invariant 7). On the server's loop only."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self.paused: set[FrameProtocol] = set()
        self._logged_at = -REFUSED_LOG_INTERVAL_S

    def resume_paused(self) -> None:
        paused, self.paused = self.paused, set()
        for p in paused:
            p.resume_for_budget()

    def note_pause(self, p: FrameProtocol) -> None:
        """One log line per REFUSED_LOG_INTERVAL_S about connections paused for the budget."""
        now = time.monotonic()
        if now - self._logged_at >= REFUSED_LOG_INTERVAL_S:
            self._logged_at = now
            peer = p.conn.remote_address if p.conn is not None else "?"
            log.warning(
                "%d bytes of unfinished frames held, over the %d-byte limit: reading paused on %s (and any other "
                "connection adding to them) until frames complete",
                self.held,
                self.limit,
                peer,
            )


class FrameProtocol(asyncio.Protocol):
    """The receiving side of one connection: splits the frames out of each received chunk (no awaits per frame)
    into ``inbox``, which ``serve_connection`` drains in order. Reading pauses while ``inbox`` holds more than
    ``HIGH_WATER`` commands (back-pressure on a client that pipelines faster than it is served). A bad frame ends
    reading: the frames before it are still served, then the connection closes (invariant 1)."""

    HIGH_WATER = 1024

    def __init__(self, on_connection: Callable[[Connection], Coroutine[Any, Any, None]]) -> None:
        self._on_connection = on_connection
        self._loop = asyncio.get_running_loop()
        self._buf = bytearray()
        self.inbox: deque[RemotingCommand] = deque()
        self.ended = False  # no more frames will arrive (EOF, a bad frame, or the connection lost)
        self.error: RemotingCommandError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._paused_reading = False
        self._paused_writing = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self.transport: asyncio.Transport | None = None
        self.conn: Connection | None = None
        self.task: asyncio.Task[None] | None = None
        # set by the server while it serves this connection: handles a chunk's leading commands at once when it can
        # and says how many (0: none), leaving the rest to the serving task; see invariant 6
        self.serve_now: Callable[[list[RemotingCommand]], int] | None = None
        # what a command handled in ``serve_now`` still awaits: the serving task finishes it first
        self.pending_work: Awaitable[None] | None = None
        # the server's bytes of unfinished large frames (None on a client), and this connection's part of them
        self.frame_budget: FrameBudget | None = None
        self._held = 0
        # for the server's sweep (``RemotingServer``, invariant 7): bytes read or written, a frame completed, since
        # its last look; when it first saw the frame now buffered unfinished, and when it last saw activity
        self.active = True
        self.frame_done = False
        self.partial_since: float | None = None
        self.idle_since = 0.0

    # --- asyncio.Protocol -------------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(
            asyncio.Transport, transport
        )  # uvloop's TCPTransport is not an asyncio.Transport subclass
        self.conn = Connection(None, self.transport, protocol=self)
        self.task = self._loop.create_task(self._on_connection(self.conn))

    def data_received(self, data: bytes) -> None:
        if self.ended:
            return
        self.active = True  # (the server's idle sweep)
        buf = self._buf
        buf += data
        try:
            cmds, used, error = self._split(buf)
        except Exception as e:  # any other decoder failure (a RecursionError...) ends this connection (invariant 1)
            cmds, used, error = [], 0, RemotingCommandError(f"frame does not decode: {type(e).__name__}: {e}")
        if used:
            del buf[:used]
            self.frame_done = True  # (the server's frame-deadline sweep)
        if self._held or len(buf) > PARTIAL_FRAME_COUNTED:  # a large frame arriving: the server's budget (inv. 7)
            self._hold(len(buf))
        if cmds:
            serve_now = self.serve_now
            # the serving task busy, or commands queued (they go first), or answers not read: all for the task
            if serve_now is None or self._waiter is None or self._paused_writing:
                self._take(cmds)
            else:
                done = self._serve_now(serve_now, cmds)
                if done < len(cmds):  # the rest, in order, for the serving task
                    self._take(cmds[done:] if done else cmds)
        if error is not None:
            self.error = error
            self._end()
        elif len(self.inbox) > self.HIGH_WATER and not self._paused_reading:
            self._paused_reading = True
            assert self.transport is not None
            self.transport.pause_reading()
        if self.inbox:
            self._wake()

    def _split(self, buf: bytearray) -> tuple[list[Any], int, RemotingCommandError | None]:
        """The chunk's whole frames (``split_frames``)."""
        return split_frames(buf)

    def _hold(self, buffered: int) -> None:
        """``buffered`` bytes of an unfinished frame, counted in the server's ``FrameBudget`` past
        PARTIAL_FRAME_COUNTED: reading pauses while the budget is spent, and resumes for the paused when it is not."""
        budget = self.frame_budget
        if budget is None:
            return
        counted = buffered if buffered > PARTIAL_FRAME_COUNTED else 0
        budget.held += counted - self._held
        self._held = counted
        if counted and budget.held > budget.limit:
            if self not in budget.paused and self.transport is not None:
                budget.paused.add(self)
                self.transport.pause_reading()
                budget.note_pause(self)
        elif budget.paused and budget.held <= budget.limit:
            budget.resume_paused()

    def resume_for_budget(self) -> None:
        """The server's frame budget has room again: reading resumes unless ``inbox`` holds it paused."""
        if not self._paused_reading and not self.ended and self.transport is not None:
            self.transport.resume_reading()

    def _take(self, cmds: list[Any]) -> None:
        """A chunk's commands, in order, for ``serve_connection``."""
        self.inbox.extend(cmds)

    def hand_over(self, work: Awaitable[None]) -> None:
        """What a chunk handled in ``serve_now`` still awaits, for the serving task to finish before anything else."""
        self.pending_work = work
        self._wake()

    def _serve_now(self, serve_now: Callable[[list[RemotingCommand]], int], cmds: list[RemotingCommand]) -> int:
        """``serve_now(cmds)`` while the serving task is parked with nothing queued (invariant 6): how many of
        ``cmds`` it handled; a failure there ends the connection, as one in the serving task does (all of them
        dropped)."""
        try:
            return serve_now(cmds)
        except Exception:
            log.exception("serving a chunk failed; closing the connection")
            self._end()
            return len(cmds)

    def eof_received(self) -> bool | None:
        if self._buf and self.error is None:
            self.error = RemotingCommandError(f"connection closed inside a frame ({len(self._buf)} bytes buffered)")
        self._end()
        return True  # keep the transport open: the commands already read are still answered, then it is closed

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()
        if self.conn is not None:
            self.conn.closed_by_peer()
        for w in self._drain_waiters:
            if not w.done():
                w.set_exception(ConnectionError("connection lost"))
        self._drain_waiters.clear()

    def pause_writing(self) -> None:
        self._paused_writing = True

    def resume_writing(self) -> None:
        self._paused_writing = False
        for w in self._drain_waiters:
            if not w.done():
                w.set_result(None)
        self._drain_waiters.clear()

    # --- the serving side -------------------------------------------------------------------------------------
    def _end(self) -> None:
        if not self.ended:
            self.ended = True
            self._buf.clear()
            budget = self.frame_budget
            if budget is not None:
                budget.paused.discard(self)
                if self._held:
                    self._hold(0)
            self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None:
            self._waiter = None
            if not w.done():
                w.set_result(None)

    async def wait_frames(self) -> None:
        """Returns once ``inbox`` is not empty, reading has ended or a chunk served in ``data_received`` left
        ``pending_work``; resumes reading first if it was paused."""
        if self._paused_reading and self.transport is not None:
            self._paused_reading = False
            if self.frame_budget is None or self not in self.frame_budget.paused:
                self.transport.resume_reading()
        if self.inbox or self.ended or self.pending_work is not None:
            return
        self._waiter = self._loop.create_future()
        await self._waiter

    @property
    def buffered(self) -> int:
        """Bytes read of a frame not complete yet (the server's frame-deadline sweep)."""
        return len(self._buf)

    @property
    def paused_writing(self) -> bool:
        """The transport's write buffer is above its high-water mark: the peer is not reading fast enough."""
        return self._paused_writing

    async def drain(self) -> None:
        if self._paused_writing and not self.ended:
            w = self._loop.create_future()
            self._drain_waiters.append(w)
            await w


async def serve_connection(
    conn: Connection,
    on_request: Callable[[RemotingCommand], Awaitable[None] | None],
    on_batch: Callable[[list[RemotingCommand]], Awaitable[None] | None] | None = None,
    batch_codes: Mapping[int, int] = MappingProxyType({}),
) -> None:
    """Serve the commands ``conn``'s protocol has read until it ends: responses complete their waiting futures
    (matched by opaque), requests go to ``on_request``; when it returns an awaitable, that is awaited before the next
    command is served (inline processing). A request whose code is in ``batch_codes`` goes to ``on_batch`` together
    with the requests of those codes read right after it (already in the inbox: the rest of the received chunk), at
    most ``batch_codes[code]`` of them (its code's) in one run.
    A bad frame ends the loop with a log line (invariant 1). While the peer does not read what it was sent, nothing
    more is served (invariant 5)."""
    proto = conn.protocol
    assert isinstance(proto, FrameProtocol), "serve_connection needs a Connection made by FrameProtocol"
    inbox = proto.inbox
    pending = conn.pending
    tasks = conn.tasks
    served = 0  # requests handled or started since this loop last let the others run (invariant 8)
    spawned = 0  # of them, those that started a task
    spawn_budget = 1  # tasks it may start before it does again: doubling up to SERVE_BUDGET while they prove cheap
    slice_start = 0.0
    while True:
        work = proto.pending_work
        if work is not None:  # what a chunk served in data_received still awaits (invariant 6)
            proto.pending_work = None
            await work
            continue
        if proto.paused_writing:
            await proto.drain()
        if not inbox:
            if proto.ended:
                if proto.error is not None:
                    log.warning("closing connection with %s: %s", conn.remote_address, proto.error)
                return
            await proto.wait_frames()
            continue
        cmd = inbox.popleft()
        if cmd.flag & RPC_TYPE_RESPONSE:
            fut = pending.pop(cmd.opaque, None)
            if fut is not None and not fut.done():
                fut.set_result(cmd)
            else:
                log.debug("response %d from %s has no waiter", cmd.opaque, conn.remote_address)
        else:
            if not served:
                slice_start = time.monotonic()
            running = len(tasks)
            if on_batch is not None and cmd.code in batch_codes:
                cmds = [cmd]
                most = batch_codes[cmd.code]
                while (
                    inbox
                    and len(cmds) < most
                    and inbox[0].code in batch_codes
                    and not inbox[0].flag & RPC_TYPE_RESPONSE
                ):
                    cmds.append(inbox.popleft())
                waiting = on_batch(cmds)
            else:
                waiting = on_request(cmd)
            if waiting is not None:  # an inline request: handled before the next command is served
                await waiting
            served += 1
            if len(tasks) > running:
                spawned += 1
            if not inbox:
                served = spawned = 0
            elif served >= SERVE_BUDGET or spawned >= spawn_budget or time.monotonic() - slice_start > SERVE_SLICE_S:
                # invariant 8: the tasks started so far and the other connections take their turn; the answers
                # then reach the transport, whose high-water mark (pause_writing) the check above waits on
                before = time.monotonic()
                await asyncio.sleep(0)
                conn.flush()
                if spawned:  # what that turn cost: this connection's tasks, mostly
                    cheap = time.monotonic() - before <= SERVE_SLICE_S
                    spawn_budget = min(SERVE_BUDGET, spawn_budget * 2) if cheap else max(1, spawn_budget // 2)
                served = spawned = 0
