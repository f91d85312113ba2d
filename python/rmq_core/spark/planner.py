"""Driver-side planning of the ``rocketmq`` source: which queues exist with their min/max offsets, where a query
starts and ends, data-loss checks, ``maxOffsetsPerTrigger`` (proportional to each queue's backlog, as Kafka's rate
limit) and ``minPartitions`` (splitting large queue ranges).

``path``: the store directory is read through ``rmq_core.store_reader.StoreReader`` (read-only, no lock). ``namesrv``: routes
from the name server, min/max per queue from each queue's master broker.

Invariants:
1. Every planned range satisfies ``min_offset <= start <= end <= max_offset`` as seen at planning time (start is
   moved up to min only when failOnDataLoss is false, with a warning; else ``DataLossError``).
2. ``rate_limit`` never returns more than ``limit`` offsets in total and never moves a queue backwards.
3. ``split_ranges`` covers exactly the same offsets as its input, in order, without overlap.

Thread-safety: pure functions plus short-lived RPC clients / file readers created per call.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from rmq_core.common import perm_name
from rmq_core.errors import RmqError
from rmq_core.spark.offsets import OffsetMap, QueueKey, QueueRange, describe
from rmq_core.spark.options import EARLIEST, LATEST, OffsetSpec, RocketMQOptions

log = logging.getLogger(__name__)


class DataLossError(RmqError):
    """Offsets a query must read are no longer in the store (set failOnDataLoss=false to skip them)."""


@dataclass(frozen=True)
class QueueInfo:
    topic: str
    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    broker_addr: str | None = None  # namesrv only: the master's address

    @property
    def key(self) -> QueueKey:
        return (self.topic, self.broker_name, self.queue_id)


def fetch_queues(opts: RocketMQOptions) -> list[QueueInfo]:
    """Every readable queue of the option's topics with its current min/max offsets, sorted by key."""
    if opts.path is not None:
        from rmq_core.store_reader import StoreReader

        wanted = set(opts.topics)
        with StoreReader(opts.path) as store:
            out = [
                QueueInfo(t, opts.broker_name, q, store.min_offset(t, q), store.max_offset(t, q))
                for t, q in store.queues()
                if t in wanted
            ]
        return sorted(out, key=lambda i: i.key)
    from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI

    assert opts.namesrv is not None
    out = []
    with BlockingMQClientAPI(opts.namesrv, opts.timeout_ms, name="rmq-spark-rpc", **opts.credentials) as rpc:
        for topic in opts.topics:
            route = rpc.get_topic_route_info_from_name_server(topic)
            for qd in route.queue_datas:
                if not perm_name.is_readable(qd.perm):
                    continue
                addr = route.find_broker_addr(qd.broker_name)
                if addr is None:
                    raise RmqError(f"topic {topic!r}: broker {qd.broker_name!r} has no master in the route")
                for qid in range(qd.read_queue_nums):
                    out.append(
                        QueueInfo(
                            topic,
                            qd.broker_name,
                            qid,
                            rpc.get_min_offset(addr, topic, qid),
                            rpc.get_max_offset(addr, topic, qid),
                            addr,
                        )
                    )
    return sorted(out, key=lambda i: i.key)


def check_data_loss(key: QueueKey, start: int, min_offset: int, fail_on_data_loss: bool, why: str = "") -> int:
    """``start`` if it is still in the queue, else raise (failOnDataLoss) or warn and return ``min_offset``."""
    if start >= min_offset:
        return start
    msg = (
        f"data loss: {describe(key)}: offset {start} is no longer in the store (the queue's min offset is "
        f"{min_offset}; offsets {start}..{min_offset - 1} were deleted){why}"
    )
    if fail_on_data_loss:
        raise DataLossError(msg + ". Set failOnDataLoss=false to skip the lost offsets with a warning.")
    log.warning("%s; skipping to %d (failOnDataLoss=false)", msg, min_offset)
    return min_offset


def resolve_offsets(spec: OffsetSpec, queues: list[QueueInfo], name: str) -> OffsetMap:
    """``earliest``/``latest``/JSON → a concrete offset per known queue (JSON -2/-1 resolved; queues missing from the
    JSON: earliest for startingOffsets, latest for endingOffsets, as Kafka)."""
    by_key = {q.key: q for q in queues}
    out: OffsetMap = {}
    if isinstance(spec, dict):
        unknown = [k for k in spec if k not in by_key]
        if unknown:
            raise ValueError(
                f"option {name} names queues that do not exist: " + ", ".join(describe(k) for k in sorted(unknown))
            )
    for q in queues:
        if spec == "earliest":
            v = q.min_offset
        elif spec == "latest":
            v = q.max_offset
        else:
            assert isinstance(spec, dict)
            v = spec.get(q.key, EARLIEST if name == "startingOffsets" else LATEST)
            if v == EARLIEST:
                v = q.min_offset
            elif v == LATEST:
                v = q.max_offset
        out[q.key] = v
    return out


def rate_limit(start: OffsetMap, latest: OffsetMap, limit: int) -> OffsetMap:
    """Bound the total ``sum(end - start)`` to ``limit``, each queue's share proportional to its backlog
    (Kafka's rateLimit, with the remainder given to the largest fractions so the total is exact)."""
    backlog = {k: max(0, latest[k] - start.get(k, latest[k])) for k in latest}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    shares = {k: limit * b / total for k, b in backlog.items()}
    take = {k: int(s) for k, s in shares.items()}
    rest = limit - sum(take.values())
    for k in sorted(shares, key=lambda k: (-(shares[k] - take[k]), k))[:rest]:
        take[k] += 1
    return {k: (start[k] + take[k] if k in start else latest[k]) for k in latest}


def split_ranges(ranges: list[QueueRange], min_partitions: int | None) -> list[QueueRange]:
    """Split the largest ranges until there are at least ``min_partitions`` (Kafka's KafkaOffsetRangeCalculator:
    each range gets a number of parts proportional to its size)."""
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[QueueRange] = []
    for r in ranges:
        parts = max(1, min(r.size, round(r.size * min_partitions / total))) if total else 1
        step, extra = divmod(r.size, parts)
        s = r.start
        for i in range(parts):
            e = s + step + (1 if i < extra else 0)
            out.append(QueueRange(r.topic, r.broker_name, r.queue_id, s, e))
            s = e
    return out
