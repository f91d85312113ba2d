"""The push consumer of the broker crash soak (benches/soak_broker.py), in its own process so that the soak can
SIGKILL it mid-batch like the broker.

    python benches/soak_consumer.py --namesrv H:P --group G --topic T

It consumes ``T`` concurrently (batches of up to 4) and prints one JSON line per listener call, flushed, just before
it returns CONSUME_SUCCESS: {"k": [keys...], "q": queue, "o": [queue offsets...], "bad": [keys whose body is not the
body the soak sent for that key]}. A line printed means those messages were handed back as consumed; whether their
offsets were committed before a kill is what the soak checks. Threads: consume threads print under a lock.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from rmq_core.client import ConsumeConcurrentlyStatus, ConsumeFromWhere, PushConsumer
from rmq_core.message import MessageExt

_out_lock = threading.Lock()


def soak_body(key: str) -> bytes:
    """The body the soak sends for ``key`` (one owner: benches/soak_broker.py imports it)."""
    return (f"soak:{key}:" * (1 + int(key.rsplit("-", 1)[-1]) % 40)).encode()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--namesrv", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    args = p.parse_args()

    def listener(msgs: Sequence[MessageExt], _ctx: Any) -> ConsumeConcurrentlyStatus:
        keys = [m.keys or "" for m in msgs]
        bad = [m.keys or "" for m in msgs if m.body != soak_body(m.keys or "x-0")]
        line = json.dumps({"k": keys, "q": msgs[0].queue_id, "o": [m.queue_offset for m in msgs], "bad": bad})
        with _out_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        args.group,
        namesrv_addr=args.namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        consume_message_batch_max_size=4,
        persist_consumer_offset_interval=200,
        heartbeat_broker_interval=1000,
        rebalance_interval_ms=500,
        poll_name_server_interval=1000,
    )
    consumer.subscribe(args.topic, "*")
    consumer.register_message_listener(listener)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer.start()
    with _out_lock:
        sys.stdout.write(json.dumps({"started": True}) + "\n")
        sys.stdout.flush()
    stop.wait()
    consumer.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
