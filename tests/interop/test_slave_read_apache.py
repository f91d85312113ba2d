"""The control for tests/client/test_consume_from_slave.py: the same rmq_core producer and push consumer against Apache
RocketMQ 4.9.7's name server, SYNC_MASTER and slave (Maven Central jars, tests/support/apache_rocketmq.py).

The master broker is SIGKILLed during a stream of sync sends: a running push consumer (held back by its listener) and
one started while the master is down read every SEND_OK from Apache's slave; the offsets committed while on the slave
are on the slave; the master restarted on its store receives them from the running consumer. Marked ``apache_broker``.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from rmq_core.client import ConsumeConcurrentlyStatus, Producer, PushConsumer
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.transport import BlockingRemotingClient

from support.admin_helpers import create_topic
from support.apache_rocketmq import ApacheRocketMQ
from support.client_helpers_e2e import Deliveries
from support.helpers import wait_until
from support.slave_read_helpers import SyncSender, committed_offsets, push_consumer, send_ok_once

pytestmark = [pytest.mark.apache_broker, pytest.mark.slow]

TOPIC = "ApacheSlaveReadTopic"
QUEUES = 4
HA = {"slaveReadEnable": "true", "brokerIP2": "127.0.0.1", "flushConsumerOffsetInterval": "500"}


def slave_has_topic(addr: str) -> bool:
    with BlockingRemotingClient() as c:
        r = c.invoke_sync(addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG, {}), timeout=5)
    return r.code == ResponseCode.SUCCESS and f'"{TOPIC}"' in (r.body or b"").decode("utf-8", "replace")


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
