"""The name server over real TCP on 127.0.0.1: brokers (masters and a slave) registering through BrokerOuterAPI,
routes in standard and fastjson form, TOPIC_NOT_EXIST, cluster info, the topic list, expiry after 120 s (injected
clock), route removal when a broker's connection closes, bad registrations leaving the tables unchanged."""

from __future__ import annotations

import asyncio
import copy
import json
import socket
import time
import zlib
from collections.abc import Callable
from typing import Any

import pytest

from rmq_core.broker.broker_outer_api import BrokerOuterAPI
from rmq_core.common.perm_name import PERM_READ, PERM_WRITE
from rmq_core.common.topic_config import TopicConfig
from rmq_core.namesrv import NameServer
from rmq_core.remoting.body.route import (
    ClusterInfo,
    RegisterBrokerBody,
    TopicList,
    TopicRouteData,
)
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import RegisterBrokerRequestHeader, encode_header
from rmq_core.remoting.remoting_client import RemotingClient

RW = PERM_READ | PERM_WRITE
CLUSTER = "DefaultCluster"
T0 = 1_700_000_000_000
A, A_SLAVE, B = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


@pytest.fixture
def ns(clock: Clock):
    server = NameServer(listen_port=0, scan_not_active_broker_interval_s=3600, now_ms=clock)
    server.start()
    yield server
    server.shutdown()


def run(coro):
    return asyncio.run(coro)


def wrapper(topics: dict[str, tuple[int, int, int]], counter: int = 1, timestamp: int = T0) -> dict[str, Any]:
    return {
        "topicConfigTable": {t: TopicConfig(t, r, w, p) for t, (r, w, p) in topics.items()},
        "dataVersion": {"timestamp": timestamp, "counter": counter},
    }


async def register(
    client: RemotingClient,
    ns: NameServer,
    name: str,
    addr: str,
    broker_id: int,
    topics: dict[str, tuple[int, int, int]],
    counter: int = 1,
    **kw: Any,
):
    results = await BrokerOuterAPI(client).register_broker_all(
        [ns.address],
        CLUSTER,
        addr,
        name,
        broker_id,
        addr.replace("10911", "10912"),
        wrapper(topics, counter),
        [],
        3.0,
        **kw,
    )
    assert len(results) == 1
    return results[0]


async def route(
    client: RemotingClient, ns: NameServer, topic: str, version: int | None = None, accept_standard: bool | None = None
) -> RemotingCommand:
    ext: dict[str, Any] = {"topic": topic}
    if accept_standard is not None:
        ext["acceptStandardJsonOnly"] = "true" if accept_standard else "false"
    req = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext)
    if version is not None:
        req.version = version
    return await client.invoke(ns.address, req)


async def eventually(pred: Callable[[], bool], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.01)


def snapshot(ns: NameServer) -> Any:
    def take() -> Any:
        rim = ns.route_info_manager
        return (
            copy.deepcopy(rim.topic_queue_table),
            copy.deepcopy(rim.broker_addr_table),
            copy.deepcopy(rim.cluster_addr_table),
            copy.deepcopy(rim.filter_server_table),
            {a: (li.last_update_timestamp, dict(li.data_version)) for a, li in rim.broker_live_table.items()},
        )

    return ns.call(take)


def has_topic(ns: NameServer, topic: str) -> bool:
    return ns.call(lambda: topic in ns.route_info_manager.topic_queue_table)


def dead_address() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"127.0.0.1:{port}"


# --- registration and routes -----------------------------------------------------------------------------------
def test_masters_and_slave_register_and_routes_hold_every_broker(ns):
    async def main():
        ca, cs, cb, c = RemotingClient(), RemotingClient(), RemotingClient(), RemotingClient()
        try:
            ra = await register(ca, ns, "broker-a", A, 0, {"T1": (8, 8, RW)})
            assert (ra.master_addr, ra.ha_server_addr) == (None, None)
            rs = await register(cs, ns, "broker-a", A_SLAVE, 1, {"T1": (8, 8, RW)})
            assert (rs.master_addr, rs.ha_server_addr) == (A, "10.0.0.1:10912")  # slaves learn their master
            await register(cb, ns, "broker-b", B, 0, {"T1": (4, 2, RW), "T2": (2, 2, PERM_READ)})

            resp = await route(c, ns, "T1")
            assert resp.code == ResponseCode.SUCCESS
            json.loads(resp.body)  # version 409 ≥ 401: standard JSON
            rd = TopicRouteData.decode(resp.body)
            assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in rd.queue_datas] == [
                ("broker-a", 8, 8, RW),
                ("broker-b", 4, 2, RW),
            ]
            assert {bd.broker_name: bd.broker_addrs for bd in rd.broker_datas} == {
                "broker-a": {0: A, 1: A_SLAVE},
                "broker-b": {0: B},
            }
            assert all(bd.cluster == CLUSTER for bd in rd.broker_datas)
            assert len(rd.publish_message_queues("T1")) == 8 + 2

            rd2 = TopicRouteData.decode((await route(c, ns, "T2")).body)
            assert [q.broker_name for q in rd2.queue_datas] == ["broker-b"]
            assert [bd.broker_name for bd in rd2.broker_datas] == ["broker-b"]
            assert rd2.publish_message_queues("T2") == [] and len(rd2.subscribe_message_queues("T2")) == 2
        finally:
            for cl in (ca, cs, cb, c):
                await cl.close()

    run(main())


def test_route_json_form_follows_client_version(ns):
    async def main():
        cb, c = RemotingClient(), RemotingClient()
        try:
            await register(cb, ns, "broker-a", A, 0, {"T": (4, 4, RW)})
            old = await route(c, ns, "T", version=399)  # V4_9_3: fastjson with bare broker-id keys
            assert old.code == ResponseCode.SUCCESS
            assert b'"brokerAddrs":{0:"10.0.0.1:10911"}' in old.body
            with pytest.raises(json.JSONDecodeError):
                json.loads(old.body)
            new = await route(c, ns, "T", version=401)
            assert json.loads(new.body)["brokerDatas"][0]["brokerAddrs"] == {"0": A}
            asked = await route(c, ns, "T", version=399, accept_standard=True)
            assert json.loads(asked.body)["brokerDatas"][0]["brokerAddrs"] == {"0": A}
            assert (
                TopicRouteData.decode(old.body) == TopicRouteData.decode(new.body) == TopicRouteData.decode(asked.body)
            )
        finally:
            await cb.close()
            await c.close()

    run(main())


def test_unknown_topic_answers_topic_not_exist(ns):
    async def main():
        c = RemotingClient()
        try:
            resp = await route(c, ns, "NoSuchTopic")
            assert resp.code == ResponseCode.TOPIC_NOT_EXIST == 17
            assert resp.remark.startswith("No topic route info in name server for the topic: NoSuchTopic\nSee ")
            assert resp.body is None
        finally:
            await c.close()

    run(main())


def test_cluster_info_and_all_topic_list(ns):
    async def main():
        ca, cs, cb, c = RemotingClient(), RemotingClient(), RemotingClient(), RemotingClient()
        try:
            await register(ca, ns, "broker-a", A, 0, {"T1": (4, 4, RW)})
            await register(cs, ns, "broker-a", A_SLAVE, 1, {"T1": (4, 4, RW)})
            await BrokerOuterAPI(cb).register_broker_all(
                [ns.address], "OtherCluster", B, "broker-b", 0, "h:1", wrapper({"T2": (1, 1, RW)}), [], 3.0
            )
            resp = await c.invoke(ns.address, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
            assert resp.code == ResponseCode.SUCCESS
            assert b"{0:" in resp.body  # as Java's name server writes it
            info = ClusterInfo.decode(resp.body)
            assert info.cluster_addr_table == {CLUSTER: {"broker-a"}, "OtherCluster": {"broker-b"}}
            assert info.broker_addr_table["broker-a"].broker_addrs == {0: A, 1: A_SLAVE}
            assert info.retrieve_all_addr_by_cluster(CLUSTER) == [A, A_SLAVE]

            resp = await c.invoke(ns.address, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
            assert resp.code == ResponseCode.SUCCESS
            assert TopicList.decode(resp.body).topic_list == {"T1", "T2"}
        finally:
            for cl in (ca, cs, cb, c):
                await cl.close()

    run(main())


def test_only_a_master_creates_queue_data(ns):
    async def main():
        cs, ca, c = RemotingClient(), RemotingClient(), RemotingClient()
        try:
            r = await register(cs, ns, "broker-a", A_SLAVE, 1, {"SlaveOnly": (4, 4, RW)})
            assert r.master_addr is None  # no master registered yet
            assert (await route(c, ns, "SlaveOnly")).code == ResponseCode.TOPIC_NOT_EXIST
            await register(ca, ns, "broker-a", A, 0, {"T": (4, 4, RW)})
            assert (await route(c, ns, "SlaveOnly")).code == ResponseCode.TOPIC_NOT_EXIST
            rd = TopicRouteData.decode((await route(c, ns, "T")).body)
            assert rd.broker_datas[0].broker_addrs == {0: A, 1: A_SLAVE}
        finally:
            for cl in (cs, ca, c):
                await cl.close()

    run(main())


def test_queue_data_changes_only_with_a_new_data_version(ns):
    async def main():
        cb, c = RemotingClient(), RemotingClient()
        try:
            await register(cb, ns, "broker-a", A, 0, {"T": (4, 4, RW)}, counter=1)
            await register(cb, ns, "broker-a", A, 0, {"T": (8, 8, RW), "U": (1, 1, RW)}, counter=1)
            rd = TopicRouteData.decode((await route(c, ns, "T")).body)
            assert rd.queue_datas[0].write_queue_nums == 4  # same data version: configs not re-read (as RocketMQ)
            assert (await route(c, ns, "U")).code == ResponseCode.TOPIC_NOT_EXIST
            await register(cb, ns, "broker-a", A, 0, {"T": (8, 8, RW), "U": (1, 1, RW)}, counter=2)
            rd = TopicRouteData.decode((await route(c, ns, "T")).body)
            assert rd.queue_datas[0].write_queue_nums == 8
            assert (await route(c, ns, "U")).code == ResponseCode.SUCCESS
        finally:
            await cb.close()
            await c.close()

    run(main())


def test_slave_promoted_to_master_keeps_one_entry_per_address(ns):
    async def main():
        cs, c = RemotingClient(), RemotingClient()
        try:
            await register(cs, ns, "broker-a", A_SLAVE, 1, {"T": (4, 4, RW)})
            await register(cs, ns, "broker-a", A_SLAVE, 0, {"T": (4, 4, RW)})
            rd = TopicRouteData.decode((await route(c, ns, "T")).body)
            assert rd.broker_datas[0].broker_addrs == {0: A_SLAVE}
        finally:
            await cs.close()
            await c.close()

    run(main())


def test_compressed_registration_and_unregister(ns):
    async def main():
        cb, c = RemotingClient(), RemotingClient()
        try:
            await register(cb, ns, "broker-a", A, 0, {"T": (3, 5, RW)}, compressed=True)
            rd = TopicRouteData.decode((await route(c, ns, "T")).body)
            assert (rd.queue_datas[0].read_queue_nums, rd.queue_datas[0].write_queue_nums) == (3, 5)
            done = await BrokerOuterAPI(cb).unregister_broker_all([ns.address], CLUSTER, A, "broker-a", 0)
            assert done == [ns.address]
            assert (await route(c, ns, "T")).code == ResponseCode.TOPIC_NOT_EXIST
            assert snapshot(ns)[1:3] == ({}, {})
        finally:
            await cb.close()
            await c.close()

    run(main())


def test_register_with_every_name_server_tolerating_a_dead_one(clock):
    async def main(ns1: NameServer, ns2: NameServer):
        cb = RemotingClient()
        try:
            api = BrokerOuterAPI(cb)
            addrs = [ns1.address, dead_address(), ns2.address]
            results = await api.register_broker_all(
                addrs, CLUSTER, A, "broker-a", 0, "h:1", wrapper({"T": (2, 2, RW)}), [], 2.0
            )
            assert sorted(r.namesrv_addr for r in results) == sorted([ns1.address, ns2.address])
            assert has_topic(ns1, "T") and has_topic(ns2, "T")
            done = await api.unregister_broker_all(addrs, CLUSTER, A, "broker-a", 0, 2.0)
            assert sorted(done) == sorted([ns1.address, ns2.address])
            assert not has_topic(ns1, "T") and not has_topic(ns2, "T")
            assert await api.register_broker_all([], CLUSTER, A, "broker-a", 0, "h:1", wrapper({}), [], 1.0) == []
        finally:
            await cb.close()

    with NameServer(0, now_ms=clock) as ns1, NameServer(0, now_ms=clock) as ns2:
        run(main(ns1, ns2))


# --- liveness --------------------------------------------------------------------------------------------------
def test_broker_expires_120s_after_its_last_registration(ns, clock):
    async def main():
        ca, cb, c = RemotingClient(), RemotingClient(), RemotingClient()
        try:
            await register(ca, ns, "broker-a", A, 0, {"T": (4, 4, RW)})
            clock.now = T0 + 60_000
            await register(cb, ns, "broker-b", B, 0, {"T": (4, 4, RW)})
            assert ns.scan_not_active_broker(T0 + 120_000) == 0  # expired only when last + 120 s < now
            assert ns.scan_not_active_broker(T0 + 120_001) == 1
            rd = TopicRouteData.decode((await route(c, ns, "T")).body)
            assert [bd.broker_name for bd in rd.broker_datas] == ["broker-b"]
            assert [q.broker_name for q in rd.queue_datas] == ["broker-b"]
            info = ClusterInfo.decode(
                (await c.invoke(ns.address, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))).body
            )
            assert set(info.broker_addr_table) == {"broker-b"} and info.cluster_addr_table == {CLUSTER: {"broker-b"}}
            assert ns.scan_not_active_broker(T0 + 180_001) == 1
            assert (await route(c, ns, "T")).code == ResponseCode.TOPIC_NOT_EXIST
            assert snapshot(ns)[1:3] == ({}, {})
        finally:
            for cl in (ca, cb, c):
                await cl.close()

    run(main())


def test_reregistering_every_30s_keeps_a_broker_alive(ns, clock):
    async def main():
        cb, c = RemotingClient(), RemotingClient()
        try:
            for i in range(6):  # t = 0, 30 s, ..., 150 s
                clock.now = T0 + 30_000 * i
                await register(cb, ns, "broker-a", A, 0, {"T": (4, 4, RW)})
                assert ns.scan_not_active_broker(clock.now + 29_999) == 0
            assert ns.scan_not_active_broker(T0 + 150_000 + 120_000) == 0
            assert (await route(c, ns, "T")).code == ResponseCode.SUCCESS
            assert ns.scan_not_active_broker(T0 + 150_000 + 120_001) == 1
            assert (await route(c, ns, "T")).code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await cb.close()
            await c.close()

    run(main())


def test_heartbeat_timeout_sent_by_the_broker_replaces_120s(ns, clock):
    async def main():
        cb = RemotingClient()
        try:
            await register(cb, ns, "broker-a", A, 0, {"T": (4, 4, RW)}, heartbeat_timeout_millis=10_000)
            assert ns.call(lambda: len(ns.remoting_server.connections)) == 1
            assert ns.scan_not_active_broker(T0 + 10_000) == 0
            assert ns.scan_not_active_broker(T0 + 10_001) == 1
            # as RocketMQ, the expired broker's connection is closed; it reconnects on its next registration
            await eventually(lambda: ns.call(lambda: len(ns.remoting_server.connections)) == 0)
            clock.now = T0 + 20_000
            api = BrokerOuterAPI(cb)
            for _ in range(100):  # a round racing the close may fail (logged); the broker's next round succeeds
                if await api.register_broker_all(
                    [ns.address], CLUSTER, A, "broker-a", 0, "h:1", wrapper({"T": (4, 4, RW)}), [], 1.0
                ):
                    break
                await asyncio.sleep(0.01)
            assert has_topic(ns, "T")
        finally:
            await cb.close()

    run(main())


def test_periodic_scan_expires_brokers_on_the_server_loop(clock):
    async def main(ns: NameServer):
        cb = RemotingClient()
        try:
            await register(cb, ns, "broker-a", A, 0, {"T": (4, 4, RW)})
            assert has_topic(ns, "T")
            clock.now = T0 + 120_001
            await eventually(lambda: not has_topic(ns, "T"))
            assert ns.call(lambda: dict(ns.route_info_manager.broker_live_table)) == {}
        finally:
            await cb.close()

    with NameServer(0, scan_not_active_broker_interval_s=0.02, now_ms=clock) as ns:
        run(main(ns))


def test_closing_a_brokers_connection_removes_its_routes(ns):
    async def main():
        ca, cs, cb, c = RemotingClient(), RemotingClient(), RemotingClient(), RemotingClient()
        try:
            await register(ca, ns, "broker-a", A, 0, {"TA": (4, 4, RW), "Shared": (4, 4, RW)})
            await register(cs, ns, "broker-a", A_SLAVE, 1, {"TA": (4, 4, RW)})
            await register(cb, ns, "broker-b", B, 0, {"Shared": (2, 2, RW)})

            await cs.close()  # the slave goes: broker-a keeps its master and its routes
            await eventually(
                lambda: ns.call(lambda: ns.route_info_manager.broker_addr_table["broker-a"].broker_addrs) == {0: A}
            )
            assert has_topic(ns, "TA")

            await ca.close()  # the master goes: broker-a's name, topics and queue data go
            await eventually(lambda: not has_topic(ns, "TA"))
            rd = TopicRouteData.decode((await route(c, ns, "Shared")).body)
            assert [bd.broker_name for bd in rd.broker_datas] == ["broker-b"]
            assert [q.broker_name for q in rd.queue_datas] == ["broker-b"]
            assert ns.call(lambda: set(ns.route_info_manager.broker_live_table)) == {B}
            assert ns.call(lambda: ns.route_info_manager.cluster_addr_table) == {CLUSTER: {"broker-b"}}

            await c.close()  # a client that never registered: nothing changes
            await asyncio.sleep(0.05)
            assert has_topic(ns, "Shared")
        finally:
            for cl in (ca, cs, cb, c):
                await cl.close()

    run(main())


# --- bad registrations -----------------------------------------------------------------------------------------
def _register_request(body: bytes | None, crc: int | None = None, **overrides: Any) -> RemotingCommand:
    header = RegisterBrokerRequestHeader(
        brokerName="broker-x",
        brokerAddr="10.9.9.9:10911",
        clusterName=CLUSTER,
        haServerAddr="10.9.9.9:10912",
        brokerId=0,
        compressed=False,
        bodyCrc32=(zlib.crc32(body) & 0x7FFFFFFF) if crc is None and body else crc,
    )
    ext = encode_header(header)
    for k, v in overrides.items():
        if v is None:
            ext.pop(k, None)
        else:
            ext[k] = v
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, ext, body)


GOOD_BODY = RegisterBrokerBody.from_wrapper(wrapper({"X": (2, 2, RW)})).encode()


@pytest.mark.parametrize(
    "request_factory,remark_part",
    [
        (lambda: _register_request(b"{not json"), "Failed to decode RegisterBrokerBody"),
        (
            lambda: _register_request(b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"X":{"perm":"rw"}}}}'),
            "perm",
        ),
        (lambda: _register_request(GOOD_BODY, crc=(zlib.crc32(GOOD_BODY) & 0x7FFFFFFF) ^ 1), "crc32 not match"),
        (lambda: _register_request(GOOD_BODY, brokerName=None), "the custom field <brokerName> is null"),
        (lambda: _register_request(GOOD_BODY, brokerId="zero"), "brokerId"),
        (lambda: _register_request(GOOD_BODY, compressed="true"), "Failed to decode RegisterBrokerBody"),
    ],
)
def test_bad_registration_answers_error_and_changes_nothing(ns, request_factory, remark_part):
    async def main():
        cb, c = RemotingClient(), RemotingClient()
        try:
            await register(cb, ns, "broker-a", A, 0, {"T": (4, 4, RW)})
            before = snapshot(ns)
            resp = await c.invoke(ns.address, request_factory())
            assert resp.code == ResponseCode.SYSTEM_ERROR
            assert remark_part in resp.remark
            assert snapshot(ns) == before
            assert (await route(c, ns, "X")).code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await cb.close()
            await c.close()

    run(main())


def test_registration_without_crc_or_body_is_accepted(ns):
    async def main():
        c = RemotingClient()
        try:
            resp = await c.invoke(ns.address, _register_request(GOOD_BODY, crc=0))  # 0 = not checked
            assert resp.code == ResponseCode.SUCCESS
            assert (await route(c, ns, "X")).code == ResponseCode.SUCCESS
            resp = await c.invoke(ns.address, _register_request(None, brokerAddr="10.9.9.8:10911", brokerId="1"))
            assert resp.code == ResponseCode.SUCCESS and resp.ext_fields.get("masterAddr") == "10.9.9.9:10911"
            assert resp.ext_fields.get("haServerAddr") == "10.9.9.9:10912"
        finally:
            await c.close()

    run(main())


def test_missing_header_fields_on_other_requests(ns):
    async def main():
        c = RemotingClient()
        try:
            resp = await c.invoke(ns.address, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {}))
            assert resp.code == ResponseCode.SYSTEM_ERROR and "<topic>" in resp.remark
            resp = await c.invoke(
                ns.address,
                RemotingCommand.request(
                    RequestCode.UNREGISTER_BROKER, {"brokerName": "b", "brokerAddr": "h:1", "clusterName": CLUSTER}
                ),
            )
            assert resp.code == ResponseCode.SYSTEM_ERROR and "<brokerId>" in resp.remark
        finally:
            await c.close()

    run(main())
