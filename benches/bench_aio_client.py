"""rmq_core.aio beside the blocking client: produce and consume throughput against one rmq_core broker (``rmq-core
serve`` in its own process), both clients in the same run, alternating round by round.

    .venv/bin/python benches/bench_aio_client.py [--messages 20000] [--size 1024] [--window 64] [--rounds 5]
                                                 [--json out.json]

Phases (each round runs every phase once, sync and async alternating; medians of the rounds with every run beside):
  send-seq     one send at a time: ``Producer.send`` from one thread (bench_client's send_sync) /
               ``await AsyncProducer.send``
  send-window  --window sends in flight: ``Producer.send_async`` futures under a semaphore (bench_client's
               send_async) / asyncio tasks awaiting ``AsyncProducer.send`` under an asyncio.Semaphore
  consume      a backlog of --messages consumed by a fresh group from the first offset: ``PushConsumer`` (20 consume
               threads, batch 1: bench_client's consume_throughput) / ``AsyncPushConsumer`` (an ``async def``
               listener, 20 workers, batch 1) / ``AsyncPullConsumer`` (``async for``); the clock runs from the first
               delivery to the last
The async client runs on each of --loops: uvloop (``rmq_core.remoting.event_loop.new_event_loop``, the loop the
blocking client's thread uses) and the stdlib's asyncio loop. The ratio column is async / sync of the medians; the
pull consumer is compared with the sync push consumer (the sync PullConsumer has no stream to compare). The machine
is shared (2 cores, other work running): noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_client import QUEUES, consume_throughput, create_topic, fill_backlog, send_async, send_sync, start_server

from rmq_core.aio import AsyncProducer, AsyncPullConsumer, AsyncPushConsumer
from rmq_core.client import ConsumeConcurrentlyStatus, ConsumeFromWhere
from rmq_core.message import Message
from rmq_core.remoting.event_loop import new_event_loop

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "uvloop": new_event_loop,  # the loop the blocking client's thread runs (uvloop where installed)
    "asyncio": asyncio.new_event_loop,  # the stdlib's, what asyncio.run gives by default
}


def arun(loop_name: str, coro: Any) -> float:
    with asyncio.Runner(loop_factory=LOOPS[loop_name]) as runner:
        return float(runner.run(coro))


SEND_TOPIC = "BenchAioSend"
BACKLOG = "BenchAioBacklog"


# --- produce ---------------------------------------------------------------------------------------------------
async def async_send_seq(ns: str, n: int, body: bytes) -> float:
    async with AsyncProducer("bench_aio_async_seq", ns, instance_name="bench-aio-async-seq") as p:
        await p.send(Message(SEND_TOPIC, body))
        t0 = time.perf_counter()
        for _ in range(n):
            await p.send(Message(SEND_TOPIC, body))
        return n / (time.perf_counter() - t0)


async def async_send_window(ns: str, n: int, body: bytes, window: int) -> float:
    async with AsyncProducer("bench_aio_async_win", ns, instance_name="bench-aio-async-win") as p:
        await p.send(Message(SEND_TOPIC, body))
        sem = asyncio.Semaphore(window)
        tasks: set[asyncio.Task[Any]] = set()

        async def one() -> None:
            try:
                await p.send(Message(SEND_TOPIC, body))
            finally:
                sem.release()

        t0 = time.perf_counter()
        for _ in range(n):
            await sem.acquire()
            t = asyncio.create_task(one())
            tasks.add(t)
            t.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)
        return n / (time.perf_counter() - t0)


# --- consume ---------------------------------------------------------------------------------------------------
async def async_push_consume(ns: str, group: str, n: int) -> float:
    state = {"count": 0, "first": 0.0, "last": 0.0}
    done = asyncio.Event()

    async def listener(msgs: Any, context: Any) -> ConsumeConcurrentlyStatus:
        now = time.perf_counter()
        state["first"] = state["first"] or now
        state["count"] += len(msgs)
        if state["count"] >= n:
            state["last"] = now
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = AsyncPushConsumer(
        group, ns, instance_name=f"bench-{group}", consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    c.subscribe(BACKLOG, "*")
    c.register_message_listener(listener)
    async with c:
        await asyncio.wait_for(done.wait(), 300)
    return state["count"] / (state["last"] - state["first"])


async def async_pull_consume(ns: str, group: str, n: int) -> float:
    count, first = 0, 0.0
    async with AsyncPullConsumer(
        group, ns, instance_name=f"bench-{group}", consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    ) as c:
        async for _m in c.messages(BACKLOG, "*"):
            first = first or time.perf_counter()
            count += 1
            if count >= n:
                break
        last = time.perf_counter()
        await c.commit()
    return count / (last - first)


# --- the run ---------------------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--loops", default="uvloop,asyncio", help="event loops to run the async client on")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    loops = [x for x in a.loops.split(",") if x]
    body = os.urandom(a.size)
    tmp = tempfile.mkdtemp(prefix="bench-aio-")
    proc, ns, broker = start_server(tmp)
    runs: dict[str, list[float]] = {}

    def record(name: str, fn: Callable[[], float]) -> None:
        try:
            v = fn()
        except Exception as e:  # a failed phase is reported, the run goes on
            print(f"  {name}: FAILED {e!r}", flush=True)
            return
        runs.setdefault(name, []).append(v)
        print(f"  {name:<22} {v:>10,.0f} msg/s", flush=True)

    try:
        create_topic(ns, broker, SEND_TOPIC, QUEUES)
        create_topic(ns, broker, BACKLOG, QUEUES)
        fill_backlog(ns, BACKLOG, a.messages, a.size)
        n_seq = max(1, a.messages // 4)
        for r in range(a.rounds):
            print(f"round {r + 1}/{a.rounds}", flush=True)
            order = [0, 1] if r % 2 == 0 else [1, 0]  # alternate which client goes first
            for which in order:
                if which == 0:
                    record("sync send-seq", lambda: send_sync(ns, SEND_TOPIC, n_seq, a.size, 1)["msgs_per_s"])
                    record(
                        "sync send-window",
                        lambda: send_async(ns, SEND_TOPIC, a.messages, a.size, a.window)["msgs_per_s"],
                    )
                    record(
                        "sync push consume",
                        lambda r=r: consume_throughput(ns, BACKLOG, f"bench_aio_sync_{r}", a.messages, 1, 20)[
                            "msgs_per_s"
                        ],
                    )
                else:
                    for lp in loops:
                        record(f"async[{lp}] send-seq", lambda lp=lp: arun(lp, async_send_seq(ns, n_seq, body)))
                        record(
                            f"async[{lp}] send-window",
                            lambda lp=lp: arun(lp, async_send_window(ns, a.messages, body, a.window)),
                        )
                        record(
                            f"async[{lp}] push consume",
                            lambda lp=lp, r=r: arun(lp, async_push_consume(ns, f"bench_aio_push_{lp}_{r}", a.messages)),
                        )
                        record(
                            f"async[{lp}] pull consume",
                            lambda lp=lp, r=r: arun(lp, async_pull_consume(ns, f"bench_aio_pull_{lp}_{r}", a.messages)),
                        )
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in runs.items()}
    print(
        f"\nmedians of {a.rounds} rounds, {a.messages} x {a.size} B (send-seq: {max(1, a.messages // 4)}); shared machine"
    )
    print(f"{'phase [async loop]':<26}{'sync':>10}{'async':>10}{'async/sync':>12}   every run (sync | async)")
    pairs = [
        (f"{label} [{lp}]", f"sync {sync_name}", f"async[{lp}] {label}")
        for lp in loops
        for label, sync_name in (
            ("send-seq", "send-seq"),
            ("send-window", "send-window"),
            ("push consume", "push consume"),
            ("pull consume", "push consume"),
        )
    ]
    for label, s, x in pairs:
        if s in med and x in med:
            ratio = med[x] / med[s]
            every = " ".join(f"{v:,.0f}" for v in runs[s]) + " | " + " ".join(f"{v:,.0f}" for v in runs[x])
            print(f"{label:<26}{med[s]:>10,.0f}{med[x]:>10,.0f}{ratio:>12.2f}   {every}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": runs, "medians": med, "args": vars(a)}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
