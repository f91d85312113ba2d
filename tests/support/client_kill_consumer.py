"""A push consumer in its own process for the kill-mid-batch test (tests/client/test_client_e2e.py): it consumes a topic
concurrently and, once it sees a message whose key index is at least ``--block-from``, blocks that listener call
forever, so the test can SIGKILL it with batches in flight.

    python tests/support/client_kill_consumer.py --namesrv H:P --group G --topic T --block-from N [--batch 4] [--threads 4]

JSON lines on stdout, one per event, flushed: {"event":"started"}; {"event":"acked","keys":[...],"queue":q,
"offsets":[...]} printed by the listener just before it returns CONSUME_SUCCESS (so every message whose line was
printed had been handed back as consumed); {"event":"blocked","keys":[...],"queue":q,"offsets":[...]} when a listener
call blocks. Keys are "k-<index>". Threads: consume threads print under a lock; the main thread only waits.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any

from rmq_core.client import ConsumeConcurrentlyStatus, ConsumeFromWhere, PushConsumer

_out_lock = threading.Lock()


def emit(obj: dict[str, Any]) -> None:
    with _out_lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--namesrv", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--block-from", type=int, required=True)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--instance", default="killed")
    args = p.parse_args()
    never = threading.Event()

    def listener(msgs: list[Any], context: Any) -> ConsumeConcurrentlyStatus:
        keys = [m.keys for m in msgs]
        rec = {"keys": keys, "queue": msgs[0].queue_id, "offsets": [m.queue_offset for m in msgs]}
        if any(int(k.split("-")[1]) >= args.block_from for k in keys):
            emit({"event": "blocked", **rec})
            never.wait()
        emit({"event": "acked", **rec})
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        args.group,
        namesrv_addr=args.namesrv,
        instance_name=args.instance,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        consume_message_batch_max_size=args.batch,
        consume_thread_min=args.threads,
        consume_thread_max=args.threads,
        persist_consumer_offset_interval=200,
        rebalance_interval_ms=300,
        heartbeat_broker_interval=1000,
    )
    consumer.subscribe(args.topic, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    emit({"event": "started"})
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
