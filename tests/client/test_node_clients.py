"""The clients over a node of two broker processes (``rmq_core.node.Node``), unchanged: a push consumer group of
three spreads the node's queues and consumes everything once, orderly consumption keeps each queue's order (a queue
is a broker and a queue id), transactions commit, roll back and are checked back on whichever broker holds them,
timer messages arrive at their time, and the admin CLI shows the queues of both brokers."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from rmq_core.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    LocalTransactionState,
    Producer,
    PushConsumer,
    TransactionProducer,
)
from rmq_core.client.consumer.listener import ConsumeOrderlyStatus
from rmq_core.message import Message, MessageExt
from rmq_core.node import Node
from rmq_core.testing.topic_admin import create_topic

from support.client_helpers_e2e import FAST_CLIENT
from support.helpers import subprocess_env, wait_until

pytestmark = pytest.mark.slow
BROKERS = ["nc-0", "nc-1"]
CONF = {  # small files; the transaction check asks after 0.5 s
    "mappedFileSizeCommitLog": 4 << 20,
    "mappedFileSizeConsumeQueue": 20 * 10_000,
    "mappedFileSizeTimerLog": 1 << 16,
    "transactionTimeOut": 500,
    "transactionCheckInterval": 200,
}
CONSUMER = {**FAST_CLIENT, "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    root = tmp_path_factory.mktemp("node")
    conf = root / "broker.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in CONF.items()))
    with open(root / "node.log", "w", encoding="utf-8") as out, Node(
        2, store_path_root_dir=str(root / "store"), namesrv_port=0, base_port=0, name="nc", broker_conf=str(conf), out=out
    ) as n:  # fmt: skip
        yield n


def _producer(node: Node, group: str) -> Producer:
    p = Producer(group, namesrv_addr=node.namesrv_addr)
    p.start()
    return p


def _push(node: Node, group: str, name: str, topic: str, listener: Any, orderly: bool = False) -> PushConsumer:
    c = PushConsumer(group, namesrv_addr=node.namesrv_addr, instance_name=name, **CONSUMER)
    c.subscribe(topic, "*")
    if orderly:
        c.register_message_listener_orderly(listener)
    else:
        c.register_message_listener(listener)
    c.start()
    return c


def test_a_group_of_three_spreads_the_nodes_queues(node: Node) -> None:
    assert create_topic(node.namesrv_addr, "NodeSpread", 4) == BROKERS
    seen: Counter[bytes] = Counter()
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], _ctx: object) -> ConsumeConcurrentlyStatus:
        with lock:
            seen.update(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumers = [_push(node, "node_spread", f"c{i}", "NodeSpread", listener) for i in range(3)]
    try:

        def spread() -> bool:
            sets = [
                {mq for mq in c.impl.rebalance_impl.process_queue_table if mq.topic == "NodeSpread"} for c in consumers
            ]
            return sorted(len(s) for s in sets) == [2, 3, 3] and len(set().union(*sets)) == 8

        wait_until(spread, "8 queues of two brokers spread 3/3/2 over the group")
        p = _producer(node, "node_spread_p")
        try:
            sent = [p.send(Message("NodeSpread", f"m{i}".encode())) for i in range(90)]
        finally:
            p.shutdown()
        assert {r.message_queue.broker_name for r in sent} == set(BROKERS)
        wait_until(lambda: sum(seen.values()) >= 90, "every message consumed")
        time.sleep(0.3)
        assert seen == Counter(f"m{i}".encode() for i in range(90))
    finally:
        for c in consumers:
            c.shutdown()


def test_orderly_consumption_keeps_each_queues_order(node: Node) -> None:
    create_topic(node.namesrv_addr, "NodeOrder", 2)
    seen: dict[tuple[str, int], list[int]] = defaultdict(list)
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeOrderlyStatus:
        key = (ctx.message_queue.broker_name, ctx.message_queue.queue_id)
        with lock:
            seen[key].extend(int(m.body) for m in msgs)
        return ConsumeOrderlyStatus.SUCCESS

    def by_order_id(mqs: list[Any], _msg: Message, order_id: int) -> Any:
        return sorted(mqs, key=lambda mq: (mq.broker_name, mq.queue_id))[order_id % len(mqs)]

    consumers = [_push(node, "node_order", f"o{i}", "NodeOrder", listener, orderly=True) for i in range(2)]
    p = _producer(node, "node_order_p")
    try:
        for i in range(200):  # order i % 4 -> one queue of one broker; the body is its sequence number
            p.send(Message("NodeOrder", str(i).encode()), by_order_id, i % 4)
        wait_until(lambda: sum(len(v) for v in seen.values()) >= 200, "every message consumed")
    finally:
        p.shutdown()
        for c in consumers:
            c.shutdown()
    assert {b for b, _ in seen} == set(BROKERS) and len(seen) == 4
    for key, bodies in seen.items():
        assert bodies == sorted(bodies) and len(bodies) == 50, (key, bodies[:10])


class _Decide:
    def execute_local_transaction(self, msg: Message, _arg: Any) -> LocalTransactionState:
        return LocalTransactionState(msg.properties["decide"])

    def check_local_transaction(self, msg_ext: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


def test_transactions_and_timers_over_the_node(node: Node) -> None:
    create_topic(node.namesrv_addr, "NodeTx", 2)
    got: list[tuple[float, bytes]] = []
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], _ctx: object) -> ConsumeConcurrentlyStatus:
        with lock:
            got.extend((time.time(), m.body) for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = _push(node, "node_tx", "t0", "NodeTx", listener)
    tp = TransactionProducer("node_tx_p", namesrv_addr=node.namesrv_addr, transaction_listener=_Decide())
    tp.start()
    try:
        brokers = set()
        for i in range(8):
            for decide in ("COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW"):
                msg = Message("NodeTx", f"{decide}-{i}".encode(), properties={"decide": decide})
                brokers.add(tp.send_message_in_transaction(msg).message_queue.broker_name)
        assert brokers == set(BROKERS)
        at = time.time() + 1.5
        r = tp.send(Message("NodeTx", b"timer", deliver_time_ms=int(at * 1000)))
        assert r.send_status.name == "SEND_OK"
        wait_until(lambda: len(got) >= 17, "commits, check-backs and the timer", timeout=20)
        time.sleep(0.5)
    finally:
        tp.shutdown()
        consumer.shutdown()
    bodies = Counter(b for _, b in got)
    want = [f"{d}-{i}".encode() for i in range(8) for d in ("COMMIT_MESSAGE", "UNKNOW")] + [b"timer"]
    assert bodies == Counter(want)
    assert next(t for t, b in got if b == b"timer") >= at - 0.01


def test_admin_topic_status_shows_both_brokers(node: Node) -> None:
    create_topic(node.namesrv_addr, "NodeStatus", 3)
    cmd = [sys.executable, "-m", "rmq_core.cli", "admin", "topic-status", "-t", "NodeStatus", "-n", node.namesrv_addr]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=subprocess_env())
    assert out.returncode == 0, out.stderr
    for b in BROKERS:
        assert out.stdout.count(b) == 3, out.stdout  # one row per queue of each broker
