"""SEND_BATCH_MESSAGE stored as Apache RocketMQ 4.9.7 stores it: the same batch request (a Java 4.9.7 producer's:
header properties ``WAIT=true`` without a trailing separator, blocks whose properties repeat WAIT, one with a flag, an
empty body, keys and tags) sent to both brokers gives records that are byte for byte the same, apart from the fields
each broker fills in from where it runs (physical offset, born host port, store timestamp, store host), and answers
with the same queue offset and as many msgIds.

Marked ``apache_broker``: needs Java and the jars compat/apache/build.sh fetches."""

from __future__ import annotations

import pytest

from rmq_core.message import Message
from rmq_core.message_encoding import encode_batch
from rmq_core.remoting.codes import RequestCode

from support.apache_records import store_on_both
from support.helpers import masked_record, record_at
from support.send_helpers import send_request

pytestmark = pytest.mark.apache_broker

TOPIC = "BatchBytesTopic"


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


def test_batch_records_are_apache_s_bytes(tmp_path):
    both = store_on_both(str(tmp_path), [_batch_request()])
    (ours,), (theirs,) = both.ours, both.theirs
    assert ours["queueOffset"] == theirs["queueOffset"] == "0"
    ours_records = [record_at(both.our_commit_log, i) for i in ours["msgId"].split(",")]
    theirs_records = [record_at(both.their_commit_log, i) for i in theirs["msgId"].split(",")]
    assert len(ours_records) == len(theirs_records) == 3
    for mine, apache_record in zip(ours_records, theirs_records):
        assert masked_record(mine) == masked_record(apache_record)
