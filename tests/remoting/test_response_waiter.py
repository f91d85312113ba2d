"""Requests started without a coroutine (``rmq_core.remoting.response_waiter``) over real TCP on 127.0.0.1: the
blocking and callback waiters get the response, the timeout or the connection's error exactly once; a timed-out
callback waiter leaves nothing in ``pending``; a callback that raises does not end the connection; the frame a
``PendingInvoke`` writes is answered like the same command sent by ``RemotingClient.invoke``."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from rmq_core.remoting import RemotingCommand
from rmq_core.remoting.connection import Connection
from rmq_core.remoting.remoting_client import BlockingRemotingClient
from rmq_core.remoting.response_waiter import (
    BlockingResponseWaiter,
    CallbackResponseWaiter,
    PendingInvoke,
    begin_invoke_from_thread,
)

from support.helpers import wait_until
from support.remoting_link import echo, remoting_link

ECHO = 9101
NEVER = 9102


class RecordingWaiter(CallbackResponseWaiter):
    __slots__ = ("calls", "event", "raise_it")

    def __init__(self, raise_it: bool = False) -> None:
        super().__init__()
        self.calls: list[tuple[RemotingCommand | None, BaseException | None]] = []
        self.event = threading.Event()
        self.raise_it = raise_it

    def on_response(self, response: RemotingCommand | None, error: BaseException | None) -> None:
        self.calls.append((response, error))
        self.event.set()
        if self.raise_it:
            raise RuntimeError("a callback that raises (test)")


@pytest.fixture
def link() -> Iterator[tuple[BlockingRemotingClient, Connection, str]]:
    """A server (ECHO answers, NEVER never does) on its own thread, and a connected client."""

    async def never(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    with remoting_link({ECHO: echo, NEVER: never}, "waiter-test-server") as link:
        yield link


def start(client: BlockingRemotingClient, job: PendingInvoke) -> None:
    client.loop.call_soon_threadsafe(job.run)


def test_blocking_waiter_gets_the_response_of_its_frame(link) -> None:  # type: ignore[no-untyped-def]
    client, conn, addr = link
    req = RemotingCommand.request(ECHO, {"n": "1", "k": "v"}, b"body")
    waiter = BlockingResponseWaiter()
    start(client, PendingInvoke(conn, req.opaque, req.encode(), waiter))
    resp = waiter.wait(5.0)
    assert resp.opaque == req.opaque and resp.ext_fields == {"n": "1", "k": "v"} and resp.body == b"body"
    assert waiter.done()
    # the same command through invoke gets the same answer
    again = client.invoke_sync(addr, RemotingCommand.request(ECHO, {"n": "1", "k": "v"}, b"body"), 5.0)
    assert (again.code, again.ext_fields, again.body) == (resp.code, resp.ext_fields, resp.body)
    assert not conn.pending


def test_blocking_waiter_times_out_by_itself_and_completes_once(link) -> None:  # type: ignore[no-untyped-def]
    client, conn, _addr = link
    req = RemotingCommand.request(NEVER, {})
    waiter = BlockingResponseWaiter()
    start(client, PendingInvoke(conn, req.opaque, req.encode(), waiter))
    with pytest.raises(TimeoutError):
        waiter.wait(0.2)
    assert conn.pending.get(req.opaque) is waiter  # no loop timer: the caller removes it
    client.loop.call_soon_threadsafe(conn.pending.pop, req.opaque, None)
    wait_until(lambda: req.opaque not in conn.pending)
    # a completion after the timeout is harmless, and only the first one counts
    waiter.set_exception(ConnectionError("late"))
    waiter.set_result(RemotingCommand.response_to(req, 0))
    with pytest.raises(ConnectionError, match="late"):
        waiter.wait(0.1)


def test_callback_waiter_response_then_no_timeout(link) -> None:  # type: ignore[no-untyped-def]
    client, conn, _addr = link
    req = RemotingCommand.request(ECHO, {"n": "2"})
    waiter = RecordingWaiter()
    start(client, PendingInvoke(conn, req.opaque, req.encode(), waiter, timeout_s=1.0))
    assert waiter.event.wait(5.0)
    [(resp, error)] = waiter.calls
    assert error is None and resp is not None and resp.opaque == req.opaque and resp.ext_fields == {"n": "2"}
    threading.Event().wait(1.3)  # past the timeout: the sweep found nothing to fail and was not armed again
    assert len(waiter.calls) == 1 and not conn.pending and conn.waiter_sweep is None


def test_callback_waiter_timeout_clears_pending(link) -> None:  # type: ignore[no-untyped-def]
    client, conn, _addr = link
    req = RemotingCommand.request(NEVER, {})
    waiter = RecordingWaiter()
    start(client, PendingInvoke(conn, req.opaque, req.encode(), waiter, timeout_s=0.2))
    assert waiter.event.wait(5.0)
    [(resp, error)] = waiter.calls
    assert resp is None and isinstance(error, TimeoutError)
    assert req.opaque not in conn.pending


def test_each_callback_waiter_times_out_at_its_own_deadline(link) -> None:  # type: ignore[no-untyped-def]
    """One sweep timer per connection, armed for the nearest deadline: a short timeout started after a long one
    still fires first; those answered in time are not failed; the sweep stops once nothing waits."""
    client, conn, _addr = link
    started = {}
    waiters = {}
    for name, code, timeout in (("long", NEVER, 30.0), ("answered", ECHO, 5.0), ("short", NEVER, 0.3)):
        req = RemotingCommand.request(code, {})
        waiters[name] = (req, RecordingWaiter())
        started[name] = time.monotonic()
        start(client, PendingInvoke(conn, req.opaque, req.encode(), waiters[name][1], timeout_s=timeout))
    assert waiters["short"][1].event.wait(5.0)
    assert time.monotonic() - started["short"] < 5.0
    [(resp, error)] = waiters["short"][1].calls
    assert resp is None and isinstance(error, TimeoutError)
    assert waiters["answered"][1].event.wait(5.0)
    [(resp, error)] = waiters["answered"][1].calls
    assert error is None and resp is not None
    assert not waiters["long"][1].calls and waiters["long"][0].opaque in conn.pending
    assert conn.waiter_sweep is not None  # armed again: the long one still waits
    client.loop.call_soon_threadsafe(conn.close)
    assert waiters["long"][1].event.wait(5.0)
    assert isinstance(waiters["long"][1].calls[0][1], ConnectionError)


def test_closing_the_connection_fails_both_waiters(link) -> None:  # type: ignore[no-untyped-def]
    client, conn, _addr = link
    r1, r2 = RemotingCommand.request(NEVER, {}), RemotingCommand.request(NEVER, {})
    blocking, callback = BlockingResponseWaiter(), RecordingWaiter()
    start(client, PendingInvoke(conn, r1.opaque, r1.encode(), blocking))
    start(client, PendingInvoke(conn, r2.opaque, r2.encode(), callback, timeout_s=30.0))
    wait_until(lambda: r1.opaque in conn.pending and r2.opaque in conn.pending)
    client.loop.call_soon_threadsafe(conn.close)
    with pytest.raises(ConnectionError, match="closed"):
        blocking.wait(5.0)
    assert callback.event.wait(5.0)
    [(resp, error)] = callback.calls
    assert resp is None and isinstance(error, ConnectionError)
    # a request started on the closed connection fails at once, nothing written
    r3 = RemotingCommand.request(ECHO, {})
    late = BlockingResponseWaiter()
    start(client, PendingInvoke(conn, r3.opaque, r3.encode(), late))
    with pytest.raises(ConnectionError, match="is closed"):
        late.wait(5.0)


def test_a_raising_callback_is_logged_and_the_connection_serves_on(link, caplog) -> None:  # type: ignore[no-untyped-def]
    client, conn, addr = link
    req = RemotingCommand.request(ECHO, {"n": "3"})
    waiter = RecordingWaiter(raise_it=True)
    start(client, PendingInvoke(conn, req.opaque, req.encode(), waiter, timeout_s=5.0))
    assert waiter.event.wait(5.0)
    wait_until(lambda: "a response callback raised" in caplog.text)
    assert client.invoke_sync(addr, RemotingCommand.request(ECHO, {"n": "4"}), 5.0).ext_fields == {"n": "4"}
    assert client._client.open_connection(addr) is conn


def test_fail_completes_a_job_the_loop_never_ran() -> None:
    loop = asyncio.new_event_loop()
    try:

        async def make() -> Connection:
            class _W:
                def get_extra_info(self, name: str) -> None:
                    return None

            return Connection(None, _W())  # type: ignore[arg-type]

        conn = loop.run_until_complete(make())
    finally:
        loop.close()
    blocking, callback = BlockingResponseWaiter(), RecordingWaiter()
    PendingInvoke(conn, 1, b"", blocking).fail(RuntimeError("loop gone"))
    PendingInvoke(conn, 2, b"", callback, timeout_s=1.0).fail(RuntimeError("loop gone"))
    with pytest.raises(RuntimeError, match="loop gone"):
        blocking.wait(1.0)
    [(resp, error)] = callback.calls
    assert resp is None and isinstance(error, RuntimeError)


def test_a_chunk_of_responses_and_a_server_request_reaches_everyone() -> None:
    """The client's protocol hands the responses at the head of a chunk to their waiters directly and the rest (from
    the server's first request on) through the read loop in order: a raw server answers two requests and sends a
    request of its own between the answers, all in one write; both waiters and the request handler get theirs."""
    import socket

    from rmq_core.remoting.remoting_client import RemotingClient

    handled: list[RemotingCommand] = []

    async def handler(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        handled.append(cmd)
        return RemotingCommand.response_to(cmd, 0)

    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    got_back: list[bytes] = []

    def serve() -> None:
        c, _ = srv.accept()
        buf = b""
        frames: list[RemotingCommand] = []
        while len(frames) < 2:
            buf += c.recv(65536)
            while len(buf) >= 4 and len(buf) >= 4 + int.from_bytes(buf[:4], "big"):
                n = int.from_bytes(buf[:4], "big")
                frames.append(RemotingCommand.decode_frame(buf[4 : 4 + n]))
                buf = buf[4 + n :]
        r1, r2 = (RemotingCommand.response_to(f, 0, ext_fields={"n": f.ext_fields["n"]}) for f in frames)
        ask = RemotingCommand.request(ECHO, {"from": "server"})
        c.sendall(r1.encode() + ask.encode() + r2.encode())  # one write: [response, request, response]
        c.settimeout(5.0)
        got_back.append(c.recv(65536))  # the handler's answer to the server's request
        c.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()

    async def main() -> tuple[RemotingCommand, RemotingCommand]:
        client = RemotingClient(request_handler=handler)
        try:
            return await asyncio.gather(
                client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO, {"n": "1"}), 5.0),
                client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO, {"n": "2"}), 5.0),
            )  # type: ignore[return-value]
        finally:
            for _ in range(100):
                if got_back:
                    break
                await asyncio.sleep(0.01)
            await client.close()

    a, b = asyncio.run(main())
    t.join(5.0)
    srv.close()
    assert (a.ext_fields["n"], b.ext_fields["n"]) == ("1", "2")
    assert [c.ext_fields for c in handled] == [{"from": "server"}]
    assert got_back and got_back[0]


def test_a_callback_waiter_started_from_a_thread_times_out(link) -> None:  # type: ignore[no-untyped-def]
    """``begin_invoke_from_thread``: the waiter's deadline is watched from the loop's write of its frame on (no other
    waiter arms the sweep here); an answered one started the same way is not failed."""
    _client, conn, _addr = link
    assert conn.waiter_sweep is None
    never = RemotingCommand.request(NEVER, {})
    late = RecordingWaiter()
    assert begin_invoke_from_thread(conn, never.opaque, never.encode(), late, 0.2)
    echoed = RemotingCommand.request(ECHO, {"n": "3"})
    answered = RecordingWaiter()
    assert begin_invoke_from_thread(conn, echoed.opaque, echoed.encode(), answered, 0.2)
    assert late.event.wait(5.0) and answered.event.wait(5.0)
    [(resp, error)] = late.calls
    assert resp is None and isinstance(error, TimeoutError)
    [(resp, error)] = answered.calls
    assert error is None and resp is not None and resp.ext_fields == {"n": "3"}
    wait_until(lambda: not conn.pending)
    threading.Event().wait(0.4)
    assert len(late.calls) == 1 and len(answered.calls) == 1
