"""The pytest plugin (entry point ``pytest11: rmq_core = rmq_core.testing.plugin``): RocketMQ fixtures and options.

Owns: the options ``--rocketmq-namesrv`` (test against an external cluster; nothing is started),
``--rocketmq-store`` (the in-process broker's store directory, kept after the session),
``--rocketmq-brokers N`` (a node of N broker processes instead) and
``--rocketmq-broker-conf`` (a RocketMQ broker.conf for the in-process broker); the marker
``rocketmq_topic(queues=N)``; the fixtures ``rocketmq_cluster`` (session), ``rocketmq_topic_factory``,
``rocketmq_topic``, ``rocketmq_producer`` and ``rocketmq_consumer`` (function).

Invariants: every fixture name starts with ``rocketmq_`` (a project's own ``broker``/``client`` fixtures are left
alone); nothing starts unless a test asks for a fixture; loading the plugin imports no broker, name server or
client code. Each ``rocketmq_topic`` is a new topic (unique name), so tests do not see each other's messages.
Thread-safety: pytest calls the hooks and fixtures from its main thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from rmq_core.testing.cluster import RocketMQCluster, connect_cluster, start_cluster
from rmq_core.testing.messaging import TestConsumer, TestProducer

DEFAULT_QUEUES = 4


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rocketmq", "RocketMQ fixtures (rmq_core.testing)")
    group.addoption(
        "--rocketmq-namesrv",
        metavar="HOST:PORT",
        default=None,
        help="run the rocketmq_* fixtures against this external name server (its brokers) instead of an "
        "in-process name server and broker",
    )
    group.addoption(
        "--rocketmq-store",
        metavar="DIR",
        default=None,
        help="store directory of the in-process broker (default: a temporary directory of the session)",
    )
    group.addoption(
        "--rocketmq-brokers",
        metavar="N",
        type=int,
        default=1,
        help="the in-process cluster as a node of N broker processes (rmq_core.node.Node; default 1: one broker "
        "in this process)",
    )
    group.addoption(
        "--rocketmq-access-key",
        metavar="KEY",
        default=None,
        help="ACL access key (RocketMQ 4.9 plain ACL, an admin account to create topics): every request signed",
    )
    group.addoption("--rocketmq-secret-key", metavar="SECRET", default=None, help="ACL secret key")
    group.addoption(
        "--rocketmq-broker-conf",
        metavar="FILE",
        default=None,
        help="a RocketMQ broker.conf for the in-process broker (listenPort defaults to a free port)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"rocketmq_topic(queues={DEFAULT_QUEUES}): the queue count of the rocketmq_topic fixture's topic"
    )
    if config.getoption("rocketmq_namesrv") and (
        config.getoption("rocketmq_store") or config.getoption("rocketmq_broker_conf")
    ):
        raise pytest.UsageError(
            "--rocketmq-namesrv uses an external cluster: --rocketmq-store and "
            "--rocketmq-broker-conf configure the in-process one; give one or the other"
        )


@pytest.fixture(scope="session")
def rocketmq_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RocketMQCluster]:
    """The session's cluster: ``.namesrv_addr``, ``.broker_addr``, ``.broker_addrs``, ``.create_topic()``.
    In-process (name server + broker on free ports) unless ``--rocketmq-namesrv`` names an external one."""
    namesrv = request.config.getoption("rocketmq_namesrv")
    credentials = {
        "access_key": request.config.getoption("rocketmq_access_key"),
        "secret_key": request.config.getoption("rocketmq_secret_key"),
    }
    if namesrv:
        external = connect_cluster(namesrv)
        external.credentials = credentials
        yield external
        return
    store = request.config.getoption("rocketmq_store") or tmp_path_factory.mktemp("rocketmq-store")
    cluster = start_cluster(
        store, request.config.getoption("rocketmq_broker_conf"), request.config.getoption("rocketmq_brokers")
    )
    cluster.credentials = credentials
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def rocketmq_topic_factory(rocketmq_cluster: RocketMQCluster) -> Callable[..., str]:
    """``make(queues=4, name=None) -> str``: creates a topic on every master of the cluster, routable on return."""

    def make(queues: int = DEFAULT_QUEUES, name: str | None = None) -> str:
        return rocketmq_cluster.create_topic(name, queues)

    return make


@pytest.fixture
def rocketmq_topic(request: pytest.FixtureRequest, rocketmq_topic_factory: Callable[..., str]) -> str:
    """A fresh topic's name; its queue count is ``@pytest.mark.rocketmq_topic(queues=N)`` (default 4)."""
    queues = DEFAULT_QUEUES
    marker = request.node.get_closest_marker("rocketmq_topic")
    if marker is not None:
        queues = int(marker.kwargs.get("queues", marker.args[0] if marker.args else DEFAULT_QUEUES))
    return rocketmq_topic_factory(queues)


@pytest.fixture
def rocketmq_producer(rocketmq_cluster: RocketMQCluster) -> Iterator[TestProducer]:
    """``rocketmq_producer.produce(topic, n)``: ``n`` SEND_OK sends, their SendResults (``.producer``: the client)."""
    helper = TestProducer(rocketmq_cluster.namesrv_addr, **rocketmq_cluster.credentials)
    try:
        yield helper
    finally:
        helper.close()


@pytest.fixture
def rocketmq_consumer(rocketmq_cluster: RocketMQCluster) -> Iterator[TestConsumer]:
    """``rocketmq_consumer.consume(topic, n, timeout=10.0)``: the next ``n`` messages (MessageExt) of the topic."""
    helper = TestConsumer(rocketmq_cluster.namesrv_addr, **rocketmq_cluster.credentials)
    try:
        yield helper
    finally:
        helper.close()
