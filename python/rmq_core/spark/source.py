"""``RocketMQDataSource`` (short name ``rocketmq``) and its batch and streaming readers (PySpark 4.2 Python Data
Source API: ``latestOffset(start, limit)`` with ``getDefaultReadLimit`` for ``maxOffsetsPerTrigger``).

Batch: ``partitions()`` plans ``[startingOffsets, endingOffsets)`` per queue (default earliest → latest).
Streaming: offsets are JSON ``{"topic": {"broker": {"qid": offset}}}``; a new query starts at ``startingOffsets``
(default latest, as Kafka); queues that appear between micro-batches start at their earliest offset; each
micro-batch is bounded by ``maxOffsetsPerTrigger`` (proportional to each queue's backlog); with
``Trigger.AvailableNow`` the max offsets when the query starts are its end (``prepareForTriggerAvailableNow``). The
checkpoint is the source of truth; ``commit(end)`` additionally sends UPDATE_CONSUMER_OFFSET for ``consumerGroup``
(namesrv source) so RocketMQ's tools show the lag — a failure there is logged, never fails the query.

Invariants: readers are picklable (options and partitions are plain data); ``read`` opens its own store reader or
connection. Thread-safety: Spark calls a reader's driver methods from one thread.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from rmq_core.spark.offsets import OffsetMap, QueueRange, from_json, to_json
from rmq_core.spark.options import EARLIEST, RocketMQOptions, parse_read_options, parse_write_options
from rmq_core.spark.partition_reader import RocketMQInputPartition, read_partition, schema_ddl
from rmq_core.spark.planner import (
    QueueInfo,
    check_data_loss,
    fetch_queues,
    rate_limit,
    resolve_offsets,
    split_ranges,
)

log = logging.getLogger(__name__)


def _to_partitions(
    ranges: list[QueueRange], queues: dict[tuple[str, str, int], QueueInfo], min_partitions: int | None
) -> list[InputPartition]:
    out: list[InputPartition] = []
    for r in split_ranges([r for r in ranges if r.start != EARLIEST], min_partitions) + [
        r for r in ranges if r.start == EARLIEST
    ]:
        q = queues.get(r.key)
        out.append(
            RocketMQInputPartition(
                r.topic, r.broker_name, r.queue_id, r.start, r.end, q.broker_addr if q is not None else None
            )
        )
    return out


class RocketMQDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        return schema_ddl()

    def reader(self, schema: StructType) -> DataSourceReader:
        return RocketMQBatchReader(parse_read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return RocketMQStreamReader(parse_read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool):  # type: ignore[no-untyped-def]
        from rmq_core.spark.sink import RocketMQDataSourceWriter

        return RocketMQDataSourceWriter(parse_write_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool):  # type: ignore[no-untyped-def]
        from rmq_core.spark.sink import RocketMQStreamWriter

        return RocketMQStreamWriter(parse_write_options(self.options), schema)


class RocketMQBatchReader(DataSourceReader):
    def __init__(self, opts: RocketMQOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        queues = fetch_queues(self.opts)
        start = resolve_offsets(self.opts.starting_offsets, queues, "startingOffsets")
        end = resolve_offsets(self.opts.ending_offsets, queues, "endingOffsets")
        ranges = []
        for q in queues:
            s = check_data_loss(q.key, start[q.key], q.min_offset, self.opts.fail_on_data_loss)
            e = end[q.key]
            if e > q.max_offset:
                raise ValueError(
                    f"option endingOffsets: topic {q.topic!r} broker {q.broker_name!r} queue "
                    f"{q.queue_id}: {e} is past the queue's max offset {q.max_offset}"
                )
            if e < s:
                if e < start[q.key]:
                    raise ValueError(
                        f"topic {q.topic!r} broker {q.broker_name!r} queue {q.queue_id}: ending offset "
                        f"{e} is before starting offset {start[q.key]}"
                    )
                e = s  # the lost range ended before the min: nothing left to read
            ranges.append(QueueRange(q.topic, q.broker_name, q.queue_id, s, e))
        parts = _to_partitions(ranges, {q.key: q for q in queues}, self.opts.min_partitions)
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RocketMQInputPartition)
        return read_partition(partition, self.opts)


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: RocketMQOptions) -> None:
        self.opts = opts
        self._queues: dict[tuple[str, str, int], QueueInfo] = {}
        self._target: OffsetMap | None = None  # Trigger.AvailableNow: the max offsets when the query started

    def _fetch(self) -> list[QueueInfo]:
        queues = fetch_queues(self.opts)
        self._queues = {q.key: q for q in queues}
        return queues

    def initialOffset(self) -> dict[str, Any]:
        queues = self._fetch()
        start = resolve_offsets(self.opts.starting_offsets, queues, "startingOffsets")
        for q in queues:
            start[q.key] = check_data_loss(q.key, start[q.key], q.min_offset, self.opts.fail_on_data_loss)
        return to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        start_map = from_json(start)
        queues = self._fetch()
        latest: OffsetMap = {}
        effective: OffsetMap = {}
        for q in queues:
            s = start_map.get(q.key)
            # a queue new since the previous batch starts at its earliest offset (Kafka's new partitions)
            effective[q.key] = q.min_offset if s is None else max(s, q.min_offset)
            latest[q.key] = max(q.max_offset, effective[q.key]) if s is None else max(q.max_offset, s)
        if self._target is not None:  # Trigger.AvailableNow: nothing written after the query started is read
            target = self._target
            latest = {k: min(e, max(target[k], effective[k])) for k, e in latest.items() if k in target}
            effective = {k: v for k, v in effective.items() if k in latest}
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(effective, latest, limit.max_rows)
            for k, s in start_map.items():  # a capped queue never goes below its previous end
                if k in latest and latest[k] < s:
                    latest[k] = s
        for k, s in start_map.items():  # queues gone from the route keep their offsets
            latest.setdefault(k, s)
        return to_json(latest)

    def prepareForTriggerAvailableNow(self) -> None:
        """``Trigger.AvailableNow``: the queues' max offsets now are the query's end. ``latestOffset`` never goes
        past them (``maxOffsetsPerTrigger`` still splits the backlog into micro-batches), a queue that appears
        later is not read, and once every queue has reached its target the offsets stop moving, so Spark ends
        the query."""
        self._target = {q.key: q.max_offset for q in self._fetch()}

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return to_json({k: q.max_offset for k, q in self._queues.items()}) if self._queues else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        start_map, end_map = from_json(start), from_json(end)
        if self.opts.namesrv is not None and any(k not in self._queues for k in end_map):
            self._fetch()  # after a restart: broker addresses
        ranges = []
        for k, e in sorted(end_map.items()):
            s = start_map.get(k, EARLIEST)
            if s != EARLIEST and e <= s:
                continue
            ranges.append(QueueRange(k[0], k[1], k[2], s, e))
        return _to_partitions(ranges, self._queues, self.opts.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RocketMQInputPartition)
        return read_partition(partition, self.opts)

    def commit(self, end: dict[str, Any]) -> None:
        group = self.opts.consumer_group
        if not group:
            return
        if self.opts.namesrv is None:
            log.debug("consumerGroup %s: offsets are not committed for the path source", group)
            return
        from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI
        from rmq_core.remoting.header import UpdateConsumerOffsetRequestHeader

        try:
            with BlockingMQClientAPI(
                self.opts.namesrv, self.opts.timeout_ms, name="rmq-spark-rpc", **self.opts.credentials
            ) as rpc:
                if not self._queues:
                    self._fetch()
                for k, off in sorted(from_json(end).items()):
                    q = self._queues.get(k)
                    if q is None or q.broker_addr is None or off < 0:
                        continue
                    header = UpdateConsumerOffsetRequestHeader(
                        consumerGroup=group, topic=k[0], queueId=k[2], commitOffset=off
                    )
                    rpc.update_consumer_offset(q.broker_addr, header)
        except Exception as e:  # the checkpoint is the source of truth; the broker copy is informative
            log.warning("consumerGroup %s: committing offsets to the brokers failed: %s", group, e)

    def stop(self) -> None:
        self._queues = {}
