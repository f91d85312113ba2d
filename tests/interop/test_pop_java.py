"""Apache's Java client 5.5.0 (remoting) consumes from rmq_core by POP: a DefaultMQPushConsumer with
``setClientRebalance(false)`` asks the broker for its queues (QUERY_ASSIGNMENT), finds the group's mode POP (set by
SET_MESSAGE_REQUEST_MODE, what ``mqadmin setConsumeMode -m POP`` sends), pops (POP_MESSAGE) and acks
(ACK_MESSAGE): each message is delivered once, with Apache's receipt handle (POP_CK) built by the client from the
broker's answer, and nothing comes back after the invisible time. The Java programs are built by
compat/java/build.sh (cached); set RMQ_COMPAT_JAVA=0 to skip explicitly."""

from __future__ import annotations

import json
import os

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.namesrv import NameServer
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support import java_scenarios as sc
from support.admin_helpers import wait_for_route
from support.apache_rocketmq import ApacheRocketMQ
from support.java_compat import java_classpath, run_java
from support.send_helpers import stored

pytestmark = pytest.mark.compat_java

VERSION = "5.5.0"
TOPIC = "J5PopTopic"
GROUP = "j5_pop_group"


def _pop_scenario(namesrv: str, broker_addr: str, log_dir: str) -> None:
    """Send 8, set the group's mode to POP, consume them with a setClientRebalance(false) push consumer: each once,
    with an 8-field POP_CK of broker-a, none again while the consumer lingers. Then 4 more, each answered
    RECONSUME_LATER once: the client changes its invisible time (CHANGE_MESSAGE_INVISIBLETIME) and each comes back
    once more, reconsumeTimes 1, from the POP retry topic."""
    lines = run_java("Produce", ["--namesrv", namesrv, "--topic", TOPIC, "--count", 8], log_dir, 60.0, VERSION)
    sends = sc.events(lines, "send")
    assert len(sends) == 8 and all(s["status"] == "SEND_OK" for s in sends)
    mode = {"topic": TOPIC, "consumerGroup": GROUP, "mode": "POP", "popShareQueueNum": 0}
    with BlockingRemotingClient() as c:
        req = RemotingCommand.request(RequestCode.SET_MESSAGE_REQUEST_MODE, {}, json.dumps(mode).encode())
        assert c.invoke_sync(broker_addr, req, 5.0).code == ResponseCode.SUCCESS
    lines = run_java(
        "PushConsume",
        ["--namesrv", namesrv, "--group", GROUP, "--topic", TOPIC, "--expect", 8, "--pop", "true"]
        + ["--linger-ms", 3000, "--timeout-ms", 60000],
        log_dir,
        timeout=100.0,
        client_version=VERSION,
    )
    msgs = sc.events(lines, "msg")
    assert sorted(sc.index_of(m) for m in msgs) == list(range(8)), msgs
    by_id = {s["msgId"]: s for s in sends}
    for m in msgs:
        assert m["topic"] == TOPIC and m["msgId"] in by_id
        ck = m["properties"]["POP_CK"].split(" ")
        assert len(ck) == 8 and ck[5] == "broker-a" and ck[4] == "0", ck
    lines = run_java(
        "Produce", ["--namesrv", namesrv, "--topic", TOPIC, "--count", 4, "--start", 8], log_dir, 60.0, VERSION
    )
    assert len(sc.events(lines, "send")) == 4
    lines = run_java(
        "PushConsume",
        ["--namesrv", namesrv, "--group", GROUP, "--topic", TOPIC, "--expect", 8, "--pop", "true"]
        + ["--reconsume-once", "true", "--linger-ms", 3000, "--timeout-ms", 60000],
        log_dir,
        timeout=100.0,
        client_version=VERSION,
    )
    msgs = sc.events(lines, "msg")
    assert sorted(sc.index_of(m) for m in msgs) == sorted(list(range(8, 12)) * 2), msgs
    again = [m for m in msgs if m["reconsumeTimes"] == 1]
    assert sorted(sc.index_of(m) for m in again) == list(range(8, 12)), msgs
    assert all(m["properties"]["POP_CK"].split(" ")[4] == "1" for m in again)


def test_java_5x_push_consumer_pops_from_rmq_core(tmp_path):
    java_classpath(VERSION)
    log_dir = os.path.join(str(tmp_path), "client-logs")
    ns = NameServer(listen_port=0).start()
    try:
        cfg = BrokerConfig(
            broker_ip1="127.0.0.1",
            listen_port=0,
            namesrv_addr=ns.address,
            broker_name="broker-a",
            store_path_root_dir=str(tmp_path / "broker"),
            mapped_file_size_commit_log=16 * 1024 * 1024,
            mapped_file_size_consume_queue=6000 * 20,
        )
        with Broker(cfg).start() as broker:
            wait_for_route(ns.address, "TBW102")
            _pop_scenario(ns.address, broker.address, log_dir)
            # it popped (CK records) and acked (ACK records) through the revive log, and pulled nothing
            timer = stored(broker, "rmq_sys_wheel_timer", 0)
            tags = [m.tags for m in timer if m.properties.get("REAL_TOPIC", "").startswith("rmq_sys_REVIVE_LOG_")]
            assert "ck" in tags and "ack" in tags, tags
            offsets = broker.controller.consumer_offset_manager.query_offsets(GROUP, TOPIC) or {}
            assert sum(offsets.values()) == 12, offsets
    finally:
        ns.shutdown()


@pytest.mark.apache_broker
def test_control_the_same_against_apache_5(tmp_path):
    """The control: the same programs against Apache RocketMQ 5.3.3's broker."""
    java_classpath(VERSION)
    a = ApacheRocketMQ(str(tmp_path / "apache5"), version="5.3.3")
    a.start(timeout=180.0)
    try:
        wait_for_route(a.namesrv_addr, "TBW102", timeout=60)
        _pop_scenario(a.namesrv_addr, a.broker_addr, os.path.join(str(tmp_path), "client-logs"))
    finally:
        a.stop()
