"""Apache RocketMQ 4.9.7's own name server and broker (from Maven Central, started by tests/support/apache_rocketmq.py) with
Apache's Java client (compat/java): proves the launcher and the harness, and that every expectation of
tests/support/java_scenarios.py is Apache's behaviour (the same scenarios run against rmq_core in test_compat_java.py)."""

from __future__ import annotations

import os

import pytest

from support import java_scenarios as sc
from support.apache_rocketmq import apache_rocketmq  # noqa: F401  (the module-scoped fixture)

pytestmark = pytest.mark.apache_broker


@pytest.fixture
def log_dir(tmp_path) -> str:
    return os.path.join(str(tmp_path), "client-logs")


def test_apache_launcher_addresses(apache_rocketmq):  # noqa: F811
    namesrv, broker = apache_rocketmq
    assert namesrv.startswith("127.0.0.1:") and broker.startswith("127.0.0.1:") and namesrv != broker


def test_producer_on_apache(apache_rocketmq, log_dir):  # noqa: F811
    sc.scenario_producer(apache_rocketmq[0], "apache_produce", log_dir)


def test_push_tag_filter_resume_on_apache(apache_rocketmq, log_dir):  # noqa: F811
    sc.scenario_push_tag_filter_resume(apache_rocketmq[0], "apache_push", "apache_push_group", log_dir)


def test_pull_consumer_on_apache(apache_rocketmq, log_dir):  # noqa: F811
    sc.scenario_pull_consumer(apache_rocketmq[0], "apache_pull", "apache_pull_group", log_dir)


def test_reconsume_later_on_apache(apache_rocketmq, log_dir):  # noqa: F811
    sc.scenario_reconsume_later(apache_rocketmq[0], "apache_retry", "apache_retry_group", log_dir)


def test_orderly_on_apache(apache_rocketmq, log_dir):  # noqa: F811
    sc.scenario_orderly(apache_rocketmq[0], "apache_orderly", "apache_orderly_group", log_dir)


def test_sql92_on_apache(apache_rocketmq, log_dir):  # noqa: F811
    sc.scenario_sql92(apache_rocketmq[0], "apache_sql", "apache_sql_group", log_dir)
