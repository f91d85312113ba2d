"""SEND_BATCH_MESSAGE stored as Apache RocketMQ 4.9.7 stores it: the same batch request (a Java 4.9.7 producer's:
header properties ``WAIT=true`` without a trailing separator, blocks whose properties repeat WAIT, one with a flag, an
empty body, keys and tags) sent to both brokers gives records that are byte for byte the same, apart from the fields
each broker fills in from where it runs (physical offset, born host port, store timestamp, store host), and answers
with the same queue offset and as many msgIds.

Marked ``apache_broker``: needs Java and the jars compat/apache/build.sh fetches."""

from __future__ import annotations

import os
import struct

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.message import Message, decode_offset_msg_id
from rmq_core.message_encoding import encode_batch
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.transport import BlockingRemotingClient

from support.apache_rocketmq import ApacheRocketMQ
from support.send_helpers import SMALL_FILES, send_request

pytestmark = pytest.mark.apache_broker

TOPIC = "BatchBytesTopic"
# IPv4 record fields a broker fills in from where it runs: PHYSICALOFFSET, BORNHOST (the client's port differs),
# STORETIMESTAMP, STOREHOST
_OWN_FIELDS = ((28, 36), (48, 56), (56, 64), (64, 72))


def _batch_request():
    msgs = [
        Message(
            TOPIC, b"first", tags="TagA", keys=["k1", "k2"], properties={"UNIQ_KEY": "0A0B0C0D00001", "WAIT": "true"}
        ),
        Message(TOPIC, b"", flag=7, properties={"UNIQ_KEY": "0A0B0C0D00002", "WAIT": "true"}),
        Message(TOPIC, b"x" * 1000, properties={"UNIQ_KEY": "0A0B0C0D00003", "WAIT": "true", "a": "b"}),
    ]
    return send_request(
        TOPIC,
        encode_batch(msgs, trailing_separator=False),
        code=RequestCode.SEND_BATCH_MESSAGE,
        queue_id=0,
        properties="WAIT\x01true",
        batch=True,
        born_timestamp=1_700_000_000_123,
    )


def _masked(record: bytes) -> bytes:
    out = bytearray(record)
    for start, end in _OWN_FIELDS:
        out[start:end] = bytes(end - start)
    return bytes(out)


def _records_in(commit_log: bytes, msg_ids: str) -> list[bytes]:
    out = []
    for msg_id in msg_ids.split(","):
        offset = decode_offset_msg_id(msg_id)[1]
        (total,) = struct.unpack_from(">i", commit_log, offset)
        out.append(commit_log[offset : offset + total])
    return out


def test_batch_records_are_apache_s_bytes(tmp_path):
    apache = ApacheRocketMQ(str(tmp_path / "apache"))
    config = BrokerConfig(listen_port=0, store_path_root_dir=str(tmp_path / "rmq"), **SMALL_FILES)
    with Broker(config) as broker, BlockingRemotingClient() as client:
        apache.start()
        try:
            answers = {}
            for name, addr in (("rmq_core", broker.address), ("apache", apache.broker_addr)):
                resp = client.invoke_sync(addr, _batch_request(), timeout=10.0)
                assert resp.code == ResponseCode.SUCCESS, (name, resp.remark)
                answers[name] = resp.ext_fields
            ours = broker.message_store.read_commit_log(0, broker.message_store.max_physical_offset)
            assert ours is not None
        finally:
            apache.stop()
    commit_log_dir = apache.commit_log_dir
    with open(os.path.join(commit_log_dir, sorted(os.listdir(commit_log_dir))[0]), "rb") as f:
        theirs = f.read()
    assert answers["rmq_core"]["queueOffset"] == answers["apache"]["queueOffset"] == "0"
    ours_records = _records_in(ours, answers["rmq_core"]["msgId"])
    theirs_records = _records_in(theirs, answers["apache"]["msgId"])
    assert len(ours_records) == len(theirs_records) == 3
    for mine, apache_record in zip(ours_records, theirs_records):
        assert _masked(mine) == _masked(apache_record)
