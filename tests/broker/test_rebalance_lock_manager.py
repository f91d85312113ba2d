"""RebalanceLockManager: batch locking of message queues per consumer group, refresh by the holder, 60 s expiry
(injected clock), take-over of expired locks, unlock only by the holder; and the lock-batch JSON bodies."""

from __future__ import annotations

import json

import pytest

from rmq_core.broker.client.rebalance_lock_manager import (
    REBALANCE_LOCK_MAX_LIVE_TIME_MS,
    RebalanceLockManager,
)
from rmq_core.message import MessageQueue
from rmq_core.remoting.body.lock_batch import (
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)

Q0, Q1, Q2 = (MessageQueue("T", "broker-a", i) for i in range(3))


def test_default_expiry_is_rocketmq_s():
    assert REBALANCE_LOCK_MAX_LIVE_TIME_MS == 60_000
    assert RebalanceLockManager().lock_max_live_time_ms == 60_000


def test_free_queues_are_granted():
    m = RebalanceLockManager()
    assert m.try_lock_batch("g", {Q0, Q1}, "c1", now_ms=1_000) == {Q0, Q1}
    assert m.is_locked("g", Q0, "c1", now_ms=1_000)
    assert not m.is_locked("g", Q0, "c2", now_ms=1_000)
    assert not m.is_locked("g", Q2, "c1", now_ms=1_000)


def test_other_client_cannot_take_an_unexpired_lock():
    m = RebalanceLockManager()
    m.try_lock_batch("g", {Q0, Q1}, "c1", now_ms=1_000)
    assert m.try_lock_batch("g", {Q0, Q1, Q2}, "c2", now_ms=61_000) == {Q2}  # 60 s exactly: still held
    assert m.mq_lock_table["g"][Q0].client_id == "c1"


def test_expired_lock_is_taken_over():
    m = RebalanceLockManager()
    m.try_lock_batch("g", {Q0}, "c1", now_ms=1_000)
    assert m.try_lock_batch("g", {Q0}, "c2", now_ms=61_001) == {Q0}
    assert m.is_locked("g", Q0, "c2", now_ms=61_001)
    assert not m.is_locked("g", Q0, "c1", now_ms=61_001)


def test_relocking_refreshes_the_lock():
    m = RebalanceLockManager()
    m.try_lock_batch("g", {Q0}, "c1", now_ms=0)
    for t in range(20_000, 200_001, 20_000):  # the client re-locks every 20 s
        assert m.try_lock_batch("g", {Q0}, "c1", now_ms=t) == {Q0}
        assert m.try_lock_batch("g", {Q0}, "c2", now_ms=t + 1) == set()


def test_holder_relocking_its_own_expired_lock_gets_it_back():
    m = RebalanceLockManager()
    m.try_lock_batch("g", {Q0}, "c1", now_ms=0)
    assert m.try_lock_batch("g", {Q0}, "c1", now_ms=100_000) == {Q0}
    assert m.mq_lock_table["g"][Q0].last_update_timestamp == 100_000


def test_groups_are_independent():
    m = RebalanceLockManager()
    assert m.try_lock_batch("g1", {Q0}, "c1", now_ms=0) == {Q0}
    assert m.try_lock_batch("g2", {Q0}, "c2", now_ms=0) == {Q0}


def test_unlock_only_by_the_holder():
    m = RebalanceLockManager()
    m.try_lock_batch("g", {Q0, Q1}, "c1", now_ms=0)
    m.unlock_batch("g", {Q0, Q1}, "c2")  # not the holder: nothing released
    assert m.try_lock_batch("g", {Q0, Q1}, "c2", now_ms=1) == set()
    m.unlock_batch("g", {Q0}, "c1")
    assert m.try_lock_batch("g", {Q0, Q1}, "c2", now_ms=2) == {Q0}
    m.unlock_batch("nogroup", {Q0}, "c1")  # unknown group: nothing happens
    m.unlock_batch("g", {Q2}, "c1")  # unlocked queue: nothing happens
    assert m.mq_lock_table["g"][Q1].client_id == "c1"


def test_is_lock_all_expired():
    m = RebalanceLockManager(lock_max_live_time_ms=1_000)
    assert m.is_lock_all_expired("g", now_ms=0)
    m.try_lock_batch("g", {Q0}, "c1", now_ms=0)
    m.try_lock_batch("g", {Q1}, "c1", now_ms=500)
    assert not m.is_lock_all_expired("g", now_ms=1_001)
    assert m.is_lock_all_expired("g", now_ms=1_501)


def test_try_lock_single():
    m = RebalanceLockManager()
    assert m.try_lock("g", Q0, "c1", now_ms=0)
    assert not m.try_lock("g", Q0, "c2", now_ms=10)


# ------------------------------------------------------------------------------------------------ bodies ----


def test_lock_request_body_as_java_sends_it():
    java = (
        '{"clientId":"10.0.0.1@4242#123","consumerGroup":"og","mqSet":[{"brokerName":"broker-a","queueId":0,'
        '"topic":"T"},{"brokerName":"broker-a","queueId":1,"topic":"T"}]}'
    )  # 4.9: no onlyThisBroker
    body = LockBatchRequestBody.decode(java.encode())
    assert body.consumer_group == "og" and body.client_id == "10.0.0.1@4242#123"
    assert body.mq_set == {Q0, Q1} and body.only_this_broker is False
    five = json.loads(java)
    five["onlyThisBroker"] = True
    assert LockBatchRequestBody.decode(json.dumps(five)).only_this_broker is True
    unlock = UnlockBatchRequestBody.decode(java)
    assert isinstance(unlock, UnlockBatchRequestBody) and unlock.mq_set == {Q0, Q1}


def test_lock_bodies_round_trip():
    req = LockBatchRequestBody("og", "cid", {Q2, Q0}, True)
    d = json.loads(req.encode())
    assert d == {
        "clientId": "cid",
        "consumerGroup": "og",
        "onlyThisBroker": True,
        "mqSet": [
            {"brokerName": "broker-a", "queueId": 0, "topic": "T"},
            {"brokerName": "broker-a", "queueId": 2, "topic": "T"},
        ],
    }
    assert LockBatchRequestBody.decode(req.encode()) == req
    resp = LockBatchResponseBody({Q1})
    assert json.loads(resp.encode()) == {"lockOKMQSet": [{"brokerName": "broker-a", "queueId": 1, "topic": "T"}]}
    assert LockBatchResponseBody.decode(resp.encode()).lock_ok_mq_set == {Q1}
    assert LockBatchResponseBody.decode(b"{}").lock_ok_mq_set == set()


@pytest.mark.parametrize(
    "bad",
    [
        b"not json",
        b"[]",
        b'{"mqSet": {}}',
        b'{"mqSet": [{"topic": "T", "brokerName": "b"}]}',
        b'{"mqSet": [{"topic": "T", "brokerName": "b", "queueId": "x"}]}',
        b'{"consumerGroup": 5}',
        b'{"mqSet": [7]}',
    ],
)
def test_bad_lock_bodies_raise_value_error(bad):
    with pytest.raises(ValueError):
        LockBatchRequestBody.decode(bad)
