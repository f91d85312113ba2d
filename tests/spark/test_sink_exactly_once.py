"""The transactional sink's exactly-once paths, driven as Spark drives the writers (``write`` per task, ``commit`` /
``abort`` in the driver; the writer pickled between them) against a real name server and broker:
- the driver killed (SIGKILL, a real process) in the middle of its ENDs: the next writer of the same journal ends
  the rest, and the topic holds every row exactly once;
- the check-back: the journal's listener answers COMMIT for the recorded task attempt, ROLLBACK for a failed one;
- a streaming micro-batch re-run after a restart is not committed twice;
- a damaged journal record is a clear error.
The same through Spark's engine (task retry, streaming restart) is in test_spark_sink_retry.py."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
from pyspark.sql.types import StringType, StructField, StructType

from rmq_core.broker import Broker
from rmq_core.client import TransactionProducer
from rmq_core.message import decode_messages
from rmq_core.spark.options import OptionError, parse_write_options
from rmq_core.spark.sink import (
    RocketMQCommitMessage,
    RocketMQDataSourceWriter,
    RocketMQStreamWriter,
    _JournalCheckListener,
)
from rmq_core.spark.sink_transaction_journal import PROPERTY_SINK_TXN, SinkTransactionJournal

from support.client_helpers_core import cluster
from support.spark_helpers import stored_count

SCHEMA = StructType([StructField("body", StringType())])
HALF = "RMQ_SYS_TRANS_HALF_TOPIC"
OP = "RMQ_SYS_TRANS_OP_HALF_TOPIC"


def _bodies(broker: Broker, topic: str) -> list[bytes]:
    out: list[bytes] = []
    store = broker.message_store
    for q in range(8):
        off, end = 0, store.get_max_offset_in_queue(topic, q)
        while off < end:
            r = store.get_message("check", topic, q, off, 1000)
            out.extend(m.body for m in decode_messages(r.body))
            off = r.next_begin_offset
    return out


def _opts(ns_addr: str, topic: str, **extra: str) -> Any:
    return parse_write_options({"namesrv": ns_addr, "topic": topic, "transactional": "true", **extra})


def _rows(prefix: str, n: int) -> list[dict[str, str]]:
    return [{"body": f"{prefix}-{i}"} for i in range(n)]


def _wait(cond: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


COMMIT_IN_CHILD = """
import pickle, sys
writer, messages = pickle.load(open(sys.argv[1], "rb"))
print("ready", flush=True)
writer.commit(messages)
print("done", flush=True)
"""


def test_a_driver_killed_mid_commit_is_ended_by_the_next_writer(tmp_path: Any) -> None:
    journal = str(tmp_path / "journal")
    with cluster(tmp_path) as (ns, (broker,)):
        opts = _opts(ns.address, "SinkEoKill", transactionJournal=journal)
        writer = RocketMQDataSourceWriter(opts, SCHEMA)
        messages = [writer.write(iter(_rows(f"t{t}", 1000))) for t in range(3)]  # three task attempts
        assert all(isinstance(m, RocketMQCommitMessage) and m.sent == 1000 for m in messages)
        assert stored_count(broker, HALF, 1) == 3000 and stored_count(broker, "SinkEoKill") == 0
        state = tmp_path / "commit.pickle"
        with open(state, "wb") as f:
            pickle.dump((writer, messages), f)  # as Spark ships the writer to the driver's commit process
        with subprocess.Popen(
            [sys.executable, "-c", COMMIT_IN_CHILD, str(state)],
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        ) as child:
            try:
                assert child.stdout is not None and child.stdout.readline().strip() == b"ready"
                _wait(lambda: stored_count(broker, OP, 1) > 0, "the first END")
                child.send_signal(signal.SIGKILL)
            finally:
                child.wait(10)
        time.sleep(0.5)  # an END already on the wire is still answered by the broker
        ended = stored_count(broker, OP, 1)
        assert 0 < ended < 3000, f"the driver was to die mid-commit, it had ended {ended} of 3000"
        assert stored_count(broker, "SinkEoKill") == ended
        record = SinkTransactionJournal(journal).pending()
        assert len(record) == 1 and len(record[0].handles) == 3000  # recorded before the first END, not ended
        RocketMQDataSourceWriter(opts, SCHEMA)  # the next writer of the journal (a restarted driver)
        bodies = _bodies(broker, "SinkEoKill")
        assert sorted(bodies) == sorted(f"t{t}-{i}".encode() for t in range(3) for i in range(1000))
        assert SinkTransactionJournal(journal).pending() == []


def test_the_check_back_commits_the_recorded_attempt_and_rolls_back_a_failed_one(tmp_path: Any) -> None:
    journal_dir = str(tmp_path / "journal")
    fast_check = {"transaction_check_interval": 300, "transaction_timeout": 200}
    with cluster(tmp_path, **fast_check) as (ns, (broker,)):
        opts = _opts(ns.address, "SinkEoCheck", transactionJournal=journal_dir)
        writer = RocketMQDataSourceWriter(opts, SCHEMA)
        failed = writer.write(iter(_rows("failed", 7)))  # an attempt Spark gave up on (its task failed)
        good = writer.write(iter(_rows("good", 5)))
        assert isinstance(failed, RocketMQCommitMessage) and isinstance(good, RocketMQCommitMessage)
        journal = SinkTransactionJournal(journal_dir)
        assert writer.scope is not None and journal.sink_id == writer.scope.sink_id
        # the driver recorded its decision and died before any END: only the check-back can end them now
        journal.record(writer.scope.job_batch, frozenset([good.task_attempt]), ())
        checker = TransactionProducer(
            opts.producer_group, namesrv_addr=ns.address, transaction_listener=_JournalCheckListener(journal)
        )
        checker.start()
        try:
            _wait(lambda: stored_count(broker, OP, 1) >= 12, "the check-backs' ENDs")
        finally:
            checker.shutdown()
        assert sorted(_bodies(broker, "SinkEoCheck")) == sorted(f"good-{i}".encode() for i in range(5))
        # a half message of another sink (same group) is not this journal's to decide
        assert journal.decide("othersink|job-1|x") == "UNKNOW"
        assert journal.decide(None) == "UNKNOW"


def test_a_micro_batch_rerun_after_a_restart_is_committed_once(tmp_path: Any) -> None:
    checkpoint = str(tmp_path / "chk")
    with cluster(tmp_path) as (ns, (broker,)):
        opts = _opts(ns.address, "SinkEoStream", checkpointLocation=checkpoint)
        first = RocketMQStreamWriter(opts, SCHEMA)
        first.commit([first.write(iter(_rows("b7", 10)))], 7)
        assert stored_count(broker, "SinkEoStream") == 10
        assert os.path.isdir(os.path.join(checkpoint, "rocketmq-sink"))  # the journal's default place
        # the query restarts from a checkpoint that did not record batch 7's commit: batch 7 runs again
        again = pickle.loads(pickle.dumps(RocketMQStreamWriter(opts, SCHEMA)))
        assert again.scope is not None and first.scope is not None and again.scope.sink_id == first.scope.sink_id
        again.commit([again.write(iter(_rows("b7", 10)))], 7)
        assert stored_count(broker, "SinkEoStream") == 10  # not again
        assert stored_count(broker, OP, 1) == 20  # the re-run's half messages rolled back
        again.commit([again.write(iter(_rows("b8", 4)))], 8)
        assert sorted(_bodies(broker, "SinkEoStream")) == sorted(
            [f"b7-{i}".encode() for i in range(10)] + [f"b8-{i}".encode() for i in range(4)]
        )
        # the same commit retried (same attempts): ends nothing twice
        retry = [again.write(iter(_rows("b9", 3)))]
        again.commit(retry, 9)
        ops = stored_count(broker, OP, 1)
        again.commit(retry, 9)
        assert stored_count(broker, "SinkEoStream") == 17 and stored_count(broker, OP, 1) == ops  # no END sent again
        again.committer().close()
        first.committer().close()


def test_journal_and_option_errors_are_clear(tmp_path: Any) -> None:
    with pytest.raises(OptionError, match="needs a journal"):
        RocketMQStreamWriter(_opts("127.0.0.1:1", "T"), SCHEMA)
    with pytest.raises(OptionError, match="not a local path"):
        RocketMQStreamWriter(_opts("127.0.0.1:1", "T", checkpointLocation="hdfs://nn/chk"), SCHEMA)
    journal = tmp_path / "j"
    SinkTransactionJournal(str(journal)).record("batch-1", frozenset(["a"]), (("127.0.0.1:1", 0, 0, "m"),))
    (journal / "batch-1.json").write_text('{"batch": "batch-1", "tasks": [')  # torn by hand
    with pytest.raises(ValueError, match=r"batch-1.json is unreadable"):
        SinkTransactionJournal(str(journal))
    assert PROPERTY_SINK_TXN == "RMQ_SPARK_SINK_TXN"


def test_the_journal_keeps_the_newest_ended_batches(tmp_path: Any) -> None:
    from rmq_core.spark.sink_transaction_journal import KEEP_ENDED

    journal = SinkTransactionJournal(str(tmp_path / "j"))
    for b in range(KEEP_ENDED + 5):
        journal.record(f"batch-{b}", frozenset(["t"]), ())
        journal.mark_ended(f"batch-{b}")
    journal.record("batch-open", frozenset(["t"]), ())  # not ended: kept whatever its age
    again = SinkTransactionJournal(str(tmp_path / "j"))
    names = os.listdir(tmp_path / "j")  # batch-<batch>.json, the batch named batch-<n> here
    kept = sorted(int(n[len("batch-batch-") : -len(".json")]) for n in names if n[len("batch-batch-") : -5].isdigit())
    assert kept == list(range(5, KEEP_ENDED + 5))
    assert again.get("batch-4") is None and again.get("batch-5") is not None
    assert [r.batch for r in again.pending()] == ["batch-open"]
