"""``rmq_core.client.Admin`` against a real name server and broker on 127.0.0.1 (rmq_core.testing.start_cluster):
every method once — cluster info, topics created, listed, examined and deleted, subscription groups created and
deleted, consume stats, consumer connections, offsets reset by time (the broker telling an online client, and
committed queue by queue when none is online), broker runtime info and config (read and updated), messages by key
and id — the errors it raises, a node of two brokers (a topic created on every master), and ACL credentials."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rmq_core.client import (
    Admin,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    MQBrokerException,
    MQClientException,
    Producer,
    PushConsumer,
    RocketMQRpcError,
)
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.message import UNIQ_KEY, Message, MessageQueue
from rmq_core.remoting.codes import ResponseCode
from rmq_core.testing.cluster import RocketMQCluster, start_cluster

from support.acl_helpers import ADMIN, USER, acl_broker
from support.client_helpers_e2e import FAST_CLIENT
from support.helpers import wait_until

MESSAGES = 12


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RocketMQCluster]:
    with start_cluster(tmp_path_factory.mktemp("admin")) as c:
        yield c


@pytest.fixture
def admin(cluster: RocketMQCluster) -> Iterator[Admin]:
    with Admin(cluster.namesrv_addr, timeout_ms=5000) as a:
        yield a


def _send(namesrv: str, topic: str, n: int, key: str) -> list[Any]:
    p = Producer(f"admin-test-pg-{topic}", namesrv_addr=namesrv)
    p.start()
    try:
        return [p.send(Message(topic, f"m{i}".encode(), tags="t", keys=f"{key} k{i}")) for i in range(n)]
    finally:
        p.shutdown()


def test_not_started_is_a_clear_error(cluster: RocketMQCluster) -> None:
    a = Admin(cluster.namesrv_addr)
    with pytest.raises(MQClientException, match="not started"):
        a.examine_broker_cluster_info()
    a.start()
    try:
        assert a.start() is a  # idempotent
        assert cluster.broker_addr in a.master_addrs().values()
    finally:
        a.shutdown()
        a.shutdown()
    with pytest.raises(MQClientException, match="not started"):
        a.fetch_all_topic_list()


def test_cluster_info_runtime_stats_and_broker_config(admin: Admin, cluster: RocketMQCluster) -> None:
    info = admin.examine_broker_cluster_info()
    (name,) = info.broker_addr_table
    assert info.master_addrs() == {name: cluster.broker_addr}
    assert admin.master_addrs(next(iter(info.cluster_addr_table))) == {name: cluster.broker_addr}
    assert admin.master_addrs("no-such-cluster") == {}

    runtime = admin.fetch_broker_runtime_stats(cluster.broker_addr)
    assert runtime["brokerVersionDesc"].startswith("V")
    assert int(runtime["bootTimestamp"]) <= time.time() * 1000

    config = admin.get_broker_config(cluster.broker_addr)
    assert config["brokerName"] == name
    before = int(config["defaultTopicQueueNums"])
    admin.update_broker_config(cluster.broker_addr, {"defaultTopicQueueNums": before + 1})
    try:
        assert admin.get_broker_config(cluster.broker_addr)["defaultTopicQueueNums"] == str(before + 1)
    finally:
        admin.update_broker_config(cluster.broker_addr, {"defaultTopicQueueNums": before})
    with pytest.raises(MQBrokerException) as e:  # a start-only key: the whole update refused, nothing changed
        admin.update_broker_config(cluster.broker_addr, {"defaultTopicQueueNums": 3, "listenPort": 1})
    assert "listenPort" in (e.value.remark or "")
    assert admin.get_broker_config(cluster.broker_addr)["defaultTopicQueueNums"] == str(before)


def test_topic_created_examined_listed_and_deleted(admin: Admin, cluster: RocketMQCluster) -> None:
    topic = "admin-topic-life"
    route = admin.create_topic(topic, queues=3)
    assert [(qd.read_queue_nums, qd.write_queue_nums) for qd in route.queue_datas] == [(3, 3)]
    assert topic in admin.fetch_all_topic_list().topic_list
    assert admin.examine_topic_route_info(topic).broker_datas[0].broker_addrs[0] == cluster.broker_addr
    assert admin.masters_of_topic(topic) == sorted(cluster.broker_addrs.items())

    _send(cluster.namesrv_addr, topic, MESSAGES, "life")
    stats = admin.examine_topic_stats(topic)
    assert sorted(mq.queue_id for mq in stats.offset_table) == [0, 1, 2]
    assert sum(o.max_offset - o.min_offset for o in stats.offset_table.values()) == MESSAGES
    assert admin.examine_topic_stats(topic, broker_addr=cluster.broker_addr) == stats

    admin.delete_topic(topic)
    with pytest.raises(MQClientException) as e:
        admin.examine_topic_route_info(topic)
    assert e.value.response_code == ResponseCode.TOPIC_NOT_EXIST
    assert topic not in admin.fetch_all_topic_list().topic_list
    broker = cluster._broker
    assert broker is not None and broker.controller.topic_config_manager.select_topic_config(topic) is None


def test_subscription_group_created_and_deleted(admin: Admin, cluster: RocketMQCluster) -> None:
    groups = cluster._broker.controller.subscription_group_manager  # type: ignore[union-attr]
    admin.create_subscription_group(SubscriptionGroupConfig("admin-group-a", retry_max_times=5))
    assert groups.find_subscription_group_config("admin-group-a").retry_max_times == 5
    admin.create_and_update_subscription_group_config(
        cluster.broker_addr, SubscriptionGroupConfig("admin-group-a", retry_max_times=7)
    )
    assert groups.find_subscription_group_config("admin-group-a").retry_max_times == 7
    admin.create_subscription_group("admin-group-b", broker_addr=cluster.broker_addr)
    assert groups.contains_subscription_group("admin-group-b")
    admin.delete_subscription_group("admin-group-a")
    admin.delete_subscription_group("admin-group-b", broker_addr=cluster.broker_addr, remove_offset=True)
    assert not groups.contains_subscription_group("admin-group-a")
    assert not groups.contains_subscription_group("admin-group-b")


def test_messages_by_key_and_by_id(admin: Admin, cluster: RocketMQCluster) -> None:
    topic = "admin-topic-query"
    admin.create_topic(topic, queues=2)
    sent = _send(cluster.namesrv_addr, topic, MESSAGES, "shared-key")
    wait_until(lambda: len(admin.query_message(topic, "shared-key", 64, 0, 2**63 - 1).messages) == MESSAGES)

    found = admin.query_message(topic, "k3", 64, 0, 2**63 - 1)
    assert [m.body for m in found.messages] == [b"m3"]
    assert found.index_last_update_timestamp > 0
    one_broker = admin.query_message(topic, "k3", 64, 0, 2**63 - 1, broker_addr=cluster.broker_addr)
    assert [m.body for m in one_broker.messages] == [b"m3"]
    assert admin.query_message(topic, "no-such-key", 64, 0, 2**63 - 1).messages == []
    assert admin.query_message(topic, "k3", 64, 0, 1).messages == []  # stored after the window

    by_offset_id = admin.view_message(sent[5].offset_msg_id)
    assert by_offset_id.body == b"m5" and by_offset_id.properties[UNIQ_KEY] == sent[5].msg_id
    by_uniq_key = admin.view_message(sent[7].msg_id, topic=topic)
    assert by_uniq_key.body == b"m7"
    unique = admin.query_message(topic, sent[7].msg_id, 32, 0, 2**63 - 1, unique_key=True)
    assert [m.body for m in unique.messages] == [b"m7"]
    with pytest.raises(MQClientException, match="needs the topic"):
        admin.view_message(sent[7].msg_id)
    with pytest.raises(MQClientException) as e:
        admin.view_message("0" * 32, topic=topic)
    assert e.value.response_code == ResponseCode.QUERY_NOT_FOUND


def test_consume_stats_connections_and_offsets_reset_by_time(admin: Admin, cluster: RocketMQCluster) -> None:
    topic, group = "admin-topic-consume", "admin-consumer-group"
    admin.create_topic(topic, queues=2)
    _send(cluster.namesrv_addr, topic, MESSAGES, "c")
    seen: list[bytes] = []
    lock = threading.Lock()

    def listener(msgs: list[Any], _ctx: Any) -> ConsumeConcurrentlyStatus:
        with lock:
            seen.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group,
        namesrv_addr=cluster.namesrv_addr,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **FAST_CLIENT,
    )
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        wait_until(lambda: len(seen) >= MESSAGES, "the consumer got every message", timeout=20)

        def caught_up() -> bool:
            table = admin.examine_consume_stats(group, topic).offset_table
            return len(table) == 2 and all(w.consumer_offset == w.broker_offset for w in table.values())

        wait_until(caught_up, "the group's offsets reached the end", timeout=20)
        stats = admin.examine_consume_stats(group)
        assert sum(w.broker_offset for mq, w in stats.offset_table.items() if mq.topic == topic) == MESSAGES

        conn = admin.examine_consumer_connection_info(group)
        assert len(conn.connection_set) == 1 and conn.connection_set[0].language == "PYTHON"
        assert topic in conn.subscription_table and conn.message_model == "CLUSTERING"
        assert admin.group_brokers(group) == sorted(cluster.broker_addrs.items())

        # online: the broker computes the offsets and tells the client
        reset = admin.reset_offset_by_time(group, topic, 0)
        broker_name = admin.masters_of_topic(topic)[0][0]
        assert reset == {MessageQueue(topic, broker_name, q): 0 for q in range(2)}
        wait_until(lambda: len(seen) >= 2 * MESSAGES, "the reset group consumed everything again", timeout=20)
    finally:
        consumer.shutdown()

    with pytest.raises(MQClientException) as e:
        admin.examine_consumer_connection_info(group)
    assert e.value.response_code == ResponseCode.CONSUMER_NOT_ONLINE
    with pytest.raises(RocketMQRpcError) as e2:
        admin.reset_offset_by_time(group, topic, 0, fall_back=False)
    assert e2.value.response_code == ResponseCode.CONSUMER_NOT_ONLINE

    # offline: committed queue by queue; without force an offset is only moved back
    ends = {mq: w.broker_offset for mq, w in admin.examine_consume_stats(group, topic).offset_table.items()}
    wait_until(lambda: admin.examine_consume_stats(group, topic).offset_table[next(iter(ends))].consumer_offset > 0)
    assert admin.reset_offset_by_time(group, topic, 0) == {mq: 0 for mq in ends}
    assert {mq: w.consumer_offset for mq, w in admin.examine_consume_stats(group, topic).offset_table.items()} == {
        mq: 0 for mq in ends
    }
    later = int(time.time() * 1000) + 60_000
    kept = admin.reset_offset_by_time_old(group, topic, later, force=False)
    assert [(r.consumer_offset, r.rollback_offset, r.committed) for r in kept] == [(0, 0, False)] * 2
    moved = admin.reset_offset_by_time_old(group, topic, later, broker_addr=cluster.broker_addr)
    assert {r.rollback_offset for r in moved} == set(ends.values()) and all(r.committed for r in moved)


def test_errors_name_what_failed(admin: Admin, cluster: RocketMQCluster) -> None:
    with pytest.raises(MQClientException) as e:
        admin.examine_topic_stats("admin-no-such-topic")
    assert e.value.response_code == ResponseCode.TOPIC_NOT_EXIST
    with pytest.raises(MQClientException, match="not a master"):
        admin.reset_offset_by_time("g", "TBW102", 0, broker_addr="127.0.0.1:1")
    with pytest.raises(RocketMQRpcError) as e3:
        admin.fetch_broker_runtime_stats("127.0.0.1:1")
    assert "127.0.0.1:1" in str(e3.value)
    with pytest.raises(MQClientException, match="no master broker in cluster nowhere"):
        admin.create_topic("admin-topic-nowhere", cluster="nowhere")
    with pytest.raises(MQClientException) as e4:  # the broker refuses a bad name
        admin.create_topic("bad topic name!", broker_addr=cluster.broker_addr, wait_s=1)
    assert e4.value.response_code != -1


@pytest.mark.slow
def test_create_topic_on_every_master_of_a_node(tmp_path: Any) -> None:
    with start_cluster(tmp_path, brokers=2) as node, Admin(node.namesrv_addr) as admin:
        assert len(node.broker_addrs) == 2
        route = admin.create_topic("admin-topic-node", queues=2)
        assert {bd.broker_name for bd in route.broker_datas} == set(node.broker_addrs)
        assert [qd.write_queue_nums for qd in route.queue_datas] == [2, 2]
        assert admin.masters_of_topic("admin-topic-node") == sorted(node.broker_addrs.items())
        stats = admin.examine_topic_stats("admin-topic-node")
        assert {(mq.broker_name, mq.queue_id) for mq in stats.offset_table} == {
            (name, q) for name in node.broker_addrs for q in range(2)
        }
        one = admin.create_topic("admin-topic-one", queues=1, broker_addr=node.broker_addr)
        assert [bd.broker_addrs[0] for bd in one.broker_datas] == [node.broker_addr]
        admin.delete_topic("admin-topic-node")
        with pytest.raises(MQClientException):
            admin.examine_topic_route_info("admin-topic-node")


def test_acl_credentials_sign_every_request(tmp_path: Any) -> None:
    with acl_broker(tmp_path, "acl-admin") as (ns, broker, _):
        with Admin(ns.address, access_key=ADMIN.access_key, secret_key=ADMIN.secret_key) as admin:
            route = admin.create_topic("aclAdminTopic", queues=2, broker_addr=broker.address)
            assert route.queue_datas[0].write_queue_nums == 2
            assert admin.get_broker_config(broker.address)["brokerName"] == "acl-admin"
        for creds in ({}, {"access_key": USER.access_key, "secret_key": USER.secret_key}):
            with Admin(ns.address, **creds) as admin, pytest.raises(MQClientException) as e:
                admin.create_topic("aclAdminTopic2", broker_addr=broker.address, wait_s=1)
            assert e.value.response_code == ResponseCode.SYSTEM_ERROR, creds
        with pytest.raises(ValueError):  # a key without its secret: refused before anything is sent
            Admin(ns.address, access_key=ADMIN.access_key).start()
