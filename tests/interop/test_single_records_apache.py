"""SEND_MESSAGE_V2 (single sends) stored as Apache RocketMQ 4.9.7 stores them: the same requests sent to both brokers
give records that are byte for byte the same, apart from the fields each broker fills in from where it runs
(physical offset, born host port, store timestamp, store host). The property strings are the point: 4.9.7's
``SendMessageProcessor`` decodes the header's properties into a ``HashMap``, puts CLUSTER, removes WAIT and writes
the map back with ``messageProperties2String`` (HashMap order, no ``\\x02`` after the last entry); a delayed message
is written again by ``CommitLog.asyncPutMessage`` (REAL_TOPIC, REAL_QID, and WAIT, put back by then) and a half
message by ``TransactionalMessageBridge.parseHalfMessageInner``. The sends cover both of rmq_core's paths: the
engine's plain path (at most 16 properties, WAIT not false) and the processor's general one (more properties,
WAIT=false, a delay level, a transaction, a retry topic).

Marked ``apache_broker``: needs Java and the jars compat/apache/build.sh fetches."""

from __future__ import annotations

import pytest

from rmq_core.message_encoding import properties_to_string

from support.apache_records import store_on_both
from support.helpers import masked_record, record_at, stored_properties
from support.send_helpers import send_request

pytestmark = pytest.mark.apache_broker

TOPIC = "SingleBytesTopic"
PREPARED = 0x4  # MessageSysFlag.TRANSACTION_PREPARED_TYPE


def _user(n: int) -> dict[str, str]:
    return {f"user{i}": f"value-{i}" for i in range(n)}


def _uniq(i: int) -> dict[str, str]:
    return {"UNIQ_KEY": f"0A0B0C0D0000{i:04X}"}


# (name, topic, properties as the producer writes them, trailing separator, sys flag)
SENDS = [
    ("tags, keys", TOPIC, {"KEYS": "k1 k2", "TAGS": "TagA", **_uniq(1), "WAIT": "true"}, False, 0),
    ("trailing separator", TOPIC, {"TAGS": "TagB", **_uniq(2), "WAIT": "true", "a": "b"}, True, 0),
    ("no WAIT", TOPIC, {**_uniq(3), "TAGS": "TagC", **_user(2)}, False, 0),
    ("10 user properties", TOPIC, {"TAGS": "T", **_uniq(4), "WAIT": "true", **_user(8)}, False, 0),
    # 12 names with CLUSTER (WAIT counted): the table of 16 is full; 13: it doubles to 32 before WAIT is removed
    ("12 in the map", TOPIC, {"TAGS": "T", **_uniq(5), "WAIT": "true", **_user(8)}, False, 0),
    ("13 in the map", TOPIC, {"TAGS": "T", **_uniq(6), "WAIT": "true", **_user(9)}, False, 0),
    ("16 properties", TOPIC, {"TAGS": "T", "KEYS": "K", **_uniq(7), "WAIT": "true", **_user(12)}, False, 0),
    # more than 16 (rmq_core's general path), a table of 64
    ("40 properties", TOPIC, {"TAGS": "T", **_uniq(8), "WAIT": "true", **_user(37)}, False, 0),
    ("WAIT=false", TOPIC, {"TAGS": "T", **_uniq(9), "WAIT": "false", **_user(3)}, False, 0),
    ("delay level", TOPIC, {"TAGS": "T", **_uniq(10), "WAIT": "true", "DELAY": "2", **_user(4)}, False, 0),
    ("delay, many", TOPIC, {"TAGS": "T", **_uniq(11), "WAIT": "true", "DELAY": "3", **_user(11)}, False, 0),
    (
        "half message",
        TOPIC,
        {"TAGS": "T", **_uniq(12), "WAIT": "true", "TRAN_MSG": "true", "PGROUP": "PG"},
        False,
        PREPARED,
    ),
    ("retry topic", "%RETRY%RetryGroup", {**_uniq(13), "WAIT": "true", "RETRY_TOPIC": TOPIC, **_user(3)}, False, 0),
]
# the sends whose properties 4.9.7 writes again after putting WAIT back (a delay, a half message): WAIT stored
_REWRITTEN = {"delay level", "delay, many", "half message"}


def _request(topic: str, props: dict[str, str], trailing: bool, sys_flag: int):
    return send_request(
        topic,
        b"body of " + topic.encode(),
        queue_id=0,
        properties=properties_to_string(props, trailing_separator=trailing),
        sys_flag=sys_flag,
        born_timestamp=1_700_000_000_321,
        reconsume_times=0,
        max_reconsume_times=16,
    )


def test_single_send_records_are_apache_s_bytes(tmp_path):
    both = store_on_both(str(tmp_path), [_request(topic, p, trailing, flag) for _, topic, p, trailing, flag in SENDS])
    for (name, *_), mine, apache_answer in zip(SENDS, both.ours, both.theirs):
        assert mine["queueOffset"] == apache_answer["queueOffset"], name
        ours_record = record_at(both.our_commit_log, mine["msgId"])
        theirs_record = record_at(both.their_commit_log, apache_answer["msgId"])
        assert stored_properties(ours_record) == stored_properties(theirs_record), name
        assert (b"WAIT\x01" in stored_properties(theirs_record)) == (name in _REWRITTEN), name
        assert masked_record(ours_record) == masked_record(theirs_record), name
