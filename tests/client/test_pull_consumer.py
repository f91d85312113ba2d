"""PullConsumer (DefaultMQPullConsumer) over real TCP against an in-process name server + broker: fetching queues,
pull FOUND / NO_NEW_MSG / OFFSET_ILLEGAL / NO_MATCHED_MSG, tag and SQL92 filters, long polling returning when a
message arrives, consume offsets kept on the broker, and bad input."""

from __future__ import annotations

import threading
import time

import pytest

from rmq_core.client.consumer.pull_consumer import PullConsumer
from rmq_core.client.exceptions import MQClientException
from rmq_core.client.pull_result import PullStatus
from rmq_core.filter.message_selector import MessageSelector
from rmq_core.message import MessageQueue

from support.client_helpers_e2e import cluster
from support.client_helpers_rebalance import put

TOPIC = "PullConsumerTopic"


def test_fetch_queues_pull_found_no_new_msg_offset_illegal(tmp_path):
    with cluster(tmp_path) as c:
        c.create_topic(TOPIC, queues=4)
        for i in range(5):
            put(c.broker, TOPIC, 1, f"m{i}".encode(), tags="TagA" if i % 2 == 0 else "TagB")
        pc = PullConsumer("pull_cg_1", namesrv_addr=c.namesrv_addr)
        pc.start()
        try:
            mqs = pc.fetch_subscribe_message_queues(TOPIC)
            assert mqs == {MessageQueue(TOPIC, "broker-0", q) for q in range(4)}
            mq = MessageQueue(TOPIC, "broker-0", 1)

            r = pc.pull(mq, "*", 0, 3)
            assert r.pull_status == PullStatus.FOUND
            assert [m.body for m in r.msg_found_list] == [b"m0", b"m1", b"m2"]
            assert [m.queue_offset for m in r.msg_found_list] == [0, 1, 2]
            assert r.next_begin_offset == 3 and r.min_offset == 0 and r.max_offset == 5
            assert r.msg_found_list[0].get_property("MAX_OFFSET") == "5"

            r = pc.pull(mq, "*", 5, 32)
            assert r.pull_status == PullStatus.NO_NEW_MSG and r.next_begin_offset == 5

            r = pc.pull(mq, "*", 100, 32)  # OFFSET_OVERFLOW_BADLY with min offset 0: corrected to the min (as 4.9)
            assert r.pull_status == PullStatus.OFFSET_ILLEGAL and r.next_begin_offset == 0

            r = pc.pull(MessageQueue(TOPIC, "broker-0", 2), "*", 0, 32)  # empty queue
            assert r.pull_status == PullStatus.NO_NEW_MSG and r.next_begin_offset == 0

            # tag filter: broker-side by hash, client-side by the tag string
            r = pc.pull(mq, "TagA", 0, 32)
            assert r.pull_status == PullStatus.FOUND
            assert [m.body for m in r.msg_found_list] == [b"m0", b"m2", b"m4"]
            assert all(m.tags == "TagA" for m in r.msg_found_list)
            r = pc.pull(mq, "TagA || TagB", 0, 32)
            assert len(r.msg_found_list) == 5
            r = pc.pull(mq, "TagC", 0, 32)  # nothing matches: the broker skips to the end
            assert not r.msg_found_list and r.next_begin_offset == 5
        finally:
            pc.shutdown()


def test_sql92_selector(tmp_path):
    with cluster(tmp_path, enable_property_filter=True) as c:
        c.create_topic(TOPIC, queues=1)
        from rmq_core.message import Message

        for i in range(4):
            r = c.broker.message_store.put_message(Message(TOPIC, f"s{i}".encode(), properties={"a": str(i)}), 0)
            assert r.ok
        pc = PullConsumer("pull_cg_sql", namesrv_addr=c.namesrv_addr)
        pc.start()
        try:
            mq = MessageQueue(TOPIC, "broker-0", 0)
            # the broker needs the group's SQL subscription from a heartbeat; the pull carries the expression too
            r = pc.pull(mq, MessageSelector.by_sql("a >= 2"), 0, 32)
            assert r.pull_status == PullStatus.FOUND, r
            assert [m.body for m in r.msg_found_list] == [b"s2", b"s3"]
        finally:
            pc.shutdown()


def test_pull_block_if_not_found_returns_when_a_message_arrives(tmp_path):
    with cluster(tmp_path) as c:
        c.create_topic(TOPIC, queues=2)
        pc = PullConsumer("pull_cg_block", namesrv_addr=c.namesrv_addr)
        pc.start()
        try:
            mq = MessageQueue(TOPIC, "broker-0", 0)
            put(c.broker, TOPIC, 0, b"first")
            assert pc.pull_block_if_not_found(mq, None, 0, 32).pull_status == PullStatus.FOUND
            got: list = []

            def pull() -> None:
                got.append(pc.pull_block_if_not_found(mq, None, 1, 32))

            t = threading.Thread(target=pull)
            t.start()
            time.sleep(0.3)  # the broker is holding the pull now (nothing at offset 1 yet)
            assert not got
            put(c.broker, TOPIC, 0, b"second")
            t.join(10)
            assert not t.is_alive()
            assert got[0].pull_status == PullStatus.FOUND
            assert [m.body for m in got[0].msg_found_list] == [b"second"]
            assert got[0].next_begin_offset == 2
        finally:
            pc.shutdown()


def test_consume_offsets_update_fetch_persist(tmp_path):
    with cluster(tmp_path) as c:
        c.create_topic(TOPIC, queues=2)
        mq = MessageQueue(TOPIC, "broker-0", 1)
        for _i in range(3):
            put(c.broker, TOPIC, 1, b"x")
        pc = PullConsumer("pull_cg_off", namesrv_addr=c.namesrv_addr)
        pc.start()
        try:
            # nothing stored for a new group: the broker answers 0 while the queue's head is hot (4.9), else -1
            assert pc.fetch_consume_offset(mq, True) == 0
            pc.update_consume_offset(mq, 2)
            assert pc.fetch_consume_offset(mq, False) == 2  # memory
            with pytest.raises(MQClientException):
                pc.update_consume_offset(mq, -5)
            assert pc.max_offset(mq) == 3 and pc.min_offset(mq) == 0
        finally:
            pc.shutdown()  # persists
        assert c.committed_offset("pull_cg_off", TOPIC, 1) == 2
        pc2 = PullConsumer("pull_cg_off", namesrv_addr=c.namesrv_addr)
        pc2.start()
        try:
            assert pc2.fetch_consume_offset(mq, True) == 2
        finally:
            pc2.shutdown()


def test_registered_topic_is_in_heartbeat_and_rebalanced(tmp_path):
    with cluster(tmp_path) as c:
        c.create_topic(TOPIC, queues=4)
        changes: list = []
        pc = PullConsumer("pull_cg_reb", namesrv_addr=c.namesrv_addr, rebalance_interval_ms=200)
        pc.register_message_queue_listener(TOPIC, lambda t, all_, mine: changes.append((t, set(all_), set(mine))))
        pc.start()
        try:
            assert [s.topic for s in pc.subscriptions()] == [TOPIC]
            assert pc.subscriptions()[0].sub_version == 0
            pc.instance.rebalance_immediately()
            deadline = time.monotonic() + 10
            while not changes and time.monotonic() < deadline:
                pc.instance.rebalance_immediately()
                time.sleep(0.1)
            assert changes, "no rebalance reached the MessageQueueListener"
            topic, all_, mine = changes[-1]
            assert topic == TOPIC and mine == all_ == {MessageQueue(TOPIC, "broker-0", q) for q in range(4)}
            assert pc.fetch_message_queues_in_balance(TOPIC) == mine
        finally:
            pc.shutdown()


def test_bad_input_and_state(tmp_path):
    with pytest.raises(TypeError):
        PullConsumer("g", not_a_setting=1)
    pc = PullConsumer("pull_cg_state", namesrv_addr="127.0.0.1:1")
    with pytest.raises(MQClientException, match="not in running status"):
        pc.pull(MessageQueue(TOPIC, "b", 0), "*", 0, 1)
    with pytest.raises(MQClientException, match="consumerTimeoutMillisWhenSuspend"):
        PullConsumer("g2", consumer_timeout_millis_when_suspend=1000).start()
    with pytest.raises(MQClientException, match="DEFAULT_CONSUMER"):
        PullConsumer("DEFAULT_CONSUMER").start()
    with cluster(tmp_path) as c:
        c.create_topic(TOPIC, queues=1)
        with PullConsumer("pull_cg_bad", namesrv_addr=c.namesrv_addr) as pc:
            mq = MessageQueue(TOPIC, "broker-0", 0)
            with pytest.raises(MQClientException, match="offset < 0"):
                pc.pull(mq, "*", -1, 1)
            with pytest.raises(MQClientException, match="maxNums"):
                pc.pull(mq, "*", 0, 0)
            with pytest.raises(MQClientException):
                pc.fetch_subscribe_message_queues("NoSuchTopicAnywhere")
            with pytest.raises(MQClientException, match="started once"):
                pc.start()
