"""The control for tests/client/test_consume_from_slave.py: the same rmq_core producer and push consumer against Apache
RocketMQ 4.9.7's name server, SYNC_MASTER and slave (Maven Central jars, tests/support/apache_rocketmq.py).

The master broker is SIGKILLed during a stream of sync sends: a running push consumer (held back by its listener) and
one started while the master is down read every SEND_OK from Apache's slave; the offsets committed while on the slave
are on the slave; the master restarted on its store receives them from the running consumer. Marked ``apache_broker``.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.client import ConsumeConcurrentlyStatus, Producer, PullConsumer, PullStatus, PushConsumer
from rmq_core.message import Message, MessageQueue
from rmq_core.namesrv import NameServer
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.admin_helpers import create_topic
from support.apache_rocketmq import ApacheRocketMQ
from support.client_helpers_e2e import Deliveries
from support.helpers import wait_until
from support.slave_read_helpers import SyncSender, committed_offsets, push_consumer, send_ok_once

pytestmark = [pytest.mark.apache_broker, pytest.mark.slow]

TOPIC = "ApacheSlaveReadTopic"
QUEUES = 4
HA = {"slaveReadEnable": "true", "brokerIP2": "127.0.0.1", "flushConsumerOffsetInterval": "500"}


def slave_has_topic(addr: str, topic: str = TOPIC) -> bool:
    with BlockingRemotingClient() as c:
        r = c.invoke_sync(addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG, {}), timeout=5)
    return r.code == ResponseCode.SUCCESS and f'"{topic}"' in (r.body or b"").decode("utf-8", "replace")


def max_offsets(addr: str) -> dict[int, int]:
    from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI

    with BlockingMQClientAPI(None, 3000) as api:
        return {q: api.get_max_offset(addr, TOPIC, q) for q in range(QUEUES)}


def test_apache_master_killed_mid_sync_stream_consumers_read_every_send_ok_from_the_slave(tmp_path: Path) -> None:
    group, late_group = "asr_group", "asr_late_group"
    master = ApacheRocketMQ(str(tmp_path / "am"), extra_broker_conf={"brokerRole": "SYNC_MASTER", **HA})
    slave = ApacheRocketMQ(str(tmp_path / "as"), extra_broker_conf={"brokerRole": "SLAVE", "brokerId": "1", **HA})
    master.start()
    try:
        slave.start_broker_only(master.namesrv_addr)
        ns = master.namesrv_addr
        create_topic([master.broker_addr], TOPIC, QUEUES, namesrv=ns)
        wait_until(lambda: slave_has_topic(slave.broker_addr), "Apache's slave to sync the topic", timeout=40)
        producer = Producer("asr_producer", namesrv_addr=ns, instance_name="asr-producer")
        producer.start()
        gate = threading.Event()
        got = Deliveries()

        def gated(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
            gate.wait(60)
            got.add("running", msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = push_consumer(ns, group, TOPIC, gated, pull_threshold_for_queue=8, pull_batch_size=4)
        late: PushConsumer | None = None
        sender = SyncSender(producer, TOPIC)
        try:
            wait_until(
                lambda: send_ok_once(producer, TOPIC),
                "a SEND_OK from Apache's SYNC_MASTER",
                timeout=90,
                interval=0.5,
            )
            sender.start()
            wait_until(lambda: sender.ok_count() >= 300, "300 SEND_OKs", timeout=60)
            assert master.broker_proc is not None
            master.broker_proc.kill()  # SIGKILL, mid-stream
            master.broker_proc.wait(10)
            wait_until(lambda: sender.failed >= 3, "sends failing after the kill", timeout=30)
            sender.stop()
            send_ok = dict(sender.send_ok)

            gate.set()
            wait_until(lambda: set(got.keys()) >= set(send_ok), "the running consumer to read all", timeout=90)
            late_got = Deliveries()

            def late_listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
                late_got.add("late", msgs)
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

            late = push_consumer(ns, late_group, TOPIC, late_listener)
            wait_until(lambda: set(late_got.keys()) >= set(send_ok), "the late consumer to read all", timeout=90)

            end = max_offsets(slave.broker_addr)
            wait_until(
                lambda: committed_offsets(slave.broker_addr, group, TOPIC, QUEUES) == end,
                f"Apache's slave to hold the running consumer's offsets {end}",
                timeout=30,
            )
            master.start_broker()  # the same store and port
            wait_until(
                lambda: committed_offsets(master.broker_addr, group, TOPIC, QUEUES) == end,
                f"Apache's returned master to hold the consumer's offsets {end}",
                timeout=90,
                interval=0.5,
            )
        finally:
            gate.set()
            sender.stop()
            consumer.shutdown()
            if late is not None:
                late.shutdown()
            producer.shutdown()
    finally:
        slave.stop()
        master.stop()


# ------------------------------------------------------------------------------ suggestWhichBrokerId, both brands
def max_offset(addr: str, queue: int = 0) -> int:
    from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI

    with BlockingMQClientAPI(None, 3000) as api:
        return int(api.get_max_offset(addr, SUGGEST_TOPIC, queue))


SUGGEST_TOPIC = "SuggestTopic"


def suggestion_trace(namesrv: str, master_addr: str, slave_addr: str, n: int) -> list[tuple[int, int]]:
    """``n`` messages of 1000 bytes into SUGGEST_TOPIC's one queue through the master, the slave caught up, then an
    rmq_core PullConsumer reads them from offset 0, 32 at a time: per pull, (messages got, broker id suggested)."""
    producer = Producer("suggest_producer", namesrv_addr=namesrv, instance_name="suggest-producer")
    producer.start()
    try:
        for i in range(n):
            r = producer.send(Message(SUGGEST_TOPIC, bytes([65 + i % 26]) * 1000, keys=f"s-{i}"))
            assert r.send_status.name == "SEND_OK"
    finally:
        producer.shutdown()
    wait_until(lambda: max_offset(slave_addr) == max_offset(master_addr) == n, "the slave to hold the backlog", 60)
    consumer = PullConsumer("suggest_group", namesrv_addr=namesrv, instance_name="suggest-pull")
    consumer.start()
    try:
        mq = MessageQueue(SUGGEST_TOPIC, "broker-a", 0)
        wrapper = consumer.pull_api_wrapper
        assert wrapper is not None
        trace, offset = [], 0
        while offset < n:
            r = consumer.pull(mq, "*", offset, 32)
            assert r.pull_status is PullStatus.FOUND, r
            trace.append((len(r.msg_found_list), wrapper.pull_from_which_node_table[mq]))
            offset = r.next_begin_offset
        return trace
    finally:
        consumer.shutdown()


def test_suggest_which_broker_id_sequence_matches_apache(tmp_path: Path) -> None:
    """A master with accessMessageInMemoryMaxRatio=0 (nothing is "in memory") and slaveReadEnable, a slave with the
    default ratio: the master suggests the slave (at most maxTransferCountOnMessageInDisk = 8 messages per pull), the
    slave suggests the master (up to 32), so the client's pulls alternate. The same trace from Apache 4.9.7's brokers
    and from rmq_core's."""
    n = 100
    master_conf = {"brokerRole": "ASYNC_MASTER", "accessMessageInMemoryMaxRatio": "0", **HA}
    apache_m = ApacheRocketMQ(str(tmp_path / "am"), extra_broker_conf=master_conf)
    apache_s = ApacheRocketMQ(str(tmp_path / "as"), extra_broker_conf={"brokerRole": "SLAVE", "brokerId": "1", **HA})
    apache_m.start()
    try:
        apache_s.start_broker_only(apache_m.namesrv_addr)
        create_topic([apache_m.broker_addr], SUGGEST_TOPIC, 1, namesrv=apache_m.namesrv_addr)
        wait_until(lambda: slave_has_topic(apache_s.broker_addr, SUGGEST_TOPIC), "Apache's slave to sync", 40)
        theirs = suggestion_trace(apache_m.namesrv_addr, apache_m.broker_addr, apache_s.broker_addr, n)
    finally:
        apache_s.stop()
        apache_m.stop()

    with NameServer(listen_port=0) as ns:
        m_cfg = BrokerConfig(
            listen_port=0,
            broker_ip1="127.0.0.1",
            namesrv_addr=ns.address,
            broker_name="broker-a",
            store_path_root_dir=str(tmp_path / "rm"),
            slave_read_enable=True,
            access_message_in_memory_max_ratio=0,
            mapped_file_size_commit_log=16 * 1024 * 1024,
            mapped_file_size_consume_queue=6000 * 20,
        )
        master = Broker(m_cfg).start()
        try:
            s_cfg = replace(
                m_cfg, store_path_root_dir=str(tmp_path / "rs"), broker_role="SLAVE", broker_id=1,
                access_message_in_memory_max_ratio=40,
            )  # fmt: skip
            slave = Broker(s_cfg).start()
            try:
                create_topic([master.address], SUGGEST_TOPIC, 1, namesrv=ns.address)
                wait_until(lambda: slave.controller.master_addr == master.address, "the slave to learn its master")
                sync = slave.controller.replication.slave_synchronize
                assert sync is not None
                asyncio.run_coroutine_threadsafe(sync.sync_all(), slave.controller.loop).result(10)
                ours = suggestion_trace(ns.address, master.address, slave.address, n)
            finally:
                slave.shutdown()
        finally:
            master.shutdown()

    assert theirs[0] == (8, 1) and theirs[1][1] == 0, theirs  # Apache: 8 from the master → slave → master ...
    assert [s for _, s in theirs] == [1, 0] * (len(theirs) // 2) + [1] * (len(theirs) % 2), theirs
    assert ours == theirs
