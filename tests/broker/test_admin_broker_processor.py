"""The admin commands against a real Broker over TCP: topic and subscription-group creation (and the topic reaching an
in-process name server's route), the offset lookups against stored messages, and the ordered-consumption locks."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.message import Message, MessageQueue
from rmq_core.namesrv.name_server import NameServer
from rmq_core.remoting.body.lock_batch import (
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import CreateTopicRequestHeader, encode_header
from rmq_core.remoting.remoting_client import BlockingRemotingClient

TOPIC = "AdminTopic"
GROUP = "admin_group"


def on_loop(broker: Broker, fn: Callable[[], Any]) -> Any:
    async def run() -> Any:
        return fn()

    return asyncio.run_coroutine_threadsafe(run(), broker.controller.loop).result(5)


def create_topic_request(
    topic: str, read: int = 4, write: int = 4, perm: int = 6, order: bool = False, attributes: str | None = None
) -> RemotingCommand:
    h = CreateTopicRequestHeader(
        topic=topic,
        defaultTopic="TBW102",
        readQueueNums=read,
        writeQueueNums=write,
        perm=perm,
        topicFilterType="SINGLE_TAG",
        topicSysFlag=0,
        order=order,
        attributes=attributes,
    )
    return RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, encode_header(h))


def topic_config(broker: Broker, topic: str) -> Any:
    return on_loop(broker, lambda: broker.controller.topic_config_manager.select_topic_config(topic))


# --- UPDATE_AND_CREATE_TOPIC -------------------------------------------------------------------------------------
def test_create_topic_stores_its_config(broker, client):
    r = client.invoke_sync(broker.address, create_topic_request(TOPIC, read=3, write=5, perm=4, order=True))
    assert r.code == ResponseCode.SUCCESS
    cfg = topic_config(broker, TOPIC)
    assert (cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm, cfg.order) == (3, 5, 4, True)
    r = client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
    assert r.code == ResponseCode.SUCCESS
    table = json.loads(r.body)["topicConfigTable"]
    assert table[TOPIC]["readQueueNums"] == 3 and table[TOPIC]["writeQueueNums"] == 5
    assert "TBW102" in table


def test_update_topic_applies_attribute_changes(broker, client):
    r = client.invoke_sync(broker.address, create_topic_request(TOPIC, attributes="+message.type=NORMAL,+x=1"))
    assert r.code == ResponseCode.SUCCESS
    assert topic_config(broker, TOPIC).attributes == {"message.type": "NORMAL", "x": "1"}
    r = client.invoke_sync(broker.address, create_topic_request(TOPIC, attributes="-x"))
    assert r.code == ResponseCode.SUCCESS
    assert topic_config(broker, TOPIC).attributes == {"message.type": "NORMAL"}
    r = client.invoke_sync(broker.address, create_topic_request(TOPIC, read=1, attributes="x"))
    assert r.code == ResponseCode.SYSTEM_ERROR and "delete attribute format is wrong" in (r.remark or "")
    assert topic_config(broker, TOPIC).read_queue_nums == 4  # unchanged


@pytest.mark.parametrize(
    "topic, remark",
    [
        ("bad topic!", "illegal characters"),
        ("x" * 128, "longer than topic max length"),
        ("TBW102", "The topic[TBW102] is conflict with system topic."),
        ("SCHEDULE_TOPIC_XXXX", "conflict with system topic"),
        ("rmq_sys_anything", "conflict with system topic"),
    ],
)
def test_create_topic_refuses_bad_or_system_names(broker, client, topic, remark):
    before = topic_config(broker, topic)
    r = client.invoke_sync(broker.address, create_topic_request(topic))
    assert r.code == ResponseCode.SYSTEM_ERROR and remark in (r.remark or "")
    assert topic_config(broker, topic) == before


def test_create_topic_refuses_negative_queue_counts(broker, client):
    r = client.invoke_sync(broker.address, create_topic_request(TOPIC, read=-1))
    assert r.code == ResponseCode.SYSTEM_ERROR and "must not be negative" in (r.remark or "")
    assert topic_config(broker, TOPIC) is None


def test_create_topic_missing_header_field_names_it(broker, client):
    req = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": TOPIC, "defaultTopic": "TBW102"})
    r = client.invoke_sync(broker.address, req)
    assert r.code == ResponseCode.SYSTEM_ERROR and "readQueueNums" in (r.remark or "")


def test_slave_refuses_topic_and_group_changes(tmp_path, client):
    cfg = BrokerConfig(listen_port=0, store_path_root_dir=str(tmp_path / "store"), broker_role="SLAVE", broker_id=1)
    with Broker(cfg) as b:
        r = client.invoke_sync(b.address, create_topic_request(TOPIC))
        assert r.code == ResponseCode.SYSTEM_ERROR and "slave" in (r.remark or "")
        body = json.dumps(SubscriptionGroupConfig(GROUP).to_json_dict()).encode()
        r = client.invoke_sync(
            b.address, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
        )
        assert r.code == ResponseCode.SYSTEM_ERROR and "slave" in (r.remark or "")
        assert topic_config(b, TOPIC) is None


def test_created_topic_reaches_the_name_server_route(tmp_path, client):
    with NameServer(listen_port=0) as ns:
        cfg = BrokerConfig(
            listen_port=0,
            store_path_root_dir=str(tmp_path / "store"),
            namesrv_addr=ns.address,
            broker_name="broker-admin",
        )
        with Broker(cfg) as b:
            assert client.invoke_sync(b.address, create_topic_request(TOPIC, read=2, write=3)).code == 0

            def route_req():
                return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})

            deadline = time.monotonic() + 10
            r = client.invoke_sync(ns.address, route_req())
            while r.code != ResponseCode.SUCCESS and time.monotonic() < deadline:
                time.sleep(0.05)
                r = client.invoke_sync(ns.address, route_req())
            assert r.code == ResponseCode.SUCCESS, r.remark
            route = json.loads(r.body)
            assert [(q["brokerName"], q["readQueueNums"], q["writeQueueNums"]) for q in route["queueDatas"]] == [
                ("broker-admin", 2, 3)
            ]
            assert [bd["brokerAddrs"] for bd in route["brokerDatas"]] == [{"0": b.address}]


# --- UPDATE_AND_CREATE_SUBSCRIPTIONGROUP -------------------------------------------------------------------------
def test_create_subscription_group(broker, client):
    cfg = SubscriptionGroupConfig(GROUP, consume_broadcast_enable=False, retry_queue_nums=2, retry_max_times=5)
    req = RemotingCommand.request(
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps(cfg.to_json_dict()).encode()
    )
    assert client.invoke_sync(broker.address, req).code == ResponseCode.SUCCESS
    stored = on_loop(broker, lambda: broker.controller.subscription_group_manager.subscription_group_table[GROUP])
    assert stored == cfg


@pytest.mark.parametrize(
    "body, remark",
    [
        (None, "no body"),
        (b"{not json", "not a SubscriptionGroupConfig"),
        (b'{"consumeEnable": true}', "not a SubscriptionGroupConfig"),
        (b'{"groupName": "bad group!"}', "illegal characters"),
    ],
)
def test_create_subscription_group_refuses_bad_bodies(broker, client, body, remark):
    req = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
    r = client.invoke_sync(broker.address, req)
    assert r.code == ResponseCode.SYSTEM_ERROR and remark in (r.remark or "")
    assert (
        on_loop(broker, lambda: "bad group!" in broker.controller.subscription_group_manager.subscription_group_table)
        is False
    )


# --- offsets -----------------------------------------------------------------------------------------------------
def _put_spaced(broker: Broker, n: int) -> list[Any]:
    store = broker.message_store
    for _ in range(n):
        on_loop(broker, lambda: store.put_message(Message(TOPIC, b"body"), 1))
        time.sleep(0.005)  # distinct store timestamps
    return on_loop(broker, lambda: store.get_message("g", TOPIC, 1, 0, 32).decode())


def _offset_request(code: int, **fields: Any) -> RemotingCommand:
    return RemotingCommand.request(code, {"topic": TOPIC, "queueId": 1, **fields})


def test_max_and_min_offsets(broker, client):
    _put_spaced(broker, 3)
    r = client.invoke_sync(broker.address, _offset_request(RequestCode.GET_MAX_OFFSET))
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "3"
    r = client.invoke_sync(broker.address, _offset_request(RequestCode.GET_MIN_OFFSET))
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "0"
    r = client.invoke_sync(broker.address, _offset_request(RequestCode.GET_MAX_OFFSET, queueId=7))
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "0"  # a queue with no messages


def test_search_offset_by_timestamp(broker, client):
    msgs = _put_spaced(broker, 3)
    assert msgs[0].store_timestamp < msgs[1].store_timestamp
    r = client.invoke_sync(
        broker.address, _offset_request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, timestamp=msgs[1].store_timestamp)
    )
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "1"
    r = client.invoke_sync(broker.address, _offset_request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, timestamp=0))
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "0"


def test_earliest_message_store_time(broker, client):
    msgs = _put_spaced(broker, 2)
    r = client.invoke_sync(broker.address, _offset_request(RequestCode.GET_EARLIEST_MSG_STORETIME))
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["timestamp"] == str(msgs[0].store_timestamp)


def test_offset_request_missing_queue_id_names_it(broker, client):
    req = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC})
    r = client.invoke_sync(broker.address, req)
    assert r.code == ResponseCode.SYSTEM_ERROR and "queueId" in (r.remark or "")


# --- LOCK_BATCH_MQ / UNLOCK_BATCH_MQ -----------------------------------------------------------------------------
def mqs(*ids: int) -> set[MessageQueue]:
    return {MessageQueue(TOPIC, "broker-a", i) for i in ids}


def lock(client: BlockingRemotingClient, broker: Broker, client_id: str, ids: set[MessageQueue]) -> set[MessageQueue]:
    body = LockBatchRequestBody(consumer_group=GROUP, client_id=client_id, mq_set=ids)
    r = client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, body=body.encode()))
    assert r.code == ResponseCode.SUCCESS
    return LockBatchResponseBody.decode(r.body).lock_ok_mq_set


def unlock(client: BlockingRemotingClient, broker: Broker, client_id: str, ids: set[MessageQueue]) -> None:
    body = UnlockBatchRequestBody(consumer_group=GROUP, client_id=client_id, mq_set=ids)
    r = client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, body=body.encode()))
    assert r.code == ResponseCode.SUCCESS


def test_two_clients_contend_for_queue_locks(broker, client):
    with BlockingRemotingClient() as other:
        assert lock(client, broker, "c1", mqs(0, 1)) == mqs(0, 1)
        assert lock(other, broker, "c2", mqs(1, 2)) == mqs(2)  # q1 is c1's
        assert lock(client, broker, "c1", mqs(0, 1, 2)) == mqs(0, 1)  # re-lock refreshes its own, not c2's
        unlock(other, broker, "c2", mqs(0))  # not c2's: nothing happens
        assert lock(other, broker, "c2", mqs(0)) == set()
        unlock(client, broker, "c1", mqs(1))
        assert lock(other, broker, "c2", mqs(1)) == mqs(1)


def test_expired_lock_is_taken_over(broker, client):
    with BlockingRemotingClient() as other:
        assert lock(client, broker, "c1", mqs(0)) == mqs(0)
        manager = broker.controller.rebalance_lock_manager
        later = broker.controller.now_ms() + 60_001  # c1 silent for longer than lockMaxLiveTime (60 s)
        assert on_loop(broker, lambda: manager.try_lock_batch(GROUP, mqs(0), "c2", now_ms=later)) == mqs(0)
        assert lock(client, broker, "c1", mqs(0)) == set()  # c2 holds it now
        unlock(other, broker, "c2", mqs(0))
        assert lock(client, broker, "c1", mqs(0)) == mqs(0)


@pytest.mark.parametrize("code", [RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ])
@pytest.mark.parametrize(
    "body, remark",
    [
        (None, "no body"),
        (b"[1, 2]", "not a"),
        (b'{"consumerGroup": "g", "mqSet": []}', "needs consumerGroup and clientId"),
    ],
)
def test_lock_requests_with_bad_bodies(broker, client, code, body, remark):
    r = client.invoke_sync(broker.address, RemotingCommand.request(code, body=body))
    assert r.code == ResponseCode.SYSTEM_ERROR and remark in (r.remark or "")
