"""Spark benchmark of the ``rocketmq`` data source: rows per second read from a store
directory (``path`` source) beside Spark reading the same rows from a Parquet file, in one run on ``local[2]``.

    .venv/bin/python benches/bench_spark.py [--messages 1000000] [--size 100] [--queues 8] [--repeat 3]
                                            [--dir DIR] [--keep] [--store-only] [--json out.json]

What it does:
  store     writes --messages messages with --size byte bodies into a fresh store directory with
            MessageStore.put_messages in batches of 1,000, round robin over --queues queues (one topic, one tag)
  rocketmq  spark.read.format("rocketmq").option("path", dir).option("topic", t).load() then
              count          .count()
              scan           .agg(sum(length(body)))  (every body decoded and measured)
              parquet write  .write.parquet(...)      (the Parquet file the next two read)
  floor     the same count() over a Python data source with the same schema and partitions that does no reading
            (it yields one pre-decoded batch again and again): Spark's own cost of carrying these rows, the ceiling
            for any Python source with this schema
  parquet   spark.read.parquet(...) then count (answered from the Parquet footers' row counts) and the same scan
Each measurement runs once untimed (warm-up: the JVM, the Python workers, the page cache) and then --repeat times;
the table shows the median and rows/s, and the ratio rocketmq/parquet for count and scan.
Targets: rocketmq count ≥ 1,000,000 rows/s, and ≥ 25% of the Parquet read.
The machine is shared and noisy: one run's figures, not a promise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from rmq_core.message import Message
from rmq_core.store import MessageStore, StoreConfig

TOPIC = "BenchSpark"
BATCH = 1000
TARGET_ROWS_PER_S = 1_000_000
TARGET_PARQUET_RATIO = 0.25


def progress(label: str, done: int, total: int, started: float, final: bool = False) -> None:
    rate = done / max(time.perf_counter() - started, 1e-9)
    end = "\n" if final or not sys.stderr.isatty() else "\r"
    print(
        f"  {label}: {done:,}/{total:,} ({100 * done // max(total, 1)}%, {rate:,.0f}/s)",
        end=end,
        file=sys.stderr,
        flush=True,
    )


def write_store(root: str, messages: int, size: int, queues: int) -> dict[str, float]:
    """``messages`` × ``size`` B into ``root`` (256 MiB CommitLog files); returns the write figures. Bodies are
    random bytes, a different one per message: Parquet gets no help from dictionary encoding or compression."""
    cfg = StoreConfig(mapped_file_size_commit_log=256 << 20)
    started = time.perf_counter()
    last_report = started
    with MessageStore(root, cfg) as store:
        written = 0
        while written < messages:
            n = min(BATCH, messages - written)
            block = os.urandom(n * size)
            results = store.put_messages(
                [
                    (Message(TOPIC, block[i * size : (i + 1) * size], tags="TagA"), (written + i) % queues)
                    for i in range(n)
                ]
            )
            if not results.all_ok:
                raise SystemExit(f"put_messages failed after {written:,} messages: {set(results.statuses)}")
            written += n
            now = time.perf_counter()
            if now - last_report > 2:
                last_report = now
                progress("write store", written, messages, started)
        store.flush()
        commit_log_bytes = store.max_physical_offset
    seconds = time.perf_counter() - started
    progress("write store", messages, messages, started, final=True)
    return {"seconds": seconds, "msgs_per_s": messages / seconds, "commit_log_bytes": commit_log_bytes}


def timed(label: str, fn: Callable[[], Any], rows: int, repeat: int) -> dict[str, Any]:
    """One untimed warm-up, then ``repeat`` timed runs; the median and rows/s. ``fn`` returns a value checked to be
    the same on every run."""
    print(f"  {label}: warm-up", file=sys.stderr, flush=True)
    want = fn()
    times = []
    for i in range(repeat):
        t0 = time.perf_counter()
        got = fn()
        times.append(time.perf_counter() - t0)
        if got != want:
            raise SystemExit(f"{label}: run {i + 1} returned {got!r}, the warm-up {want!r}")
        print(f"  {label}: run {i + 1}/{repeat} {times[-1]:.2f} s", file=sys.stderr, flush=True)
    med = statistics.median(times)
    return {"label": label, "median_s": med, "min_s": min(times), "rows_per_s": rows / med, "value": want}


def spark_session(master: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from rmq_core.spark import register

    spark = (
        SparkSession.builder.master(master)
        .appName("rmq-core bench_spark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def register_floor_source(spark: Any, root: str, messages: int, partitions: int) -> None:
    """``rocketmq_floor``: a Python data source with the ``rocketmq`` schema whose reader does no reading — each of
    ``partitions`` partitions decodes one 8,192-row batch from the store once, then yields it again until it has
    produced its share of ``messages`` rows. Its count() is what Spark itself costs to carry these rows from Python
    workers to the JVM (the Python Data Source API has no column pruning, so every column crosses even for a
    count): the ceiling any Python source with this schema can reach here."""
    from pyspark import cloudpickle
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from rmq_core.spark.arrow_rows import SPARK_SCHEMA_DDL

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this script

    class FloorPartition(InputPartition):
        def __init__(self, rows: int) -> None:
            self.rows = rows

    class FloorReader(DataSourceReader):
        def partitions(self) -> list[FloorPartition]:
            share, extra = divmod(messages, partitions)
            return [FloorPartition(share + (1 if i < extra else 0)) for i in range(partitions)]

        def read(self, partition: Any) -> Any:
            from rmq_core.spark.arrow_rows import records_to_record_batch
            from rmq_core.store_reader import StoreReader

            with StoreReader(root) as st:
                buf, _, _ = st.read_records(TOPIC, 0, 0, 8192)
            batch = records_to_record_batch(buf, "local", None)
            left = partition.rows
            while left > 0:
                out = batch if left >= batch.num_rows else batch.slice(0, left)
                left -= out.num_rows
                yield out

    class FloorSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "rocketmq_floor"

        def schema(self) -> str:
            return SPARK_SCHEMA_DDL

        def reader(self, schema: Any) -> DataSourceReader:
            return FloorReader()

    spark.dataSource.register(FloorSource)


def run_spark(root: str, pq_dir: str, messages: int, size: int, repeat: int, master: str) -> dict[str, Any]:
    from pyspark.sql import functions as F

    spark = spark_session(master)
    try:

        def rmq() -> Any:
            return spark.read.format("rocketmq").option("path", root).option("topic", TOPIC).load()

        def scan(df: Any) -> int:
            return int(df.agg(F.sum(F.length("body")).alias("b")).collect()[0]["b"] or 0)

        out: dict[str, Any] = {}
        out["rocketmq_count"] = timed("rocketmq count", lambda: rmq().count(), messages, repeat)
        register_floor_source(spark, root, messages, rmq().rdd.getNumPartitions())
        out["floor_count"] = timed(
            "floor count (no reading)", lambda: spark.read.format("rocketmq_floor").load().count(), messages, repeat
        )
        out["rocketmq_scan"] = timed("rocketmq scan", lambda: scan(rmq()), messages, repeat)

        def write_parquet() -> int:
            rmq().write.mode("overwrite").parquet(pq_dir)
            return 0

        out["rocketmq_to_parquet"] = timed("rocketmq -> parquet write", write_parquet, messages, repeat)
        out["parquet_count"] = timed("parquet count", lambda: spark.read.parquet(pq_dir).count(), messages, repeat)
        out["parquet_scan"] = timed("parquet scan", lambda: scan(spark.read.parquet(pq_dir)), messages, repeat)
        out["partitions"] = rmq().rdd.getNumPartitions()
        out["parquet_bytes"] = sum(
            os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(pq_dir) for f in fs if f.endswith(".parquet")
        )
    finally:
        spark.stop()
    problems = []
    for k in ("rocketmq_count", "floor_count", "parquet_count"):
        if out[k]["value"] != messages:
            problems.append(f"{k} returned {out[k]['value']:,} rows, expected {messages:,}")
    for k in ("rocketmq_scan", "parquet_scan"):
        if out[k]["value"] != messages * size:
            problems.append(f"{k} summed {out[k]['value']:,} body bytes, expected {messages * size:,}")
    out["problems"] = problems
    return out


def print_table(store: dict[str, float], sp: dict[str, Any] | None, messages: int, size: int, master: str) -> None:
    print(f"bench_spark: {messages:,} messages × {size} B, Spark {master}")
    print(
        f"  store write (MessageStore.put_messages, batches of {BATCH}): {store['seconds']:.2f} s = "
        f"{store['msgs_per_s']:,.0f} msg/s, {store['commit_log_bytes']:,} CommitLog bytes"
    )
    if sp is None:
        return
    print(f"  rocketmq source: {sp['partitions']} Spark partitions; Parquet: {sp['parquet_bytes']:,} bytes")
    print(f"  {'measurement':28} {'median s':>9} {'rows/s':>14}")
    for k in ("rocketmq_count", "floor_count", "rocketmq_scan", "rocketmq_to_parquet", "parquet_count", "parquet_scan"):
        r = sp[k]
        print(f"  {r['label']:28} {r['median_s']:9.2f} {r['rows_per_s']:14,.0f}")
    c = sp["rocketmq_count"]["rows_per_s"] / sp["parquet_count"]["rows_per_s"]
    s = sp["rocketmq_scan"]["rows_per_s"] / sp["parquet_scan"]["rows_per_s"]
    print(f"  ratio rocketmq/parquet: count {c:.1%} (Parquet answers count() from its footers), scan {s:.1%}")
    rc = sp["rocketmq_count"]["rows_per_s"]
    fl = sp["floor_count"]["rows_per_s"]
    print(
        f"  floor (Spark's own cost of these rows, no reading): {fl:,.0f} rows/s; rocketmq count is {rc / fl:.0%} of it"
    )
    sp["ratio_to_floor"] = rc / fl
    print(
        f"  targets: rocketmq count ≥ {TARGET_ROWS_PER_S:,} rows/s: {'met' if rc >= TARGET_ROWS_PER_S else 'NOT met'}"
        f" ({rc:,.0f}); ≥ {TARGET_PARQUET_RATIO:.0%} of the Parquet read: "
        f"count {'met' if c >= TARGET_PARQUET_RATIO else 'NOT met'}, scan {'met' if s >= TARGET_PARQUET_RATIO else 'NOT met'}"
    )
    sp["ratio_count"], sp["ratio_scan"] = c, s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100, help="body bytes")
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one, removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--store-only", action="store_true", help="write the store and stop (no Spark)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--json", default=None, help="write the figures as JSON here")
    args = ap.parse_args(argv)
    if args.messages <= 0 or args.size <= 0 or args.queues <= 0 or args.repeat <= 0:
        ap.error("--messages, --size, --queues and --repeat must be positive")
    work = args.dir or tempfile.mkdtemp(prefix="rmq-bench-spark-")
    root, pq_dir = os.path.join(work, "store"), os.path.join(work, "parquet")
    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(work, exist_ok=True)
    try:
        print(
            f"==> writing the store ({args.messages:,} × {args.size} B, {args.queues} queues) in {root}",
            file=sys.stderr,
            flush=True,
        )
        store = write_store(root, args.messages, args.size, args.queues)
        sp = None
        if not args.store_only:
            print("==> Spark (rocketmq path source, then Parquet)", file=sys.stderr, flush=True)
            sp = run_spark(root, pq_dir, args.messages, args.size, args.repeat, args.master)
        print_table(store, sp, args.messages, args.size, args.master)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(
                    {"messages": args.messages, "size": args.size, "store": store, "spark": sp},
                    f,
                    indent=2,
                    default=str,
                )
        if sp and sp["problems"]:
            print("error: " + "; ".join(sp["problems"]), file=sys.stderr)
            return 1
        return 0
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(work, ignore_errors=True)
        elif not args.keep:
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(pq_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
