"""Lean benchmark clients shared by benches/bench_broker.py and benches/bench_vs_apache.py: request builders, a
pipelined sender of pre-encoded SEND_MESSAGE_V2 frames, a puller keeping one PULL_MESSAGE in flight per queue, and
the long-poll wake-up probe. They talk to any RocketMQ 4.x broker (rmq_core's or Apache's) over plain TCP.

Wire format read here: RocketMQ remoting frames, ``int32 length | int32 (serialize type << 24 | header length) |
header | body``; only JSON headers are accepted (rmq_core's encoder writes JSON requests and both brokers answer in
the request's serialization), a response in another serialization is counted as a failure.

The sender and puller parse only response headers, and the sender's frames are built before the clock starts, so
what they time is the broker's work, not a Python client's. Every run is bounded: the caller gives a timeout, a run
that overruns raises ``TimeoutError``. Thread-safety: each object lives on one asyncio event loop.
"""

from __future__ import annotations

import asyncio
import statistics
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from rmq_core.client.mq_client_api import pull_message_request, send_message_request
from rmq_core.common import sys_flag
from rmq_core.message_encoding import properties_to_string
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import PullMessageRequestHeader, SendMessageRequestHeader
from rmq_core.remoting.remoting_client import RemotingClient

GROUP = "bench_group"
QUEUES = 4
_JSON = 0  # serialize type in the top byte of the header-length word
_SUCCESS_PREFIX = b'{"code":0,'  # rmq_core and Apache (fastjson, fields sorted) both write "code" first


def send_request(topic: str, queue_id: int, body: bytes, props: dict[str, str]) -> RemotingCommand:
    h = SendMessageRequestHeader(
        producerGroup="bench_producer",
        topic=topic,
        defaultTopic="TBW102",
        defaultTopicQueueNums=QUEUES,
        queueId=queue_id,
        sysFlag=0,
        bornTimestamp=int(time.time() * 1000),
        flag=0,
        properties=properties_to_string(props),
        reconsumeTimes=0,
    )
    return send_message_request(h, body)


def send_frames(topic: str, n: int, body: bytes, queues: int = QUEUES) -> list[bytes]:
    """``n`` encoded SEND_MESSAGE_V2 frames, round robin over ``queues``, each with its own key (as a producer's
    messages have), WAIT=true (a producer's default: a SYNC_FLUSH broker answers after the flush)."""
    return [
        send_request(topic, i % queues, body, {"TAGS": "TagA", "KEYS": f"k{i}", "WAIT": "true"}).encode()
        for i in range(n)
    ]


def pull_request(topic: str, queue_id: int, offset: int, n: int = 32, suspend_ms: int = 15000) -> RemotingCommand:
    h = PullMessageRequestHeader(
        consumerGroup=GROUP,
        topic=topic,
        queueId=queue_id,
        queueOffset=offset,
        maxMsgNums=n,
        sysFlag=sys_flag.build_pull_sys_flag(False, True, True),
        commitOffset=0,
        suspendTimeoutMillis=suspend_ms,
        subscription="*",
        subVersion=0,
        expressionType="TAG",
    )
    return pull_message_request(h)


class _Frames:
    """Splits received bytes into (header, body length) pairs; JSON headers only."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[bytes | None, int]]:
        """The complete frames in ``data`` and what came before: (JSON header bytes, or None for another
        serialization; body length)."""
        self.buf += data
        out: list[tuple[bytes | None, int]] = []
        pos, buf = 0, self.buf
        while len(buf) - pos >= 8:
            length, mark = struct.unpack_from(">ii", buf, pos)
            if len(buf) - pos - 4 < length:
                break
            hlen = mark & 0xFFFFFF
            header = bytes(buf[pos + 8 : pos + 8 + hlen]) if (mark >> 24) & 0xFF == _JSON else None
            out.append((header, length - 4 - hlen))
            pos += 4 + length
        del buf[:pos]
        return out


class LeanSender(asyncio.Protocol):
    """A pipelined sender: writes pre-encoded request frames keeping ``window`` in flight and counts the responses,
    a response whose code is not SUCCESS as a failure."""

    def __init__(self, frames: Sequence[bytes], window: int) -> None:
        self.frames, self.window = frames, window
        self.sent = self.answered = self.failed = 0
        self.failure_codes: dict[int, int] = {}
        self.frames_in = _Frames()
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self._top_up()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"connection lost after {self.answered} responses: {exc}"))

    def _top_up(self) -> None:
        end = min(len(self.frames), self.answered + self.window)
        if end > self.sent:
            self.transport.write(b"".join(self.frames[self.sent : end]))
            self.sent = end

    def data_received(self, data: bytes) -> None:
        for header, _ in self.frames_in.feed(data):
            self.answered += 1
            if header is not None and header.startswith(_SUCCESS_PREFIX):
                continue
            code = -1 if header is None else int(orjson.loads(header).get("code", -1))
            if code != ResponseCode.SUCCESS:
                self.failed += 1
                self.failure_codes[code] = self.failure_codes.get(code, 0) + 1
        if self.answered >= len(self.frames):
            if not self.done.done():
                self.done.set_result(None)
        else:
            self._top_up()


@dataclass
class SendRun:
    seconds: float
    answered: int
    failed: int
    failure_codes: dict[int, int]

    @property
    def msgs_per_s(self) -> float:
        return (self.answered - self.failed) / self.seconds


async def lean_send(addr: str, frames: Sequence[bytes], window: int, timeout: float = 300.0) -> SendRun:
    """Send every frame over one connection with ``window`` in flight; the clock covers connect to last response."""
    host, port = addr.rsplit(":", 1)
    loop = asyncio.get_running_loop()
    t0 = time.perf_counter()
    transport, pipe = await loop.create_connection(lambda: LeanSender(frames, window), host, int(port))
    try:
        await asyncio.wait_for(asyncio.shield(pipe.done), timeout)
        dt = time.perf_counter() - t0
    finally:
        transport.close()
    return SendRun(dt, pipe.answered, pipe.failed, pipe.failure_codes)


class LeanPuller(asyncio.Protocol):
    """One outstanding PULL_MESSAGE per queue (as a push consumer keeps), pre-built requests, the response header
    parsed for nextBeginOffset, the body (the stored records) counted, not decoded. A queue is done when it reaches
    its ``targets`` offset if given, else when answered with anything but SUCCESS (nothing more to pull)."""

    def __init__(self, topic: str, queues: int | Sequence[int], n: int, targets: Sequence[int] | None) -> None:
        self.topic, self.n = topic, n
        queue_ids = list(range(queues)) if isinstance(queues, int) else list(queues)  # a count, or the queue ids
        self.offsets = dict.fromkeys(queue_ids, 0)
        self.targets = dict(zip(queue_ids, targets, strict=True)) if targets is not None else None
        self.by_opaque: dict[int, int] = {}
        self.frames_in = _Frames()
        self.pulled = self.body_bytes = 0
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        for q in list(self.offsets):
            self._pull(q)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"connection lost after {self.pulled} messages: {exc}"))

    def _pull(self, q: int) -> None:
        if self.targets is not None and self.offsets[q] >= self.targets[q]:
            return
        req = pull_request(self.topic, q, self.offsets[q], self.n, suspend_ms=0)
        self.by_opaque[req.opaque] = q
        self.transport.write(req.encode())

    def data_received(self, data: bytes) -> None:
        for raw, body_len in self.frames_in.feed(data):
            if raw is None:
                raise ValueError("a pull response not in JSON")
            header = orjson.loads(raw)
            q = self.by_opaque.pop(header["opaque"])
            if header["code"] == ResponseCode.SUCCESS:
                nxt = int(header["extFields"]["nextBeginOffset"])
                self.pulled += nxt - self.offsets[q]
                self.body_bytes += body_len
                self.offsets[q] = nxt
                self._pull(q)
            elif self.targets is not None:
                self._pull(q)  # short of its target: the broker is still dispatching (the pull parks until then)
        if not self.by_opaque and not self.done.done():
            self.done.set_result(None)


async def lean_pull(
    addr: str,
    topic: str,
    queues: int | Sequence[int],
    n: int = 32,
    targets: Sequence[int] | None = None,
    timeout: float = 300.0,
) -> tuple[int, float]:
    """Drain ``topic``'s queues (``queues`` of them, or those ids) from offset 0: (messages pulled, seconds)."""
    host, port = addr.rsplit(":", 1)
    loop = asyncio.get_running_loop()
    t0 = time.perf_counter()
    transport, pipe = await loop.create_connection(lambda: LeanPuller(topic, queues, n, targets), host, int(port))
    try:
        await asyncio.wait_for(asyncio.shield(pipe.done), timeout)
        dt = time.perf_counter() - t0
    finally:
        transport.close()
    return pipe.pulled, dt


async def wakeups(addr: str, topic: str, rounds: int, timeout: float = 30.0) -> list[float]:
    """A pull parked by long polling (consumer connection), then one send (producer connection): per round, the
    time from the send's response to the parked pull's response in ms (negative: the pull answered first). The
    consumer and the producer are separate clients (separate connections), as in real use."""
    consumer, producer = RemotingClient(), RemotingClient()
    try:
        body = b"x" * 100
        r = await producer.invoke(addr, send_request(topic, 0, body, {"TAGS": "TagA"}), 10)
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
        # the next offset to pull is taken from pull responses, as a consumer does: a send's queueOffset + 1 can be
        # ahead of a broker whose consume queue is built after the send's response (Apache's: "offset moved")
        first = await consumer.invoke(addr, pull_request(topic, 0, int(r.ext_fields["queueOffset"]), 32), 30)
        if first.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"first pull answered {first.code} {first.remark}")
        offset = int(first.ext_fields["nextBeginOffset"])
        deltas: list[float] = []
        deadline = time.monotonic() + timeout
        for _ in range(rounds):
            if time.monotonic() > deadline:
                raise TimeoutError(f"wake-up: {len(deltas)} of {rounds} rounds in {timeout} s")
            pull = asyncio.ensure_future(consumer.invoke(addr, pull_request(topic, 0, offset, 32), 30))
            await asyncio.sleep(0.002)  # let the pull park
            send = await producer.invoke(addr, send_request(topic, 0, body, {"TAGS": "TagA"}), 10)
            t_send = time.perf_counter()
            presp = await pull
            t_pull = time.perf_counter()
            if presp.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"parked pull answered {presp.code} {presp.remark}")
            if int(send.ext_fields["queueOffset"]) != offset:
                raise RuntimeError(
                    f"the send went to offset {send.ext_fields['queueOffset']}, the pull waited at {offset}"
                )
            deltas.append((t_pull - t_send) * 1000.0)
            offset = int(presp.ext_fields["nextBeginOffset"])
        return deltas
    finally:
        await consumer.close()
        await producer.close()


def p50_p99(values: Sequence[float]) -> tuple[float, float]:
    return statistics.median(values), statistics.quantiles(values, n=100)[98]
