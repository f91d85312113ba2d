"""The name server's route tables (``namesrv/routeinfo/RouteInfoManager.java``, 4.9 semantics with 5.x's per-broker
heartbeat timeout, zone name and acting-master flag).

Owns ``topic_queue_table``, ``broker_addr_table`` (0 is the master), ``cluster_addr_table``, ``broker_live_table``
and ``filter_server_table``. Invariants:
1. Only a master's registration (broker id 0) creates or updates QueueData, and only when it is the first one for
   that address or its topic-config data version changed; a slave's adds its address under its id.
2. One address appears under one broker id only (a slave promoted to master replaces its old id entry).
3. A broker name whose last address goes (unregister, expiry, closed connection) leaves the cluster table and every
   topic's queue data; a topic with no queue data left disappears.
4. A broker is expired when ``last_update + timeout < now`` (timeout 120 s unless the broker sent
   ``heartbeatTimeoutMillis``).
Thread-safety: none; every method runs on the name server's event loop (``NameServer`` offers thread-safe wrappers).
Details (the tables): docs/BROKER_DESIGN.md, 'Name server route tables'.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rmq_core.common.log_text import clip
from rmq_core.common.mix_all import MASTER_ID
from rmq_core.common.topic_config import TopicConfig
from rmq_core.remoting.body.route import (
    BrokerData,
    ClusterInfo,
    QueueData,
    RegisterBrokerResult,
    TopicList,
    TopicRouteData,
    data_version_equals,
)

log = logging.getLogger(__name__)

BROKER_CHANNEL_EXPIRED_TIME = 1000 * 60 * 2  # ms


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class BrokerLiveInfo:
    last_update_timestamp: int
    data_version: dict[str, int]
    channel: Any  # the Connection the broker registered on (None when registered without one)
    ha_server_addr: str | None
    heartbeat_timeout_millis: int = BROKER_CHANNEL_EXPIRED_TIME


@dataclass
class RouteInfoManager:
    topic_queue_table: dict[str, dict[str, QueueData]] = field(default_factory=dict)
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)
    broker_live_table: dict[str, BrokerLiveInfo] = field(default_factory=dict)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)

    # --- register / unregister ---------------------------------------------------------------------------------
    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str | None,
        topic_config_table: dict[str, TopicConfig] | None,
        data_version: dict[str, int] | None,
        filter_server_list: Iterable[str] | None = None,
        channel: Any = None,
        *,
        now_ms: int | None = None,
        zone_name: str | None = None,
        enable_acting_master: bool | None = None,
        heartbeat_timeout_millis: int | None = None,
    ) -> RegisterBrokerResult:
        """Record a broker's (re-)registration; for a slave the result carries its master's address and HA address."""
        now = _now_ms() if now_ms is None else now_ms
        dv = dict(data_version) if data_version is not None else {"counter": 0, "timestamp": 0}
        result = RegisterBrokerResult()

        self.cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)

        register_first = False
        bd = self.broker_addr_table.get(broker_name)
        if bd is None:
            register_first = True
            bd = BrokerData(cluster_name, broker_name, {})
            self.broker_addr_table[broker_name] = bd
        if enable_acting_master is not None:
            bd.enable_acting_master = enable_acting_master
        if zone_name is not None:
            bd.zone_name = zone_name

        # slave → master switch: the same ip:port must be recorded under one id only
        for bid in [k for k, v in bd.broker_addrs.items() if v == broker_addr and k != broker_id]:
            del bd.broker_addrs[bid]

        old_addr = bd.broker_addrs.get(broker_id)
        bd.broker_addrs[broker_id] = broker_addr
        if broker_id == MASTER_ID and old_addr != broker_addr:
            log.info(
                "cluster [%s] brokerName [%s] master address change from %s to %s",
                cluster_name,
                broker_name,
                old_addr,
                broker_addr,
            )
        register_first = register_first or old_addr is None

        if (
            topic_config_table is not None
            and broker_id == MASTER_ID
            and (register_first or self.is_broker_topic_config_changed(broker_addr, dv))
        ):
            for tc in topic_config_table.values():
                self._create_and_update_queue_data(broker_name, tc)

        prev = self.broker_live_table.get(broker_addr)
        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            now,
            dv,
            channel,
            ha_server_addr,
            heartbeat_timeout_millis if heartbeat_timeout_millis else BROKER_CHANNEL_EXPIRED_TIME,
        )
        if prev is None:
            log.info("new broker registered, %s HAServer: %s", broker_addr, ha_server_addr)

        if filter_server_list is not None:
            fsl = list(filter_server_list)
            if fsl:
                self.filter_server_table[broker_addr] = fsl
            else:
                self.filter_server_table.pop(broker_addr, None)

        if broker_id != MASTER_ID:
            master_addr = bd.broker_addrs.get(MASTER_ID)
            if master_addr is not None:
                master_live = self.broker_live_table.get(master_addr)
                if master_live is not None:
                    result.ha_server_addr = master_live.ha_server_addr
                    result.master_addr = master_addr
        return result

    def is_broker_topic_config_changed(self, broker_addr: str, data_version: dict[str, int]) -> bool:
        prev = self.query_broker_topic_config(broker_addr)
        return prev is None or not data_version_equals(prev, data_version)

    def query_broker_topic_config(self, broker_addr: str) -> dict[str, int] | None:
        live = self.broker_live_table.get(broker_addr)
        return None if live is None else live.data_version

    def update_broker_info_update_timestamp(self, broker_addr: str, now_ms: int) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update_timestamp = now_ms

    def _create_and_update_queue_data(self, broker_name: str, tc: TopicConfig) -> None:
        qd = QueueData.from_topic_config(broker_name, tc)
        by_broker = self.topic_queue_table.get(tc.topic_name)
        if by_broker is None:
            self.topic_queue_table[tc.topic_name] = {broker_name: qd}
            log.info("new topic registered, %s %s", clip(tc.topic_name), clip(qd))
            return
        old = by_broker.get(broker_name)
        by_broker[broker_name] = qd
        if old is not None and old != qd:
            log.info("topic changed, %s OLD: %s NEW: %s", clip(tc.topic_name), clip(old), clip(qd))

    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        live = self.broker_live_table.pop(broker_addr, None)
        log.info("unregisterBroker, remove from brokerLiveTable %s, %s", "OK" if live else "Failed", broker_addr)
        self.filter_server_table.pop(broker_addr, None)
        remove_broker_name = False
        bd = self.broker_addr_table.get(broker_name)
        if bd is not None:
            bd.broker_addrs.pop(broker_id, None)
            if not bd.broker_addrs:
                del self.broker_addr_table[broker_name]
                remove_broker_name = True
        if remove_broker_name:
            names = self.cluster_addr_table.get(cluster_name)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster_name]
            self._remove_topic_by_broker_name(broker_name)

    def _remove_topic_by_broker_name(self, broker_name: str) -> None:
        for topic in list(self.topic_queue_table):
            by_broker = self.topic_queue_table[topic]
            if by_broker.pop(broker_name, None) is not None:
                log.info("removeTopicByBrokerName, remove one broker's topic %s %s", topic, broker_name)
            if not by_broker:
                del self.topic_queue_table[topic]

    # --- queries -----------------------------------------------------------------------------------------------
    def pick_up_topic_route_data(self, topic: str) -> TopicRouteData | None:
        """The topic's route (copies), or None when no broker holds it or none of its brokers is known."""
        by_broker = self.topic_queue_table.get(topic)
        if not by_broker:
            return None
        route = TopicRouteData()
        route.queue_datas = [QueueData(**vars(qd)) for _, qd in sorted(by_broker.items())]
        for name in sorted(by_broker):
            bd = self.broker_addr_table.get(name)
            if bd is None:
                continue
            clone = bd.copy()
            route.broker_datas.append(clone)
            if self.filter_server_table:
                for addr in clone.broker_addrs.values():
                    fsl = self.filter_server_table.get(addr)
                    if fsl is not None:
                        route.filter_server_table[addr] = list(fsl)
        if not route.broker_datas:
            return None
        return route

    def get_all_cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            broker_addr_table={k: v.copy() for k, v in self.broker_addr_table.items()},
            cluster_addr_table={k: set(v) for k, v in self.cluster_addr_table.items()},
        )

    def get_all_topic_list(self) -> TopicList:
        return TopicList(topic_list=set(self.topic_queue_table))

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        """Drop the topic's route; with ``cluster_name`` only its queues on that cluster's brokers (4.9.7)."""
        if not cluster_name:
            self.topic_queue_table.pop(topic, None)
            return
        by_broker = self.topic_queue_table.get(topic)
        if by_broker is None:
            return
        for name in self.cluster_addr_table.get(cluster_name, ()):
            if by_broker.pop(name, None) is not None:
                log.info("deleteTopic, remove one broker's topic %s %s", name, topic)
        if not by_broker:
            del self.topic_queue_table[topic]

    def get_topics_by_cluster(self, cluster: str) -> TopicList:
        names = self.cluster_addr_table.get(cluster, set())
        return TopicList(topic_list={t for t, by in self.topic_queue_table.items() if names & by.keys()})

    def get_system_topic_list(self) -> TopicList:
        """The cluster and broker names (the topics brokers create for them) and one broker address (4.9.7)."""
        topics: set[str] = set()
        for cluster, names in self.cluster_addr_table.items():
            topics.add(cluster)
            topics |= names
        addr = None
        for bd in self.broker_addr_table.values():
            if bd.broker_addrs:
                addr = next(iter(bd.broker_addrs.values()))
                break
        return TopicList(topic_list=topics, broker_addr=addr)

    # --- liveness ----------------------------------------------------------------------------------------------
    def scan_not_active_broker(self, now_ms: int | None = None) -> int:
        """Expire brokers not heard from within their timeout: close their connection and drop their routes."""
        now = _now_ms() if now_ms is None else now_ms
        removed = 0
        for addr, live in list(self.broker_live_table.items()):
            if live.last_update_timestamp + live.heartbeat_timeout_millis < now:
                self.broker_live_table.pop(addr, None)
                log.warning("The broker channel expired, %s %dms", addr, live.heartbeat_timeout_millis)
                if live.channel is not None:
                    try:
                        live.channel.close()
                    except Exception:  # closing a dead connection must not stop the scan
                        log.exception("closing the expired broker's connection failed")
                self.on_channel_destroy(addr, None)
                removed += 1
        return removed

    def on_channel_destroy(self, remote_addr: str | None, channel: Any = None) -> None:
        """A connection closed: the broker registered on ``channel`` (else the broker whose address is
        ``remote_addr``) loses its address; a broker name left with none leaves every table."""
        found: str | None = None
        if channel is not None:
            for addr, live in self.broker_live_table.items():
                if live.channel is channel:
                    found = addr
                    break
        if found is None:
            found = remote_addr
        else:
            log.info("the broker's channel destroyed, %s, clean it's data structure at once", found)
        if not found:
            return
        self.broker_live_table.pop(found, None)
        self.filter_server_table.pop(found, None)

        broker_name_found: str | None = None
        remove_broker_name = False
        for name, bd in list(self.broker_addr_table.items()):
            for bid, addr in list(bd.broker_addrs.items()):
                if addr == found:
                    broker_name_found = name
                    del bd.broker_addrs[bid]
                    log.info("remove brokerAddr[%d, %s] from brokerAddrTable, because channel destroyed", bid, addr)
                    break
            if broker_name_found is not None:
                if not bd.broker_addrs:
                    remove_broker_name = True
                    del self.broker_addr_table[name]
                    log.info("remove brokerName[%s] from brokerAddrTable, because channel destroyed", name)
                break

        if broker_name_found is not None and remove_broker_name:
            for cluster in list(self.cluster_addr_table):
                names = self.cluster_addr_table[cluster]
                if broker_name_found in names:
                    names.discard(broker_name_found)
                    if not names:
                        del self.cluster_addr_table[cluster]
                    break
            self._remove_topic_by_broker_name(broker_name_found)
