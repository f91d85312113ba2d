"""Records what Apache RocketMQ's Java client 4.9.7 puts on the wire: starts an Apache RocketMQ 4.9.7 name server and
broker (tests/support/apache_rocketmq.py), puts compat/tools/remoting_proxy.py in front of both (the broker registers through
it too), runs the harness programs through it and leaves the decoded frames as JSON lines in ``--out``.

    .venv/bin/python compat/java/capture_wire.py --out /tmp/wire.jsonl [--workdir /tmp/wire-capture] [--target rmq_core]

``--target apache`` (default) records against Apache RocketMQ; ``--target rmq_core`` runs the same scenario against
rmq_core's NameServer and Broker in this process, so the two logs can be compared frame by frame.

Scenario, in order: Produce (6 messages, TagA/TagB/TagC, keys, a user property); PushConsume concurrent with
"TagA || TagC"; PushConsume with a SQL92 selector; PushConsume concurrent answering RECONSUME_LATER once (retry topic
and CONSUMER_SEND_MSG_BACK); PushConsume orderly (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ); QueryOffset; PullConsume (the
lite pull consumer). compat/java/WIRE_NOTES.md is written by hand from such a log. One-shot, single-threaded.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "tests"), os.path.join(ROOT, "compat", "tools")]

from remoting_proxy import RemotingProxy

from support.apache_rocketmq import ApacheRocketMQ, free_port
from support.java_compat import JavaProgramError, run_java


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--target", choices=("apache", "rmq_core"), default="apache")
    args = ap.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="wire-capture-")
    logs = os.path.join(workdir, "client-logs")
    if os.path.exists(args.out):
        os.remove(args.out)
    proxy = RemotingProxy(args.out)
    stop: list[Any] = []
    if args.target == "apache":
        server = ApacheRocketMQ(workdir, extra_broker_conf={"enablePropertyFilter": "true"})
        server.start_namesrv()
        stop.append(server.stop)
        ns_route = proxy.add_route(server.namesrv_addr, name="namesrv")
        br_route = proxy.add_route(server.broker_addr, name="broker")
    else:
        from rmq_core.broker import Broker, BrokerConfig
        from rmq_core.namesrv import NameServer

        ns_server = NameServer(listen_port=0).start()
        stop.append(ns_server.shutdown)
        ns_route = proxy.add_route(ns_server.address, name="namesrv")
        br_port = free_port()
        br_route = proxy.add_route(f"127.0.0.1:{br_port}", name="broker")
    try:
        proxy.start()
        if args.target == "apache":
            server.start_broker(namesrv_addr=ns_route.address)
        else:
            cfg = BrokerConfig(
                broker_ip1="127.0.0.1",
                listen_port=br_port,
                namesrv_addr=ns_route.address,
                broker_name="broker-a",
                store_path_root_dir=os.path.join(workdir, "broker"),
                enable_property_filter=True,
                mapped_file_size_commit_log=16 * 1024 * 1024,
                mapped_file_size_consume_queue=6000 * 20,
            )
            broker = Broker(cfg).start()
            stop.insert(0, broker.shutdown)
            time.sleep(1.0)  # its first registration is asynchronous
        ns = ns_route.address
        print(f"namesrv {ns_route.upstream} via {ns}; broker {br_route.upstream} via {br_route.address}")

        def run(main: str, *a: str) -> None:
            try:
                lines = run_java(main, list(a), logs)
                print(main, " ".join(a), "->", lines[-1])
            except JavaProgramError as e:  # record the rest of the scenario anyway
                print(main, " ".join(a), "-> FAILED:", str(e).splitlines()[1][:300])

        run("Produce", "--namesrv", ns, "--topic", "WireT", "--count", "6")
        run(
            "PushConsume",
            "--namesrv",
            ns,
            "--group",
            "G_wire",
            "--topic",
            "WireT",
            "--sub",
            "TagA || TagC",
            "--expect",
            "4",
            "--timeout-ms",
            "20000",
        )
        run(
            "PushConsume",
            "--namesrv",
            ns,
            "--group",
            "G_sql",
            "--topic",
            "WireT",
            "--selector",
            "SQL92",
            "--sub",
            "compatProp IN ('v-1', 'v-4')",
            "--expect",
            "2",
            "--timeout-ms",
            "20000",
        )
        run(
            "PushConsume",
            "--namesrv",
            ns,
            "--group",
            "G_retry",
            "--topic",
            "WireT",
            "--sub",
            "TagB",
            "--reconsume-once",
            "true",
            "--expect",
            "4",
            "--timeout-ms",
            "30000",
        )
        run(
            "PushConsume",
            "--namesrv",
            ns,
            "--group",
            "G_order",
            "--topic",
            "WireT",
            "--orderly",
            "true",
            "--expect",
            "6",
            "--timeout-ms",
            "30000",
        )
        run("QueryOffset", "--namesrv", ns, "--group", "G_wire", "--topic", "WireT")
        run(
            "PullConsume",
            "--namesrv",
            ns,
            "--group",
            "G_lite",
            "--topic",
            "WireT",
            "--sub",
            "TagA",
            "--expect",
            "2",
            "--timeout-ms",
            "20000",
        )
    finally:
        for fn in stop:
            fn()
        proxy.close()
    print(f"frames in {args.out}; work directory {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
