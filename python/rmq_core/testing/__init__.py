"""rmq_core.testing: test against RocketMQ without Docker. A pytest plugin (registered through the ``pytest11``
entry point as ``rmq_core``; fixtures ``rocketmq_cluster``, ``rocketmq_topic``, ``rocketmq_topic_factory``,
``rocketmq_producer``, ``rocketmq_consumer``; options ``--rocketmq-store``, ``--rocketmq-broker-conf``,
``--rocketmq-namesrv``) and the pieces it is made of, usable without pytest.

Importing this package imports no broker, name server or client code; they load when a cluster starts or a helper
is first used. See README.md, "Testing with pytest".
"""

from rmq_core.testing.cluster import RocketMQCluster, connect_cluster, start_cluster
from rmq_core.testing.messaging import TestConsumer, TestProducer
from rmq_core.testing.topic_admin import TopicAdminError, brokers_of, create_topic

__all__ = [
    "RocketMQCluster",
    "TestConsumer",
    "TestProducer",
    "TopicAdminError",
    "brokers_of",
    "connect_cluster",
    "create_topic",
    "start_cluster",
]
