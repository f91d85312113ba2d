"""Issue 28's forbidden-topic rules with Apache RocketMQ 4.9.7 as the control: the same raw requests to Apache's broker
and to rmq_core's, the same answers where rmq_core follows Apache (SELF_TEST_TOPIC and the schedule topic forbidden
with NO_PERMISSION and Apache's remark; a topic over 127 characters or with a trailing newline, an offset beyond a
long and a queue id beyond an int refused as errors) and, where rmq_core closes a hole on purpose, the hole measured on
Apache: a send to ``rmq_sys_wheel_timer`` is accepted, and END_TRANSACTION COMMIT naming an ordinary message that
carries ``PGROUP``/``REAL_TOPIC``/``REAL_QID`` writes it to ``REAL_TOPIC``; rmq_core refuses both."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.message import decode_offset_msg_id
from rmq_core.message_encoding import properties_to_string
from rmq_core.remoting.codes import RequestCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    EndTransactionRequestHeader,
    GetMaxOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    encode_header,
)

from support.apache_rocketmq import ApacheRocketMQ
from support.java_compat import require_java
from support.send_helpers import SMALL_FILES, send_request

pytestmark = pytest.mark.apache_broker

VICTIM = "ForbiddenVictim"


@pytest.fixture(scope="module")
def apache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_java()
    with ApacheRocketMQ(str(tmp_path_factory.mktemp("apache-forbidden"))) as server:
        yield server.broker_addr


@pytest.fixture(scope="module")
def rmq_core(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("rmq-forbidden")
    with Broker(BrokerConfig(listen_port=0, store_path_root_dir=str(root / "store"), **SMALL_FILES)) as b:
        yield b.address


def _answers(addr: str, client: Any) -> dict[str, tuple[int, str | None]]:
    def call(req: RemotingCommand) -> RemotingCommand:
        return client.invoke_sync(addr, req, timeout=10.0)

    def offset_update(queue_id: str, offset: str) -> RemotingCommand:
        ext = encode_header(UpdateConsumerOffsetRequestHeader(consumerGroup="G", topic="T", queueId=0, commitOffset=0))
        ext.update(queueId=queue_id, commitOffset=offset)
        return RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext)

    out: dict[str, tuple[int, str | None]] = {}
    for name, req in (
        ("self_test", send_request("SELF_TEST_TOPIC", b"x")),
        ("schedule", send_request("SCHEDULE_TOPIC_XXXX", b"x")),
        ("too_long", send_request("T" * 128, b"x")),
        ("newline", send_request("Topic\n", b"x")),
        ("timer", send_request("rmq_sys_wheel_timer", b"x", properties=properties_to_string({"REAL_TOPIC": VICTIM}))),
        ("offset_beyond_long", offset_update("0", str(10**30))),
        ("queue_beyond_int", offset_update(str(1 << 31), "1")),
    ):
        r = call(req)
        out[name] = (r.code, r.remark)
    forged = properties_to_string({"PGROUP": "PG", "REAL_TOPIC": VICTIM, "REAL_QID": "0"})
    sent = call(send_request("ForbiddenPlain", b"forged", properties=forged))
    assert sent.code == 0, sent.remark
    header = EndTransactionRequestHeader(
        producerGroup="PG",
        tranStateTableOffset=int(sent.ext_fields["queueOffset"]),
        commitLogOffset=decode_offset_msg_id(sent.ext_fields["msgId"])[1],
        commitOrRollback=8,
        fromTransactionCheck=False,
        msgId="M",
    )
    r = call(RemotingCommand.request(RequestCode.END_TRANSACTION, encode_header(header)))
    out["forged_commit"] = (r.code, r.remark)
    r = call(RemotingCommand.request(RequestCode.GET_MAX_OFFSET, encode_header(GetMaxOffsetRequestHeader(VICTIM, 0))))
    out["victim_max_offset"] = (r.code, r.ext_fields.get("offset"))
    return out


SAME_ANSWERS = {
    "self_test": (16, "Sending message to topic[SELF_TEST_TOPIC] is forbidden."),  # NO_PERMISSION
    "schedule": (16, "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden."),
}
SAME_CODES = {"too_long": 1, "newline": 1, "offset_beyond_long": 1, "queue_beyond_int": 1}  # SYSTEM_ERROR


def test_apache_4_9_7(apache: str, client: Any) -> None:
    got = _answers(apache, client)
    for name, answer in SAME_ANSWERS.items():
        assert got[name] == answer, name
    for name, code in SAME_CODES.items():
        assert got[name][0] == code, (name, got[name])
    # the holes rmq_core closes: the timer topic takes the send, the forged commit lands in REAL_TOPIC
    assert got["timer"][0] == 0 and got["forged_commit"] == (0, None)
    assert got["victim_max_offset"] == (0, "1")


def test_rmq_core(rmq_core: str, client: Any) -> None:
    got = _answers(rmq_core, client)
    for name, answer in SAME_ANSWERS.items():
        assert got[name] == answer, name
    for name, code in SAME_CODES.items():
        assert got[name][0] == code, (name, got[name])
    assert got["timer"] == (16, "Sending message to topic[rmq_sys_wheel_timer] is forbidden.")
    assert got["forged_commit"] == (1, "Find prepared transaction message failed")
    assert got["victim_max_offset"] == (0, "0")
