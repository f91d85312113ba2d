"""Helpers for the Spark data-source tests: one module-scoped ``local[2]`` SparkSession (UI off, 2 shuffle
partitions, the workers on this interpreter so they import rmq_core), stores filled with a realistic stream, and
reading every message of a store / a cluster the way a pull consumer sees it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rmq_core.message import Message
from rmq_core.store import MessageStore, StoreConfig

TOPIC = "SparkT"
TAGS = ("TagA", "TagB", "TagC")


def make_spark(master: str = "local[2]") -> Any:
    """``master``: ``local[2,2]`` lets a failed task be retried once (local mode's default is no retry)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import rmq_core.spark

    spark = (
        SparkSession.builder.master(master)
        .appName("rmq-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    rmq_core.spark.register(spark)
    return spark


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    s = make_spark()
    yield s
    s.stop()


def message(i: int, topic: str = TOPIC) -> Message:
    return Message(
        topic,
        f"body-{i}-".encode() + bytes([i % 256]) * (i % 7),
        tags=TAGS[i % 3],
        keys=f"key-{i}",
        properties={"n": str(i), "kind": "even" if i % 2 == 0 else "odd"},
    )


def small_store_config(**kw: Any) -> StoreConfig:
    base = dict(mapped_file_size_commit_log=64 * 1024, mapped_file_size_consume_queue=20 * 100)
    base.update(kw)
    return StoreConfig(**base)  # type: ignore[arg-type]


def fill_store(store: MessageStore, n: int, start: int = 0, queues: int = 4, topic: str = TOPIC) -> None:
    store.put_messages([(message(i, topic), i % queues) for i in range(start, start + n)])


def store_messages(store: MessageStore, topic: str = TOPIC, expr: Any = None) -> dict[tuple[int, int], Any]:
    """Every message of the topic, pulled through ``get_message`` from each queue's min: {(qid, offset): msg}."""
    out = {}
    for t, q in store.topics():
        if t != topic:
            continue
        off = store.get_min_offset_in_queue(t, q)
        mx = store.get_max_offset_in_queue(t, q)
        while off < mx:
            r = store.get_message("g", t, q, off, 64, expr)
            for m in r.decode():
                out[(q, m.queue_offset)] = m
            off = r.next_begin_offset
    return out


def rows_by_key(rows: list[Any]) -> dict[tuple[int, int], Any]:
    out = {}
    for r in rows:
        k = (r["queue_id"], r["queue_offset"])
        assert k not in out, f"duplicate row {k}"
        out[k] = r
    return out


def same_messages(rows: list[Any], msgs: dict[tuple[int, int], Any]) -> None:
    got = rows_by_key(rows)
    assert sorted(got) == sorted(msgs)
    for k, m in msgs.items():
        r = got[k]
        assert bytes(r["body"]) == m.body
        # the pull consumer adds MIN_OFFSET/MAX_OFFSET to what it hands out (PullAPIWrapper.processPullResult)
        stored = {k: v for k, v in m.properties.items() if k not in ("MIN_OFFSET", "MAX_OFFSET")}
        assert dict(r["properties"]) == stored
        assert r["tags"] == m.tags and r["keys"] == m.keys
        assert r["msg_id"] == m.msg_id and r["commitlog_offset"] == m.commitlog_offset


def read(spark: Any, **options: Any) -> Any:
    reader = spark.read.format("rocketmq")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def store_path(tmp_path: Path, name: str = "store") -> str:
    return str(tmp_path / name)


def stored_count(broker: Any, topic: str, queues: int = 8) -> int:
    """Messages a broker's store holds for ``topic`` over its first ``queues`` queues."""
    return sum(broker.message_store.get_max_offset_in_queue(topic, q) for q in range(queues))
