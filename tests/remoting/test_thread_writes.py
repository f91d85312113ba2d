"""A client connection's requests from other threads over real TCP on 127.0.0.1. Written by the thread
(``Connection.send_frame_from_thread``): frames written by several threads while the loop writes others arrive whole
(none cut into another); a frame the socket takes only in part is finished by the loop before anything else, and the
thread then leaves its next requests to the loop until the backlog is gone. Queued by the thread for the loop's next
write (``queue_frame_from_thread``, through ``begin_invoke_from_thread``): a burst costs one flush, frames of several
threads and the loop's arrive whole. A closed connection takes neither and keeps nothing pending."""

from __future__ import annotations

import socket
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
from support.remoting_link import count_queued_flushes, echo, remoting_link

ECHO = 9111


@pytest.fixture
def echo_link() -> Iterator[tuple[BlockingRemotingClient, Connection, str]]:
    """An echo server on its own thread and a connected client."""
    with remoting_link({ECHO: echo}, "thread-write-test-server") as link:
        yield link


def test_frames_from_threads_and_from_the_loop_arrive_whole(echo_link) -> None:  # type: ignore[no-untyped-def]
    """4 threads send requests with bodies up to 300 KiB (larger than a socket buffer takes at once) from their own
    thread, or through the loop when the connection says no, while the loop sends others: each is answered with
    its own body."""
    client, conn, addr = echo_link
    direct = [0]
    errors: list[str] = []

    def sender(t: int) -> None:
        for i in range(40):
            body = bytes([t * 40 + i & 0xFF]) * (1 + (t * 7919 + i * 104729) % (300 * 1024))
            req = RemotingCommand.request(ECHO, {"t": str(t), "i": str(i)}, body)
            waiter = BlockingResponseWaiter()
            if conn.send_frame_from_thread(req.opaque, req.encode(), waiter):
                direct[0] += 1
            else:
                client.loop.call_soon_threadsafe(PendingInvoke(conn, req.opaque, req.encode(), waiter).run)
            resp = waiter.wait(10.0)
            if resp.body != body or resp.ext_fields != {"t": str(t), "i": str(i)}:
                errors.append(f"{t}/{i}: wrong answer")

    threads = [threading.Thread(target=sender, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    loop_answers = [
        client.invoke_async(addr, RemotingCommand.request(ECHO, {"loop": str(i)}, b"L" * (i + 1))) for i in range(200)
    ]
    for th in threads:
        th.join(60)
    assert [f.result(10).body for f in loop_answers] == [b"L" * (i + 1) for i in range(200)]
    assert not errors
    assert direct[0] > 0  # the threads' own writes were taken
    wait_until(lambda: not conn.pending)


def _frames(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos < len(data):
        n = int.from_bytes(data[pos : pos + 4], "big")
        out.append(data[pos : pos + 4 + n])
        pos += 4 + n
    assert pos == len(data)
    return out


def test_a_partial_write_is_finished_by_the_loop_before_anything_else() -> None:
    """A peer that does not read: the thread's writes fill the socket, the rest of the last frame is queued for the
    loop and the thread's next requests are refused (False) while it is queued; once the peer reads, it gets every
    frame whole (the thread's, and those the loop wrote for it) and nothing else."""
    listener = socket.create_server(("127.0.0.1", 0))
    addr = f"127.0.0.1:{listener.getsockname()[1]}"
    client = BlockingRemotingClient()
    try:
        hello = RemotingCommand.request(ECHO, {"hello": "1"}).mark_oneway()
        client.invoke_oneway(addr, hello)  # connects; the peer has not accepted yet, the kernel has
        peer, _ = listener.accept()
        conn = client._client.open_connection(addr)
        assert conn is not None
        sent: list[bytes] = []
        refused = 0
        for i in range(400):  # up to 400 x 64 KiB: far more than the two socket buffers hold
            frame = RemotingCommand.request(ECHO, {"i": str(i)}, bytes([i & 0xFF]) * 65536).encode()
            if conn.send_frame_from_thread(i + 1_000_000, frame, BlockingResponseWaiter()):
                sent.append(frame)
            else:
                refused += 1
                client.loop.call_soon_threadsafe(conn.send_frame, frame)
                sent.append(frame)
                if refused == 3:
                    break
        assert refused == 3  # the socket filled up and the connection stopped taking writes from the thread
        received = bytearray()
        expected = len(hello.encode()) + sum(map(len, sent))
        peer.settimeout(10.0)
        while len(received) < expected:
            chunk = peer.recv(1 << 20)
            assert chunk, "connection closed early"
            received += chunk
        frames = _frames(bytes(received))
        assert frames[0] == hello.encode()
        assert sorted(frames[1:]) == sorted(sent)  # each frame whole; the loop's may come after later ones
        peer.close()
    finally:
        client.close()
        listener.close()


def test_a_closed_connection_takes_no_write_from_a_thread(echo_link) -> None:  # type: ignore[no-untyped-def]
    client, conn, _addr = echo_link
    client.loop.call_soon_threadsafe(conn.close)
    wait_until(lambda: conn.closed)
    req = RemotingCommand.request(ECHO, {})
    assert not conn.send_frame_from_thread(req.opaque, req.encode(), BlockingResponseWaiter())
    assert req.opaque not in conn.pending
    assert conn._direct_fd is None  # the descriptor's duplicate was closed with the connection


class _Recorder(CallbackResponseWaiter):
    __slots__ = ("answers", "done_event")

    def __init__(self, answers: list[tuple[RemotingCommand | None, BaseException | None]]) -> None:
        super().__init__()
        self.answers = answers
        self.done_event = threading.Event()

    def on_response(self, response: RemotingCommand | None, error: BaseException | None) -> None:
        self.answers.append((response, error))
        self.done_event.set()


def test_frames_queued_from_a_thread_wake_the_loop_once_per_burst(echo_link) -> None:  # type: ignore[no-untyped-def]
    """``queue_frame_from_thread`` (through ``begin_invoke_from_thread``) while the loop is busy: 100 requests of a
    thread are written by one flush (one wake-up of the loop), and each is answered with its own body."""
    client, conn, _addr = echo_link
    flushes = count_queued_flushes(conn)
    busy = threading.Event()
    client.loop.call_soon_threadsafe(lambda: (busy.set(), time.sleep(0.3)))  # the loop held up: the burst queues
    assert busy.wait(5.0)
    answers: list[tuple[RemotingCommand | None, BaseException | None]] = []
    waiters = []
    for i in range(100):
        req = RemotingCommand.request(ECHO, {"i": str(i)}, b"q" * (i + 1))
        waiter = _Recorder(answers)
        assert begin_invoke_from_thread(conn, req.opaque, req.encode(), waiter, 5.0)
        waiters.append((req, waiter))
    for _req, waiter in waiters:
        assert waiter.done_event.wait(10.0)
    assert flushes[0] == 1
    assert all(error is None for _, error in answers)
    got = {resp.ext_fields["i"]: resp.body for resp, _ in answers if resp is not None}
    assert got == {str(i): b"q" * (i + 1) for i in range(100)}
    wait_until(lambda: not conn.pending)


def test_frames_queued_from_threads_and_the_loop_arrive_whole(echo_link) -> None:  # type: ignore[no-untyped-def]
    """4 threads queue requests (bodies up to 300 KiB) while the loop sends its own: every one answered whole."""
    client, conn, addr = echo_link
    errors: list[str] = []

    def sender(t: int) -> None:
        answers: list[tuple[RemotingCommand | None, BaseException | None]] = []
        sent = []
        for i in range(40):
            body = bytes([t * 40 + i & 0xFF]) * (1 + (t * 7919 + i * 104729) % (300 * 1024))
            req = RemotingCommand.request(ECHO, {"t": str(t), "i": str(i)}, body)
            waiter = _Recorder(answers)
            if not begin_invoke_from_thread(conn, req.opaque, req.encode(), waiter, 10.0):
                errors.append(f"{t}/{i}: refused")
            sent.append((waiter, body, {"t": str(t), "i": str(i)}))
        for waiter, _body, fields in sent:
            if not waiter.done_event.wait(20.0):
                errors.append(f"{fields}: no answer")
        by_fields = {tuple(sorted(r.ext_fields.items())): r.body for r, _ in answers if r is not None}
        for _, body, fields in sent:
            if by_fields.get(tuple(sorted(fields.items()))) != body:
                errors.append(f"{fields}: wrong answer")

    threads = [threading.Thread(target=sender, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    loop_answers = [
        client.invoke_async(addr, RemotingCommand.request(ECHO, {"loop": str(i)}, b"L" * (i + 1))) for i in range(200)
    ]
    for th in threads:
        th.join(60)
    assert [f.result(10).body for f in loop_answers] == [b"L" * (i + 1) for i in range(200)]
    assert not errors
    wait_until(lambda: not conn.pending)


def test_a_closed_connection_queues_nothing_from_a_thread(echo_link) -> None:  # type: ignore[no-untyped-def]
    client, conn, _addr = echo_link
    client.loop.call_soon_threadsafe(conn.close)
    wait_until(lambda: conn.closed)
    req = RemotingCommand.request(ECHO, {})
    assert not begin_invoke_from_thread(conn, req.opaque, req.encode(), _Recorder([]), 1.0)
    assert req.opaque not in conn.pending and not conn._out
