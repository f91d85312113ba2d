"""Run by check_wheel.sh inside a fresh virtual environment that installed the wheel (not the source tree): the
native module loads, and a name server, a broker, a producer and a pull consumer make a round trip through the
public API. Exits non-zero (an assertion) on any difference; prints one JSON line of what it saw.

Usage: python round_trip.py STORE_DIR
"""

from __future__ import annotations

import json
import sys
import time

import rmq_core
from rmq_core import backend
from rmq_core.broker import Broker, BrokerConfig
from rmq_core.client import Producer, PullConsumer, PullStatus
from rmq_core.message import Message
from rmq_core.namesrv import NameServer
from rmq_core.testing import create_topic

N = 20


def main(store_dir: str) -> int:
    assert "site-packages" in (rmq_core.__file__ or ""), f"rmq_core imported from {rmq_core.__file__}, not the wheel"
    assert backend() == "rust", f"backend is {backend()}, the native module did not load"
    cfg = BrokerConfig(
        listen_port=0,
        store_path_root_dir=store_dir,
        mapped_file_size_commit_log=1 << 20,
        mapped_file_size_consume_queue=20 * 1000,
    )
    with NameServer(listen_port=0) as ns:
        cfg.namesrv_addr = ns.address
        with Broker(cfg):
            deadline = time.monotonic() + 10
            while True:  # the broker registers with the name server right after it starts listening
                try:
                    create_topic(ns.address, "WheelTopic", queues=2)
                    break
                except RuntimeError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            producer = Producer("wheel-producer", namesrv_addr=ns.address)
            producer.start()
            try:
                sent = [producer.send(Message("WheelTopic", f"body-{i}".encode(), tags="TagA")) for i in range(N)]
            finally:
                producer.shutdown()
            assert all(r.send_status.name == "SEND_OK" for r in sent), sent
            consumer = PullConsumer("wheel-consumer", namesrv_addr=ns.address)
            consumer.start()
            got: list[bytes] = []
            try:
                for mq in sorted(consumer.fetch_subscribe_message_queues("WheelTopic"), key=lambda q: q.queue_id):
                    offset = 0
                    while True:
                        r = consumer.pull(mq, "TagA", offset, 32)
                        if r.pull_status != PullStatus.FOUND:
                            break
                        got += [m.body for m in r.msg_found_list]
                        offset = r.next_begin_offset
            finally:
                consumer.shutdown()
    assert sorted(got) == sorted(f"body-{i}".encode() for i in range(N)), got
    print(json.dumps({"python": sys.version.split()[0], "backend": backend(), "sent": len(sent), "consumed": len(got)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
