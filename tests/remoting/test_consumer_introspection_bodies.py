"""The bodies a consumer answers the broker's introspection with (rmq_core.remoting.body.consumer_running_info,
GetConsumerStatusBody's client side): JSON field names as 4.9's fastjson writes them (alphabetical, getters' names,
MessageQueue objects as map keys), read back the same, and the CMResult a listener's answer maps to
(rmq_core.client.consumer.consume_directly)."""

from __future__ import annotations

import json

import pytest

from rmq_core.client.consumer.consume_directly import cm_result, exception_desc, run_directly
from rmq_core.client.consumer.listener import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
from rmq_core.filter.subscription_data import build_subscription_data
from rmq_core.message import MessageQueue
from rmq_core.remoting import fastjson
from rmq_core.remoting.body.consumer_running_info import (
    CMResult,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    ConsumeStatus,
    ProcessQueueInfo,
)
from rmq_core.remoting.body.queue_offsets import GetConsumerStatusBody
from rmq_core.remoting.body.route import BodyDecodeError

MQ0 = MessageQueue("T", "broker-a", 0)
MQ1 = MessageQueue("T", "broker-a", 1)


def test_consumer_running_info_as_fastjson_writes_it() -> None:
    info = ConsumerRunningInfo(
        properties={"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "consumerGroup": "G"},
        subscription_set=[build_subscription_data("T", "a || b")],
        mq_table={MQ1: ProcessQueueInfo(commit_offset=7, dropped=True), MQ0: ProcessQueueInfo(commit_offset=3)},
        status_table={"T": ConsumeStatus(pull_rt=1.5, consume_ok_tps=2.0, consume_failed_msgs=4)},
    )
    text = info.encode().decode()
    assert text.startswith('{"mqTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"cachedMsgCount":0,')
    entries = fastjson.map_items(fastjson.raw_field(text, "mqTable") or "")
    assert [MessageQueue(k["topic"], k["brokerName"], k["queueId"]) for k, _ in entries] == [MQ0, MQ1]
    pq_fields = entries[1][1]
    assert list(pq_fields) == sorted(pq_fields)
    assert set(pq_fields) == {
        "cachedMsgCount", "cachedMsgMaxOffset", "cachedMsgMinOffset", "cachedMsgSizeInMiB", "commitOffset", "droped",
        "lastConsumeTimestamp", "lastLockTimestamp", "lastPullTimestamp", "locked", "transactionMsgCount",
        "transactionMsgMaxOffset", "transactionMsgMinOffset", "tryUnlockTimes",
    }  # fmt: skip
    assert pq_fields["droped"] is True and pq_fields["commitOffset"] == 7
    status = json.loads(fastjson.raw_field(text, "statusTable") or "")["T"]
    assert list(status) == ["consumeFailedMsgs", "consumeFailedTPS", "consumeOKTPS", "consumeRT", "pullRT", "pullTPS"]
    assert status["consumeFailedMsgs"] == 4 and status["pullRT"] == 1.5
    sub = json.loads(fastjson.raw_field(text, "subscriptionSet") or "")[0]
    assert sub["topic"] == "T" and sorted(sub["tagsSet"]) == ["a", "b"] and sub["subString"] == "a || b"
    assert "jstack" not in text  # null fields are left out, as fastjson does
    back = ConsumerRunningInfo.decode(text)
    assert back.properties == info.properties and back.mq_table == info.mq_table
    assert back.status_table == info.status_table and [s.topic for s in back.subscription_set] == ["T"]
    info.jstack = "Thread: main\n"
    assert ConsumerRunningInfo.decode(info.encode()).jstack == "Thread: main\n"


def test_consumer_running_info_refuses_a_bad_body() -> None:
    with pytest.raises(BodyDecodeError):
        ConsumerRunningInfo.decode('{"mqTable":{{"topic":"T"}:{}}}')


def test_consume_message_directly_result() -> None:
    r = ConsumeMessageDirectlyResult(
        order=True, auto_commit=False, consume_result=CMResult.CR_LATER, spent_time_mills=5
    )
    text = r.encode().decode()
    assert text == '{"autoCommit":false,"consumeResult":"CR_LATER","order":true,"spentTimeMills":5}'
    assert ConsumeMessageDirectlyResult.decode(text) == r
    r.remark = "ValueError: x"
    assert json.loads(r.encode())["remark"] == "ValueError: x"
    with pytest.raises(BodyDecodeError):
        ConsumeMessageDirectlyResult.decode('{"consumeResult":"CR_NOPE"}')


def test_get_consumer_status_body_of_a_client() -> None:
    body = GetConsumerStatusBody(message_queue_table={MQ1: 9, MQ0: 4}).encode().decode()
    assert body == (
        '{"consumerTable":{},"messageQueueTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:4,'
        '{"brokerName":"broker-a","queueId":1,"topic":"T"}:9}}'
    )
    assert GetConsumerStatusBody.decode_message_queue_table(body) == {MQ0: 4, MQ1: 9}


@pytest.mark.parametrize(
    ("status", "orderly", "expected"),
    [
        (ConsumeConcurrentlyStatus.CONSUME_SUCCESS, False, CMResult.CR_SUCCESS),
        (ConsumeConcurrentlyStatus.RECONSUME_LATER, False, CMResult.CR_LATER),
        ("CONSUME_SUCCESS", False, CMResult.CR_SUCCESS),
        (None, False, CMResult.CR_RETURN_NULL),
        (ConsumeOrderlyStatus.SUCCESS, True, CMResult.CR_SUCCESS),
        (ConsumeOrderlyStatus.COMMIT, True, CMResult.CR_COMMIT),
        (ConsumeOrderlyStatus.ROLLBACK, True, CMResult.CR_ROLLBACK),
        (ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, True, CMResult.CR_LATER),
        (None, True, CMResult.CR_RETURN_NULL),
    ],
)
def test_cm_result_of_a_listener_answer(status: object, orderly: bool, expected: CMResult) -> None:
    assert cm_result(status, orderly) is expected


def test_run_directly_times_the_call_and_reports_an_exception() -> None:
    def boom() -> object:
        raise ValueError("bad message")

    r = run_directly(boom, False, lambda: True)
    assert r.consume_result is CMResult.CR_THROW_EXCEPTION and r.remark is not None
    assert r.remark.startswith("ValueError: bad message, ") and __file__ in r.remark
    ok = run_directly(lambda: ConsumeOrderlyStatus.SUCCESS, True, lambda: False)
    assert ok.consume_result is CMResult.CR_SUCCESS and ok.order and not ok.auto_commit and ok.spent_time_mills >= 0
    assert exception_desc(KeyError("k")) == "KeyError: 'k'"
