"""The ``rocketmq`` sink: batch write then read back equal (path and namesrv), rows without body refused,
a topic needed."""

from __future__ import annotations

import pytest

from rmq_core.store import MessageStore

from support.client_helpers_core import cluster
from support.spark_helpers import read, spark, stored_count  # noqa: F401 - fixture

pytestmark = pytest.mark.slow

ROWS = [(f"body-{i}", f"TagS{i % 2}", f"k{i}", {"n": str(i)}) for i in range(50)]


def _df(spark):  # noqa: F811
    return spark.createDataFrame(ROWS, "body string, tags string, keys string, properties map<string,string>")


def _check(rows):
    got = sorted((bytes(r["body"]).decode(), r["tags"], r["keys"], r["properties"]["n"]) for r in rows)
    assert got == sorted((b, t, k, p["n"]) for b, t, k, p in ROWS)


def test_sink_round_trip_path(spark, tmp_path):  # noqa: F811
    p = str(tmp_path / "s")
    _df(spark).repartition(3).write.format("rocketmq").option("path", p).option("topic", "SinkT").mode("append").save()
    _check(read(spark, path=p, topic="SinkT").collect())
    with MessageStore(p) as store:  # the tasks closed the store: it opens
        assert sum(store.get_max_offset_in_queue("SinkT", q) for q in range(4)) == 50


def test_sink_round_trip_namesrv(spark, tmp_path):  # noqa: F811
    with cluster(tmp_path) as (ns, _brokers):
        _df(spark).write.format("rocketmq").option("namesrv", ns.address).option("topic", "SinkN").mode("append").save()
        _check(read(spark, namesrv=ns.address, topic="SinkN").collect())


def test_sink_needs_a_topic_and_a_body(spark, tmp_path):  # noqa: F811
    with pytest.raises(Exception, match="needs a topic"):
        _df(spark).write.format("rocketmq").option("path", str(tmp_path / "s")).mode("append").save()
    with pytest.raises(Exception, match="needs a 'body' column"):
        spark.createDataFrame([("x",)], "b string").write.format("rocketmq").option("path", str(tmp_path / "s")).option(
            "topic", "T"
        ).mode("append").save()


def test_streaming_sink_copies_a_topic(spark, tmp_path):  # noqa: F811
    """writeStream.format("rocketmq"): a streaming query reads topic SrcS (namesrv source) and writes every row to
    topic DstS through the streaming writer; reading DstS back gives the same bodies, tags, keys and properties."""
    with cluster(tmp_path) as (ns, _brokers):
        _df(spark).write.format("rocketmq").option("namesrv", ns.address).option("topic", "SrcS").mode("append").save()
        stream = (
            spark.readStream.format("rocketmq")
            .option("namesrv", ns.address)
            .option("topic", "SrcS")
            .option("startingOffsets", "earliest")
            .load()
            .select("body", "tags", "keys", "properties")
        )
        q = (
            stream.writeStream.format("rocketmq")
            .option("namesrv", ns.address)
            .option("topic", "DstS")
            .option("checkpointLocation", str(tmp_path / "chk"))
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        try:
            import time

            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if q.exception() is not None:
                    raise q.exception()  # type: ignore[misc]
                try:
                    rows = read(spark, namesrv=ns.address, topic="DstS").collect()
                except Exception:
                    rows = []
                if len(rows) >= len(ROWS):
                    break
                time.sleep(0.5)
        finally:
            q.stop()
        _check(rows)


# --- option("transactional", "true"): half messages in the tasks, ended by the driver --------------------------
def test_transactional_sink_commits_once_in_the_driver(spark, tmp_path):  # noqa: F811
    """Each task sends its rows as half messages; the job's commit ends them with COMMIT: the topic holds every row
    exactly once, each half message has its op message."""
    with cluster(tmp_path) as (ns, brokers):
        (
            _df(spark)
            .repartition(3)
            .write.format("rocketmq")
            .option("namesrv", ns.address)
            .option("topic", "SinkTx")
            .option("transactional", "true")
            .mode("append")
            .save()
        )
        b = brokers[0]
        assert stored_count(b, "SinkTx") == 50
        assert stored_count(b, "RMQ_SYS_TRANS_HALF_TOPIC", 1) == 50
        assert stored_count(b, "RMQ_SYS_TRANS_OP_HALF_TOPIC", 1) == 50
        _check(read(spark, namesrv=ns.address, topic="SinkTx").collect())


def test_transactional_sink_abort_rolls_back(spark, tmp_path):  # noqa: F811
    """A task fails on a row with a null body after sending half messages: the job aborts, the driver rolls back the
    successful tasks' half messages, the failed task's are never committed: the topic stays empty."""
    rows = [(f"body-{i}",) for i in range(20)] + [(None,)]
    df = spark.createDataFrame(rows, "body string").coalesce(1)
    good = spark.createDataFrame([(f"ok-{i}",) for i in range(10)], "body string")
    with cluster(tmp_path) as (ns, brokers):
        with pytest.raises(Exception, match="null body"):
            (
                good.union(df)
                .write.format("rocketmq")
                .option("namesrv", ns.address)
                .option("topic", "SinkTxAbort")
                .option("transactional", "true")
                .mode("append")
                .save()
            )
        b = brokers[0]
        assert stored_count(b, "SinkTxAbort") == 0
        halves = stored_count(b, "RMQ_SYS_TRANS_HALF_TOPIC", 1)
        ops = stored_count(b, "RMQ_SYS_TRANS_OP_HALF_TOPIC", 1)
        assert halves >= 20 and 0 < ops < halves  # the successful task's halves rolled back, the failed one's open


def test_transactional_sink_needs_namesrv(spark, tmp_path):  # noqa: F811
    with pytest.raises(Exception, match="transactional needs namesrv"):
        _df(spark).write.format("rocketmq").option("path", str(tmp_path / "s")).option("topic", "T").option(
            "transactional", "true"
        ).mode("append").save()
