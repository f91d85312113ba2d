"""Executor side of the ``rocketmq`` source: read one ``RocketMQInputPartition`` (one slice of one queue) into
Arrow record batches.

``path``: the store directory through ``ReadOnlyStore`` (no lock — a MessageStore cannot be opened twice; see
store_reader.py), ConsumeQueue tag-code filter like the store's, records gathered from the CommitLog.
``namesrv``: PULL_MESSAGE to the queue's master (subscription in the request, no suspend, maxMsgNums =
pullBatchSize), the tag filter applied on the broker (SQL92 needs the broker's enable_property_filter).
Either way the exact tag string is re-checked (as RocketMQ's client does) and SQL92 is evaluated on the records'
properties for ``path``.

Invariants:
1. Rows are exactly the matching messages with queue offsets in ``[start, end)``, each once, in queue order.
2. Offsets below the queue's min when the task runs: failOnDataLoss → ``DataLossError`` naming the queue and
   offsets; else a warning and the read starts at the min. A partition whose start is -2 (a queue that appeared
   after the previous micro-batch) starts at the min without a data-loss complaint.
3. Every file handle / connection opened by a read is closed when the iterator ends or is closed.

Thread-safety: ``read_partition`` keeps no state between calls; each call opens its own reader.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import InputPartition

from rmq_core.filter.message_selector import ExpressionType
from rmq_core.filter.subscription_data import build_subscription_data
from rmq_core.remoting.codes import ResponseCode
from rmq_core.spark.options import EARLIEST, RocketMQOptions
from rmq_core.spark.planner import check_data_loss

log = logging.getLogger(__name__)

PATH_CHUNK_UNITS = 8192  # ConsumeQueue units per store read on the path source


@dataclass
class RocketMQInputPartition(InputPartition):
    """One slice ``[start, end)`` of one message queue; ``broker_addr`` for the namesrv source."""

    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int
    broker_addr: str | None = None

    def __post_init__(self) -> None:
        self.value = None  # InputPartition's field; the dataclass fields carry everything


# --- rows --------------------------------------------------------------------------------------------------------
try:  # arrow_rows (Rust decode_columns) is owned by another engineer
    from rmq_core.spark.arrow_rows import SCHEMA as _SCHEMA  # noqa: F401
    from rmq_core.spark.arrow_rows import records_to_record_batch as _to_batch

    _HAVE_ARROW_ROWS = True
except ImportError:  # pragma: no cover - TEMPORARY until arrow_rows lands
    _HAVE_ARROW_ROWS = False

# ---- TEMPORARY FALLBACK (remove once rmq_core.spark.arrow_rows lands): one Python object per message ----------
FALLBACK_DDL = ("topic string, broker_name string, queue_id int, queue_offset long, commitlog_offset long, "
                "msg_id string, tags string, keys string, body binary, properties map<string,string>, "
                "born_timestamp timestamp, store_timestamp timestamp, reconsume_times int")
FALLBACK_ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()), ("broker_name", pa.string()), ("queue_id", pa.int32()), ("queue_offset", pa.int64()),
    ("commitlog_offset", pa.int64()), ("msg_id", pa.string()), ("tags", pa.string()), ("keys", pa.string()),
    ("body", pa.binary()), ("properties", pa.map_(pa.string(), pa.string())),
    ("born_timestamp", pa.timestamp("us", tz="UTC")), ("store_timestamp", pa.timestamp("us", tz="UTC")),
    ("reconsume_times", pa.int32()),
])


def _fallback_to_batch(buf: bytes, broker_name: str, tag_filter: set[str] | None = None,
                       min_queue_offset: int | None = None) -> pa.RecordBatch:
    from rmq_core.message import decode_messages

    msgs = decode_messages(buf)
    if tag_filter is not None:
        msgs = [m for m in msgs if m.tags is not None and m.tags in tag_filter]
    if min_queue_offset is not None:
        msgs = [m for m in msgs if m.queue_offset >= min_queue_offset]
    cols = {
        "topic": [m.topic for m in msgs], "broker_name": [broker_name] * len(msgs),
        "queue_id": [m.queue_id for m in msgs], "queue_offset": [m.queue_offset for m in msgs],
        "commitlog_offset": [m.commitlog_offset for m in msgs], "msg_id": [m.msg_id for m in msgs],
        "tags": [m.tags for m in msgs], "keys": [m.keys for m in msgs], "body": [m.body for m in msgs],
        "properties": [list(m.properties.items()) for m in msgs],
        "born_timestamp": [m.born_timestamp * 1000 for m in msgs],
        "store_timestamp": [m.store_timestamp * 1000 for m in msgs],
        "reconsume_times": [m.reconsume_times for m in msgs],
    }
    return pa.RecordBatch.from_pydict(cols, schema=FALLBACK_ARROW_SCHEMA)


if not _HAVE_ARROW_ROWS:  # pragma: no cover
    _to_batch = _fallback_to_batch  # type: ignore[assignment]
# ---- END TEMPORARY FALLBACK -------------------------------------------------------------------------------------


def schema_ddl() -> str:
    if _HAVE_ARROW_ROWS:
        from rmq_core.spark import arrow_rows

        return getattr(arrow_rows, "SCHEMA_DDL", None) or _ddl_of(arrow_rows.SCHEMA)
    return FALLBACK_DDL


def _ddl_of(schema: object) -> str:
    if isinstance(schema, str):
        return schema
    simple = getattr(schema, "simpleString", None)
    if simple is not None:  # a Spark StructType
        return schema.simpleString()[len("struct<"):-1].replace(":", " ")  # type: ignore[attr-defined]
    return FALLBACK_DDL


# --- filters -----------------------------------------------------------------------------------------------------
@dataclass
class _Filter:
    expression: str | None
    expression_type: str
    tag_codes: list[int] | None  # store-side ConsumeQueue filter (path)
    tags: set[str] | None  # exact-tag re-check
    sql: object | None  # Sql92Filter (path evaluates it; namesrv: the broker does)


def _make_filter(topic: str, opts: RocketMQOptions) -> _Filter:
    expr = opts.filter_expression
    if expr is None:
        return _Filter(None, ExpressionType.TAG, None, None, None)
    if opts.is_sql:
        from rmq_core.filter.sql92 import Sql92Filter

        return _Filter(expr, ExpressionType.SQL92, None, None, Sql92Filter(expr))
    sub = build_subscription_data(topic, expr)
    if sub.selects_all:
        return _Filter(None, ExpressionType.TAG, None, None, None)
    return _Filter(expr, ExpressionType.TAG, sorted(sub.code_set), set(sub.tags_set), None)


def _apply_sql(rb: pa.RecordBatch, sql: object) -> pa.RecordBatch:
    props = rb.column(rb.schema.get_field_index("properties")).to_pylist()
    mask = pa.array([bool(sql(dict(p) if p is not None else {})) for p in props], pa.bool_())  # type: ignore[operator]
    return rb.filter(mask)


def _below(rb: pa.RecordBatch, end: int) -> pa.RecordBatch:
    qo = rb.column(rb.schema.get_field_index("queue_offset"))
    return rb.filter(pc.less(qo, pa.scalar(end, pa.int64())))


# --- read ----------------------------------------------------------------------------------------------------------
def read_partition(part: RocketMQInputPartition, opts: RocketMQOptions) -> Iterator[pa.RecordBatch]:
    if part.end <= part.start and part.start != EARLIEST:
        return iter(())
    if opts.path is not None:
        return _read_path(part, opts)
    return _read_namesrv(part, opts)


def _read_path(part: RocketMQInputPartition, opts: RocketMQOptions) -> Iterator[pa.RecordBatch]:
    from rmq_core.spark.store_reader import ReadOnlyStore

    key = (part.topic, part.broker_name, part.queue_id)
    flt = _make_filter(part.topic, opts)
    assert opts.path is not None
    with ReadOnlyStore(opts.path) as store:
        min_off = store.min_offset(part.topic, part.queue_id)
        if part.start == EARLIEST:
            cur = min_off
        else:
            cur = check_data_loss(key, part.start, min_off, opts.fail_on_data_loss, " (found when the task ran)")
        chunk = max(opts.pull_batch_size, PATH_CHUNK_UNITS)
        while cur < part.end:
            hi = min(part.end, cur + chunk)
            buf, n = store.read_records(part.topic, part.queue_id, cur, hi, flt.tag_codes)
            if n:
                rb = _to_batch(buf, part.broker_name, flt.tags)
                if flt.sql is not None:
                    rb = _apply_sql(rb, flt.sql)
                if rb.num_rows:
                    yield rb
            cur = hi


def _read_namesrv(part: RocketMQInputPartition, opts: RocketMQOptions) -> Iterator[pa.RecordBatch]:
    from rmq_core.spark.rpc import SourceRpc

    key = (part.topic, part.broker_name, part.queue_id)
    flt = _make_filter(part.topic, opts)
    group = opts.consumer_group or "rmq_spark_reader"
    assert opts.namesrv is not None and part.broker_addr is not None
    with SourceRpc(opts.namesrv, opts.timeout_ms) as rpc:
        if part.start == EARLIEST:
            cur = rpc.get_min_offset(part.broker_addr, part.topic, part.queue_id)
        else:
            cur = part.start
        while cur < part.end:
            ans = rpc.pull(part.broker_addr, group, part.topic, part.queue_id, cur,
                           min(opts.pull_batch_size, part.end - cur), flt.expression, flt.expression_type)
            if ans.code == ResponseCode.PULL_OFFSET_MOVED or (cur < ans.min_offset):
                if cur < ans.min_offset:
                    cur = check_data_loss(key, cur, ans.min_offset, opts.fail_on_data_loss,
                                          " (found when the task ran)")
                    continue
                raise RuntimeError(f"{part.topic}:{part.broker_name}:{part.queue_id}: offset {cur} is past the "
                                   f"queue's max offset {ans.max_offset} (was the queue reset?)")
            if ans.code == ResponseCode.SUCCESS and ans.body:
                rb = _to_batch(ans.body, part.broker_name, flt.tags)
                if rb.num_rows and ans.next_begin_offset > part.end:
                    rb = _below(rb, part.end)
                if rb.num_rows:
                    yield rb
            elif ans.code == ResponseCode.PULL_NOT_FOUND:
                if ans.max_offset <= cur:
                    raise RuntimeError(f"{part.topic}:{part.broker_name}:{part.queue_id}: planned to read up to "
                                       f"{part.end} but the queue's max offset is {ans.max_offset}")
            if ans.next_begin_offset <= cur:
                raise RuntimeError(f"{part.topic}:{part.broker_name}:{part.queue_id}: the broker did not advance "
                                   f"from offset {cur} (code {ans.code}, next {ans.next_begin_offset})")
            cur = ans.next_begin_offset
