"""BrokerMetrics: the broker's figures as a Prometheus text endpoint, under RocketMQ 5's metric names and labels
(broker/metrics/BrokerMetricsConstant.java), served by the optional ``prometheus_client`` (``rmq_core[metrics]``;
without it, starting the endpoint raises a RuntimeError saying so).

Owns the ``rocketmq_*`` metrics (messages and bytes in/out, consumer lag, storage size, topic/group/connection
counts); RocketMQ 5's ``rocketmq_rpc_latency`` is not exported.
Invariant: every figure is read when scraped, on the broker's loop (``call_on_loop``): no per-message work anywhere,
and the scrape thread never reads the loop's tables while they change.
Thread-safety: ``collect`` runs on the HTTP server's thread and hops to the loop; start/stop from any thread.
Details (the metric list): docs/BROKER_DESIGN.md, 'Prometheus metrics'.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rmq_core.broker.stats.broker_stats_manager import (
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
)

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.client.consumer_manager import ConsumerManager
    from rmq_core.broker.client.producer_manager import ProducerManager
    from rmq_core.broker.consumer_offset_manager import ConsumerOffsetManager
    from rmq_core.broker.stats.broker_stats_manager import BrokerStatsManager
    from rmq_core.broker.subscription_group_manager import SubscriptionGroupManager
    from rmq_core.broker.topic_config_manager import TopicConfigManager
    from rmq_core.store import MessageStore

log = logging.getLogger(__name__)


@dataclass
class MetricsSnapshot:
    """Plain copies of what one scrape exports, taken on the broker's loop."""

    stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    lag: dict[tuple[str, str], int] = field(default_factory=dict)
    storage_size: int = 0
    topic_number: int = 0
    consumer_group_number: int = 0
    producer_connections: int = 0
    consumer_connections: int = 0


def _dir_size(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:  # a file deleted while walking
                pass
    return total


class BrokerMetrics:
    """``BrokerMetrics(...collaborators, call_on_loop)``; ``start(host, port)`` serves ``/metrics``; ``port``."""

    def __init__(
        self,
        broker_config: BrokerConfig,
        message_store: MessageStore,
        stats_manager: BrokerStatsManager,
        topic_config_manager: TopicConfigManager,
        subscription_group_manager: SubscriptionGroupManager,
        consumer_offset_manager: ConsumerOffsetManager,
        consumer_manager: ConsumerManager,
        producer_manager: ProducerManager,
        call_on_loop: Callable[[Callable[[], MetricsSnapshot]], MetricsSnapshot],
    ) -> None:
        self.broker_config = broker_config
        self.message_store = message_store
        self.stats_manager = stats_manager
        self.topic_config_manager = topic_config_manager
        self.subscription_group_manager = subscription_group_manager
        self.consumer_offset_manager = consumer_offset_manager
        self.consumer_manager = consumer_manager
        self.producer_manager = producer_manager
        self.call_on_loop = call_on_loop
        self._server: Any = None
        self._thread: Any = None
        self.port = 0

    # --- reading (on the loop) ---------------------------------------------------------------------------------
    def snapshot(self) -> MetricsSnapshot:
        snap = MetricsSnapshot(stats=self.stats_manager.snapshot())
        store = self.message_store
        for key, by_queue in self.consumer_offset_manager.offset_table.items():
            topic, _, group = key.partition("@")
            lag = 0
            for qid, committed in by_queue.items():
                lag += max(store.get_max_offset_in_queue(topic, int(qid)) - committed, 0)
            snap.lag[(topic, group)] = lag
        root = self.broker_config.store_path_root_dir
        snap.storage_size = _dir_size(os.path.join(root, "commitlog")) + _dir_size(os.path.join(root, "consumequeue"))
        snap.topic_number = len(self.topic_config_manager.topic_config_table)
        snap.consumer_group_number = len(self.subscription_group_manager.subscription_group_table)
        snap.producer_connections = sum(len(t) for t in self.producer_manager.group_channel_table.values())
        snap.consumer_connections = sum(
            len(info.channel_info_table) for info in self.consumer_manager.consumer_table.values()
        )
        return snap

    # --- prometheus_client Collector -------------------------------------------------------------------------
    def describe(self) -> list[Any]:
        return []  # figures are produced at scrape time only (an unchecked collector)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        snap = self.call_on_loop(self.snapshot)
        base = ["cluster", "node_type", "node_id"]
        node = [self.broker_config.broker_cluster_name, "broker", self.broker_config.broker_name]

        def counter(name: str, doc: str, stat: str, group_keyed: bool) -> Any:
            labels = base + (["topic", "consumer_group"] if group_keyed else ["topic"])
            family = CounterMetricFamily(name, doc, labels=labels)
            for key, item in sorted(snap.stats.get(stat, {}).items()):
                parts = key.split("@", 1) if group_keyed else [key]
                if group_keyed and len(parts) != 2:
                    continue
                family.add_metric(node + parts, float(item["value"]))
            return family

        yield counter("rocketmq_messages_in", "Messages put to the broker, per topic.", TOPIC_PUT_NUMS, False)
        yield counter("rocketmq_throughput_in", "Bytes put to the broker, per topic.", TOPIC_PUT_SIZE, False)
        yield counter("rocketmq_messages_out", "Messages pulled by consumers.", GROUP_GET_NUMS, True)
        yield counter("rocketmq_throughput_out", "Bytes pulled by consumers.", GROUP_GET_SIZE, True)
        lag = GaugeMetricFamily(
            "rocketmq_consumer_lag_messages",
            "Messages not yet consumed (max offset - committed offset), per topic and group.",
            labels=base + ["topic", "consumer_group"],
        )
        for (topic, group), value in sorted(snap.lag.items()):
            lag.add_metric(node + [topic, group], float(value))
        yield lag
        for name, doc, value in (
            ("rocketmq_storage_size", "Bytes of the store's commitlog and consumequeue files.", snap.storage_size),
            ("rocketmq_topic_number", "Topics configured on the broker.", snap.topic_number),
            ("rocketmq_consumer_group_number", "Subscription groups on the broker.", snap.consumer_group_number),
            ("rocketmq_producer_connections", "Producer connections.", snap.producer_connections),
            ("rocketmq_consumer_connections", "Consumer connections.", snap.consumer_connections),
        ):
            gauge = GaugeMetricFamily(name, doc, labels=base)
            gauge.add_metric(node, float(value))
            yield gauge

    # --- the endpoint ----------------------------------------------------------------------------------------
    def start(self, host: str, port: int) -> int:
        """Serve ``http://host:port/metrics`` on a daemon thread (port 0: a free one); the bound port."""
        try:
            from prometheus_client import CollectorRegistry, start_http_server
        except ImportError:
            raise RuntimeError(
                "the metrics endpoint needs prometheus_client: pip install 'rmq_core[metrics]'"
            ) from None
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        self.port = int(self._server.server_port)
        log.info("metrics at http://%s:%d/metrics", host, self.port)
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
