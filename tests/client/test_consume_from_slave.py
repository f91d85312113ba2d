"""Reads from the slave (4.9's rules), end to end over real sockets: an rmq_core SYNC_MASTER in a child process, its
rmq_core slave and a name server in this process, producers and consumers of rmq_core.client.

- The master is SIGKILLed during a stream of sync sends: every send answered SEND_OK is on the slave; a push consumer
  that was consuming switches to the slave (the name server's route keeps the broker name with only the slave, the
  client's findBrokerAddressInSubscribe falls back to it) and reads every one; a consumer started while the master is
  down reads them all from the slave too. Offsets committed while on the slave (RemoteBrokerOffsetStore: master first,
  else the slave) are on the slave; when the master returns they reach it from the consumer (its next offset persist
  goes to the master again; 4.9's slave never pushes offsets to its master) and the slave copies them back
  (SlaveSynchronize).
- The master suggests the slave when what a pull reads is no longer in memory (accessMessageInMemoryMaxRatio), the
  client's next pull goes there (PullAPIWrapper.pullFromWhichNodeTable), and the slave sends it back (suggests
  brokerId 0) once the rest is in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from rmq_core.broker import Broker
from rmq_core.client import (
    ConsumeConcurrentlyStatus,
    Producer,
    PullConsumer,
    PullStatus,
    PushConsumer,
    SendStatus,
)
from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI
from rmq_core.client.client_config import ClientConfig
from rmq_core.client.mq_client_manager import MQClientManager
from rmq_core.common.mix_all import MASTER_ID
from rmq_core.message import Message, MessageQueue, decode_messages
from rmq_core.namesrv import NameServer

from support.admin_helpers import create_topic
from support.apache_rocketmq import free_port
from support.client_helpers_e2e import Deliveries
from support.helpers import wait_until
from support.slave_read_helpers import (
    BROKER_NAME,
    MasterProcess,
    SyncSender,
    committed_offsets,
    master_config,
    push_consumer,
    send_ok_once,
    slave_config,
    start_slave,
)

TOPIC = "SlaveReadTopic"
QUEUES = 4


@contextlib.contextmanager
def name_server() -> Iterator[NameServer]:
    ns = NameServer(listen_port=0)
    ns.start()
    try:
        yield ns
    finally:
        ns.shutdown()


def sync_slave_configs(slave: Broker) -> None:
    """One SlaveSynchronize round now (the 10 s timer would do the same): topics and groups from the master."""
    c = slave.controller
    sync = c.replication.slave_synchronize
    assert sync is not None
    asyncio.run_coroutine_threadsafe(sync.sync_all(), c.loop).result(10)


def reregister(broker: Broker) -> None:
    """The broker's periodic REGISTER_BROKER (every registerNameServerPeriod), now."""
    broker.controller.loop.call_soon_threadsafe(broker.controller.register_broker_all)


def stored_keys(broker: Broker, topic: str = TOPIC) -> dict[str, tuple[int, int]]:
    """key → (queue id, queue offset) of every message the broker's store holds for ``topic``."""
    out: dict[str, tuple[int, int]] = {}
    for q in range(QUEUES):
        offset = 0
        while True:
            r = broker.message_store.get_message("test", topic, q, offset, 32)
            if not r.body:
                break
            for m in decode_messages(r.body):
                out[m.keys or ""] = (q, m.queue_offset)
            offset = r.next_begin_offset
    return out


def max_offsets(broker: Broker) -> dict[int, int]:
    return {q: broker.message_store.get_max_offset_in_queue(TOPIC, q) for q in range(QUEUES)}


def group_get_nums(broker: Broker, group: str) -> int:
    """Messages this broker has served to ``group`` on TOPIC (BrokerStatsManager GROUP_GET_NUMS)."""
    stats = broker.controller.broker_stats_manager
    return int(stats.values("GROUP_GET_NUMS").get(f"{TOPIC}@{group}", 0))


def committed_on_disk(store_root: Path, group: str) -> dict[int, int]:
    """The offsets of (group, TOPIC) in a broker's consumerOffset.json as it is on disk (-1 where none)."""
    path = store_root / "config" / "consumerOffset.json"
    table: dict[str, Any] = {}
    if path.exists():
        table = json.loads(path.read_text()).get("offsetTable", {})
    row = table.get(f"{TOPIC}@{group}", {})
    return {q: int(row.get(str(q), -1)) for q in range(QUEUES)}


@pytest.mark.slow
def test_master_killed_mid_sync_stream_consumers_read_every_send_ok_from_the_slave(tmp_path: Path) -> None:
    group, late_group = "sr_group", "sr_late_group"
    with name_server() as ns, MasterProcess(tmp_path / "m", ns.address) as master:
        master.start()
        slave = start_slave(tmp_path / "s", ns.address)
        try:
            create_topic([master.address], TOPIC, QUEUES, namesrv=ns.address)
            wait_until(lambda: slave.controller.master_addr == master.address, "the slave to learn its master")
            sync_slave_configs(slave)
            assert TOPIC in slave.controller.topic_config_manager.topic_config_table

            producer = Producer("sr_producer", namesrv_addr=ns.address, instance_name="sr-producer")
            producer.start()
            gate = threading.Event()
            got = Deliveries()

            def gated(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
                gate.wait(60)  # blocked until the master is dead: what is left must come from the slave
                got.add("running", msgs)
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

            # few messages cached per queue: the consumer cannot take the whole stream from the master
            consumer = push_consumer(ns.address, group, TOPIC, gated, pull_threshold_for_queue=8, pull_batch_size=4)
            late: PushConsumer | None = None
            sender = SyncSender(producer, TOPIC)
            try:
                wait_until(  # the slave is connected: SYNC_MASTER answers SEND_OK
                    lambda: send_ok_once(producer, TOPIC),
                    "a SEND_OK from the SYNC_MASTER",
                    timeout=20,
                    interval=0.2,
                )
                sender.start()
                wait_until(lambda: sender.ok_count() >= 300, "300 SEND_OKs", timeout=60)
                master.kill9()  # mid-stream
                wait_until(lambda: sender.failed >= 3, "sends failing after the kill", timeout=30)
                sender.stop()
                assert sender.ok_count() >= 300
                send_ok = dict(sender.send_ok)

                # 1. every SEND_OK is on the slave, where the master put it
                on_slave = stored_keys(slave)
                missing = set(send_ok) - set(on_slave)
                assert not missing, f"{len(missing)} SEND_OK messages not on the slave: {sorted(missing)[:10]}"
                assert all(on_slave[k] == where for k, where in send_ok.items())
                master_offsets_at_kill = committed_on_disk(tmp_path / "m" / "store", group)
                # the slave's next registration finds no master: its SlaveSynchronize pauses (4.9 masterAddr null)
                reregister(slave)
                wait_until(lambda: slave.controller.master_addr is None, "the slave to see no master")

                # 2. the running consumer continues from the slave and gets every one
                served_before = group_get_nums(slave, group)
                gate.set()
                wait_until(
                    lambda: set(got.keys()) >= set(send_ok),
                    "the running consumer to consume every SEND_OK from the slave",
                    timeout=60,
                )
                assert group_get_nums(slave, group) > served_before  # pulls went to the slave

                # 3. a consumer started while the master is down reads them all from the slave
                late_got = Deliveries()

                def late_listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
                    late_got.add("late", msgs)
                    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

                late = push_consumer(ns.address, late_group, TOPIC, late_listener)
                wait_until(lambda: set(late_got.keys()) >= set(send_ok), "the late consumer to read all", timeout=60)
                assert group_get_nums(slave, late_group) >= len(send_ok)

                # 4. offsets committed while on the slave: the slave holds them (the consumer's persist found no
                #    master and used the slave), each queue at its end
                end = max_offsets(slave)
                wait_until(
                    lambda: committed_offsets(slave.address, group, TOPIC, QUEUES) == end,
                    f"the slave to hold the running consumer's offsets {end}",
                    timeout=30,
                )
                # the master's file was behind them when it died (the consumer was gated)
                assert any(master_offsets_at_kill[q] < end[q] for q in range(QUEUES)), master_offsets_at_kill

                # 5. the master returns: the running consumer's offsets reach it (its next persist goes to the
                #    master again), and the slave copies the master's table (SlaveSynchronize)
                master.start()
                wait_until(
                    lambda: committed_offsets(master.address, group, TOPIC, QUEUES) == end,
                    f"the returned master to hold the consumer's offsets {end}",
                    timeout=60,
                    interval=0.2,
                )
                reregister(slave)
                wait_until(lambda: slave.controller.master_addr == master.address, "the slave to see its master")
                sync_slave_configs(slave)
                assert committed_offsets(slave.address, group, TOPIC, QUEUES) == end

                # 6. and consumption goes on: new sends (to the master again) are consumed
                more: list[str] = []

                def send_more() -> bool:
                    try:
                        r = producer.send(Message(TOPIC, b"after", keys=f"after-{len(more)}"))
                    except Exception:
                        return False
                    if r.send_status is SendStatus.SEND_OK:
                        more.append(r.msg_id)
                    return len(more) >= 20

                wait_until(send_more, "20 SEND_OKs from the returned master", timeout=60, interval=0.1)
                wait_until(
                    lambda: sum(1 for d in got.snapshot() if d.key.startswith("after-")) >= 20,
                    "the consumer to consume what the returned master took",
                    timeout=60,
                )
                # ... pulled from the master again (the slave suggests 0 for what is in its memory): the restarted
                # master process has served messages
                with BlockingMQClientAPI(None, 3000) as api:
                    served = int(api.get_broker_runtime_info(master.address)["msgGetTotalTodayNow"])
                assert served > 0
            finally:
                gate.set()
                sender.stop()
                consumer.shutdown()
                if late is not None:
                    late.shutdown()
                producer.shutdown()
        finally:
            slave.shutdown()


def test_route_keeps_the_slave_when_the_master_dies(tmp_path: Path) -> None:
    """4.9's RouteInfoManager: the master's connection closes → its address leaves the broker name's table, the
    broker name (slave only) and the topic's queue data stay."""
    with name_server() as ns, MasterProcess(tmp_path / "m", ns.address, brokerRole="ASYNC_MASTER") as master:
        master.start()
        slave = start_slave(tmp_path / "s", ns.address)
        try:
            create_topic([master.address], TOPIC, QUEUES, namesrv=ns.address)
            with BlockingMQClientAPI(ns.address, 3000) as api:

                def addrs() -> dict[int, str]:
                    route = api.get_topic_route_info_from_name_server(TOPIC)
                    bd = [b for b in route.broker_datas if b.broker_name == BROKER_NAME]
                    assert len(route.queue_datas) == 1 and route.queue_datas[0].read_queue_nums == QUEUES
                    return dict(bd[0].broker_addrs) if bd else {}

                wait_until(lambda: addrs() == {0: master.address, 1: slave.address}, "master and slave routed")
                master.kill9()
                wait_until(lambda: addrs() == {1: slave.address}, "the route with the slave only")
            # a client's route update takes the map without id 0: reads fall back to the slave, sends find no queue
            inst = MQClientManager.get_instance().get_or_create_mq_client_instance(
                ClientConfig(namesrv_addr=ns.address, instance_name="sr-route")
            )
            inst.start()
            try:
                assert inst.run_sync(inst.update_topic_route_info_from_name_server(TOPIC), 5) is True
                assert inst.broker_addr_table[BROKER_NAME] == {1: slave.address}
                assert inst.find_broker_address_in_publish(BROKER_NAME) is None
                assert inst.find_broker_address_in_subscribe(BROKER_NAME, MASTER_ID, True) is None
                found = inst.find_broker_address_in_subscribe(BROKER_NAME, MASTER_ID, False)
                assert found is not None and (found.broker_addr, found.slave) == (slave.address, True)
                route = inst.topic_route_table[TOPIC]
                assert route.publish_message_queues(TOPIC) == []
                assert len(route.subscribe_message_queues(TOPIC)) == QUEUES
            finally:
                inst.shutdown()
        finally:
            slave.shutdown()


# --------------------------------------------------------------------------------------- suggestWhichBrokerId
MEMORY = 10 << 10  # the brokers' "memory": total_physical_memory × accessMessageInMemoryMaxRatio / 100


def small_memory(broker_cfg: Any) -> Any:
    """The broker's StoreConfig with MEMORY bytes of "memory" (ratio 1 % of 100 × MEMORY)."""
    return replace(
        broker_cfg.to_store_config(), access_message_in_memory_max_ratio=1, total_physical_memory=MEMORY * 100
    )


@contextlib.contextmanager
def master_and_slave(tmp_path: Path, master_slave_read: bool = True) -> Iterator[tuple[NameServer, Broker, Broker]]:
    """A name server, an in-process ASYNC_MASTER and its slave, both with MEMORY bytes of memory, the topic with
    one queue on both (the slave synchronized)."""
    with name_server() as ns:
        started: list[Broker] = []
        try:
            m_cfg = master_config(tmp_path / "m", ns.address, slave_read_enable=master_slave_read)
            master = Broker(m_cfg, small_memory(m_cfg)).start()
            started.append(master)
            s_cfg = slave_config(tmp_path / "s", ns.address)
            slave = Broker(s_cfg, small_memory(s_cfg)).start()
            started.append(slave)
            create_topic([master.address], TOPIC, 1, namesrv=ns.address)
            wait_until(lambda: slave.controller.master_addr == master.address, "the slave to learn its master")
            sync_slave_configs(slave)
            yield ns, master, slave
        finally:
            for b in reversed(started):
                b.shutdown()


def backlog(ns: NameServer, master: Broker, slave: Broker, n: int, first: int = 0) -> None:
    p = Producer("sr_backlog", namesrv_addr=ns.address, instance_name="sr-backlog")
    p.start()
    try:
        for i in range(first, first + n):
            r = p.send(Message(TOPIC, bytes([65 + i % 26]) * 1000, keys=f"b-{i}"))
            assert r.send_status is SendStatus.SEND_OK
    finally:
        p.shutdown()
    end = master.message_store.max_physical_offset
    wait_until(lambda: slave.message_store.max_physical_offset == end, "the slave to catch up")


@pytest.mark.parametrize("master_slave_read", [True, False])
def test_pull_follows_the_suggested_broker(tmp_path: Path, master_slave_read: bool) -> None:
    """Each pull goes to the broker the previous answer suggested (PullAPIWrapper.pullFromWhichNodeTable); a broker
    with slaveReadEnable suggests whichBrokerWhenConsumeSlowly (1) when the last message it read lies more than its
    memory behind the CommitLog's end, else the group's brokerId (0); a master without slaveReadEnable always 0."""
    n = 60  # ~63 KB: most of it more than MEMORY behind the end
    with master_and_slave(tmp_path, master_slave_read) as (ns, master, slave):
        backlog(ns, master, slave, n)
        group = "sr_pull_group"
        consumer = PullConsumer(group, namesrv_addr=ns.address, instance_name="sr-pull")
        consumer.start()
        try:
            mq = MessageQueue(TOPIC, BROKER_NAME, 0)
            wrapper = consumer.pull_api_wrapper
            assert wrapper is not None
            offset, keys, route = 0, [], []
            expected_node = MASTER_ID  # nothing suggested yet: the master
            while offset < n + 5:
                if offset == n:  # the backlog is read: five more, for the pull the last answer directs
                    backlog(ns, master, slave, 5, first=n)
                before = (group_get_nums(master, group), group_get_nums(slave, group))
                r = consumer.pull(mq, "*", offset, 32)
                assert r.pull_status is PullStatus.FOUND, r
                after = (group_get_nums(master, group), group_get_nums(slave, group))
                served_by = [i for i in (0, 1) if after[i] > before[i]]
                assert served_by == [expected_node], (route, served_by, expected_node)
                route.append(expected_node)
                # what the serving broker suggested, from where the last message it read lies
                in_disk = master.message_store.max_physical_offset - r.msg_found_list[-1].commitlog_offset > MEMORY
                suggested = wrapper.pull_from_which_node_table[mq]
                if master_slave_read or expected_node == 1:
                    assert suggested == (1 if in_disk else MASTER_ID), (route, in_disk)
                else:
                    assert suggested == MASTER_ID
                if in_disk:
                    assert len(r.msg_found_list) <= 8  # maxTransferCountOnMessageInDisk
                keys += [m.keys for m in r.msg_found_list]
                offset = r.next_begin_offset
                expected_node = suggested
        finally:
            consumer.shutdown()
        assert keys == [f"b-{i}" for i in range(n + 5)]
        if master_slave_read:
            # to the slave after the master's first answer, back to the master once the rest is in memory
            assert route[0] == MASTER_ID and route[1] == 1 and route[-1] == MASTER_ID, route
            flips = sum(1 for a, b in itertools.pairwise(route) if a != b)
            assert flips == 2, route
        else:
            assert set(route) == {MASTER_ID}


def test_push_consumer_reads_a_cold_backlog_from_the_slave(tmp_path: Path) -> None:
    n = 60
    with master_and_slave(tmp_path) as (ns, master, slave):
        backlog(ns, master, slave, n)
        group, got = "sr_push_group", Deliveries()

        def listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
            got.add("push", msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = push_consumer(ns.address, group, TOPIC, listener)
        try:
            wait_until(lambda: len(set(got.keys())) == n, "the push consumer to consume the backlog", timeout=30)
            from_master, from_slave = group_get_nums(master, group), group_get_nums(slave, group)
            assert from_slave > 0 and from_master > 0, (from_master, from_slave)
            assert from_master + from_slave == n  # every message pulled once, from one of them
        finally:
            consumer.shutdown()


# ------------------------------------------------------------------------------------ offsets while on the slave
def test_offsets_committed_only_on_the_slave_give_way_to_the_masters(tmp_path: Path) -> None:
    """4.9's rules, stated by what happens: with the master gone, RemoteBrokerOffsetStore commits to the slave
    (findBrokerAddressInSubscribe(MASTER_ID, onlyThisBroker=false)); the slave never sends offsets to its master;
    when the master returns, the slave's SlaveSynchronize copies the master's table over its own (putAll). So an
    offset committed only while on the slave reaches the master only if a consumer of the group commits it again once
    the master is back (the test above); a group whose consumers all stopped meanwhile resumes from the master's
    older offset: messages are consumed again, none is skipped."""
    group = "sr_offset_group"
    mq = MessageQueue(TOPIC, BROKER_NAME, 0)
    with name_server() as ns:
        port, ha_port = free_port(), free_port()
        m_cfg = master_config(tmp_path / "m", ns.address, listen_port=port, ha_listen_port=ha_port)
        master = Broker(m_cfg).start()
        slave = start_slave(tmp_path / "s", ns.address)
        try:
            create_topic([master.address], TOPIC, QUEUES, namesrv=ns.address)
            wait_until(lambda: slave.controller.master_addr == master.address, "the slave to learn its master")
            sync_slave_configs(slave)
            backlog(ns, master, slave, 40)
            consumer = PullConsumer(group, namesrv_addr=ns.address, instance_name="sr-offsets")
            consumer.start()
            try:
                consumer.fetch_subscribe_message_queues(TOPIC)
                consumer.update_consume_offset_to_broker(mq, 5)  # to the master
                assert committed_offsets(master.address, group, TOPIC, 1) == {0: 5}
                sync_slave_configs(slave)
                assert committed_offsets(slave.address, group, TOPIC, 1) == {0: 5}

                master.shutdown()
                wait_until(lambda: not master_routed(ns), "the route without the master")
                consumer.instance.run_sync(consumer.instance.update_topic_route_info_from_name_server(TOPIC), 5)
                consumer.update_consume_offset_to_broker(mq, 30)  # no master: to the slave
                assert committed_offsets(slave.address, group, TOPIC, 1) == {0: 30}
            finally:
                consumer.shutdown()  # the whole group stops while the master is down

            master = Broker(m_cfg).start()  # the same store and ports
            assert committed_offsets(master.address, group, TOPIC, 1) == {0: 5}  # nothing came from the slave
            reregister(slave)
            wait_until(lambda: slave.controller.master_addr == master.address, "the slave to see its master")
            sync_slave_configs(slave)
            assert committed_offsets(slave.address, group, TOPIC, 1) == {0: 5}  # the master's table won

            # a consumer of the group resumes at 5: offsets 5..29 again (at least once), nothing skipped
            again = PullConsumer(group, namesrv_addr=ns.address, instance_name="sr-offsets-2")
            again.start()
            try:
                again.fetch_subscribe_message_queues(TOPIC)
                assert again.fetch_consume_offset(mq, True) == 5
            finally:
                again.shutdown()
        finally:
            slave.shutdown()
            master.shutdown()


def master_routed(ns: NameServer) -> bool:
    with BlockingMQClientAPI(ns.address, 3000) as api:
        route = api.get_topic_route_info_from_name_server(TOPIC)
    return any(MASTER_ID in bd.broker_addrs for bd in route.broker_datas if bd.broker_name == BROKER_NAME)


def test_any_broker_of_the_name_is_the_lowest_id() -> None:
    """findBrokerAddressInSubscribe's last resort takes 4.9's HashMap's first entry, the lowest broker id, whatever
    order the route listed the addresses in; the slave id + 1 is tried before it."""
    inst = MQClientManager.get_instance().get_or_create_mq_client_instance(
        ClientConfig(namesrv_addr="127.0.0.1:1", instance_name="sr-lowest-id")
    )
    inst.broker_addr_table["b"] = {3: "s3", 2: "s2"}
    found = inst.find_broker_address_in_subscribe("b", MASTER_ID, False)
    assert found is not None and (found.broker_addr, found.slave) == ("s2", True)
    found = inst.find_broker_address_in_subscribe("b", 2, True)
    assert found is not None and (found.broker_addr, found.slave) == ("s2", True)
    found = inst.find_broker_address_in_subscribe("b", 1, True)  # no 1: its id + 1
    assert found is not None and (found.broker_addr, found.slave) == ("s2", True)
    assert inst.find_broker_address_in_subscribe("b", 5, True) is None
    inst.broker_addr_table["b"] = {1: "s1", 0: "m"}
    found = inst.find_broker_address_in_subscribe("b", 5, False)
    assert found is not None and (found.broker_addr, found.slave) == ("m", False)
    admin = inst.find_broker_address_in_admin("b")
    assert admin is not None and (admin.broker_addr, admin.slave) == ("m", False)
    MQClientManager.get_instance().remove_client_factory(inst.client_id)


def test_a_slave_started_right_after_its_master_knows_it_when_start_returns(tmp_path: Path) -> None:
    """4.9's BrokerController#start registers with the name servers before it returns: a master is routed, and a
    slave started right after it has learned its master from that first registration, with no wait (before, the
    first registration ran after start() returned, and a slave that registered first learned its master only at the
    next registerNameServerPeriod, 30 s later)."""
    with name_server() as ns:
        master = Broker(master_config(tmp_path / "m", ns.address)).start()
        try:
            slave = start_slave(tmp_path / "s", ns.address)
            try:
                assert slave.controller.master_addr == master.address
            finally:
                slave.shutdown()
        finally:
            master.shutdown()
