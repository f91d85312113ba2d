"""The timer files in 5.x's layout, across brokers (Apache RocketMQ 5.3.3 from Maven Central, compat/apache/build.sh
5.3.3): pending timers filed by rmq_core's broker (timerwheel, timerlog/, config/timercheck, the rmq_sys_wheel_timer
queue) are delivered at their time by Apache 5.3.3's broker started on that store; and timers filed by Apache
5.3.3's broker are delivered at their time by rmq_core's broker started on a copy of Apache's store.

Run alone with ``-m apache_broker`` (needs java and mvn; RMQ_COMPAT_JAVA=0 skips)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from rmq_core.broker import Broker
from rmq_core.client import ConsumeConcurrentlyStatus, Producer, PushConsumer, SendStatus
from rmq_core.client.consumer.listener import ConsumeFromWhere
from rmq_core.message import Message, MessageExt
from rmq_core.message_encoding import properties_to_string
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.admin_helpers import wait_for_route
from support.apache5_store import APACHE_5, apache5, copy_apache_store, rmq_config, store_root
from support.send_helpers import send_request, stored, wait_until

pytestmark = pytest.mark.apache_broker


def _now() -> int:
    return time.time_ns() // 1_000_000


def _consume(namesrv: str, topic: str, n: int, timeout_s: float) -> dict[bytes, tuple[int, MessageExt]]:
    got: dict[bytes, tuple[int, MessageExt]] = {}
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], _ctx: object) -> ConsumeConcurrentlyStatus:
        now = _now()
        with lock:
            for m in msgs:
                got.setdefault(m.body, (now, m))
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    pc = PushConsumer(f"{topic}_G", namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    pc.subscribe(topic, "*")
    pc.register_message_listener(listener)
    pc.start()
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with lock:
                if len(got) >= n:
                    break
            time.sleep(0.1)
        with lock:
            return dict(got)
    finally:
        pc.shutdown()


def test_apache_5_delivers_timers_filed_by_rmq_core(tmp_path):
    server = apache5(str(tmp_path / "apache"), APACHE_5)
    root = store_root(server)
    topic = "TimerFromRmq"
    due: dict[bytes, int] = {}
    with Broker(rmq_config(root)) as b, BlockingRemotingClient() as client:
        start = _now()
        for i, d in enumerate((40_000, 42_500, 45_000)):  # after Apache has started on the store
            body = b"r%d" % i
            due[body] = start + d
            props = properties_to_string({"TIMER_DELIVER_MS": str(due[body])})
            r = client.invoke_sync(b.address, send_request(topic, body, queue_id=i, properties=props), timeout=5.0)
            assert r.code == ResponseCode.SUCCESS, r.remark
        ts = b.controller.timer_message_store
        assert ts is not None
        wait_until(lambda: ts.enqueued == 3, timeout=5)
        assert all(stored(b, topic, q) == [] for q in range(4))
    with server:
        wait_for_route(server.namesrv_addr, "TBW102", timeout=60)
        got = _consume(server.namesrv_addr, topic, 3, timeout_s=max(0.0, (max(due.values()) - _now()) / 1000) + 20)
    assert set(got) == set(due), (sorted(got), server.tail("broker"))
    for body, (received, m) in got.items():
        assert m.store_timestamp >= due[body] and received >= due[body], (body, m.store_timestamp - due[body])
        assert m.properties["TIMER_DELIVER_MS"] == str(due[body]) and m.topic == topic


def test_rmq_core_delivers_timers_filed_by_apache_5(tmp_path):
    server = apache5(str(tmp_path / "apache"), APACHE_5)
    topic = "TimerFromApache"
    due: dict[bytes, int] = {}
    with server:
        wait_for_route(server.namesrv_addr, "TBW102", timeout=60)
        p = Producer("TimerFilesP", namesrv_addr=server.namesrv_addr)
        p.start()
        try:
            assert p.send(Message(topic, b"plain")).send_status == SendStatus.SEND_OK
            start = _now()
            for i, d in enumerate((25_000, 26_500, 28_000)):  # after the copy is served by rmq_core
                body = b"a%d" % i
                due[body] = start + d
                assert p.send(Message(topic, body, deliver_time_ms=due[body])).send_status == SendStatus.SEND_OK
        finally:
            p.shutdown()
        time.sleep(1.5)  # Apache files them (enqueue) and flushes its timer files (timerFlushIntervalMs 200)
    assert os.path.getsize(os.path.join(store_root(server), "timerwheel")) == 38_707_200
    root = copy_apache_store(server, str(tmp_path / "copy"))
    with Broker(rmq_config(root)) as b:
        up = _now()
        ts = b.controller.timer_message_store
        assert ts is not None
        got = wait_until(
            lambda: (lambda ms: ms if len(ms) >= 3 else None)(
                [m for q in range(8) for m in stored(b, topic, q) if m.body != b"plain"]
            ),
            timeout=max(0.0, (max(due.values()) - _now()) / 1000) + 15,
        )
        assert ts.enqueued == 0  # nothing filed again: Apache's units were served from its timer log
    assert sorted(m.body for m in got) == sorted(due)
    for m in got:
        assert m.store_timestamp >= due[m.body], (m.body, m.store_timestamp - due[m.body])
        # Apache's units carry no exact time: the end of their slot (or at once, when due before we were up)
        assert m.store_timestamp - max(due[m.body], up) < 1500, (m.body, m.store_timestamp - due[m.body], up)
