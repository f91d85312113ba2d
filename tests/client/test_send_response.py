"""``MQClientAPIImpl.process_send_response``: a send's answer → ``SendResult`` (or the broker's error), read straight
from extFields on the common path and through ``decode_header`` for anything else, with the same result or error
either way; the queue the send went to is the result's queue when the broker stored it there."""

from __future__ import annotations

import pytest

from rmq_core.client.client_config import ClientConfig
from rmq_core.client.exceptions import MQBrokerException
from rmq_core.client.message_batch import MessageBatch
from rmq_core.client.mq_client_api import MQClientAPIImpl
from rmq_core.client.send_result import SendStatus
from rmq_core.message import UNIQ_KEY, Message, MessageQueue
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import HeaderError, SendMessageResponseHeader, decode_header

API = MQClientAPIImpl(None, ClientConfig())  # type: ignore[arg-type]
EXT = {"msgId": "7F00000100002A9F0000000000001234", "queueId": "3", "queueOffset": "123456"}


def answer(code: int = ResponseCode.SUCCESS, **ext: str) -> RemotingCommand:
    return RemotingCommand(code, language="JAVA", opaque=5, flag=1, remark="why", ext_fields=ext)


def msg() -> Message:
    m = Message("T", b"x")
    m.properties[UNIQ_KEY] = "U1"
    return m


def test_a_stored_send_reuses_the_queue_it_went_to() -> None:
    mq = MessageQueue("T", "b", 3)
    r = API.process_send_response(
        "b", msg(), answer(**EXT, MSG_REGION="R", TRACE_ON="false", transactionId="t"), "a", mq
    )
    assert r.message_queue is mq
    assert (r.send_status, r.msg_id, r.offset_msg_id, r.queue_offset) == (
        SendStatus.SEND_OK,
        "U1",
        EXT["msgId"],
        123456,
    )
    assert (r.region_id, r.trace_on, r.transaction_id) == ("R", False, "t")
    other = API.process_send_response("b", msg(), answer(**{**EXT, "queueId": "2"}), "a", mq)
    assert other.message_queue == MessageQueue("T", "b", 2) and other.message_queue is not mq
    assert (other.region_id, other.trace_on, other.transaction_id) == ("DefaultRegion", True, None)
    assert API.process_send_response("b", msg(), answer(**EXT), "a").message_queue == MessageQueue("T", "b", 3)


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ResponseCode.FLUSH_DISK_TIMEOUT, SendStatus.FLUSH_DISK_TIMEOUT),
        (ResponseCode.FLUSH_SLAVE_TIMEOUT, SendStatus.FLUSH_SLAVE_TIMEOUT),
        (ResponseCode.SLAVE_NOT_AVAILABLE, SendStatus.SLAVE_NOT_AVAILABLE),
    ],
)
def test_the_other_stored_statuses(code: int, status: SendStatus) -> None:
    assert API.process_send_response("b", msg(), answer(code, **EXT), "a").send_status is status


def test_any_other_code_is_the_brokers_error() -> None:
    with pytest.raises(MQBrokerException) as e:
        API.process_send_response("b", msg(), answer(ResponseCode.SYSTEM_ERROR, **EXT), "addr")
    assert e.value.response_code == ResponseCode.SYSTEM_ERROR and "why" in str(e.value)


@pytest.mark.parametrize(
    "ext",
    [
        {"queueId": "3", "queueOffset": "1"},
        {"msgId": "m", "queueOffset": "1"},
        {"msgId": "m", "queueId": "3"},
        {"msgId": "m", "queueId": "x", "queueOffset": "1"},
        {"msgId": "m", "queueId": "3", "queueOffset": "1.5"},
    ],
)
def test_a_header_decode_header_refuses_raises_its_error(ext: dict[str, str]) -> None:
    with pytest.raises(HeaderError) as expected:
        decode_header(SendMessageResponseHeader, ext)
    with pytest.raises(HeaderError) as got:
        API.process_send_response("b", msg(), answer(**ext), "a")
    assert str(got.value) == str(expected.value)


def test_what_int_reads_is_read_as_decode_header_reads_it() -> None:
    ext = {"msgId": "m", "queueId": " 3 ", "queueOffset": "1_000"}
    h = decode_header(SendMessageResponseHeader, ext)
    r = API.process_send_response("b", msg(), answer(**ext), "a")
    assert (r.message_queue.queue_id, r.queue_offset) == (h.queueId, h.queueOffset) == (3, 1000)


def test_a_batch_answers_its_uniq_keys_joined() -> None:
    ms = [msg(), Message("T", b"y", properties={UNIQ_KEY: "U2"})]
    batch = MessageBatch.generate_from_list(ms)
    assert API.process_send_response("b", batch, answer(**EXT), "a").msg_id == "U1,U2"
