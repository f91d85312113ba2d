"""``RemotingServer``: accepts connections (the name server's and the broker's) and serves each request with the
processor registered for its code: as a task of its own, or inline in the connection's read loop; or a run at a
time by a batch processor (``register_batch``, a fast path: ``batch_serving.py``). It bounds what peers may hold:
connections, idle time, unfinished frames, requests in progress.

Invariants it enforces (numbered in docs/REMOTING_DESIGN.md, "Invariants"): 3 (unknown code, processor failure),
4 (no answer to a oneway request), 5 (``MAX_TASKS_PER_CONNECTION``), 7 (connection cap, idle timeout, frame
deadline, frame budget), 9 (``access_check`` before any processor).

Thread-safety: everything runs on the server's loop; ``start_in_thread`` hosts that loop on a daemon thread, and
``stop_thread`` may be called from any other thread.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any

from rmq_core.remoting.batch_serving import AccessCheck, BatchProcessor, BatchProcessors
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.connection import Connection, Processor, invoke_on
from rmq_core.remoting.event_loop import new_event_loop
from rmq_core.remoting.frame_protocol import REFUSED_LOG_INTERVAL_S, FrameBudget, FrameProtocol, serve_connection
from rmq_core.remoting.request_limits import body_over_limit

log = logging.getLogger(__name__)

SOCKET_BACKLOG = 1024  # 4.9 NettyServerConfig.serverSocketBacklog (asyncio's default, 100, drops SYNs under a burst)
MAX_TASKS_PER_CONNECTION = 16384  # requests of one connection being processed at once (parked long polls included)
# RemotingServer's defaults (invariant 7): connections open at once (past it a new one is closed at once; at most
# 3/4 of the process's descriptor limit), seconds a connection may neither read nor write (4.9 NettyServerConfig
# serverChannelMaxIdleTimeSeconds), seconds a frame may take to arrive once begun, a server's bytes in unfinished
# frames (FrameBudget)
SERVER_MAX_CONNECTIONS = 10_000
SERVER_CHANNEL_MAX_IDLE_TIME_S = 120
FRAME_DEADLINE_S = 60
PARTIAL_FRAMES_MAX = 256 * 1024 * 1024


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
        self._batch = BatchProcessors()
        self.access_check: AccessCheck | None = None
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
        self._batch.unregister(code)  # the last registration for a code wins
        if inline:
            self._inline.add(code)
        else:
            self._inline.discard(code)

    def register_batch(
        self, codes: tuple[int, ...], processor: BatchProcessor, *, inline: bool = False, max_run: int | None = None
    ) -> None:
        """Serve ``codes`` with ``processor`` a run at a time: a request of one of ``codes`` and the requests of
        ``codes`` read right after it (the rest of its chunk; at most ``max_run`` of them with it) are handed over
        together, ``processor`` answers them in order (a None answer, or any answer to a oneway request, is not
        sent) and the answers go out in one write. ``inline`` as in ``register`` (then the run is handled before
        the next command is served). ``max_run``: for requests with large answers (pulls), so that one run's
        answers stay within invariant 5's bound (``SERVE_BUDGET``)."""
        self._batch.register(codes, processor, inline, self.access_check, max_run)

    def set_access_check(self, check: AccessCheck) -> None:
        """Run ``check`` on every request before it is served (its refusal answered in its place, the processor
        not called), whatever its code, known or not, and whichever path serves it: a batch processor registered
        before or after gets only the requests that passed (invariant 9). Set it before serving."""
        self.access_check = check
        self._batch.set_access_check(check)

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
            if not isinstance(p, FrameProtocol) or conn.closed:
                continue
            if p.buffered:  # a frame begun, not complete
                if p.frame_done or p.partial_since is None:
                    p.partial_since = now
                elif deadline > 0 and now - p.partial_since > deadline:
                    log.warning(
                        "closing connection with %s: a frame begun %.0f s ago is not complete (%d bytes of it read)",
                        conn.remote_address,
                        now - p.partial_since,
                        p.buffered,
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
        now = asyncio.get_running_loop().time()
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
            by_code = batch.by_code
            proto: FrameProtocol | None = conn.protocol if isinstance(conn.protocol, FrameProtocol) else None
            if by_code and proto is not None:  # a chunk of inline batch requests handled at once (invariant 6)
                proto.serve_now = partial(batch.serve_now, conn, proto)
            on_batch = partial(batch.serve, conn, start) if by_code else None
            try:
                await serve_connection(conn, on_request, on_batch, batch.runs())
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

    async def _process(self, conn: Connection, cmd: RemotingCommand) -> None:
        processor = self._processors.get(cmd.code)
        too_large = body_over_limit(cmd.code, cmd.body) if cmd.body is not None else None
        refused = None if self.access_check is None else self.access_check(conn, cmd)
        if refused is not None:
            response: RemotingCommand | None = refused
        elif processor is None:
            response = RemotingCommand.response_to(
                cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {cmd.code} not supported"
            )
        elif too_large is not None:  # (request_limits: the body's size per request code)
            log.warning("refused a request from %s: %s", conn.remote_address, too_large)
            response = RemotingCommand.response_to(cmd, ResponseCode.SYSTEM_ERROR, remark=too_large)
        else:
            try:
                response = await processor(conn, cmd)
            except Exception as e:  # a processor bug answers SYSTEM_ERROR, never kills the connection
                log.exception("processor for code %d failed", cmd.code)
                response = RemotingCommand.response_to(
                    cmd, ResponseCode.SYSTEM_ERROR, remark=f"{type(e).__name__}: {e}"
                )
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
        return await invoke_on(conn, request, timeout)
