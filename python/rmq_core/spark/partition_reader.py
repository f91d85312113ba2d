"""Executor side of the ``rocketmq`` source: read one ``RocketMQInputPartition`` (one slice of one queue) into
Arrow record batches, from a ``StoreReader`` (``path``) or PULL_MESSAGE to the queue's master (``namesrv``).

Invariants:
1. Rows are exactly the matching messages with queue offsets in ``[start, end)``, each once, in queue order.
2. Offsets below the queue's min when the task runs: failOnDataLoss → ``DataLossError`` naming the queue and
   offsets; else a warning and the read starts at the min. A partition whose start is -2 (a queue that appeared
   after the previous micro-batch) starts at the min without a data-loss complaint.
3. Every file handle / connection opened by a read is closed when the iterator ends or is closed.
Thread-safety: ``read_partition`` keeps no state between calls; each call opens its own reader.
Details (the filters of each side): docs/SPARK_DESIGN.md, 'Reading a partition'.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import InputPartition

from rmq_core.client.pull_result import PullStatus
from rmq_core.common import sys_flag
from rmq_core.filter.message_selector import ExpressionType
from rmq_core.filter.subscription_data import build_subscription_data
from rmq_core.remoting.header import PullMessageRequestHeader
from rmq_core.spark.options import DEFAULT_READ_GROUP, EARLIEST, RocketMQOptions
from rmq_core.spark.planner import check_data_loss

if TYPE_CHECKING:
    from typing_extensions import Buffer

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
from rmq_core.spark.arrow_rows import SPARK_SCHEMA_DDL  # noqa: E402
from rmq_core.spark.arrow_rows import records_to_record_batch as _to_batch  # noqa: E402


def schema_ddl() -> str:
    return SPARK_SCHEMA_DDL


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
    from rmq_core.store_reader import StoreReader

    key = (part.topic, part.broker_name, part.queue_id)
    flt = _make_filter(part.topic, opts)
    assert opts.path is not None
    with StoreReader(opts.path) as store:
        min_off = store.min_offset(part.topic, part.queue_id)
        if part.start == EARLIEST:
            cur = min_off
        else:
            cur = check_data_loss(key, part.start, min_off, opts.fail_on_data_loss, " (found when the task ran)")
        chunk = max(opts.pull_batch_size, PATH_CHUNK_UNITS)
        while cur < part.end:
            hi = min(part.end, cur + chunk)
            buf, n, nxt = store.read_records(part.topic, part.queue_id, cur, hi, flt.tag_codes)
            if n:
                rb = _to_batch(cast("Buffer", buf), part.broker_name, flt.tags)  # a ColumnBuffer is a buffer
                if flt.sql is not None:
                    rb = _apply_sql(rb, flt.sql)
                if rb.num_rows:
                    yield rb
            if nxt < hi:
                # the planned range was written and readable when planned (max_offset checks the last record)
                raise RuntimeError(
                    f"{part.topic}:{part.broker_name}:{part.queue_id}: planned to read up to {part.end} but the "
                    f"store {opts.path} has no whole record at queue offset {nxt}"
                )
            cur = hi


def _read_namesrv(part: RocketMQInputPartition, opts: RocketMQOptions) -> Iterator[pa.RecordBatch]:
    from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI

    key = (part.topic, part.broker_name, part.queue_id)
    flt = _make_filter(part.topic, opts)
    group = opts.consumer_group or DEFAULT_READ_GROUP
    assert opts.namesrv is not None and part.broker_addr is not None
    # no suspend, no commit, the subscription in the request: the pull answers at once and changes nothing
    flag = sys_flag.build_pull_sys_flag(commit_offset=False, suspend=False, subscription=True)
    with BlockingMQClientAPI(opts.namesrv, opts.timeout_ms, name="rmq-spark-rpc", **opts.credentials) as rpc:
        if part.start == EARLIEST:
            cur = rpc.get_min_offset(part.broker_addr, part.topic, part.queue_id)
        else:
            cur = part.start
        while cur < part.end:
            header = PullMessageRequestHeader(
                consumerGroup=group,
                topic=part.topic,
                queueId=part.queue_id,
                queueOffset=cur,
                maxMsgNums=min(opts.pull_batch_size, part.end - cur),
                sysFlag=flag,
                commitOffset=0,
                suspendTimeoutMillis=0,
                subscription=flt.expression or "*",
                subVersion=0,
                expressionType=flt.expression_type,
            )
            ans = rpc.pull_message(part.broker_addr, header)
            if ans.pull_status == PullStatus.OFFSET_ILLEGAL or (cur < ans.min_offset):
                if cur < ans.min_offset:
                    cur = check_data_loss(
                        key, cur, ans.min_offset, opts.fail_on_data_loss, " (found when the task ran)"
                    )
                    continue
                raise RuntimeError(
                    f"{part.topic}:{part.broker_name}:{part.queue_id}: offset {cur} is past the "
                    f"queue's max offset {ans.max_offset} (was the queue reset?)"
                )
            if ans.pull_status == PullStatus.FOUND and ans.message_binary:
                rb = _to_batch(ans.message_binary, part.broker_name, flt.tags)
                if rb.num_rows and ans.next_begin_offset > part.end:
                    rb = _below(rb, part.end)
                if rb.num_rows:
                    yield rb
            elif ans.pull_status == PullStatus.NO_NEW_MSG:
                if ans.max_offset <= cur:
                    raise RuntimeError(
                        f"{part.topic}:{part.broker_name}:{part.queue_id}: planned to read up to "
                        f"{part.end} but the queue's max offset is {ans.max_offset}"
                    )
            if ans.next_begin_offset <= cur:
                raise RuntimeError(
                    f"{part.topic}:{part.broker_name}:{part.queue_id}: the broker did not advance "
                    f"from offset {cur} ({ans.pull_status.name}, next {ans.next_begin_offset})"
                )
            cur = ans.next_begin_offset
