"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320) against a real broker over TCP: the
checks of RocketMQ 4.9's msgCheck in order, what is stored (properties, CLUSTER, UNIQ_KEY, born host, hosts,
timestamps), the response header and its always-present MSG_REGION/TRACE_ON, batches, delay redirect, SYNC_FLUSH."""

from __future__ import annotations

import socket
import struct
import time
import zlib

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.common.perm_name import PERM_READ
from rmq_core.common.topic_config import TopicConfig
from rmq_core.message import Message, decode_offset_msg_id
from rmq_core.message_encoding import encode_batch, encode_message, properties_to_string
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand

from support.admin_helpers import add_topic_config
from support.send_helpers import SMALL_FILES, _recv_exactly, invoke, invoke_raw, max_offset, send_request, stored

V1, V2, BATCH = RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE


def _broker(tmp_path, **kw) -> Broker:
    kw.setdefault("message_delay_level", "1s 2s 3s")
    kw.update(SMALL_FILES)
    return Broker(BrokerConfig(listen_port=0, store_path_root_dir=str(tmp_path / "store"), **kw))


@pytest.fixture
def broker(tmp_path):
    with _broker(tmp_path) as b:
        yield b


def _assert_ext(resp: RemotingCommand, region: str = "DefaultRegion", trace: str = "true") -> None:
    assert resp.ext_fields["MSG_REGION"] == region
    assert resp.ext_fields["TRACE_ON"] == trace


# --- single sends --------------------------------------------------------------------------------------------
def test_v1_send_stores_the_message_and_answers_offset_msg_id(broker, client):
    props = properties_to_string({"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "C0A80001ABCD0000000000000001"})
    born = 1_700_000_000_123
    resp = invoke(
        client, broker, send_request("TopicV1", b"hello", code=V1, properties=props, flag=7, born_timestamp=born)
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert resp.remark is None
    _assert_ext(resp)
    assert (resp.ext_fields["queueId"], resp.ext_fields["queueOffset"]) == ("0", "0")
    host, phy = decode_offset_msg_id(resp.ext_fields["msgId"])
    assert host == broker.controller.store_host
    [m] = stored(broker, "TopicV1")
    assert (m.commitlog_offset, m.body, m.flag, m.born_timestamp) == (phy, b"hello", 7, born)
    assert m.tags == "TagA" and m.keys == "k1 k2"
    assert m.properties["UNIQ_KEY"] == "C0A80001ABCD0000000000000001"  # kept as the producer set it
    assert m.properties["CLUSTER"] == "DefaultCluster"
    assert m.store_host == broker.controller.store_host
    resp2 = invoke(client, broker, send_request("TopicV1", b"again", code=V1, properties=props))
    assert resp2.ext_fields["queueOffset"] == "1"


def test_v2_short_names_and_header_fields_are_stored(broker, client):
    props = properties_to_string({"TAGS": "T", "WAIT": "true", "userKey": "v"})
    resp = invoke(
        client,
        broker,
        send_request(
            "TopicV2", b"body-v2", queue_id=2, properties=props, flag=3, born_timestamp=1234, reconsume_times=5
        ),
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert resp.ext_fields["queueId"] == "2"
    [m] = stored(broker, "TopicV2", 2)
    assert (m.flag, m.born_timestamp, m.reconsume_times, m.queue_id) == (3, 1234, 5, 2)
    assert m.properties["userKey"] == "v"
    assert "WAIT" not in m.properties  # 4.9.8 does not store WAIT
    assert len(m.properties["UNIQ_KEY"]) == 32  # assigned by the store when the producer sent none


def test_born_host_is_the_tcp_peer(broker):
    resp, local = invoke_raw(broker.address, send_request("TopicBorn", b"x"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    [m] = stored(broker, "TopicBorn")
    assert m.born_host == local


def test_negative_queue_id_picks_a_writable_queue(broker, client):
    seen = set()
    for i in range(12):
        resp = invoke(client, broker, send_request("TopicAnyQ", b"%d" % i, queue_id=-1, default_topic_queue_nums=4))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        qid = int(resp.ext_fields["queueId"])
        assert 0 <= qid < 4
        seen.add(qid)
        assert any(m.body == b"%d" % i for m in stored(broker, "TopicAnyQ", qid))
    assert sum(max_offset(broker, "TopicAnyQ", q) for q in range(4)) == 12


def test_topic_auto_created_from_the_default_topic(broker, client):
    assert broker.controller.topic_config_manager.select_topic_config("NewTopic") is None
    resp = invoke(client, broker, send_request("NewTopic", b"x", default_topic_queue_nums=3))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    cfg = broker.controller.topic_config_manager.select_topic_config("NewTopic")
    assert (cfg.read_queue_nums, cfg.write_queue_nums) == (3, 3)
    resp = invoke(client, broker, send_request("NewTopic", b"x", queue_id=3))  # only 0..2 exist
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "request queueId[3] is illegal" in resp.remark
    _assert_ext(resp)


def test_topic_not_auto_created_when_disabled(tmp_path, client):
    with _broker(tmp_path, auto_create_topic_enable=False) as b:
        resp = invoke(client, b, send_request("NoSuchTopic", b"x"))
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        assert resp.remark.startswith("topic[NoSuchTopic] not exist, apply first please!")
        _assert_ext(resp)
        assert b.controller.topic_config_manager.select_topic_config("NoSuchTopic") is None
        assert max_offset(b, "NoSuchTopic") == 0
        add_topic_config(b, TopicConfig("Made", 2, 2))
        assert invoke(client, b, send_request("Made", b"x", queue_id=1)).code == ResponseCode.SUCCESS


@pytest.mark.parametrize(
    "topic, needle",
    [
        ("bad topic!", "illegal characters"),
        ("T" * 128, "longer than topic max length"),
        ("", "blank"),
    ],
)
def test_illegal_topic_is_system_error(broker, client, topic, needle):
    resp = invoke(client, broker, send_request(topic, b"x"))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert needle in resp.remark
    _assert_ext(resp)


def test_not_allowed_system_topic(broker, client):
    resp = invoke(client, broker, send_request("SCHEDULE_TOPIC_XXXX", b"x"))
    assert resp.code == ResponseCode.NO_PERMISSION
    assert resp.remark == "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden."
    assert max_offset(broker, "SCHEDULE_TOPIC_XXXX") == 0


def test_oversized_message_is_illegal_and_not_stored(tmp_path, client):
    with _broker(tmp_path, max_message_size=1024) as b:
        resp = invoke(client, b, send_request("BigTopic", b"x" * 1025))
        assert resp.code == ResponseCode.MESSAGE_ILLEGAL
        assert "msg body length limit 1024B" in resp.remark
        _assert_ext(resp)
        assert max_offset(b, "BigTopic") == 0
        assert invoke(client, b, send_request("BigTopic", b"x" * 1024)).code == ResponseCode.SUCCESS
        body = encode_batch([Message("BigTopic", b"y" * 600), Message("BigTopic", b"z" * 600)])
        resp = invoke(client, b, send_request("BigTopic", body, code=BATCH, batch=True))
        assert resp.code == ResponseCode.MESSAGE_ILLEGAL
        assert max_offset(b, "BigTopic") == 1


def test_not_writable_broker(tmp_path, client):
    with _broker(tmp_path, broker_permission=PERM_READ) as b:
        resp = invoke(client, b, send_request("AnyTopic", b"x"))
        assert resp.code == ResponseCode.NO_PERMISSION
        assert resp.remark == "the broker[127.0.0.1] sending message is forbidden"
        _assert_ext(resp)
        assert max_offset(b, "AnyTopic") == 0


def test_not_writable_topic(broker, client):
    add_topic_config(broker, TopicConfig("ReadOnly", 1, 1, perm=PERM_READ))
    resp = invoke(client, broker, send_request("ReadOnly", b"x"))
    assert resp.code == ResponseCode.NO_PERMISSION
    assert resp.remark == "the topic[ReadOnly] sending message is forbidden"
    assert max_offset(broker, "ReadOnly") == 0


def test_transaction_prepared_message_goes_to_the_half_topic(broker, client):
    """(the rest of the transaction path: tests/broker/test_end_transaction_processor.py)"""
    props = properties_to_string({"TRAN_MSG": "true", "PGROUP": "PG"})
    resp = invoke(client, broker, send_request("TxTopic", b"x", properties=props, sys_flag=0x4))
    assert resp.code == ResponseCode.SUCCESS
    assert max_offset(broker, "TxTopic") == 0
    assert max_offset(broker, "RMQ_SYS_TRANS_HALF_TOPIC") == 1


def test_missing_header_field_answers_system_error_with_ext_fields(broker, client):
    req = send_request("TopicH", b"x")
    del req.ext_fields["b"]  # topic
    resp = invoke(client, broker, req)
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "<topic>" in resp.remark
    _assert_ext(resp)


def test_region_and_trace_switch_come_from_the_config(tmp_path, client):
    with _broker(tmp_path, region_id="EU1", trace_on=False) as b:
        ok = invoke(client, b, send_request("TopicR", b"x"))
        bad = invoke(client, b, send_request("bad topic", b"x"))
        for resp in (ok, bad):
            _assert_ext(resp, "EU1", "false")


def test_retry_topic_past_max_reconsume_goes_to_dlq(broker, client):
    resp = invoke(
        client, broker, send_request("%RETRY%G1", b"r1", queue_id=0, reconsume_times=1, max_reconsume_times=3)
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert [m.body for m in stored(broker, "%RETRY%G1")] == [b"r1"]
    resp = invoke(
        client,
        broker,
        send_request(
            "%RETRY%G1",
            b"r2",
            queue_id=0,
            reconsume_times=3,
            max_reconsume_times=3,
            properties=properties_to_string({"DELAY": "2"}),
        ),
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    [m] = stored(broker, "%DLQ%G1")
    assert (m.body, m.reconsume_times) == (b"r2", 3)
    assert "DELAY" not in m.properties
    dlq = broker.controller.topic_config_manager.select_topic_config("%DLQ%G1")
    assert (dlq.read_queue_nums, dlq.write_queue_nums, dlq.perm) == (1, 1, 6)


def test_delay_level_goes_to_the_schedule_topic(broker, client):
    props = properties_to_string({"TAGS": "D", "DELAY": "2"})
    resp = invoke(client, broker, send_request("TopicDelay", b"later", queue_id=1, properties=props))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert resp.ext_fields["queueId"] == "1"
    [m] = stored(broker, "SCHEDULE_TOPIC_XXXX", 1)
    assert m.properties["REAL_TOPIC"] == "TopicDelay" and m.properties["REAL_QID"] == "1"
    assert m.properties["DELAY"] == "2"
    props = properties_to_string({"DELAY": "99"})  # clamped to the highest level (3)
    resp = invoke(client, broker, send_request("TopicDelay", b"clamped", queue_id=0, properties=props))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    [m] = stored(broker, "SCHEDULE_TOPIC_XXXX", 2)
    assert (m.body, m.properties["DELAY"], m.properties["REAL_QID"]) == (b"clamped", "3", "0")
    bad = invoke(client, broker, send_request("TopicDelay", b"x", properties=properties_to_string({"DELAY": "x"})))
    assert bad.code == ResponseCode.MESSAGE_ILLEGAL


def test_compressed_body_is_stored_as_sent(broker, client):
    raw = zlib.compress(b"squeeze me " * 100)
    resp = invoke(client, broker, send_request("TopicZ", raw, sys_flag=0x1))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    [m] = stored(broker, "TopicZ", decompress=False)
    assert m.body == raw and m.sys_flag & 0x1


# --- batches -------------------------------------------------------------------------------------------------
def test_batch_consecutive_offsets_and_offset_msg_ids(broker, client):
    msgs = [Message("TopicB", b"m%d" % i, tags="T%d" % i, properties={"UNIQ_KEY": "U%d" % i}, flag=i) for i in range(3)]
    batch_props = properties_to_string({"WAIT": "true"})
    resp = invoke(
        client,
        broker,
        send_request(
            "TopicB",
            encode_batch(msgs, trailing_separator=False),
            code=BATCH,
            queue_id=1,
            properties=batch_props,
            batch=True,
            born_timestamp=555,
        ),
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    _assert_ext(resp)
    assert (resp.ext_fields["queueId"], resp.ext_fields["queueOffset"]) == ("1", "0")
    ids = resp.ext_fields["msgId"].split(",")
    got = stored(broker, "TopicB", 1)
    assert [m.queue_offset for m in got] == [0, 1, 2]
    assert [decode_offset_msg_id(i)[1] for i in ids] == [m.commitlog_offset for m in got]
    for i, m in enumerate(got):
        assert (m.body, m.flag, m.tags, m.born_timestamp) == (b"m%d" % i, i, "T%d" % i, 555)
        assert m.properties["UNIQ_KEY"] == "U%d" % i
        assert m.properties["CLUSTER"] == "DefaultCluster"
        assert m.properties["WAIT"] == "true"  # batch-level properties are appended to every block (4.9)
    resp = invoke(client, broker, send_request("TopicB", encode_batch(msgs[:2]), code=BATCH, queue_id=1))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert resp.ext_fields["queueOffset"] == "3"
    assert max_offset(broker, "TopicB", 1) == 5


def _raw_records(broker: Broker, topic: str, queue_id: int) -> list[bytes]:
    body = broker.message_store.get_message("test", topic, queue_id, 0, 32).body
    out, pos = [], 0
    while pos < len(body):
        (total,) = struct.unpack_from(">i", body, pos)
        out.append(body[pos : pos + total])
        pos += total
    return out


def test_batch_records_store_the_block_properties_then_the_batch_s_as_4_9_7(broker, client):
    """Each record's properties: the block's bytes as sent (no trailing separator from a 4.9.3+ client), a separator,
    then the batch-level string (header properties + CLUSTER) in the order 4.9.7's HashMap iterates it, without a
    trailing separator (4.9.7's messageProperties2String); WAIT, in
    both, is stored twice as Apache stores it (tests/interop/test_batch_records_apache.py compares with Apache)."""
    msgs = [
        Message("TopicBP", b"m%d" % i, tags="T", properties={"UNIQ_KEY": f"U{i}", "WAIT": "true"}) for i in range(2)
    ]
    body = encode_batch(msgs, trailing_separator=False)
    req = send_request("TopicBP", body, code=BATCH, queue_id=0, properties="WAIT\x01true", batch=True)
    resp = invoke(client, broker, req)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    records = _raw_records(broker, "TopicBP", 0)
    assert len(records) == 2
    for i, raw in enumerate(records):
        stored_props = properties_to_string(msgs[i].properties, trailing_separator=False).encode()
        stored_props += b"\x02CLUSTER\x01DefaultCluster\x02WAIT\x01true"
        assert raw.endswith(stored_props)
        assert struct.unpack_from(">h", raw, len(raw) - len(stored_props) - 2) == (len(stored_props),)


@pytest.mark.parametrize("mangle", ["truncated", "garbled", "empty"])
def test_malformed_batch_body_stores_nothing(broker, client, mangle):
    good = encode_message(Message("TopicMB", b"first", tags="A"))
    second = encode_message(Message("TopicMB", b"second"))
    body = {"truncated": good + second[:-3], "garbled": good + b"\0\0\0\x09garbage!!", "empty": b""}[mangle]
    resp = invoke(client, broker, send_request("TopicMB", body, code=BATCH, batch=True))
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL
    _assert_ext(resp)
    assert max_offset(broker, "TopicMB") == 0


def test_batch_on_a_slave_is_refused_after_its_body_is_checked(tmp_path, client):
    """A slave refuses a batch (SERVICE_NOT_AVAILABLE), but a malformed body is MESSAGE_ILLEGAL first, as on a
    master; nothing is stored either way."""
    with _broker(tmp_path, broker_role="SLAVE", broker_id=1) as b:
        add_topic_config(b, TopicConfig("TopicSlave", 4, 4))
        good = encode_batch([Message("TopicSlave", b"a"), Message("TopicSlave", b"b")])
        for body, code, remark in (
            (good, ResponseCode.SERVICE_NOT_AVAILABLE, "messages are put to the slave"),
            (good[:-3], ResponseCode.MESSAGE_ILLEGAL, "the batch body is malformed: batch block 1 at byte"),
            (b"", ResponseCode.MESSAGE_ILLEGAL, "the batch body holds no message"),
        ):
            resp = invoke(client, b, send_request("TopicSlave", body, code=BATCH, queue_id=0, batch=True))
            assert resp.code == code and remark in (resp.remark or ""), (resp.code, resp.remark)
        assert max_offset(b, "TopicSlave") == 0


def test_batch_refuses_retry_topics_long_topics_and_delay(broker, client):
    body = encode_batch([Message("x", b"a")])
    resp = invoke(client, broker, send_request("%RETRY%G2", body, code=BATCH, batch=True))
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL
    assert "does not support retry group" in resp.remark
    long_topic = "%DLQ%" + "g" * 123  # over 127 characters: no CommitLog record holds it (Apache HEAD: 255, v2)
    resp = invoke(client, broker, send_request(long_topic, body, code=BATCH, batch=True))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "longer than topic max length: 127" in resp.remark
    assert broker.controller.topic_config_manager.select_topic_config(long_topic) is None
    resp = invoke(
        client,
        broker,
        send_request("TopicBD", body, code=BATCH, batch=True, properties=properties_to_string({"DELAY": "1"})),
    )
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL
    assert max_offset(broker, "TopicBD") == 0


# --- the sends of one chunk ----------------------------------------------------------------------------------
def _one_chunk(addr: str, reqs: list[RemotingCommand]) -> dict[int, RemotingCommand]:
    """Every request written with one sendall (the broker reads them as one chunk); the responses by opaque."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5.0) as sock:
        sock.sendall(b"".join(r.encode() for r in reqs))
        out = {}
        for _ in reqs:
            (length,) = struct.unpack(">i", _recv_exactly(sock, 4))
            resp = RemotingCommand.decode_frame(_recv_exactly(sock, length))
            out[resp.opaque] = resp
        return out


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_sends_of_one_chunk_are_stored_in_order_and_answered_each(tmp_path, flush):
    """Single sends read together are stored with one put: each answered with its own queue offset, born
    timestamp and flag kept per send; a refused send in the middle stores nothing and gets its own error; a batch
    send in the middle is stored in its turn; a V1 send (long header names) joins the run."""
    with _broker(tmp_path, flush_disk_type=flush) as b:
        reqs = [
            send_request("TopicChunk", b"s0", born_timestamp=1_700_000_000_000, flag=1),
            send_request("TopicChunk", b"s1", born_timestamp=1_700_000_000_001, flag=2, code=V1),
            send_request("bad topic!", b"refused"),
            send_request("TopicChunk", b"s2", born_timestamp=1_700_000_000_002, reconsume_times=3),
            send_request(
                "TopicChunk",
                encode_batch([Message("TopicChunk", b"b%d" % i) for i in range(2)]),
                code=BATCH,
                batch=True,
            ),
            send_request("TopicChunk", b"s3", properties=properties_to_string({"WAIT": "false", "TAGS": "T"})),
        ]
        resps = _one_chunk(b.address, reqs)
        codes = [resps[r.opaque].code for r in reqs]
        assert codes == [ResponseCode.SUCCESS] * 2 + [ResponseCode.SYSTEM_ERROR] + [ResponseCode.SUCCESS] * 3
        offsets = [resps[r.opaque].ext_fields.get("queueOffset") for r in reqs]
        assert offsets == ["0", "1", None, "2", "3", "5"]
        for r in reqs:
            _assert_ext(resps[r.opaque])
        msgs = stored(b, "TopicChunk")
        assert [m.body for m in msgs] == [b"s0", b"s1", b"s2", b"b0", b"b1", b"s3"]
        assert [m.born_timestamp for m in msgs[:3]] == [1_700_000_000_000, 1_700_000_000_001, 1_700_000_000_002]
        assert [m.flag for m in msgs[:2]] == [1, 2] and msgs[2].reconsume_times == 3
        assert "WAIT" not in msgs[5].properties and msgs[5].tags == "T"
        for m, r in zip(msgs[:3], reqs[:2] + reqs[3:4]):
            assert decode_offset_msg_id(resps[r.opaque].ext_fields["msgId"])[1] == m.commitlog_offset
        assert b.message_store.get_max_offset_in_queue("bad topic!", 0) == 0


@pytest.mark.parametrize("uniq", [True, False])
def test_an_oversized_send_fails_alone_not_its_chunk(tmp_path, uniq):
    """A send whose body is over maxMessageSize is answered MESSAGE_ILLEGAL and stores nothing; the sends read with
    it in the same chunk are stored and answered as if it were not there (plain sends with a UNIQ_KEY, and sends the
    broker gives one)."""
    with _broker(tmp_path, max_message_size=1024) as b:

        def props(i: int) -> str:
            return properties_to_string({"TAGS": "T", **({"UNIQ_KEY": f"{i:032X}"} if uniq else {})})

        reqs = [
            send_request("TopicBig", b"a", properties=props(1)),
            send_request("TopicBig", b"x" * 1025, properties=props(2)),
            send_request("TopicBig", b"b", properties=props(3)),
        ]
        resps = _one_chunk(b.address, reqs)
        codes = [resps[r.opaque].code for r in reqs]
        assert codes == [ResponseCode.SUCCESS, ResponseCode.MESSAGE_ILLEGAL, ResponseCode.SUCCESS]
        assert [m.body for m in stored(b, "TopicBig")] == [b"a", b"b"]


# --- SYNC_FLUSH ----------------------------------------------------------------------------------------------
def test_sync_flush_sends(tmp_path, client):
    with _broker(tmp_path, flush_disk_type="SYNC_FLUSH") as b:
        futs = [client.invoke_async(b.address, send_request("TopicSync", b"s%d" % i), 5.0) for i in range(20)]
        resps = [f.result(10) for f in futs]
        assert all(r.code == ResponseCode.SUCCESS for r in resps), [r.remark for r in resps]
        assert sorted(int(r.ext_fields["queueOffset"]) for r in resps) == list(range(20))
        body = encode_batch([Message("TopicSync", b"b%d" % i) for i in range(3)])
        resp = invoke(client, b, send_request("TopicSync", body, code=BATCH, batch=True))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert resp.ext_fields["queueOffset"] == "20"
        assert sorted(m.body for m in stored(b, "TopicSync")) == sorted(
            [b"s%d" % i for i in range(20)] + [b"b%d" % i for i in range(3)]
        )


def test_born_timestamp_defaults_are_not_invented(broker, client):
    before = int(time.time() * 1000)
    resp = invoke(client, broker, send_request("TopicTs", b"x", born_timestamp=before))
    assert resp.code == ResponseCode.SUCCESS
    [m] = stored(broker, "TopicTs")
    assert m.born_timestamp == before and m.store_timestamp >= before
