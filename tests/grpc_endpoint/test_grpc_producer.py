"""RocketMQ's 5.x Python SDK (PyPI rocketmq-python-client, gRPC) producing to an rmq_core broker's gRPC endpoint, no
proxy; rmq_core's 4.x PullConsumer reads the messages back over remoting: normal and async sends (tag, keys, user
properties and the SDK's message id intact), FIFO (each message group in one queue, in order: the queue Apache's
proxy picks), delay (the 5.x timer delivers at the delivery timestamp), transactions (commit, rollback, and an
orphan resolved by the broker's check-back through the Telemetry stream).

The SDK runs in its own venv (support/grpc5_helpers.py); without it the tests are skipped."""

from __future__ import annotations

import os
import time

import pytest

pytest.importorskip("grpc", reason="the rmq_core[grpc] extra (grpcio) is not installed")

from rmq_core.broker.grpc.grpc_messaging_service import consistent_hash
from rmq_core.message import MessageExt, tags_hash

from support.grpc5_helpers import QUEUES, endpoint, flat, grpc_cluster, needs_sdk, pull_all, sdk, topic
from support.helpers import wait_until

pytestmark = needs_sdk


def test_normal_and_async_sends_read_back_by_a_pull_consumer(grpc_cluster):
    c = grpc_cluster
    topic(c, "GrpcNormal")
    specs = [
        {"body": f"hello-{i}", "tag": f"Tag{i % 2}", "keys": [f"k{i}", f"key-{i}"], "properties": {"p": str(i)}}
        for i in range(6)
    ]
    specs.append({"body": "async-one", "tag": "TagA", "keys": ["ka"], "async": True})
    result = sdk(endpoint(c), "produce", {"topic": "GrpcNormal", "messages": specs})
    assert result["started_s"] < 5
    sent = result["sent"]
    assert len(sent) == len(specs)
    got = flat(pull_all(c, "GrpcNormal"))
    assert len(got) == len(specs)
    by_id = {m.properties["UNIQ_KEY"]: m for m in got}
    assert set(by_id) == {s["message_id"] for s in sent}
    for spec, s in zip(specs, sent):
        m = by_id[s["message_id"]]
        assert m.body == spec["body"].encode()
        assert m.tags == spec["tag"]
        assert set(m.keys.split(" ")) == set(spec["keys"])
        for k, v in spec.get("properties", {}).items():
            assert m.properties[k] == v
        assert m.properties["PGROUP"] == "GrpcNormal"  # the topic serves as producer group, as Apache's proxy
        assert s["offset"] == m.queue_offset
    # sends without a message group spread over the writable queues
    assert len({m.queue_id for m in got}) > 1


def test_fifo_message_groups_each_in_one_queue_in_order(grpc_cluster):
    c = grpc_cluster
    topic(c, "GrpcFifo", "FIFO")
    groups = ["order-1", "order-2", "order-3"]
    specs = [{"body": f"{g}:{i}", "group": g} for i in range(5) for g in groups]
    sdk(endpoint(c), "produce", {"topic": "GrpcFifo", "messages": specs})
    per_queue = pull_all(c, "GrpcFifo")
    for g in groups:
        want = consistent_hash(tags_hash(g), QUEUES)  # Guava consistentHash(group.hashCode(), queues)
        in_queue = [m for m in per_queue[want] if m.properties.get("__SHARDINGKEY") == g]
        assert [m.body.decode() for m in in_queue] == [f"{g}:{i}" for i in range(5)]
        others = [m for q, ms in per_queue.items() if q != want for m in ms if m.properties.get("__SHARDINGKEY") == g]
        assert not others


def test_delay_message_delivered_at_its_time(grpc_cluster):
    c = grpc_cluster
    topic(c, "GrpcDelay", "DELAY")
    due_s = int(time.time()) + 3
    sdk(endpoint(c), "produce", {"topic": "GrpcDelay", "messages": [{"body": "later", "deliver_at_s": due_s}]})
    assert time.time() < due_s - 0.5, "the send took too long to check the delay"
    assert not flat(pull_all(c, "GrpcDelay"))  # not yet in its topic: in the timer wheel
    found: list[MessageExt] = []

    def arrived() -> bool:
        found[:] = flat(pull_all(c, "GrpcDelay"))
        return bool(found)

    wait_until(arrived, timeout=15)
    (m,) = found
    assert m.body == b"later"
    assert abs(m.store_timestamp / 1000 - due_s) <= 1.0  # delivered within ±1 s of the delivery timestamp


def test_transactions_commit_rollback_and_orphan_check_back(grpc_cluster):
    c = grpc_cluster
    topic(c, "GrpcTx", "TRANSACTION")
    specs = [
        {"body": "committed", "transaction": "commit"},
        {"body": "rolled-back", "transaction": "rollback"},
        {"body": "orphan", "transaction": "orphan"},
    ]
    result = sdk(
        endpoint(c),
        "produce",
        {"topic": "GrpcTx", "messages": specs, "check_answer": "commit", "expect_checks": 1, "wait_checks_s": 30},
    )
    orphan_id = result["sent"][2]["message_id"]
    assert orphan_id in result["checked"]  # the broker asked the SDK's checker over the Telemetry stream
    found: list[MessageExt] = []

    def both() -> bool:
        found[:] = flat(pull_all(c, "GrpcTx"))
        return len(found) >= 2

    wait_until(both, timeout=15)
    time.sleep(1.0)  # nothing more arrives: the rolled-back one never does
    bodies = sorted(m.body for m in flat(pull_all(c, "GrpcTx")))
    assert bodies == [b"committed", b"orphan"]


def test_tls_producer_on_the_plaintext_port(tmp_path):
    """The SDK with TLS on (Java's and C#'s default) and one without, on the same port (self-signed certificate)."""
    with grpc_cluster(tmp_path, grpc_tls_self_signed=True) as c:
        topic(c, "GrpcTls")
        cert = os.path.join(c.brokers[0].config.store_config_dir, "grpc-tls-cert.pem")
        trust = {"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": cert}  # grpc's default roots: the broker's certificate
        tls = sdk(
            endpoint(c), "produce", {"topic": "GrpcTls", "tls": True, "messages": [{"body": "over tls"}]}, env=trust
        )
        plain = sdk(endpoint(c), "produce", {"topic": "GrpcTls", "messages": [{"body": "in the clear"}]})
        got = {m.properties["UNIQ_KEY"]: m.body for m in flat(pull_all(c, "GrpcTls"))}
        assert got == {tls["sent"][0]["message_id"]: b"over tls", plain["sent"][0]["message_id"]: b"in the clear"}
