"""RocketMQ's 5.x Python SDK PushConsumer against an rmq_core broker's gRPC endpoint over POP, no proxy: it starts
(Settings, QueryAssignment), receives what the SDK's Producer sent (id, tag, keys, properties, attempt 1) and a
message its listener fails comes back with attempt 2 after the first backoff (the Settings' customized backoff: 1 s);
a listener slower than the invisible time sees its message once: the server renews the invisible time while the
client holds it and takes the client's ack with the original handle.
Needs the broker's POP service (broker/pop/) and the SDK's venv (support/grpc5_helpers.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("grpc", reason="the rmq_core[grpc] extra (grpcio) is not installed")

from rmq_core.broker.grpc import grpc_consumer_service
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.message import decode_messages

from support.admin_helpers import create_subscription_group
from support.grpc5_helpers import endpoint, needs_sdk, sdk, topic

pytestmark = needs_sdk


def test_push_consumer_receives_and_a_failure_comes_back_with_attempt_2(grpc_cluster):
    c = grpc_cluster
    topic(c, "PushT")
    specs = [{"body": f"p{i}", "tag": "TagP", "keys": [f"pk{i}"], "properties": {"i": str(i)}} for i in range(4)]
    ids = [s["message_id"] for s in sdk(endpoint(c), "produce", {"topic": "PushT", "messages": specs})["sent"]]
    r = sdk(endpoint(c), "push", {"topic": "PushT", "group": "push_cg", "fail": ["p0"], "until": 5, "run_s": 40})
    assert r["started_s"] < 12
    seen = r["deliveries"]
    firsts = {d["message_id"]: d for d in seen if d["attempt"] == 1}
    assert set(firsts) == set(ids)
    for spec, mid in zip(specs, ids):
        d = firsts[mid]
        assert (d["body"], d["tag"], d["keys"], d["properties"]["i"]) == (
            spec["body"],
            "TagP",
            spec["keys"],
            spec["properties"]["i"],
        )
    again = [d for d in seen if d["attempt"] == 2]
    assert [d["message_id"] for d in again] == [ids[0]]  # only the failed one, once more
    delay = again[0]["at"] - firsts[ids[0]]["at"]
    assert 0.5 <= delay <= 10, delay  # the nack's backoff (1 s), not the 60 s invisible time


def test_a_handler_slower_than_the_invisible_time_causes_no_duplicate(grpc_cluster, monkeypatch):
    # a push consumer's receive pops with 60 s (Apache's default); 12 s here so the test does not take minutes:
    # renewed at the first scan within 10 s of expiry, while the listener still holds the message for 20 s
    monkeypatch.setattr(grpc_consumer_service, "DEFAULT_INVISIBLE_MS", 12_000)
    c = grpc_cluster
    topic(c, "PushSlow")
    (sent,) = sdk(endpoint(c), "produce", {"topic": "PushSlow", "messages": [{"body": "slow"}]})["sent"]
    r = sdk(endpoint(c), "push", {"topic": "PushSlow", "group": "push_slow_cg", "slow_s": 20, "run_s": 30})
    assert [(d["message_id"], d["attempt"]) for d in r["deliveries"]] == [(sent["message_id"], 1)]
    server = c.brokers[0].controller.grpc_server
    renewal = server.consumer_service.renewal
    assert renewal.renewals >= 1
    assert not renewal.held  # the ack (with the original handle) took the renewed one


def test_failures_follow_the_backoff_and_end_in_the_dlq(grpc_cluster):
    c = grpc_cluster
    topic(c, "PushDlq")
    broker = c.brokers[0]
    create_subscription_group(broker.address, SubscriptionGroupConfig("push_dlq_cg", retry_max_times=1))  # 2 attempts
    (sent,) = sdk(endpoint(c), "produce", {"topic": "PushDlq", "messages": [{"body": "poison", "tag": "T"}]})["sent"]
    r = sdk(endpoint(c), "push", {"topic": "PushDlq", "group": "push_dlq_cg", "fail": ["poison"], "run_s": 20})
    attempts = [(d["message_id"], d["attempt"]) for d in r["deliveries"]]
    assert attempts == [(sent["message_id"], 1), (sent["message_id"], 2)]  # then no more: max attempts reached
    gap = r["deliveries"][1]["at"] - r["deliveries"][0]["at"]
    assert 0.5 <= gap <= 10, gap  # the first backoff (1 s) plus the revive's latency
    store = broker.message_store
    body = store.get_message("check", "%DLQ%push_dlq_cg", 0, 0, 32).body
    dlq = decode_messages(body) if body else []
    assert [m.properties.get("UNIQ_KEY") for m in dlq] == [sent["message_id"]]
    assert dlq[0].body == b"poison"
