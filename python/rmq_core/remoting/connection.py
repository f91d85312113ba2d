"""One TCP connection's sending side, either end: the frames sent in one loop iteration coalesced into one write,
the ``pending`` waiters of the requests it awaits answers to (matched by ``opaque``), ``close`` / ``abort`` (the
waiters failed at once, not at their timeouts); ``invoke``: a request and its awaited answer. Its receiving side is
``frame_protocol.FrameProtocol``.

Invariants it enforces (numbered in docs/REMOTING_DESIGN.md, "Invariants"): 2 (one waiter per opaque), 5 (a burst of
answers past ``OUT_FLUSH_BYTES`` reaches the transport at once, so its high-water mark sees it).

Thread-safety: on its loop, except a client connection's writes from other threads (``send_frame_from_thread``,
``queue_frame_from_thread``: a fast path, the loop's ``send_frame`` the path it must equal): once enabled, every
write to the socket and every change to the queued frames, the loop's too, takes the write lock, so frames are never
interleaved; ``pending`` may then grow from another thread while the loop walks it (the loop walks a copy).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, cast

from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.frame_codec import encode_frames
from rmq_core.remoting.response_waiter import ResponseWaiter, watch_deadline

# A request's handler: its answer, or None (no answer)
Processor = Callable[["Connection", RemotingCommand], Awaitable[RemotingCommand | None]]
OUT_FLUSH_BYTES = 256 * 1024  # frames queued in one loop iteration past this size are written at once
# an answer's body at least this large is queued as it is (``send_parts``), and a write of queued frames at least this
# large hands the transport the pieces (one writev), not a joined copy of them
LARGE_BODY_BYTES = 16 * 1024


class ReceivingSide(Protocol):
    """What a connection needs of its receiving side (``frame_protocol.FrameProtocol``)."""

    active: bool  # bytes read or written since the server's last idle sweep

    async def drain(self) -> None: ...


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
        protocol: ReceivingSide | None = None,
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

    def send_parts(self, parts: Sequence[bytes]) -> None:
        """Frames given as consecutive pieces of bytes (whole frames together: ``RemotingCommand.encode_parts``, or
        encoded frames), queued as they are, in order: a large body is not copied before the socket takes it."""
        if self.closed:
            raise ConnectionError(f"connection to {self.remote_address} is closed")
        if not parts:
            return
        first = not self._out
        lock = self._write_lock
        if lock is None:
            self._out.extend(parts)
            self._out_size += sum(map(len, parts))
        else:
            with lock:
                first = not self._out
                self._out.extend(parts)
                self._out_size += sum(map(len, parts))
        if first:
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
        out = self._out
        if len(out) > 1 and self._out_size >= LARGE_BODY_BYTES:  # the pieces, in order, in one writev: no copy
            self._out = []
            if not self.closed:
                self.writer.writelines(out)
        else:
            data = out[0] if len(out) == 1 else b"".join(out)
            out.clear()
            if not self.closed:
                self.writer.write(data)
        self._out_size = 0
        if not self.closed and self.protocol is not None:
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


async def invoke_on(conn: Connection, request: RemotingCommand, timeout: float) -> RemotingCommand:
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
