"""The ``rocketmq`` sink: ``df.write.format("rocketmq")`` (``RocketMQDataSourceWriter``) and ``writeStream``
(``RocketMQStreamWriter``).

Rows: ``body`` (required) and optional ``topic``, ``tags``, ``keys``, ``properties``; sent with one ``Producer`` per
task (``namesrv``) or put with ``MessageStore.put_messages`` (``path``, one writer at a time). AT-LEAST-ONCE by
default; ``option("transactional", "true")`` (namesrv only) makes it EXACTLY-ONCE: half messages per task attempt,
the driver's journal (``sink_transaction_journal.py``), then COMMIT, with a check-back listener answering from it.
Invariants: a task's commit message counts what it sent; nothing is reported sent that the broker/store did not
acknowledge. Thread-safety: one writer per task; ``write`` keeps no state between calls.
Details (the exactly-once protocol, its failure cases): docs/SPARK_DESIGN.md, 'The sink'.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, MapType, StringType, StructType

from rmq_core.errors import RmqError
from rmq_core.message import Message
from rmq_core.spark.options import OptionError, RocketMQWriteOptions
from rmq_core.spark.sink_transaction_journal import (
    COMMIT,
    PROPERTY_SINK_TXN,
    ROLLBACK,
    SinkTransactionJournal,
    sink_transaction_tag,
)

if TYPE_CHECKING:
    from rmq_core.store import MessageStore

log = logging.getLogger(__name__)

MAX_BATCH_BYTES = 1024 * 1024


class SinkError(RmqError):
    """A row could not be sent (bad row or a failed send); the task fails with it."""


@dataclass(frozen=True)
class TransactionHandle:
    """What the driver needs to end one half message (EndTransactionRequestHeader's fields)."""

    broker_addr: str
    commitlog_offset: int
    tran_state_table_offset: int
    msg_id: str


@dataclass
class RocketMQCommitMessage(WriterCommitMessage):
    partition_id: int
    sent: int
    handles: tuple[TransactionHandle, ...] = ()
    task_attempt: str = ""  # transactional: the id its half messages carry


@dataclass(frozen=True)
class SinkTransactionScope:
    """What a task needs to tag its half messages: the sink's id and the batch (a job id, or the micro-batch's id,
    read in the task from Spark's ``streaming.sql.batchId`` local property)."""

    sink_id: str
    job_batch: str


def validate_schema(schema: StructType, opts: RocketMQWriteOptions) -> None:
    fields = {f.name: f.dataType for f in schema.fields}
    if "body" not in fields:
        raise OptionError(f"the rocketmq sink needs a 'body' column (binary or string); columns: {sorted(fields)}")
    if not isinstance(fields["body"], (BinaryType, StringType)):
        raise OptionError(f"column body must be binary or string, got {fields['body'].simpleString()}")
    for name in ("topic", "tags", "keys"):
        if name in fields and not isinstance(fields[name], StringType):
            raise OptionError(f"column {name} must be a string, got {fields[name].simpleString()}")
    if "properties" in fields and not isinstance(fields["properties"], MapType):
        raise OptionError(f"column properties must be map<string,string>, got {fields['properties'].simpleString()}")
    if "topic" not in fields and opts.topic is None:
        raise OptionError("the rocketmq sink needs a topic: set the option topic or give the rows a 'topic' column")


def row_to_message(row: Any, default_topic: str | None) -> Message:
    d = row.asDict() if hasattr(row, "asDict") else dict(row)
    body = d.get("body")
    if body is None:
        raise SinkError(f"a row has a null body: {d!r}"[:300])
    if isinstance(body, str):
        body = body.encode("utf-8")
    elif not isinstance(body, bytes):
        body = bytes(body)
    topic = d.get("topic") or default_topic
    if not topic:
        raise SinkError("a row has no topic and the option topic is not set")
    props = d.get("properties")
    props = {str(k): str(v) for k, v in props.items() if v is not None} if props else None
    return Message(topic, body, tags=d.get("tags") or None, keys=d.get("keys") or None, properties=props)


def _task_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


def _chunks(rows: Iterator[Any], opts: RocketMQWriteOptions) -> Iterator[list[Message]]:
    """Messages grouped by topic into chunks of at most sendBatchSize messages and ~1 MiB."""
    pending: dict[str, tuple[list[Message], int]] = {}
    for row in rows:
        m = row_to_message(row, opts.topic)
        msgs, size = pending.get(m.topic, ([], 0))
        msgs.append(m)
        size += len(m.body) + 64
        if len(msgs) >= opts.send_batch_size or size >= MAX_BATCH_BYTES:
            pending.pop(m.topic, None)
            yield msgs
        else:
            pending[m.topic] = (msgs, size)
    for msgs, _ in pending.values():
        yield msgs


def _write_namesrv(rows: Iterator[Any], opts: RocketMQWriteOptions) -> int:
    from rmq_core.client import Producer
    from rmq_core.client.send_result import SendStatus

    assert opts.namesrv is not None
    producer = Producer(
        opts.producer_group,
        namesrv_addr=opts.namesrv,
        send_msg_timeout=opts.timeout_ms,
        instance_name=f"rmq-spark-sink-{_task_id()}-{time.time_ns()}",
        **opts.credentials,
    )
    producer.start()
    sent = 0
    try:
        for msgs in _chunks(rows, opts):
            try:
                res = producer.send_batch(msgs) if len(msgs) > 1 else producer.send(msgs[0])
            except Exception as e:
                raise SinkError(
                    f"sending {len(msgs)} messages to topic {msgs[0].topic!r} failed "
                    f"({sent} sent before by this task): {e}"
                ) from e
            if res.send_status != SendStatus.SEND_OK:
                raise SinkError(f"sending {len(msgs)} messages to topic {msgs[0].topic!r}: {res.send_status.value}")
            sent += len(msgs)
    finally:
        producer.shutdown()
    return sent


class _LeaveOpen:
    """The sink's TransactionListener: the driver decides, so the task leaves every transaction open."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> Any:
        from rmq_core.client import LocalTransactionState

        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, msg_ext: Any) -> Any:
        from rmq_core.client import LocalTransactionState

        return LocalTransactionState.UNKNOW


def _task_batch(scope: SinkTransactionScope) -> str:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    batch_id = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
    return f"batch-{batch_id}" if batch_id is not None else scope.job_batch


def _write_transactional(
    rows: Iterator[Any], opts: RocketMQWriteOptions, scope: SinkTransactionScope
) -> RocketMQCommitMessage:
    from rmq_core.client import TransactionProducer
    from rmq_core.client.send_result import SendStatus
    from rmq_core.message import decode_offset_msg_id

    assert opts.namesrv is not None
    producer = TransactionProducer(
        opts.producer_group,
        namesrv_addr=opts.namesrv,
        transaction_listener=_LeaveOpen(),
        send_msg_timeout=opts.timeout_ms,
        instance_name=f"rmq-spark-txsink-{_task_id()}-{time.time_ns()}",
        **opts.credentials,
    )
    producer.start()
    handles: list[TransactionHandle] = []
    attempt = uuid.uuid4().hex
    tag = sink_transaction_tag(scope.sink_id, _task_batch(scope), attempt)
    try:
        for row in rows:
            msg = row_to_message(row, opts.topic)
            msg.properties[PROPERTY_SINK_TXN] = tag
            try:
                r = producer.send_message_in_transaction(msg)
            except Exception as e:
                raise SinkError(
                    f"sending a half message to topic {msg.topic!r} failed ({len(handles)} sent before): {e}"
                ) from e
            if r.send_status != SendStatus.SEND_OK:
                raise SinkError(f"sending a half message to topic {msg.topic!r}: {r.send_status.value}")
            addr = producer.instance.find_broker_address_in_publish(r.message_queue.broker_name)  # type: ignore[union-attr]
            if addr is None:
                raise SinkError(f"no address for broker {r.message_queue.broker_name!r}")
            _host, offset = decode_offset_msg_id(r.offset_msg_id or "")
            handles.append(TransactionHandle(addr, offset, r.queue_offset, r.msg_id or ""))
    finally:
        producer.shutdown()
    return RocketMQCommitMessage(_task_id(), len(handles), tuple(handles), attempt)


def _handles(messages: list[WriterCommitMessage | None]) -> list[TransactionHandle]:
    return [h for m in messages if isinstance(m, RocketMQCommitMessage) for h in m.handles]


def end_transactions(opts: RocketMQWriteOptions, handles: list[TransactionHandle], commit: bool) -> int:
    """The driver's side: END_TRANSACTION (COMMIT or ROLLBACK) for every handle; the number ended. A failure raises
    SinkError after trying every handle (those ended stay ended)."""
    from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI
    from rmq_core.message import TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE
    from rmq_core.remoting.header import EndTransactionRequestHeader

    assert opts.namesrv is not None
    if not handles:
        return 0
    kind = TRANSACTION_COMMIT_TYPE if commit else TRANSACTION_ROLLBACK_TYPE
    failures: list[str] = []
    with BlockingMQClientAPI(opts.namesrv, opts.timeout_ms, **opts.credentials) as api:
        for h in handles:
            header = EndTransactionRequestHeader(
                producerGroup=opts.producer_group,
                tranStateTableOffset=h.tran_state_table_offset,
                commitLogOffset=h.commitlog_offset,
                commitOrRollback=kind,
                fromTransactionCheck=False,
                msgId=h.msg_id,
            )
            try:
                api.end_transaction(h.broker_addr, header)
            except Exception as e:
                failures.append(f"{h}: {e}")
    if failures:
        raise SinkError(
            f"{len(failures)} of {len(handles)} transactions could not be "
            f"{'committed' if commit else 'rolled back'}: {failures[:3]}"
        )
    return len(handles)


def _open_store_waiting(opts: RocketMQWriteOptions) -> MessageStore:
    from rmq_core.errors import StoreError
    from rmq_core.store import MessageStore

    deadline = time.monotonic() + opts.lock_timeout_ms / 1000.0
    while True:
        try:
            return MessageStore(opts.path)  # type: ignore[arg-type]
        except StoreError as e:
            if "lock" not in str(e).lower() or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def _write_path(rows: Iterator[Any], opts: RocketMQWriteOptions) -> int:
    n_queues = opts.write_queue_nums
    qid = _task_id() % n_queues
    sent = 0
    chunks = _chunks(rows, opts)
    first = next(chunks, None)  # open the store (and take its lock) only when there is something to write
    if first is None:
        return 0
    store = _open_store_waiting(opts)
    try:
        for msgs in _chain(first, chunks):
            batch = []
            for m in msgs:
                batch.append((m, qid))
                qid = (qid + 1) % n_queues
            results = store.put_messages(batch)
            if not results.all_ok:
                bad = [s.name for s in results.statuses if s.name not in ("PUT_OK", "FLUSH_DISK_TIMEOUT")]
                raise SinkError(f"putting {len(msgs)} messages into {opts.path} failed: {sorted(set(bad))}")
            sent += len(msgs)
        store.flush()
    finally:
        store.close()
    return sent


def _chain(first: list[Message], rest: Iterator[list[Message]]) -> Iterator[list[Message]]:
    yield first
    yield from rest


def write_rows(
    rows: Iterator[Any], opts: RocketMQWriteOptions, scope: SinkTransactionScope | None = None
) -> RocketMQCommitMessage:
    if opts.transactional:
        assert scope is not None, "a transactional write needs its sink's scope"
        return _write_transactional(rows, opts, scope)
    sent = _write_namesrv(rows, opts) if opts.namesrv is not None else _write_path(rows, opts)
    return RocketMQCommitMessage(_task_id(), sent)


def _total(messages: list[WriterCommitMessage | None]) -> int:
    return sum(m.sent for m in messages if isinstance(m, RocketMQCommitMessage))


class _JournalCheckListener:
    """The driver's TransactionListener for the sink's group: it never sends, it answers check-backs from the
    journal (COMMIT / ROLLBACK / UNKNOW)."""

    def __init__(self, journal: SinkTransactionJournal) -> None:
        self.journal = journal

    def execute_local_transaction(self, msg: Message, arg: Any) -> Any:
        raise SinkError("the sink's check-back producer sends nothing")

    def check_local_transaction(self, msg_ext: Any) -> Any:
        from rmq_core.client import LocalTransactionState

        answer = self.journal.decide(msg_ext.properties.get(PROPERTY_SINK_TXN))
        log.info("rocketmq sink: check-back for %s answered %s", msg_ext.properties.get(PROPERTY_SINK_TXN), answer)
        return LocalTransactionState[answer + ("_MESSAGE" if answer in (COMMIT, ROLLBACK) else "")]


class TransactionalCommitter:
    """The driver's side of the transactional sink: the journal, the commits and rollbacks, the recovery of batches
    a dead driver left half-ended, and the check-back listener. Lives in the process that runs ``commit()``."""

    def __init__(self, opts: RocketMQWriteOptions, journal_dir: str | None, sink_id: str | None = None) -> None:
        self.opts = opts
        self.journal = SinkTransactionJournal(journal_dir, sink_id)
        self._checker: Any = None
        self.recover()

    def recover(self) -> int:
        """COMMIT again every batch recorded but not marked ended (a driver died mid-commit); the number of batches."""
        pending = self.journal.pending()
        for rec in pending:
            handles = [TransactionHandle(a, o, q, m) for a, o, q, m in rec.handles]
            end_transactions(self.opts, handles, commit=True)
            self.journal.mark_ended(rec.batch)
            log.warning("rocketmq sink: batch %s was committed by a driver that died mid-commit: ended now", rec.batch)
        return len(pending)

    def start_checker(self) -> None:
        if self._checker is not None:
            return
        from rmq_core.client import TransactionProducer

        assert self.opts.namesrv is not None
        checker = TransactionProducer(
            self.opts.producer_group,
            namesrv_addr=self.opts.namesrv,
            transaction_listener=_JournalCheckListener(self.journal),
            instance_name=f"rmq-spark-txsink-driver-{os.getpid()}-{time.time_ns()}",
            **self.opts.credentials,
        )
        checker.start()
        self._checker = checker

    def commit(self, messages: list[WriterCommitMessage | None], batch: str) -> int:
        """Commit the tasks' half messages of ``batch`` once: recorded, then ended, then marked; the number committed
        (0 when the batch was already committed by other task attempts: these are rolled back)."""
        self.start_checker()
        ours = [m for m in messages if isinstance(m, RocketMQCommitMessage)]
        tasks = frozenset(m.task_attempt for m in ours if m.handles)
        handles = _handles(messages)
        done = self.journal.get(batch)
        if done is not None and done.tasks != tasks:
            log.warning(
                "rocketmq sink: batch %s was committed before (a re-run): its new messages are rolled back", batch
            )
            end_transactions(self.opts, handles, commit=False)
            if not done.ended:
                self.recover()
            return 0
        if done is not None and done.ended:
            log.info("rocketmq sink: batch %s was committed and ended before: nothing to do", batch)
            return 0
        if done is None and not handles:
            return 0  # nothing sent: nothing to record
        if done is None:
            self.journal.record(batch, tasks, tuple(astuple(h) for h in handles))
        n = end_transactions(self.opts, handles, commit=True)
        self.journal.mark_ended(batch)
        return n

    def abort(self, messages: list[WriterCommitMessage | None]) -> int:
        return end_transactions(self.opts, _handles(messages), commit=False)

    def close(self) -> None:
        if self._checker is not None:
            self._checker.shutdown()
            self._checker = None


def astuple(h: TransactionHandle) -> tuple[str, int, int, str]:
    return (h.broker_addr, h.commitlog_offset, h.tran_state_table_offset, h.msg_id)


class _SinkWriterBase:
    """What both writers share: the options, the transactional scope (picklable, goes to the tasks) and the driver's
    committer (made in the process that commits, never pickled)."""

    journal_dir: str | None

    def __init__(self, opts: RocketMQWriteOptions, schema: StructType, journal_dir: str | None) -> None:
        validate_schema(schema, opts)
        self.opts = opts
        self.journal_dir = journal_dir
        self.scope: SinkTransactionScope | None = None
        self._committer: TransactionalCommitter | None = None
        if opts.transactional:
            # made in the driver: opening the journal creates the sink id and ends what a dead driver left
            self._committer = TransactionalCommitter(opts, journal_dir)
            self.scope = SinkTransactionScope(self._committer.journal.sink_id, f"job-{uuid.uuid4().hex}")

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_committer"] = None
        return state

    def committer(self) -> TransactionalCommitter:
        if self._committer is None:
            assert self.scope is not None
            self._committer = TransactionalCommitter(self.opts, self.journal_dir, self.scope.sink_id)
            if self._committer.journal.sink_id != self.scope.sink_id:
                raise SinkError(
                    f"the sink journal {self.journal_dir} now has id {self._committer.journal.sink_id}, "
                    f"not {self.scope.sink_id} as when the job was planned: was it replaced?"
                )
        return self._committer


class RocketMQDataSourceWriter(_SinkWriterBase, DataSourceWriter):
    def __init__(self, opts: RocketMQWriteOptions, schema: StructType) -> None:
        super().__init__(opts, schema, opts.transaction_journal)

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return write_rows(iterator, self.opts, self.scope)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.opts.transactional:
            assert self.scope is not None
            c = self.committer()
            try:
                n = c.commit(messages, self.scope.job_batch)
            finally:
                c.close()
            log.info("rocketmq sink: %d transactional messages committed (%d tasks)", n, len(messages))
            return
        log.info("rocketmq sink: %d messages sent by %d tasks", _total(messages), len(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.opts.transactional:
            c = self.committer()
            try:
                n = c.abort(messages)
            finally:
                c.close()
            log.warning("rocketmq sink: job aborted, %d transactional messages rolled back", n)
            return
        log.warning(
            "rocketmq sink: job aborted after %d messages were sent (at-least-once: they stay sent)", _total(messages)
        )


def stream_journal_dir(opts: RocketMQWriteOptions) -> str | None:
    if not opts.transactional:
        return None
    if opts.transaction_journal is not None:
        return opts.transaction_journal
    if opts.checkpoint_location is None:
        raise OptionError(
            "a transactional streaming sink needs a journal: set checkpointLocation (the journal goes in "
            "<checkpointLocation>/rocketmq-sink) or transactionJournal"
        )
    loc = opts.checkpoint_location
    if "://" in loc and not loc.startswith("file:"):
        raise OptionError(
            f"checkpointLocation {loc!r} is not a local path: set transactionJournal to a local directory"
        )
    return os.path.join(loc.removeprefix("file://").removeprefix("file:"), "rocketmq-sink")


class RocketMQStreamWriter(_SinkWriterBase, DataSourceStreamWriter):
    def __init__(self, opts: RocketMQWriteOptions, schema: StructType) -> None:
        super().__init__(opts, schema, stream_journal_dir(opts))

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return write_rows(iterator, self.opts, self.scope)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.transactional:
            n = self.committer().commit(messages, f"batch-{batchId}")
            log.info("rocketmq sink: batch %d: %d transactional messages committed", batchId, n)
            return
        log.info("rocketmq sink: batch %d: %d messages sent", batchId, _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.transactional:
            n = self.committer().abort(messages)
            log.warning("rocketmq sink: batch %d aborted, %d transactional messages rolled back", batchId, n)
            return
        log.warning(
            "rocketmq sink: batch %d aborted after %d messages were sent (at-least-once)", batchId, _total(messages)
        )
