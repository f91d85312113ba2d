"""Receipt handles at the gRPC endpoint, over raw grpcio against a broker with POP: a malformed handle, one of
another broker and an expired one are each answered INVALID_RECEIPT_HANDLE and ack nothing (the message comes
back after its invisible time, attempt 2); the frames (status, messages with an MD5 body digest, the delivery
timestamp last); ReceiveMessage's own checks (invisible time below 10 s, batch size 0, an
empty topic answered MESSAGE_NOT_FOUND, one status frame first); QueryAssignment's one queue −1."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("grpc", reason="the rmq_core[grpc] extra (grpcio) is not installed")

import grpc

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.broker.grpc.messaging_v2 import SERVICE, V2, Code
from rmq_core.common.topic_config import TopicConfig

from support.admin_helpers import add_topic_config
from support.grpc5_helpers import receive_request

MD = (("x-mq-client-id", "raw-consumer@1"),)


@pytest.fixture
def broker(tmp_path) -> Iterator[Broker]:
    cfg = BrokerConfig(listen_port=0, grpc_port=0, store_path_root_dir=str(tmp_path / "store"), broker_name="bh")
    with Broker(cfg) as b:
        add_topic_config(b, TopicConfig("HandleT", 1, 1))
        yield b


@pytest.fixture
def channel(broker: Broker) -> Iterator[Any]:
    with grpc.insecure_channel(broker.controller.grpc_address) as ch:
        yield ch


def unary(ch: Any, rpc: str, request: Any, response: str) -> Any:
    return ch.unary_unary(
        f"/{SERVICE}/{rpc}",
        request_serializer=type(request).SerializeToString,
        response_deserializer=getattr(V2, response).FromString,
    )(request, metadata=MD, timeout=10)


def receive(ch: Any, invisible_ms: int = 10_000, batch: int = 32, poll_ms: int = 5_000) -> list[Any]:
    req = receive_request("handle_cg", "HandleT", batch=batch, invisible_ms=invisible_ms, poll_ms=poll_ms)
    stream = ch.unary_stream(
        f"/{SERVICE}/ReceiveMessage",
        request_serializer=V2.ReceiveMessageRequest.SerializeToString,
        response_deserializer=V2.ReceiveMessageResponse.FromString,
    )(req, metadata=MD, timeout=poll_ms / 1000 + 3)
    return list(stream)


def send(ch: Any, body: bytes) -> None:
    m = V2.Message(body=body)
    m.topic.name = "HandleT"
    m.system_properties.message_id = f"ID-{body.decode()}"
    m.system_properties.message_type = 1
    r = unary(ch, "SendMessage", V2.SendMessageRequest(messages=[m]), "SendMessageResponse")
    assert r.status.code == Code.OK


def ack(ch: Any, handle: str) -> Any:
    req = V2.AckMessageRequest()
    req.group.name, req.topic.name = "handle_cg", "HandleT"
    req.entries.add(message_id="x", receipt_handle=handle)
    return unary(ch, "AckMessage", req, "AckMessageResponse")


def test_bad_handles_ack_nothing(broker, channel):
    frames = receive(channel, poll_ms=5_000)
    assert [f.WhichOneof("content") for f in frames] == ["status", "delivery_timestamp"]
    assert frames[0].status.code == Code.MESSAGE_NOT_FOUND
    send(channel, b"m1")
    frames = receive(channel)
    assert [f.WhichOneof("content") for f in frames] == ["status", "message", "delivery_timestamp"]
    assert frames[0].status.code == Code.OK
    msg = frames[1].message
    assert msg.system_properties.delivery_attempt == 1 and msg.system_properties.message_id == "ID-m1"
    assert msg.system_properties.body_digest.checksum == hashlib.md5(b"m1").hexdigest().upper()
    handle = msg.system_properties.receipt_handle
    fields = handle.split(" ")
    foreign = " ".join(fields[:5] + ["another-broker"] + fields[6:])
    expired = " ".join([fields[0], str(int(fields[1]) - 3_600_000)] + fields[2:])
    for bad in ("not a handle", "", foreign, expired):
        r = ack(channel, bad)
        assert r.status.code == Code.INVALID_RECEIPT_HANDLE, (bad, r)
        assert r.entries[0].status.code == Code.INVALID_RECEIPT_HANDLE
    time.sleep(10.5)  # nothing was acked: the message comes back once its 10 s are over
    frames = receive(channel, poll_ms=10_000)
    again = [f.message for f in frames if f.WhichOneof("content") == "message"]
    assert [(m.system_properties.message_id, m.system_properties.delivery_attempt) for m in again] == [("ID-m1", 2)]
    r = ack(channel, again[0].system_properties.receipt_handle)
    assert r.status.code == Code.OK


def test_receive_checks_and_assignment(broker, channel):
    (frame,) = receive(channel, invisible_ms=5_000)  # a refusal: the status frame only
    assert frame.status.code == Code.ILLEGAL_INVISIBLE_TIME
    (frame,) = receive(channel, batch=0)
    assert frame.status.code == Code.BAD_REQUEST
    req = V2.QueryAssignmentRequest()
    req.topic.name, req.group.name = "HandleT", "handle_cg"
    r = unary(channel, "QueryAssignment", req, "QueryAssignmentResponse")
    assert r.status.code == Code.OK
    (a,) = r.assignments
    assert (a.message_queue.id, a.message_queue.broker.name, a.message_queue.broker.id) == (-1, "bh", 0)
    req.topic.name = "NoSuchTopic"
    assert unary(channel, "QueryAssignment", req, "QueryAssignmentResponse").status.code == Code.TOPIC_NOT_FOUND
