"""RocketMQ's 5.x Python SDK SimpleConsumer (PyPI rocketmq-python-client) receiving from an rmq_core broker's gRPC
endpoint over the broker's POP, no proxy: messages the SDK's Producer sent arrive with their message id, tag, keys
and properties and delivery attempt 1; acked ones never come back; unacked ones come back with attempt 2 after the
invisible time; a changed invisible duration postpones the redelivery; acking an expired handle fails; an empty
long poll returns nothing and a message sent during the poll is received at once. Needs the broker's POP service
(broker/pop/) and the SDK's venv (see test_grpc_producer.py)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

pytest.importorskip("grpc", reason="the rmq_core[grpc] extra (grpcio) is not installed")

from rmq_core.client import Producer
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.message import Message

from support.admin_helpers import create_subscription_group
from support.grpc5_helpers import endpoint, needs_sdk, sdk, topic

pytestmark = needs_sdk


INVISIBLE_S = 10  # Apache's least invisible time for a receive (minInvisibleTimeMillsForRecv)


def _send(c: Any, name: str, specs: list[dict[str, Any]]) -> list[str]:
    return [s["message_id"] for s in sdk(endpoint(c), "produce", {"topic": name, "messages": specs})["sent"]]


def test_receive_ack_and_no_redelivery(grpc_cluster):
    c = grpc_cluster
    topic(c, "SimpleAck")
    specs = [{"body": f"m{i}", "tag": "TagA", "keys": [f"k{i}"], "properties": {"n": str(i)}} for i in range(5)]
    ids = _send(c, "SimpleAck", specs)
    steps = [
        {"op": "receive", "until": 5, "invisible_s": INVISIBLE_S, "then": "ack", "timeout_s": 30},
        {"op": "sleep", "s": INVISIBLE_S + 3},
        {"op": "receive", "until": 1, "invisible_s": INVISIBLE_S, "timeout_s": 4},
    ]
    r = sdk(endpoint(c), "simple", {"topic": "SimpleAck", "group": "simple_ack_cg", "await_s": 2, "steps": steps})
    first, _, after = r["steps"]
    got = {m["message_id"]: m for m in first["messages"]}
    assert set(got) == set(ids)
    for spec, mid in zip(specs, ids):
        m = got[mid]
        assert (m["body"], m["tag"], m["keys"], m["attempt"]) == (spec["body"], "TagA", spec["keys"], 1)
        assert m["properties"]["n"] == spec["properties"]["n"]
    assert after["messages"] == []  # acked: never again


def test_unacked_redelivered_with_attempt_2_and_expired_ack_fails(grpc_cluster):
    c = grpc_cluster
    topic(c, "SimpleRetry")
    (mid,) = _send(c, "SimpleRetry", [{"body": "again", "tag": "T"}])
    steps = [
        {"op": "receive", "until": 1, "invisible_s": INVISIBLE_S, "timeout_s": 30},  # not acked
        {"op": "receive", "until": 1, "invisible_s": INVISIBLE_S, "timeout_s": 40, "then": "ack"},
        {"op": "sleep", "s": 1},
    ]
    r = sdk(endpoint(c), "simple", {"topic": "SimpleRetry", "group": "simple_retry_cg", "await_s": 5, "steps": steps})
    first, second, _ = r["steps"]
    assert [(m["message_id"], m["attempt"]) for m in first["messages"]] == [(mid, 1)]
    assert [(m["message_id"], m["attempt"], m["body"]) for m in second["messages"]] == [(mid, 2, "again")]
    assert second["took_s"] >= INVISIBLE_S - 2  # not before the invisible time ran out


def test_change_invisible_duration_postpones_redelivery(grpc_cluster):
    c = grpc_cluster
    topic(c, "SimpleChange")
    (mid,) = _send(c, "SimpleChange", [{"body": "later"}])
    steps = [
        {"op": "receive", "until": 1, "invisible_s": INVISIBLE_S, "then": "change", "change_s": 20, "timeout_s": 30},
        {"op": "receive", "until": 1, "invisible_s": INVISIBLE_S, "timeout_s": 14},  # the old 10 s passes: nothing
        {"op": "receive", "until": 1, "invisible_s": INVISIBLE_S, "timeout_s": 30, "then": "ack"},
    ]
    r = sdk(endpoint(c), "simple", {"topic": "SimpleChange", "group": "simple_chg_cg", "await_s": 2, "steps": steps})
    _, early, late = r["steps"]
    assert early["messages"] == []
    assert [(m["message_id"], m["attempt"]) for m in late["messages"]] == [(mid, 2)]


def test_empty_long_poll_then_a_message_arrives_during_it(grpc_cluster):
    c = grpc_cluster
    topic(c, "SimplePoll")
    sent_at: list[float] = []
    producer = Producer("poll_pg", namesrv_addr=c.namesrv_addr)
    producer.start()

    def send_during_the_second_poll() -> None:
        time.sleep(9.0)  # the SDK's start-up (~1-2 s) + the first, empty, 5 s poll, then 2 s into the second
        producer.send(Message("SimplePoll", b"during the poll"))
        sent_at.append(time.time())

    steps = [
        {"op": "receive", "until": 1, "invisible_s": INVISIBLE_S, "timeout_s": 0.1},  # one empty 5 s poll
        {"op": "receive", "until": 1, "invisible_s": INVISIBLE_S, "timeout_s": 0.1, "then": "ack"},
    ]
    t = threading.Thread(target=send_during_the_second_poll)
    t.start()
    try:
        r = sdk(endpoint(c), "simple", {"topic": "SimplePoll", "group": "simple_poll_cg", "await_s": 5, "steps": steps})
    finally:
        t.join()
        producer.shutdown()
    empty, found = r["steps"]
    assert empty["messages"] == [] and not empty["errors"]  # MESSAGE_NOT_FOUND: an empty list, no error
    assert empty["took_s"] >= 4.5  # the poll waited out its 5 s
    assert [m["body"] for m in found["messages"]] == ["during the poll"]
    latency = found["ended_at"] - sent_at[0]
    print(f"arrival-to-receive latency {latency * 1000:.1f} ms")
    assert -0.05 < latency < 0.5, latency  # woken by the arrival (measured ~ms; the bound allows a busy machine)


def test_fifo_group_receives_each_message_group_in_order(grpc_cluster):
    c = grpc_cluster
    topic(c, "SimpleFifo", "FIFO")
    broker = c.brokers[0]
    create_subscription_group(broker.address, SubscriptionGroupConfig("simple_fifo_cg", consume_message_orderly=True))
    groups = ["g-a", "g-b", "g-c"]
    specs = [{"body": f"{g}:{i}", "group": g} for i in range(4) for g in groups]
    _send(c, "SimpleFifo", specs)
    steps = [{"op": "receive", "until": len(specs), "invisible_s": INVISIBLE_S, "then": "ack", "timeout_s": 60}]
    r = sdk(endpoint(c), "simple", {"topic": "SimpleFifo", "group": "simple_fifo_cg", "await_s": 2, "steps": steps})
    (step,) = r["steps"]
    got = [m for m in step["messages"]]
    assert len(got) == len(specs) and all(m["attempt"] == 1 for m in got)
    for g in groups:
        assert [m["body"] for m in got if m["group"] == g] == [f"{g}:{i}" for i in range(4)]


def test_tag_filter(grpc_cluster):
    c = grpc_cluster
    topic(c, "SimpleTags")
    ids = _send(c, "SimpleTags", [{"body": f"t{i}", "tag": "TagA" if i % 2 == 0 else "TagB"} for i in range(6)])
    steps = [
        {"op": "receive", "until": 3, "invisible_s": INVISIBLE_S, "then": "ack", "timeout_s": 30},
        {"op": "receive", "until": 1, "invisible_s": INVISIBLE_S, "timeout_s": 3},
    ]
    args = {"topic": "SimpleTags", "group": "simple_tag_cg", "tag": "TagA", "await_s": 2, "steps": steps}
    first, rest = sdk(endpoint(c), "simple", args)["steps"]
    assert sorted(m["message_id"] for m in first["messages"]) == sorted(ids[0::2])
    assert {m["tag"] for m in first["messages"]} == {"TagA"} and rest["messages"] == []
