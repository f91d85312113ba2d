"""Options of the ``rocketmq`` data source: parsing and validation (names as Spark's Kafka source where the idea is
the same). Every error names the option and the bad value; nothing is contacted here.

Invariants: a ``RocketMQOptions`` is validated, immutable and picklable (it travels to the executors).
Thread-safety: immutable value objects.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

EARLIEST = -2
LATEST = -1
# the groups the data source uses when none is given (not RocketMQ's DEFAULT_PRODUCER, which a producer may not use)
DEFAULT_READ_GROUP = "rmq_spark_reader"
DEFAULT_WRITE_GROUP = "rmq_spark_writer"

# offsets spec: "earliest" | "latest" | {(topic, broker, qid): offset} (offset may be -2/-1)
OffsetSpec = str | dict[tuple[str, str, int], int]


class OptionError(ValueError):
    """A bad or missing option of the rocketmq data source."""


def _get(opts: Mapping[str, str], name: str) -> str | None:
    # Spark passes a case-insensitive dict; plain dicts (tests, direct use) are matched case-insensitively too
    if name in opts:
        return opts[name]
    low = name.lower()
    for k, v in opts.items():
        if k.lower() == low:
            return v
    return None


def _int(opts: Mapping[str, str], name: str, default: int | None, minimum: int) -> int | None:
    raw = _get(opts, name)
    if raw is None or raw == "":
        return default
    try:
        v = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"option {name} must be an integer, got {raw!r}") from None
    if v < minimum:
        raise OptionError(f"option {name} must be >= {minimum}, got {v}")
    return v


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(opts, name)
    if raw is None or raw == "":
        return default
    s = str(raw).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name} must be true or false, got {raw!r}")


def _credentials(opts: Mapping[str, str]) -> dict[str, Any]:
    """accessKey and secretKey (RocketMQ 4.9's ACL): both or neither."""
    ak = (_get(opts, "accessKey") or "").strip() or None
    sk = (_get(opts, "secretKey") or "").strip() or None
    if (ak is None) != (sk is None):
        raise OptionError("options accessKey and secretKey must be given together")
    return {"access_key": ak, "secret_key": sk}


def parse_offsets_spec(name: str, raw: str | None, default: str, allowed: tuple[str, ...]) -> OffsetSpec:
    """``earliest`` / ``latest`` / JSON ``{"topic": {"broker": {"qid": offset}}}`` (-2 earliest, -1 latest)."""
    if raw is None or str(raw).strip() == "":
        return default
    s = str(raw).strip()
    if s.lower() in ("earliest", "latest"):
        if s.lower() not in allowed:
            raise OptionError(f"option {name} cannot be {s.lower()!r} (allowed: {', '.join(allowed)} or JSON)")
        return s.lower()
    try:
        doc = json.loads(s)
    except json.JSONDecodeError as e:
        raise OptionError(
            f"option {name} must be 'earliest', 'latest' or JSON "
            f'{{"topic": {{"broker": {{"queueId": offset}}}}}}, got {raw!r}: {e}'
        ) from None
    out: dict[tuple[str, str, int], int] = {}
    if not isinstance(doc, dict):
        raise OptionError(f"option {name}: JSON must be an object of topics, got {raw!r}")
    for topic, brokers in doc.items():
        if not isinstance(brokers, dict):
            raise OptionError(f"option {name}: topic {topic!r} must map to an object of brokers")
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise OptionError(f"option {name}: {topic}/{broker} must map to an object of queue ids")
            for qid, off in queues.items():
                try:
                    q = int(qid)
                except ValueError:
                    raise OptionError(
                        f"option {name}: queue id {qid!r} of {topic}/{broker} is not an integer"
                    ) from None
                if isinstance(off, bool) or not isinstance(off, int) or off < -2:
                    raise OptionError(
                        f"option {name}: offset of {topic}/{broker}/{qid} must be an integer >= -2, got {off!r}"
                    )
                if name == "endingOffsets" and off == EARLIEST:
                    raise OptionError(f"option endingOffsets: -2 (earliest) is not allowed ({topic}/{broker}/{qid})")
                out[(topic, broker, q)] = off
    return out


@dataclass(frozen=True)
class RocketMQOptions:
    namesrv: str | None
    path: str | None
    topics: tuple[str, ...]
    sub_expression: str | None
    sql: str | None
    starting_offsets: OffsetSpec
    ending_offsets: OffsetSpec
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    pull_batch_size: int
    consumer_group: str | None
    broker_name: str
    timeout_ms: int
    access_key: str | None = None  # accessKey / secretKey: RocketMQ 4.9's ACL, every request signed
    secret_key: str | None = field(default=None, repr=False)

    @property
    def credentials(self) -> dict[str, Any]:
        """The clients' ``access_key=``/``secret_key=`` keyword arguments."""
        return {"access_key": self.access_key, "secret_key": self.secret_key}

    @property
    def filter_expression(self) -> str | None:
        """The selector the reader applies: the SQL92 text, else the tag expression, else None (all)."""
        if self.sql:
            return self.sql
        if self.sub_expression and self.sub_expression.strip() not in ("", "*"):
            return self.sub_expression
        return None

    @property
    def is_sql(self) -> bool:
        return bool(self.sql)


def _source(opts: Mapping[str, str]) -> tuple[str | None, str | None]:
    namesrv = _get(opts, "namesrv")
    path = _get(opts, "path")
    namesrv = namesrv.strip() if namesrv and namesrv.strip() else None
    path = path.strip() if path and path.strip() else None
    if (namesrv is None) == (path is None):
        raise OptionError(
            "exactly one of the options namesrv (a name server address, 'host:port[;host:port]') "
            "or path (a local store directory) must be set"
        )
    return namesrv, path


def parse_read_options(opts: Mapping[str, str], streaming: bool) -> RocketMQOptions:
    namesrv, path = _source(opts)
    topic_raw = _get(opts, "topic")
    topics = tuple(t.strip() for t in (topic_raw or "").split(",") if t.strip())
    if not topics:
        raise OptionError("option topic is required (one topic or several, comma-separated)")
    sub = _get(opts, "subExpression")
    sql = _get(opts, "sql")
    if sql is not None and not sql.strip():
        sql = None
    if sql and sub and sub.strip() not in ("", "*"):
        raise OptionError("options subExpression and sql are exclusive: set one of them")
    if sql:
        from rmq_core.filter.sql92 import Sql92Filter

        try:
            Sql92Filter(sql)
        except Exception as e:  # a clear error on the driver, before any task runs
            raise OptionError(f"option sql is not a valid SQL92 filter: {sql!r}: {e}") from None
    starting = parse_offsets_spec(
        "startingOffsets", _get(opts, "startingOffsets"), "latest" if streaming else "earliest", ("earliest", "latest")
    )
    ending = parse_offsets_spec("endingOffsets", _get(opts, "endingOffsets"), "latest", ("latest",))
    if streaming and _get(opts, "endingOffsets") is not None:
        raise OptionError("option endingOffsets is for batch queries only")
    if not streaming and starting == "latest":
        raise OptionError("option startingOffsets cannot be 'latest' for a batch query")
    if not streaming and isinstance(ending, dict) and any(v == EARLIEST for v in ending.values()):
        raise OptionError("option endingOffsets cannot use -2 (earliest)")
    mopt = _int(opts, "maxOffsetsPerTrigger", None, 1)
    if not streaming and mopt is not None:
        raise OptionError("option maxOffsetsPerTrigger is for streaming queries only")
    return RocketMQOptions(
        namesrv=namesrv,
        path=path,
        topics=topics,
        sub_expression=sub.strip() if sub else None,
        sql=sql.strip() if sql else None,
        starting_offsets=starting,
        ending_offsets=ending,
        max_offsets_per_trigger=mopt,
        min_partitions=_int(opts, "minPartitions", None, 1),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        pull_batch_size=_int(opts, "pullBatchSize", 32, 1),  # type: ignore[arg-type]
        consumer_group=(_get(opts, "consumerGroup") or "").strip() or None,
        broker_name=(_get(opts, "brokerName") or "").strip() or "local",
        timeout_ms=_int(opts, "timeoutMs", 10_000, 1),  # type: ignore[arg-type]
        **_credentials(opts),
    )


def _transactional(opts: Mapping[str, str], path: str | None) -> bool:
    raw = (_get(opts, "transactional") or "false").strip().lower()
    if raw not in ("true", "false"):
        raise OptionError(f"option transactional must be true or false, got {raw!r}")
    if raw == "true" and path is not None:
        raise OptionError("option transactional needs namesrv (a broker ends the transactions), not path")
    return raw == "true"


@dataclass(frozen=True)
class RocketMQWriteOptions:
    namesrv: str | None
    path: str | None
    topic: str | None
    producer_group: str
    send_batch_size: int
    write_queue_nums: int
    lock_timeout_ms: int
    timeout_ms: int
    transactional: bool = False
    transaction_journal: str | None = None  # a directory; streaming defaults to <checkpointLocation>/rocketmq-sink
    checkpoint_location: str | None = None
    access_key: str | None = None  # accessKey / secretKey: RocketMQ 4.9's ACL, every request signed
    secret_key: str | None = field(default=None, repr=False)

    @property
    def credentials(self) -> dict[str, Any]:
        """The clients' ``access_key=``/``secret_key=`` keyword arguments."""
        return {"access_key": self.access_key, "secret_key": self.secret_key}


def parse_write_options(opts: Mapping[str, str]) -> RocketMQWriteOptions:
    namesrv, path = _source(opts)
    topic = (_get(opts, "topic") or "").strip() or None
    if topic is not None and "," in topic:
        raise OptionError(f"option topic of the sink names one topic, got {topic!r}")
    return RocketMQWriteOptions(
        namesrv=namesrv,
        path=path,
        topic=topic,
        producer_group=(_get(opts, "producerGroup") or "").strip() or DEFAULT_WRITE_GROUP,
        send_batch_size=_int(opts, "sendBatchSize", 128, 1),  # type: ignore[arg-type]
        write_queue_nums=_int(opts, "writeQueueNums", 4, 1),  # type: ignore[arg-type]
        lock_timeout_ms=_int(opts, "lockTimeoutMs", 120_000, 0),  # type: ignore[arg-type]
        timeout_ms=_int(opts, "timeoutMs", 10_000, 1),  # type: ignore[arg-type]
        transactional=_transactional(opts, path),
        transaction_journal=(_get(opts, "transactionJournal") or "").strip() or None,
        checkpoint_location=(_get(opts, "checkpointLocation") or "").strip() or None,
        **_credentials(opts),
    )
