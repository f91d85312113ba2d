"""The ``rocketmq`` source on Spark ``local[2]``: batch reads equal what a pull consumer sees (path and namesrv),
tag and SQL92 filters, starting/ending offsets, a streaming query restarted from its checkpoint (exactly once into
parquet), maxOffsetsPerTrigger, failOnDataLoss both ways, consumerGroup commits, bad options."""

from __future__ import annotations

import json
import time

import pytest

from rmq_core.client import MQBrokerException, Producer, PullConsumer
from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI
from rmq_core.client.pull_result import PullStatus
from rmq_core.message import Message, MessageQueue
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.header import QueryConsumerOffsetRequestHeader
from rmq_core.store import MessageStore

from support.client_helpers_core import cluster
from support.spark_helpers import (
    TOPIC,
    fill_store,
    message,
    read,
    rows_by_key,
    same_messages,
    small_store_config,
    spark,  # noqa: F401 - fixture
    store_messages,
)

pytestmark = pytest.mark.slow


# --- path ---------------------------------------------------------------------------------------------------------
def test_path_batch_equals_store_reads_while_the_store_is_open(spark, tmp_path):  # noqa: F811
    with MessageStore(tmp_path / "s", small_store_config()) as store:  # holds the lock: the source must not need it
        fill_store(store, 300)
        rows = read(spark, path=str(tmp_path / "s"), topic=TOPIC, minPartitions=6).collect()
        same_messages(rows, store_messages(store))
        assert {r["broker_name"] for r in rows} == {"local"}


def test_path_tag_and_sql_filters(spark, tmp_path):  # noqa: F811
    with MessageStore(tmp_path / "s", small_store_config()) as store:
        fill_store(store, 120)
        p = str(tmp_path / "s")
        rows = read(spark, path=p, topic=TOPIC, subExpression="TagA || TagC").collect()
        same_messages(rows, store_messages(store, expr="TagA || TagC"))
        assert {r["tags"] for r in rows} == {"TagA", "TagC"}
        rows = read(spark, path=p, topic=TOPIC, sql="kind = 'even' AND n >= 100").collect()
        assert sorted(int(r["properties"]["n"]) for r in rows) == list(range(100, 120, 2))


def test_path_starting_and_ending_offsets(spark, tmp_path):  # noqa: F811
    with MessageStore(tmp_path / "s", small_store_config()) as store:
        fill_store(store, 80)  # 20 per queue
        p = str(tmp_path / "s")
        start = json.dumps({TOPIC: {"local": {"0": 5, "1": -2, "2": 19}}})
        end = json.dumps({TOPIC: {"local": {"0": 10, "1": 3, "3": -1}}})
        rows = read(spark, path=p, topic=TOPIC, startingOffsets=start, endingOffsets=end).collect()
        got = sorted(rows_by_key(rows))
        want = [(0, o) for o in range(5, 10)] + [(1, o) for o in range(3)] + [(2, 19)] + [(3, o) for o in range(20)]
        assert got == want
        assert read(spark, path=p, topic=TOPIC, startingOffsets="earliest", endingOffsets="latest").count() == 80
        with pytest.raises(Exception, match="do not exist"):
            read(spark, path=p, topic=TOPIC, startingOffsets=json.dumps({TOPIC: {"local": {"9": 0}}})).collect()


def _lose_data(tmp_path):
    store = MessageStore(tmp_path / "s", small_store_config())
    store.put_messages([(message(i), 0) for i in range(10)])
    store.put_messages([(Message(TOPIC, b"x" * 12_000), 0) for _ in range(12)])  # roll CommitLog files
    fill_store(store, 10, start=10, queues=1)
    assert store.delete_commit_log_files_before(2 * 64 * 1024) >= 1
    store.correct_min_offsets()
    return store


def test_fail_on_data_loss_true_raises_naming_the_queue(spark, tmp_path):  # noqa: F811
    with _lose_data(tmp_path) as store:
        mn = store.get_min_offset_in_queue(TOPIC, 0)
        assert mn > 0
        start = json.dumps({TOPIC: {"local": {"0": 0}}})
        with pytest.raises(
            Exception, match=rf"data loss: topic '{TOPIC}' broker 'local' queue 0: offset 0 .*min offset is {mn}"
        ):
            read(spark, path=str(tmp_path / "s"), topic=TOPIC, startingOffsets=start).collect()


def test_fail_on_data_loss_false_skips_to_min(spark, tmp_path):  # noqa: F811
    with _lose_data(tmp_path) as store:
        mn = store.get_min_offset_in_queue(TOPIC, 0)
        mx = store.get_max_offset_in_queue(TOPIC, 0)
        start = json.dumps({TOPIC: {"local": {"0": 0}}})
        rows = read(
            spark, path=str(tmp_path / "s"), topic=TOPIC, startingOffsets=start, failOnDataLoss="false"
        ).collect()
        assert sorted(r["queue_offset"] for r in rows) == list(range(mn, mx))


# --- streaming ----------------------------------------------------------------------------------------------------
def _run_stream(spark, p, ckpt, out, **opts):  # noqa: F811
    reader = spark.readStream.format("rocketmq").option("path", p).option("topic", TOPIC)
    for k, v in opts.items():
        reader = reader.option(k, v)
    q = (
        reader.load()
        .select("queue_id", "queue_offset", "body")
        .writeStream.format("parquet")
        .option("checkpointLocation", ckpt)
        .option("path", out)
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        q.processAllAvailable()
    finally:
        q.stop()


def test_streaming_restart_from_checkpoint_reads_every_message_once(spark, tmp_path):  # noqa: F811
    p, ckpt, out = str(tmp_path / "s"), str(tmp_path / "ckpt"), str(tmp_path / "out")
    with MessageStore(p, small_store_config()) as store:
        fill_store(store, 100)
        _run_stream(spark, p, ckpt, out, startingOffsets="earliest", maxOffsetsPerTrigger="40")
        fill_store(store, 60, start=100)
        store.put_messages([(message(1000 + i), 5) for i in range(7)])  # a new queue between runs: from earliest
        _run_stream(spark, p, ckpt, out, startingOffsets="earliest", maxOffsetsPerTrigger="40")
        rows = spark.read.parquet(out).collect()
        want = store_messages(store)
    keys = [(r["queue_id"], r["queue_offset"]) for r in rows]
    assert len(keys) == len(set(keys)) == 167
    assert set(keys) == set(want)
    assert all(bytes(r["body"]) == want[(r["queue_id"], r["queue_offset"])].body for r in rows)


def test_max_offsets_per_trigger_bounds_each_micro_batch(spark, tmp_path):  # noqa: F811
    p = str(tmp_path / "s")
    with MessageStore(p, small_store_config()) as store:
        fill_store(store, 100)  # backlog 25 per queue
        sizes: list[int] = []
        q = (
            spark.readStream.format("rocketmq")
            .option("path", p)
            .option("topic", TOPIC)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "30")
            .load()
            .writeStream.foreachBatch(lambda df, _id: sizes.append(df.count()))
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .start()
        )
        try:
            q.processAllAvailable()
        finally:
            q.stop()
    sizes = [s for s in sizes if s]
    assert sum(sizes) == 100
    assert max(sizes) <= 30 and sizes[:3] == [30, 30, 30]


def test_trigger_available_now_reads_the_backlog_in_bounded_batches_and_ends(spark, tmp_path):  # noqa: F811
    """Trigger.AvailableNow: the query reads what was in the queues when it started, in micro-batches bounded by
    maxOffsetsPerTrigger, and stops by itself; messages written meanwhile (here from inside the first batch, a new
    queue included) are left for the next run, which reads exactly those from the checkpoint."""
    p, ckpt = str(tmp_path / "s"), str(tmp_path / "ckpt")
    with MessageStore(p, small_store_config()) as store:
        fill_store(store, 100)  # 25 per queue, queues 0..3
        batches: list[list[tuple[int, int]]] = []

        def each(df, batch_id):
            batches.append(
                [(r["queue_id"], r["queue_offset"]) for r in df.select("queue_id", "queue_offset").collect()]
            )
            if len(batches) == 1:  # written after the query's target was taken: not this run's
                fill_store(store, 8, start=100)
                store.put_messages([(message(500 + i), 6) for i in range(3)])

        def run() -> None:
            q = (
                spark.readStream.format("rocketmq")
                .option("path", p)
                .option("topic", TOPIC)
                .option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", "30")
                .load()
                .writeStream.foreachBatch(each)
                .option("checkpointLocation", ckpt)
                .trigger(availableNow=True)
                .start()
            )
            try:
                assert q.awaitTermination(120), "an AvailableNow query did not end by itself"
                assert q.exception() is None
            finally:
                q.stop()

        run()
        first = [b for b in batches if b]
        assert all(len(b) <= 30 for b in first) and len(first) >= 4
        keys = [k for b in first for k in b]
        assert len(keys) == len(set(keys)) == 100
        assert set(keys) == {(i % 4, i // 4) for i in range(100)}
        batches.clear()
        run()
        second = [k for b in batches for k in b]
        assert sorted(second) == sorted(
            [(i % 4, 25 + (i - 100) // 4) for i in range(100, 108)] + [(6, 0), (6, 1), (6, 2)]
        )


# --- namesrv ------------------------------------------------------------------------------------------------------
def _pull_all(ns, topic, expr="*"):
    c = PullConsumer("spark_test_pull", namesrv_addr=ns.address)
    c.start()
    out = {}
    try:
        for mq in sorted(c.fetch_subscribe_message_queues(topic)):
            off = 0
            while True:
                r = c.pull(mq, expr, off, 32)
                if r.pull_status == PullStatus.FOUND:
                    for m in r.msg_found_list:
                        out[(m.queue_id, m.queue_offset)] = m
                if r.pull_status in (PullStatus.NO_NEW_MSG, PullStatus.OFFSET_ILLEGAL):
                    break
                off = r.next_begin_offset
    finally:
        c.shutdown()
    return out


def test_namesrv_batch_equals_pull_consumer_filters_and_consumer_group_commit(spark, tmp_path):  # noqa: F811
    with cluster(tmp_path, enable_property_filter=True) as (ns, brokers):
        producer = Producer("spark_test_prod", namesrv_addr=ns.address)
        producer.start()
        try:
            for i in range(90):
                producer.send(message(i))
        finally:
            producer.shutdown()
        rows = read(spark, namesrv=ns.address, topic=TOPIC, pullBatchSize=16).collect()
        same_messages(rows, _pull_all(ns, TOPIC))
        assert {r["broker_name"] for r in rows} == {"broker-a"}
        rows = read(spark, namesrv=ns.address, topic=TOPIC, subExpression="TagB").collect()
        same_messages(rows, _pull_all(ns, TOPIC, "TagB"))
        rows = read(spark, namesrv=ns.address, topic=TOPIC, sql="n < 10 AND kind = 'odd'").collect()
        assert sorted(int(r["properties"]["n"]) for r in rows) == [1, 3, 5, 7, 9]

        # streaming with a consumerGroup: the broker shows the committed offsets
        q = (
            spark.readStream.format("rocketmq")
            .option("namesrv", ns.address)
            .option("topic", TOPIC)
            .option("startingOffsets", "earliest")
            .option("consumerGroup", "spark_cg")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .start()
        )
        try:
            q.processAllAvailable()
            before = {mq: 0 for mq in range(4)}
            with BlockingMQClientAPI(ns.address) as rpc:
                before = {qid: rpc.get_max_offset(brokers[0].address, TOPIC, qid) for qid in range(4)}
            # Spark commits a micro-batch's end to the source when it plans the next one
            p2 = Producer("spark_test_prod", namesrv_addr=ns.address)
            p2.start()
            try:
                p2.send(message(1000))
            finally:
                p2.shutdown()
            q.processAllAvailable()
        finally:
            q.stop()
        addr = brokers[0].address
        mqs = {MessageQueue(TOPIC, "broker-a", q) for q in range(4)}
        with BlockingMQClientAPI(ns.address) as rpc:

            def committed(queue_id: int) -> int | None:
                q = QueryConsumerOffsetRequestHeader(consumerGroup="spark_cg", topic=TOPIC, queueId=queue_id)
                try:
                    return rpc.query_consumer_offset(addr, q)
                except MQBrokerException as e:  # QUERY_NOT_FOUND: nothing committed yet
                    if e.response_code != ResponseCode.QUERY_NOT_FOUND:
                        raise
                    return None

            deadline = time.monotonic() + 10
            while True:
                got = {mq.queue_id: committed(mq.queue_id) for mq in mqs}
                maxes = before
                if got == maxes or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
        assert got == maxes and sum(maxes.values()) == 90


def test_namesrv_data_loss_both_ways(spark, tmp_path):  # noqa: F811
    """The namesrv source against a broker whose oldest CommitLog files were deleted (min offset corrected): a
    starting offset below the queue's min fails naming the queue and both offsets, or with failOnDataLoss=false
    reads from the min, every remaining message once."""
    from support.admin_helpers import create_topic

    with cluster(tmp_path, mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=80) as (ns, brokers):
        b = brokers[0]
        create_topic(b.address, "LossT", queues=1)
        producer = Producer("spark_loss_prod", namesrv_addr=ns.address)
        producer.start()
        try:
            for i in range(40):
                assert producer.send(Message("LossT", b"%03d" % i + b"x" * 200)).send_status.name == "SEND_OK"
        finally:
            producer.shutdown()
        assert b.message_store.delete_commit_log_files_before(8192) == 2
        b.message_store.correct_min_offsets()
        mn, mx = (
            b.message_store.get_min_offset_in_queue("LossT", 0),
            b.message_store.get_max_offset_in_queue("LossT", 0),
        )
        assert 0 < mn < mx == 40
        start = json.dumps({"LossT": {"broker-a": {"0": 0}}})
        with pytest.raises(
            Exception,
            match=rf"data loss: topic 'LossT' broker 'broker-a' queue 0: offset 0 .*min "
            rf"offset is {mn}",
        ):
            read(spark, namesrv=ns.address, topic="LossT", startingOffsets=start).collect()
        rows = read(spark, namesrv=ns.address, topic="LossT", startingOffsets=start, failOnDataLoss="false").collect()
        assert sorted(r["queue_offset"] for r in rows) == list(range(mn, mx))
        assert sorted(bytes(r["body"])[:3] for r in rows) == [b"%03d" % i for i in range(mn, mx)]


def test_bad_options_are_named(spark, tmp_path):  # noqa: F811
    with pytest.raises(Exception, match="exactly one of the options namesrv"):
        read(spark, topic=TOPIC).collect()
    with pytest.raises(Exception, match="option topic is required"):
        read(spark, path=str(tmp_path)).collect()
    with pytest.raises(Exception, match="option maxOffsetsPerTrigger is for streaming"):
        read(spark, path=str(tmp_path), topic=TOPIC, maxOffsetsPerTrigger="5").collect()
    with pytest.raises(Exception, match="option startingOffsets must be"):
        read(spark, path=str(tmp_path), topic=TOPIC, startingOffsets="{bad").collect()


def test_namesrv_source_reads_a_store_written_by_message_store_then_served_by_a_broker(spark, tmp_path):  # noqa: F811
    """A store written through MessageStore (no config/topics.json) served by a broker started on it: the broker
    adopts its topics and registers them, so the namesrv source reads every message (stores that move)."""
    from rmq_core.broker import Broker, BrokerConfig
    from rmq_core.namesrv import NameServer
    from rmq_core.store import StoreConfig

    from support.admin_helpers import wait_for_route

    root = tmp_path / "moved"
    with MessageStore(
        root, StoreConfig(mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=20_000)
    ) as store:
        for i in range(9):
            assert store.put_message(Message("Moved", f"moved-{i}".encode(), tags="T"), queue_id=i % 3).ok
    with (
        NameServer(listen_port=0) as ns,
        Broker(BrokerConfig(listen_port=0, namesrv_addr=ns.address, store_path_root_dir=str(root), broker_name="b0")),
    ):
        wait_for_route(ns.address, "Moved")
        rows = read(spark, namesrv=ns.address, topic="Moved").collect()
    assert sorted(bytes(r.body).decode() for r in rows) == [f"moved-{i}" for i in range(9)]
    assert {(r.broker_name, r.queue_id) for r in rows} == {("b0", q) for q in range(3)}
