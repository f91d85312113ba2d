"""The asyncio remoting transport over real TCP on 127.0.0.1: request/response by opaque, oneway, unknown codes,
processor failures, and bad frames closing only their own connection."""

from __future__ import annotations

import asyncio
import struct

import pytest

from rmq_core.remoting import RemotingCommand
from rmq_core.remoting.transport import RemotingClient, RemotingServer

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
