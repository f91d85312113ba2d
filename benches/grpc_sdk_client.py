"""One load-generating client of benches/bench_grpc.py: RocketMQ's 5.x Python SDK (PyPI rocketmq-python-client, in
its own venv, ``.venv-rmq5``: its top-level ``rocketmq`` package is not the C++ client's), run as a separate process
so several of them share the load. Imports nothing of rmq_core.

    .venv-rmq5/bin/python benches/grpc_sdk_client.py ENDPOINT ROLE JSON-ARGS

Protocol with the parent: the client starts (the SDK's startup: route, Settings), prints ``READY <startup s>``, waits
for one line on stdin (the parent's "go", so that every client starts its clock together), runs, and prints
``RESULT <json>``: wall-clock (epoch) first/last times, counts, the latencies it saw (microseconds, unsorted) and
its own CPU seconds (utime + stime of the whole process: the SDK's I/O and callback threads included).

Roles (args in JSON):
  send       ``count`` sends of ``size`` B bodies, ``window`` async sends in flight (``rate`` > 0: paced at that many
             per second instead); latency = send_async → its future done. Each body carries its send time
             (property ``bench_t``, epoch ns) for the consumers' end-to-end latency.
  simple     a SimpleConsumer, ``threads`` receive loops (receive 32, invisible ``invisible_s``), each message
             acked by a pool of ``ack_threads`` (5.1.2's ack_async cannot be used off its loop); ends when ``expect`` were received
             or, after the first message, a receive comes back empty (the topic drained); latency = end to end.
  push       a PushConsumer whose listener counts; ends when ``expect`` were consumed or nothing came for ``idle_s``.
  redeliver  a SimpleConsumer receives ``expect`` messages with ``invisible_s`` and does not ack them, then receives
             until each has come back (attempt 2) and acks it; latency = (second receive − first receive) −
             invisible time, in microseconds (negative: early).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rocketmq.v5.client import ClientConfiguration, Credentials
from rocketmq.v5.model import FilterExpression, Message

SEND_TIME = "bench_t"


_cpu_at_go = [0.0]


def _cpu_s() -> float:
    """This process's CPU seconds since the go (all its threads)."""
    t = os.times()
    return t.user + t.system - _cpu_at_go[0]


def _config(endpoint: str, args: dict[str, Any]) -> ClientConfiguration:
    return ClientConfiguration(endpoint, Credentials("", ""), request_timeout=args.get("request_timeout_s", 10))


def _ready(started_s: float) -> None:
    print(f"READY {started_s:.3f}", flush=True)
    sys.stdin.readline()  # the parent's go
    _cpu_at_go[0] = _cpu_s()


def send(endpoint: str, args: dict[str, Any]) -> dict[str, Any]:
    from rocketmq.v5.producer import Producer

    topic, count, window, rate = args["topic"], args["count"], args.get("window", 64), args.get("rate", 0)
    body = os.urandom(args.get("size", 1024))
    producer = Producer(_config(endpoint, args), (topic,))
    t0 = time.time()
    producer.startup()
    _ready(time.time() - t0)
    slots = threading.Semaphore(window if not rate else 1 << 20)
    lock = threading.Lock()
    latencies: list[int] = []
    failed: list[str] = []
    done = threading.Event()
    pending = [count]
    last = [0.0]

    def finished(started_ns: int, future: Any) -> None:
        took = (time.perf_counter_ns() - started_ns) // 1000
        error = future.exception()
        with lock:
            if error is None:
                latencies.append(took)
            elif len(failed) < 20:
                failed.append(repr(error))
            else:
                failed.append("")
            pending[0] -= 1
            last[0] = time.time()
            if pending[0] == 0:
                done.set()
        slots.release()

    first = time.time()
    try:
        for i in range(count):
            if rate:
                wait = first + i / rate - time.time()
                if wait > 0:
                    time.sleep(wait)
            slots.acquire()
            msg = Message()
            msg.topic = topic
            msg.body = body
            msg.tag = "T"
            msg.add_property(SEND_TIME, str(time.time_ns()))
            started = time.perf_counter_ns()
            try:
                future = producer.send_async(msg)
            except Exception as e:  # refused before it left (not running, no route)
                future = _failed(e)
            future.add_done_callback(lambda f, s=started: finished(s, f))
        done.wait(args.get("timeout_s", 300))
    finally:
        producer.shutdown()
    return {
        "first": first,
        "last": last[0],
        "count": len(latencies),
        "failed": len(failed),
        "errors": [e for e in failed if e][:5],
        "latencies_us": latencies,
        "cpu_s": _cpu_s(),
    }


def _failed(error: Exception) -> Any:
    from concurrent.futures import Future

    f: Future[Any] = Future()
    f.set_exception(error)
    return f


class _Receipts:
    """What a consumer saw: first/last times, count, end-to-end latencies, ack failures (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.first = 0.0
        self.last = 0.0
        self.count = 0
        self.latencies: list[int] = []
        self.ids: set[str] = set()
        self.failed = 0
        self.errors: list[str] = []
        self.receives = 0  # receive calls that brought messages (SimpleConsumer)

    def got(self, message: Any) -> None:
        now_ns = time.time_ns()
        sent = message.properties.get(SEND_TIME)
        with self.lock:
            if not self.first:
                self.first = now_ns / 1e9
            self.last = now_ns / 1e9
            self.count += 1
            self.ids.add(message.message_id)
            if sent:
                self.latencies.append((now_ns - int(sent)) // 1000)

    def fail(self, error: Any) -> None:
        with self.lock:
            self.failed += 1
            if len(self.errors) < 5:
                self.errors.append(repr(error))

    def result(self) -> dict[str, Any]:
        return {
            "first": self.first,
            "last": self.last,
            "count": self.count,
            "unique": len(self.ids),
            "failed": self.failed,
            "receives": self.receives,
            "errors": self.errors,
            "latencies_us": self.latencies,
            "cpu_s": _cpu_s(),
        }


def simple(endpoint: str, args: dict[str, Any]) -> dict[str, Any]:
    from rocketmq.v5.consumer import SimpleConsumer

    sub = {args["topic"]: FilterExpression("*")}
    consumer = SimpleConsumer(_config(endpoint, args), args["group"], sub, await_duration=args.get("await_s", 5))
    t0 = time.time()
    consumer.startup()
    _ready(time.time() - t0)
    seen = _Receipts()
    expect, invisible = args.get("expect", 0), args.get("invisible_s", 15)
    deadline = time.time() + args.get("timeout_s", 300)
    stop = threading.Event()
    # 5.1.2's ack_async makes an asyncio Future off the SDK's loop (fails outside one): sync acks on a pool instead
    ackers = ThreadPoolExecutor(args.get("ack_threads", 8), thread_name_prefix="bench-ack")

    def ack(message: Any) -> None:
        try:
            consumer.ack(message)
        except Exception as e:
            seen.fail(e)

    def loop() -> None:
        while not stop.is_set() and time.time() < deadline:
            try:
                batch = consumer.receive(32, invisible)
            except Exception as e:
                seen.fail(e)
                time.sleep(0.1)
                continue
            if not batch:
                if seen.count:
                    stop.set()  # a long poll found nothing: the topic is drained
                continue
            with seen.lock:
                seen.receives += 1
            for m in batch:
                seen.got(m)
                ackers.submit(ack, m)
            if expect and seen.count >= expect:
                stop.set()

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(args.get("threads", 2))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ackers.shutdown(wait=True)  # every ack answered
    finally:
        consumer.shutdown()
    return seen.result()


def push(endpoint: str, args: dict[str, Any]) -> dict[str, Any]:
    from rocketmq.v5.consumer import PushConsumer
    from rocketmq.v5.consumer.push import ConsumeResult, MessageListener

    seen = _Receipts()

    class Listener(MessageListener):
        def consume(self, message: Any) -> Any:
            seen.got(message)
            return ConsumeResult.SUCCESS

    sub = {args["topic"]: FilterExpression("*")}
    consumer = PushConsumer(
        _config(endpoint, args), args["group"], Listener(), sub, consumption_thread_count=args.get("threads", 4)
    )
    t0 = time.time()
    consumer.startup()
    _ready(time.time() - t0)
    expect, idle = args.get("expect", 0), args.get("idle_s", 3.0)
    deadline = time.time() + args.get("timeout_s", 300)
    try:
        while time.time() < deadline:
            time.sleep(0.05)
            with seen.lock:
                if expect and seen.count >= expect:
                    break
                if seen.count and time.time() - seen.last > idle:
                    break
    finally:
        consumer.shutdown()
    return seen.result()


def redeliver(endpoint: str, args: dict[str, Any]) -> dict[str, Any]:
    from rocketmq.v5.consumer import SimpleConsumer

    sub = {args["topic"]: FilterExpression("*")}
    consumer = SimpleConsumer(_config(endpoint, args), args["group"], sub, await_duration=args.get("await_s", 5))
    t0 = time.time()
    consumer.startup()
    _ready(time.time() - t0)
    expect, invisible = args["expect"], args.get("invisible_s", 10)
    deadline = time.time() + args.get("timeout_s", 120)
    first: dict[str, float] = {}
    deviations: list[int] = []
    errors: list[str] = []

    def receive() -> list[Any]:
        try:
            return list(consumer.receive(32, invisible))
        except Exception as e:  # a timed-out long poll on a loaded machine: try again
            errors.append(repr(e))
            time.sleep(0.1)
            return []

    try:
        while len(first) < expect and time.time() < deadline:
            for m in receive():
                first.setdefault(m.message_id, time.time())
        back: set[str] = set()
        while len(back) < len(first) and time.time() < deadline:
            for m in receive():
                now = time.time()
                if m.message_id in first and m.message_id not in back and m.delivery_attempt >= 2:
                    back.add(m.message_id)
                    deviations.append(int((now - first[m.message_id] - invisible) * 1e6))
                try:
                    consumer.ack(m)
                except Exception as e:
                    errors.append(repr(e))
    finally:
        consumer.shutdown()
    return {
        "count": len(deviations),
        "received": len(first),
        "failed": len(first) - len(deviations),
        "errors": errors[:5],
        "latencies_us": deviations,
        "cpu_s": _cpu_s(),
    }


if __name__ == "__main__":
    endpoint, role, raw = sys.argv[1], sys.argv[2], sys.argv[3]
    result = {"send": send, "simple": simple, "push": push, "redeliver": redeliver}[role](endpoint, json.loads(raw))
    print("RESULT " + json.dumps(result), flush=True)
    os._exit(0)  # the SDK's threads (schedulers, callback pools) are not waited for
