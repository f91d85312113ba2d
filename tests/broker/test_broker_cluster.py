"""Several real brokers — two masters with different names and a slave (broker id 1) of one of them — register with
one name server: the routes list every broker holding a topic, the slave under its master's name, and the slave
learns its master's address; a broker that shuts down leaves the routes."""

from __future__ import annotations

import time

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.namesrv import NameServer
from rmq_core.remoting.body.route import TopicRouteData

from support.admin_helpers import create_topic, route_of


def _wait(pred, timeout: float = 10.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.05)


def test_two_masters_and_a_slave_register_with_one_name_server(tmp_path) -> None:
    with NameServer(listen_port=0) as ns:

        def cfg(name: str, broker_id: int = 0, role: str = "ASYNC_MASTER") -> BrokerConfig:
            return BrokerConfig(
                broker_name=name,
                broker_id=broker_id,
                broker_role=role,
                listen_port=0,
                namesrv_addr=ns.address,
                store_path_root_dir=str(tmp_path / f"{name}-{broker_id}"),
            )

        with Broker(cfg("broker-a")) as a, Broker(cfg("broker-b")) as b, Broker(cfg("broker-a", 1, "SLAVE")) as a_slave:
            create_topic(a.address, "ClusterTopic", 4)
            create_topic(b.address, "ClusterTopic", 2)

            def complete() -> TopicRouteData | None:
                route = route_of(ns.address, "ClusterTopic")
                if route is None or len(route.queue_datas) < 2:
                    return None
                addrs = {bd.broker_name: bd.broker_addrs for bd in route.broker_datas}
                return route if len(addrs.get("broker-a", {})) == 2 else None

            route = _wait(complete)
            assert route is not None, "route never listed both brokers and the slave"
            queues = {qd.broker_name: (qd.read_queue_nums, qd.write_queue_nums) for qd in route.queue_datas}
            assert queues == {"broker-a": (4, 4), "broker-b": (2, 2)}
            addrs = {bd.broker_name: bd.broker_addrs for bd in route.broker_datas}
            assert addrs["broker-a"] == {0: a.address, 1: a_slave.address}
            assert addrs["broker-b"] == {0: b.address}
            assert {bd.cluster for bd in route.broker_datas} == {"DefaultCluster"}
            assert _wait(lambda: a_slave.controller.master_addr) == a.address
            assert a.controller.master_addr is None

        # shutting down unregisters: the topic has no route any more
        assert _wait(lambda: route_of(ns.address, "ClusterTopic") is None)
