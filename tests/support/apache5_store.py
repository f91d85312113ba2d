"""Moving a store between rmq_core's broker and Apache RocketMQ 5.x's (Maven Central jars, compat/apache/build.sh
VERSION): the settings both brokers get so their files match (16 MiB commit log, 6000-unit ConsumeQueues, 1 MiB timer
log files flushed every 200 ms), an Apache 5.x broker on a work directory, and a copy of its store for rmq_core.

``apache5(workdir, version)`` is an unstarted ``ApacheRocketMQ`` whose store (``<store>/broker``) rmq_core may fill
first; ``rmq_config(root)`` rmq_core's config on such a store; ``copy_apache_store(server, dest)`` copies a stopped
Apache broker's store without its ``lock`` file. Thread-safety: functions only.
"""

from __future__ import annotations

import os
import shutil

from rmq_core.broker import BrokerConfig

from support.apache_rocketmq import ApacheRocketMQ

APACHE_5 = "5.3.3"
APACHE_5_5 = "5.5.0"  # the POP store exchange only (tests/interop/test_pop_files_apache5.py)
TIMER_LOG_FILE = 1 << 20
APACHE_CONF = {"mappedFileSizeTimerLog": str(TIMER_LOG_FILE), "timerFlushIntervalMs": "200"}


def rmq_config(root: str) -> BrokerConfig:
    """rmq_core's broker on ``root`` with the file sizes tests/support/apache_rocketmq.py gives Apache."""
    return BrokerConfig(
        listen_port=0,
        broker_name="broker-a",
        store_path_root_dir=root,
        mapped_file_size_commit_log=16 * 1024 * 1024,
        mapped_file_size_consume_queue=6000 * 20,
        mapped_file_size_timer_log=TIMER_LOG_FILE,
        timer_flush_interval_ms=200,
    )


def apache5(workdir: str, version: str = APACHE_5) -> ApacheRocketMQ:
    """Apache's name server and broker ``version`` on ``workdir`` (not started); its store is ``store_root(server)``."""
    return ApacheRocketMQ(workdir, version=version, extra_broker_conf=APACHE_CONF)


def store_root(server: ApacheRocketMQ) -> str:
    return os.path.join(server.store, "broker")


def copy_apache_store(server: ApacheRocketMQ, dest: str) -> str:
    """A copy of the (stopped) Apache broker's store at ``dest``, without Apache's ``lock`` file."""
    shutil.copytree(store_root(server), dest, ignore=shutil.ignore_patterns("lock"))
    return dest
