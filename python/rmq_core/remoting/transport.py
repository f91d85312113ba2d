"""Asyncio transport for RemotingCommands: a protocol splitting the length-prefixed frames out of each received
chunk, a server dispatching requests to a processor per request code, and a client with sync-style, async and oneway
invocations. The loop is uvloop's where it is installed (``new_event_loop``), else the stdlib's.

Invariants:
1. A frame whose length field is < 4 or > MAX_FRAME_LENGTH, or that does not decode, closes *that* connection
   (with one log line); other connections and anything stored are unaffected. Any exception of the decoder (a
   RecursionError of a deeply nested header too) counts as a frame that does not decode; then the frames read
   before it in the same chunk are dropped with it.
2. Responses are matched to requests by ``opaque``; a response nobody waits for is logged and dropped.
3. An unknown request code is answered REQUEST_CODE_NOT_SUPPORTED; a processor exception SYSTEM_ERROR with its text.
4. Oneway requests get no response, whatever the processor returns.
5. Memory per connection is bounded whatever the peer does: reading pauses past ``FrameProtocol.HIGH_WATER`` unserved
   commands; a connection whose responses are not being read (the transport's write buffer above its high-water
   mark) is not served, no task is started for it, until the peer reads them (its unserved commands then pause
   reading: TCP pushes back on the peer); at most ``MAX_TASKS_PER_CONNECTION`` requests of one connection are
   processed at once. The answers queued past that mark are those of at most ``SERVE_BUDGET`` requests (invariant 8)
   plus the tasks waiting on something (parked pulls) when it was reached.
6. A connection's inline requests are handled one after another in arrival order. A chunk of inline batch requests
   that arrives while nothing of its connection is queued or being handled is handled in ``data_received`` itself
   (``FrameProtocol.serve_now``): no wake-up of the serving task, no task step; what the processor has to wait for
   is handed to the serving task, which finishes it before it serves the next command.
7. A server holds at most ``max_connections`` connections (a new one past it is closed at once, one log line per
   ``REFUSED_LOG_INTERVAL_S``); one that neither reads nor writes for ``idle_timeout_s`` (4.9: 120 s) is closed, and so
   is one whose frame, once begun, is not complete within ``frame_deadline_s`` (both within 25 %; aborted: what it
   has not read is dropped). The bytes its connections hold in unfinished frames are bounded too
   (``PARTIAL_FRAMES_MAX``, each connection's counted past ``PARTIAL_FRAME_COUNTED``): past it, the connections
   adding to them are not read until frames complete or connections close (or reach their deadline).
8. One connection's requests hold the loop for at most ``SERVE_BUDGET`` of them or ``SERVE_SLICE_S`` (one request
   past it): its serving task then yields, so the tasks it started and the other connections' reads run before it
   serves more. It starts one task a turn at first, twice as many after a turn (what those tasks took included)
   that stayed under ``SERVE_SLICE_S``, half as many (down to one) after one that did not.
9. With an ``access_check`` set (the broker's ACL) every request is checked before a processor sees it: ``_process``
   runs it first, and each batch processor is wrapped so that it gets only the requests that passed (the refused
   ones answered with their refusals, in their places).

Thread-safety: everything runs on one event loop; ``RemotingServer.start_in_thread`` hosts it on a background thread.
The exceptions, a client connection's requests from other threads: ``send_frame_from_thread`` registers its waiter
in ``pending`` and writes to a duplicate of the socket's descriptor, only while nothing is queued before it (the
frames of the loop's iteration, the transport's write buffer); ``queue_frame_from_thread`` registers its waiter and
queues the frame for the loop's next write (the first such frame since that write wakes the loop, once for all of
them). Both work under the connection's write lock, which every write to that socket and every change to the queued
frames takes (the loop's too): frames are never interleaved. ``pending`` may thus grow from another thread while the
loop walks it: the loop walks a copy.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from types import ModuleType
from typing import Any, cast

from rmq_core import _backend
from rmq_core.common.tasks import cancel_and_wait
from rmq_core.remoting.command import MAX_FRAME_LENGTH, RPC_TYPE_RESPONSE, RemotingCommand, RemotingCommandError
from rmq_core.remoting.header import SEND_ANSWER_FIELDS
from rmq_core.remoting.request_limits import body_over_limit
from rmq_core.remoting.response_waiter import ResponseWaiter, SendAnswerWaiter, watch_deadline

_uvloop: ModuleType | None
try:
    import uvloop as _uvloop
except ImportError:  # not installed (Windows has none): the stdlib loop
    _uvloop = None

log = logging.getLogger(__name__)

SUCCESS = 0
SYSTEM_ERROR = 1
REQUEST_CODE_NOT_SUPPORTED = 3

Processor = Callable[["Connection", RemotingCommand], Awaitable[RemotingCommand | None]]
SOCKET_BACKLOG = 1024  # 4.9 NettyServerConfig.serverSocketBacklog (asyncio's default, 100, drops SYNs under a burst)
OUT_FLUSH_BYTES = 256 * 1024  # frames queued in one loop iteration past this size are written at once
MAX_TASKS_PER_CONNECTION = 16384  # requests of one connection being processed at once (parked long polls included)
SERVE_BUDGET = 16  # requests of one connection handled or started per loop iteration, at most (invariant 8)
SERVE_SLICE_S = 0.005  # a connection's turn past this long: it yields, and starts fewer before the next (same)
# RemotingServer's defaults (invariant 7): connections open at once (past it a new one is closed at once; at most
# 3/4 of the process's descriptor limit), seconds a connection may neither read nor write (4.9 NettyServerConfig
# serverChannelMaxIdleTimeSeconds), seconds a frame may take to arrive once begun
SERVER_MAX_CONNECTIONS = 10_000
SERVER_CHANNEL_MAX_IDLE_TIME_S = 120
FRAME_DEADLINE_S = 60
REFUSED_LOG_INTERVAL_S = 10.0  # at most one log line per this many seconds for the connections refused
# a server's bytes in unfinished frames, each connection's counted past PARTIAL_FRAME_COUNTED (FrameBudget)
PARTIAL_FRAMES_MAX = 256 * 1024 * 1024
PARTIAL_FRAME_COUNTED = 1024 * 1024
# A batch processor answers each request with a command, None (no answer), or the answer's frame already encoded;
# the answers come at once (a list) when it had nothing to wait for, else as an awaitable
BatchAnswers = list[RemotingCommand | bytes | None]
BatchProcessor = Callable[["Connection", list[RemotingCommand]], BatchAnswers | Awaitable[BatchAnswers]]
# A check of every request before it is served (the broker's ACL): None serves it, a command is the refusal to answer
AccessCheck = Callable[["Connection", RemotingCommand], RemotingCommand | None]


def _connection_cap(wanted: int) -> int:
    """``wanted``, at most 3/4 of the process's descriptor limit (the rest for files, the store, outgoing
    connections): past it ``accept`` itself would fail and config files could not be written."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, ValueError, OSError):  # (no resource module on Windows)
        return wanted
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return wanted
    return max(1, min(wanted, soft * 3 // 4))


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop where it is installed (Linux, macOS: about half the per-callback and per-write cost of
    the stdlib loop on the broker's send path), else the stdlib's."""
    if _uvloop is not None:
        return _uvloop.new_event_loop()
    return asyncio.new_event_loop()


def split_frames(buf: bytearray) -> tuple[list[RemotingCommand], int, RemotingCommandError | None]:
    """The whole frames at the start of ``buf``, decoded: (commands, bytes consumed, error). ``error`` is the first
    bad frame (length outside [4, MAX_FRAME_LENGTH], or a frame that does not decode); nothing after it is read.
    One call of the backend's ``split_frames`` per chunk (Rust: JSON headers in the shape Java writes decoded
    natively, every other frame by ``RemotingCommand.decode_frame``)."""
    cmds, used, error = _backend.impl.split_frames(
        buf, RemotingCommand, RemotingCommand.decode_frame, RemotingCommandError, MAX_FRAME_LENGTH
    )
    return cmds, used, None if error is None else RemotingCommandError(error)


def encode_frames(cmds: Sequence[RemotingCommand | bytes]) -> bytes:
    """The frames of ``cmds`` as one buffer (the backend's ``encode_frames``: the bytes of ``cmd.encode()`` each, a
    ``bytes`` item as it is: a frame already encoded)."""
    return _backend.impl.encode_frames(cmds, RemotingCommand.encode, MAX_FRAME_LENGTH)


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
        # set by the server while it serves this connection: handles a chunk's commands at once when it can (True),
        # else leaves them to the serving task (False); see invariant 6
        self.serve_now: Callable[[list[RemotingCommand]], bool] | None = None
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
            if (
                serve_now is None
                or self._waiter is None  # the serving task is busy, or commands are queued: they go first
                or self._paused_writing
                or not self._serve_now(serve_now, cmds)
            ):
                self._take(cmds)
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

    def _serve_now(self, serve_now: Callable[[list[RemotingCommand]], bool], cmds: list[RemotingCommand]) -> bool:
        """``serve_now(cmds)`` while the serving task is parked with nothing queued (invariant 6); a failure there
        ends the connection, as one in the serving task does."""
        try:
            return serve_now(cmds)
        except Exception:
            log.exception("serving a chunk failed; closing the connection")
            self._end()
            return True

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
    batch_codes: frozenset[int] = frozenset(),
) -> None:
    """Serve the commands ``conn``'s protocol has read until it ends: responses complete their waiting futures
    (matched by opaque), requests go to ``on_request``; when it returns an awaitable, that is awaited before the next
    command is served (inline processing). A request whose code is in ``batch_codes`` goes to ``on_batch`` together
    with the requests of those codes read right after it (already in the inbox: the rest of the received chunk).
    A bad frame ends the loop with a log line (invariant 1). While the peer does not read what it was sent, nothing
    more is served (invariant 5)."""
    proto = conn.protocol
    assert proto is not None, "serve_connection needs a Connection made by FrameProtocol"
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
                while inbox and inbox[0].code in batch_codes and not inbox[0].flag & RPC_TYPE_RESPONSE:
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


class Connection:
    """One TCP connection, either side. Writes are serialised by the event loop.

    Frames sent in one loop iteration are coalesced into one write (one syscall for a burst of pipelined responses
    instead of one each); the write happens at the end of the current iteration, in send order. ``writer`` is the
    transport (or a StreamWriter for a connection made from streams, which is written to but not served).
    """

    def __init__(
        self,
        reader: asyncio.StreamReader | None,
        writer: asyncio.StreamWriter | asyncio.Transport,
        protocol: FrameProtocol | None = None,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.protocol = protocol
        peer = writer.get_extra_info("peername") or ("?", 0)
        self.remote_address = f"{peer[0]}:{peer[1]}"
        self.pending: dict[int, ResponseWaiter] = {}  # asyncio futures, or response_waiter's waiters
        # response_waiter's timeout sweep of the callback waiters in pending: (the deadline it is armed for, timer)
        self.waiter_sweep: tuple[float, asyncio.TimerHandle] | None = None
        self.closed = False
        self._loop = asyncio.get_running_loop()
        self._out: list[bytes] = []
        self._out_size = 0  # bytes in _out
        self.tasks: set[asyncio.Task[None]] = set()  # requests processed off the read loop, until they finish
        # writes from other threads (``send_frame_from_thread``, a client connection's): a duplicate of the
        # transport's socket descriptor, and the lock every write to the socket, the loop's too, is made under
        self._direct_fd: int | None = None
        self._write_lock: threading.Lock | None = None
        # frames queued from other threads (``queue_frame_from_thread``): a flush of them is due on the loop, and
        # the nearest deadline of their waiters, for the loop to watch (``response_waiter.watch_deadline``)
        self._thread_flush_due = False
        self._queued_deadline: float | None = None

    def send(self, cmd: RemotingCommand) -> None:
        if self.closed:
            raise ConnectionError(f"connection to {self.remote_address} is closed")
        self.send_frame(cmd.encode())

    def send_frame(self, frame: bytes) -> None:
        """``send`` of a command its caller encoded (``RemotingCommand.encode``'s bytes)."""
        if self.closed:
            raise ConnectionError(f"connection to {self.remote_address} is closed")
        if self._queue_out(frame) == 1:
            self._loop.call_soon(self._flush)
        elif self._out_size >= OUT_FLUSH_BYTES:  # a burst of large answers: hand them to the transport now, so
            self._flush()  # its high-water mark (pause_writing) sees them (invariant 5)

    def send_all(self, cmds: Sequence[RemotingCommand | bytes]) -> None:
        """``send`` of each, in order (one write for all of them at the end of the iteration)."""
        if self.closed:
            raise ConnectionError(f"connection to {self.remote_address} is closed")
        if not cmds:
            return
        if self._queue_out(encode_frames(cmds)) == 1:
            self._loop.call_soon(self._flush)
        elif self._out_size >= OUT_FLUSH_BYTES:  # as in send (invariant 5)
            self._flush()

    def _queue_out(self, data: bytes) -> int:
        """On the loop: ``data`` queued for the iteration's write; the number of writes queued now (1: the caller
        schedules the flush). Under the write lock where other threads queue frames too (``queue_frame_from_thread``)."""
        lock = self._write_lock
        if lock is None:
            self._out.append(data)
            self._out_size += len(data)
            return len(self._out)
        with lock:
            self._out.append(data)
            self._out_size += len(data)
            return len(self._out)

    def _flush(self) -> None:
        if not self._out:
            return
        lock = self._write_lock
        if lock is None:
            self._write_out()
        else:
            with lock:
                self._write_out()

    def flush(self) -> None:
        """What this iteration queued, handed to the transport now (else at the end of the iteration)."""
        if self._out:
            self._flush()

    def _write_out(self) -> None:
        data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        self._out_size = 0
        if not self.closed:
            self.writer.write(data)
            if self.protocol is not None:
                self.protocol.active = True  # (the server's idle sweep)

    # --- writes from other threads (a client connection's requests) -----------------------------------------
    def enable_thread_writes(self) -> None:
        """On the loop, once: let ``send_frame_from_thread`` write to this connection's socket from any thread (a
        duplicate of its descriptor, closed with the connection; every write, the loop's too, then takes a lock)."""
        sock = self.writer.get_extra_info("socket")
        if sock is None or self._write_lock is not None or self.closed or os.name != "posix":
            return  # (os.write on a socket's descriptor is POSIX's; elsewhere every write stays the loop's)
        self._direct_fd = os.dup(sock.fileno())
        self._write_lock = threading.Lock()

    def send_frame_from_thread(self, opaque: int, frame: bytes, waiter: ResponseWaiter) -> bool:
        """From any thread: ``waiter`` registered in ``pending`` under ``opaque`` and ``frame`` written to the socket
        on this thread — when nothing is queued before it (this connection's frames of the loop's iteration, the
        transport's write buffer) and the connection is open; False (nothing done) otherwise, and the caller hands
        the request to the loop. What the socket does not take at once is queued for the loop to write (no other
        write comes before it). A failed write (the peer gone) is False too: the loop's write fails and closes."""
        lock = self._write_lock
        if lock is None:
            return False
        transport = cast(asyncio.Transport, self.writer)  # a lock only where enable_thread_writes found a socket
        with lock:
            fd = self._direct_fd
            if fd is None or self.closed or self._out or transport.get_write_buffer_size() or transport.is_closing():
                return False
            self.pending[opaque] = waiter
            try:
                written = os.write(fd, frame)
            except BlockingIOError:
                written = 0
            except OSError:  # the loop's write will fail the same way and close the connection
                self.pending.pop(opaque, None)
                return False
            if written < len(frame):  # the socket's buffer is full: the loop writes the rest, before anything else
                rest = frame[written:]
                # first: the loop may have queued whole frames (send_frame takes no lock) while this one was written
                self._out.insert(0, rest)
                self._out_size += len(rest)
                self.call_soon_threadsafe(self._flush)
        return True

    def queue_frame_from_thread(
        self, opaque: int, frame: bytes, waiter: ResponseWaiter, deadline: float | None = None
    ) -> bool:
        """From any thread: ``waiter`` registered in ``pending`` under ``opaque`` and ``frame`` queued for the loop's
        next write of this connection; the first frame queued this way since that write wakes the loop once for all
        of them (a burst of sends from a thread costs one wake-up and one write, not one job each). ``deadline``
        (loop time): the waiter's, watched by the connection's timeout sweep from that write on. False (nothing
        done) when the connection is closed or takes no writes from threads."""
        lock = self._write_lock
        if lock is None:
            return False
        with lock:
            if self.closed or self._direct_fd is None:
                return False
            self.pending[opaque] = waiter
            self._out.append(frame)
            self._out_size += len(frame)
            if deadline is not None:
                nearest = self._queued_deadline
                if nearest is None or deadline < nearest:
                    self._queued_deadline = deadline
            if self._thread_flush_due:
                return True
            self._thread_flush_due = True
        try:
            self._loop.call_soon_threadsafe(self._flush_queued)
        except RuntimeError:  # the loop is closed (the connection with it): nothing will write or answer it
            with lock:
                self._thread_flush_due = False
                self.pending.pop(opaque, None)
            return False
        return True

    def _flush_queued(self) -> None:
        """On the loop: the frames queued from threads written (with whatever else is queued), their waiters'
        nearest deadline watched."""
        with cast(threading.Lock, self._write_lock):
            self._thread_flush_due = False
            deadline, self._queued_deadline = self._queued_deadline, None
            if self._out:
                self._write_out()
        if deadline is not None and not self.closed:
            watch_deadline(self, deadline)

    def call_soon_threadsafe(self, callback: Callable[..., object], *args: object) -> None:
        """``callback(*args)`` on this connection's loop, asked from any thread (dropped once the loop is closed)."""
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop is closed: the connection is gone with it
            pass

    def _close_direct_fd(self) -> None:
        fd, self._direct_fd = self._direct_fd, None
        if fd is not None:
            os.close(fd)

    async def drain(self) -> None:
        self._flush()
        if self.protocol is not None:
            await self.protocol.drain()
        elif isinstance(self.writer, asyncio.StreamWriter):
            await self.writer.drain()

    def closed_by_peer(self) -> None:
        """The transport is gone: fail the waiting invocations now rather than at their timeouts."""
        if not self.closed:
            lock = self._write_lock
            if lock is None:
                self._out.clear()
            else:
                with lock:
                    self._out.clear()
            self._out_size = 0
            self.close()

    def abort(self) -> None:
        """Close at once, dropping what is not written yet (``close`` leaves it to be written first)."""
        if not self.closed:
            self.closed_by_peer()  # nothing more is written; the waiting invocations fail now
            transport = self.writer.transport if isinstance(self.writer, asyncio.StreamWriter) else self.writer
            transport.abort()

    def close(self) -> None:
        if not self.closed:
            self._flush()
            lock = self._write_lock
            if lock is None:
                self.closed = True
            else:
                with lock:  # no thread is writing or registering now, and none will
                    self.closed = True
                    self._close_direct_fd()
            self.writer.close()
            for fut in list(self.pending.values()):
                if not fut.done():
                    fut.set_exception(ConnectionError(f"connection to {self.remote_address} closed"))
            self.pending.clear()


class RemotingServer:
    """``RemotingServer(host, port)``; ``register(code, processor)``; serves until ``stop()``. ``max_connections``,
    ``idle_timeout_s`` and ``frame_deadline_s`` (0: none) bound what peers may hold (invariant 7)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        max_connections: int = SERVER_MAX_CONNECTIONS,
        idle_timeout_s: float = SERVER_CHANNEL_MAX_IDLE_TIME_S,
        frame_deadline_s: float = FRAME_DEADLINE_S,
        partial_frames_max: int = PARTIAL_FRAMES_MAX,
    ) -> None:
        self.host = host
        self.frame_budget = FrameBudget(partial_frames_max)
        self.port = port
        self.max_connections = _connection_cap(max_connections)
        self.idle_timeout_s = idle_timeout_s
        self.frame_deadline_s = frame_deadline_s
        self._sweep_timer: asyncio.TimerHandle | None = None
        self._refused = 0  # connections refused since the last log line about it
        self._refused_logged_at = -REFUSED_LOG_INTERVAL_S
        self._processors: dict[int, Processor] = {}
        self._inline: set[int] = set()
        self._batch: dict[int, tuple[BatchProcessor, bool]] = {}
        self.access_check: AccessCheck | None = None
        self._batch_processors: dict[BatchProcessor, tuple[int, ...]] = {}  # as registered (before any check)
        self._server: asyncio.base_events.Server | None = None
        self.connections: set[Connection] = set()
        self.on_close: list[Callable[[Connection], None]] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def register(self, code: int, processor: Processor, *, inline: bool = False) -> None:
        """Serve ``code`` with ``processor``. By default each request runs as its own task, so a slow request does
        not hold up the connection's next ones. ``inline=True`` runs it in the connection's read loop instead (no
        task per request): for processors that do not wait on anything, where it saves the task's cost; requests
        on that connection are then handled one after another, as a single-threaded Netty executor does."""
        self._processors[code] = processor
        self._batch.pop(code, None)  # the last registration for a code wins
        if inline:
            self._inline.add(code)
        else:
            self._inline.discard(code)

    def register_batch(self, codes: tuple[int, ...], processor: BatchProcessor, *, inline: bool = False) -> None:
        """Serve ``codes`` with ``processor`` a run at a time: a request of one of ``codes`` and the requests of
        ``codes`` read right after it (the rest of its chunk) are handed over together, ``processor`` answers
        them in order (a None answer, or any answer to a oneway request, is not sent) and the answers go out in
        one write. ``inline`` as in ``register`` (then the run is handled before the next command is served)."""
        self._batch_processors[processor] = tuple(int(c) for c in codes)
        if self.access_check is not None:  # its requests checked before it sees them (invariant 7)
            processor = self._checked_batch(processor, self.access_check)
        for code in codes:
            self._batch[int(code)] = (processor, inline)  # the last registration for a code wins

    def set_access_check(self, check: AccessCheck) -> None:
        """Run ``check`` on every request before it is served (its refusal answered in its place, the processor
        not called), whatever its code, known or not, and whichever path serves it: a batch processor registered
        before or after gets only the requests that passed (invariant 7). Set it before serving."""
        self.access_check = check
        for processor, codes in self._batch_processors.items():
            checked = self._checked_batch(processor, check)
            for code in codes:
                if code in self._batch and self._batch[code][0] is processor:
                    self._batch[code] = (checked, self._batch[code][1])

    @staticmethod
    def _checked_batch(processor: BatchProcessor, check: AccessCheck) -> BatchProcessor:
        """``processor`` behind ``check``: the refused requests answered with their refusals, the others handed to
        ``processor`` (all of them, the same list, when none is refused: the common case costs one check each)."""

        def checked(conn: Connection, cmds: list[RemotingCommand]) -> BatchAnswers | Awaitable[BatchAnswers]:
            refusals = [check(conn, c) for c in cmds]
            if all(r is None for r in refusals):
                return processor(conn, cmds)
            allowed = [c for c, r in zip(cmds, refusals, strict=True) if r is None]
            if not allowed:
                return list(refusals)
            answers = processor(conn, allowed)
            if isinstance(answers, list):
                return _merge_answers(refusals, answers)
            return _merge_answers_later(refusals, answers)

        return checked

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self, start_serving: bool = True) -> None:
        """Bind (port 0 picks a free port, then ``port`` holds it). With ``start_serving=False`` connections are
        accepted only after ``begin_serving()``, so an owner can finish setting up with the port known."""
        self.loop = asyncio.get_running_loop()
        self._server = await self.loop.create_server(
            self._new_protocol,
            self.host,
            self.port,
            start_serving=start_serving,
            backlog=SOCKET_BACKLOG,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._schedule_sweep()

    def _new_protocol(self) -> FrameProtocol:
        p = FrameProtocol(self._serve)
        p.frame_budget = self.frame_budget
        return p

    async def begin_serving(self) -> None:
        assert self._server is not None, "start() first"
        await self._server.start_serving()

    async def stop(self) -> None:
        timer, self._sweep_timer = self._sweep_timer, None
        if timer is not None:
            timer.cancel()
        if self._server is not None:
            self._server.close()
            for c in list(self.connections):
                c.close()
            await self._server.wait_closed()
            self._server = None

    def start_in_thread(self, name: str = "rmq-remoting") -> None:
        """Run the server on its own event loop in a daemon thread; returns once it is listening."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start())
            except BaseException as e:  # report bind errors to the caller
                failure.append(e)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.stop())
            loop.close()

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]

    def stop_thread(self, timeout: float = 5.0) -> None:
        if self.loop is not None and self._thread is not None:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)
            self._thread = None

    # --- invariant 7: the connections' count, idleness and unfinished frames -----------------------------------
    def _schedule_sweep(self) -> None:
        limits = [t for t in (self.idle_timeout_s, self.frame_deadline_s) if t > 0]
        if limits and self.loop is not None:
            self._sweep_timer = self.loop.call_later(min(10.0, max(0.05, min(limits) / 4)), self._sweep)

    def _sweep(self) -> None:
        """Close the connections idle past ``idle_timeout_s`` and those holding a frame begun more than
        ``frame_deadline_s`` ago (a look every quarter of the shorter one: a limit holds within 25 %)."""
        assert self.loop is not None
        now = self.loop.time()
        idle, deadline = self.idle_timeout_s, self.frame_deadline_s
        for conn in list(self.connections):
            p = conn.protocol
            if p is None or conn.closed:
                continue
            if p._buf:  # a frame begun, not complete
                if p.frame_done or p.partial_since is None:
                    p.partial_since = now
                elif deadline > 0 and now - p.partial_since > deadline:
                    log.warning(
                        "closing connection with %s: a frame begun %.0f s ago is not complete (%d bytes of it read)",
                        conn.remote_address,
                        now - p.partial_since,
                        len(p._buf),
                    )
                    conn.abort()
                    continue
            else:
                p.partial_since = None
            p.frame_done = False
            if p.active:
                p.active = False
                p.idle_since = now
            elif idle > 0 and now - p.idle_since >= idle:
                log.info("closing connection with %s: idle for %.0f s", conn.remote_address, now - p.idle_since)
                conn.abort()
        self._schedule_sweep()

    def _refuse(self, conn: Connection) -> None:
        """A connection past ``max_connections``: closed at once, one log line per REFUSED_LOG_INTERVAL_S."""
        conn.abort()
        self._refused += 1
        now = conn._loop.time()
        if now - self._refused_logged_at >= REFUSED_LOG_INTERVAL_S:
            log.warning(
                "refused %d connection(s) (the last from %s): %d open, the limit (serverMaxConnections)",
                self._refused,
                conn.remote_address,
                len(self.connections),
            )
            self._refused = 0
            self._refused_logged_at = now

    async def _serve(self, conn: Connection) -> None:
        if len(self.connections) >= self.max_connections:
            self._refuse(conn)
            return
        self.connections.add(conn)
        loop = asyncio.get_running_loop()
        try:
            inline = self._inline

            def spawn(work: Coroutine[Any, Any, None]) -> None:
                task = loop.create_task(work)
                conn.tasks.add(task)  # the loop keeps only weak references to tasks
                task.add_done_callback(conn.tasks.discard)

            async def spawn_when_room(work: Coroutine[Any, Any, None]) -> None:
                while len(conn.tasks) >= MAX_TASKS_PER_CONNECTION:
                    await asyncio.wait(set(conn.tasks), return_when=asyncio.FIRST_COMPLETED)
                spawn(work)

            def start(work: Coroutine[Any, Any, None]) -> Awaitable[None] | None:
                """A task for ``work``; past MAX_TASKS_PER_CONNECTION, an awaitable that waits for room (invariant 5)."""
                if len(conn.tasks) >= MAX_TASKS_PER_CONNECTION:
                    return spawn_when_room(work)
                spawn(work)
                return None

            def on_request(cmd: RemotingCommand) -> Awaitable[None] | None:
                if cmd.code in inline:
                    return self._process(conn, cmd)
                return start(self._process(conn, cmd))

            batch = self._batch

            def on_batch(cmds: list[RemotingCommand]) -> Awaitable[None] | None:
                processor, inline_batch = batch[cmds[0].code]
                registrations = {batch[c.code] for c in cmds}
                if len(registrations) > 1:  # codes of different batch processors: their runs one after another
                    if all(inline for _, inline in registrations):
                        return self._process_runs(conn, cmds)
                    return start(self._process_runs(conn, cmds))
                if inline_batch:
                    return self._process_batch(conn, processor, cmds)
                return start(self._run_batch(conn, processor, cmds))

            def serve_now(cmds: list[RemotingCommand]) -> bool:
                """A chunk of requests of one inline batch processor, handled at once (invariant 6)."""
                registration = batch.get(cmds[0].code)
                if registration is None or not registration[1]:
                    return False
                for c in cmds:
                    if c.flag & RPC_TYPE_RESPONSE or batch.get(c.code) != registration:
                        return False
                work = self._process_batch(conn, registration[0], cmds)
                if work is not None:
                    assert proto is not None  # serve_now is set on the protocol only
                    proto.hand_over(work)
                return True

            proto = conn.protocol
            if batch and proto is not None:
                proto.serve_now = serve_now
            try:
                await serve_connection(conn, on_request, on_batch if batch else None, frozenset(batch))
            finally:
                if proto is not None:
                    proto.serve_now = None
        except (ConnectionError, OSError) as e:
            log.info("connection from %s ended: %s", conn.remote_address, e)
        finally:
            conn.close()
            self.connections.discard(conn)
            for cb in self.on_close:
                try:
                    cb(conn)
                except Exception:
                    log.exception("connection close callback failed")

    async def _process_runs(self, conn: Connection, cmds: list[RemotingCommand]) -> None:
        """Commands of different batch processors, split into runs of one processor each, handled in order."""
        start = 0
        for i in range(1, len(cmds) + 1):
            if i == len(cmds) or self._batch[cmds[i].code] != self._batch[cmds[start].code]:
                await self._run_batch(conn, self._batch[cmds[start].code][0], cmds[start:i])
                start = i

    async def _run_batch(self, conn: Connection, processor: BatchProcessor, cmds: list[RemotingCommand]) -> None:
        """``_process_batch`` as a coroutine (a task's, or one run of ``_process_runs``)."""
        work = self._process_batch(conn, processor, cmds)
        if work is not None:
            await work

    def _process_batch(
        self, conn: Connection, processor: BatchProcessor, cmds: list[RemotingCommand]
    ) -> Awaitable[None] | None:
        """``processor`` on ``cmds``, its answers sent: None when that is done, else an awaitable finishing it
        (the processor had to wait for something)."""
        try:
            responses = processor(conn, cmds)
        except Exception as e:  # a processor bug answers SYSTEM_ERROR, never kills the connection
            responses = self._batch_failed(cmds, e)
        if isinstance(responses, list):
            self._answer_batch(conn, cmds, responses)
            return None
        return self._answer_batch_later(conn, cmds, responses)

    async def _answer_batch_later(
        self, conn: Connection, cmds: list[RemotingCommand], pending: Awaitable[BatchAnswers]
    ) -> None:
        try:
            responses = await pending
        except Exception as e:  # as in _process_batch
            responses = self._batch_failed(cmds, e)
        self._answer_batch(conn, cmds, responses)

    @staticmethod
    def _batch_failed(cmds: list[RemotingCommand], e: Exception) -> BatchAnswers:
        log.exception("batch processor for code %d failed", cmds[0].code, exc_info=e)
        return [RemotingCommand.response_to(cmd, SYSTEM_ERROR, remark=f"{type(e).__name__}: {e}") for cmd in cmds]

    def _answer_batch(self, conn: Connection, cmds: list[RemotingCommand], responses: BatchAnswers) -> None:
        out: list[RemotingCommand | bytes] = []
        for cmd, response in zip(cmds, responses):
            if response is None or cmd.is_oneway:
                continue
            if isinstance(response, bytes):  # an answer the processor encoded itself (to this request)
                out.append(response)
                continue
            response.opaque = cmd.opaque
            response.flag |= 1
            response.serialize_type = cmd.serialize_type  # 4.9 answers in the request's serialize type
            out.append(response)
        try:
            conn.send_all(out)
        except ConnectionError:
            log.info("could not answer %s: connection closed", conn.remote_address)

    async def _process(self, conn: Connection, cmd: RemotingCommand) -> None:
        processor = self._processors.get(cmd.code)
        too_large = body_over_limit(cmd.code, cmd.body) if cmd.body is not None else None
        refused = None if self.access_check is None else self.access_check(conn, cmd)
        if refused is not None:
            response: RemotingCommand | None = refused
        elif processor is None:
            response = RemotingCommand.response_to(
                cmd, REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {cmd.code} not supported"
            )
        elif too_large is not None:  # (request_limits: the body's size per request code)
            log.warning("refused a request from %s: %s", conn.remote_address, too_large)
            response = RemotingCommand.response_to(cmd, SYSTEM_ERROR, remark=too_large)
        else:
            try:
                response = await processor(conn, cmd)
            except Exception as e:  # a processor bug answers SYSTEM_ERROR, never kills the connection
                log.exception("processor for code %d failed", cmd.code)
                response = RemotingCommand.response_to(cmd, SYSTEM_ERROR, remark=f"{type(e).__name__}: {e}")
        if response is None or cmd.is_oneway:
            return
        response.opaque = cmd.opaque
        response.flag |= 1
        response.serialize_type = cmd.serialize_type  # 4.9 answers in the request's serialize type
        try:
            conn.send(response)
        except ConnectionError:
            log.info("could not answer %s: connection closed", conn.remote_address)

    async def invoke(self, conn: Connection, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """Server → client request (e.g. NOTIFY_CONSUMER_IDS_CHANGED is oneway; others wait for a response)."""
        return await _invoke(conn, request, timeout)


def _merge_answers(refusals: list[RemotingCommand | None], answers: BatchAnswers) -> BatchAnswers:
    """The answers of a batch some of whose requests were refused: each refusal in its request's place, the
    processor's answers (to the others, in order) in the remaining places."""
    rest = iter(answers)
    return [next(rest) if r is None else r for r in refusals]


async def _merge_answers_later(
    refusals: list[RemotingCommand | None], pending: Awaitable[BatchAnswers]
) -> BatchAnswers:
    return _merge_answers(refusals, await pending)


async def _invoke(conn: Connection, request: RemotingCommand, timeout: float) -> RemotingCommand:
    """Send ``request`` and await the response matched by opaque; TimeoutError after ``timeout`` seconds. The timeout
    is one timer on the response future (``asyncio.wait_for`` would add a task-side waiter and callbacks per call,
    on every pull and send)."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[RemotingCommand] = loop.create_future()
    conn.pending[request.opaque] = fut
    timer = loop.call_later(timeout, _expire, fut, timeout)
    try:
        conn.send(request)
        return await fut
    finally:
        timer.cancel()
        conn.pending.pop(request.opaque, None)


def _expire(fut: asyncio.Future[RemotingCommand], timeout: float) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError(f"no response within {timeout} s"))


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


class RemotingClient:
    """An asyncio client keeping one connection per address; ``invoke`` (await a response), ``invoke_oneway``."""

    def __init__(self, request_handler: Processor | None = None) -> None:
        self._conns: dict[str, Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._request_handler = request_handler
        self._tasks: set[asyncio.Task[None]] = set()

    async def _connection(self, addr: str, timeout: float) -> Connection:
        conn = self._conns.get(addr)
        if conn is not None and not conn.closed:
            return conn
        lock = self._locks.setdefault(addr, asyncio.Lock())
        async with lock:
            conn = self._conns.get(addr)
            if conn is not None and not conn.closed:
                return conn
            host, _, port = addr.rpartition(":")
            _, proto = await asyncio.wait_for(
                asyncio.get_running_loop().create_connection(
                    lambda: ClientFrameProtocol(self._read_loop), host, int(port)
                ),
                timeout,
            )
            assert isinstance(proto, FrameProtocol) and proto.conn is not None and proto.task is not None
            conn = proto.conn
            self._conns[addr] = conn
            self._tasks.add(proto.task)
            proto.task.add_done_callback(self._tasks.discard)
            return conn

    async def _read_loop(self, conn: Connection) -> None:
        loop = asyncio.get_running_loop()
        try:

            def on_request(cmd: RemotingCommand) -> None:
                task = loop.create_task(self._answer(conn, cmd))
                conn.tasks.add(task)  # the loop keeps only weak references to tasks
                task.add_done_callback(conn.tasks.discard)

            await serve_connection(conn, on_request)
        except (ConnectionError, OSError):
            pass
        finally:
            conn.close()

    async def _answer(self, conn: Connection, cmd: RemotingCommand) -> None:
        """A request from the server (e.g. NOTIFY_CONSUMER_IDS_CHANGED), handed to ``request_handler``."""
        if self._request_handler is None:
            return
        resp = await self._request_handler(conn, cmd)
        if resp is not None and not cmd.is_oneway and not conn.closed:
            resp.opaque, resp.flag = cmd.opaque, resp.flag | 1
            conn.send(resp)

    def open_connection(self, addr: str) -> Connection | None:
        """The open connection to ``addr``, without connecting (None when there is none); any thread may ask."""
        conn = self._conns.get(addr)
        return conn if conn is not None and not conn.closed else None

    async def invoke(self, addr: str, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        conn = self._conns.get(addr)
        if conn is None or conn.closed:  # connecting: a coroutine of its own (the common case needs none)
            conn = await self._connection(addr, timeout)
        return await _invoke(conn, request, timeout)

    async def invoke_oneway(self, addr: str, request: RemotingCommand, timeout: float = 3.0) -> None:
        conn = await self._connection(addr, timeout)
        conn.send(request.mark_oneway())
        await conn.drain()

    async def close(self) -> None:
        """Close every connection and cancel and await its read loop and the requests it is answering (on a loop
        that lives on, e.g. the caller's for rmq_core.aio, no task is left pending)."""
        tasks: list[asyncio.Task[None]] = list(self._tasks)
        for conn in self._conns.values():
            conn.close()
            tasks.extend(conn.tasks)
        self._conns.clear()
        await cancel_and_wait(tasks)


class BlockingRemotingClient:
    """A ``RemotingClient`` on its own event-loop thread, for callers that are not asyncio code.

    ``invoke_sync`` blocks for the response (or raises TimeoutError / ConnectionError); ``invoke_async`` returns a
    ``concurrent.futures.Future``; ``invoke_oneway`` returns once the frame is written. ``request_handler`` answers
    requests the server sends (e.g. NOTIFY_CONSUMER_IDS_CHANGED); it runs on the client's loop thread.
    """

    def __init__(self, request_handler: Processor | None = None, name: str = "rmq-remoting-client") -> None:
        self.loop = new_event_loop()
        self._client = RemotingClient(request_handler)
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()
        self._closed = False

    def invoke_async(self, addr: str, request: RemotingCommand, timeout: float = 3.0):  # -> concurrent Future
        return asyncio.run_coroutine_threadsafe(self._client.invoke(addr, request, timeout), self.loop)

    def invoke_sync(self, addr: str, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        fut = self.invoke_async(addr, request, timeout)
        try:
            return fut.result(timeout + 1.0)
        except TimeoutError:
            fut.cancel()
            raise

    def invoke_oneway(self, addr: str, request: RemotingCommand, timeout: float = 3.0) -> None:
        asyncio.run_coroutine_threadsafe(self._client.invoke_oneway(addr, request, timeout), self.loop).result(
            timeout + 1.0
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        asyncio.run_coroutine_threadsafe(self._client.close(), self.loop).result(5.0)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5.0)
        self.loop.close()

    def __enter__(self) -> BlockingRemotingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
