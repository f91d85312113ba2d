"""Apache RocketMQ's Java push consumer (rocketmq-client 4.9.7, the compat/java harness) fails over to an rmq_core
slave when its rmq_core master is SIGKILLed: an rmq_core SYNC_MASTER in a child process, its rmq_core slave and name
server in this process.

The Java consumer reads a first batch from the master and is then frozen (SIGSTOP); a second batch is sent (every
send SEND_OK, so on the slave), the master is killed, the consumer resumed (SIGCONT). It must deliver the whole second
batch, pulling from the slave (the name server's route keeps the broker name with only the slave; 4.9's
findBrokerAddressInSubscribe falls back to it), and its offsets (persisted at shutdown, RemoteBrokerOffsetStore: no
master, so the slave) end on the slave at each queue's end."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from rmq_core.client import Producer, SendStatus
from rmq_core.message import Message

from support.admin_helpers import create_topic
from support.helpers import wait_until
from support.java_compat import JavaProgram, java_classpath
from support.slave_read_helpers import MasterProcess, committed_offsets, start_slave

pytestmark = [pytest.mark.compat_java, pytest.mark.slow]

TOPIC = "JavaSlaveReadTopic"
GROUP = "java_slave_read_group"
QUEUES = 4


def send(producer: Producer, start: int, count: int) -> None:
    for i in range(start, start + count):
        r = producer.send(Message(TOPIC, f"body-{i}".encode(), tags="TagA", keys=f"key-{i}"))
        assert r.send_status is SendStatus.SEND_OK, r


def test_java_push_consumer_fails_over_to_the_rmq_core_slave(tmp_path: Path) -> None:
    java_classpath()  # build (or reuse) the harness first
    from rmq_core.namesrv import NameServer

    first, second = 20, 40
    ns = NameServer(listen_port=0).start()
    try:
        with MasterProcess(tmp_path / "m", ns.address) as master:
            master.start()
            slave = start_slave(tmp_path / "s", ns.address)
            try:
                create_topic([master.address], TOPIC, QUEUES, namesrv=ns.address)
                wait_until(lambda: slave.controller.master_addr == master.address, "the slave to learn its master")
                sync = slave.controller.replication.slave_synchronize
                assert sync is not None
                import asyncio

                asyncio.run_coroutine_threadsafe(sync.sync_all(), slave.controller.loop).result(10)
                producer = Producer("java_sr_producer", namesrv_addr=ns.address, instance_name="java-sr-producer")
                producer.start()
                try:
                    wait_until(  # the slave is connected: SYNC_MASTER answers SEND_OK
                        lambda: (
                            producer.send(Message(TOPIC, b"warm-up", keys="warm-up")).send_status is SendStatus.SEND_OK
                        ),
                        "a SEND_OK from the SYNC_MASTER",
                        timeout=20,
                        interval=0.2,
                    )
                    send(producer, 0, first)
                    with JavaProgram(
                        "PushConsume",
                        ["--namesrv", ns.address, "--group", GROUP, "--topic", TOPIC, "--expect", first + second + 1,
                         "--timeout-ms", 150_000, "--linger-ms", 3000],
                        os.path.join(str(tmp_path), "java-logs"),
                    ) as consumer:  # fmt: skip
                        seen: set[str] = set()
                        while not {f"body-{i}" for i in range(first)} <= seen:
                            seen.add(consumer.next_event("msg", timeout=60)["body"])
                        before = sum(slave.controller.broker_stats_manager.values("GROUP_GET_NUMS").values())
                        os.kill(consumer._proc.pid, signal.SIGSTOP)
                        try:
                            send(producer, first, second)  # SEND_OK: on the slave too
                            master.kill9()
                        finally:
                            os.kill(consumer._proc.pid, signal.SIGCONT)
                        while not {f"body-{i}" for i in range(first + second)} <= seen:
                            seen.add(consumer.next_event("msg", timeout=120)["body"])
                        served = slave.controller.broker_stats_manager.values("GROUP_GET_NUMS")
                        assert sum(served.values()) > before, served  # the Java client pulled from the slave
                        lines = consumer.wait(60)
                    done = [ln for ln in lines if ln.get("event") == "done"]
                    assert done and not done[0]["timedOut"], done
                    end = {q: slave.message_store.get_max_offset_in_queue(TOPIC, q) for q in range(QUEUES)}
                    # its offsets, persisted at shutdown with no master in the route, are on the slave
                    assert committed_offsets(slave.address, GROUP, TOPIC, QUEUES) == end
                finally:
                    producer.shutdown()
            finally:
                slave.shutdown()
    finally:
        ns.shutdown()
