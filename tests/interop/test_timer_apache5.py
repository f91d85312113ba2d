"""Control run for RocketMQ 5's timer messages: rmq_core's Producer sends ``Message(..., deliver_time_ms=)`` and
``delay_time_sec`` timers, and rmq_core's PushConsumer receives them, against Apache RocketMQ 5.3.3's own name server
and broker (rocketmq-broker 5.3.3 from Maven Central, compat/apache/build.sh 5.3.3) and against rmq_core's broker
in the same run: the same properties on the wire are understood by both (each timer reaches its topic once, not
before its time, with 5.x's TIMER_OUT_MS and REAL_TOPIC/REAL_QID still in the record, as 5.3.3 stores it); 5.x's broker delivers at the end of the 1 s slot,
rmq_core's at the timer's own time.
Run alone with ``-m apache_broker`` (needs java and mvn; RMQ_COMPAT_JAVA=0 skips)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.client import ConsumeConcurrentlyStatus, Producer, PushConsumer, SendStatus
from rmq_core.client.consumer.listener import ConsumeFromWhere
from rmq_core.message import Message, MessageExt
from rmq_core.namesrv import NameServer

from support.admin_helpers import wait_for_route
from support.apache_rocketmq import ApacheRocketMQ

pytestmark = pytest.mark.apache_broker

APACHE_5 = "5.3.3"


def _now() -> int:
    return time.time_ns() // 1_000_000


@pytest.fixture(scope="module")
def apache5(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    a = ApacheRocketMQ(str(tmp_path_factory.mktemp("apache5")), version=APACHE_5)
    a.start(timeout=180.0)
    try:
        wait_for_route(a.namesrv_addr, "TBW102", timeout=60)  # 5.x registers with the name server after "boot success"
        yield a.namesrv_addr
    finally:
        a.stop()


@pytest.fixture(scope="module")
def rmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("rmq-timer")
    ns = NameServer(listen_port=0).start()
    try:
        cfg = BrokerConfig(
            listen_port=0,
            namesrv_addr=ns.address,
            broker_name="broker-a",
            store_path_root_dir=str(Path(root) / "broker"),
            mapped_file_size_commit_log=16 * 1024 * 1024,
            mapped_file_size_consume_queue=6000 * 20,
            mapped_file_size_timer_log=1 << 20,
        )
        with Broker(cfg):
            wait_for_route(ns.address, "TBW102")
            yield ns.address
    finally:
        ns.shutdown()


def _round_trip(namesrv: str, topic: str) -> dict[bytes, tuple[int, int, MessageExt]]:
    """Send three timers (two by deliver time, one by delay seconds) and receive them; body → (due, received, msg)."""
    p = Producer(f"{topic}_P", namesrv_addr=namesrv)
    p.start()
    got: dict[bytes, tuple[int, MessageExt]] = {}
    dup: list[bytes] = []
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], _ctx: object) -> ConsumeConcurrentlyStatus:
        now = _now()
        with lock:
            for m in msgs:
                if m.body in got:
                    dup.append(m.body)
                got[m.body] = (now, m)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    pc = PushConsumer(f"{topic}_G", namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    try:
        assert p.send(Message(topic, b"plain")).send_status == SendStatus.SEND_OK  # creates the topic
        pc.subscribe(topic, "*")
        pc.register_message_listener(listener)
        pc.start()
        start = _now()
        due = {b"at-2500": start + 2500, b"at-4200": start + 4200}
        for body, t in due.items():
            assert p.send(Message(topic, body, deliver_time_ms=t)).send_status == SendStatus.SEND_OK
        m = Message(topic, b"sec-3")
        m.delay_time_sec = 3
        sent_at = _now()
        assert p.send(m).send_status == SendStatus.SEND_OK
        due[b"sec-3"] = sent_at + 3000 - 200  # the broker's clock starts the delay a little after ours
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with lock:
                if set(due) <= set(got):
                    break
            time.sleep(0.05)
        with lock:
            assert not dup, dup
            return {b: (due[b], got[b][0], got[b][1]) for b in due if b in got}
    finally:
        pc.shutdown()
        p.shutdown()


@pytest.mark.parametrize("where", ["rmq_core", "apache-5.3.3"])
def test_our_client_timer_messages_against_rmq_core_and_apache_5(where, request):
    namesrv = request.getfixturevalue("rmq" if where == "rmq_core" else "apache5")
    res = _round_trip(namesrv, f"TimerCtl_{where.replace('.', '_').replace('-', '_')}")
    assert set(res) == {b"at-2500", b"at-4200", b"sec-3"}, res
    for body, (due, received, m) in res.items():
        assert m.store_timestamp >= due and received >= due, (where, body, m.store_timestamp - due, received - due)
        props = m.properties
        # both keep REAL_TOPIC/REAL_QID in the delivered record (5.x clears its map only after the string is made)
        assert "TIMER_OUT_MS" in props and props["REAL_TOPIC"] == m.topic and "REAL_QID" in props, props
        if body.startswith(b"at-"):
            assert props["TIMER_DELIVER_MS"] == str(due)
        else:
            assert props["TIMER_DELAY_SEC"] == "3"
        late = m.store_timestamp - due
        assert late < 1500 + 300, (where, body, late)  # 5.x: up to the 1 s slot; rmq_core: at its time
