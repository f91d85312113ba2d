"""Drives the PyPI ``rocketmq`` package (0.4.4: RocketMQ's C++ client, ``librocketmq.so`` loaded with ctypes) and
prints one JSON line per event on stdout, so a test in another process can check what the C++ client did.

Run it in its own process (the C++ client has global state and its own threads), with ``HOME`` pointing at a
scratch directory: the C++ client writes its logs to ``$HOME/logs/rocketmq-cpp/<pid>_rocketmq-cpp.log.N`` and
keeps nothing else there for clustering consumers.

    python compat/cpp/cpp_client.py produce --namesrv 127.0.0.1:9876 --topic T --group PG --count 9
    python compat/cpp/cpp_client.py push    --namesrv ... --topic T --group CG --expression "TagA || TagC" --expect 6
    python compat/cpp/cpp_client.py pull    --namesrv ... --topic T --group PCG --expression "TagA || TagC"

Output lines: ``{"event": "sent", "i", "tag", "key", "status", "msg_id", "offset"}`` per message sent;
``{"event": "received", "topic", "tags", "keys", "body", "id", "queue_id", "queue_offset", "reconsume_times",
"properties": {...}}`` per message consumed (push or pull); ``{"event": "retry", "i", "attempt", "error"}`` when
a send is retried after the C++ client's connect race (see ``_send_sync``); ``{"event": "error", "where",
"error"}`` on a failure (then the exit status is 1); ``{"event": "done", ...}`` last.

Message ``i`` of ``produce`` has tag ``TAGS[i % 3]``, keys ``"key-<i> alt-<i>"``, body ``"body-<i>-ünï"`` (UTF-8)
and user properties ``idx=<i>`` and ``origin=cpp``; ``expected(i)`` gives the same for the checker.

Thread-safety: the push consumer's callback runs on the C++ client's threads; received messages go into a list
under a lock, and lines are printed under the same lock.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

TAGS = ("TagA", "TagB", "TagC")
USER_PROPERTIES = ("idx", "origin")
SYSTEM_PROPERTIES = ("UNIQ_KEY", "KEYS", "TAGS", "WAIT", "MIN_OFFSET", "MAX_OFFSET")

_print_lock = threading.Lock()


def emit(**fields: Any) -> None:
    with _print_lock:
        sys.stdout.write(json.dumps(fields, ensure_ascii=False) + "\n")
        sys.stdout.flush()


def expected(i: int) -> dict[str, Any]:
    """What message ``i`` of ``produce`` carries."""
    return {
        "tag": TAGS[i % len(TAGS)],
        "keys": f"key-{i} alt-{i}",
        "body": f"body-{i}-ünï",
        "properties": {"idx": str(i), "origin": "cpp"},
    }


def _text(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8") if isinstance(value, bytes) else value


def describe(msg: Any) -> dict[str, Any]:
    """A received ``rocketmq.client.RecvMessage`` as JSON-able fields."""
    props = {}
    for name in USER_PROPERTIES + SYSTEM_PROPERTIES:
        v = _text(msg.get_property(name))
        if v:
            props[name] = v
    return {
        "topic": msg.topic,
        "tags": _text(msg.tags),
        "keys": _text(msg.keys),
        "body": _text(msg.body),
        "id": msg.id,
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "reconsume_times": msg.reconsume_times,
        "store_size": msg.store_size,
        "born_timestamp": msg.born_timestamp,
        "store_timestamp": msg.store_timestamp,
        "commit_log_offset": msg.commit_log_offset,
        "properties": props,
    }


# apache/rocketmq-client-cpp#455 (open): while the client's heartbeat thread is still connecting to a broker, a
# send's route update fails to get the same transport ("GetTransport ... get timed_mutex timeout"), finds no queue
# ("could not find property mq") and all its internal retries fail within a millisecond with "No route info of this
# topic". Only that error is retried, after a pause, and each retry is reported so the checker can bound them.
CONNECT_RACE_ERROR = "No route info of this topic"


def _send_sync(producer: Any, msg: Any, i: int, retries: int) -> Any:
    for attempt in range(retries + 1):
        try:
            return producer.send_sync(msg)
        except Exception as e:
            if CONNECT_RACE_ERROR not in str(e) or attempt == retries:
                raise
            emit(event="retry", i=i, attempt=attempt + 1, error=f"{type(e).__name__}: {e}")
            time.sleep(0.5)
    raise AssertionError("unreachable")


def produce(args: argparse.Namespace) -> int:
    from rocketmq.client import Message, Producer

    producer = Producer(args.group, timeout=args.send_timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    producer.start()
    failures = 0
    try:
        for i in range(args.start, args.start + args.count):
            exp = expected(i)
            msg = Message(args.topic)
            msg.set_tags(exp["tag"])
            msg.set_keys(exp["keys"])
            msg.set_body(exp["body"])
            for k, v in exp["properties"].items():
                msg.set_property(k, v)
            try:
                res = _send_sync(producer, msg, i, args.connect_race_retries)
            except Exception as e:  # the C++ client's failure, reported to the checker
                failures += 1
                emit(event="error", where=f"send {i}", error=f"{type(e).__name__}: {e}")
                continue
            emit(
                event="sent",
                i=i,
                tag=exp["tag"],
                key=exp["keys"],
                status=res.status.name,
                msg_id=res.msg_id,
                offset=res.offset,
            )
    finally:
        producer.shutdown()
    emit(event="done", sent=args.count - failures, failed=failures)
    return 1 if failures else 0


def push(args: argparse.Namespace) -> int:
    from rocketmq.client import PushConsumer

    received: list[dict[str, Any]] = []
    lock = threading.Condition()

    def on_message(msg: Any) -> None:
        d = describe(msg)
        with lock:
            received.append(d)
            emit(event="received", **d)
            lock.notify_all()

    consumer = PushConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    consumer.set_thread_count(args.threads)
    consumer.subscribe(args.topic, on_message, args.expression)
    consumer.start()
    started = time.monotonic()
    try:
        with lock:
            lock.wait_for(lambda: len(received) >= args.expect, timeout=args.timeout)
        time.sleep(args.idle)  # anything beyond the expected messages (a wrong filter, a redelivery) shows here
    finally:
        consumer.shutdown()
    with lock:
        n = len(received)
    emit(event="done", received=n, seconds=round(time.monotonic() - started, 3))
    return 0 if n >= args.expect else 1


def pull(args: argparse.Namespace) -> int:
    from rocketmq.client import PullConsumer

    consumer = PullConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    consumer.start()
    n = 0
    try:
        for msg in consumer.pull(args.topic, args.expression, args.max_num):
            emit(event="received", **describe(msg))
            n += 1
    except Exception as e:  # the C++ client's failure, reported to the checker
        emit(event="error", where="pull", error=f"{type(e).__name__}: {e}")
        return 1
    finally:
        consumer.shutdown()
    emit(event="done", received=n, offsets=dict(consumer.offset_table))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="RocketMQ's C++ client (PyPI rocketmq 0.4.4), driven from the shell")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("produce", "push", "pull"):
        p = sub.add_parser(name)
        p.add_argument("--namesrv", required=True)
        p.add_argument("--topic", required=True)
        p.add_argument("--group", required=True)
        if name == "produce":
            p.add_argument("--count", type=int, default=9)
            p.add_argument("--start", type=int, default=0)
            p.add_argument("--send-timeout-ms", type=int, default=3000)
            p.add_argument(
                "--connect-race-retries",
                type=int,
                default=1,
                help="retries of a send that failed with the C++ client's connect race (#455)",
            )
        else:
            p.add_argument("--expression", default="*")
        if name == "push":
            p.add_argument("--expect", type=int, required=True)
            p.add_argument("--timeout", type=float, default=30.0)
            p.add_argument("--idle", type=float, default=1.0)
            p.add_argument("--threads", type=int, default=2)
        if name == "pull":
            p.add_argument("--max-num", type=int, default=32)
    args = ap.parse_args(argv)
    return {"produce": produce, "push": push, "pull": pull}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
