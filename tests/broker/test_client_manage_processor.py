"""HEART_BEAT / UNREGISTER_CLIENT against a real Broker over TCP, and the NOTIFY_CONSUMER_IDS_CHANGED the broker
sends (oneway) to every member of a consumer group when the group changes.

Absence of a notification is checked without sleeping: a notification for client A is written to A's connection
before the request that caused it is answered; A then makes one round trip on its own connection, whose answer
arrives after anything written to it earlier, and A's handler runs before that answer is handed over.
"""

from __future__ import annotations

import asyncio
import json
import queue
from collections.abc import Callable
from typing import Any

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.filter.message_selector import MessageSelector
from rmq_core.filter.subscription_data import build_subscription_data
from rmq_core.remoting.body.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerData,
)
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.remoting_client import BlockingRemotingClient

GROUP = "cmp_client_group"
TOPIC = "ClientTopic"


def on_loop(broker: Broker, fn: Callable[[], Any]) -> Any:
    async def run() -> Any:
        return fn()

    return asyncio.run_coroutine_threadsafe(run(), broker.controller.loop).result(5)


class Member:
    """A consumer-group member: a BlockingRemotingClient whose request handler records what the broker sends it."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self.received: queue.Queue[RemotingCommand] = queue.Queue()

        async def handler(conn: Any, cmd: RemotingCommand) -> RemotingCommand | None:
            self.received.put(cmd)
            return None

        self.client = BlockingRemotingClient(request_handler=handler)

    def heartbeat(
        self,
        broker: Broker,
        group: str = GROUP,
        producer_group: str | None = None,
        model: MessageModel = MessageModel.CLUSTERING,
        subs: list[Any] | None = None,
    ) -> RemotingCommand:
        consumers = [
            ConsumerData(
                group,
                ConsumeType.CONSUME_PASSIVELY,
                model,
                ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                subs if subs is not None else [build_subscription_data(TOPIC, "TagA || TagB")],
            )
        ]
        hb = HeartbeatData(
            self.client_id,
            consumer_data_set=consumers if group else [],
            producer_data_set=[ProducerData(producer_group)] if producer_group else [],
        )
        return self.client.invoke_sync(
            broker.address, RemotingCommand.request(RequestCode.HEART_BEAT, body=hb.encode())
        )

    def unregister(
        self, broker: Broker, consumer_group: str | None = GROUP, producer_group: str | None = None
    ) -> RemotingCommand:
        ext = {"clientID": self.client_id, "consumerGroup": consumer_group, "producerGroup": producer_group}
        return self.client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, ext))

    def round_trip(self, broker: Broker) -> None:
        req = RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP})
        self.client.invoke_sync(broker.address, req)

    def next_notification(self) -> RemotingCommand:
        return self.received.get(timeout=5)

    def pending(self, broker: Broker) -> list[RemotingCommand]:
        self.round_trip(broker)
        out = []
        while not self.received.empty():
            out.append(self.received.get_nowait())
        return out

    def close(self) -> None:
        self.client.close()


@pytest.fixture
def members():
    made: list[Member] = []

    def make(client_id: str) -> Member:
        m = Member(client_id)
        made.append(m)
        return m

    yield make
    for m in made:
        m.close()


def consumer_ids(broker: Broker, group: str = GROUP) -> list[str] | None:
    def get() -> list[str] | None:
        info = broker.controller.consumer_manager.get_consumer_group_info(group)
        return None if info is None else sorted(info.get_all_client_ids())

    return on_loop(broker, get)


def assert_notified(cmd: RemotingCommand, group: str = GROUP) -> None:
    assert cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
    assert cmd.is_oneway and not cmd.is_response
    assert cmd.ext_fields == {"consumerGroup": group}


# --- HEART_BEAT --------------------------------------------------------------------------------------------------
def test_heartbeat_registers_consumer_and_producer(broker, members):
    a = members("127.0.0.1@a")
    r = a.heartbeat(broker, producer_group="cmp_producer_group")
    assert r.code == ResponseCode.SUCCESS
    assert r.ext_fields.get("IS_SUPPORT_HEART_BEAT_V2") == "true"

    def state() -> tuple[Any, ...]:
        ctl = broker.controller
        info = ctl.consumer_manager.get_consumer_group_info(GROUP)
        sub = info.find_subscription_data(TOPIC)
        producers = ctl.producer_manager.group_channel_table.get("cmp_producer_group", {})
        return (
            info.get_all_client_ids(),
            info.message_model,
            info.consume_type,
            info.consume_from_where,
            sorted(sub.tags_set),
            [p.client_id for p in producers.values()],
        )

    ids, model, ctype, cfw, tags, producer_ids = on_loop(broker, state)
    assert ids == ["127.0.0.1@a"]
    assert (model, ctype, cfw) == (
        MessageModel.CLUSTERING,
        ConsumeType.CONSUME_PASSIVELY,
        ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    assert tags == ["TagA", "TagB"]
    assert producer_ids == ["127.0.0.1@a"]


def test_heartbeat_creates_the_retry_topic_with_the_groups_retry_queue_nums(broker, members):
    a = members("127.0.0.1@a")
    group_cfg = SubscriptionGroupConfig("cmp_retry3_group", retry_queue_nums=3)
    req = RemotingCommand.request(
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps(group_cfg.to_json_dict()).encode()
    )
    assert a.client.invoke_sync(broker.address, req).code == ResponseCode.SUCCESS
    assert a.heartbeat(broker).code == ResponseCode.SUCCESS  # auto-created group: 1 retry queue
    assert a.heartbeat(broker, group="cmp_retry3_group").code == ResponseCode.SUCCESS

    def topics() -> tuple[Any, Any]:
        tcm = broker.controller.topic_config_manager
        return tcm.select_topic_config("%RETRY%" + GROUP), tcm.select_topic_config("%RETRY%cmp_retry3_group")

    auto, three = on_loop(broker, topics)
    assert (auto.read_queue_nums, auto.write_queue_nums, auto.perm) == (1, 1, 6)
    assert (three.read_queue_nums, three.write_queue_nums, three.perm) == (3, 3, 6)
    assert (
        on_loop(broker, lambda: broker.controller.subscription_group_manager.subscription_group_table.get(GROUP))
        is not None
    )  # the group was auto-created by the heartbeat


def test_heartbeat_without_sub_keeps_the_groups_subscriptions(broker, members):
    """A 5.x client may send ``withoutSub=true`` with no subscriptions when nothing changed: they must survive."""
    a = members("127.0.0.1@a")
    assert a.heartbeat(broker).code == ResponseCode.SUCCESS
    hb = HeartbeatData(a.client_id, consumer_data_set=[ConsumerData(GROUP)], heartbeat_fingerprint=42, without_sub=True)
    r = a.client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.HEART_BEAT, body=hb.encode()))
    assert r.code == ResponseCode.SUCCESS

    def topics() -> list[str]:
        return sorted(broker.controller.consumer_manager.get_consumer_group_info(GROUP).subscription_table)

    assert on_loop(broker, topics) == [TOPIC]
    hb.without_sub = False  # a full heartbeat with no subscriptions does clear them, as RocketMQ's does
    r = a.client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.HEART_BEAT, body=hb.encode()))
    assert r.code == ResponseCode.SUCCESS and on_loop(broker, topics) == []


def test_heartbeat_without_body_is_system_error_and_registers_nothing(broker, members):
    a = members("127.0.0.1@a")
    r = a.client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.HEART_BEAT))
    assert r.code == ResponseCode.SYSTEM_ERROR
    r = a.client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.HEART_BEAT, body=b"{not json"))
    assert r.code == ResponseCode.SYSTEM_ERROR and "HeartbeatData" in (r.remark or "")
    assert consumer_ids(broker) is None


def test_heartbeat_with_invalid_group_name_registers_nothing(broker, members):
    a = members("127.0.0.1@a")
    r = a.heartbeat(broker, group="bad group!", producer_group="cmp_producer_group")
    assert r.code == ResponseCode.SYSTEM_ERROR and "illegal characters" in (r.remark or "")
    assert consumer_ids(broker, "bad group!") is None
    assert (
        on_loop(broker, lambda: broker.controller.producer_manager.group_channel_table.get("cmp_producer_group"))
        is None
    )


def test_sql92_subscription_registers_filter_data(tmp_path, members):
    cfg = BrokerConfig(listen_port=0, store_path_root_dir=str(tmp_path / "store"), enable_property_filter=True)
    with Broker(cfg) as b:
        a = members("127.0.0.1@a")
        sub = build_subscription_data(TOPIC, MessageSelector.by_sql("a > 5"))
        assert a.heartbeat(b, subs=[sub]).code == ResponseCode.SUCCESS
        data = on_loop(b, lambda: b.controller.consumer_filter_manager.get(TOPIC, GROUP))
        assert data is not None and data.expression == "a > 5" and data.expression_type == "SQL92"
        assert not data.is_dead
        assert a.unregister(b).code == ResponseCode.SUCCESS  # the group empties: its filter data dies
        data = on_loop(b, lambda: b.controller.consumer_filter_manager.get(TOPIC, GROUP))
        assert data is not None and data.is_dead


# --- NOTIFY_CONSUMER_IDS_CHANGED ---------------------------------------------------------------------------------
def test_first_member_is_notified_when_a_second_joins(broker, members):
    a, b = members("127.0.0.1@a"), members("127.0.0.1@b")
    a.heartbeat(broker)
    assert_notified(a.next_notification())  # its own arrival changed the group too (as RocketMQ does)
    b.heartbeat(broker)
    assert_notified(a.next_notification())
    assert_notified(b.next_notification())
    assert consumer_ids(broker) == ["127.0.0.1@a", "127.0.0.1@b"]


def test_repeated_heartbeat_without_change_notifies_nobody(broker, members):
    a, b = members("127.0.0.1@a"), members("127.0.0.1@b")
    a.heartbeat(broker)
    b.heartbeat(broker)
    a.pending(broker), b.pending(broker)
    b.heartbeat(broker)
    assert a.pending(broker) == [] and b.pending(broker) == []


def test_first_member_is_notified_when_the_second_unregisters(broker, members):
    a, b = members("127.0.0.1@a"), members("127.0.0.1@b")
    a.heartbeat(broker)
    b.heartbeat(broker)
    a.pending(broker)
    assert b.unregister(broker).code == ResponseCode.SUCCESS
    assert_notified(a.next_notification())
    assert consumer_ids(broker) == ["127.0.0.1@a"]


def test_first_member_is_notified_when_the_seconds_connection_closes(broker, members):
    a, b = members("127.0.0.1@a"), members("127.0.0.1@b")
    a.heartbeat(broker)
    b.heartbeat(broker)
    a.pending(broker)
    b.close()
    assert_notified(a.next_notification())
    assert consumer_ids(broker) == ["127.0.0.1@a"]


def test_group_with_notification_disabled_is_not_notified(broker, members):
    a, b = members("127.0.0.1@a"), members("127.0.0.1@b")
    quiet = SubscriptionGroupConfig("cmp_quiet_group", notify_consumer_ids_changed_enable=False)
    req = RemotingCommand.request(
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps(quiet.to_json_dict()).encode()
    )
    assert a.client.invoke_sync(broker.address, req).code == ResponseCode.SUCCESS
    a.heartbeat(broker, group="cmp_quiet_group")
    b.heartbeat(broker, group="cmp_quiet_group")
    b.unregister(broker, consumer_group="cmp_quiet_group")
    assert a.pending(broker) == []
    assert consumer_ids(broker, "cmp_quiet_group") == ["127.0.0.1@a"]


def test_broker_with_notification_disabled_notifies_nobody(tmp_path, members):
    cfg = BrokerConfig(
        listen_port=0, store_path_root_dir=str(tmp_path / "store"), notify_consumer_ids_changed_enable=False
    )
    with Broker(cfg) as brk:
        a, b = members("127.0.0.1@a"), members("127.0.0.1@b")
        a.heartbeat(brk)
        b.heartbeat(brk)
        assert a.pending(brk) == []


# --- UNREGISTER_CLIENT and expiry --------------------------------------------------------------------------------
def test_unregister_producer_group(broker, members):
    a = members("127.0.0.1@a")
    a.heartbeat(broker, group="", producer_group="cmp_producer_group")
    table = broker.controller.producer_manager.group_channel_table
    assert on_loop(broker, lambda: len(table.get("cmp_producer_group", {}))) == 1
    assert a.unregister(broker, consumer_group=None, producer_group="cmp_producer_group").code == ResponseCode.SUCCESS
    assert on_loop(broker, lambda: len(table.get("cmp_producer_group", {}))) == 0


def test_unregister_without_client_id_names_it(broker, members):
    a = members("127.0.0.1@a")
    req = RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, {"consumerGroup": GROUP})
    r = a.client.invoke_sync(broker.address, req)
    assert r.code == ResponseCode.SYSTEM_ERROR and "clientID" in (r.remark or "")


def test_channel_expires_after_120_s_without_heartbeat(broker, members):
    a = members("127.0.0.1@a")
    a.heartbeat(broker)
    manager = broker.controller.consumer_manager
    last = on_loop(broker, lambda: manager.find_channel(GROUP, "127.0.0.1@a").last_update_timestamp)
    assert on_loop(broker, lambda: manager.scan_not_active_channel(last + 120_000)) == []
    assert consumer_ids(broker) == ["127.0.0.1@a"]
    removed = on_loop(broker, lambda: manager.scan_not_active_channel(last + 120_001))
    assert [ci.client_id for ci in removed] == ["127.0.0.1@a"]
    assert consumer_ids(broker) is None
    with BlockingRemotingClient() as other:
        req = RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP})
        assert other.invoke_sync(broker.address, req).code == ResponseCode.SYSTEM_ERROR


def _check_client_config(broker, expression_type: str, expression: str):  # type: ignore[no-untyped-def]
    import json

    from rmq_core.remoting.command import RemotingCommand as _Cmd
    from rmq_core.remoting.remoting_client import BlockingRemotingClient as _Client

    body = json.dumps(
        {
            "clientId": "127.0.0.1@c",
            "group": "G_CHECK",
            "subscriptionData": {
                "classFilterMode": False,
                "topic": "T",
                "subString": expression,
                "tagsSet": [],
                "codeSet": [],
                "subVersion": 1,
                "expressionType": expression_type,
            },
        }
    ).encode()
    with _Client() as c:
        return c.invoke_sync(broker.address, _Cmd.request(46, {}, body))


def test_check_client_config_accepts_tags_and_refuses_sql92_without_property_filter(broker):
    assert _check_client_config(broker, "TAG", "TagA || TagB").code == ResponseCode.SUCCESS
    r = _check_client_config(broker, "SQL92", "a > 5")
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert r.remark == "The broker does not support consumer to filter message by SQL92"


def test_check_client_config_compiles_sql92_when_property_filter_is_on(tmp_path):
    with Broker(BrokerConfig(listen_port=0, store_path_root_dir=str(tmp_path / "s"), enable_property_filter=True)) as b:
        assert _check_client_config(b, "SQL92", "a > 5 AND b = 'x'").code == ResponseCode.SUCCESS
        r = _check_client_config(b, "SQL92", "a > > 5")
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and r.remark
