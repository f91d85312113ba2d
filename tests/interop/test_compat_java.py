"""Apache RocketMQ's own Java client (org.apache.rocketmq:rocketmq-client 4.9.7 from Maven Central, the compat/java
harness) against rmq_core's NameServer and Broker, in-process on 127.0.0.1: sync sends through an auto-created topic,
a push consumer with a tag filter whose committed offsets are read back after a restart, long polling, the lite pull
consumer, RECONSUME_LATER through the retry topic, an orderly consumer (queue locks) and a SQL92 selector.

The same scenarios (tests/support/java_scenarios.py) pass against Apache RocketMQ 4.9.7 itself (test_apache_broker_smoke.py).
Apache's Java client 5.5.0 (the same harness built against it) sends and pulls with its lite pull consumer in
subscribe and assign mode (LITE_PULL_MESSAGE, 361) and sends RocketMQ 5 timer messages (setDeliverTimeMs).
The Java programs are built by compat/java/build.sh (cached); set RMQ_COMPAT_JAVA=0 to skip explicitly."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.namesrv import NameServer

from support import java_scenarios as sc
from support.admin_helpers import wait_for_route
from support.java_compat import java_classpath

pytestmark = pytest.mark.compat_java


@pytest.fixture(scope="module")
def rmq_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """rmq_core's NameServer and Broker (auto-create topics and groups, SQL92 on): ``(namesrv_addr, broker_addr)``."""
    java_classpath()  # build (or reuse) the harness first, so a missing JDK/Maven is reported before anything starts
    root = tmp_path_factory.mktemp("rmq-cluster")
    ns = NameServer(listen_port=0).start()
    try:
        cfg = BrokerConfig(
            broker_ip1="127.0.0.1",
            listen_port=0,
            namesrv_addr=ns.address,
            broker_name="broker-a",
            store_path_root_dir=str(root / "broker"),
            enable_property_filter=True,
            mapped_file_size_commit_log=16 * 1024 * 1024,
            mapped_file_size_consume_queue=6000 * 20,
        )
        broker = Broker(cfg).start()
        try:
            wait_for_route(ns.address, "TBW102")
            yield ns.address, broker.address
        finally:
            broker.shutdown()
    finally:
        ns.shutdown()


@pytest.fixture
def log_dir(tmp_path) -> str:
    return os.path.join(str(tmp_path), "client-logs")


def test_java_producer_sync_send(rmq_cluster, log_dir):
    sc.scenario_producer(rmq_cluster[0], "java_produce", log_dir)


def test_java_push_consumer_tag_filter_and_resume(rmq_cluster, log_dir):
    sc.scenario_push_tag_filter_resume(rmq_cluster[0], "java_push", "java_push_group", log_dir)


def test_java_lite_pull_consumer(rmq_cluster, log_dir):
    sc.scenario_pull_consumer(rmq_cluster[0], "java_pull", "java_pull_group", log_dir)


def test_java_reconsume_later_through_retry_topic(rmq_cluster, log_dir):
    sc.scenario_reconsume_later(rmq_cluster[0], "java_retry", "java_retry_group", log_dir)


def test_java_orderly_consumer(rmq_cluster, log_dir):
    sc.scenario_orderly(rmq_cluster[0], "java_orderly", "java_orderly_group", log_dir)


def test_java_sql92_consumer(rmq_cluster, log_dir):
    sc.scenario_sql92(rmq_cluster[0], "java_sql", "java_sql_group", log_dir)


@pytest.mark.parametrize("mode", ["subscribe", "assign"])
def test_java_5x_lite_pull_consumer(rmq_cluster, log_dir, mode):
    sc.scenario_lite_pull_5x(rmq_cluster[0], f"J5LitePull_{mode}", f"j5_lite_{mode}", log_dir, mode, "5.5.0")


def test_java_5x_timer_messages(rmq_cluster, log_dir):
    """Apache's Java client 5.5.0: Message.setDeliverTimeMs / setDelayTimeSec to rmq_core's broker, received by its
    push consumer at the time (RocketMQ 5's timer messages, broker/timer/)."""
    sc.scenario_timer_5x(rmq_cluster[0], "J5Timer", "j5_timer_group", log_dir, "5.5.0")
