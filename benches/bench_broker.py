"""End-to-end broker benchmarks over loopback, with the broker in its own process (``rmq-core broker``).

    .venv/bin/python benches/bench_broker.py [--messages 100000] [--size 1024] [--wakeups 1000] [--json out.json]
    .venv/bin/python benches/bench_broker.py --index-cost [--rounds 5] [--messages 100000] [--size 1024]

What it measures (targets in brackets):
  send      single 1 KiB messages (SEND_MESSAGE_V2, one message per request), a window of in-flight requests on one
            connection, as a multi-threaded producer drives it                               [≥ 20,000 msg/s]
  pull      a backlog of 1 KiB messages pulled 32 per request (PULL_MESSAGE), one outstanding pull per queue,
            as a push consumer does; the client counts records without decoding them          [≥ 200,000 msg/s]
  Both are also run through rmq_core's RemotingClient, whose own per-request cost is then part of the figure.
  wake-up   a pull parked by long polling (consumer connection), then one send (producer connection): time from
            the send's response to the parked pull's response (can be negative: the pull may answer first),
            p50/p99                                                                          [p99 ≤ 2 ms]
  --index-cost  only the lean send, on a fresh broker per run with broker.conf ``messageIndexEnable=true`` and
            ``=false`` alternately (4.9's default index geometry; every message has a KEYS value and the broker adds
            its UNIQ_KEY): medians of ``--rounds``, every run, and the off/on ratio (the index build's cost).
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
import subprocess
import sys
import tempfile
import time

from lean_clients import QUEUES, lean_pull, lean_send, p50_p99, pull_request, send_frames, send_request, wakeups

from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.header import PullMessageResponseHeader, decode_header
from rmq_core.remoting.remoting_client import RemotingClient


def start_broker(store_dir: str, conf: str | None = None) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "rmq_core.cli", "broker", "--port", "0", "--dir", store_dir, "--name", "bench"]
    if conf is not None:
        cmd += ["-c", conf]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"@(\S+:\d+)", line)
    if not m:
        proc.kill()
        raise SystemExit(f"broker did not start: {line!r}")
    return proc, m.group(1)


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
    frames = send_frames(topic, n, body)
    run = await lean_send(addr, frames, window)
    if run.failed:
        raise SystemExit(f"{run.failed} sends failed: {run.failure_codes}")
    return n / run.seconds


async def bench_pull_lean(addr: str, topic: str, expected: int, queues: int) -> float:
    pulled, dt = await lean_pull(addr, topic, queues, 32)
    if pulled < expected:
        raise SystemExit(f"pulled {pulled} of {expected}")
    return pulled / dt


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
        deltas = await wakeups(addr, "BenchWake", args.wakeups, timeout=600)
        p50, p99 = p50_p99(deltas)
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


def index_cost(args: argparse.Namespace) -> int:
    runs: dict[bool, list[float]] = {True: [], False: []}
    for r in range(args.rounds + 1):  # round 0 is a warm-up, not counted
        for enable in (True, False):
            store_dir = tempfile.mkdtemp(prefix="rmq-bench-broker-")
            conf = os.path.join(store_dir, "broker.conf")
            with open(conf, "w") as f:
                f.write(f"messageIndexEnable={'true' if enable else 'false'}\n")
            proc, addr = start_broker(os.path.join(store_dir, "store"), conf)
            try:

                async def once(addr: str = addr) -> float:
                    client = RemotingClient()
                    try:
                        return await bench_send(client, addr, "BenchSend", args.messages, args.size, args.window)
                    finally:
                        await client.close()

                rate = asyncio.run(once())
            finally:
                proc.terminate()
                proc.wait(30)
                shutil.rmtree(store_dir, ignore_errors=True)
            if r > 0:
                runs[enable].append(rate)
    on, off = statistics.median(runs[True]), statistics.median(runs[False])
    print(f"lean send, {args.messages:,} x {args.size} B, window {args.window}, fresh broker per run, msg/s")
    print(f"index on   median {on:>10,.0f}   runs {', '.join(f'{x:,.0f}' for x in runs[True])}")
    print(f"index off  median {off:>10,.0f}   runs {', '.join(f'{x:,.0f}' for x in runs[False])}")
    print(f"off/on {off / on:.2f}  (the machine is shared, load average {os.getloadavg()[0]:.1f})")
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--window", type=int, default=128, help="in-flight sends")
    p.add_argument("--wakeups", type=int, default=1000)
    p.add_argument("--json", default=None, help="write the figures here")
    p.add_argument("--index-cost", action="store_true", help="lean send with messageIndexEnable on vs off")
    p.add_argument("--rounds", type=int, default=5, help="--index-cost rounds")
    args = p.parse_args()
    if args.index_cost:
        return index_cost(args)
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
