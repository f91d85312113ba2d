"""RocketMQ 5's POP consumption on a real broker (broker/pop/), raw remoting frames on 127.0.0.1: POP_MESSAGE,
ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME with Apache 5.3's headers, receipt handles and revive-log
records; what is not acked comes back from ``%RETRY%{group}_{topic}`` after the invisible time (reconsumeTimes + 1),
what is acked does not, past the group's retryMaxTimes it goes to ``%DLQ%{group}``; a clean restart between pop and
revive redelivers once; FIFO pops block the queue until acked; long polling; bad handles are refused, nothing acked."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.broker.pop import extra_info as ei
from rmq_core.broker.pop.pop_inflight_counter import PopInflightCounter
from rmq_core.broker.pop.pop_records import AckMsg, PopCheckPoint
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.message import decode_messages
from rmq_core.message_encoding import properties_to_string
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    NotificationRequestHeader,
    PeekMessageRequestHeader,
    PopMessageRequestHeader,
    ResetOffsetRequestHeader,
    encode_header,
)
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.apache_rocketmq import free_port
from support.pull_helpers import heartbeat, subscription_json
from support.send_helpers import SMALL_FILES, invoke, on_loop, send_request, stored, wait_until

TOPIC = "PopTopic"
GROUP = "pop_group"
REVIVE = "rmq_sys_REVIVE_LOG_DefaultCluster"


def _config(root: str, **kw) -> BrokerConfig:
    kw.update(SMALL_FILES)
    kw.setdefault("mapped_file_size_timer_log", 1 << 16)
    kw.setdefault("broker_name", "broker-a")
    return BrokerConfig(listen_port=0, store_path_root_dir=root, **kw)


@pytest.fixture
def root(tmp_path) -> str:
    return str(tmp_path / "store")


@pytest.fixture
def client():
    with BlockingRemotingClient() as c:
        yield c


def _send(client, b: Broker, body: bytes, queue_id: int = 0, tags: str = "TagA", topic: str = TOPIC):
    p = properties_to_string({"TAGS": tags, "UNIQ_KEY": f"U{body.decode()}"})
    r = invoke(client, b, send_request(topic, body, queue_id=queue_id, properties=p))
    assert r.code == ResponseCode.SUCCESS, r.remark
    return r


def _pop(client, b: Broker, n: int = 32, invisible: int = 2000, poll: int = 0, queue_id: int = -1, **kw):
    h = PopMessageRequestHeader(
        consumerGroup=kw.pop("group", GROUP),
        topic=kw.pop("topic", TOPIC),
        queueId=queue_id,
        maxMsgNums=n,
        invisibleTime=invisible,
        pollTime=poll,
        bornTime=int(time.time() * 1000),
        initMode=kw.pop("init_mode", 1),
        expType=kw.pop("exp_type", "TAG"),
        exp=kw.pop("exp", "*"),
        order=kw.pop("order", False),
        attemptId=kw.pop("attempt_id", None),
    )
    req = RemotingCommand.request(RequestCode.POP_MESSAGE, encode_header(h))
    return client.invoke_sync(b.address, req, timeout=5.0 + poll / 1000.0)


def _handles(resp: RemotingCommand) -> list[tuple[str, object]]:
    """(POP_CK, message) per message, the handle built as Apache's Java client builds it from the answer."""
    msgs = decode_messages(resp.body)
    return list(zip(ei.receipt_handles(resp.ext_fields, msgs, "broker-a"), msgs, strict=True))


def _ack(client, b: Broker, handle: str, m, group: str = GROUP) -> RemotingCommand:
    h = AckMessageRequestHeader(
        consumerGroup=group, topic=m.topic, queueId=m.queue_id, extraInfo=handle, offset=m.queue_offset
    )
    return client.invoke_sync(b.address, RemotingCommand.request(RequestCode.ACK_MESSAGE, encode_header(h)), 5.0)


def _pop_all(client, b: Broker, want: int, invisible: int = 2000, timeout: float = 20.0, **kw) -> list:
    got: list = []
    deadline = time.time() + timeout
    while len(got) < want and time.time() < deadline:
        r = _pop(client, b, invisible=invisible, poll=500, **kw)
        if r.code == ResponseCode.SUCCESS:
            got.extend(_handles(r))
        else:
            assert r.code == ResponseCode.POLLING_TIMEOUT, (r.code, r.remark)
    return got


def _revive_records(b: Broker) -> list:
    out = []
    for q in range(8):
        out.extend(stored(b, REVIVE, q))
    return out


def test_pop_answers_apache_headers_and_writes_a_checkpoint(root, client):
    with Broker(_config(root)).start() as b:
        for i in range(3):
            _send(client, b, f"m{i}".encode(), queue_id=1)
        r = _pop(client, b, invisible=60_000)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert r.remark == "FOUND"
        f = r.ext_fields
        assert f["invisibleTime"] == "60000" and 0 <= int(f["reviveQid"]) < 8
        assert f["startOffsetInfo"] == "0 1 0" and f["msgOffsetInfo"] == "0 1 0,1,2"
        assert f["restNum"] == "0"
        msgs = decode_messages(r.body)
        assert [m.body for m in msgs] == [b"m0", b"m1", b"m2"] and {m.topic for m in msgs} == {TOPIC}
        # the consumer offset moved once the CK was stored (not on ack)
        assert on_loop(b, lambda: b.controller.consumer_offset_manager.query_offset(GROUP, TOPIC, 1)) == 3
        # the CK rides the timer wheel: rmq_sys_wheel_timer, REAL_TOPIC the revive topic, due at revive - 1 s
        timers = [m for m in stored(b, "rmq_sys_wheel_timer", 0) if m.properties.get("REAL_TOPIC") == REVIVE]
        assert len(timers) == 1 and timers[0].tags == "ck"
        ck = PopCheckPoint.decode(timers[0].body)
        assert (ck.start_offset, ck.num, ck.queue_id, ck.topic, ck.cid) == (0, 3, 1, TOPIC, GROUP)
        assert ck.queue_offset_diff == [0, 1, 2] and ck.broker_name == "broker-a"
        assert int(timers[0].properties["TIMER_DELIVER_MS"]) == ck.pop_time + 60_000 - 1000
        body = json.loads(timers[0].body)
        assert list(body) == sorted(body) and {"so", "pt", "it", "n", "q", "t", "c", "d", "bm", "bn"} <= set(body)
        assert timers[0].properties["UNIQ_KEY"] == f"{TOPIC}@1@0@{GROUP}@{ck.pop_time}@broker-a@ck"
        # nothing more to pop
        r2 = _pop(client, b)
        assert r2.code == ResponseCode.POLLING_TIMEOUT and r2.body is None


def test_unacked_come_back_from_the_retry_topic_acked_do_not(root, client):
    with Broker(_config(root)).start() as b:
        for i in range(4):
            _send(client, b, f"m{i}".encode(), queue_id=i % 2)
        first = _pop_all(client, b, 4, invisible=1000)
        assert sorted(m.body for _, m in first) == [b"m0", b"m1", b"m2", b"m3"]
        acked = [(h, m) for h, m in first if m.body in (b"m0", b"m2")]
        for h, m in acked:
            r = _ack(client, b, h, m)
            assert r.code == ResponseCode.SUCCESS, r.remark
        t0 = time.time()
        again = _pop_all(client, b, 2, invisible=60_000, timeout=20)
        took = time.time() - t0
        assert sorted(m.body for _, m in again) == [b"m1", b"m3"], took
        for _, m in again:
            assert m.topic == f"%RETRY%{GROUP}_{TOPIC}" and m.reconsume_times == 1
            assert m.properties["UNIQ_KEY"] == f"U{m.body.decode()}" and m.properties["TAGS"] == "TagA"
            assert "1ST_POP_TIME" in m.properties
        # their handles carry retry flag 1, and acking them (the retry topic named) works
        for h, m in again:
            assert h.split(" ")[4] == "1"
            assert _ack(client, b, h, m).code == ResponseCode.SUCCESS
        # ACK records reached the revive log (ack tag, Apache's JSON)
        acks = [m for m in _revive_records(b) if m.tags == "ack"]
        assert acks, "no ack record delivered to the revive topic"
        a = AckMsg.decode(acks[0].body)
        assert a.consumer_group == GROUP and a.broker_name == "broker-a"
        time.sleep(3.0)
        assert _pop(client, b).code == ResponseCode.POLLING_TIMEOUT  # nothing comes back twice


def test_dlq_after_the_groups_max_attempts(root, client):
    with Broker(_config(root)).start() as b:
        on_loop(
            b,
            lambda: b.controller.subscription_group_manager.update_subscription_group_config(
                SubscriptionGroupConfig(GROUP, retry_max_times=1)
            ),
        )
        _send(client, b, b"dead")
        assert len(_pop_all(client, b, 1, invisible=1000)) == 1  # attempt 1
        second = _pop_all(client, b, 1, invisible=1000)  # attempt 2 (reconsumeTimes 1)
        assert len(second) == 1 and second[0][1].reconsume_times == 1
        dlq = f"%DLQ%{GROUP}"
        wait_until(lambda: stored(b, dlq, 0), "the message in the DLQ", 20)
        [m] = stored(b, dlq, 0)
        assert m.body == b"dead" and m.properties["RETRY_TOPIC"] == TOPIC
        assert _pop(client, b, poll=1500).code == ResponseCode.POLLING_TIMEOUT


def test_change_invisible_time_postpones_and_gives_a_new_handle(root, client):
    with Broker(_config(root)).start() as b:
        _send(client, b, b"later")
        [(h, m)] = _pop_all(client, b, 1, invisible=1000)
        hdr = ChangeInvisibleTimeRequestHeader(
            consumerGroup=GROUP,
            topic=m.topic,
            queueId=m.queue_id,
            extraInfo=h,
            offset=m.queue_offset,
            invisibleTime=4000,
        )
        r = client.invoke_sync(
            b.address, RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, encode_header(hdr)), 5.0
        )
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert r.ext_fields["invisibleTime"] == "4000" and r.ext_fields["reviveQid"] == h.split(" ")[3]
        t0 = time.time()
        time.sleep(2.5)  # the old invisible time passed: not back yet
        assert _pop(client, b).code == ResponseCode.POLLING_TIMEOUT
        back = _pop_all(client, b, 1, invisible=60_000, timeout=15)
        assert len(back) == 1 and back[0][1].body == b"later" and time.time() - t0 >= 2.5


def test_change_invisible_then_ack_the_new_handle(root, client):
    with Broker(_config(root)).start() as b:
        _send(client, b, b"x")
        svc = b.controller.pop_service

        async def flow():
            r = await svc.pop(GROUP, TOPIC, invisible_time_ms=1000)
            [m] = r.messages
            assert m.topic == TOPIC and m.properties["POP_CK"].split(" ")[5] == "broker-a"
            c = svc.change_invisible_time(GROUP, TOPIC, m.properties["POP_CK"], 1500)
            assert c.code == ResponseCode.SUCCESS and c.receipt_handle != m.properties["POP_CK"]
            return c.receipt_handle

        new_handle = asyncio.run_coroutine_threadsafe(flow(), b.controller.loop).result(10)
        assert on_loop(b, lambda: svc.ack(GROUP, TOPIC, new_handle).code) == ResponseCode.SUCCESS
        time.sleep(4.5)
        assert _pop(client, b, poll=500).code == ResponseCode.POLLING_TIMEOUT


def test_batch_ack(root, client):
    with Broker(_config(root)).start() as b:
        for i in range(3):
            _send(client, b, f"b{i}".encode())
        r = _pop(client, b, invisible=1000)
        hs = _handles(r)
        assert len(hs) == 3
        h0 = ei.parse_receipt_handle(hs[0][0])
        bits = 0b101  # offsets 0 and 2 acked
        body = {
            "brokerName": "broker-a",
            "acks": [
                {
                    "c": GROUP,
                    "t": TOPIC,
                    "r": "0",
                    "so": h0.ck_offset,
                    "q": 0,
                    "rq": h0.revive_qid,
                    "pt": h0.pop_time,
                    "it": h0.invisible_time,
                    "b": base64.b64encode(bits.to_bytes(1, "little")).decode(),
                }
            ],
        }
        req = RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, {}, json.dumps(body).encode())
        assert client.invoke_sync(b.address, req, 5.0).code == ResponseCode.SUCCESS
        back = _pop_all(client, b, 1, invisible=60_000, timeout=15)
        assert [m.body for _, m in back] == [b"b1"]
        empty = RemotingCommand.request(RequestCode.BATCH_ACK_MESSAGE, {}, b'{"acks":[]}')
        assert client.invoke_sync(b.address, empty, 5.0).code == ResponseCode.NO_MESSAGE


def test_restart_between_pop_and_revive_redelivers_once(root, client):
    with Broker(_config(root)).start() as b:
        for i in range(2):
            _send(client, b, f"r{i}".encode())
        popped = _pop_all(client, b, 2, invisible=3000)
        assert len(popped) == 2
        _ack(client, b, *popped[0])
    with Broker(_config(root)).start() as b:
        back = _pop_all(client, b, 1, invisible=60_000, timeout=20)
        assert [m.body for _, m in back] == [popped[1][1].body]
        time.sleep(2.0)
        assert _pop(client, b, poll=500).code == ResponseCode.POLLING_TIMEOUT
        revive_offsets = on_loop(
            b, lambda: [b.controller.consumer_offset_manager.query_offset(ei.REVIVE_GROUP, REVIVE, q) for q in range(8)]
        )
        assert max(revive_offsets) >= 0  # the revive service committed its progress
    with Broker(_config(root)).start() as b:  # and again: nothing comes back a second time
        time.sleep(2.0)
        assert _pop(client, b, poll=1000).code == ResponseCode.POLLING_TIMEOUT


def test_long_polling_answers_when_a_message_arrives(root, client):
    with Broker(_config(root)).start() as b:
        _send(client, b, b"first")
        assert [m.body for _, m in _pop_all(client, b, 1, invisible=60_000)] == [b"first"]
        out: list = []
        t = threading.Thread(target=lambda: out.append((_pop(client, b, poll=5000), time.time())))
        t.start()
        time.sleep(0.5)
        sent = time.time()
        with BlockingRemotingClient() as c2:
            _send(c2, b, b"wake")
        t.join(10)
        resp, answered = out[0]
        assert resp.code == ResponseCode.SUCCESS and decode_messages(resp.body)[0].body == b"wake"
        assert answered - sent < 1.0
        t0 = time.time()
        assert _pop(client, b, poll=800).code == ResponseCode.POLLING_TIMEOUT
        assert 0.7 <= time.time() - t0 < 3.0


def test_tag_filter(root, client):
    with Broker(_config(root)).start() as b:
        _send(client, b, b"a", tags="TagA")
        _send(client, b, b"b", tags="TagB")
        got = _pop_all(client, b, 1, invisible=60_000, exp="TagB")
        assert [m.body for _, m in got] == [b"b"]


def test_fifo_pop_blocks_the_queue_until_acked(root, client):
    with Broker(_config(root)).start() as b:
        for i in range(3):
            _send(client, b, f"f{i}".encode(), queue_id=0)
        r = _pop(client, b, n=2, invisible=60_000, queue_id=0, order=True, attempt_id="A1")
        assert r.code == ResponseCode.SUCCESS and r.ext_fields["reviveQid"] == "999"
        first = _handles(r)
        assert [m.body for _, m in first] == [b"f0", b"f1"]
        assert "orderCountInfo" in r.ext_fields
        # blocked while unacked; the same attempt id gets the same messages again
        assert _pop(client, b, n=2, queue_id=0, order=True, attempt_id="A2").code == ResponseCode.POLLING_TIMEOUT
        again = _pop(client, b, n=2, invisible=60_000, queue_id=0, order=True, attempt_id="A1")
        assert [m.body for m in decode_messages(again.body)] == [b"f0", b"f1"]
        for h, m in _handles(again):
            assert _ack(client, b, h, m).code == ResponseCode.SUCCESS
        nxt = _pop(client, b, n=2, invisible=60_000, queue_id=0, order=True, attempt_id="A3")
        assert [m.body for m in decode_messages(nxt.body)] == [b"f2"]
        assert on_loop(b, lambda: b.controller.consumer_offset_manager.query_offset(GROUP, TOPIC, 0)) == 2
    # the lock survives a restart (config/consumerOrderInfo.json)
    with open(f"{root}/config/consumerOrderInfo.json") as f:
        assert f"{TOPIC}@{GROUP}" in f.read()


def _reset_offset_to_start(client, b: Broker) -> RemotingCommand:
    """mqadmin resetOffsetByTime -s 0 -f true (INVOKE_BROKER_TO_RESET_OFFSET) with the group online."""
    heartbeat(client, b.address, GROUP, [subscription_json(TOPIC)])
    h = ResetOffsetRequestHeader(topic=TOPIC, group=GROUP, timestamp=0, isForce=True)
    r = client.invoke_sync(
        b.address, RemotingCommand.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, encode_header(h))
    )
    assert r.code == ResponseCode.SUCCESS, r.remark
    return r


def test_an_offset_reset_clears_the_fifo_lock_and_the_in_flight_count(root, client):
    """As 5.3 (assignResetOffset, then resetPopOffset at the next pop: clearBlock, commit; the in-flight count
    cleared at once): a FIFO queue locked by an unacked pop is popped again from the reset offset at once."""
    with Broker(_config(root)).start() as b:
        for i in range(3):
            _send(client, b, f"f{i}".encode(), queue_id=0)
        for q in (1, 2, 3):  # (a reset needs an offset on every queue: 4.9's "consumer group not exist")
            _send(client, b, f"u{q}".encode(), queue_id=q)
        assert _pop(client, b, n=2, invisible=60_000, queue_id=0, order=True, attempt_id="A1").code == 0
        for q in (1, 2, 3):
            assert [m.body for _, m in _pop_all(client, b, 1, invisible=60_000, queue_id=q)] == [f"u{q}".encode()]
        inflight = b.controller.pop_service.inflight
        assert on_loop(b, lambda: inflight.get(GROUP, TOPIC, 1)) == 1
        assert _pop(client, b, n=2, queue_id=0, order=True, attempt_id="A2").code == ResponseCode.POLLING_TIMEOUT
        _reset_offset_to_start(client, b)
        assert on_loop(b, lambda: [inflight.get(GROUP, TOPIC, q) for q in range(4)]) == [0, 0, 0, 0]
        r = _pop(client, b, n=2, invisible=60_000, queue_id=0, order=True, attempt_id="A3")
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert [m.body for m in decode_messages(r.body)] == [b"f0", b"f1"]
        assert [m.body for _, m in _pop_all(client, b, 1, invisible=60_000, queue_id=1)] == [b"u1"]


def test_the_in_flight_count_survives_a_clean_restart(root, client):
    """Admin's "In flight" (lag) after a clean restart is what it was; the old pops' acks still count down."""
    with Broker(_config(root)).start() as b:
        for i in range(3):
            _send(client, b, f"i{i}".encode(), queue_id=0)
        got = _pop_all(client, b, 3, invisible=60_000, queue_id=0)
        assert _ack(client, b, *got[0]).code == ResponseCode.SUCCESS
        assert on_loop(b, lambda: b.controller.pop_service.inflight.get(GROUP, TOPIC, 0)) == 2
    with Broker(_config(root)).start() as b:
        inflight = b.controller.pop_service.inflight
        assert on_loop(b, lambda: inflight.get(GROUP, TOPIC, 0)) == 2
        assert not os.path.exists(f"{root}/config/popInflight.json")  # taken: a crash now restarts at 0
        assert _ack(client, b, *got[1]).code == ResponseCode.SUCCESS
        assert on_loop(b, lambda: inflight.get(GROUP, TOPIC, 0)) == 1


def test_in_flight_counts_of_a_run_that_crashed_or_do_not_decode_are_not_trusted(tmp_path):
    path = str(tmp_path / "popInflight.json")
    saved = PopInflightCounter(start_ms=5)
    saved.increment("g", "t", 1, 4)
    saved.save(path)
    c = PopInflightCounter()
    c.restore(path, trusted=False)
    assert c.get("g", "t", 1) == 0 and not os.path.exists(path)
    saved.save(path)
    c.restore(path, trusted=True)
    assert (c.get("g", "t", 1), c.start_ms) == (4, 5) and not os.path.exists(path)
    for bad in ("{", '{"startMs":1}', '{"startMs":1,"counts":[["g","t"]]}'):
        Path(path).write_text(bad)
        fresh = PopInflightCounter()
        fresh.restore(path, trusted=True)
        assert fresh.get("g", "t", 1) == 0 and not os.path.exists(path)


def test_fifo_redelivers_after_the_invisible_time(root, client):
    with Broker(_config(root)).start() as b:
        _send(client, b, b"o0", queue_id=0)
        r = _pop(client, b, invisible=1000, queue_id=0, order=True, attempt_id="X")
        assert r.code == ResponseCode.SUCCESS
        time.sleep(1.2)
        r2 = _pop(client, b, invisible=60_000, queue_id=0, order=True, attempt_id="Y")
        assert r2.code == ResponseCode.SUCCESS
        assert [m.body for m in decode_messages(r2.body)] == [b"o0"]
        assert r2.ext_fields["orderCountInfo"].endswith(" 1")  # popped once before


@pytest.mark.parametrize(
    "handle",
    ["", "garbage", "1 2 3", "a b c d e f g h", "0 1 2 3 9 broker-a 0 0", "0 1 2 3 0 other-broker 0 0"],
)
def test_bad_receipt_handles_are_refused_and_nothing_is_acked(root, client, handle):
    with Broker(_config(root)).start() as b:
        _send(client, b, b"keep")
        hdr = AckMessageRequestHeader(consumerGroup=GROUP, topic=TOPIC, queueId=0, extraInfo=handle, offset=0)
        r = client.invoke_sync(b.address, RemotingCommand.request(RequestCode.ACK_MESSAGE, encode_header(hdr)), 5.0)
        assert r.code != ResponseCode.SUCCESS and r.remark
        assert not [m for m in _revive_records(b) if m.tags == "ack"]


def test_pop_refusals(root, client):
    with Broker(_config(root, auto_create_subscription_group=False)).start() as b:
        assert _pop(client, b, topic="NoSuchTopic").code == ResponseCode.TOPIC_NOT_EXIST
        _send(client, b, b"x")
        assert _pop(client, b).code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        assert _pop(client, b, n=33).code == ResponseCode.SYSTEM_ERROR
        r = _pop(client, b, queue_id=99)
        assert r.code == ResponseCode.SYSTEM_ERROR and "queueId[99] is illegal" in r.remark
        assert _pop(client, b, exp_type="SQL92", exp="a >").code in (
            ResponseCode.SUBSCRIPTION_PARSE_FAILED,
            ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        )
    with Broker(_config(root + "2", timer_wheel_enable=False)).start() as b:
        _send(client, b, b"x")
        r = _pop(client, b)
        assert r.code == ResponseCode.SYSTEM_ERROR and "timerWheelEnable is false" in r.remark


def test_query_assignment_and_message_request_mode(root, client):
    with Broker(_config(root)).start() as b:
        _send(client, b, b"x")

        def ask(code: int, body: dict) -> RemotingCommand:
            return client.invoke_sync(b.address, RemotingCommand.request(code, {}, json.dumps(body).encode()), 5.0)

        query = {"topic": TOPIC, "consumerGroup": GROUP, "clientId": "c1", "strategyName": "AVG"}
        query["messageModel"] = "BROADCASTING"
        r = ask(RequestCode.QUERY_ASSIGNMENT, query)
        got = json.loads(r.body)["messageQueueAssignments"]
        assert sorted(a["messageQueue"]["queueId"] for a in got) == [0, 1, 2, 3]
        assert {a["mode"] for a in got} == {"PULL"}  # Apache's defaultMessageRequestMode
        refused = ask(RequestCode.SET_MESSAGE_REQUEST_MODE, {"topic": f"%RETRY%{GROUP}", "consumerGroup": GROUP})
        assert refused.code == ResponseCode.NO_PERMISSION
        body = {"topic": TOPIC, "consumerGroup": GROUP, "mode": "POP", "popShareQueueNum": 0}
        assert ask(RequestCode.SET_MESSAGE_REQUEST_MODE, body).code == ResponseCode.SUCCESS
        got = json.loads(ask(RequestCode.QUERY_ASSIGNMENT, query).body)["messageQueueAssignments"]
        assert {a["mode"] for a in got} == {"POP"}
    with open(f"{root}/config/messageRequestMode.json") as f:
        assert json.loads(f.read())["messageRequestModeMap"][TOPIC][GROUP]["mode"] == "POP"


# --- kill -9 of a broker process ------------------------------------------------------------------------------
def _broker_proc(root: str, port: int, log) -> subprocess.Popen[bytes]:
    conf = Path(root).parent / "broker.conf"
    lines = [
        "brokerName=broker-a",
        f"listenPort={port}",
        f"storePathRootDir={root}",
        "mappedFileSizeCommitLog=1048576",
        "mappedFileSizeConsumeQueue=20000",
        "mappedFileSizeTimerLog=65536",
        "timerFlushIntervalMs=200",
        "flushConsumerOffsetInterval=60000",  # the offsets file is old when the broker dies
    ]
    conf.write_text("\n".join(lines) + "\n")
    exe = Path(sys.executable).with_name("rmq-core")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "rmq_core.cli"]
    with open(log, "ab") as out:
        return subprocess.Popen([*cmd, "broker", "-c", str(conf)], stdout=out, stderr=out, start_new_session=True)


class _Addr:
    """What _send/_pop/_ack need of a broker: its address."""

    def __init__(self, address: str) -> None:
        self.address = address


def _wait_serving(client, b: _Addr, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if invoke(client, b, send_request("PingTopic", b"ping")).code == ResponseCode.SUCCESS:
                return
        except Exception:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


@pytest.mark.slow
def test_kill_9_between_pop_and_revive_redelivers_each_unacked_once(root, client, tmp_path):
    log = tmp_path / "broker.log"
    b = _Addr(f"127.0.0.1:{free_port()}")
    proc = _broker_proc(root, int(b.address.rsplit(":", 1)[1]), log)
    try:
        _wait_serving(client, b)
        for i in range(6):
            _send(client, b, f"k{i}".encode(), queue_id=i % 3)
        popped = _pop_all(client, b, 6, invisible=3000)
        assert sorted(m.body for _, m in popped) == [f"k{i}".encode() for i in range(6)]
        acked = {m.body for _, m in popped[:3]}
        for h, m in popped[:3]:
            assert _ack(client, b, h, m).code == ResponseCode.SUCCESS
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        b = _Addr(f"127.0.0.1:{free_port()}")
        proc = _broker_proc(root, int(b.address.rsplit(":", 1)[1]), log)
        _wait_serving(client, b)
        seen: list = []
        deadline = time.time() + 12
        while time.time() < deadline:
            r = _pop(client, b, invisible=60_000, poll=500)
            if r.code == ResponseCode.SUCCESS:
                seen.extend(m for _, m in _handles(r))
        bodies = sorted(m.body for m in seen)
        assert bodies == sorted({m.body for _, m in popped} - acked), bodies  # each unacked once, no acked one
        assert all(m.reconsume_times == 1 for m in seen)  # redelivered, not popped again as new
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_a_parked_pop_does_not_hold_up_its_connection(root, client):
    with Broker(_config(root)).start() as b:
        _send(client, b, b"first")
        assert len(_pop_all(client, b, 1, invisible=60_000)) == 1
        h = PopMessageRequestHeader(GROUP, TOPIC, -1, 32, 60_000, 5000, int(time.time() * 1000), 1, "TAG", "*", False)
        parked = client.invoke_async(b.address, RemotingCommand.request(RequestCode.POP_MESSAGE, encode_header(h)), 10)
        time.sleep(0.3)
        t0 = time.time()
        _send(client, b, b"second")  # the same connection: answered while the pop waits
        assert time.time() - t0 < 1.0
        r = parked.result(10)
        assert r.code == ResponseCode.SUCCESS and [m.body for m in decode_messages(r.body)] == [b"second"]


def test_peek_moves_nothing_and_notification_says_when_there_is_something(root, client):
    with Broker(_config(root)).start() as b:

        def peek() -> RemotingCommand:
            h = PeekMessageRequestHeader(consumerGroup=GROUP, topic=TOPIC, queueId=-1, maxMsgNums=32)
            return client.invoke_sync(b.address, RemotingCommand.request(RequestCode.PEEK_MESSAGE, encode_header(h)), 5)

        def notification(poll: int = 0) -> RemotingCommand:
            h = NotificationRequestHeader(GROUP, TOPIC, -1, poll, int(time.time() * 1000))
            req = RemotingCommand.request(RequestCode.NOTIFICATION, encode_header(h))
            return client.invoke_sync(b.address, req, 5 + poll / 1000)

        _send(client, b, b"p0")
        _send(client, b, b"p1", queue_id=1)
        for _ in range(2):  # a peek changes nothing: the same twice
            r = peek()
            assert r.code == ResponseCode.SUCCESS and sorted(m.body for m in decode_messages(r.body)) == [b"p0", b"p1"]
        n = notification()
        assert n.code == ResponseCode.SUCCESS and n.ext_fields["hasMsg"] == "true"
        assert len(_pop_all(client, b, 2, invisible=60_000)) == 2
        assert peek().code == ResponseCode.PULL_NOT_FOUND
        t0 = time.time()
        n = notification(poll=800)
        assert n.code == ResponseCode.SUCCESS and n.ext_fields["hasMsg"] == "false" and time.time() - t0 >= 0.7
        out: list = []
        t = threading.Thread(target=lambda: out.append(notification(poll=5000)))
        t.start()
        time.sleep(0.3)
        with BlockingRemotingClient() as c2:
            _send(c2, b, b"p2")
        t.join(10)
        assert out[0].ext_fields["hasMsg"] == "true"
        assert notification().code == ResponseCode.SUCCESS
        h = NotificationRequestHeader(GROUP, "NoSuchTopic", -1, 0, 0)
        r = client.invoke_sync(b.address, RemotingCommand.request(RequestCode.NOTIFICATION, encode_header(h)), 5)
        assert r.code == ResponseCode.TOPIC_NOT_EXIST


def test_a_pop_parked_for_a_client_that_left_takes_nothing(root, client):
    with Broker(_config(root)).start() as b:
        _send(client, b, b"first")
        assert len(_pop_all(client, b, 1, invisible=60_000)) == 1
        h = PopMessageRequestHeader(GROUP, TOPIC, -1, 32, 60_000, 20_000, int(time.time() * 1000), 1, "TAG", "*", False)
        host, port = b.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(RemotingCommand.request(RequestCode.POP_MESSAGE, encode_header(h)).encode())
            time.sleep(0.5)  # parked
        time.sleep(0.3)  # the broker saw the close
        _send(client, b, b"second")
        got = _pop_all(client, b, 1, invisible=60_000, timeout=5)
        assert [m.body for _, m in got] == [b"second"]  # not made invisible for the client that left


def test_sql92_filter_and_a_bad_expression(root, client):
    with Broker(_config(root)).start() as b:
        for i, color in enumerate(("red", "blue", "red")):
            p = properties_to_string({"TAGS": "T", "color": color, "UNIQ_KEY": f"S{i}"})
            r = invoke(client, b, send_request(TOPIC, b"s%d" % i, queue_id=0, properties=p))
            assert r.code == ResponseCode.SUCCESS
        got = _pop_all(client, b, 2, invisible=60_000, exp_type="SQL92", exp="color = 'red'")
        assert sorted(m.body for _, m in got) == [b"s0", b"s2"]
        r = _pop(client, b, exp_type="SQL92", exp="color = ")
        assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


def test_a_failing_re_put_is_retried_with_backoff_not_every_pass(root, client, caplog):
    topic, group = "T" * 100, "g" * 30  # %RETRY%{group}_{topic} is longer than a topic may be: the re-put fails
    with Broker(_config(root)).start() as b:
        _send(client, b, b"stuck", topic=topic)
        assert len(_pop_all(client, b, 1, invisible=1000, topic=topic, group=group)) == 1
        caplog.clear()
        time.sleep(6.0)
        failures = [r for r in caplog.records if "revive: cannot put to" in r.getMessage()]
        assert 1 <= len(failures) <= 4, len(failures)  # 1 s, 2 s, 4 s apart; every 0.5 s pass would be ~10
        # kept, not dropped: the CK went back to the revive log, its re-put count rising (5.x rePutCK)
        cks = [PopCheckPoint.decode(m.body) for m in stored(b, "rmq_sys_wheel_timer", 0) if m.tags == "ck"]
        assert max(ck.re_put_times_count() for ck in cks) >= 1


def _consume_stats(client, b: Broker, group: str = GROUP, topic: str | None = None):
    from rmq_core.remoting.body.queue_offsets import ConsumeStats
    from rmq_core.remoting.header import GetConsumeStatsRequestHeader

    h = GetConsumeStatsRequestHeader(consumerGroup=group, topic=topic)
    r = client.invoke_sync(b.address, RemotingCommand.request(RequestCode.GET_CONSUME_STATS, encode_header(h)), 5.0)
    assert r.code == ResponseCode.SUCCESS, r.remark
    per_topic: dict[str, list[int]] = {}
    for mq, w in ConsumeStats.decode(r.body).offset_table.items():
        row = per_topic.setdefault(mq.topic, [0, 0, 0])
        row[0] += w.broker_offset - w.consumer_offset  # mqadmin 5.x's #Diff
        row[1] += w.pull_offset - w.consumer_offset  # and its #Inflight
        row[2] += w.pull_offset
    return per_topic


def test_consume_stats_of_a_pop_group_count_popped_unacked_as_lag_and_in_flight(root, client):
    """A POP group (raw POP frames, no heartbeat) in GET_CONSUME_STATS: its pop offset is the pull offset, what is
    popped and not acked is in flight and still lag (5.x's ConsumerLagCalculator), acked messages are neither; once
    revived they leave the topic's in-flight and are lag of the retry topic. Apache's mqadmin 4.9.7 shows the lag
    (-1 on Apache's dashboard, rocketmq#10601)."""
    with Broker(_config(root)).start() as b:
        for i in range(6):
            _send(client, b, f"m{i}".encode(), queue_id=i % 2)
        assert TOPIC not in _consume_stats(client, b)  # the group has read nothing yet
        got = _pop_all(client, b, 6, invisible=3000)
        assert len(got) == 6
        for h, m in got[:2]:
            assert _ack(client, b, h, m).code == ResponseCode.SUCCESS
        assert _consume_stats(client, b)[TOPIC] == [4, 4, 6]  # 4 unacked: lag and in flight; popped up to 6
        assert _consume_stats(client, b, topic=TOPIC)[TOPIC] == [4, 4, 6]
        # the group is known by its pops (compensation table): its subscription lists the topic and its retry
        retry = f"%RETRY%{GROUP}_{TOPIC}"
        wait_until(lambda: _consume_stats(client, b).get(TOPIC) == [0, 0, 6], "the 4 revived", timeout=20)
        assert _consume_stats(client, b, topic=retry)[retry] == [
            4,
            0,
            0,
        ]  # waiting in the retry topic: lag, not in flight
        # no heartbeat: not a connection (as Apache), CONSUMER_NOT_ONLINE
        from rmq_core.remoting.header import GetConsumerConnectionListRequestHeader

        h = encode_header(GetConsumerConnectionListRequestHeader(consumerGroup=GROUP))
        r = client.invoke_sync(b.address, RemotingCommand.request(RequestCode.GET_CONSUMER_CONNECTION_LIST, h), 5.0)
        assert r.code == ResponseCode.CONSUMER_NOT_ONLINE
        info = b.controller.consumer_manager.get_consumer_group_info(GROUP, from_compensation_table=True)
        assert info is not None and info.consume_type.name == "CONSUME_POP"
        assert set(info.subscription_table) == {TOPIC, retry}
