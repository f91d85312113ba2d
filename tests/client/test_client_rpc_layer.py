"""The RocketMQ RPC layer over real TCP against an in-process name server and broker: every RPC through the async face
(``MQClientAPIImpl`` over a ``RemotingClient``) and through the blocking face (``BlockingMQClientAPI``), with the same
answers; the name-server rule (``NameServerSelector``: a dead address skipped, the chosen one kept, a dead chosen one
left round robin, a timeout not moving the choice); and the one error hierarchy carrying code, remark and address."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from rmq_core.client import MQBrokerException, MQClientException, RocketMQRpcError
from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI
from rmq_core.client.client_config import ClientConfig
from rmq_core.client.exceptions import RemotingConnectError, RemotingError, RemotingTimeoutError
from rmq_core.client.message_batch import MessageBatch
from rmq_core.client.mq_client_api import MQClientAPIImpl
from rmq_core.client.name_server_selector import NameServerSelector
from rmq_core.client.pull_result import PullStatus
from rmq_core.client.send_result import SendStatus
from rmq_core.common import sys_flag
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.common.topic_config import TopicConfig
from rmq_core.filter.subscription_data import build_subscription_data
from rmq_core.message import Message, MessageQueue, decode_messages
from rmq_core.message_encoding import properties_to_string
from rmq_core.namesrv import NameServer
from rmq_core.remoting.body.heartbeat import ConsumerData, HeartbeatData
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.header import (
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SendMessageRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rmq_core.remoting.remoting_client import RemotingClient

from support.client_helpers_core import SilentServer, cluster
from support.send_helpers import send_header

TIMEOUT = 3000


def _dead_addr() -> str:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def _send_header(topic: str, queue_id: int, msg: Message) -> SendMessageRequestHeader:
    props = properties_to_string(msg.properties)
    return send_header(topic, queue_id=queue_id, properties=props, batch=isinstance(msg, MessageBatch))


def _pull_header(topic: str, queue_id: int, offset: int) -> PullMessageRequestHeader:
    return PullMessageRequestHeader(
        consumerGroup="RpcGroup",
        topic=topic,
        queueId=queue_id,
        queueOffset=offset,
        maxMsgNums=32,
        sysFlag=sys_flag.build_pull_sys_flag(commit_offset=False, suspend=False, subscription=True),
        commitOffset=0,
        suspendTimeoutMillis=0,
        subscription="*",
        subVersion=0,
        expressionType="TAG",
    )


def _batch(topic: str, bodies: list[bytes]) -> MessageBatch:
    batch = MessageBatch.generate_from_list([Message(topic, b) for b in bodies])
    batch.body = batch.encode()
    return batch


# --- every RPC, blocking face ------------------------------------------------------------------------------------
def test_blocking_face_every_rpc(tmp_path: Path) -> None:
    with cluster(tmp_path) as (ns, [broker]), BlockingMQClientAPI(ns.address, TIMEOUT) as api:
        addr = broker.address
        # GET_BROKER_CLUSTER_INFO
        info = api.get_broker_cluster_info()
        assert info.master_addrs() == {"broker-a": addr} == api.master_addrs()
        assert info.master_addrs("DefaultCluster") == {"broker-a": addr} and info.master_addrs("NoCluster") == {}
        # UPDATE_AND_CREATE_TOPIC, then GET_ROUTEINFO_BY_TOPIC until routed with the read queues
        route = api.create_topic_and_wait([addr], TopicConfig("RpcTopic", 3, 3))
        assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums) for q in route.queue_datas] == [
            ("broker-a", 3, 3)
        ]
        assert route.find_broker_addr("broker-a") == addr
        assert api.get_topic_route_info_from_name_server("RpcTopic") == route
        # GET_ALL_TOPIC_LIST_FROM_NAMESERVER
        assert {"RpcTopic", "TBW102", "broker-a"} <= api.get_topic_list_from_name_server().topic_list
        # SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE
        one = Message("RpcTopic", b"one", tags="A")
        r = api.send_message(addr, "broker-a", one, _send_header("RpcTopic", 1, one))
        assert r.send_status == SendStatus.SEND_OK and r.queue_offset == 0
        assert r.message_queue == MessageQueue("RpcTopic", "broker-a", 1)
        batch = _batch("RpcTopic", [b"two", b"three"])
        r = api.send_message(addr, "broker-a", batch, _send_header("RpcTopic", 1, batch))
        assert r.send_status == SendStatus.SEND_OK and r.queue_offset == 1
        # GET_MIN_OFFSET, GET_MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP
        assert (api.get_min_offset(addr, "RpcTopic", 1), api.get_max_offset(addr, "RpcTopic", 1)) == (0, 3)
        assert api.get_max_offset(addr, "RpcTopic", 0) == 0
        assert api.search_offset(addr, "RpcTopic", 1, 0) == 0
        # PULL_MESSAGE: FOUND, then NO_NEW_MSG at the end
        p = api.pull_message(addr, _pull_header("RpcTopic", 1, 0))
        assert p.pull_status == PullStatus.FOUND and (p.next_begin_offset, p.min_offset, p.max_offset) == (3, 0, 3)
        assert p.message_binary is not None
        assert [m.body for m in decode_messages(p.message_binary)] == [b"one", b"two", b"three"]
        assert api.pull_message(addr, _pull_header("RpcTopic", 1, 3)).pull_status == PullStatus.NO_NEW_MSG
        # UPDATE_CONSUMER_OFFSET then QUERY_CONSUMER_OFFSET
        api.update_consumer_offset(addr, UpdateConsumerOffsetRequestHeader("RpcGroup", "RpcTopic", 1, 2))
        assert api.query_consumer_offset(addr, QueryConsumerOffsetRequestHeader("RpcGroup", "RpcTopic", 1)) == 2
        # UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
        api.create_subscription_group(addr, SubscriptionGroupConfig("RpcQuietGroup", consume_enable=False))
        cfg = broker.controller.subscription_group_manager.subscription_group_table.get("RpcQuietGroup")
        assert cfg is not None and cfg.consume_enable is False


# --- every RPC, async face, and the same answers as the blocking face ---------------------------------------------
def test_async_face_every_rpc_and_the_faces_agree(tmp_path: Path) -> None:
    with cluster(tmp_path) as (ns, [broker]):
        addr = broker.address

        async def scenario() -> dict[str, object]:
            api = MQClientAPIImpl(RemotingClient(), ClientConfig(namesrv_addr=ns.address))
            try:
                out: dict[str, object] = {"cluster": await api.get_broker_cluster_info(TIMEOUT)}
                await api.create_topic(addr, TopicConfig("RpcAsync", 2, 2), TIMEOUT)
                for _ in range(200):  # the broker registers the new topic in the background
                    try:
                        out["route"] = await api.get_topic_route_info_from_name_server("RpcAsync", TIMEOUT)
                        break
                    except MQClientException:
                        await asyncio.sleep(0.05)
                out["topics"] = (await api.get_topic_list_from_name_server(TIMEOUT)).topic_list
                msg = Message("RpcAsync", b"a1")
                sent = await api.send_message(addr, "broker-a", msg, _send_header("RpcAsync", 0, msg), TIMEOUT)
                assert sent is not None and sent.send_status == SendStatus.SEND_OK
                batch = _batch("RpcAsync", [b"a2", b"a3"])
                await api.send_message(addr, "broker-a", batch, _send_header("RpcAsync", 0, batch), TIMEOUT)
                one_way = Message("RpcAsync", b"a4")
                header = _send_header("RpcAsync", 0, one_way)
                assert await api.send_message(addr, "broker-a", one_way, header, TIMEOUT, "ONEWAY") is None
                out["offsets"] = [
                    await api.get_min_offset(addr, "RpcAsync", 0, TIMEOUT),
                    await api.get_max_offset(addr, "RpcAsync", 0, TIMEOUT),
                    await api.search_offset(addr, "RpcAsync", 0, 0, TIMEOUT),
                ]
                pulled = await api.pull_message(addr, _pull_header("RpcAsync", 0, 0), TIMEOUT)
                assert pulled.pull_status == PullStatus.FOUND and pulled.message_binary is not None
                out["bodies"] = [m.body for m in decode_messages(pulled.message_binary)]
                await api.update_consumer_offset(
                    addr, UpdateConsumerOffsetRequestHeader("RpcGroup", "RpcAsync", 0, 3), TIMEOUT
                )
                query = QueryConsumerOffsetRequestHeader("RpcGroup", "RpcAsync", 0)
                out["committed"] = await api.query_consumer_offset(addr, query, TIMEOUT)
                # HEART_BEAT registers the consumer; GET_CONSUMER_LIST_BY_GROUP lists it; UNREGISTER_CLIENT removes it
                hb = HeartbeatData(
                    "127.0.0.1@rpc",
                    consumer_data_set=[
                        ConsumerData("RpcGroup", subscription_data_set=[build_subscription_data("RpcAsync", "*")])
                    ],
                )
                await api.send_heartbeat(addr, hb, TIMEOUT)
                out["consumers"] = await api.get_consumer_id_list_by_group(addr, "RpcGroup", TIMEOUT)
                await api.unregister_client(addr, "127.0.0.1@rpc", None, "RpcGroup", TIMEOUT)
                with pytest.raises(MQBrokerException) as ei:
                    await api.get_consumer_id_list_by_group(addr, "RpcGroup", TIMEOUT)
                assert ei.value.response_code == ResponseCode.SYSTEM_ERROR
                group = SubscriptionGroupConfig("RpcAsyncGroup", consume_broadcast_enable=False)
                await api.create_subscription_group(addr, group, TIMEOUT)
                return out
            finally:
                await api.close()

        got = asyncio.run(scenario())
        assert "route" in got, "the name server never routed RpcAsync"
        # the oneway send is written when the call returns, stored a moment later
        assert got["offsets"][0] == 0 and got["offsets"][1] in (3, 4) and got["offsets"][2] == 0  # type: ignore[index]
        assert got["bodies"] == [b"a1", b"a2", b"a3", b"a4"][: len(got["bodies"])]  # type: ignore[arg-type]
        assert len(got["bodies"]) >= 3  # type: ignore[arg-type]
        assert got["committed"] == 3 and got["consumers"] == ["127.0.0.1@rpc"]
        group = broker.controller.subscription_group_manager.subscription_group_table.get("RpcAsyncGroup")
        assert group is not None and group.consume_broadcast_enable is False
        with BlockingMQClientAPI(ns.address, TIMEOUT) as blocking:
            assert blocking.get_broker_cluster_info() == got["cluster"]
            assert blocking.get_topic_route_info_from_name_server("RpcAsync") == got["route"]
            topics = got["topics"]  # the heartbeat has since added the group's retry topic
            assert isinstance(topics, set) and "RpcAsync" in topics
            assert topics | {"%RETRY%RpcGroup"} == blocking.get_topic_list_from_name_server().topic_list
            query = QueryConsumerOffsetRequestHeader("RpcGroup", "RpcAsync", 0)
            assert blocking.query_consumer_offset(addr, query) == got["committed"]


# --- the name-server rule ----------------------------------------------------------------------------------------
def test_a_dead_first_name_server_is_skipped_and_the_live_one_kept(tmp_path: Path) -> None:
    dead = _dead_addr()
    with cluster(tmp_path) as (ns, [broker]), BlockingMQClientAPI(f"{dead};{ns.address}", TIMEOUT) as api:
        api.api.name_server_selector = NameServerSelector(index=-1)  # the round robin starts at the dead one
        assert api.chosen_namesrv_addr is None
        assert api.get_topic_route_info_from_name_server("TBW102").find_broker_addr("broker-a") == broker.address
        assert api.chosen_namesrv_addr == ns.address
        # kept: the next requests go to the chosen one, the dead one is not tried again
        for _ in range(3):
            assert api.get_broker_cluster_info().master_addrs() == {"broker-a": broker.address}
        assert api.chosen_namesrv_addr == ns.address


def test_a_chosen_name_server_that_dies_is_left_round_robin() -> None:
    a, b = NameServer(listen_port=0).start(), NameServer(listen_port=0).start()
    try:
        with BlockingMQClientAPI(f"{a.address};{b.address}", TIMEOUT) as api:
            api.get_broker_cluster_info()
            first = api.chosen_namesrv_addr
            assert first in (a.address, b.address)
            for _ in range(4):  # kept while it answers, not rotated per request
                api.get_topic_list_from_name_server()
                assert api.chosen_namesrv_addr == first
            survivor = b if first == a.address else a
            (a if survivor is b else b).shutdown()
            assert api.get_topic_list_from_name_server().topic_list == set()
            assert api.chosen_namesrv_addr == survivor.address
    finally:
        for n in (a, b):
            n.shutdown()


def test_no_name_server_reachable_is_the_last_connect_error() -> None:
    dead1, dead2 = _dead_addr(), _dead_addr()
    with BlockingMQClientAPI(f"{dead1};{dead2}", TIMEOUT) as api:
        with pytest.raises(RemotingConnectError) as ei:
            api.get_broker_cluster_info()
        assert ei.value.addr in (dead1, dead2) and ei.value.response_code == -1
        assert api.chosen_namesrv_addr is None
    with BlockingMQClientAPI(None, TIMEOUT) as api:
        with pytest.raises(MQClientException) as ci:
            api.get_broker_cluster_info()
        assert ci.value.response_code == 10004  # ClientErrorCode.NO_NAME_SERVER_EXCEPTION


def test_a_timeout_does_not_move_the_choice() -> None:
    silent = SilentServer()
    live = NameServer(listen_port=0).start()
    try:
        with BlockingMQClientAPI(f"{silent.address};{live.address}", 300) as api:
            api.api.name_server_selector = NameServerSelector(index=-1)  # the silent one first
            with pytest.raises(RemotingTimeoutError):
                api.get_broker_cluster_info()
            assert api.chosen_namesrv_addr == silent.address  # connected: still the choice
            with pytest.raises(RemotingTimeoutError):
                api.get_broker_cluster_info()
    finally:
        live.shutdown()
        silent.close()


def test_selector_round_robin_from_its_index() -> None:
    addrs = ["n0", "n1", "n2"]
    s = NameServerSelector(index=1)
    assert list(s.rotation(addrs)) == ["n2", "n0", "n1"]  # each once, after the index
    assert list(s.rotation(addrs)) == ["n2", "n0", "n1"]  # the index advanced a full turn
    s.choose("n0")
    assert s.current(addrs) == "n0" and s.current(["n1", "n2"]) is None  # a new list without it drops it
    s.choose("n1")
    s.forget("n1")
    assert s.chosen is None
    assert {NameServerSelector().current(addrs) for _ in range(3)} == {None}


# --- one error hierarchy -----------------------------------------------------------------------------------------
def test_errors_carry_code_remark_and_address(tmp_path: Path) -> None:
    assert issubclass(MQClientException, RocketMQRpcError) and issubclass(MQBrokerException, RocketMQRpcError)
    assert issubclass(RemotingConnectError, RemotingError) and issubclass(RemotingError, RocketMQRpcError)
    assert issubclass(RemotingConnectError, ConnectionError) and issubclass(RemotingTimeoutError, TimeoutError)
    with cluster(tmp_path) as (ns, [broker]), BlockingMQClientAPI(ns.address, TIMEOUT) as api:
        addr = broker.address
        with pytest.raises(MQClientException) as route:
            api.get_topic_route_info_from_name_server("NoSuchRpcTopic")
        assert route.value.response_code == ResponseCode.TOPIC_NOT_EXIST and route.value.addr == ns.address
        assert (route.value.remark or "").startswith("No topic route info in name server for the topic: NoSuchRpc")
        with pytest.raises(MQBrokerException) as nobody:
            api.get_consumer_id_list_by_group(addr, "nobody_here")
        assert nobody.value.response_code == ResponseCode.SYSTEM_ERROR and nobody.value.addr == addr
        assert nobody.value.remark == "no consumer for this group, nobody_here"
        assert "CODE: 1  DESC: no consumer for this group, nobody_here" in str(nobody.value)
        with pytest.raises(MQClientException) as create:
            api.create_topic(addr, TopicConfig("TBW102", 4, 4))  # a system topic: refused
        assert create.value.response_code == ResponseCode.SYSTEM_ERROR and create.value.addr == addr
        assert create.value.remark and "TBW102" in create.value.remark
        header = _pull_header("NoSuchRpcTopic", 0, 0)
        with pytest.raises(MQBrokerException) as pull:
            api.pull_message(addr, header)
        assert pull.value.response_code == ResponseCode.TOPIC_NOT_EXIST and pull.value.remark
        dead = _dead_addr()
        with pytest.raises(RemotingConnectError) as conn:
            api.get_max_offset(dead, "RpcTopic", 0)
        assert conn.value.addr == dead and conn.value.response_code == -1 and conn.value.remark is None
        for e in (route.value, nobody.value, create.value, pull.value, conn.value):
            assert isinstance(e, RocketMQRpcError)
