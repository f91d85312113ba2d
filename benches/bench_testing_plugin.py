"""The pytest plugin's costs (rmq_core.testing): what a test session pays to get a cluster, and what each test pays,
beside starting Apache RocketMQ 4.9.7 (compat/apache, child JVMs) for the same purpose.

    .venv/bin/python benches/bench_testing_plugin.py [--rounds 5] [--tests 20] [--apache-rounds 3] [--no-apache]

What it measures:
  session    start_cluster() (name server + broker in-process, free ports, temporary store) until the name server
             knows the broker, in a fresh Python process per round, so the imports of the broker, name server and
             client are counted ("import" is reported apart); cluster.close() as "stop"
  per test   what the rocketmq_topic + rocketmq_producer + rocketmq_consumer fixtures cost a test that sends and
             receives one message: create_topic (4 queues, routable), a TestProducer and a TestConsumer started,
             produce 1, consume 1, both closed; --tests of them per process, the median per round
  apache     ApacheRocketMQ(workdir).start() (a name server JVM then a broker JVM, until "boot success") and stop(),
             and create_topic against it (the per-test topic cost)
Medians over the rounds with every round beside them. The machine is shared (2 cores, other work running).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, sys, tempfile, time
t0 = time.perf_counter()
from rmq_core.testing import start_cluster, TestConsumer, TestProducer, create_topic
import rmq_core.broker, rmq_core.namesrv, rmq_core.client  # what the first fixture use imports
t1 = time.perf_counter()
cluster = start_cluster(tempfile.mkdtemp(prefix="bench-testing-"))
t2 = time.perf_counter()
per_test, topic_only = [], []
for i in range(int(sys.argv[1])):
    a = time.perf_counter()
    topic = cluster.create_topic(queues=4)
    b = time.perf_counter()
    p, c = TestProducer(cluster.namesrv_addr), TestConsumer(cluster.namesrv_addr)
    p.produce(topic, 1)
    assert len(c.consume(topic, 1, timeout=10)) == 1
    p.close(); c.close()
    per_test.append(time.perf_counter() - a); topic_only.append(b - a)
t3 = time.perf_counter()
cluster.close()
t4 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "start": t2 - t1, "stop": t4 - t3,
                  "per_test_median": sorted(per_test)[len(per_test) // 2],
                  "topic_median": sorted(topic_only)[len(topic_only) // 2]}))
"""


def fmt(xs: list[float], unit: float = 1000.0, suffix: str = "ms") -> str:
    return f"{statistics.median(xs) * unit:8.1f} {suffix}   runs: " + ", ".join(f"{x * unit:.1f}" for x in xs)


def rmq_core_rounds(rounds: int, tests: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for _ in range(rounds):
        r = subprocess.run(
            [sys.executable, "-c", CHILD, str(tests)], capture_output=True, text=True, timeout=300, check=True
        )
        for k, v in json.loads(r.stdout.strip().splitlines()[-1]).items():
            out.setdefault(k, []).append(v)
    return out


def apache_rounds(rounds: int) -> dict[str, list[float]]:
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from rmq_core.testing import create_topic

    from support.apache_rocketmq import ApacheRocketMQ

    out: dict[str, list[float]] = {}
    for _ in range(rounds):
        with tempfile.TemporaryDirectory(prefix="bench-apache-") as d:
            a = time.perf_counter()
            mq = ApacheRocketMQ(d).start()
            b = time.perf_counter()
            try:
                topics = []
                for i in range(5):
                    s = time.perf_counter()
                    create_topic(mq.namesrv_addr, f"bench-topic-{i}", 4)
                    topics.append(time.perf_counter() - s)
            finally:
                c = time.perf_counter()
                mq.stop()
                e = time.perf_counter()
            out.setdefault("start", []).append(b - a)
            out.setdefault("stop", []).append(e - c)
            out.setdefault("topic_median", []).append(statistics.median(topics))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tests", type=int, default=20)
    ap.add_argument("--apache-rounds", type=int, default=3)
    ap.add_argument("--no-apache", action="store_true")
    args = ap.parse_args()
    print("machine shared with other work (2 cores); medians, every round beside them")
    r = rmq_core_rounds(args.rounds, args.tests)
    print(f"rmq_core in-process ({args.rounds} rounds, a fresh process each; {args.tests} tests per round)")
    print(f"  import (broker, namesrv, client)   {fmt(r['import'])}")
    print(f"  session start (start_cluster)      {fmt(r['start'])}")
    print(f"  session stop                       {fmt(r['stop'])}")
    print(f"  per test: topic+producer+consumer, 1 msg round trip  {fmt(r['per_test_median'])}")
    print(f"  per test: create_topic alone       {fmt(r['topic_median'])}")
    if args.no_apache:
        return
    a = apache_rounds(args.apache_rounds)
    print(f"Apache RocketMQ 4.9.7 child JVMs ({args.apache_rounds} rounds)")
    print(f"  start (namesrv + broker)           {fmt(a['start'])}")
    print(f"  stop                               {fmt(a['stop'])}")
    print(f"  create_topic                       {fmt(a['topic_median'])}")
    print(
        f"ratios (medians, this run): start Apache/rmq_core = "
        f"{statistics.median(a['start']) / statistics.median(r['start']):.1f}x; "
        f"start incl. imports = {statistics.median(a['start']) / (statistics.median(r['start']) + statistics.median(r['import'])):.1f}x"
    )


if __name__ == "__main__":
    main()
