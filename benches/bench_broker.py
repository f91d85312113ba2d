"""End-to-end broker benchmarks over loopback, with the broker in its own process (``rmq-core broker``).

    .venv/bin/python benches/bench_broker.py [--messages 100000] [--size 1024] [--wakeups 1000] [--json out.json]

What it measures (issue 3's targets in brackets):
  send      single 1 KiB messages (SEND_MESSAGE_V2, one message per request), a window of in-flight requests on one
            connection, as a multi-threaded producer drives it                               [≥ 20,000 msg/s]
  pull      a backlog of 1 KiB messages pulled 32 per request (PULL_MESSAGE), one outstanding pull per queue,
            as a push consumer does; the client counts records without decoding them          [≥ 200,000 msg/s]
  Both are also run through rmq_core's RemotingClient, whose own per-request cost is then part of the figure.
  wake-up   a pull parked by long polling (consumer connection), then one send (producer connection): time from
            the send's response to the parked pull's response (can be negative: the pull may answer first),
            p50/p99                                                                          [p99 ≤ 2 ms]
The lean clients write pre-built frames and parse only response headers, so the figures are the broker's. One run;
machines are noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

from rmq_core.client.mq_client_api import pull_message_request, send_message_request
from rmq_core.common import sys_flag
from rmq_core.message_encoding import properties_to_string
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    SendMessageRequestHeader,
    decode_header,
)
from rmq_core.remoting.transport import RemotingClient

GROUP = "bench_group"
QUEUES = 4


def start_broker(store_dir: str) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "rmq_core.cli", "broker", "--port", "0", "--dir", store_dir, "--name", "bench"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"@(\S+:\d+)", line)
    if not m:
        proc.kill()
        raise SystemExit(f"broker did not start: {line!r}")
    return proc, m.group(1)


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


class _FramePipe(asyncio.Protocol):
    """A lean pipelined sender: writes pre-encoded request frames keeping ``window`` in flight and counts the
    responses (their code read from the JSON header), so the figure is the broker's, not a Python client's."""

    def __init__(self, frames: list[bytes], window: int) -> None:
        self.frames, self.window = frames, window
        self.sent = self.answered = self.failed = 0
        self.buf = bytearray()
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._top_up()

    def _top_up(self) -> None:
        end = min(len(self.frames), self.answered + self.window)
        if end > self.sent:
            self.transport.write(b"".join(self.frames[self.sent : end]))  # type: ignore[attr-defined]
            self.sent = end

    def data_received(self, data: bytes) -> None:
        self.buf += data
        pos = 0
        while len(self.buf) - pos >= 8:
            length, mark = struct.unpack_from(">ii", self.buf, pos)
            if len(self.buf) - pos - 4 < length:
                break
            header = bytes(self.buf[pos + 8 : pos + 8 + (mark & 0xFFFFFF)])
            if not header.startswith(b'{"code":0,'):
                self.failed += 1
            pos += 4 + length
            self.answered += 1
        del self.buf[:pos]
        if self.answered >= len(self.frames):
            if not self.done.done():
                self.done.set_result(None)
        else:
            self._top_up()


async def bench_send(
    client: RemotingClient, addr: str, topic: str, n: int, size: int, window: int, lean: bool = True
) -> float:
    body = os.urandom(size)
    sem = asyncio.Semaphore(window)
    failures = 0

    async def one(i: int) -> None:
        nonlocal failures
        try:
            r = await client.invoke(addr, send_request(topic, i % QUEUES, body, {"TAGS": "TagA", "KEYS": f"k{i}"}), 10)
            if r.code != ResponseCode.SUCCESS:
                failures += 1
        finally:
            sem.release()

    # warm-up: creates the topic
    r = await client.invoke(addr, send_request(topic, 0, body, {"TAGS": "TagA"}), 10)
    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
    if not lean:
        t0 = time.perf_counter()
        tasks = []
        for i in range(n):
            await sem.acquire()
            tasks.append(asyncio.ensure_future(one(i)))
        await asyncio.gather(*tasks)
        dt = time.perf_counter() - t0
        if failures:
            raise SystemExit(f"{failures} sends failed")
        return n / dt
    frames = [send_request(topic, i % QUEUES, body, {"TAGS": "TagA", "KEYS": f"k{i}"}).encode() for i in range(n)]
    host, port = addr.rsplit(":", 1)
    loop = asyncio.get_running_loop()
    t0 = time.perf_counter()
    transport, pipe = await loop.create_connection(lambda: _FramePipe(frames, window), host, int(port))
    await pipe.done
    dt = time.perf_counter() - t0
    transport.close()
    if pipe.failed:
        raise SystemExit(f"{pipe.failed} sends failed")
    return n / dt


class _PullPipe(asyncio.Protocol):
    """A lean puller: one outstanding PULL_MESSAGE per queue (as a push consumer keeps), pre-built requests, the
    response header parsed for nextBeginOffset, the body (the stored records) counted, not decoded."""

    def __init__(self, topic: str, queues: int, n: int) -> None:
        self.topic, self.n = topic, n
        self.offsets = [0] * queues
        self.by_opaque: dict[int, int] = {}
        self.buf = bytearray()
        self.pulled = 0
        self.failed: str | None = None
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        for q in range(len(self.offsets)):
            self._pull(q)

    def _pull(self, q: int) -> None:
        req = pull_request(self.topic, q, self.offsets[q], self.n, suspend_ms=0)
        self.by_opaque[req.opaque] = q
        self.transport.write(req.encode())  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        pos = 0
        while len(self.buf) - pos >= 8:
            length, mark = struct.unpack_from(">ii", self.buf, pos)
            if len(self.buf) - pos - 4 < length:
                break
            header = json.loads(bytes(self.buf[pos + 8 : pos + 8 + (mark & 0xFFFFFF)]))
            pos += 4 + length
            q = self.by_opaque.pop(header["opaque"])
            if header["code"] != ResponseCode.SUCCESS:
                if not self.by_opaque and not self.done.done():
                    self.done.set_result(None)
                continue
            nxt = int(header["extFields"]["nextBeginOffset"])
            self.pulled += nxt - self.offsets[q]
            self.offsets[q] = nxt
            self._pull(q)
        del self.buf[:pos]


async def bench_pull_lean(addr: str, topic: str, expected: int, queues: int) -> float:
    host, port = addr.rsplit(":", 1)
    loop = asyncio.get_running_loop()
    t0 = time.perf_counter()
    transport, pipe = await loop.create_connection(lambda: _PullPipe(topic, queues, 32), host, int(port))
    await pipe.done
    dt = time.perf_counter() - t0
    transport.close()
    if pipe.pulled < expected:
        raise SystemExit(f"pulled {pipe.pulled} of {expected}")
    return pipe.pulled / dt


async def bench_pull(client: RemotingClient, addr: str, topic: str, expected: int) -> float:
    counts = [0] * QUEUES

    async def drain(q: int) -> None:
        offset = 0
        while True:
            r = await client.invoke(addr, pull_request(topic, q, offset, 32, suspend_ms=0), 30)
            if r.code != ResponseCode.SUCCESS:
                return
            h = decode_header(PullMessageResponseHeader, r.ext_fields)
            counts[q] += h.nextBeginOffset - offset
            offset = h.nextBeginOffset

    t0 = time.perf_counter()
    await asyncio.gather(*(drain(q) for q in range(QUEUES)))
    dt = time.perf_counter() - t0
    total = sum(counts)
    if total < expected:
        raise SystemExit(f"pulled {total} of {expected}")
    return total / dt


async def bench_wakeup(addr: str, topic: str, rounds: int) -> list[float]:
    """The consumer and the producer are separate clients (separate connections), as in real use."""
    consumer, producer = RemotingClient(), RemotingClient()
    try:
        return await _wakeups(consumer, producer, addr, topic, rounds)
    finally:
        await consumer.close()
        await producer.close()


async def _wakeups(
    consumer: RemotingClient, producer: RemotingClient, addr: str, topic: str, rounds: int
) -> list[float]:
    body = b"x" * 100
    r = await producer.invoke(addr, send_request(topic, 0, body, {"TAGS": "TagA"}), 10)
    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
    offset = int(r.ext_fields["queueOffset"]) + 1
    deltas = []
    for _ in range(rounds):
        pull = asyncio.ensure_future(consumer.invoke(addr, pull_request(topic, 0, offset, 32), 30))
        await asyncio.sleep(0.002)  # let the pull park
        send = await producer.invoke(addr, send_request(topic, 0, body, {"TAGS": "TagA"}), 10)
        t_send = time.perf_counter()
        presp = await pull
        t_pull = time.perf_counter()
        if presp.code != ResponseCode.SUCCESS:
            raise SystemExit(f"parked pull answered {presp.code} {presp.remark}")
        deltas.append((t_pull - t_send) * 1000.0)
        offset = int(send.ext_fields["queueOffset"]) + 1
    return deltas


async def main_async(args: argparse.Namespace, addr: str) -> dict[str, object]:
    client = RemotingClient()
    try:
        send_rate = await bench_send(client, addr, "BenchSend", args.messages, args.size, args.window)
        print(
            f"send     {send_rate:>12,.0f} msg/s  ({args.messages:,} x {args.size} B, window {args.window}, "
            "pre-encoded frames)"
        )
        n_py = min(args.messages, 20_000)
        send_py = await bench_send(client, addr, "BenchSendPy", n_py, args.size, args.window, lean=False)
        print(f"send     {send_py:>12,.0f} msg/s  ({n_py:,} x {args.size} B through rmq_core's RemotingClient)")
        pull_rate = await bench_pull_lean(addr, "BenchSend", args.messages, QUEUES)
        print(
            f"pull     {pull_rate:>12,.0f} msg/s  (backlog {args.messages:,} x {args.size} B, 32/pull, {QUEUES} queues, "
            "one pull in flight per queue, records counted)"
        )
        pull_py = await bench_pull(client, addr, "BenchSend", args.messages)
        print(f"pull     {pull_py:>12,.0f} msg/s  (the same through rmq_core's RemotingClient)")
        deltas = await bench_wakeup(addr, "BenchWake", args.wakeups)
        q = statistics.quantiles(deltas, n=100)
        p50, p99 = statistics.median(deltas), q[98]
        print(f"wake-up  p50 {p50:.3f} ms  p99 {p99:.3f} ms  max {max(deltas):.3f} ms  ({args.wakeups} rounds)")
        return {
            "send_msgs_per_s": send_rate,
            "send_msgs_per_s_remoting_client": send_py,
            "pull_msgs_per_s_remoting_client": pull_py,
            "pull_msgs_per_s": pull_rate,
            "wakeup_p50_ms": p50,
            "wakeup_p99_ms": p99,
            "wakeup_max_ms": max(deltas),
            "messages": args.messages,
            "size": args.size,
        }
    finally:
        await client.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--window", type=int, default=128, help="in-flight sends")
    p.add_argument("--wakeups", type=int, default=1000)
    p.add_argument("--json", default=None, help="write the figures here")
    args = p.parse_args()
    store_dir = tempfile.mkdtemp(prefix="rmq-bench-broker-")
    proc, addr = start_broker(store_dir)
    try:
        print(f"broker pid {proc.pid} at {addr}, store {store_dir}")
        result = asyncio.run(main_async(args, addr))
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(store_dir, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
