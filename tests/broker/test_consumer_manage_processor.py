"""QUERY_CONSUMER_OFFSET / UPDATE_CONSUMER_OFFSET / GET_CONSUMER_LIST_BY_GROUP against a real Broker over TCP.

The QUERY_CONSUMER_OFFSET branches (4.9 ``ConsumerManageProcessor``): a committed offset; 5.x ``setZeroIfNotFound=false``; min offset ≤ 0
with the queue's first message "hot" → 0 (4.9's checkInDiskByConsumeOffset; made cold here with
``access_message_in_memory_max_ratio=0``); min offset > 0 (commit-log files deleted) → QUERY_NOT_FOUND.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.common.topic_config import TopicConfig
from rmq_core.filter.subscription_data import build_subscription_data
from rmq_core.message import Message
from rmq_core.remoting.body.heartbeat import ConsumerData, HeartbeatData
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.remoting_client import BlockingRemotingClient
from rmq_core.store import StoreConfig

from support.admin_helpers import add_topic_config

GROUP = "cmp_group"
TOPIC = "CmpTopic"


@pytest.fixture(autouse=True)
def _topic(request: pytest.FixtureRequest) -> None:
    """The tests' topic is known to the broker (an offset commit for a topic it does not hold is refused)."""
    if "broker" in request.fixturenames:
        add_topic_config(request.getfixturevalue("broker"), TopicConfig(TOPIC, 4, 4, 6))


def on_loop(broker: Broker, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on the broker's event loop (where its managers live) and return its result."""

    async def run() -> Any:
        return fn()

    return asyncio.run_coroutine_threadsafe(run(), broker.controller.loop).result(5)


def put(broker: Broker, n: int, queue_id: int = 0, size: int = 16) -> list[Any]:
    store = broker.message_store
    return on_loop(broker, lambda: [store.put_message(Message(TOPIC, b"m" * size), queue_id) for _ in range(n)])


def query(
    client: BlockingRemotingClient, broker: Broker, queue_id: int = 0, group: str = GROUP, **extra: Any
) -> RemotingCommand:
    ext = {"consumerGroup": group, "topic": TOPIC, "queueId": queue_id, **extra}
    return client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, ext))


def update_oneway(client: BlockingRemotingClient, broker: Broker, offset: int, queue_id: int = 0) -> None:
    ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": queue_id, "commitOffset": offset}
    client.invoke_oneway(broker.address, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext))


def heartbeat(client: BlockingRemotingClient, broker: Broker, client_id: str) -> RemotingCommand:
    hb = HeartbeatData(
        client_id, consumer_data_set=[ConsumerData(GROUP, subscription_data_set=[build_subscription_data(TOPIC, "*")])]
    )
    return client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.HEART_BEAT, body=hb.encode()))


# --- QUERY_CONSUMER_OFFSET ---------------------------------------------------------------------------------------
def test_query_returns_the_committed_offset(broker, client):
    put(broker, 5)
    update_oneway(client, broker, 3)
    r = query(client, broker)
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "3"


def test_query_without_commit_on_empty_queue_is_zero(broker, client):
    r = query(client, broker, queue_id=2)
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "0"


def test_query_without_commit_with_hot_first_message_is_zero(broker, client):
    put(broker, 3)
    r = query(client, broker)
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "0"


def test_query_set_zero_if_not_found_false_is_not_found(broker, client):
    put(broker, 3)
    r = query(client, broker, setZeroIfNotFound="false")
    assert r.code == ResponseCode.QUERY_NOT_FOUND and "offset" not in r.ext_fields
    assert "do not set to zero" in (r.remark or "")
    # a committed offset still wins
    update_oneway(client, broker, 2)
    r = query(client, broker, setZeroIfNotFound="false")
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "2"


def test_query_with_cold_first_message_is_not_found(tmp_path, client):
    cfg = BrokerConfig(listen_port=0, store_path_root_dir=str(tmp_path / "store"))
    small = StoreConfig(
        access_message_in_memory_max_ratio=0,
        mapped_file_size_commit_log=1 << 20,
        mapped_file_size_consume_queue=20 * 1000,
    )
    with Broker(cfg, small) as b:
        r = query(client, b)
        assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "0"  # no unit 0: not on disk
        put(b, 2)  # unit 0 is now further behind the commit-log end than the (zero) memory share
        r = query(client, b)
        assert r.code == ResponseCode.QUERY_NOT_FOUND
        assert r.remark == "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"


def test_query_when_min_offset_moved_past_zero_is_not_found(tmp_path, client):
    cfg = BrokerConfig(listen_port=0, store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=4096)
    with Broker(cfg) as b:
        put(b, 20, size=500)  # ~634 B records: several 4 KiB commit-log files
        store = b.message_store

        def drop_head() -> int:
            store.delete_commit_log_files_before(8192)
            store.correct_min_offsets()
            return store.get_min_offset_in_queue(TOPIC, 0)

        assert on_loop(b, drop_head) > 0
        r = query(client, b)
        assert r.code == ResponseCode.QUERY_NOT_FOUND


def test_query_missing_queue_id_names_it(broker, client):
    req = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": GROUP, "topic": TOPIC})
    r = client.invoke_sync(broker.address, req)
    assert r.code == ResponseCode.SYSTEM_ERROR and "queueId" in (r.remark or "")


# --- UPDATE_CONSUMER_OFFSET --------------------------------------------------------------------------------------
def test_update_oneway_then_query_per_queue(broker, client):
    put(broker, 4, queue_id=0)
    put(broker, 4, queue_id=1)
    update_oneway(client, broker, 4, queue_id=0)
    update_oneway(client, broker, 1, queue_id=1)
    update_oneway(client, broker, 2, queue_id=1)  # a later commit replaces the earlier one
    assert query(client, broker, queue_id=0).ext_fields["offset"] == "4"
    assert query(client, broker, queue_id=1).ext_fields["offset"] == "2"
    table = on_loop(broker, lambda: dict(broker.controller.consumer_offset_manager.offset_table))
    assert table[f"{TOPIC}@{GROUP}"] == {0: 4, 1: 2}


def test_update_with_response_answers_success(broker, client):
    ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "commitOffset": 7}
    r = client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext))
    assert r.code == ResponseCode.SUCCESS
    assert query(client, broker).ext_fields["offset"] == "7"


def test_update_missing_commit_offset_names_it_and_commits_nothing(broker, client):
    ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0}
    r = client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext))
    assert r.code == ResponseCode.SYSTEM_ERROR and "commitOffset" in (r.remark or "")
    assert query(client, broker, setZeroIfNotFound="false").code == ResponseCode.QUERY_NOT_FOUND


# --- GET_CONSUMER_LIST_BY_GROUP ----------------------------------------------------------------------------------
def test_consumer_list_names_every_client_of_the_group(broker, client):
    with BlockingRemotingClient() as other:
        assert heartbeat(client, broker, "127.0.0.1@one").code == ResponseCode.SUCCESS
        assert heartbeat(other, broker, "127.0.0.1@two").code == ResponseCode.SUCCESS
        req = RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP})
        r = client.invoke_sync(broker.address, req)
        assert r.code == ResponseCode.SUCCESS
        assert sorted(json.loads(r.body)["consumerIdList"]) == ["127.0.0.1@one", "127.0.0.1@two"]


def test_consumer_list_of_unknown_group_is_system_error(broker, client):
    req = RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "nobody_here"})
    r = client.invoke_sync(broker.address, req)
    assert r.code == ResponseCode.SYSTEM_ERROR and r.remark == "no consumer for this group, nobody_here"


def test_consumer_list_missing_group_names_it(broker, client):
    r = client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {}))
    assert r.code == ResponseCode.SYSTEM_ERROR and "consumerGroup" in (r.remark or "")


def test_update_for_an_unknown_topic_queue_or_an_illegal_group_is_refused_and_commits_nothing(broker, client):
    """A client cannot grow consumerOffset.json with made-up topics, queues or group names (4.9 commits them all)."""
    cases = [
        ({"topic": "NoSuchTopic"}, ResponseCode.TOPIC_NOT_EXIST),
        ({"queueId": 4}, ResponseCode.INVALID_PARAMETER),
        ({"queueId": -1}, ResponseCode.INVALID_PARAMETER),
        ({"consumerGroup": "bad group"}, ResponseCode.INVALID_PARAMETER),
        ({"consumerGroup": "g" * 121}, ResponseCode.INVALID_PARAMETER),
    ]
    for change, code in cases:
        ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "commitOffset": 7, **change}
        r = client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext))
        assert r.code == code, (change, r.remark)
    assert on_loop(broker, lambda: dict(broker.controller.consumer_offset_manager.offset_table)) == {}
