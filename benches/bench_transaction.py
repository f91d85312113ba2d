"""Transactional send throughput vs plain send, on the same broker in one run.

    .venv/bin/python benches/bench_transaction.py [--messages 5000] [--size 1024] [--threads 4] [--rounds 5]
                                                  [--apache] [--json out.json]

Against an rmq_core name server + broker in their own process (``rmq-core serve``, ASYNC_FLUSH): ``--rounds``
rounds, each a plain round (``Producer.send``, sync, from ``--threads`` threads) then a transactional round
(``TransactionProducer.send_message_in_transaction``, the listener commits at once: a half message, END_TRANSACTION
oneway, the broker stores the real message and the op message) of ``--messages`` messages each; the median msg/s of
each kind and the ratio transactional / plain [target ≥ 0.5]. ``--apache`` measures the same with rmq_core's clients
against Apache RocketMQ 4.9.7's broker (tests/support/apache_rocketmq.py) in the same run, as the yardstick. After
each run every committed message must be in the topic (counted from the broker's max offsets).
One run; the machine is shared and noisy: read the ratio, not the absolute figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benches"))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from bench_client import create_topic, start_server  # noqa: E402

from rmq_core.client import LocalTransactionState, Producer, TransactionProducer  # noqa: E402
from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI  # noqa: E402
from rmq_core.message import Message, MessageExt  # noqa: E402


class CommitAll:
    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg_ext: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


def run_threads(n: int, threads: int, one: Any) -> float:
    """``n`` calls of ``one()`` spread over ``threads`` threads: msg/s."""
    failed = [0]

    def worker(k: int) -> None:
        for _ in range(k):
            try:
                one()
            except Exception:
                failed[0] += 1

    ts = [threading.Thread(target=worker, args=(n // threads + (i < n % threads),)) for i in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = time.perf_counter() - t0
    if failed[0]:
        print(f"  {failed[0]} sends failed", file=sys.stderr)
    return (n - failed[0]) / dt


def total_messages(namesrv: str, broker: str, topic: str, queues: int) -> int:
    with BlockingMQClientAPI(namesrv, 5000) as api:
        return sum(api.get_max_offset(broker, topic, q) for q in range(queues))


def measure(label: str, namesrv: str, broker: str, args: argparse.Namespace) -> dict[str, Any]:
    plain_topic, tx_topic = f"BenchPlain{label}", f"BenchTx{label}"
    for t in (plain_topic, tx_topic):
        create_topic(namesrv, broker, t, 4)
    body = os.urandom(args.size)
    plain = Producer(f"bench_plain_{label}", namesrv_addr=namesrv, instance_name=f"bench-plain-{label}")
    tx = TransactionProducer(
        f"bench_tx_{label}", namesrv_addr=namesrv, transaction_listener=CommitAll(), instance_name=f"bench-tx-{label}"
    )
    plain.start()
    tx.start()
    rates: dict[str, list[float]] = {"plain": [], "transactional": []}
    try:
        plain.send(Message(plain_topic, body))  # routes and connections
        tx.send_message_in_transaction(Message(tx_topic, body))
        for r in range(args.rounds):
            rates["plain"].append(
                run_threads(args.messages, args.threads, lambda: plain.send(Message(plain_topic, body)))
            )
            rates["transactional"].append(
                run_threads(
                    args.messages, args.threads, lambda: tx.send_message_in_transaction(Message(tx_topic, body))
                )
            )
            print(
                f"  {label} round {r + 1}: plain {rates['plain'][-1]:,.0f} msg/s, "
                f"transactional {rates['transactional'][-1]:,.0f} msg/s",
                file=sys.stderr,
            )
    finally:
        tx.shutdown()
        plain.shutdown()
    expected = 1 + args.rounds * args.messages
    deadline = time.monotonic() + 10
    while (stored := total_messages(namesrv, broker, tx_topic, 4)) < expected and time.monotonic() < deadline:
        time.sleep(0.1)
    out = {k: statistics.median(v) for k, v in rates.items()}
    return {
        "plain_msgs_per_s": out["plain"],
        "transactional_msgs_per_s": out["transactional"],
        "ratio": out["transactional"] / out["plain"],
        "rounds": rates,
        "committed_stored": stored,
        "committed_expected": expected,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=5000)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--apache", action="store_true", help="also against Apache RocketMQ 4.9.7's broker")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    results: dict[str, Any] = {"args": vars(args)}
    with tempfile.TemporaryDirectory(prefix="rmq-bench-tx-") as d:
        proc, namesrv, broker = start_server(d)
        try:
            results["rmq_core"] = measure("Rmq", namesrv, broker, args)
        finally:
            proc.terminate()
            proc.wait(30)
        if args.apache:
            from support.apache_rocketmq import ApacheRocketMQ

            with ApacheRocketMQ(os.path.join(d, "apache")) as server:
                results["apache"] = measure("Apache", server.namesrv_addr, server.broker_addr, args)
    print(f"{'broker':<10} {'plain msg/s':>12} {'tx msg/s':>12} {'tx/plain':>9} {'committed stored':>18}")
    for name in ("rmq_core", "apache"):
        r = results.get(name)
        if r:
            print(
                f"{name:<10} {r['plain_msgs_per_s']:>12,.0f} {r['transactional_msgs_per_s']:>12,.0f} "
                f"{r['ratio']:>9.2f} {r['committed_stored']:>9}/{r['committed_expected']}"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
