"""Records what Apache RocketMQ's Java client 4.9.7 puts on the wire: starts an Apache RocketMQ 4.9.7 name server and
broker (tests/apache_rocketmq.py), puts compat/tools/remoting_proxy.py in front of both (the broker registers through
it too), runs the harness programs through it and leaves the decoded frames as JSON lines in ``--out``.

    .venv/bin/python compat/java/capture_wire.py --out /tmp/wire.jsonl [--workdir /tmp/wire-capture]

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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(ROOT, "tests"), os.path.join(ROOT, "compat", "tools")]

from apache_rocketmq import ApacheRocketMQ  # noqa: E402
from java_compat import run_java  # noqa: E402
from remoting_proxy import RemotingProxy  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="wire-capture-")
    logs = os.path.join(workdir, "client-logs")
    if os.path.exists(args.out):
        os.remove(args.out)
    server = ApacheRocketMQ(workdir, extra_broker_conf={"enablePropertyFilter": "true"})
    server.start_namesrv()
    proxy = RemotingProxy(args.out)
    ns_route = proxy.add_route(server.namesrv_addr, name="namesrv")
    br_route = proxy.add_route(server.broker_addr, name="broker")
    try:
        proxy.start()
        server.start_broker(namesrv_addr=ns_route.address)
        ns = ns_route.address
        print(f"namesrv {server.namesrv_addr} via {ns}; broker {server.broker_addr} via {br_route.address}")

        def run(main: str, *a: str) -> None:
            lines = run_java(main, list(a), logs)
            print(main, " ".join(a), "->", lines[-1])

        run("Produce", "--namesrv", ns, "--topic", "WireT", "--count", "6")
        run("PushConsume", "--namesrv", ns, "--group", "G_wire", "--topic", "WireT", "--sub", "TagA || TagC",
            "--expect", "4", "--timeout-ms", "20000")
        run("PushConsume", "--namesrv", ns, "--group", "G_sql", "--topic", "WireT", "--selector", "SQL92",
            "--sub", "compatProp IN ('v-1', 'v-4')", "--expect", "2", "--timeout-ms", "20000")
        run("PushConsume", "--namesrv", ns, "--group", "G_retry", "--topic", "WireT", "--sub", "TagB",
            "--reconsume-once", "true", "--expect", "4", "--timeout-ms", "30000")
        run("PushConsume", "--namesrv", ns, "--group", "G_order", "--topic", "WireT", "--orderly", "true",
            "--expect", "6", "--timeout-ms", "30000")
        run("QueryOffset", "--namesrv", ns, "--group", "G_wire", "--topic", "WireT")
        run("PullConsume", "--namesrv", ns, "--group", "G_lite", "--topic", "WireT", "--sub", "TagA",
            "--expect", "2", "--timeout-ms", "20000")
    finally:
        server.stop()
        proxy.close()
    print(f"frames in {args.out}; Apache logs in {server.logs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
