"""Resource exhaustion: the transport's memory bounds (invariant 5, docs/REMOTING_DESIGN.md) checked in-process
on real TCP, then benches/exhaust_broker.py's scenarios at their quick size against `rmq-core broker` in its own
process (idle connections, slowloris, a client that never reads its answers, a pipelined flood, a consumer group
joining and leaving, a full disk).
The full sizes and their figures: `.venv/bin/python benches/exhaust_broker.py`."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import pytest

from rmq_core.remoting import RemotingCommand, remoting_server
from rmq_core.remoting.remoting_server import RemotingServer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benches"))
from exhaust_broker import format_table, run

BIG = 9101
HOLD = 9102


def test_a_peer_that_never_reads_is_not_served_until_it_does():
    """Answers of 256 KiB to a client that writes 400 requests and reads nothing: the server stops serving it once its
    write buffer is past the high-water mark (it does not buffer 100 MiB of answers), and serves every request once
    the client reads."""

    async def main():
        served = 0
        server = RemotingServer("127.0.0.1", 0)

        async def big(conn, cmd):
            nonlocal served
            served += 1
            return RemotingCommand.response_to(cmd, 0, body=b"x" * 256 * 1024)

        server.register(BIG, big, inline=True)
        await server.start()
        loop = asyncio.get_running_loop()
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.setblocking(False)
        try:
            frames = b"".join(RemotingCommand.request(BIG, {}).encode() for _ in range(400))
            await loop.sock_sendall(sock, frames)
            await asyncio.sleep(0.5)
            (conn,) = server.connections
            buffered = conn.writer.get_write_buffer_size()
            assert served < 100, served  # 400 answers would be 100 MiB
            assert buffered < 8 * 1024 * 1024, buffered
            received = 0
            want = 400 * 256 * 1024
            while received < want:  # now read: every request gets its answer
                chunk = await asyncio.wait_for(loop.sock_recv(sock, 1 << 20), 10)
                assert chunk
                received += len(chunk)
            assert served == 400
        finally:
            sock.close()
            await server.stop()

    asyncio.run(main())


def test_requests_processed_at_once_per_connection_are_capped(monkeypatch):
    """Past MAX_TASKS_PER_CONNECTION requests in progress (long polls parked, say) the connection waits for one to
    finish before starting the next; none is dropped."""
    monkeypatch.setattr(remoting_server, "MAX_TASKS_PER_CONNECTION", 4)

    async def main():
        running = 0
        most = 0
        release = asyncio.Event()
        server = RemotingServer("127.0.0.1", 0)

        async def hold(conn, cmd):
            nonlocal running, most
            running += 1
            most = max(most, running)
            await release.wait()
            running -= 1
            return RemotingCommand.response_to(cmd, 0)

        server.register(HOLD, hold)
        await server.start()
        loop = asyncio.get_running_loop()
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.setblocking(False)
        try:
            reqs = [RemotingCommand.request(HOLD, {"i": i}) for i in range(10)]
            await loop.sock_sendall(sock, b"".join(r.encode() for r in reqs))
            await asyncio.sleep(0.3)
            assert running == 4 and most == 4
            release.set()
            buf = b""
            answered = 0
            while answered < 10:
                buf += await asyncio.wait_for(loop.sock_recv(sock, 65536), 10)
                while len(buf) >= 4:
                    n = int.from_bytes(buf[:4], "big")
                    if len(buf) < 4 + n:
                        break
                    assert RemotingCommand.decode_frame(buf[4 : 4 + n]).code == 0
                    buf = buf[4 + n :]
                    answered += 1
            assert most == 4
        finally:
            sock.close()
            await server.stop()

    asyncio.run(main())


@pytest.mark.slow
def test_exhaustion_scenarios_quick():
    results = run("quick")
    table = format_table(results)
    print(table)
    assert [r.name for r in results] == ["idle", "slowloris", "non_reader", "pipeline", "group_churn", "disk_full"]
    bad = [r for r in results if not r.ok]
    if bad and all(r.name == "disk_full" and "user namespaces" in " ".join(r.failures) for r in bad):
        pytest.skip(f"no tmpfs in a user namespace here; the other scenarios passed:\n{table}")
    assert not bad, table
