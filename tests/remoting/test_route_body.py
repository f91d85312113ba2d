"""Route bodies (rmq_core.remoting.body.route): JSON round trips in standard and fastjson form, decoding what Java's
name server writes, RocketMQ's compressed RegisterBrokerBody, bad bodies, and reading a route into MessageQueues as
MQClientInstance does."""

from __future__ import annotations

import json
import random
import struct
import zlib

import pytest

from rmq_core.common.perm_name import PERM_READ, PERM_WRITE
from rmq_core.common.topic_config import TopicConfig
from rmq_core.message import MessageQueue
from rmq_core.remoting.body.route import (
    BodyDecodeError,
    BrokerData,
    ClusterInfo,
    QueueData,
    RegisterBrokerBody,
    TopicList,
    TopicRouteData,
    data_version_equals,
)

RW = PERM_READ | PERM_WRITE


def _route() -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData("broker-b", 4, 4, RW, 0), QueueData("broker-a", 8, 8, RW, 0)],
        broker_datas=[
            BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}),
            BrokerData("DefaultCluster", "broker-b", {0: "10.0.0.3:10911"}, zone_name="z1"),
        ],
        filter_server_table={"10.0.0.1:10911": ["10.0.0.1:20000"]},
    )


# --- JSON forms ------------------------------------------------------------------------------------------------
def test_route_fastjson_form_matches_java_output_and_round_trips():
    route = TopicRouteData(
        queue_datas=[QueueData("broker-a", 4, 4, RW, 0)],
        broker_datas=[BrokerData("DefaultCluster", "broker-a", {1: "192.168.1.3:10911", 0: "192.168.1.2:10911"})],
    )
    body = route.encode(standard_json=False)
    # fastjson: fields sorted, Long map keys bare, null orderTopicConf omitted
    assert body == (
        b'{"brokerDatas":[{"brokerAddrs":{0:"192.168.1.2:10911",1:"192.168.1.3:10911"},'
        b'"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],'
        b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,'
        b'"topicSysFlag":0,"writeQueueNums":4}]}'
    )
    with pytest.raises(json.JSONDecodeError):
        json.loads(body)
    assert TopicRouteData.decode(body) == route


def test_route_standard_form_is_plain_json_and_round_trips():
    route = _route()
    body = route.encode(standard_json=True)
    doc = json.loads(body)  # standard JSON parsers accept it
    assert doc["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"}
    assert doc["brokerDatas"][1]["zoneName"] == "z1"
    assert "orderTopicConf" not in doc
    decoded = TopicRouteData.decode(body)
    assert decoded == route
    assert decoded.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}


def test_standard_form_escapes_non_ascii_and_fastjson_form_keeps_utf8():
    route = TopicRouteData(
        queue_datas=[QueueData("brökér", 1, 1, RW)],
        broker_datas=[BrokerData("c", "brökér", {0: "h:1"})],
        order_topic_conf="brökér:1",
    )
    std = route.encode(standard_json=True)
    assert std.isascii() and b"\\u00f6" in std
    fj = route.encode(standard_json=False)
    assert "brökér".encode() in fj
    assert TopicRouteData.decode(std) == TopicRouteData.decode(fj) == route


def test_decode_accepts_java_field_order_extra_fields_and_missing_optionals():
    java = (
        '{"orderTopicConf":"broker-a:2","queueDatas":[{"brokerName":"broker-a","readQueueNums":2,'
        '"writeQueueNums":2,"perm":6,"topicSynFlag":0}],"brokerDatas":[{"cluster":"c","brokerName":"broker-a",'
        '"brokerAddrs":{0:"h:1"}}],"filterServerTable":{},"topicQueueMappingByBroker":{"broker-a":{"bname":"x"}}}'
    )
    route = TopicRouteData.decode(java.encode())
    assert route.order_topic_conf == "broker-a:2"
    assert route.queue_datas == [QueueData("broker-a", 2, 2, 6, 0)]
    assert route.broker_datas[0].enable_acting_master is False and route.broker_datas[0].zone_name is None
    assert route.topic_queue_mapping_by_broker == {"broker-a": {"bname": "x"}}
    assert TopicRouteData.decode(route.encode()) == route


def test_cluster_info_and_topic_list_round_trip():
    info = ClusterInfo(
        broker_addr_table={"broker-a": BrokerData("c1", "broker-a", {0: "h:1", 2: "h:3"})},
        cluster_addr_table={"c1": {"broker-a"}},
    )
    fj = info.encode(standard_json=False)
    assert b'"brokerAddrs":{0:"h:1",2:"h:3"}' in fj and b'"clusterAddrTable":{"c1":["broker-a"]}' in fj
    assert ClusterInfo.decode(fj) == ClusterInfo.decode(info.encode()) == info
    assert info.retrieve_all_addr_by_cluster("c1") == ["h:1", "h:3"]
    assert info.retrieve_all_addr_by_cluster("nope") == []

    tl = TopicList(topic_list={"b", "a"})
    assert tl.encode() == b'{"topicList":["a","b"]}'
    assert TopicList.decode(tl.encode()) == tl
    tl2 = TopicList(topic_list={"x"}, broker_addr="h:1")
    assert TopicList.decode(tl2.encode(standard_json=False)) == tl2


# --- RegisterBrokerBody ----------------------------------------------------------------------------------------
def _register_body() -> RegisterBrokerBody:
    return RegisterBrokerBody(
        topic_config_table={
            "TopicA": TopicConfig("TopicA", 8, 8, RW),
            "TopicB": TopicConfig(
                "TopicB", 4, 2, PERM_READ, topic_sys_flag=1, order=True, attributes={"+message.type": "NORMAL"}
            ),
        },
        data_version={"counter": 3, "timestamp": 1_700_000_000_123},
        filter_server_list=["10.0.0.1:20000"],
    )


def test_register_broker_body_json_round_trip_and_shape():
    body = _register_body()
    raw = body.encode(standard_json=False)
    doc = json.loads(raw)  # no int keys anywhere: both forms are standard JSON
    assert doc["filterServerList"] == ["10.0.0.1:20000"]
    w = doc["topicConfigSerializeWrapper"]
    assert w["dataVersion"] == {"counter": 3, "timestamp": 1_700_000_000_123}
    assert w["topicConfigTable"]["TopicA"] == {
        "topicName": "TopicA",
        "readQueueNums": 8,
        "writeQueueNums": 8,
        "perm": 6,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": False,
    }
    assert RegisterBrokerBody.decode(raw) == body
    assert RegisterBrokerBody.decode(body.encode(standard_json=True)) == body


def test_register_broker_body_from_wrapper_accepts_objects_or_json_dicts():
    tc = TopicConfig("T", 2, 2, RW)
    a = RegisterBrokerBody.from_wrapper({"topicConfigTable": {"T": tc}, "dataVersion": {"timestamp": 5, "counter": 1}})
    b = RegisterBrokerBody.from_wrapper(
        {"topicConfigTable": {"T": tc.to_json_dict()}, "dataVersion": {"timestamp": 5, "counter": 1}}
    )
    assert a == b and a.topic_config_table == {"T": tc} and a.filter_server_list == []


def test_register_broker_body_keeps_5x_wrapper_fields():
    raw = json.dumps(
        {
            "topicConfigSerializeWrapper": {
                "topicConfigTable": {},
                "dataVersion": {"stateVersion": 2, "timestamp": 9, "counter": 4},
                "topicQueueMappingInfoMap": {},
                "mappingDataVersion": {"timestamp": 1, "counter": 0},
            },
            "filterServerList": [],
        }
    ).encode()
    body = RegisterBrokerBody.decode(raw)
    assert body.data_version == {"counter": 4, "timestamp": 9, "stateVersion": 2}
    assert RegisterBrokerBody.decode(body.encode()) == body
    assert "mappingDataVersion" in json.loads(body.encode())["topicConfigSerializeWrapper"]


def test_compressed_register_body_round_trip():
    body = _register_body()
    packed = body.encode(compressed=True)
    back = RegisterBrokerBody.decode(packed, compressed=True)
    # the compressed form carries name, queue nums, perm, filter type and attributes only (as RocketMQ's)
    assert back.data_version == body.data_version and back.filter_server_list == body.filter_server_list
    assert back.topic_config_table["TopicA"] == body.topic_config_table["TopicA"]
    b = back.topic_config_table["TopicB"]
    assert (b.read_queue_nums, b.write_queue_nums, b.perm, b.attributes) == (
        4,
        2,
        PERM_READ,
        {"+message.type": "NORMAL"},
    )
    assert (b.topic_sys_flag, b.order) == (0, False)
    assert back.extra_wrapper_fields == {}


def test_compressed_register_body_carries_5x_mapping_infos():
    body = RegisterBrokerBody(
        topic_config_table={"S": TopicConfig("S", 1, 1)},
        extra_wrapper_fields={"topicQueueMappingInfoMap": {"S": {"topic": "S", "bname": "b"}}},
    )
    back = RegisterBrokerBody.decode(body.encode(compressed=True), compressed=True)
    assert back.extra_wrapper_fields == {"topicQueueMappingInfoMap": {"S": {"topic": "S", "bname": "b"}}}


def test_compressed_register_body_as_a_4_9_broker_writes_it():
    """DataVersion JSON, count, 'name read write perm type' strings, filter list JSON; no 5.x trailer."""

    def chunk(b: bytes) -> bytes:
        return struct.pack(">i", len(b)) + b

    raw = (
        chunk(b'{"counter":7,"timestamp":1700000000000}')
        + struct.pack(">i", 2)
        + chunk(b"TopicA 8 8 6 SINGLE_TAG")
        + chunk(b"TopicB 2 4 4 MULTI_TAG")
        + chunk(b'["h:20000"]')
    )
    java_deflater = zlib.compressobj(9)  # java.util.zip.Deflater(BEST_COMPRESSION): zlib-wrapped
    packed = java_deflater.compress(raw) + java_deflater.flush()
    body = RegisterBrokerBody.decode(packed, compressed=True)
    assert body.data_version == {"counter": 7, "timestamp": 1_700_000_000_000}
    assert body.topic_config_table == {
        "TopicA": TopicConfig("TopicA", 8, 8, 6),
        "TopicB": TopicConfig("TopicB", 2, 4, 4, topic_filter_type="MULTI_TAG"),
    }
    assert body.filter_server_list == ["h:20000"]


@pytest.mark.parametrize(
    "data",
    [
        b"not zlib at all",
        zlib.compress(b"\x00\x00\x00\x10{}"),  # chunk overruns the data
        zlib.compress(struct.pack(">i", 2) + b"{}" + struct.pack(">i", 1)),  # ends inside a length field
        zlib.compress(struct.pack(">i", 2) + b"{}" + struct.pack(">i", 1) + struct.pack(">i", 5) + b"A 1 2"),
    ],
)
def test_bad_compressed_register_body_raises(data):
    with pytest.raises(BodyDecodeError):
        RegisterBrokerBody.decode(data, compressed=True)


@pytest.mark.parametrize(
    "cls,data",
    [
        (TopicRouteData, b"{not json"),
        (TopicRouteData, b"[1,2]"),
        (TopicRouteData, b'{"queueDatas":{"a":1}}'),
        (TopicRouteData, b'{"queueDatas":[{"brokerName":"a","readQueueNums":"x"}]}'),
        (TopicRouteData, b'{"queueDatas":[{"readQueueNums":1}]}'),
        (TopicRouteData, b'{"brokerDatas":[{"brokerName":"a","brokerAddrs":{"master":"h:1"}}]}'),
        (TopicRouteData, b'{"brokerDatas":[{"brokerName":"a","brokerAddrs":{0:5}}]}'),
        (BrokerData, b'{"brokerName":"a","brokerAddrs":[]}'),
        (ClusterInfo, b'{"clusterAddrTable":{"c":"broker-a"}}'),
        (TopicList, b'{"topicList":"a"}'),
        (RegisterBrokerBody, b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"readQueueNums":"many"}}}}'),
        (RegisterBrokerBody, b'{"topicConfigSerializeWrapper":{"topicConfigTable":[]}}'),
        (RegisterBrokerBody, b'{"topicConfigSerializeWrapper":{"dataVersion":{"counter":"x"}}}'),
        (RegisterBrokerBody, b'{"filterServerList":[1]}'),
        (RegisterBrokerBody, b"\xff\xfe"),
    ],
)
def test_bad_bodies_raise_body_decode_error(cls, data):
    with pytest.raises(BodyDecodeError):
        cls.decode(data)


def test_data_version_equality():
    assert data_version_equals({"timestamp": 1, "counter": 2}, {"counter": 2, "timestamp": 1, "stateVersion": 0})
    assert not data_version_equals({"timestamp": 1, "counter": 2}, {"timestamp": 1, "counter": 3})
    assert not data_version_equals({"timestamp": 1, "counter": 2}, {"timestamp": 2, "counter": 2})
    assert not data_version_equals({"timestamp": 1, "counter": 2}, None)


# --- route → MessageQueues -------------------------------------------------------------------------------------
def test_select_broker_addr_prefers_master():
    assert BrokerData("c", "a", {1: "s1", 0: "m"}).select_broker_addr() == "m"
    slaves = BrokerData("c", "a", {1: "s1", 2: "s2"})
    picks = {slaves.select_broker_addr(random.Random(seed)) for seed in range(20)}
    assert picks == {"s1", "s2"}
    assert BrokerData("c", "a", {}).select_broker_addr() is None


def test_publish_queues_writable_with_master_sorted_by_broker_name():
    route = TopicRouteData(
        queue_datas=[
            QueueData("broker-c", 2, 3, RW),
            QueueData("broker-a", 8, 2, RW),
            QueueData("broker-r", 4, 4, PERM_READ),  # not writable
            QueueData("broker-s", 4, 4, RW),  # only a slave registered
            QueueData("broker-x", 4, 4, RW),
        ],  # no broker data at all
        broker_datas=[
            BrokerData("c", "broker-a", {0: "a:1"}),
            BrokerData("c", "broker-c", {0: "c:1"}),
            BrokerData("c", "broker-r", {0: "r:1"}),
            BrokerData("c", "broker-s", {1: "s:1"}),
        ],
    )
    assert route.publish_message_queues("T") == [
        MessageQueue("T", "broker-a", 0),
        MessageQueue("T", "broker-a", 1),
        MessageQueue("T", "broker-c", 0),
        MessageQueue("T", "broker-c", 1),
        MessageQueue("T", "broker-c", 2),
    ]
    assert not route.is_order_topic()


def test_publish_queues_from_order_topic_conf():
    route = TopicRouteData(
        order_topic_conf="broker-b:2;broker-a:1",
        queue_datas=[QueueData("broker-a", 8, 8, RW)],
        broker_datas=[BrokerData("c", "broker-a", {0: "a:1"})],
    )
    assert route.is_order_topic()
    assert route.publish_message_queues("T") == [
        MessageQueue("T", "broker-b", 0),
        MessageQueue("T", "broker-b", 1),
        MessageQueue("T", "broker-a", 0),
    ]


def test_subscribe_queues_readable_read_queue_nums():
    route = TopicRouteData(
        queue_datas=[
            QueueData("broker-a", 2, 8, RW),
            QueueData("broker-w", 4, 4, PERM_WRITE),
            QueueData("broker-s", 1, 1, PERM_READ),
        ],
        broker_datas=[BrokerData("c", "broker-a", {0: "a:1"}), BrokerData("c", "broker-s", {1: "s:1"})],
    )
    assert route.subscribe_message_queues("T") == {
        MessageQueue("T", "broker-a", 0),
        MessageQueue("T", "broker-a", 1),
        MessageQueue("T", "broker-s", 0),
    }
    assert route.find_broker_addr("broker-a") == "a:1"
    assert route.find_broker_addr("broker-s") is None and route.find_broker_addr("broker-s", 1) == "s:1"
    assert route.find_queue_data("broker-w") == QueueData("broker-w", 4, 4, PERM_WRITE)
