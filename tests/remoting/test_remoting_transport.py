"""The asyncio remoting transport over real TCP on 127.0.0.1: request/response by opaque, oneway, unknown codes,
processor failures, and bad frames closing only their own connection."""

from __future__ import annotations

import asyncio
import struct

import pytest

from rmq_core.remoting import RemotingCommand
from rmq_core.remoting.remoting_client import RemotingClient
from rmq_core.remoting.remoting_server import RemotingServer

ECHO = 9001
BOOM = 9002
ONEWAY = 9003


def run(coro):
    return asyncio.run(coro)


async def _server(seen: list):
    server = RemotingServer("127.0.0.1", 0)

    async def echo(conn, cmd):
        await asyncio.sleep(0.01 if cmd.ext_fields.get("slow") else 0)
        return RemotingCommand.response_to(cmd, 0, ext_fields=cmd.ext_fields, body=cmd.body)

    async def boom(conn, cmd):
        raise RuntimeError("processor exploded")

    async def oneway(conn, cmd):
        seen.append(cmd.ext_fields["n"])
        return RemotingCommand.response_to(cmd, 0)

    server.register(ECHO, echo)
    server.register(BOOM, boom)
    server.register(ONEWAY, oneway)
    await server.start()
    return server


def test_request_response_matched_by_opaque_concurrently():
    async def main():
        server = await _server([])
        client = RemotingClient()
        try:
            reqs = [
                RemotingCommand.request(ECHO, {"i": i, "slow": "1" if i % 2 else None}, body=b"%d" % i)
                for i in range(50)
            ]
            resps = await asyncio.gather(*(client.invoke(server.address, r) for r in reqs))
            for req, resp in zip(reqs, resps):
                assert resp.is_response and resp.opaque == req.opaque
                assert resp.ext_fields["i"] == req.ext_fields["i"] and resp.body == req.body
        finally:
            await client.close()
            await server.stop()

    run(main())


def test_unknown_code_and_processor_failure():
    async def main():
        server = await _server([])
        client = RemotingClient()
        try:
            r = await client.invoke(server.address, RemotingCommand.request(4242))
            assert r.code == 3 and "4242" in r.remark  # REQUEST_CODE_NOT_SUPPORTED
            r = await client.invoke(server.address, RemotingCommand.request(BOOM))
            assert r.code == 1 and "processor exploded" in r.remark  # SYSTEM_ERROR
        finally:
            await client.close()
            await server.stop()

    run(main())


def test_oneway_gets_no_response():
    async def main():
        seen: list = []
        server = await _server(seen)
        client = RemotingClient()
        try:
            await client.invoke_oneway(server.address, RemotingCommand.request(ONEWAY, {"n": "1"}))
            # the next request's response proves ordering; no stray response for the oneway arrives
            r = await client.invoke(server.address, RemotingCommand.request(ECHO))
            assert r.code == 0 and seen == ["1"]
        finally:
            await client.close()
            await server.stop()

    run(main())


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">i", 17 * 1024 * 1024),  # over 16 MiB
        struct.pack(">i", 2) + b"ab",  # shorter than the header-length field
        struct.pack(">ii", 9, 5) + b"nope!",  # header not JSON
        struct.pack(">ii", 100, 2) + b"{}",  # truncated: closes mid-frame
    ],
)
def test_bad_frame_closes_only_that_connection(garbage):
    async def main():
        server = await _server([])
        client = RemotingClient()
        try:
            good = await client.invoke(server.address, RemotingCommand.request(ECHO, {"x": 1}))
            assert good.code == 0
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(garbage)
            await writer.drain()
            writer.write_eof()
            assert await asyncio.wait_for(reader.read(), 5) == b""  # the server closed it without answering
            writer.close()
            again = await client.invoke(server.address, RemotingCommand.request(ECHO, {"x": 2}))
            assert again.code == 0 and again.ext_fields["x"] == "2"
        finally:
            await client.close()
            await server.stop()

    run(main())


def test_invoke_times_out():
    async def main():
        server = RemotingServer("127.0.0.1", 0)

        async def never(conn, cmd):
            await asyncio.sleep(10)

        server.register(ECHO, never)
        await server.start()
        client = RemotingClient()
        try:
            with pytest.raises(asyncio.TimeoutError):
                await client.invoke(server.address, RemotingCommand.request(ECHO), timeout=0.2)
        finally:
            await client.close()
            await server.stop()

    run(main())


def test_timeouts_of_one_connection_each_fire_at_their_own_deadline():
    # a later request with a shorter timeout fails first,
    # an answered one never fails, and the long one still fails at its own deadline
    async def main():
        server = RemotingServer("127.0.0.1", 0)

        async def slow(conn, cmd):
            await asyncio.sleep(float(cmd.ext_fields["sleep"]))
            return RemotingCommand.response_to(cmd, 0)

        server.register(ECHO, slow)
        await server.start()
        client = RemotingClient()
        loop = asyncio.get_running_loop()
        try:
            t0 = loop.time()

            async def call(sleep: float, timeout: float) -> tuple[str, float]:
                try:
                    await client.invoke(server.address, RemotingCommand.request(ECHO, {"sleep": sleep}), timeout)
                    return "answered", loop.time() - t0
                except TimeoutError as e:
                    assert f"no response within {timeout} s" in str(e)
                    return "timed out", loop.time() - t0

            long = asyncio.ensure_future(call(5, 1.2))
            await asyncio.sleep(0.05)
            short, answered = await asyncio.gather(call(5, 0.2), call(0.05, 3.0))
            assert short[0] == "timed out" and 0.2 <= short[1] < 1.0
            assert answered[0] == "answered"
            outcome, at = await long
            assert outcome == "timed out" and 1.2 <= at < 3.0
            conn = client._conns[server.address]
            assert not conn.pending
        finally:
            await client.close()
            await server.stop()

    run(main())


def _read_frames(data: bytes) -> list[RemotingCommand]:
    out, pos = [], 0
    while pos + 4 <= len(data):
        (length,) = struct.unpack_from(">i", data, pos)
        out.append(RemotingCommand.decode_frame(data[pos + 4 : pos + 4 + length]))
        pos += 4 + length
    assert pos == len(data)
    return out


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">i", 17 * 1024 * 1024),  # oversized
        struct.pack(">i", -5),  # negative length
        struct.pack(">ii", 8, 100) + b"\0" * 4,  # header past the frame
        struct.pack(">ii", 9, 5) + b"nope!",  # garbage header
    ],
)
def test_frames_before_a_bad_frame_in_one_chunk_are_answered_then_closed(garbage):
    """The frame splitter reads a chunk holding good frames then a bad one: the good ones are answered in order, the
    connection then closes, and another connection with requests in flight keeps being served."""

    async def main():
        server = await _server([])
        server.register(ECHO + 10, server._processors[ECHO], inline=True)
        client = RemotingClient()
        try:
            busy = [
                asyncio.ensure_future(client.invoke(server.address, RemotingCommand.request(ECHO, {"i": i})))
                for i in range(20)
            ]
            good = [RemotingCommand.request(ECHO + 10, {"i": i}, body=b"b%d" % i) for i in range(3)]
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(b"".join(g.encode() for g in good) + garbage + good[0].encode())
            await writer.drain()
            answered = _read_frames(await asyncio.wait_for(reader.read(), 5))  # read() returns at the server's close
            assert [a.opaque for a in answered] == [g.opaque for g in good]
            assert [a.body for a in answered] == [g.body for g in good]
            writer.close()
            assert all(r.code == 0 for r in await asyncio.gather(*busy))
            again = await client.invoke(server.address, RemotingCommand.request(ECHO, {"x": 2}))
            assert again.code == 0 and again.ext_fields["x"] == "2"
        finally:
            await client.close()
            await server.stop()

    run(main())


def test_frames_split_at_every_byte_and_half_close_are_all_answered():
    """Frames arriving a byte at a time are reassembled; a client that shuts its writing side after pipelining still
    gets every answer to its inline-processed requests before the server closes."""

    async def main():
        server = await _server([])
        server.register(ECHO + 10, server._processors[ECHO], inline=True)
        try:
            reqs = [RemotingCommand.request(ECHO + 10, {"i": i}, body=bytes(range(i))) for i in range(6)]
            data = b"".join(r.encode() for r in reqs)
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            for i in range(len(data)):
                writer.write(data[i : i + 1])
                await writer.drain()
                if i % 50 == 0:
                    await asyncio.sleep(0)
            writer.write_eof()
            answered = _read_frames(await asyncio.wait_for(reader.read(), 5))
            assert sorted(a.opaque for a in answered) == sorted(r.opaque for r in reqs)
            assert {a.opaque: a.body or b"" for a in answered} == {r.opaque: r.body or b"" for r in reqs}
            writer.close()
        finally:
            await server.stop()

    run(main())


def test_a_chunk_on_an_idle_connection_is_served_at_once_and_what_it_waits_for_keeps_the_order():
    """Invariant 6: a chunk of inline batch requests arriving while its connection has nothing queued is handled in
    ``data_received`` (no task runs it); a batch processor may answer at once (a list) or with an awaitable, and a
    chunk arriving while that awaitable is pending is handled only after it, so the answers keep arrival order."""
    BATCH = 9201
    gate = asyncio.Event()

    async def main():
        server = await _server([])
        runs: list[tuple[bytes, bool]] = []  # (first body, handled outside any task)

        def answers(cmds):
            return [RemotingCommand.response_to(c, 0, body=c.body) for c in cmds]

        def batch(conn, cmds):
            runs.append((cmds[0].body or b"", asyncio.current_task() is None))
            if (cmds[0].body or b"").startswith(b"wait"):

                async def later():
                    await gate.wait()
                    return answers(cmds)

                return later()
            return answers(cmds)

        server.register_batch((BATCH,), batch, inline=True)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        buf = b""

        async def read_answer() -> RemotingCommand:
            nonlocal buf
            while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
                buf += await asyncio.wait_for(reader.read(65536), 5)
            n = struct.unpack(">i", buf[:4])[0]
            frame, buf = buf[4 : 4 + n], buf[4 + n :]
            return RemotingCommand.decode_frame(frame)

        async def runs_reach(n: int) -> None:
            for _ in range(500):
                if len(runs) >= n:
                    return
                await asyncio.sleep(0.01)
            raise AssertionError(f"{len(runs)} runs, expected {n}")

        try:
            first = [RemotingCommand.request(BATCH, body=b"now0"), RemotingCommand.request(BATCH, body=b"now1")]
            writer.write(b"".join(r.encode() for r in first))
            assert [(await read_answer()).body for _ in first] == [b"now0", b"now1"]
            assert runs == [(b"now0", True)]  # one chunk, one call, outside any task

            waiting = RemotingCommand.request(BATCH, body=b"wait2")
            writer.write(waiting.encode())
            await runs_reach(2)
            queued = RemotingCommand.request(BATCH, body=b"then3")
            writer.write(queued.encode())
            await writer.drain()
            await asyncio.sleep(0.1)
            assert runs == [(b"now0", True), (b"wait2", True)]  # then3 waits for wait2's awaitable
            gate.set()
            assert [(await read_answer()).opaque for _ in range(2)] == [waiting.opaque, queued.opaque]
            assert runs[2] == (b"then3", False)  # handled by the serving task, after wait2

            again = RemotingCommand.request(BATCH, body=b"again4")
            writer.write(again.encode())
            assert (await read_answer()).body == b"again4"
            assert runs[3] == (b"again4", True)  # idle again: served at once
        finally:
            writer.close()
            await server.stop()

    run(main())


@pytest.mark.parametrize("inline", [True, False])
def test_batch_processor_gets_the_run_of_one_chunk_and_answers_in_one_write(inline):
    """``register_batch``: the requests of its codes read in one chunk reach the processor together (a request of
    another code ends the run and is served in its turn); the answers keep the requests' opaques, a oneway request
    gets none; a failing batch processor answers SYSTEM_ERROR to each request of its run; a later ``register`` of
    one of the codes takes it back."""
    BATCH_A, BATCH_B, FAIL = 9101, 9102, 9103

    async def main():
        server = await _server([])
        runs: list[list[int]] = []

        async def batch(conn, cmds):
            runs.append([c.code for c in cmds])
            return [RemotingCommand.response_to(c, 0, ext_fields={"n": len(cmds)}, body=c.body) for c in cmds]

        async def failing(conn, cmds):
            raise RuntimeError("batch exploded")

        server.register_batch((BATCH_A, BATCH_B), batch, inline=inline)
        server.register_batch((FAIL,), failing, inline=inline)
        reqs = [
            RemotingCommand.request(BATCH_A, body=b"a0"),
            RemotingCommand.request(BATCH_B, body=b"b1"),
            RemotingCommand.request(BATCH_A, body=b"a2").mark_oneway(),
            RemotingCommand.request(BATCH_A, body=b"a3"),
            RemotingCommand.request(ECHO, body=b"e4"),
            RemotingCommand.request(BATCH_B, body=b"b5"),
            RemotingCommand.request(FAIL, body=b"f6"),
            RemotingCommand.request(FAIL, body=b"f7"),
        ]
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(b"".join(r.encode() for r in reqs))
            await writer.drain()
            got: dict[int, RemotingCommand] = {}
            buf = b""
            while len(got) < len(reqs) - 1:
                buf += await asyncio.wait_for(reader.read(65536), 5)
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0]:
                    n = struct.unpack(">i", buf[:4])[0]
                    resp = RemotingCommand.decode_frame(buf[4 : 4 + n])
                    got[resp.opaque] = resp
                    buf = buf[4 + n :]
            assert reqs[2].opaque not in got  # oneway
            assert [got[r.opaque].body for i, r in enumerate(reqs) if i not in (2, 6, 7)] == [
                b"a0",
                b"b1",
                b"a3",
                b"e4",
                b"b5",
            ]
            assert runs[0] == [BATCH_A, BATCH_B, BATCH_A, BATCH_A], runs  # the run up to the ECHO request
            assert got[reqs[0].opaque].ext_fields["n"] == "4"
            assert [got[r.opaque].code for r in reqs[6:]] == [1, 1]
            assert "batch exploded" in (got[reqs[6].opaque].remark or "")
        finally:
            writer.close()
        server.register(BATCH_A, server._processors[ECHO])  # taken back by a plain registration
        client = RemotingClient()
        try:
            runs.clear()
            resp = await client.invoke(server.address, RemotingCommand.request(BATCH_A, {"x": "1"}))
            assert resp.code == 0 and resp.ext_fields["x"] == "1" and runs == []
        finally:
            await client.close()
            await server.stop()

    run(main())


@pytest.mark.parametrize("inline", [True, False])
def test_a_batch_processors_runs_stop_at_max_run_and_large_answers_arrive_whole(inline):
    """``register_batch(..., max_run=3)``: a chunk of 8 of its requests reaches the processor in runs of at most 3,
    in order (the first served at once in ``data_received`` when inline, the rest by the serving task), and the
    answers with large bodies (written as pieces, not copied: ``Connection.send_parts``) arrive byte for byte in the
    requests' order, each with its request's opaque. A run's large answers are handed to the transport when the run
    ends: none is still queued when the next run starts (in the same loop iteration: the serving task's runs)."""
    BIG = 9104

    async def main():
        server = await _server([])
        runs: list[int] = []
        queued_at_start: list[int] = []

        def batch(conn, cmds):
            runs.append(len(cmds))
            queued_at_start.append(len(conn._out))
            return [RemotingCommand.response_to(c, 0, body=c.body * 2048) for c in cmds]

        server.register_batch((BIG,), batch, inline=inline, max_run=3)
        reqs = [RemotingCommand.request(BIG, body=bytes([65 + i]) * 10) for i in range(8)]
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            writer.write(b"".join(r.encode() for r in reqs))
            await writer.drain()
            got = []
            buf = b""
            while len(got) < len(reqs):
                buf += await asyncio.wait_for(reader.read(1 << 20), 5)
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0]:
                    n = struct.unpack(">i", buf[:4])[0]
                    got.append(RemotingCommand.decode_frame(buf[4 : 4 + n]))
                    buf = buf[4 + n :]
            assert [g.opaque for g in got] == [r.opaque for r in reqs]
            assert [g.body for g in got] == [r.body * 2048 for r in reqs]
            assert sum(runs) == 8 and max(runs) <= 3, runs
            assert queued_at_start == [0] * len(runs)
        finally:
            writer.close()
            await server.stop()

    run(main())
