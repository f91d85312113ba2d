"""The transactional sink through Spark's engine (``local[2,2]``: a failed task is retried once):
- a task that fails after sending half its rows, then succeeds on its retry: the topic holds every row exactly once
  (the failed attempt's half messages are never committed);
- a streaming query copying a topic, stopped and restarted from its checkpoint: every row exactly once, each committed
  message tagged with the micro-batch that committed it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from rmq_core.spark.sink_transaction_journal import PROPERTY_SINK_TXN, parse_sink_transaction_tag

from support.client_helpers_core import cluster
from support.spark_helpers import make_spark, read, stored_count

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark_retrying() -> Iterator[Any]:
    s = make_spark("local[2,2]")
    yield s
    s.stop()


def test_a_task_failing_after_half_its_rows_then_retried_writes_each_row_once(
    spark_retrying: Any, tmp_path: Any
) -> None:
    def fail_first_attempt_at_row_20(i: int) -> tuple[str]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if i == 20 and ctx is not None and ctx.attemptNumber() == 0:
            raise RuntimeError("the first attempt of this task dies after sending 20 rows")
        return (f"row-{i}",)

    # rows reach the sink's task in Arrow batches of 10: the first attempt's sink sends rows 0-19, then fails
    spark_retrying.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "10")
    rdd = spark_retrying.sparkContext.parallelize(range(40), 1).map(fail_first_attempt_at_row_20)
    df = spark_retrying.createDataFrame(rdd, "body string")
    fast_check = {"transaction_check_interval": 300, "transaction_timeout": 200}
    with cluster(tmp_path, **fast_check) as (ns, (broker,)):
        (
            df.write.format("rocketmq")
            .option("namesrv", ns.address)
            .option("topic", "SinkRetry")
            .option("transactional", "true")
            .option("transactionJournal", str(tmp_path / "journal"))
            .mode("append")
            .save()
        )
        halves = stored_count(broker, "RMQ_SYS_TRANS_HALF_TOPIC", 1)
        assert halves >= 60, f"{halves} half messages: the first attempt was to send 20, the retry 40"
        time.sleep(2.0)  # several check rounds: the failed attempt's halves are checked, never committed
        rows = read(spark_retrying, namesrv=ns.address, topic="SinkRetry").collect()
        assert sorted(bytes(r["body"]).decode() for r in rows) == sorted(f"row-{i}" for i in range(40))


def test_a_transactional_streaming_copy_restarted_from_its_checkpoint_writes_each_row_once(
    spark_retrying: Any, tmp_path: Any
) -> None:
    from rmq_core.client import Producer
    from rmq_core.message import Message

    checkpoint = str(tmp_path / "chk")
    with cluster(tmp_path) as (ns, (broker,)):
        producer = Producer("spark_eo_src", namesrv_addr=ns.address)
        producer.start()
        try:
            for i in range(30):
                producer.send(Message("SrcEo", f"s-{i}".encode()))

            def run_until(n: int) -> None:
                stream = (
                    spark_retrying.readStream.format("rocketmq")
                    .option("namesrv", ns.address)
                    .option("topic", "SrcEo")
                    .option("startingOffsets", "earliest")
                    .load()
                    .select("body")
                )
                q = (
                    stream.writeStream.format("rocketmq")
                    .option("namesrv", ns.address)
                    .option("topic", "DstEo")
                    .option("transactional", "true")
                    .option("checkpointLocation", checkpoint)
                    .trigger(processingTime="200 milliseconds")
                    .start()
                )
                try:
                    deadline = time.monotonic() + 90
                    while stored_count(broker, "DstEo") < n and time.monotonic() < deadline:
                        if q.exception() is not None:
                            raise q.exception()  # type: ignore[misc]
                        time.sleep(0.2)
                    time.sleep(1.0)  # a few more (empty) micro-batches: nothing more may come
                finally:
                    q.stop()

            run_until(30)
            for i in range(30, 45):
                producer.send(Message("SrcEo", f"s-{i}".encode()))
            run_until(45)  # restarted from the checkpoint
        finally:
            producer.shutdown()
        rows = read(spark_retrying, namesrv=ns.address, topic="DstEo").select("body", "properties").collect()
        assert sorted(bytes(r["body"]).decode() for r in rows) == sorted(f"s-{i}" for i in range(45))
        tags = [parse_sink_transaction_tag(r["properties"][PROPERTY_SINK_TXN]) for r in rows]
        assert all(t is not None and t[1].startswith("batch-") for t in tags), tags[:3]
        assert len({t[0] for t in tags if t is not None}) == 1  # one sink id across the restart
