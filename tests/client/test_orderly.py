"""Orderly consumption with real push consumers over TCP (in-process name server + broker): per-queue order with two
consumers and one listener call per queue at a time, the broker's queue locks held by the owning client
(RebalanceLockManager), SUSPEND_CURRENT_QUEUE_A_MOMENT re-delivering the same batch with growing reconsume times
before a success, and the DLQ once max_reconsume_times is reached."""

from __future__ import annotations

from typing import Any

from rmq_core.client.consumer.listener import ConsumeFromWhere, ConsumeOrderlyStatus
from rmq_core.client.consumer.push_consumer import PushConsumer
from rmq_core.message import MessageQueue

from support.client_helpers_e2e import OrderlyRecorder, cluster, wait_until
from support.client_helpers_rebalance import broker_lock_owner, put

TOPIC = "OrderlyTopic"
CLIENT = {
    "rebalance_interval_ms": 1000,
    "heartbeat_broker_interval": 1000,
    "persist_consumer_offset_interval": 300,
    "poll_name_server_interval": 1000,
    "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
}


def orderly_consumer(ns: str, group: str, name: str, listener: Any, **kw: Any) -> PushConsumer:
    c = PushConsumer(group, namesrv_addr=ns, instance_name=name, **{**CLIENT, **kw})
    c.subscribe(TOPIC, "*")
    c.register_message_listener_orderly(listener)
    return c


def owned(c: PushConsumer) -> set[MessageQueue]:
    return {mq for mq in list(c.impl.rebalance_impl.process_queue_table) if mq.topic == TOPIC}


def test_per_queue_order_two_consumers_and_broker_locks(tmp_path):
    group, queues, per_queue = "orderly_cg", 4, 60
    rec = OrderlyRecorder()

    with cluster(tmp_path) as cl:
        cl.create_topic(TOPIC, queues, order=True)
        cs = [
            orderly_consumer(cl.namesrv_addr, group, n, rec.listener(n), consume_message_batch_max_size=4)
            for n in ("o1", "o2")
        ]
        started: list[PushConsumer] = []
        try:
            for c in cs:
                c.start()
                started.append(c)
            wait_until(lambda: sorted(len(owned(c)) for c in cs) == [2, 2], "two queues each")
            # every owned queue is locked on the broker by its owner, and the process queue knows it
            for c in cs:
                cid = c.impl.instance.client_id
                for mq in owned(c):
                    assert broker_lock_owner(cl.broker, group, mq) == cid
                    assert c.impl.rebalance_impl.process_queue_table[mq].locked
            for i in range(per_queue):
                for q in range(queues):
                    put(cl.broker, TOPIC, q, f"{q}-{i}".encode())
            wait_until(lambda: rec.consumed() >= queues * per_queue, "every message consumed", timeout=15)
        finally:
            for c in started:
                c.shutdown()
        # shutdown unlocked the queues on the broker
        for q in range(queues):
            assert broker_lock_owner(cl.broker, group, MessageQueue(TOPIC, "broker-0", q)) is None
    rec.check_per_queue_order(queues, per_queue)


def test_suspend_a_moment_then_success_and_dlq_past_max(tmp_path):
    group = "orderly_suspend_cg"
    calls: list[tuple[int, int]] = []  # (queue offset, reconsume times) per delivery

    def listener(msgs: Any, ctx: Any) -> ConsumeOrderlyStatus:
        m = msgs[0]
        calls.append((m.queue_offset, m.reconsume_times))
        body = m.body
        if body == b"retry-twice" and m.reconsume_times < 2:
            ctx.suspend_current_queue_time_millis = 50
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        if body == b"always-fails":
            ctx.suspend_current_queue_time_millis = 10
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus.SUCCESS

    with cluster(tmp_path) as cl:
        cl.create_topic(TOPIC, 1, order=True)
        put(cl.broker, TOPIC, 0, b"retry-twice")
        put(cl.broker, TOPIC, 0, b"always-fails")
        put(cl.broker, TOPIC, 0, b"after")
        c = orderly_consumer(cl.namesrv_addr, group, "s1", listener, max_reconsume_times=3)
        c.start()
        try:
            wait_until(lambda: any(off == 2 for off, _ in calls), "the message after the failing ones", timeout=10)
            mq = MessageQueue(TOPIC, "broker-0", 0)
            wait_until(lambda: c.impl.offset_store.clone_offset_table(TOPIC).get(mq) == 3, "offset 3 in the store")
            assert mq in owned(c)
        finally:
            c.shutdown()
        assert cl.committed_offset(group, TOPIC, 0) == 3  # persisted at shutdown
        # the first message: suspended twice (reconsume times 0, 1), then consumed (2); nothing overtook it
        assert calls[:3] == [(0, 0), (0, 1), (0, 2)]
        # the second: 0..3 delivered, at 3 (= max) it went to the DLQ instead of a fifth delivery, then "after"
        assert calls[3:] == [(1, 0), (1, 1), (1, 2), (1, 3), (2, 0)]
        dlq = wait_until(lambda: cl.stored(f"%DLQ%{group}"), "the DLQ message")
        assert [m.body for m in dlq] == [b"always-fails"]
