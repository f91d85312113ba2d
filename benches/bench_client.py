"""Client benchmarks: rmq_core's Producer/PushConsumer against an rmq_core name server + broker running in their own
process (``rmq-core serve``), and the same measurements with Apache RocketMQ's Java client (4.9.7, compat/java) against
the same broker in the same run.

    .venv/bin/python benches/bench_client.py [--messages 100000] [--size 1024] [--rate 1000] [--seconds 5]
                                             [--phases consume,send,latency,memory] [--no-java] [--json out.json]

What it measures (targets in brackets):
  consume   a backlog of --messages 1 KiB messages consumed by a PushConsumer with a trivial listener (a fresh group,
            CONSUME_FROM_FIRST_OFFSET), consume_message_batch_max_size 1 and 32; the clock runs from the first
            delivery to the last; --repeat runs each, alternating with the Java client's, and the median of each
            is reported with every run beside it                                  [≥ 50,000 / ≥ 150,000 msg/s]
  send      sync sends of 1 KiB from --threads threads; async sends with --window in flight; batches of --batch
            (send_batch / send(Collection)) from --threads threads; each producer (ours, Java's) first makes
            --send-warmup untimed sends the same way: a cold JVM's first ~50,000 sends measure its JIT compiler more
            than the client (20,000 cold Java sends ran at ~0.7× the warm rate here). --send-repeat runs of each,
            rmq_core's and Java's alternating (which goes first alternates too), a fresh producer each; the median of
            each is reported with every run beside it
  latency   a steady --rate msg/s for --seconds through a consumer already parked on the queues: p50/p99 of
            consume time - send time (a perf counter in the body; producer and consumer share the process)  [p99 ≤ 5 ms]
  memory    a slow listener (10 ms per call) over the whole backlog for --memory-seconds: the peak RSS increase of
            this process and the peak cached messages/bytes in the ProcessQueues, against the flow-control bound
            (queues × (pull_threshold_for_queue + pull_batch_size) messages)
  java      consume (batch 1, 32), send (sync, async) and latency with the Java client (BenchConsume, BenchProduce,
            BenchLatency in compat/java), and the ratio rmq_core / Java
A phase that fails prints its error and the run goes on (its figure is missing from the table and the JSON).
One run; the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI
from rmq_core.common.topic_config import TopicConfig
from rmq_core.message import Message

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUEUES = 4
BACKLOG = "BenchBacklog"
BROKER_CONF = "mappedFileSizeCommitLog=268435456\nflushDiskType=ASYNC_FLUSH\n"


# ------------------------------------------------------------------------------------------------ the server
def start_server(store_dir: str) -> tuple[subprocess.Popen[str], str, str]:
    conf = os.path.join(store_dir, "broker.conf")
    with open(conf, "w") as f:
        f.write(BROKER_CONF)
    cmd = [
        sys.executable,
        "-m",
        "rmq_core.cli",
        "serve",
        "--namesrv-port",
        "0",
        "--port",
        "0",
        "--dir",
        os.path.join(store_dir, "store"),
        "--name",
        "bench",
        "-c",
        conf,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"name server (\S+:\d+), broker \S+@(\S+:\d+)", line)
    if not m:
        proc.kill()
        proc.wait()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, m.group(1), m.group(2)


def create_topic(namesrv: str, broker: str, topic: str, queues: int = QUEUES) -> None:
    """The topic on the broker, once the name server routes it there."""
    with BlockingMQClientAPI(namesrv, 5000) as api:
        api.create_topic_and_wait([broker], TopicConfig(topic, queues, queues))


# ------------------------------------------------------------------------------------------------ measurements
def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1]) * 1024
    return 0


def fill_backlog(namesrv: str, topic: str, n: int, size: int) -> float:
    from rmq_core.client import Producer

    p = Producer("bench_backlog_producer", namesrv_addr=namesrv, instance_name="bench-backlog")
    p.start()
    try:
        body = os.urandom(size)
        t0 = time.perf_counter()
        for i in range(0, n, 64):
            p.send_batch([Message(topic, body, tags="TagA") for _ in range(min(64, n - i))])
        return n / (time.perf_counter() - t0)
    finally:
        p.shutdown()


def consume_throughput(namesrv: str, topic: str, group: str, n: int, batch: int, threads: int) -> dict[str, float]:
    from rmq_core.client import (
        ConsumeConcurrentlyStatus,
        ConsumeFromWhere,
        PushConsumer,
    )

    lock = threading.Lock()
    state = {"count": 0, "first": 0.0, "last": 0.0}
    done = threading.Event()

    def listener(msgs: list[Any], context: Any) -> ConsumeConcurrentlyStatus:
        now = time.perf_counter()
        with lock:
            if not state["first"]:
                state["first"] = now
            state["count"] += len(msgs)
            if state["count"] >= n:
                state["last"] = now
                done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = PushConsumer(
        group,
        namesrv_addr=namesrv,
        instance_name=f"bench-{group}",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        consume_message_batch_max_size=batch,
        consume_thread_min=threads,
        consume_thread_max=threads,
    )
    c.subscribe(topic, "*")
    c.register_message_listener(listener)
    t0 = time.perf_counter()
    c.start()
    try:
        if not done.wait(300):
            raise RuntimeError(f"consumed {state['count']} of {n} in 300 s")
    finally:
        c.shutdown()
    seconds = state["last"] - state["first"]
    return {
        "msgs_per_s": state["count"] / seconds,
        "seconds": seconds,
        "startup_s": state["first"] - t0,
        "count": state["count"],
    }


def threaded_sends(worker: Callable[[int, list[int]], None], n: int, threads: int, warmup: int) -> dict[str, float]:
    """``threads`` threads running ``worker(share, failures)`` (shares of the count as even as can be): ``warmup``
    untimed (as BenchProduce's --warmup), then ``n`` timed; the rate of those that did not fail."""

    def phase(count: int, failures: list[int]) -> float:
        ts = [
            threading.Thread(target=worker, args=(count // threads + (i < count % threads), failures))
            for i in range(threads)
        ]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return time.perf_counter() - t0

    if warmup:
        phase(warmup, [0])
    failed = [0]
    dt = phase(n, failed)
    return {"msgs_per_s": (n - failed[0]) / dt, "failed": failed[0], "seconds": dt}


def send_sync(namesrv: str, topic: str, n: int, size: int, threads: int, warmup: int = 0) -> dict[str, float]:
    from rmq_core.client import Producer

    p = Producer("bench_sync_producer", namesrv_addr=namesrv, instance_name="bench-sync")
    p.start()
    body = os.urandom(size)
    try:
        p.send(Message(topic, body, tags="TagA"))  # route and connection

        def worker(k: int, failures: list[int]) -> None:
            for _ in range(k):
                try:
                    if p.send(Message(topic, body, tags="TagA")).send_status.name != "SEND_OK":
                        failures[0] += 1
                except Exception:
                    failures[0] += 1

        return threaded_sends(worker, n, threads, warmup)
    finally:
        p.shutdown()


def send_async(namesrv: str, topic: str, n: int, size: int, window: int, warmup: int = 0) -> dict[str, float]:
    from rmq_core.client import Producer

    p = Producer("bench_async_producer", namesrv_addr=namesrv, instance_name="bench-async")
    p.start()
    body = os.urandom(size)
    sem = threading.Semaphore(window)
    lock = threading.Lock()

    def phase(count: int) -> tuple[float, int]:
        """``count`` sends with at most ``window`` in flight: (seconds, failed)."""
        failed = [0]
        answered = [0]
        all_done = threading.Event()

        def on_done(f: Future[Any]) -> None:
            with lock:
                if f.exception() is not None or f.result().send_status.name != "SEND_OK":
                    failed[0] += 1
                answered[0] += 1
                if answered[0] == count:
                    all_done.set()
            sem.release()

        t0 = time.perf_counter()
        for _ in range(count):
            sem.acquire()
            p.send_async(Message(topic, body, tags="TagA")).add_done_callback(on_done)
        if not all_done.wait(300):
            raise RuntimeError(f"{answered[0]} of {count} async sends answered")
        return time.perf_counter() - t0, failed[0]

    try:
        p.send(Message(topic, body, tags="TagA"))
        if warmup:
            phase(warmup)  # untimed, as BenchProduce's --warmup
        dt, failed = phase(n)
    finally:
        p.shutdown()
    return {"msgs_per_s": (n - failed) / dt, "failed": failed, "seconds": dt}


def send_batches(
    namesrv: str, topic: str, n: int, size: int, threads: int, batch: int, warmup: int = 0
) -> dict[str, float]:
    """``threads`` threads each sending their share of ``n`` messages as ``send_batch`` calls of ``batch`` (the
    messages built in the loop, as BenchProduce builds them)."""
    from rmq_core.client import Producer

    p = Producer("bench_batch_producer", namesrv_addr=namesrv, instance_name="bench-batch")
    p.start()
    body = os.urandom(size)
    try:
        p.send(Message(topic, body, tags="TagA"))  # route and connection

        def worker(k: int, failures: list[int]) -> None:
            for i in range(0, k, batch):
                msgs = [Message(topic, body, tags="TagA") for _ in range(min(batch, k - i))]
                try:
                    if p.send_batch(msgs).send_status.name != "SEND_OK":
                        failures[0] += len(msgs)
                except Exception:
                    failures[0] += len(msgs)

        return threaded_sends(worker, n, threads, warmup)
    finally:
        p.shutdown()


def latency(namesrv: str, topic: str, rate: int, seconds: int, size: int) -> dict[str, float]:
    from rmq_core.client import (
        ConsumeConcurrentlyStatus,
        ConsumeFromWhere,
        Producer,
        PushConsumer,
    )

    lat: list[float] = []
    lock = threading.Lock()

    def listener(msgs: list[Any], context: Any) -> ConsumeConcurrentlyStatus:
        now = time.perf_counter_ns()
        with lock:
            lat.extend((now - int.from_bytes(m.body[:8], "big")) / 1e6 for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    p = Producer("bench_latency_producer", namesrv_addr=namesrv, instance_name="bench-latency-p")
    c = PushConsumer(
        "bench_latency_group",
        namesrv_addr=namesrv,
        instance_name="bench-latency-c",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
    )
    c.subscribe(topic, "*")
    c.register_message_listener(listener)
    p.start()
    try:
        p.send(Message(topic, b"\0" * size, tags="Warm"))
        c.start()
        time.sleep(3)  # rebalance, first pulls parked
        with lock:
            lat.clear()
        pad = b"\0" * (size - 8)
        total = rate * seconds
        interval = 1e9 / rate
        t0 = time.perf_counter_ns()
        for i in range(total):
            wait = t0 + i * interval - time.perf_counter_ns()
            if wait > 0:
                time.sleep(wait / 1e9)
            p.send(Message(topic, time.perf_counter_ns().to_bytes(8, "big") + pad, tags="TagA"))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with lock:
                if len(lat) >= total:
                    break
            time.sleep(0.01)
    finally:
        c.shutdown()
        p.shutdown()
    with lock:
        got = sorted(lat)
    if not got:
        raise RuntimeError("nothing consumed")
    q = statistics.quantiles(got, n=100)
    return {"p50_ms": statistics.median(got), "p99_ms": q[98], "max_ms": got[-1], "count": len(got), "sent": total}


def memory(namesrv: str, topic: str, seconds: float) -> dict[str, float]:
    from rmq_core.client import (
        ConsumeConcurrentlyStatus,
        ConsumeFromWhere,
        PushConsumer,
    )

    def listener(msgs: list[Any], context: Any) -> ConsumeConcurrentlyStatus:
        time.sleep(0.01)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = PushConsumer(
        "bench_memory_group",
        namesrv_addr=namesrv,
        instance_name="bench-memory",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    c.subscribe(topic, "*")
    c.register_message_listener(listener)
    base = rss_bytes()
    peak_rss, peak_count, peak_size = base, 0, 0
    c.start()
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            peak_rss = max(peak_rss, rss_bytes())
            table = dict(c.impl.rebalance_impl.process_queue_table)
            peak_count = max(peak_count, sum(pq.msg_count for pq in table.values()))
            peak_size = max(peak_size, sum(pq.msg_size for pq in table.values()))
            time.sleep(0.05)
        threshold = int(getattr(c, "pull_threshold_for_queue", 1000))
        pull_batch = int(getattr(c, "pull_batch_size", 32))
    finally:
        c.shutdown()
    bound = QUEUES * (threshold + pull_batch)
    return {
        "rss_delta_mib": (peak_rss - base) / (1 << 20),
        "peak_cached_msgs": peak_count,
        "peak_cached_mib": peak_size / (1 << 20),
        "bound_msgs": bound,
        "within_bound": peak_count <= bound,
    }


# ------------------------------------------------------------------------------------------------ Java
def java_result(main: str, args: list[object], timeout: float) -> dict[str, Any]:
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from support.java_compat import run_java

    log_dir = tempfile.mkdtemp(prefix="rmq-bench-java-")
    try:
        lines = run_java(main, args, log_dir, timeout=timeout)
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)
    [res] = [ln for ln in lines if ln.get("event") == "result"]
    return res


# ------------------------------------------------------------------------------------------------ driver
class Results:
    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.errors: dict[str, str] = {}

    def run(self, name: str, fn: Callable[[], Any]) -> Any:
        print(f"-- {name} ...", flush=True)
        try:
            v = fn()
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            self.errors[name] = f"{type(e).__name__}: {e}"
            print(f"   FAILED: {self.errors[name]}", flush=True)
            traceback.print_exc(limit=3)
            return None
        self.data[name] = v
        print(f"   {v}", flush=True)
        return v

    def median(self, name: str, key: str) -> None:
        """``name``: the repeated runs ``name#0``, ``name#1``... as their median run, with every value in
        ``runs`` (the table shows the spread)."""
        runs = [v for k, v in self.data.items() if k.startswith(f"{name}#") and v is not None]
        if runs:
            runs.sort(key=lambda v: float(v[key]))
            self.data[name] = {**runs[len(runs) // 2], "runs": [float(v[key]) for v in runs]}


def table(r: Results) -> None:
    def py(name: str, key: str) -> float | None:
        v = r.data.get(name)
        return None if v is None else float(v[key])

    rows = [
        ("consume batch 1 (msg/s)", py("py_consume_b1", "msgs_per_s"), py("java_consume_b1", "msgsPerSec"), "≥ 50,000"),
        (
            "consume batch 32 (msg/s)",
            py("py_consume_b32", "msgs_per_s"),
            py("java_consume_b32", "msgsPerSec"),
            "≥ 150,000",
        ),
        ("send sync (msg/s)", py("py_send_sync", "msgs_per_s"), py("java_send_sync", "msgsPerSec"), "≥ 1.0×"),
        ("send async (msg/s)", py("py_send_async", "msgs_per_s"), py("java_send_async", "msgsPerSec"), "≥ 1.0×"),
        ("send batch (msg/s)", py("py_send_batch", "msgs_per_s"), py("java_send_batch", "msgsPerSec"), ""),
        ("latency p50 (ms)", py("py_latency", "p50_ms"), py("java_latency", "p50Ms"), ""),
        ("latency p99 (ms)", py("py_latency", "p99_ms"), py("java_latency", "p99Ms"), "≤ 5"),
    ]
    print()
    print(f"{'measurement':<28}{'rmq_core':>14}{'Java 4.9.7':>14}{'rmq_core/Java':>15}  target")
    for label, a, b, target in rows:
        fa = "-" if a is None else f"{a:,.3f}" if label.endswith("(ms)") else f"{a:,.0f}"
        fb = "-" if b is None else f"{b:,.3f}" if label.endswith("(ms)") else f"{b:,.0f}"
        ratio = "-" if a is None or b is None or b == 0 else f"{a / b:.2f}"
        print(f"{label:<28}{fa:>14}{fb:>14}{ratio:>15}  {target}")
    for what, py_key, java_key in [
        *((f"consume batch {b}", f"py_consume_b{b}", f"java_consume_b{b}") for b in (1, 32)),
        *((f"send {mode}", f"py_send_{mode}", f"java_send_{mode}") for mode in ("sync", "async", "batch")),
    ]:
        spread = [
            f"{who} " + " / ".join(f"{x:,.0f}" for x in r.data[k]["runs"])
            for who, k in (("rmq_core", py_key), ("Java", java_key))
            if k in r.data and "runs" in r.data[k]
        ]
        if spread:
            print(f"  {what}, every run (msg/s, sorted; the medians above): {'; '.join(spread)}")
    m = r.data.get("py_memory")
    if m:
        print(
            f"{'memory, slow listener':<28} peak RSS +{m['rss_delta_mib']:.1f} MiB, peak cached "
            f"{m['peak_cached_msgs']:,} msgs / {m['peak_cached_mib']:.1f} MiB (bound {m['bound_msgs']:,} msgs: "
            f"{'within' if m['within_bound'] else 'EXCEEDED'})"
        )
    for name, err in r.errors.items():
        print(f"{name}: FAILED {err}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=100_000, help="backlog size")
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--send-messages", type=int, default=40_000)
    p.add_argument(
        "--send-warmup",
        type=int,
        default=20_000,
        help="untimed sends each producer makes first, the same way (a long-running producer; the JVM's JIT)",
    )
    p.add_argument("--threads", type=int, default=4, help="sync sender threads")
    p.add_argument("--window", type=int, default=128, help="async sends in flight")
    p.add_argument("--batch", type=int, default=32, help="messages per send_batch")
    p.add_argument("--send-repeat", type=int, default=3, help="runs of each send measurement (the median is shown)")
    p.add_argument(
        "--phases", default="consume,send,latency,memory", help="comma-separated: consume, send, latency, memory"
    )
    p.add_argument("--consume-threads", type=int, default=20)
    p.add_argument("--repeat", type=int, default=3, help="runs of each consume measurement (the median is shown)")
    p.add_argument("--rate", type=int, default=1000)
    p.add_argument("--seconds", type=int, default=5)
    p.add_argument("--memory-seconds", type=float, default=5.0)
    p.add_argument("--no-java", action="store_true", help="skip the Java client figures")
    p.add_argument("--json", default=None, help="write the figures here")
    args = p.parse_args()
    store_dir = tempfile.mkdtemp(prefix="rmq-bench-client-")
    proc, namesrv, broker = start_server(store_dir)
    r = Results()
    n = args.messages
    try:
        print(f"server pid {proc.pid}: name server {namesrv}, broker {broker}, store {store_dir}")
        for t in (BACKLOG, "BenchSend", "BenchLatency", "BenchJavaSend", "BenchJavaLatency"):
            create_topic(namesrv, broker, t)
        phases = set(args.phases.split(","))
        java = not args.no_java
        filled = None
        if phases & {"consume", "memory"}:
            filled = r.run(
                "py_fill_backlog_send_batch", lambda: {"msgs_per_s": fill_backlog(namesrv, BACKLOG, n, args.size)}
            )
        if "consume" in phases:
            cons_b1 = f"--namesrv {namesrv} --topic {BACKLOG} --expect {n}".split()
            for batch in (1, 32):
                for rep in range(args.repeat):  # rmq_core and Java alternate, each run with a fresh group
                    r.run(
                        f"py_consume_b{batch}#{rep}",
                        lambda b=batch, k=rep: consume_throughput(
                            namesrv, BACKLOG, f"bench_py_b{b}_{k}", n, b, args.consume_threads
                        ),
                    )
                    if java and filled:
                        r.run(
                            f"java_consume_b{batch}#{rep}",
                            lambda b=batch, k=rep: java_result(
                                "BenchConsume",
                                [
                                    *cons_b1,
                                    "--group",
                                    f"bench_java_b{b}_{k}",
                                    "--batch",
                                    b,
                                    "--threads",
                                    args.consume_threads,
                                    "--timeout-ms",
                                    300_000,
                                ],
                                600,
                            ),
                        )
                r.median(f"py_consume_b{batch}", "msgs_per_s")
                r.median(f"java_consume_b{batch}", "msgsPerSec")
        if "send" in phases:
            m, w = args.send_messages, args.send_warmup
            py_send = {
                "sync": lambda: send_sync(namesrv, "BenchSend", m, args.size, args.threads, w),
                "async": lambda: send_async(namesrv, "BenchSend", m, args.size, args.window, w),
                "batch": lambda: send_batches(namesrv, "BenchSend", m, args.size, args.threads, args.batch, w),
            }
            java_send = {
                "sync": ["--threads", args.threads],
                "async": ["--window", args.window],
                "batch": ["--threads", args.threads, "--batch", args.batch],
            }
            for rep in range(args.send_repeat):
                for mode in ("sync", "async", "batch"):
                    runs = [(f"py_send_{mode}#{rep}", py_send[mode])]
                    if java:
                        jargs = ["--namesrv", namesrv, "--topic", "BenchJavaSend", "--count", m, "--size", args.size]
                        jargs += [*java_send[mode], "--mode", mode, "--warmup", w]
                        runs.append(
                            (f"java_send_{mode}#{rep}", functools.partial(java_result, "BenchProduce", jargs, 600))
                        )
                    if rep % 2:  # which client goes first alternates
                        runs.reverse()
                    for name, fn in runs:
                        r.run(name, fn)
            for mode in ("sync", "async", "batch"):
                r.median(f"py_send_{mode}", "msgs_per_s")
                r.median(f"java_send_{mode}", "msgsPerSec")
        if "latency" in phases:
            r.run("py_latency", lambda: latency(namesrv, "BenchLatency", args.rate, args.seconds, args.size))
            if java:
                r.run(
                    "java_latency",
                    lambda: java_result(
                        "BenchLatency",
                        [
                            "--namesrv",
                            namesrv,
                            "--topic",
                            "BenchJavaLatency",
                            "--group",
                            "bench_java_latency",
                            "--rate",
                            args.rate,
                            "--seconds",
                            args.seconds,
                            "--size",
                            args.size,
                        ],
                        600,
                    ),
                )
        if "memory" in phases and filled:
            r.run("py_memory", lambda: memory(namesrv, BACKLOG, args.memory_seconds))
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        shutil.rmtree(store_dir, ignore_errors=True)
    table(r)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": r.data, "errors": r.errors, "args": vars(args)}, f, indent=2, default=str)
    return 1 if r.errors else 0


if __name__ == "__main__":
    sys.exit(main())
