"""rmq_core's clients against Apache RocketMQ 4.9.7's own name server and broker (Maven Central, started by
tests/support/apache_rocketmq.py): the Producer (sync sends auto-creating the topic, an ordered send to a chosen queue), the
PushConsumer (a tag filter; offsets committed at shutdown and read back by the group's next consumer after a restart),
and the PullConsumer (queues from the route, pull with a tag, NO_NEW_MSG at the end, long polling woken by a send,
offsets updated, persisted and read back from the broker).

Apache's 4.9.7 ConsumerOffsetManager loses concurrent FIRST commits of one group and topic (it creates the per-topic
map without a lock), so a group's offsets are primed with sequential synchronous commits before a push consumer
commits all its queues at once (see tests/interop/test_compat_cpp.py for the same workaround).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rmq_core.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Producer,
    PullConsumer,
    PullStatus,
    PushConsumer,
)
from rmq_core.message import Message

from support.apache_rocketmq import apache_rocketmq  # noqa: F401  (the module-scoped fixture)
from support.client_helpers_e2e import Deliveries, wait_until

pytestmark = pytest.mark.apache_broker

TAGS = ["TagA", "TagB", "TagC"]
FAST = {
    "rebalance_interval_ms": 500,
    "heartbeat_broker_interval": 1000,
    "persist_consumer_offset_interval": 500,
    "poll_name_server_interval": 1000,
}


@pytest.fixture
def producer(apache_rocketmq: tuple[str, str]) -> Iterator[Producer]:  # noqa: F811
    p = Producer("py_apache_producer", namesrv_addr=apache_rocketmq[0], instance_name="py-apache-producer")
    p.start()
    yield p
    p.shutdown()


def send(p: Producer, topic: str, start: int, n: int) -> dict[str, Any]:
    out = {}
    for i in range(start, start + n):
        r = p.send(Message(topic, f"body-{i}".encode(), tags=TAGS[i % 3], keys=f"k-{i}"))
        assert r.send_status.name == "SEND_OK", r
        assert r.msg_id and r.offset_msg_id and r.msg_id != r.offset_msg_id
        out[f"k-{i}"] = r
    return out


def consume(namesrv: str, topic: str, group: str, instance: str, expect: set[str]) -> Deliveries:
    got = Deliveries()

    def listener(msgs: list[Any], context: Any) -> ConsumeConcurrentlyStatus:
        got.add(instance, msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = PushConsumer(
        group,
        namesrv_addr=namesrv,
        instance_name=instance,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **FAST,
    )
    c.subscribe(topic, "TagA || TagC")
    c.register_message_listener(listener)
    c.start()
    try:
        wait_until(lambda: set(got.keys()) >= expect, f"{instance} to consume {sorted(expect)}", timeout=30)
        time.sleep(1.0)  # anything else (a filtered tag, a duplicate) would arrive now
    finally:
        c.shutdown()  # persists the offsets to the broker
    return got


def offsets_of(namesrv: str, group: str, topic: str, fn: Any) -> Any:
    """Run ``fn(pull_consumer, sorted queues)`` with a PullConsumer of ``group``, shut down before returning (a live
    pull consumer is a member of the group, and push consumers would share the queues with it)."""
    c = PullConsumer(group, namesrv_addr=namesrv, instance_name=f"py-apache-offsets-{time.monotonic_ns()}")
    c.start()
    try:
        return fn(c, sorted(c.fetch_subscribe_message_queues(topic), key=lambda m: m.queue_id))
    finally:
        c.shutdown()


def test_producer_and_push_consumer_tag_filter_and_offsets_across_a_restart(apache_rocketmq):  # noqa: F811
    namesrv = apache_rocketmq[0]
    topic, group = "PyApachePush", "py_apache_push_group"
    p = Producer("py_apache_push_producer", namesrv_addr=namesrv, instance_name="py-apache-push-producer")
    p.start()
    try:
        first = send(p, topic, 0, 12)

        def prime(c: PullConsumer, mqs: list[Any]) -> None:
            assert len(mqs) == 4 and {m.topic for m in mqs} == {topic}
            for mq in mqs:  # sequential first commits (see the module docstring)
                c.update_consume_offset_to_broker(mq, 0, is_oneway=False)

        offsets_of(namesrv, group, topic, prime)
        want = {k for k in first if TAGS[int(k[2:]) % 3] != "TagB"}
        got = consume(namesrv, topic, group, "py-apache-push-1", want)
        assert sorted(got.keys()) == sorted(want), "each TagA/TagC message once, no TagB"
        assert all(d.tags in ("TagA", "TagC") and d.topic == topic for d in got.snapshot())

        # the committed offsets, read back from the broker: past each queue's last consumed message, at most its
        # end (a queue ending in filtered messages commits its end only once a later pull answers NO_NEW_MSG or
        # NO_MATCHED_MSG — after the broker's 15 s long poll —, as with the Java client)
        committed = offsets_of(
            namesrv,
            group,
            topic,
            lambda c, mqs: {mq.queue_id: (c.fetch_consume_offset(mq, from_store=True), c.max_offset(mq)) for mq in mqs},
        )
        for q, (off, end) in committed.items():
            last = max((first[k].queue_offset for k in want if first[k].message_queue.queue_id == q), default=-1)
            assert last + 1 <= off <= end, (q, off, end, last)

        second = send(p, topic, 12, 9)
        want2 = {k for k in second if TAGS[int(k[2:]) % 3] != "TagB"}
        got2 = consume(namesrv, topic, group, "py-apache-push-2", want2)
        assert sorted(got2.keys()) == sorted(want2), "the restarted group resumes at its committed offsets"
    finally:
        p.shutdown()


def test_pull_consumer_on_apache(apache_rocketmq, producer):  # noqa: F811
    namesrv = apache_rocketmq[0]
    topic, group = "PyApachePull", "py_apache_pull_group"
    sent = send(producer, topic, 0, 12)
    c = PullConsumer(group, namesrv_addr=namesrv, instance_name="py-apache-pull")
    c.start()
    try:
        mqs = sorted(c.fetch_subscribe_message_queues(topic), key=lambda m: m.queue_id)
        assert [m.queue_id for m in mqs] == [0, 1, 2, 3]
        found: dict[str, Any] = {}
        ends = {}
        for mq in mqs:
            offset = 0
            while True:
                r = c.pull(mq, "TagA", offset, 32)
                assert r.min_offset == 0 and r.max_offset == c.max_offset(mq)
                if r.pull_status == PullStatus.FOUND:
                    for m in r.msg_found_list:
                        found[m.keys] = m
                elif r.pull_status == PullStatus.NO_NEW_MSG:
                    break
                else:
                    assert r.pull_status == PullStatus.NO_MATCHED_MSG, r
                assert r.next_begin_offset > offset or r.pull_status == PullStatus.NO_NEW_MSG
                offset = r.next_begin_offset
            ends[mq] = offset
            assert offset == r.max_offset
        assert sorted(found) == sorted(k for k in sent if TAGS[int(k[2:]) % 3] == "TagA")
        for k, m in found.items():
            assert (m.queue_id, m.queue_offset) == (sent[k].message_queue.queue_id, sent[k].queue_offset)
            assert m.body == f"body-{k[2:]}".encode() and m.tags == "TagA"

        # long polling: a pull parked at the end of queue 0 is answered by a send to that queue
        mq0 = mqs[0]
        sender = threading.Timer(
            0.5, lambda: producer.send_to_queue(Message(topic, b"late", tags="TagA", keys="late"), mq0)
        )
        t0 = time.monotonic()
        sender.start()
        try:
            r = c.pull_block_if_not_found(mq0, "TagA", ends[mq0], 32)
        finally:
            sender.join()
        assert r.pull_status == PullStatus.FOUND and [m.keys for m in r.msg_found_list] == ["late"]
        assert time.monotonic() - t0 >= 0.4, "the pull waited for the message"

        c.update_consume_offset(mq0, r.next_begin_offset)
        assert c.fetch_consume_offset(mq0, from_store=False) == r.next_begin_offset
    finally:
        c.shutdown()  # persists the offset
    c2 = PullConsumer(group, namesrv_addr=namesrv, instance_name="py-apache-pull-2")
    c2.start()
    try:
        assert c2.fetch_consume_offset(mq0, from_store=True) == r.next_begin_offset
    finally:
        c2.shutdown()


def test_push_consumer_sql92_is_checked_by_and_filtered_on_apache(apache_rocketmq, producer):  # noqa: F811
    """A SQL92 subscription: the consumer's start asks Apache's broker (CHECK_CLIENT_CONFIG, 4.9's
    checkClientInBroker; the fixture's broker has enablePropertyFilter) and is accepted; the broker filters by the
    message's property."""
    from rmq_core.filter.message_selector import MessageSelector

    namesrv = apache_rocketmq[0]
    topic, group = "PyApacheSql", "py_apache_sql_group"
    for i in range(20):
        r = producer.send(Message(topic, f"s{i}".encode(), properties={"n": str(i)}))
        assert r.send_status.name == "SEND_OK"
    got: list[int] = []
    lock = threading.Lock()

    def listener(msgs: list[Any], context: Any) -> ConsumeConcurrentlyStatus:
        with lock:
            got.extend(int(m.properties["n"]) for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = PushConsumer(
        group,
        namesrv_addr=namesrv,
        instance_name="py-apache-sql",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **FAST,
    )
    c.subscribe(topic, MessageSelector.by_sql("n >= 15"))
    c.register_message_listener(listener)
    c.start()
    try:
        wait_until(lambda: len(got) >= 5, "the five matching messages", timeout=30)
        time.sleep(0.5)  # no more arrives
    finally:
        c.shutdown()
    assert sorted(got) == [15, 16, 17, 18, 19]
