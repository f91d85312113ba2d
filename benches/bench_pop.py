"""POP consumption (RocketMQ 5, broker/pop/): pop + ack throughput against one broker, rmq_core's (``rmq-core
broker`` in its own process) and, with ``--apache``, Apache RocketMQ 5.3.3's (compat/apache/build.sh 5.3.3), the
same raw frames to both.

    .venv/bin/python benches/bench_pop.py [--messages 60000] [--size 1024] [--apache]

Each broker gets ``--messages`` sends (one at a time, 4 queues), then one connection pops (POP_MESSAGE, 32 at a time,
queue −1, invisible 60 s) and pipelines an ACK_MESSAGE per popped message (the handle built as Apache's Java client
builds it from the answer), until every message is acked; msg/s = messages / that time. The client is Python on the
same 2 shared cores, so the figures are client-bound: read them as "does the broker keep up", not as its ceiling.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

from rmq_core.broker.pop import extra_info as ei
from rmq_core.message import decode_messages
from rmq_core.message_encoding import properties_to_string
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import AckMessageRequestHeader, PopMessageRequestHeader, encode_header
from rmq_core.remoting.remoting_client import BlockingRemotingClient

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from support.apache_rocketmq import ApacheRocketMQ, free_port  # noqa: E402
from support.send_helpers import send_request  # noqa: E402

TOPIC, GROUP, BROKER = "BenchPop", "bench_pop_group", "broker-a"


def run(addr: str, messages: int, size: int) -> float:
    with BlockingRemotingClient() as c:
        props = properties_to_string({"TAGS": "T"})
        for i in range(messages):
            r = c.invoke_sync(addr, send_request(TOPIC, b"x" * size, queue_id=i % 4, properties=props), 5.0)
            assert r.code == ResponseCode.SUCCESS, r.remark
        got = 0
        t0 = time.perf_counter()
        while got < messages:
            h = PopMessageRequestHeader(GROUP, TOPIC, -1, 32, 60_000, 0, int(time.time() * 1000), 0, "TAG", "*", False)
            r = c.invoke_sync(addr, RemotingCommand.request(RequestCode.POP_MESSAGE, encode_header(h)), 5.0)
            if r.code != ResponseCode.SUCCESS:
                continue
            acks = []
            msgs = decode_messages(r.body)
            for m, handle in zip(msgs, ei.receipt_handles(r.ext_fields, msgs, BROKER), strict=True):
                a = AckMessageRequestHeader(GROUP, m.topic, m.queue_id, handle, m.queue_offset)
                acks.append(
                    c.invoke_async(addr, RemotingCommand.request(RequestCode.ACK_MESSAGE, encode_header(a)), 10)
                )
                got += 1
            for f in acks:
                assert f.result(10).code == ResponseCode.SUCCESS
        return messages / (time.perf_counter() - t0)


def rmq_core(messages: int, size: int) -> float:
    root = tempfile.mkdtemp(prefix="bench-pop-")
    port = free_port()
    conf = os.path.join(root, "broker.conf")
    with open(conf, "w") as f:
        f.write(f"brokerName={BROKER}\nlistenPort={port}\nstorePathRootDir={root}/store\n")
    cmd = [sys.executable, "-m", "rmq_core.cli", "broker", "-c", conf]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        return run(f"127.0.0.1:{port}", messages, size)
    finally:
        proc.terminate()
        proc.wait(30)


def apache(messages: int, size: int) -> float:
    server = ApacheRocketMQ(tempfile.mkdtemp(prefix="bench-pop-apache-"), version="5.3.3")
    with server:
        deadline = time.time() + 120
        while True:  # the broker serves once a send is answered
            try:
                with BlockingRemotingClient() as c:
                    r = c.invoke_sync(server.broker_addr, send_request("PingTopic", b"ping"), 3.0)
                    if r.code == ResponseCode.SUCCESS:
                        break
            except Exception:
                if time.time() > deadline:
                    raise
            time.sleep(0.5)
        return run(server.broker_addr, messages, size)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=60_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--apache", action="store_true", help="also Apache RocketMQ 5.3.3's broker")
    a = ap.parse_args()
    print(f"rmq_core     pop+ack {rmq_core(a.messages, a.size):>10,.0f} msg/s ({a.messages} x {a.size} B)")
    if a.apache:
        print(f"Apache 5.3.3 pop+ack {apache(a.messages, a.size):>10,.0f} msg/s ({a.messages} x {a.size} B)")


if __name__ == "__main__":
    main()
