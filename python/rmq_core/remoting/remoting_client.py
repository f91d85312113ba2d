"""The clients' side of the remoting transport: ``RemotingClient`` (asyncio) keeps one connection per address and
invokes requests on it (awaited or oneway), answering the server's requests with its ``request_handler``;
``BlockingRemotingClient`` runs one on its own loop thread for callers that are not asyncio code.

Invariants (numbered in docs/REMOTING_DESIGN.md): 2 (answers matched by opaque), 4 (no answer to a oneway request);
a connection per address, made once however many callers ask for it at the same time.

Thread-safety: ``RemotingClient`` on its loop (``open_connection`` from any thread); ``BlockingRemotingClient``'s
methods from any thread (they hand the work to its loop thread).
"""

from __future__ import annotations

import asyncio
import threading

from rmq_core.common.tasks import cancel_and_wait
from rmq_core.remoting.client_frame_protocol import ClientFrameProtocol
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.connection import Connection, Processor, invoke_on
from rmq_core.remoting.event_loop import new_event_loop
from rmq_core.remoting.frame_protocol import FrameProtocol, serve_connection


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
        return await invoke_on(conn, request, timeout)

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
