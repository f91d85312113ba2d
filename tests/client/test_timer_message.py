"""The client side of RocketMQ 5's timer messages: ``Message(..., deliver_time_ms=)`` and the ``delay_time_sec`` /
``delay_time_ms`` / ``deliver_time_ms`` attributes put 5.x's properties (``TIMER_DELIVER_MS``, ``TIMER_DELAY_SEC``,
``TIMER_DELAY_MS``, as Java's ``setDeliverTimeMs`` / ``setDelayTimeSec`` / ``setDelayTimeMs``) on the wire; our
producer sends them to our broker, which refuses a time too far ahead, and a push consumer receives them at their
time and not before."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rmq_core.broker import Broker
from rmq_core.client import ConsumeConcurrentlyStatus, Producer, PushConsumer, SendStatus
from rmq_core.client.consumer.listener import ConsumeFromWhere
from rmq_core.client.exceptions import MQBrokerException
from rmq_core.message import Message, MessageExt
from rmq_core.message_encoding import properties_to_string, string_to_properties
from rmq_core.namesrv import NameServer
from rmq_core.remoting.codes import ResponseCode

from support.client_helpers_core import cluster
from support.send_helpers import stored


def _now() -> int:
    return time.time_ns() // 1_000_000


def test_message_timer_attributes_are_5x_properties() -> None:
    m = Message("T", b"x", "TagA", "k1", None, 0, 0, 1_700_000_000_123)  # positional: the old order, then the new
    assert m.properties["TIMER_DELIVER_MS"] == "1700000000123" and m.deliver_time_ms == 1_700_000_000_123
    assert Message("T", b"x").deliver_time_ms == 0 and "TIMER_DELIVER_MS" not in Message("T", b"x").properties
    m = Message("T", b"x", tags="A", delay_time_level=2)
    assert m.properties == {"TAGS": "A", "DELAY": "2"}  # unchanged without a timer
    m.delay_time_sec = 30
    m.delay_time_ms = 1500
    assert (m.properties["TIMER_DELAY_SEC"], m.properties["TIMER_DELAY_MS"]) == ("30", "1500")
    assert (m.delay_time_sec, m.delay_time_ms) == (30, 1500)
    m.delay_time_sec = None
    m.deliver_time_ms = None
    assert "TIMER_DELAY_SEC" not in m.properties and "TIMER_DELIVER_MS" not in m.properties
    # on the wire: the header's properties string, as Java's MessageDecoder.messageProperties2String writes it
    m = Message("T", b"x", deliver_time_ms=42)
    assert string_to_properties(properties_to_string(m.properties)) == {"TIMER_DELIVER_MS": "42"}


@pytest.fixture
def one(tmp_path: Path) -> Iterator[tuple[NameServer, Broker, Producer]]:
    with cluster(tmp_path, mapped_file_size_timer_log=1 << 16) as (ns, [broker]):
        p = Producer("TimerProducer", namesrv_addr=ns.address)
        p.start()
        try:
            yield ns, broker, p
        finally:
            p.shutdown()


def test_producer_sends_timers_and_a_push_consumer_gets_them_at_their_time(one) -> None:  # type: ignore[no-untyped-def]
    ns, broker, p = one
    p.send(Message("TimerClientTopic", b"warm-up"))
    got: list[tuple[int, MessageExt]] = []
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], _ctx: object) -> ConsumeConcurrentlyStatus:
        with lock:
            got.extend((_now(), m) for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    pc = PushConsumer("TimerGroup", ns.address, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    pc.subscribe("TimerClientTopic", "*")
    pc.register_message_listener(listener)
    pc.start()
    try:
        start = _now()
        r1 = p.send(Message("TimerClientTopic", b"at", deliver_time_ms=start + 2500))
        m2 = Message("TimerClientTopic", b"sec")
        m2.delay_time_sec = 2
        r2 = p.send(m2)
        m3 = Message("TimerClientTopic", b"ms")
        m3.delay_time_ms = 1200
        r3 = p.send(m3)
        assert {r.send_status for r in (r1, r2, r3)} == {SendStatus.SEND_OK}
        assert len(stored(broker, "rmq_sys_wheel_timer", 0)) == 3
        with pytest.raises(MQBrokerException) as ei:
            p.send(Message("TimerClientTopic", b"far", deliver_time_ms=_now() + 4 * 86400 * 1000))
        assert ei.value.response_code == ResponseCode.MESSAGE_ILLEGAL
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with lock:
                if len(got) >= 4:
                    break
            time.sleep(0.05)
        with lock:
            timed = {m.body: (at, m) for at, m in got if m.body != b"warm-up"}
        assert set(timed) == {b"at", b"sec", b"ms"}
        assert timed[b"at"][0] >= start + 2500 and timed[b"at"][1].store_timestamp >= start + 2500
        assert timed[b"ms"][1].store_timestamp >= start + 1200
        assert timed[b"sec"][1].store_timestamp >= start + 2000
        assert timed[b"at"][1].msg_id == r1.offset_msg_id or timed[b"at"][1].properties["UNIQ_KEY"] == r1.msg_id
        assert timed[b"at"][1].topic == "TimerClientTopic" and "TIMER_OUT_MS" in timed[b"at"][1].properties
    finally:
        pc.shutdown()


def test_cli_send_deliver_after_ms(one, capsys) -> None:  # type: ignore[no-untyped-def]
    from rmq_core.cli import main

    ns, broker, _p = one
    before = _now()
    assert main(["send", "TimerCliTopic", "later", "-n", ns.address, "--deliver-after-ms", "60000"]) == 0
    assert "SEND_OK" in capsys.readouterr().out
    [t] = stored(broker, "rmq_sys_wheel_timer", 0)
    assert t.properties["REAL_TOPIC"] == "TimerCliTopic" and t.body == b"later"
    assert before + 60000 <= int(t.properties["TIMER_DELIVER_MS"]) <= _now() + 60000
