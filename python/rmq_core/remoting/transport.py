"""Asyncio transport for RemotingCommands: reading length-prefixed frames from a stream, a server dispatching
requests to a processor per request code, and a client with sync-style, async and oneway invocations.

Invariants:
1. A frame whose length field is < 4 or > MAX_FRAME_LENGTH, or that does not decode, closes *that* connection
   (with a log line); other connections and anything stored are unaffected.
2. Responses are matched to requests by ``opaque``; a response nobody waits for is logged and dropped.
3. An unknown request code is answered REQUEST_CODE_NOT_SUPPORTED; a processor exception SYSTEM_ERROR with its text.
4. Oneway requests get no response, whatever the processor returns.

Thread-safety: everything runs on one event loop; ``RemotingServer.start_in_thread`` hosts it on a background thread.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import threading
from collections.abc import Awaitable, Callable

from rmq_core.remoting.command import MAX_FRAME_LENGTH, RemotingCommand, RemotingCommandError

log = logging.getLogger(__name__)

SUCCESS = 0
SYSTEM_ERROR = 1
REQUEST_CODE_NOT_SUPPORTED = 3

Processor = Callable[["Connection", RemotingCommand], Awaitable[RemotingCommand | None]]


async def read_frame(reader: asyncio.StreamReader) -> RemotingCommand | None:
    """The next command, or None at a clean end of stream. Raises RemotingCommandError on a bad frame."""
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as e:
        if e.partial:
            raise RemotingCommandError("connection closed inside a frame length field") from None
        return None
    (length,) = struct.unpack(">i", head)
    if length < 4 or length > MAX_FRAME_LENGTH:
        raise RemotingCommandError(f"frame length {length} outside [4, {MAX_FRAME_LENGTH}]")
    try:
        frame = await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise RemotingCommandError(f"connection closed inside a {length}-byte frame") from None
    return RemotingCommand.decode_frame(frame)


async def serve_connection(conn: Connection, on_request: Callable[[RemotingCommand], Awaitable[None] | None]) -> None:
    """Read commands from ``conn`` until it ends: responses complete their waiting futures (matched by opaque),
    requests go to ``on_request``; when it returns an awaitable, that is awaited before the next frame is read
    (inline processing). A bad frame ends the loop with a log line (invariant 1)."""
    while True:
        try:
            cmd = await read_frame(conn.reader)
        except RemotingCommandError as e:
            log.warning("closing connection with %s: %s", conn.remote_address, e)
            return
        if cmd is None:
            return
        if cmd.is_response:
            fut = conn.pending.pop(cmd.opaque, None)
            if fut is not None and not fut.done():
                fut.set_result(cmd)
            else:
                log.debug("response %d from %s has no waiter", cmd.opaque, conn.remote_address)
        else:
            pending = on_request(cmd)
            if pending is not None:  # an inline request: handled before the next frame is read
                await pending


class Connection:
    """One TCP connection, either side. Writes are serialised by the event loop.

    Frames sent in one loop iteration are coalesced into one write (one syscall for a burst of pipelined responses
    instead of one each); the write happens at the end of the current iteration, in send order.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername") or ("?", 0)
        self.remote_address = f"{peer[0]}:{peer[1]}"
        self.pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self.closed = False
        self._loop = asyncio.get_running_loop()
        self._out: list[bytes] = []
        self.tasks: set[asyncio.Task[None]] = set()  # requests processed off the read loop, until they finish

    def send(self, cmd: RemotingCommand) -> None:
        if self.closed:
            raise ConnectionError(f"connection to {self.remote_address} is closed")
        self._out.append(cmd.encode())
        if len(self._out) == 1:
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        if not self._out:
            return
        data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        if not self.closed:
            self.writer.write(data)

    async def drain(self) -> None:
        self._flush()
        await self.writer.drain()

    def close(self) -> None:
        if not self.closed:
            self._flush()
            self.closed = True
            self.writer.close()
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError(f"connection to {self.remote_address} closed"))
            self.pending.clear()


class RemotingServer:
    """``RemotingServer(host, port)``; ``register(code, processor)``; serves until ``stop()``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self._processors: dict[int, Processor] = {}
        self._inline: set[int] = set()
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
        if inline:
            self._inline.add(code)
        else:
            self._inline.discard(code)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self, start_serving: bool = True) -> None:
        """Bind (port 0 picks a free port, then ``port`` holds it). With ``start_serving=False`` connections are
        accepted only after ``begin_serving()``, so an owner can finish setting up with the port known."""
        self.loop = asyncio.get_running_loop()
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, limit=MAX_FRAME_LENGTH + 8, start_serving=start_serving
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def begin_serving(self) -> None:
        assert self._server is not None, "start() first"
        await self._server.start_serving()

    async def stop(self) -> None:
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
            loop = asyncio.new_event_loop()
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

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(reader, writer)
        self.connections.add(conn)
        loop = asyncio.get_running_loop()
        try:
            inline = self._inline

            def on_request(cmd: RemotingCommand) -> Awaitable[None] | None:
                if cmd.code in inline:
                    return self._process(conn, cmd)
                task = loop.create_task(self._process(conn, cmd))
                conn.tasks.add(task)  # the loop keeps only weak references to tasks
                task.add_done_callback(conn.tasks.discard)
                return None

            await serve_connection(conn, on_request)
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
        if processor is None:
            response: RemotingCommand | None = RemotingCommand.response_to(
                cmd, REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {cmd.code} not supported"
            )
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
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, int(port), limit=MAX_FRAME_LENGTH + 8), timeout
            )
            conn = Connection(reader, writer)
            self._conns[addr] = conn
            task = asyncio.get_running_loop().create_task(self._read_loop(conn))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
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

    async def invoke(self, addr: str, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        conn = await self._connection(addr, timeout)
        return await _invoke(conn, request, timeout)

    async def invoke_oneway(self, addr: str, request: RemotingCommand, timeout: float = 3.0) -> None:
        conn = await self._connection(addr, timeout)
        conn.send(request.mark_oneway())
        await conn.drain()

    async def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
        for t in list(self._tasks):
            t.cancel()


class BlockingRemotingClient:
    """A ``RemotingClient`` on its own event-loop thread, for callers that are not asyncio code.

    ``invoke_sync`` blocks for the response (or raises TimeoutError / ConnectionError); ``invoke_async`` returns a
    ``concurrent.futures.Future``; ``invoke_oneway`` returns once the frame is written. ``request_handler`` answers
    requests the server sends (e.g. NOTIFY_CONSUMER_IDS_CHANGED); it runs on the client's loop thread.
    """

    def __init__(self, request_handler: Processor | None = None, name: str = "rmq-remoting-client") -> None:
        self.loop = asyncio.new_event_loop()
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
