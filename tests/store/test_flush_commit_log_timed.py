"""``flush_commit_log_timed`` (4.9.7's flushCommitLogTimed, default true) under ASYNC_FLUSH: puts leave the CommitLog
to the flush thread's periodic tick; with it off, a put wakes the thread once 4 pages (flushCommitLogLeastPages) are
appended and they are msynced well before the tick. The Python twin is checked here through its own CommitLog; the
Rust engine by ``timed_flush_leaves_the_commit_log_to_the_tick`` (rust/rmq-store/src/tests.rs), which reads the same
fact from its mapped file. Both engines read the key; the broker passes broker.conf's ``flushCommitLogTimed``.
"""

from __future__ import annotations

import os
import time

import pytest

from rmq_core.broker.broker_config import BrokerConfig
from rmq_core.message import Message
from rmq_core.store import StoreConfig

from support.helpers import Backend, small_config

PAGE = 4096


def _flushed_after_puts(backend: Backend, timed: bool) -> tuple[int, int]:
    store = backend.open(
        os.path.join(backend.tmp, f"store-{timed}"),
        config=small_config(
            mapped_file_size_commit_log=1 << 20,
            flush_interval_commit_log=600_000,  # no tick during the test
            flush_commit_log_timed=timed,
        ),
    )
    for i in range(12):  # one 2 KiB message per put, as a producer's sends: 24 KiB, past 4 pages
        assert store.put_messages([(Message("Timed", bytes([65 + i]) * 2048), 0)]).all_ok
    last = store._engine._commit_log.queue.last  # the twin's CommitLog (rmq_core._reference)
    deadline = time.monotonic() + 5
    while not timed and last.flushed == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.2)  # a wake-up, had a put sent one, has been served by now
    flushed, wrote = last.flushed, last.wrote
    store.close()
    return flushed, wrote


@pytest.mark.parametrize("backend", ["python"], indirect=True)
def test_a_timed_flush_leaves_the_commit_log_to_the_tick(backend: Backend) -> None:
    flushed, wrote = _flushed_after_puts(backend, timed=True)
    assert wrote > 4 * PAGE and flushed == 0
    flushed, _ = _flushed_after_puts(backend, timed=False)
    assert flushed >= 4 * PAGE


def test_the_default_is_4_9_7s_and_broker_conf_sets_it(tmp_path) -> None:
    assert StoreConfig().flush_commit_log_timed is True
    assert StoreConfig().to_engine()["flush_commit_log_timed"] is True
    conf = tmp_path / "broker.conf"
    conf.write_text("flushCommitLogTimed=false\nflushIntervalCommitLog=200\n")
    cfg = BrokerConfig.from_properties_file(str(conf))
    assert cfg.extra == {}
    store = cfg.to_store_config()
    assert store.flush_commit_log_timed is False and store.flush_interval_commit_log == 200
