"""Queue allocation strategies (no broker): the seed's AVG / AVG_BY_CIRCLE examples, 4.9's input checks, the
consistent-hash ring against answers computed by Apache RocketMQ 4.9.7's own AllocateMessageQueueConsistentHash,
and properties (each queue exactly once across the group, deterministic) over many group shapes."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq_core.client.consumer.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
    ConsistentHashRouter,
    md5_hash,
)
from rmq_core.message import MessageQueue

# 001 §1.1: b1_q0..b1_q3, b2_q0..b2_q3 and consumers C1, C2, C3
SEED_MQS = [MessageQueue("T", b, q) for b in ("b1", "b2") for q in range(4)]
SEED_CIDS = ["c1", "c2", "c3"]


def names(mqs: list[MessageQueue]) -> list[str]:
    return [f"{mq.broker_name}_q{mq.queue_id}" for mq in mqs]


def test_seed_example_avg() -> None:
    s = AllocateMessageQueueAveragely()
    got = {c: names(s.allocate("g", c, SEED_MQS, SEED_CIDS)) for c in SEED_CIDS}
    assert got == {"c1": ["b1_q0", "b1_q1", "b1_q2"], "c2": ["b1_q3", "b2_q0", "b2_q1"], "c3": ["b2_q2", "b2_q3"]}
    assert s.name() == "AVG"


def test_seed_example_avg_by_circle() -> None:
    s = AllocateMessageQueueAveragelyByCircle()
    got = {c: names(s.allocate("g", c, SEED_MQS, SEED_CIDS)) for c in SEED_CIDS}
    assert got == {"c1": ["b1_q0", "b1_q3", "b2_q2"], "c2": ["b1_q1", "b2_q0", "b2_q3"], "c3": ["b1_q2", "b2_q1"]}
    assert s.name() == "AVG_BY_CIRCLE"


def test_more_consumers_than_queues() -> None:
    mqs = SEED_MQS[:2]
    cids = [f"c{i}" for i in range(5)]
    for s in (AllocateMessageQueueAveragely(), AllocateMessageQueueAveragelyByCircle()):
        got = [s.allocate("g", c, mqs, cids) for c in cids]
        assert got == [[mqs[0]], [mqs[1]], [], [], []]


STRATEGIES: list[AllocateMessageQueueStrategy] = [
    AllocateMessageQueueAveragely(),
    AllocateMessageQueueAveragelyByCircle(),
    AllocateMessageQueueConsistentHash(),
    AllocateMessageQueueConsistentHash(3),
]


@pytest.mark.parametrize("s", STRATEGIES, ids=repr)
def test_input_checks_as_4_9(s: AllocateMessageQueueStrategy, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ValueError, match="currentCID is empty"):
        s.allocate("g", "", SEED_MQS, SEED_CIDS)
    with pytest.raises(ValueError, match="mqAll"):
        s.allocate("g", "c1", [], SEED_CIDS)
    with pytest.raises(ValueError, match="cidAll"):
        s.allocate("g", "c1", SEED_MQS, [])
    with caplog.at_level(logging.INFO, logger="rmq_core.client.rebalance"):
        assert s.allocate("grp", "stranger", SEED_MQS, SEED_CIDS) == []
    assert "[BUG]" in caplog.text and "stranger" in caplog.text


# Computed with rocketmq-client-4.9.7.jar: 2 brokers x 8 queues of TopicTest, these 4 client ids (sorted),
# new AllocateMessageQueueConsistentHash(vn).allocate("g", cid, sorted mqs, sorted cids).
JAVA_CIDS = sorted(["127.0.0.1@1001#0", "127.0.0.1@1002#0", "10.0.0.7@42", "192.168.1.20@DEFAULT"])
JAVA_MQS = sorted(MessageQueue("TopicTest", b, i) for b in ("broker-a", "broker-b") for i in range(8))
JAVA_CONSISTENT_HASH = {
    10: {
        "10.0.0.7@42": "broker-a:4 broker-b:2 broker-b:4 broker-b:5 broker-b:6 broker-b:7",
        "127.0.0.1@1001#0": "broker-a:3 broker-a:5 broker-b:0 broker-b:1",
        "127.0.0.1@1002#0": "broker-a:1 broker-a:2 broker-a:6",
        "192.168.1.20@DEFAULT": "broker-a:0 broker-a:7 broker-b:3",
    },
    3: {
        "10.0.0.7@42": "broker-a:0 broker-a:3 broker-a:4 broker-a:5 broker-a:6 broker-b:0 broker-b:2 broker-b:4 "
        "broker-b:6",
        "127.0.0.1@1001#0": "broker-a:2 broker-b:1 broker-b:5 broker-b:7",
        "127.0.0.1@1002#0": "broker-a:1",
        "192.168.1.20@DEFAULT": "broker-a:7 broker-b:3",
    },
}


@pytest.mark.parametrize("vn", [10, 3])
def test_consistent_hash_matches_java(vn: int) -> None:
    s = AllocateMessageQueueConsistentHash() if vn == 10 else AllocateMessageQueueConsistentHash(vn)
    for cid in JAVA_CIDS:
        got = " ".join(f"{mq.broker_name}:{mq.queue_id}" for mq in s.allocate("g", cid, JAVA_MQS, JAVA_CIDS))
        assert got == JAVA_CONSISTENT_HASH[vn][cid], cid
    assert s.name() == "CONSISTENT_HASH"


def test_md5_hash_and_router() -> None:
    # MD5("a") = 0cc175b9c0f1b6a8...: the first four bytes as an unsigned int
    assert md5_hash("a") == 0x0CC175B9
    assert md5_hash("MessageQueue [topic=T, brokerName=b, queueId=0]") >= 0
    assert str(MessageQueue("T", "b", 0)) == "MessageQueue [topic=T, brokerName=b, queueId=0]"
    r = ConsistentHashRouter(["n1", "n2"], 4)
    assert r.existing_replicas("n1") == 4
    assert r.route_node("anything") in ("n1", "n2")
    r.remove_node("n1")
    assert r.route_node("anything") == "n2"
    r.add_node("n2", 2)  # numbered after the existing replicas, as Java
    assert r.existing_replicas("n2") == 6
    assert ConsistentHashRouter([], 10).route_node("x") is None
    with pytest.raises(ValueError):
        AllocateMessageQueueConsistentHash(-1)
    with pytest.raises(ValueError):
        r.add_node("n3", -1)


def test_consistent_hash_custom_function_and_zero_virtual_nodes() -> None:
    s = AllocateMessageQueueConsistentHash(1, hash_function=lambda key: 0 if key.startswith("c2-") else 1 << 40)
    # every queue hashes to 1<<40 → the first ring key >= it is c1's (c2's key 0 is smaller) → all to c1
    assert s.allocate("g", "c1", SEED_MQS, ["c1", "c2"]) == SEED_MQS
    assert s.allocate("g", "c2", SEED_MQS, ["c1", "c2"]) == []
    assert AllocateMessageQueueConsistentHash(0).allocate("g", "c1", SEED_MQS, ["c1"]) == []


def test_by_config() -> None:
    mine = [SEED_MQS[1], SEED_MQS[5]]
    s = AllocateMessageQueueByConfig(mine)
    got = s.allocate("g", "anyone", SEED_MQS, ["other"])
    assert got == mine and s.name() == "CONFIG"
    got.clear()
    assert s.allocate("g", "anyone", SEED_MQS, ["other"]) == mine  # a copy: the configuration is untouched
    with pytest.raises(TypeError):
        AllocateMessageQueueByConfig(["not a queue"])  # type: ignore[list-item]
    assert s.message_queue_list == mine


@settings(max_examples=150, deadline=None)
@given(
    n_brokers=st.integers(1, 4),
    n_queues=st.integers(1, 16),
    n_cids=st.integers(1, 12),
    which=st.integers(0, len(STRATEGIES) - 1),
)
def test_every_queue_exactly_once_and_deterministic(n_brokers: int, n_queues: int, n_cids: int, which: int) -> None:
    s = STRATEGIES[which]
    mqs = sorted(MessageQueue("T", f"broker-{b}", q) for b in range(n_brokers) for q in range(n_queues))
    cids = sorted(f"10.0.0.{i}@{1000 + i}" for i in range(n_cids))
    assignment = {c: s.allocate("g", c, mqs, cids) for c in cids}
    flat = [mq for got in assignment.values() for mq in got]
    assert sorted(flat) == mqs  # every queue once, none twice, none invented
    again = {c: s.allocate("g", c, list(mqs), list(cids)) for c in reversed(cids)}
    assert again == assignment
    if not isinstance(s, AllocateMessageQueueConsistentHash):  # the averaging ones differ by at most one
        sizes = [len(v) for v in assignment.values()]
        assert max(sizes) - min(sizes) <= 1
