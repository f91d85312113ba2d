"""Waiting for a response without a coroutine: what a ``Connection``'s ``pending`` table holds besides asyncio
futures, and the loop-side start of such a request (``PendingInvoke``).

Owns ``begin_invoke`` / ``begin_invoke_from_thread`` (the waiter into ``pending`` under the opaque, the frame queued
for the loop's write), ``BlockingResponseWaiter`` (a caller thread blocks on a plain lock), ``CallbackResponseWaiter``
(``on_response`` on the loop, once), the send-answer waiters (answered with a few fields, ``on_fields``) and the
timeouts (a deadline per waiter, one timer per connection, at most ``SWEEP_SLACK_S`` late).
Invariants: a waiter completes at most once (later calls are ignored); ``on_response`` never raises into
``serve_connection`` (an exception it raises is logged); a connection error reaches ``on_response`` through
``call_soon`` (never re-entering ``Connection.close``'s walk of ``pending``); nothing here changes the wire bytes.
Thread-safety: the blocking waiters' ``wait`` and ``begin_invoke_from_thread`` run on their caller's thread,
everything else on the connection's loop (the blocking waiters' completions may come from any thread).
Details: docs/CLIENT_DESIGN.md, 'Response waiters'.
"""

from __future__ import annotations

import _thread
import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rmq_core.remoting.command import RemotingCommand

log = logging.getLogger(__name__)


class ResponseWaiter(Protocol):
    """What ``Connection.pending`` holds: an asyncio future or one of the waiters below."""

    def done(self) -> bool: ...
    def set_result(self, result: RemotingCommand, /) -> None: ...
    def set_exception(self, exception: BaseException, /) -> None: ...


class WaiterConnection(Protocol):
    """What the waiters' helpers need of a ``rmq_core.remoting.connection.Connection``: its table of pending
    requests, its deadline sweep, and its frame queues. A Protocol, so that the transport imports this module and
    not the other way round."""

    remote_address: str
    pending: dict[int, ResponseWaiter]
    waiter_sweep: tuple[float, asyncio.TimerHandle] | None
    closed: bool

    def send_frame(self, frame: bytes) -> None: ...
    def queue_frame_from_thread(
        self, opaque: int, frame: bytes, waiter: ResponseWaiter, deadline: float | None = None
    ) -> bool: ...


class BlockingResponseWaiter:
    """A response awaited by a thread that is not the loop's (invariant: one ``wait`` per waiter)."""

    __slots__ = ("_done", "_error", "_lock", "_response")

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._lock.acquire()  # released once, by the completion
        self._response: RemotingCommand | None = None
        self._error: BaseException | None = None
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, result: RemotingCommand, /) -> None:
        if not self._done:
            self._response = result
            self._done = True
            self._lock.release()

    def set_exception(self, exception: BaseException, /) -> None:
        if not self._done:
            self._error = exception
            self._done = True
            self._lock.release()

    def wait(self, timeout_s: float) -> RemotingCommand:
        """The response; the connection's error; TimeoutError after ``timeout_s`` (the entry then stays in
        ``pending`` until the caller removes it)."""
        if not self._lock.acquire(timeout=timeout_s):
            raise TimeoutError(f"no response within {timeout_s} s")
        if self._error is not None:
            raise self._error
        assert self._response is not None
        return self._response


class CallbackResponseWaiter:
    """A response handled on the loop by ``on_response(response, None)`` or ``on_response(None, error)``, called
    once (subclasses implement it; the waiter is the per-request object, no closure or task). With a timeout
    (``begin_invoke``) the connection's timeout sweep fails it with TimeoutError and removes it from ``pending``."""

    __slots__ = ("_done", "deadline")

    def __init__(self) -> None:
        self._done = False
        self.deadline: float | None = None  # loop time past which the sweep fails it

    def on_response(self, response: RemotingCommand | None, error: BaseException | None) -> None:
        raise NotImplementedError

    def done(self) -> bool:
        return self._done

    def set_result(self, result: RemotingCommand, /) -> None:
        if not self._done:
            self._done = True
            self._deliver(result, None)

    def set_exception(self, exception: BaseException, /) -> None:
        if not self._done:
            self._done = True
            asyncio.get_running_loop().call_soon(self._deliver, None, exception)

    def fail_now(self, error: BaseException) -> None:
        """Complete with ``error`` on this thread (there is no loop any more to call it on)."""
        if not self._done:
            self._done = True
            self._deliver(None, error)

    def _deliver(self, response: RemotingCommand | None, error: BaseException | None) -> None:
        try:
            self.on_response(response, error)
        except Exception:
            log.exception("a response callback raised")


class SendAnswerWaiter(CallbackResponseWaiter):
    """A callback waiter a client connection answers with ``on_fields(item)``, ``item`` being ``(self, code, remark,
    *values)`` with the response's extFields ``header.SEND_ANSWER_FIELDS`` (None where absent): no command object
    per answer (the backend's ``split_client_frames`` reads them out of the received chunk). An answer that comes
    another way (a chunk queued behind a request of the server) is a command: ``on_response`` as any callback
    waiter's; errors and timeouts too."""

    __slots__ = ()

    def on_fields(self, item: tuple[Any, ...]) -> None:
        raise NotImplementedError

    def set_fields(self, item: tuple[Any, ...]) -> None:
        if not self._done:
            self._done = True
            try:
                self.on_fields(item)
            except Exception:
                log.exception("a response callback raised")


class BlockingSendAnswerWaiter(SendAnswerWaiter):
    """A producer's sync send awaited by its caller's thread (``wait``): answered as a ``SendAnswerWaiter`` is — the
    answer's fields, no command built on the loop — or with the command or the connection's error; one lock release
    wakes the caller. No deadline: the caller times out itself and removes the entry from ``pending``, as a
    ``BlockingResponseWaiter``'s does."""

    __slots__ = ("_answer", "_error", "_lock")

    def __init__(self) -> None:
        super().__init__()
        self._lock = _thread.allocate_lock()
        self._lock.acquire()  # released once, by the completion
        self._answer: tuple[Any, ...] | RemotingCommand | None = None
        self._error: BaseException | None = None

    def set_fields(self, item: tuple[Any, ...]) -> None:
        if not self._done:
            self._answer = item
            self._done = True
            self._lock.release()

    def set_result(self, result: RemotingCommand, /) -> None:
        if not self._done:
            self._answer = result
            self._done = True
            self._lock.release()

    def set_exception(self, exception: BaseException, /) -> None:
        if not self._done:  # from any thread: a lock release calls nothing back
            self._error = exception
            self._done = True
            self._lock.release()

    def fail_now(self, error: BaseException) -> None:
        self.set_exception(error)

    def wait(self, timeout_s: float) -> tuple[Any, ...] | RemotingCommand:
        """The answer: its fields ``(self, code, remark, *SEND_ANSWER_FIELDS values)`` or the command; the
        connection's error; TimeoutError after ``timeout_s`` (the entry then stays in ``pending`` until the caller
        removes it)."""
        if not self._lock.acquire(timeout=timeout_s):
            raise TimeoutError(f"no response within {timeout_s} s")
        if self._error is not None:
            raise self._error
        assert self._answer is not None
        return self._answer


# --- timeouts: one sweep timer per connection, not one timer per request ----------------------------------------
SWEEP_SLACK_S = 0.005  # deadlines this close to the sweep's are failed by it: a timeout fires at most this late


def _arm_sweep(conn: WaiterConnection, loop: asyncio.AbstractEventLoop, when: float) -> None:
    armed = conn.waiter_sweep
    if armed is not None:
        armed[1].cancel()
    conn.waiter_sweep = (when, loop.call_at(when + SWEEP_SLACK_S, _sweep, conn))


def _sweep(conn: WaiterConnection) -> None:
    """The connection's callback waiters past their deadline fail with TimeoutError (and leave ``pending``); the
    sweep is armed again for the nearest deadline left, or not at all."""
    conn.waiter_sweep = None
    if conn.closed:
        return
    loop = asyncio.get_running_loop()
    now = loop.time()
    nearest: float | None = None
    expired: list[tuple[int, CallbackResponseWaiter]] = []
    for opaque, waiter in list(conn.pending.items()):  # other threads may add to it meanwhile
        if isinstance(waiter, CallbackResponseWaiter) and waiter.deadline is not None:
            if waiter.deadline <= now + SWEEP_SLACK_S:
                expired.append((opaque, waiter))
            elif nearest is None or waiter.deadline < nearest:
                nearest = waiter.deadline
    for opaque, waiter in expired:
        conn.pending.pop(opaque, None)
        waiter.fail_now(TimeoutError("no response before the request's deadline"))
    if nearest is not None and conn.waiter_sweep is None:
        _arm_sweep(conn, loop, nearest)


def begin_invoke(
    conn: WaiterConnection,
    opaque: int,
    frame: bytes,
    waiter: BlockingResponseWaiter | CallbackResponseWaiter,
    timeout_s: float | None = None,
) -> None:
    """On the loop: ``waiter`` registered under ``opaque`` (a callback waiter with its deadline ``timeout_s`` from
    now, watched by the connection's sweep) and ``frame`` queued for this iteration's write; on a closed connection
    the waiter fails with ConnectionError."""
    if conn.closed:
        waiter.set_exception(ConnectionError(f"connection to {conn.remote_address} is closed"))
        return
    conn.pending[opaque] = waiter
    if timeout_s is not None and isinstance(waiter, CallbackResponseWaiter):
        loop = asyncio.get_running_loop()
        deadline = waiter.deadline = loop.time() + timeout_s
        armed = conn.waiter_sweep
        if armed is None or deadline < armed[0]:
            _arm_sweep(conn, loop, deadline)
    conn.send_frame(frame)


def watch_deadline(conn: WaiterConnection, deadline: float) -> None:
    """On the loop: the connection's sweep armed no later than ``deadline`` (a callback waiter's, in ``pending``)."""
    armed = conn.waiter_sweep
    if armed is None or deadline < armed[0]:
        _arm_sweep(conn, asyncio.get_running_loop(), deadline)


def begin_invoke_from_thread(
    conn: WaiterConnection, opaque: int, frame: bytes, waiter: CallbackResponseWaiter, timeout_s: float
) -> bool:
    """From a thread other than the loop's: ``begin_invoke`` without a job on the loop (``waiter`` registered and
    ``frame`` queued by ``Connection.queue_frame_from_thread``, its deadline ``timeout_s`` from now watched from the
    loop's write of it); False (nothing done) when the connection takes no frames from threads."""
    deadline = waiter.deadline = time.monotonic() + timeout_s  # the loop's clock (asyncio's and uvloop's)
    return conn.queue_frame_from_thread(opaque, frame, waiter, deadline)


class PendingInvoke:
    """A request encoded off the loop, to be started on it: ``run()`` (on the loop) registers ``waiter`` under
    ``opaque`` and queues ``frame``; ``fail(error)`` completes the waiter with ``error`` instead (the loop is gone).
    ``timeout_s`` gives a ``CallbackResponseWaiter`` its deadline (None: the waiter times out by itself)."""

    __slots__ = ("conn", "frame", "opaque", "timeout_s", "waiter")

    def __init__(
        self,
        conn: WaiterConnection,
        opaque: int,
        frame: bytes,
        waiter: BlockingResponseWaiter | CallbackResponseWaiter,
        timeout_s: float | None = None,
    ) -> None:
        self.conn = conn
        self.opaque = opaque
        self.frame = frame
        self.waiter = waiter
        self.timeout_s = timeout_s

    def run(self) -> None:
        begin_invoke(self.conn, self.opaque, self.frame, self.waiter, self.timeout_s)

    def fail(self, error: BaseException) -> None:
        if isinstance(self.waiter, CallbackResponseWaiter):
            self.waiter.fail_now(error)
        else:
            self.waiter.set_exception(error)
