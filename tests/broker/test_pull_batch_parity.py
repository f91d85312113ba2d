"""The pulls read together from one connection (``PullMessageProcessor.process_batch``, registered with
``register_batch``: runs of at most SERVE_BUDGET, answered in one write with the bodies as they are) are answered
exactly as the same pulls sent one at a time are: the same code, remark, header fields and body (the store's records
byte for byte), whether the pulls arrive in one chunk on one connection or spread over several connections at once.
The corpus has found pulls with large bodies, short and empty queues, bad queue ids, an unknown topic and group, a
LITE_PULL_MESSAGE and a oneway pull (no answer). What differs by nature is blanked: the consumer's address in a
remark."""

from __future__ import annotations

import asyncio
import re
import struct

from rmq_core.remoting.codes import RequestCode
from rmq_core.remoting.command import RemotingCommand

from support.pull_helpers import add_topic, pull_request, put, running_broker

_PEER = re.compile(r"127\.0\.0\.1:\d+")


def _corpus() -> list[RemotingCommand]:
    """Fresh requests (their own opaques), 24 of them: more than one run."""
    reqs = [pull_request(offset=o) for o in (0, 32, 64, 90, 100, 500)]
    reqs += [pull_request(queue_id=1), pull_request(queue_id=2), pull_request(queue_id=9)]
    reqs += [pull_request(topic="NoSuchTopic"), pull_request(group="unknown_group", offset=7)]
    lite = pull_request(offset=16, max_nums=8)
    lite.code = int(RequestCode.LITE_PULL_MESSAGE)
    reqs.append(lite)
    reqs += [pull_request(offset=o, max_nums=n) for o, n in ((1, 1), (3, 5), (10, 17), (33, 32))]
    reqs += [pull_request(offset=o) for o in range(2, 16, 2)]
    reqs.append(pull_request(offset=0).mark_oneway())
    return reqs


def _view(r: RemotingCommand) -> tuple:
    """What an answer says; the consumer's address in a remark (each connection its own port) blanked."""
    return r.code, _PEER.sub("<peer>", r.remark or ""), dict(r.ext_fields), r.body


async def _pull_together(addr: str, groups: list[list[RemotingCommand]]) -> dict[int, RemotingCommand]:
    """Each group's requests written in one write on a connection of its own, all connections at once."""
    host, port = addr.rsplit(":", 1)

    async def one(reqs: list[RemotingCommand]) -> list[RemotingCommand]:
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            writer.write(b"".join(r.encode() for r in reqs))
            await writer.drain()
            want = sum(1 for r in reqs if not r.is_oneway)
            got: list[RemotingCommand] = []
            buf = b""
            while len(got) < want:
                buf += await asyncio.wait_for(reader.read(1 << 20), 10)
                while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0]:
                    n = struct.unpack(">i", buf[:4])[0]
                    got.append(RemotingCommand.decode_frame(buf[4 : 4 + n]))
                    buf = buf[4 + n :]
            await asyncio.sleep(0.05)
            assert await _nothing_more(reader), "an answer to the oneway pull"
            return got
        finally:
            writer.close()

    answers = await asyncio.gather(*(one(g) for g in groups))
    return {a.opaque: a for group in answers for a in group}


async def _nothing_more(reader: asyncio.StreamReader) -> bool:
    try:
        await asyncio.wait_for(reader.read(1), 0.1)
    except TimeoutError:
        return True
    return False


def test_pulls_read_together_are_answered_as_pulls_alone(tmp_path, client):
    with running_broker(tmp_path) as broker:
        add_topic(broker)
        for i in range(100):
            put(broker, body=bytes([48 + i % 10]) * 1024, tags=f"t{i % 3}")
        for i in range(3):
            put(broker, queue_id=1, body=b"short %d" % i)
        addr = broker.address
        alone = [None if r.is_oneway else _view(client.invoke_sync(addr, r, timeout=3)) for r in _corpus()]
        assert sum(1 for a in alone if a is not None and a[0] == 0 and len(a[3] or b"") > 16 * 1024) >= 3
        for connections in (1, 3):
            reqs = _corpus()
            together = asyncio.run(_pull_together(addr, [reqs[i::connections] for i in range(connections)]))
            assert len(together) == len(reqs) - 1
            for r, want in zip(reqs, alone, strict=True):
                if want is None:
                    assert r.opaque not in together
                else:
                    assert _view(together[r.opaque]) == want, (connections, r.ext_fields)
