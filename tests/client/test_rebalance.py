"""Rebalance with real push consumers over TCP (in-process name server + broker): two consumers share a topic's 8
queues, a third joins and the broker's NOTIFY_CONSUMER_IDS_CHANGED redistributes them (AVG: 3/3/2), one leaves and
its queues are taken over; consume_from_where FIRST / LAST / TIMESTAMP for a group with no stored offset; the
RebalanceService's wake-up."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import pytest

from rmq_core.client.consumer.listener import ConsumeConcurrentlyStatus, ConsumeFromWhere
from rmq_core.client.consumer.push_consumer import PushConsumer
from rmq_core.client.rebalance_service import RebalanceService
from rmq_core.message import MessageQueue

from support.client_helpers_e2e import cluster, wait_until
from support.client_helpers_rebalance import consumer_ids, on_broker_loop, put

TOPIC = "RebalanceTopic8"
GROUP = "rebalance_cg"
# the periodic rebalance is slow here (5 s): joins and leaves must be picked up through the broker's notification
CLIENT = {
    "rebalance_interval_ms": 5000,
    "heartbeat_broker_interval": 1000,
    "persist_consumer_offset_interval": 500,
    "poll_name_server_interval": 1000,
}


def ok(msgs: Any, ctx: Any) -> ConsumeConcurrentlyStatus:
    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def consumer(ns: str, name: str, group: str = GROUP, **kw: Any) -> PushConsumer:
    c = PushConsumer(group, namesrv_addr=ns, instance_name=name, **{**CLIENT, **kw})
    c.subscribe(TOPIC, "*")
    c.register_message_listener(ok)
    return c


def owned(c: PushConsumer) -> set[MessageQueue]:
    return {mq for mq in list(c.impl.rebalance_impl.process_queue_table) if mq.topic == TOPIC}


def shares(cs: list[PushConsumer]) -> list[int]:
    return sorted(len(owned(c)) for c in cs)


def partition_ok(cs: list[PushConsumer], all_mqs: set[MessageQueue]) -> bool:
    sets = [owned(c) for c in cs]
    return sum(len(s) for s in sets) == len(all_mqs) and set().union(*sets) == all_mqs


def test_join_and_leave_redistribute_queues(tmp_path):
    all_mqs = {MessageQueue(TOPIC, "broker-0", q) for q in range(8)}
    with cluster(tmp_path) as cl:
        cl.create_topic(TOPIC, 8)
        a, b, c = (consumer(cl.namesrv_addr, n) for n in ("ra", "rb", "rc"))
        started: list[PushConsumer] = []
        try:
            for x in (a, b):
                x.start()
                started.append(x)
            wait_until(lambda: shares([a, b]) == [4, 4] and partition_ok([a, b], all_mqs), "a and b at 4 queues each")
            # the allocation is AVG over sorted client ids: the lower id has queues 0-3
            ids = sorted([a.impl.instance.client_id, b.impl.instance.client_id])
            first = a if a.impl.instance.client_id == ids[0] else b
            assert owned(first) == {MessageQueue(TOPIC, "broker-0", q) for q in range(4)}

            t0 = time.monotonic()
            c.start()
            started.append(c)
            wait_until(
                lambda: shares([a, b, c]) == [2, 3, 3] and partition_ok([a, b, c], all_mqs),
                "a, b and c at 3/3/2 queues",
                timeout=4,
            )
            assert time.monotonic() - t0 < 4.5  # well inside the 5 s periodic rebalance: the notification did it
            assert len(consumer_ids(cl.broker, GROUP)) == 3

            c.shutdown()
            started.remove(c)
            wait_until(
                lambda: shares([a, b]) == [4, 4] and partition_ok([a, b], all_mqs),
                "a and b take c's queues over",
                timeout=4,
            )
            assert not owned(c)  # c dropped its process queues
        finally:
            for x in started:
                x.shutdown()


def _hot_head_off(cl: Any) -> None:
    """Make the broker treat every stored message as "on disk", so QUERY_CONSUMER_OFFSET answers QUERY_NOT_FOUND
    for a group without an offset (4.9 answers 0 while a queue's head is hot), and consume_from_where decides."""

    def set_ratio() -> None:
        cl.broker.controller.message_store_config.access_message_in_memory_max_ratio = 0

    on_broker_loop(cl.broker, set_ratio)


def _start_offset(cl: Any, cfw: ConsumeFromWhere, group: str, **kw: Any) -> int:
    c = PushConsumer(
        group, namesrv_addr=cl.namesrv_addr, instance_name=group, consume_from_where=cfw, **{**CLIENT, **kw}
    )
    c.subscribe(TOPIC, "*")
    c.register_message_listener(ok)
    c.start()
    try:
        rb = c.impl.rebalance_impl
        mq = MessageQueue(TOPIC, "broker-0", 0)
        return int(c.impl.instance.run_sync(rb.compute_pull_from_where_with_exception(mq), 10))
    finally:
        c.shutdown()


def test_consume_from_where_for_a_new_group(tmp_path):
    with cluster(tmp_path) as cl:
        cl.create_topic(TOPIC, 1)
        for i in range(3):
            put(cl.broker, TOPIC, 0, f"old{i}".encode())
        time.sleep(1.1)  # store timestamps have ms resolution; the consume timestamp has seconds
        middle = datetime.now().strftime("%Y%m%d%H%M%S")
        time.sleep(1.1)
        for i in range(2):
            put(cl.broker, TOPIC, 0, f"new{i}".encode())
        _hot_head_off(cl)
        assert _start_offset(cl, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "cfw_first") == 0
        assert _start_offset(cl, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, "cfw_last") == 5
        assert _start_offset(cl, ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, "cfw_ts", consume_timestamp=middle) == 3

        # a stored offset wins over consume_from_where
        def commit() -> None:
            cl.broker.controller.consumer_offset_manager.commit_offset("127.0.0.1", "cfw_stored", TOPIC, 0, 4)

        on_broker_loop(cl.broker, commit)
        assert _start_offset(cl, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, "cfw_stored") == 4


def test_rebalance_service_interval_and_wakeup(tmp_path):
    with cluster(tmp_path) as cl:
        cl.create_topic(TOPIC, 8)
        c = consumer(cl.namesrv_addr, "svc", rebalance_interval_ms=60000)
        c.start()
        try:
            svc = c.impl.instance.rebalance_service
            assert isinstance(svc, RebalanceService) and svc.rebalance_interval_ms == 60000
            wait_until(lambda: svc.rounds >= 1 and len(owned(c)) == 8, "the start-up rebalance")
            before = svc.rounds
            time.sleep(0.3)
            assert svc.rounds == before  # nothing until the interval or a wake-up
            c.impl.instance.rebalance_immediately()
            wait_until(lambda: svc.rounds == before + 1, "a round after wakeup()")
        finally:
            c.shutdown()
    with pytest.raises(ValueError):
        RebalanceService(object(), rebalance_interval_ms=0)
