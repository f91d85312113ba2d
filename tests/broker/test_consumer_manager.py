"""ConsumerManager / ConsumerGroupInfo / ProducerManager over real TCP connections on 127.0.0.1: registration,
subscription version rules, unregistration, channel close, inactivity expiry with an injected clock, and the
ConsumerIdsChangeListener events (CHANGE with channels, UNREGISTER, REGISTER with subscriptions)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from rmq_core.broker.client.client_channel_info import ClientChannelInfo
from rmq_core.broker.client.consumer_manager import (
    ConsumerGroupEvent,
    ConsumerGroupInfo,
    ConsumerManager,
)
from rmq_core.broker.client.producer_manager import ProducerManager
from rmq_core.filter.subscription_data import SubscriptionData, build_subscription_data
from rmq_core.remoting.body.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel
from rmq_core.remoting.connection import Connection

PUSH, CLUSTERING, LAST = (
    ConsumeType.CONSUME_PASSIVELY,
    MessageModel.CLUSTERING,
    ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
)


class Net:
    """A loop, a TCP server and N accepted server-side Connections (what the broker keys clients by)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.server: asyncio.base_events.Server | None = None
        self.clients: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self.conns: list[Connection] = []
        self._accepted: asyncio.Queue[Connection] | None = None

    def connect(self, n: int) -> list[Connection]:
        return self.loop.run_until_complete(self._connect(n))

    async def _connect(self, n: int) -> list[Connection]:
        if self.server is None:
            self._accepted = asyncio.Queue()

            async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                assert self._accepted is not None
                await self._accepted.put(Connection(reader, writer))

            self.server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        out = []
        for _ in range(n):
            self.clients.append(await asyncio.open_connection("127.0.0.1", port))
            assert self._accepted is not None
            out.append(await self._accepted.get())
        self.conns.extend(out)
        return out

    def client_sees_eof(self, i: int) -> bool:
        reader = self.clients[i][0]
        return self.loop.run_until_complete(asyncio.wait_for(reader.read(1), 2.0)) == b""

    def close(self) -> None:
        async def shutdown() -> None:
            for c in self.conns:
                c.close()
            for _, w in self.clients:
                w.close()
            for _, w in self.clients:
                try:
                    await w.wait_closed()
                except (ConnectionError, OSError):
                    pass
            for c in self.conns:
                try:
                    await c.writer.wait_closed()
                except (ConnectionError, OSError):
                    pass
            if self.server is not None:
                self.server.close()
                await self.server.wait_closed()

        self.loop.run_until_complete(shutdown())
        self.loop.close()


@pytest.fixture
def net() -> Iterator[Net]:
    n = Net()
    yield n
    n.close()


class Events:
    def __init__(self) -> None:
        self.items: list[tuple[Any, ...]] = []

    def __call__(self, event: ConsumerGroupEvent, group: str, *args: Any) -> None:
        self.items.append((event, group, *args))

    def kinds(self) -> list[tuple[str, str]]:
        return [(e[0].name, e[1]) for e in self.items]

    def clear(self) -> None:
        self.items.clear()


def sub(topic: str, expr: str = "*", version: int = 1) -> SubscriptionData:
    s = build_subscription_data(topic, expr)
    s.sub_version = version
    return s


def info(conn: Connection, client_id: str, ts: int = 1_000) -> ClientChannelInfo:
    return ClientChannelInfo(conn, client_id, "JAVA", 401, ts)


# ------------------------------------------------------------------------------------------- ConsumerManager ----


def test_first_registration_emits_change_then_register(net):
    (c1,) = net.connect(1)
    ev = Events()
    mgr = ConsumerManager(on_event=ev)
    subs = [sub("T", "TagA || TagB", 10)]
    assert mgr.register_consumer("g", info(c1, "cid-1"), PUSH, CLUSTERING, LAST, subs, True) is True
    assert ev.kinds() == [("CHANGE", "g"), ("REGISTER", "g")]
    assert ev.items[0][2] == [c1]
    assert ev.items[1][2] == subs
    group = mgr.get_consumer_group_info("g")
    assert group is not None
    assert group.get_all_client_ids() == ["cid-1"] and group.get_all_channels() == [c1]
    assert group.find_subscription_data("T").tags_set == {"TagA", "TagB"}
    assert group.message_model == MessageModel.CLUSTERING == "CLUSTERING"
    assert group.consume_type == ConsumeType.CONSUME_PASSIVELY
    assert mgr.find_channel("g", "cid-1").conn is c1
    assert mgr.find_channel("g", "nobody") is None and mgr.find_channel("other", "cid-1") is None
    assert mgr.find_subscription_data("g", "T") is subs[0]
    assert mgr.query_topic_consume_by_who("T") == {"g"}


def test_repeated_heartbeat_is_not_a_change_but_refreshes_time(net):
    (c1,) = net.connect(1)
    ev = Events()
    mgr = ConsumerManager(on_event=ev)
    mgr.register_consumer("g", info(c1, "cid-1", 1_000), PUSH, CLUSTERING, LAST, [sub("T")], True)
    ev.clear()
    assert mgr.register_consumer("g", info(c1, "cid-1", 31_000), PUSH, CLUSTERING, LAST, [sub("T")], True) is False
    assert ev.kinds() == [("REGISTER", "g")]  # REGISTER always, CHANGE only on a change
    ci = mgr.get_consumer_group_info("g").channel_info_table[c1]
    assert ci.last_update_timestamp == 31_000
    assert mgr.get_consumer_group_info("g").last_update_timestamp == 31_000


def test_second_client_is_a_change_with_all_channels(net):
    c1, c2 = net.connect(2)
    ev = Events()
    mgr = ConsumerManager(on_event=ev)
    mgr.register_consumer("g", info(c1, "cid-1"), PUSH, CLUSTERING, LAST, [sub("T")], True)
    ev.clear()
    assert mgr.register_consumer("g", info(c2, "cid-2"), PUSH, CLUSTERING, LAST, [sub("T")], True) is True
    assert ev.items[0][0] == ConsumerGroupEvent.CHANGE and set(ev.items[0][2]) == {c1, c2}
    assert sorted(mgr.get_consumer_group_info("g").get_all_client_ids()) == ["cid-1", "cid-2"]


def test_no_change_event_when_group_does_not_notify(net):
    (c1,) = net.connect(1)
    ev = Events()
    mgr = ConsumerManager(on_event=ev)
    assert mgr.register_consumer("g", info(c1, "cid-1"), PUSH, CLUSTERING, LAST, [sub("T")], False) is True
    assert ev.kinds() == [("REGISTER", "g")]


def test_subscription_version_rules():
    g = ConsumerGroupInfo("g")
    old = sub("T", "TagA", 100)
    assert g.update_subscription([old]) is True
    # an older or equal version does not replace
    assert g.update_subscription([sub("T", "TagB", 99)]) is False
    assert g.update_subscription([sub("T", "TagB", 100)]) is False
    assert g.find_subscription_data("T") is old
    # a newer version replaces, and (as in RocketMQ) is not reported as a change
    newer = sub("T", "TagB", 101)
    assert g.update_subscription([newer]) is False
    assert g.find_subscription_data("T") is newer
    # a new topic is a change; a topic no longer sent is removed (a change)
    assert g.update_subscription([newer, sub("U", "*", 5)]) is True
    assert g.get_subscribe_topics() == {"T", "U"}
    assert g.update_subscription([sub("U", "*", 5)]) is True
    assert g.get_subscribe_topics() == {"U"}
    assert g.update_subscription([]) is True and g.subscription_table == {}


def test_heartbeat_updates_consume_type_and_model(net):
    (c1,) = net.connect(1)
    mgr = ConsumerManager()
    mgr.register_consumer("g", info(c1, "cid-1"), PUSH, CLUSTERING, LAST, [sub("T")], True)
    mgr.register_consumer(
        "g", info(c1, "cid-1"), "CONSUME_ACTIVELY", "BROADCASTING", "CONSUME_FROM_FIRST_OFFSET", [sub("T")], True
    )
    g = mgr.get_consumer_group_info("g")
    assert g.consume_type is ConsumeType.CONSUME_ACTIVELY
    assert g.message_model is MessageModel.BROADCASTING
    assert g.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    with pytest.raises(ValueError, match="messageModel"):
        mgr.register_consumer("g", info(c1, "cid-1"), PUSH, "SOMETIMES", LAST, [sub("T")], True)


def test_same_connection_new_client_id_replaces_the_info(net):
    (c1,) = net.connect(1)
    mgr = ConsumerManager()
    mgr.register_consumer("g", info(c1, "cid-1"), PUSH, CLUSTERING, LAST, [sub("T")], True)
    mgr.register_consumer("g", info(c1, "cid-9"), PUSH, CLUSTERING, LAST, [sub("T")], True)
    assert mgr.get_consumer_group_info("g").get_all_client_ids() == ["cid-9"]


def test_unregister_last_consumer_drops_group(net):
    c1, c2 = net.connect(2)
    ev = Events()
    mgr = ConsumerManager(on_event=ev)
    mgr.register_consumer("g", info(c1, "cid-1"), PUSH, CLUSTERING, LAST, [sub("T")], True)
    mgr.register_consumer("g", info(c2, "cid-2"), PUSH, CLUSTERING, LAST, [sub("T")], True)
    ev.clear()
    mgr.unregister_consumer("g", info(c1, "cid-1"), True)
    assert ev.kinds() == [("CHANGE", "g")] and ev.items[0][2] == [c2]
    ev.clear()
    mgr.unregister_consumer("g", info(c2, "cid-2"), True)
    assert ev.kinds() == [("UNREGISTER", "g"), ("CHANGE", "g")] and ev.items[1][2] == []
    assert mgr.get_consumer_group_info("g") is None
    ev.clear()
    mgr.unregister_consumer("g", info(c2, "cid-2"), True)  # unknown group: nothing
    assert ev.items == []


def test_unregister_without_notify_still_reports_unregister(net):
    (c1,) = net.connect(1)
    ev = Events()
    mgr = ConsumerManager(on_event=ev)
    mgr.register_consumer("g", info(c1, "cid-1"), PUSH, CLUSTERING, LAST, [sub("T")], False)
    ev.clear()
    mgr.unregister_consumer("g", info(c1, "cid-1"), False)
    assert ev.kinds() == [("UNREGISTER", "g")]


def test_channel_close_removes_the_connection_from_every_group(net):
    c1, c2 = net.connect(2)
    ev = Events()
    mgr = ConsumerManager(on_event=ev)
    mgr.register_consumer("g1", info(c1, "cid-1"), PUSH, CLUSTERING, LAST, [sub("T")], True)
    mgr.register_consumer("g2", info(c1, "cid-1"), PUSH, CLUSTERING, LAST, [sub("U")], True)
    mgr.register_consumer("g2", info(c2, "cid-2"), PUSH, CLUSTERING, LAST, [sub("U")], True)
    ev.clear()
    assert mgr.do_channel_close_event(c1) is True
    assert mgr.get_consumer_group_info("g1") is None
    assert mgr.get_consumer_group_info("g2").get_all_channels() == [c2]
    assert ("UNREGISTER", "g1") in ev.kinds() and ("CHANGE", "g1") in ev.kinds()
    change_g2 = [e for e in ev.items if e[:2] == (ConsumerGroupEvent.CHANGE, "g2")]
    assert change_g2 and change_g2[0][2] == [c2]
    ev.clear()
    assert mgr.do_channel_close_event(c1) is False and ev.items == []


def test_scan_expires_silent_consumers_and_closes_their_connection(net):
    c1, c2 = net.connect(2)
    ev = Events()
    mgr = ConsumerManager(on_event=ev)
    mgr.register_consumer("g", info(c1, "cid-1", 1_000), PUSH, CLUSTERING, LAST, [sub("T")], True)
    mgr.register_consumer("g", info(c2, "cid-2", 50_000), PUSH, CLUSTERING, LAST, [sub("T")], True)
    ev.clear()
    assert mgr.scan_not_active_channel(121_000) == []  # exactly 120 s: not yet expired
    removed = mgr.scan_not_active_channel(121_001)
    assert [r.client_id for r in removed] == ["cid-1"]
    assert c1.closed and not c2.closed
    assert net.client_sees_eof(0)
    assert mgr.get_consumer_group_info("g").get_all_client_ids() == ["cid-2"]
    assert ev.kinds() == [("CHANGE", "g")] and ev.items[0][2] == [c2]
    ev.clear()
    assert [r.client_id for r in mgr.scan_not_active_channel(170_001)] == ["cid-2"]
    assert mgr.get_consumer_group_info("g") is None
    assert ev.kinds() == [("UNREGISTER", "g")]


def test_heartbeat_keeps_consumer_alive(net):
    (c1,) = net.connect(1)
    mgr = ConsumerManager()
    mgr.register_consumer("g", info(c1, "cid-1", 0), PUSH, CLUSTERING, LAST, [sub("T")], True)
    for t in range(30_000, 300_001, 30_000):
        mgr.register_consumer("g", info(c1, "cid-1", t), PUSH, CLUSTERING, LAST, [sub("T")], True)
        assert mgr.scan_not_active_channel(t + 1) == []
    assert not c1.closed


def test_listener_failure_does_not_corrupt_the_table(net):
    (c1,) = net.connect(1)

    def boom(*_args: Any) -> None:
        raise RuntimeError("listener exploded")

    mgr = ConsumerManager(on_event=boom)
    assert mgr.register_consumer("g", info(c1, "cid-1"), PUSH, CLUSTERING, LAST, [sub("T")], True) is True
    assert mgr.get_consumer_group_info("g").get_all_client_ids() == ["cid-1"]


# ------------------------------------------------------------------------------------------- ProducerManager ----


def test_producer_register_find_unregister(net):
    c1, c2 = net.connect(2)
    mgr = ProducerManager()
    mgr.register_producer("pg", info(c1, "p-1", 1_000))
    mgr.register_producer("pg", info(c2, "p-2", 1_000))
    mgr.register_producer("pg", info(c1, "p-1", 9_000))  # heartbeat: refresh only
    assert mgr.group_channel_table["pg"][c1].last_update_timestamp == 9_000
    assert mgr.find_channel("p-1") is c1 and mgr.find_channel("nobody") is None
    assert mgr.find_channel_in_group("pg", "p-2").conn is c2
    assert mgr.get_available_channel("pg") in (c1, c2)
    assert mgr.get_available_channel("none") is None
    mgr.unregister_producer("pg", info(c1, "p-1"))
    assert list(mgr.group_channel_table["pg"]) == [c2] and mgr.find_channel("p-1") is None
    mgr.unregister_producer("pg", info(c2, "p-2"))
    assert "pg" not in mgr.group_channel_table


def test_producer_channel_close_and_expiry(net):
    c1, c2 = net.connect(2)
    mgr = ProducerManager()
    mgr.register_producer("pg", info(c1, "p-1", 1_000))
    mgr.register_producer("pg", info(c2, "p-2", 100_000))
    assert mgr.do_channel_close_event(c2) is True
    assert mgr.do_channel_close_event(c2) is False
    assert mgr.find_channel("p-2") is None
    assert mgr.scan_not_active_channel(121_000) == []
    assert [i.client_id for i in mgr.scan_not_active_channel(121_001)] == ["p-1"]
    assert c1.closed and net.client_sees_eof(0)
    assert mgr.get_available_channel("pg") is None
