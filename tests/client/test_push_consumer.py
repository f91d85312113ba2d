"""PushConsumer against a real NameServer + Broker in this process (raw SEND_MESSAGE_V2 sends): tag subscription with
the client-side re-filter, commit offsets never ahead of an unfinished message, RECONSUME_LATER retries and the DLQ,
flow control, OFFSET_ILLEGAL, suspend/resume, broadcasting with LocalFileOffsetStore, SQL92."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from rmq_core.client.consumer import push_consumer as push_consumer_module
from rmq_core.client.consumer.listener import ConsumeConcurrentlyStatus, ConsumeFromWhere, MessageModel
from rmq_core.client.consumer.push_consumer import PushConsumer
from rmq_core.filter.message_selector import MessageSelector
from rmq_core.message import MessageExt, MessageQueue
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import UpdateConsumerOffsetRequestHeader, encode_header

from support.client_helpers_push import FAST, push_cluster, wait_until

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER


class Recorder:
    def __init__(self, status: Any = OK) -> None:
        self.lock = threading.Lock()
        self.msgs: list[MessageExt] = []
        self.status = status

    def __call__(self, msgs: Any, ctx: Any) -> Any:
        with self.lock:
            self.msgs.extend(msgs)
        return self.status

    def bodies(self) -> list[bytes]:
        with self.lock:
            return [m.body for m in self.msgs]


def persisted(pc: PushConsumer, cluster: Any, group: str, topic: str, queues: int) -> list[int]:
    """Persist the consumer's offsets now (what the instance's 5 s task does, first after 10 s) and read the
    broker's committed offsets."""
    pc.impl.persist_consumer_offset()
    return [cluster.committed_offset(group, topic, q) for q in range(queues)]


def consumer(cluster: Any, group: str, listener: Any, topic: str, expr: Any = "*", **settings: Any) -> PushConsumer:
    s = dict(FAST)
    s.update(settings)
    pc = PushConsumer(group, cluster.namesrv_addr, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **s)
    pc.subscribe(topic, expr)
    pc.register_message_listener(listener)
    return pc


def test_tag_subscription_over_several_queues_with_client_side_refilter(tmp_path) -> None:
    with push_cluster(tmp_path) as c:
        c.create_topic("TagT", 4)
        # "Aa" and "BB" have the same Java hashCode: the broker's tagsCode filter passes both, the client drops "BB"
        expected = set()
        for i in range(40):
            tag = ("Aa", "BB", "C")[i % 3]
            c.send("TagT", b"%d" % i, i % 4, tags=tag)
            if tag == "Aa":
                expected.add(b"%d" % i)
        rec = Recorder()
        pc = consumer(c, "GTag", rec, "TagT", "Aa")
        pc.start()
        try:
            wait_until(lambda: set(rec.bodies()) >= expected, "every Aa message")
            # committed = one past the last delivered message of each queue: a tail the client filtered out is
            # committed only once a later pull answers NO_NEW_MSG (after the 15 s long poll), as in RocketMQ
            want = [1 + max(m.queue_offset for m in rec.msgs if m.queue_id == q) for q in range(4)]
            assert want == [10, 9, 8, 10]
            wait_until(
                lambda: persisted(pc, c, "GTag", "TagT", 4) == want, "offsets committed past every delivered message"
            )
        finally:
            pc.shutdown()
        assert {m.tags for m in rec.msgs} == {"Aa"}
        assert sorted(rec.bodies()) == sorted(expected)  # each exactly once
        m = rec.msgs[0]
        assert m.broker_name == "broker-a" and m.properties["MAX_OFFSET"] == "10" and "MIN_OFFSET" in m.properties


def test_committed_offset_never_passes_an_unfinished_message(tmp_path) -> None:
    with push_cluster(tmp_path) as c:
        c.create_topic("BlockT", 1)
        for i in range(10):
            c.send("BlockT", b"%d" % i, 0)
        release = threading.Event()
        done: list[int] = []
        lock = threading.Lock()

        def listener(msgs: Any, ctx: Any) -> Any:
            for m in msgs:
                if m.queue_offset == 3:
                    assert release.wait(10)
                with lock:
                    done.append(m.queue_offset)
            return OK

        pc = consumer(c, "GBlock", listener, "BlockT")
        pc.start()
        try:
            wait_until(lambda: len(done) == 9, "every message but offset 3")
            pq = next(iter(pc.impl.rebalance_impl.process_queue_table.values()))
            assert pq.msg_count == 1
            time.sleep(0.2)
            assert (
                pc.impl.offset_store.read_offset(
                    MessageQueue("BlockT", "broker-a", 0), push_consumer_module.ReadOffsetType.READ_FROM_MEMORY
                )
                == 3
            )
            assert persisted(pc, c, "GBlock", "BlockT", 1) == [3]
            release.set()
            wait_until(lambda: persisted(pc, c, "GBlock", "BlockT", 1) == [10], "the offset to move to the end")
        finally:
            release.set()
            pc.shutdown()
        assert sorted(done) == list(range(10))


def test_reconsume_later_retries_with_growing_times_then_dlq(tmp_path) -> None:
    with push_cluster(tmp_path, message_delay_level=" ".join(["1s"] * 18)) as c:
        c.create_topic("RetryT", 1)
        c.send("RetryT", b"poison", 0)
        rec = Recorder(status=LATER)
        pc = consumer(c, "GRetry", rec, "RetryT", max_reconsume_times=2)
        pc.start()
        try:
            wait_until(lambda: len(rec.msgs) == 3, "the first delivery and two retries", timeout=15)
            dlq_q = MessageQueue("%DLQ%GRetry", "broker-a", 0)

            def in_dlq() -> bool:
                store = c.broker.message_store
                r = store.get_message("t", dlq_q.topic, 0, 0, 32)
                return bool(r.body)

            wait_until(in_dlq, "the message in %DLQ%GRetry", timeout=10)
        finally:
            pc.shutdown()
        assert [m.reconsume_times for m in rec.msgs] == [0, 1, 2]
        assert {m.topic for m in rec.msgs} == {"RetryT"}  # retry-topic messages get their RETRY_TOPIC back
        assert {m.body for m in rec.msgs} == {b"poison"}
        assert len(rec.msgs) == 3


def test_flow_control_bounds_the_cache_with_a_slow_listener(tmp_path) -> None:
    with push_cluster(tmp_path) as c:
        c.create_topic("FlowT", 1)
        for _i in range(200):
            c.send("FlowT", b"x" * 100, 0)
        seen_max = [0]
        count = [0]
        holder: dict[str, Any] = {}

        def listener(msgs: Any, ctx: Any) -> Any:
            pq = holder.get("pq")
            if pq is not None:
                seen_max[0] = max(seen_max[0], pq.msg_count)
            count[0] += len(msgs)
            time.sleep(0.002)
            return OK

        pc = consumer(
            c,
            "GFlow",
            listener,
            "FlowT",
            pull_threshold_for_queue=20,
            pull_batch_size=8,
            consume_thread_min=1,
            consume_thread_max=1,
        )
        pc.start()
        try:
            wait_until(lambda: pc.impl.rebalance_impl.process_queue_table, "a process queue")
            holder["pq"] = next(iter(pc.impl.rebalance_impl.process_queue_table.values()))
            wait_until(lambda: count[0] >= 200, "every message", timeout=15)
        finally:
            pc.shutdown()
        assert pc.impl.queue_flow_control_times > 0
        assert 0 < seen_max[0] <= 20 + 8 + 1  # threshold + one pull batch (a pull may start at threshold + 0)


def test_consume_span_flow_control_defers_pulls_while_the_cached_span_is_too_wide(tmp_path) -> None:
    """4.9 pullMessage (concurrently): while the ProcessQueue's span (last - first *cached* offset, consumed
    messages leave the cache) exceeds consume_concurrently_max_span, the pull is deferred. The listener holds offset 0
    and every offset from 12: once [12..15] is cached beside 0 the span is 15 > 10 and no further pull is made (the
    count and size thresholds are far away); when the held messages finish, pulling resumes."""
    with push_cluster(tmp_path) as c:
        c.create_topic("SpanT", 1)
        for i in range(100):
            c.send("SpanT", b"%d" % i, 0)
        release = threading.Event()
        done: list[int] = []
        lock = threading.Lock()

        def listener(msgs: Any, ctx: Any) -> Any:
            for m in msgs:
                if m.queue_offset == 0 or m.queue_offset >= 12:
                    release.wait(20)
                with lock:
                    done.append(m.queue_offset)
            return OK

        pc = consumer(
            c,
            "GSpan",
            listener,
            "SpanT",
            consume_concurrently_max_span=10,
            pull_batch_size=4,
            pull_threshold_for_queue=1000,
            consume_thread_min=8,
            consume_thread_max=8,
        )
        pc.start()
        try:
            wait_until(lambda: pc.impl.rebalance_impl.process_queue_table, "a process queue")
            pq = next(iter(pc.impl.rebalance_impl.process_queue_table.values()))
            wait_until(lambda: sorted(done) == list(range(1, 12)), "offsets 1..11 consumed", timeout=15)
            wait_until(lambda: pq.queue_offset_max >= 15 and pq.get_max_span() > 10, "a span over 10 cached")
            deferred = pc.impl.queue_max_span_flow_control_times
            wait_until(lambda: pc.impl.queue_max_span_flow_control_times > deferred + 3, "the pull deferred again")
            assert pq.queue_offset_max == 15 and pq.get_max_span() == 15  # nothing pulled past the span
            assert pc.impl.queue_flow_control_times == 0  # not the count/size thresholds
            release.set()
            wait_until(lambda: len(done) == 100, "every message once the held ones finish", timeout=15)
        finally:
            release.set()
            pc.shutdown()
        assert sorted(done) == list(range(100))


def test_a_dropped_process_queue_stops_its_pull_chain(tmp_path) -> None:
    """4.9 pullMessage returns at once for a dropped ProcessQueue (before stamping lastPullTimestamp), so the queue's
    PullRequest is not put back: the pull parked at the broker when the queue was dropped still answers, nothing after
    it is pulled, and a dropped queue's messages are not handed to the listener."""
    with push_cluster(tmp_path) as c:
        c.create_topic("DropT", 1)
        rec = Recorder()
        pc = consumer(c, "GDrop", rec, "DropT")
        pc.start()
        try:
            c.send("DropT", b"before", 0)
            wait_until(lambda: rec.bodies() == [b"before"], "the first message")
            pq = next(iter(pc.impl.rebalance_impl.process_queue_table.values()))
            pq.dropped = True  # as a rebalance that gave the queue away does
            c.send("DropT", b"m1", 0)  # answers the pull parked at the broker
            wait_until(lambda: pq.queue_offset_max == 1, "the parked pull's answer")
            time.sleep(0.5)  # the PullRequest came back once and was discarded
            stamp = pq.last_pull_timestamp
            c.send("DropT", b"m2", 0)
            time.sleep(1.0)
            assert pq.last_pull_timestamp == stamp  # no pull_message got past the dropped check
            assert pq.queue_offset_max == 1  # m2 was never pulled
            assert rec.bodies() == [b"before"]  # m1 reached a dropped queue: not consumed
        finally:
            pc.shutdown()


def test_pull_interval_defers_the_pull_after_a_found(tmp_path) -> None:
    """4.9 PullCallback FOUND: with pullInterval > 0 the PullRequest is put back after that delay (else at once), so a
    message sent right after one was consumed waits for the interval instead of answering a parked pull."""
    with push_cluster(tmp_path) as c:
        c.create_topic("IvlT", 1)
        rec = Recorder()
        pc = consumer(c, "GIvl", rec, "IvlT", pull_interval=3000)
        pc.start()
        try:
            wait_until(lambda: pc.impl.rebalance_impl.process_queue_table, "a process queue")
            c.send("IvlT", b"a", 0)
            wait_until(lambda: rec.bodies() == [b"a"], "the first message")
            c.send("IvlT", b"b", 0)
            time.sleep(1.0)
            assert rec.bodies() == [b"a"]  # no pull until the interval has passed
            wait_until(lambda: rec.bodies() == [b"a", b"b"], "the message after the interval", timeout=10)
        finally:
            pc.shutdown()


def test_offset_illegal_drops_the_queue_and_fixes_the_offset(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(push_consumer_module, "OFFSET_ILLEGAL_FIX_DELAY_MILLIS", 200)
    with push_cluster(tmp_path) as c:
        c.create_topic("IllT", 1)
        for i in range(5):
            c.send("IllT", b"%d" % i, 0)
        h = UpdateConsumerOffsetRequestHeader(consumerGroup="GIll", topic="IllT", queueId=0, commitOffset=1000)
        r = c.client.invoke_sync(
            c.broker.address, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, encode_header(h)), timeout=5.0
        )
        assert r.code == ResponseCode.SUCCESS
        assert c.committed_offset("GIll", "IllT", 0) == 1000
        rec = Recorder()
        pc = consumer(c, "GIll", rec, "IllT")
        pc.start()
        try:
            # offset 1000 > max 5 with min 0: the broker answers PULL_OFFSET_MOVED with nextBeginOffset 0; the
            # queue is dropped, the offset set to 0 and persisted, and the next rebalance consumes from there
            wait_until(lambda: sorted(rec.bodies()) == [b"%d" % i for i in range(5)], "the queue consumed from 0")
            wait_until(lambda: persisted(pc, c, "GIll", "IllT", 1) == [5], "the offset committed to the end")
            c.send("IllT", b"after", 0)
            wait_until(lambda: len(rec.msgs) == 6, "the next message")
        finally:
            pc.shutdown()
        assert rec.bodies()[-1] == b"after"
        assert sorted(m.queue_offset for m in rec.msgs) == list(range(6))  # nothing consumed twice


def test_suspend_and_resume(tmp_path) -> None:
    with push_cluster(tmp_path) as c:
        c.create_topic("SusT", 1)
        rec = Recorder()
        pc = consumer(c, "GSus", rec, "SusT")
        pc.start()
        try:
            c.send("SusT", b"before", 0)
            wait_until(lambda: rec.bodies() == [b"before"], "the first message")
            pc.suspend()
            # the pull parked at the broker (long polling) still answers with the next message, as in RocketMQ;
            # the pulls after it are deferred while paused
            c.send("SusT", b"parked", 0)
            wait_until(lambda: rec.bodies() == [b"before", b"parked"], "the parked pull's message")
            c.send("SusT", b"while", 0)
            time.sleep(1.5)
            assert rec.bodies() == [b"before", b"parked"]
            pc.resume()
            wait_until(lambda: rec.bodies() == [b"before", b"parked", b"while"], "the message sent while suspended")
        finally:
            pc.shutdown()


def test_broadcasting_every_consumer_gets_every_message_with_local_offsets(tmp_path) -> None:
    with push_cluster(tmp_path) as c:
        c.create_topic("BcT", 2)
        recs = [Recorder(), Recorder()]
        pcs = [
            consumer(
                c,
                "GBc",
                recs[i],
                "BcT",
                message_model=MessageModel.BROADCASTING,
                instance_name=f"bc{i}",
                offset_store_dir=str(tmp_path / "offsets"),
            )
            for i in range(2)
        ]
        for i in range(10):
            c.send("BcT", b"%d" % i, i % 2)
        for pc in pcs:
            pc.start()
        try:
            for r in recs:
                wait_until(lambda r=r: len(r.msgs) >= 10, "every message at each consumer")
        finally:
            for pc in pcs:
                pc.shutdown()
        for r in recs:
            assert sorted(r.bodies()) == sorted(b"%d" % i for i in range(10))
        files = sorted((tmp_path / "offsets").glob("*/GBc/offsets.json"))
        assert len(files) == 2
        for f in files:
            assert '{"brokerName":"broker-a","queueId":0,"topic":"BcT"}:5' in f.read_text()
        assert c.committed_offset("GBc", "BcT", 0) == -1  # nothing on the broker


def test_sql92_subscription(tmp_path) -> None:
    with push_cluster(tmp_path, enable_property_filter=True) as c:
        c.create_topic("SqlT", 2)
        for i in range(20):
            c.send("SqlT", b"%d" % i, i % 2, properties={"n": str(i)})
        rec = Recorder()
        pc = consumer(c, "GSql", rec, "SqlT", MessageSelector.by_sql("n >= 15"))
        pc.start()
        try:
            wait_until(lambda: len(rec.msgs) >= 5, "the five matching messages")
            wait_until(
                lambda: [c.committed_offset("GSql", "SqlT", q) for q in range(2)] == [10, 10],
                "offsets at the end (NO_MATCHED_MSG corrections)",
            )
        finally:
            pc.shutdown()
        assert sorted(int(m.properties["n"]) for m in rec.msgs) == [15, 16, 17, 18, 19]


def test_start_asks_the_broker_to_check_a_sql92_subscription(tmp_path) -> None:
    """4.9's checkClientInBroker (CHECK_CLIENT_CONFIG at start, for each subscription that is not TAG): a broker
    without enablePropertyFilter refuses SQL92 and start() raises the broker's code and remark (the consumer left
    START_FAILED); a TAG subscription is not checked. (An expression that does not compile is refused by
    subscribe() already; the broker's own SUBSCRIPTION_PARSE_FAILED answer is test_client_manage_processor's.)"""
    from rmq_core.client import MQClientException

    seen: list[int] = []
    with push_cluster(tmp_path / "off") as c:
        c.create_topic("ChkT", 1)
        processor = c.broker.controller.client_manage_processor
        check = processor.check_client_config

        def spied(request: RemotingCommand) -> RemotingCommand:
            seen.append(request.code)
            return check(request)

        processor.check_client_config = spied
        pc = consumer(c, "GChk", Recorder(), "ChkT", MessageSelector.by_sql("n >= 15"))
        with pytest.raises(MQClientException) as e:
            pc.start()
        assert e.value.response_code == ResponseCode.SYSTEM_ERROR
        assert e.value.remark == "The broker does not support consumer to filter message by SQL92"
        assert pc.impl.service_state == "START_FAILED"
        assert seen == [RequestCode.CHECK_CLIENT_CONFIG]
        tagged = consumer(c, "GChkTag", Recorder(), "ChkT", "TagA")
        tagged.start()
        tagged.shutdown()
        assert seen == [RequestCode.CHECK_CLIENT_CONFIG]  # a TAG subscription is not checked


def test_bad_settings_are_refused(tmp_path) -> None:
    with pytest.raises(TypeError, match="unknown PushConsumer settings"):
        PushConsumer("G", "127.0.0.1:1", pull_treshold=1)
    pc = PushConsumer("G", "127.0.0.1:1", consume_thread_min=0)
    pc.subscribe("T", "*")
    pc.register_message_listener(Recorder())
    with pytest.raises(Exception, match="consume_thread_min"):
        pc.start()
    pc2 = PushConsumer("G", "127.0.0.1:1")
    with pytest.raises(Exception, match="messageListener is null"):
        pc2.start()


def test_send_back_failure_falls_back_to_a_resend_to_the_retry_topic(tmp_path) -> None:
    """When CONSUMER_SEND_MSG_BACK fails, the consumer resends the message itself to %RETRY%group (reconsume times +1,
    RETRY_TOPIC and ORIGIN_MESSAGE_ID set), as DefaultMQPushConsumerImpl.sendMessageBack does; it is then consumed
    again under its original topic."""
    with push_cluster(tmp_path, message_delay_level=" ".join(["1s"] * 18)) as c:
        refused: list[int] = []

        async def refuse_send_back(conn: Any, request: RemotingCommand) -> RemotingCommand:
            refused.append(request.opaque)
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark="send back refused (test)")

        # a broker whose send-back processor fails: the seam is the remoting server's processor table
        c.broker.controller.remoting_server.register(int(RequestCode.CONSUMER_SEND_MSG_BACK), refuse_send_back)
        c.create_topic("FallbackT", 1)
        c.send("FallbackT", b"again", 0)
        calls: list[MessageExt] = []
        lock = threading.Lock()

        def listener(msgs: Any, ctx: Any) -> Any:
            with lock:
                calls.extend(msgs)
                return LATER if len(calls) == 1 else OK

        pc = consumer(c, "GFallback", listener, "FallbackT")
        pc.start()
        try:
            wait_until(lambda: len(calls) >= 2, "the resent message to be consumed again", timeout=20)
        finally:
            pc.shutdown()
        assert refused, "the broker's send-back was never asked"
        first, second = calls[0], calls[1]
        assert (first.body, second.body) == (b"again", b"again")
        assert (first.reconsume_times, second.reconsume_times) == (0, 1)
        assert second.topic == "FallbackT"  # RETRY_TOPIC restored by the consumer
        assert second.properties.get("ORIGIN_MESSAGE_ID")
        retry = c.broker.message_store.get_message("t", "%RETRY%GFallback", 0, 0, 32)
        assert retry.body, "the resend went to %RETRY%GFallback"


def test_send_back_and_resend_both_failing_reconsume_locally_after_5s(tmp_path) -> None:
    """When the send-back and the consumer's own resend to %RETRY%group both fail, ConsumeMessageConcurrentlyService
    keeps the message: reconsume times + 1 and a local re-consume 5 s later (submitConsumeRequestLater), under its
    own topic and queue offset; nothing reaches the retry topic, and the queue's offset is not committed past it."""
    with push_cluster(tmp_path) as c:
        c.create_topic("LocalRetryT", 1)
        c.send("LocalRetryT", b"keep-me", 0)
        refused: list[int] = []

        async def refuse(conn: Any, request: RemotingCommand) -> RemotingCommand:
            refused.append(request.code)
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark="refused (test)")

        server = c.broker.controller.remoting_server  # the seam: the remoting server's processor table
        for code in (
            RequestCode.CONSUMER_SEND_MSG_BACK,
            RequestCode.SEND_MESSAGE,
            RequestCode.SEND_MESSAGE_V2,
            RequestCode.SEND_BATCH_MESSAGE,
        ):
            server.register(int(code), refuse)
        calls: list[tuple[float, MessageExt, int]] = []  # reconsume times as delivered (the object is reused)
        lock = threading.Lock()

        def listener(msgs: Any, ctx: Any) -> Any:
            with lock:
                calls.extend((time.monotonic(), m, m.reconsume_times) for m in msgs)
                return LATER if len(calls) == 1 else OK

        pc = consumer(c, "GLocalRetry", listener, "LocalRetryT")
        pc.start()
        try:
            wait_until(lambda: len(calls) >= 1, "the first delivery", timeout=10)
            mq = MessageQueue("LocalRetryT", "broker-a", 0)
            time.sleep(1.0)
            assert pc.impl.offset_store.read_offset(mq, 0) <= 0, "committed past a message still being retried"
            wait_until(lambda: len(calls) >= 2, "the local re-consume", timeout=15)
        finally:
            pc.shutdown()
        assert RequestCode.CONSUMER_SEND_MSG_BACK in refused and (
            RequestCode.SEND_MESSAGE_V2 in refused or RequestCode.SEND_MESSAGE in refused
        ), refused
        (t1, first, times1), (t2, second, times2) = calls[0], calls[1]
        assert (first.body, second.body) == (b"keep-me", b"keep-me")
        assert (times1, times2) == (0, 1)
        assert (second.topic, second.queue_offset) == ("LocalRetryT", first.queue_offset)
        assert t2 - t1 >= 4.5, f"re-consumed after {t2 - t1:.2f} s, not the 5 s delay"
        assert not c.broker.message_store.get_message("t", "%RETRY%GLocalRetry", 0, 0, 32).body
