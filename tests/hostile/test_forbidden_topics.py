"""Issue 28, "no way into a forbidden topic": a client that can reach the broker's port, with raw remoting frames,
against a real broker on 127.0.0.1.

- sends to the topics clients may not write (``rmq_sys_wheel_timer`` with or without ``REAL_TOPIC``,
  ``SELF_TEST_TOPIC``, the schedule and transaction topics) are refused on every send path: the general path, the
  plain fast path (a chunk read in one call, the checks once per key), SEND_MESSAGE v1 and batches;
- END_TRANSACTION COMMIT naming an ordinary message that carries ``PGROUP``/``REAL_TOPIC``/``REAL_QID`` stores nothing
  (Apache 4.9.7 and 5.x commit it);
- the broker's own re-puts (timer, schedule, transaction commit, send-back) check the real topic when they put:
  a topic made read-only meanwhile gets nothing;
- names are matched whole (a trailing newline is refused), topics are at most the 127 characters a CommitLog record
  holds (retry topics too), offsets beyond Java's long are refused and never reach consumerOffset.json.
"""

from __future__ import annotations

import json
import socket
import struct
import time

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.common.perm_name import PERM_READ
from rmq_core.common.topic_config import TopicConfig
from rmq_core.message import Message, decode_offset_msg_id
from rmq_core.message_encoding import encode_batch, properties_to_string
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    EndTransactionRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    encode_header,
)

from support.admin_helpers import add_topic_config
from support.send_helpers import (
    SMALL_FILES,
    _recv_exactly,
    invoke,
    max_offset,
    on_loop,
    send_back_request,
    send_request,
    stored,
    wait_until,
)

TIMER = "rmq_sys_wheel_timer"
HALF = "RMQ_SYS_TRANS_HALF_TOPIC"
COMMIT = 8
FORBIDDEN = "Sending message to topic[{}] is forbidden."


def _broker(tmp_path, **kw) -> Broker:
    kw.setdefault("message_delay_level", "1s 2s")
    kw.update(SMALL_FILES)
    return Broker(BrokerConfig(listen_port=0, store_path_root_dir=str(tmp_path / "store"), **kw))


@pytest.fixture
def broker(tmp_path):
    with _broker(tmp_path) as b:
        yield b


def _now() -> int:
    return time.time_ns() // 1_000_000


def _props(**p: str) -> str:
    return properties_to_string(p)


def _one_chunk(addr: str, reqs: list[RemotingCommand]) -> list[RemotingCommand]:
    """Every request written with one sendall (the broker reads them as one chunk: the plain path's columns); the
    responses in request order."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5.0) as sock:
        sock.sendall(b"".join(r.encode() for r in reqs))
        out = {}
        for _ in reqs:
            (length,) = struct.unpack(">i", _recv_exactly(sock, 4))
            resp = RemotingCommand.decode_frame(_recv_exactly(sock, length))
            out[resp.opaque] = resp
    return [out[r.opaque] for r in reqs]


def _topic_exists(broker: Broker, topic: str) -> bool:
    return broker.controller.topic_config_manager.select_topic_config(topic) is not None


def _read_only(broker: Broker, topic: str, queues: int = 4) -> None:
    add_topic_config(broker, TopicConfig(topic, queues, queues, perm=PERM_READ))


# --- 1. sends to the topics clients may not write -----------------------------------------------------------
TIMER_HIJACK = {"REAL_TOPIC": "Victim", "REAL_QID": "0", "TIMER_OUT_MS": "1000"}


@pytest.mark.parametrize(
    "topic, props",
    [
        (TIMER, {}),
        (TIMER, TIMER_HIJACK),
        ("SELF_TEST_TOPIC", {}),
        ("SCHEDULE_TOPIC_XXXX", {"REAL_TOPIC": "Victim", "REAL_QID": "0"}),
        (HALF, {"REAL_TOPIC": "Victim", "REAL_QID": "0", "PGROUP": "PG", "TRAN_MSG": "true"}),
    ],
)
@pytest.mark.parametrize("path", ["plain", "general", "v1", "batch"])
def test_send_to_a_forbidden_topic_is_refused_on_every_path(broker, client, topic, props, path):
    add_topic_config(broker, TopicConfig("Victim", 1, 1, perm=PERM_READ))
    before = max_offset(broker, topic)
    if path == "batch":
        req = send_request(topic, encode_batch([Message(topic, b"x")]), code=RequestCode.SEND_BATCH_MESSAGE, batch=True)
    else:
        p = dict(props, WAIT="false") if path == "general" else props  # WAIT=false: not a plain send
        code = RequestCode.SEND_MESSAGE if path == "v1" else RequestCode.SEND_MESSAGE_V2
        req = send_request(topic, b"hijack", code=code, properties=_props(**p) if p else None)
    resp = invoke(client, broker, req)
    assert (resp.code, resp.remark) == (ResponseCode.NO_PERMISSION, FORBIDDEN.format(topic))
    assert max_offset(broker, topic) == before
    time.sleep(0.05)
    assert max_offset(broker, "Victim") == 0


def test_a_chunk_mixing_timer_topic_sends_with_plain_ones(broker):
    """The plain path checks once per (topic, queue, ...) key: the timer topic's key refuses each of its sends, the
    others of the chunk are stored in order."""
    reqs = []
    for i in range(6):
        topic = TIMER if i % 2 else "Fine"
        reqs.append(send_request(topic, b"m%d" % i, properties=_props(**TIMER_HIJACK) if i % 4 == 1 else None))
    answers = _one_chunk(broker.address, reqs)
    assert [a.code for a in answers] == [ResponseCode.SUCCESS, ResponseCode.NO_PERMISSION] * 3
    assert [m.body for m in stored(broker, "Fine")] == [b"m0", b"m2", b"m4"]
    assert max_offset(broker, TIMER) == 0 and not _topic_exists(broker, "Victim")


# --- 2. END_TRANSACTION takes only a real half message ------------------------------------------------------
def _end(group: str, queue_offset: int, commitlog_offset: int, kind: int = COMMIT) -> RemotingCommand:
    h = EndTransactionRequestHeader(
        producerGroup=group,
        tranStateTableOffset=queue_offset,
        commitLogOffset=commitlog_offset,
        commitOrRollback=kind,
        fromTransactionCheck=False,
        msgId="M",
    )
    return RemotingCommand.request(RequestCode.END_TRANSACTION, encode_header(h))


@pytest.mark.parametrize("target", ["ReadOnlyTopic", "OFFSET_MOVED_EVENT", HALF, "NoSuchTopic"])
def test_commit_of_an_ordinary_message_carrying_real_topic_stores_nothing(tmp_path, client, target):
    with _broker(tmp_path, auto_create_topic_enable=False) as b:
        add_topic_config(b, TopicConfig("Plain", 1, 1))
        _read_only(b, "ReadOnlyTopic", 1)
        before = max_offset(b, target)
        resp = invoke(
            client, b, send_request("Plain", b"forged", properties=_props(PGROUP="PG", REAL_TOPIC=target, REAL_QID="0"))
        )
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        phy = decode_offset_msg_id(resp.ext_fields["msgId"])[1]
        end = invoke(client, b, _end("PG", int(resp.ext_fields["queueOffset"]), phy))
        assert (end.code, end.remark) == (ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
        assert max_offset(b, target) == before
        assert max_offset(b, "RMQ_SYS_TRANS_OP_HALF_TOPIC") == 0  # nothing marked resolved either


def test_commit_to_a_real_topic_made_read_only_meanwhile_is_refused_and_left_open(broker, client):
    add_topic_config(broker, TopicConfig("TxTopic", 2, 2))
    p = _props(TRAN_MSG="true", PGROUP="PG", UNIQ_KEY="U1")
    resp = invoke(client, broker, send_request("TxTopic", b"tx", queue_id=1, properties=p, sys_flag=0x4))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    phy = decode_offset_msg_id(resp.ext_fields["msgId"])[1]
    _read_only(broker, "TxTopic", 2)
    end = invoke(client, broker, _end("PG", int(resp.ext_fields["queueOffset"]), phy))
    assert (end.code, end.remark) == (ResponseCode.NO_PERMISSION, "the topic[TxTopic] sending message is forbidden")
    assert max_offset(broker, "TxTopic", 1) == 0
    add_topic_config(broker, TopicConfig("TxTopic", 2, 2))  # writable again: the half message is still open
    end = invoke(client, broker, _end("PG", int(resp.ext_fields["queueOffset"]), phy))
    assert end.code == ResponseCode.SUCCESS, end.remark
    assert [m.body for m in stored(broker, "TxTopic", 1)] == [b"tx"]


# --- 3. the broker's own re-puts check the real topic -------------------------------------------------------
def test_timer_delivery_to_a_topic_made_read_only_is_dropped(broker, client):
    for t in ("Flip", "Good"):
        add_topic_config(broker, TopicConfig(t, 1, 1))
    due = str(_now() + 1200)
    for t in ("Flip", "Good"):
        resp = invoke(client, broker, send_request(t, t.encode(), properties=_props(TIMER_DELIVER_MS=due)))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    _read_only(broker, "Flip", 1)
    wait_until(lambda: stored(broker, "Good"), timeout=10)
    ts = broker.controller.timer_message_store
    wait_until(lambda: ts.pending_in_heap == 0, timeout=5)
    assert max_offset(broker, "Flip") == 0


def test_schedule_delivery_to_a_topic_made_read_only_is_dropped(broker, client):
    for t in ("Flip", "Good"):
        add_topic_config(broker, TopicConfig(t, 1, 1))
    for t in ("Flip", "Good"):  # level 1 (1 s): delivered in send order
        resp = invoke(client, broker, send_request(t, t.encode(), properties=_props(DELAY="1")))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    _read_only(broker, "Flip", 1)
    wait_until(lambda: stored(broker, "Good"), timeout=10)
    assert max_offset(broker, "Flip") == 0
    assert broker.controller.schedule_message_service.offset_table[1] == 2  # dropped, not retried forever


def test_send_back_to_a_read_only_dlq_is_refused(broker, client):
    add_topic_config(broker, TopicConfig("Orig", 1, 1))
    _read_only(broker, "%DLQ%GroupB", 1)
    resp = invoke(client, broker, send_request("Orig", b"o"))
    phy = decode_offset_msg_id(resp.ext_fields["msgId"])[1]
    back = invoke(client, broker, send_back_request(phy, "GroupB", delay_level=-1))
    assert (back.code, back.remark) == (
        ResponseCode.NO_PERMISSION,
        "the topic[%DLQ%GroupB] sending message is forbidden",
    )
    assert max_offset(broker, "%DLQ%GroupB") == 0


# --- 4. names matched whole, topics the store can hold ------------------------------------------------------
@pytest.mark.parametrize("topic", ["Topic\n", "%RETRY%" + "g" * 200, "T" * 128])
def test_a_name_the_store_cannot_hold_is_refused_and_not_created(broker, client, topic):
    resp = invoke(client, broker, send_request(topic, b"x"))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "illegal characters" in resp.remark or "longer than topic max length: 127" in resp.remark
    assert not _topic_exists(broker, topic)


@pytest.mark.parametrize("group", ["Group\n", "g" * 121])
def test_a_group_name_with_a_newline_or_too_long_is_refused(broker, client, group):
    from rmq_core.common.subscription_group_config import SubscriptionGroupConfig

    req = RemotingCommand.request(
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        {},
        json.dumps(SubscriptionGroupConfig(group).to_json_dict()).encode(),
    )
    resp = invoke(client, broker, req)
    assert resp.code != ResponseCode.SUCCESS
    assert (
        on_loop(broker, lambda: group in broker.controller.subscription_group_manager.subscription_group_table) is False
    )


# --- 5. offsets within Java's long (and queue ids within Java's int) --------------------------------------------------------------------------
@pytest.mark.parametrize("offset", [str(10**30), str(1 << 63), str(-(1 << 63) - 1)])
def test_an_offset_beyond_a_java_long_is_refused_and_never_persisted(broker, client, offset):
    add_topic_config(broker, TopicConfig("T", 4, 4, 6))  # offsets are committed only for a topic the broker holds
    ext = encode_header(UpdateConsumerOffsetRequestHeader(consumerGroup="G", topic="T", queueId=0, commitOffset=0))
    ext["commitOffset"] = offset
    resp = invoke(client, broker, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "<commitOffset> is out of the range of a long" in resp.remark
    ext["commitOffset"] = str((1 << 63) - 1)  # the largest long is fine
    assert (
        invoke(client, broker, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext)).code
        == ResponseCode.SUCCESS
    )
    mgr = broker.controller.consumer_offset_manager
    on_loop(broker, mgr.persist)
    with open(mgr.config_file_path) as f:
        assert offset not in f.read()


@pytest.mark.parametrize("queue_id", [str(1 << 31), str(-(1 << 31) - 1), str(10**20)])
def test_a_queue_id_beyond_a_java_int_is_refused_and_never_persisted(broker, client, queue_id):
    """consumerOffset.json keys its offsets by queue id: Java reads them as ints."""
    ext = encode_header(UpdateConsumerOffsetRequestHeader(consumerGroup="G", topic="T", queueId=0, commitOffset=5))
    ext["queueId"] = queue_id
    resp = invoke(client, broker, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "<queueId> is out of the range of an int" in resp.remark
    assert on_loop(broker, lambda: dict(broker.controller.consumer_offset_manager.offset_table)) == {}
