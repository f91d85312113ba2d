"""A remoting server on its own thread and a client connected to it over real TCP on 127.0.0.1 (the remoting tests'
link): the handlers given are registered, the first request code must answer (it is asked once before the link is
handed out), and the client's open ``Connection`` is returned with the client and the server's address. Stopped and
closed when the ``with`` block ends. Thread-safety: the server runs its own loop thread; the caller owns the client."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager

from rmq_core.remoting import RemotingCommand
from rmq_core.remoting.connection import Connection
from rmq_core.remoting.remoting_client import BlockingRemotingClient
from rmq_core.remoting.remoting_server import RemotingServer

Handler = Callable[[Connection, RemotingCommand], Awaitable[RemotingCommand]]


async def echo(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    """Answers SUCCESS with the request's extFields and body."""
    return RemotingCommand.response_to(cmd, 0, ext_fields=cmd.ext_fields, body=cmd.body)


@contextmanager
def remoting_link(
    handlers: Mapping[int, Handler], thread_name: str
) -> Iterator[tuple[BlockingRemotingClient, Connection, str]]:
    server = RemotingServer("127.0.0.1", 0)
    for code, handler in handlers.items():
        server.register(code, handler)
    server.start_in_thread(thread_name)
    client = BlockingRemotingClient()
    try:
        first = next(iter(handlers))
        assert client.invoke_sync(server.address, RemotingCommand.request(first, {"n": "0"}), 5.0).code == 0
        conn = client._client.open_connection(server.address)
        assert conn is not None
        yield client, conn, server.address
    finally:
        client.close()
        server.stop_thread()


def count_queued_flushes(conn: Connection) -> list[int]:
    """``conn``'s flushes of the frames other threads queued (``queue_frame_from_thread``) counted from now on: one
    element, the count so far."""
    flushes = [0]
    flush = conn._flush_queued

    def counting_flush() -> None:
        flushes[0] += 1
        flush()

    conn._flush_queued = counting_flush  # type: ignore[method-assign]
    return flushes
