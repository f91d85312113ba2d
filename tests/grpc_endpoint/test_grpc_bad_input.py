"""Bad input at the gRPC endpoint (issue 30's "Bad input"), over raw grpcio and a hand-made HTTP/2 client that never
reads (support/raw_h2.py), against one broker: unknown names answered as Apache's proxy answers them (TOPIC_NOT_FOUND,
CONSUMER_GROUP_NOT_FOUND; an unknown topic is never created by a send), illegal or system names ILLEGAL_TOPIC /
ILLEGAL_CONSUMER_GROUP; a client that never sends Settings is served (Heartbeat: UNRECOGNIZED_CLIENT_TYPE) and leaves
no task, long-poll waiter or client entry behind; a connection that opens streams and never reads holds at most
MAX_STREAMS_PER_CONNECTION of them (its Telemetry answers wait written, one at a time), and a normal client alongside
is served at once; when it leaves, so do its tasks. (The broker's RSS under these attacks: benches/bench_grpc_hostile.py.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("grpc", reason="the rmq_core[grpc] extra (grpcio) is not installed")

import grpc

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.broker.grpc.grpc_server import MAX_STREAMS_PER_CONNECTION
from rmq_core.broker.grpc.messaging_v2 import SERVICE, V2, ClientType, Code
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.common.topic_config import TopicConfig

from support import grpc5_helpers
from support.admin_helpers import add_topic_config
from support.helpers import wait_until
from support.raw_h2 import RawH2
from support.send_helpers import on_loop

GROUP, TOPIC, EMPTY = "bad_input_cg", "BadInputT", "BadInputEmptyT"


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[Broker]:
    cfg = BrokerConfig(
        listen_port=0,
        grpc_port=0,
        store_path_root_dir=str(tmp_path_factory.mktemp("bad_input") / "store"),
        auto_create_subscription_group=False,
    )
    with Broker(cfg) as b:
        for name in (TOPIC, EMPTY):
            add_topic_config(b, TopicConfig(name, 1, 1))
        groups = b.controller.subscription_group_manager
        on_loop(b, lambda: groups.update_subscription_group_config(SubscriptionGroupConfig(group_name=GROUP)))
        yield b


def md(client_id: str) -> tuple[tuple[str, str], ...]:
    return (("x-mq-client-id", client_id),)


def unary(ch: Any, rpc: str, request: Any, client_id: str = "bad-input@1") -> Any:
    return ch.unary_unary(
        f"/{SERVICE}/{rpc}",
        request_serializer=type(request).SerializeToString,
        response_deserializer=getattr(V2, rpc + "Response").FromString,
    )(request, metadata=md(client_id), timeout=10)


def receive_request(group: str = GROUP, topic: str = TOPIC, poll_ms: int = 5_000) -> Any:
    return grpc5_helpers.receive_request(group, topic, poll_ms=poll_ms)


def receive_call(ch: Any, req: Any, client_id: str = "bad-input@1") -> Any:
    return ch.unary_stream(
        f"/{SERVICE}/ReceiveMessage",
        request_serializer=V2.ReceiveMessageRequest.SerializeToString,
        response_deserializer=V2.ReceiveMessageResponse.FromString,
    )(req, metadata=md(client_id), timeout=req.long_polling_timeout.seconds + 3)


def first_status(ch: Any, req: Any) -> int:
    return int(next(iter(receive_call(ch, req))).status.code)


def send_request(topic: str, body: bytes) -> Any:
    m = V2.Message(body=body)
    m.topic.name = topic
    m.system_properties.message_id = "ID-" + body.decode()
    m.system_properties.message_type = 1
    return V2.SendMessageRequest(messages=[m])


def loop_state(b: Broker) -> tuple[int, int]:
    """(asyncio tasks on the broker's loop, long polls waiting in the POP service)."""
    pop = b.controller.pop_service
    return on_loop(b, lambda: (len(asyncio.all_tasks()), len(set().union(*pop._waiters.values()))))


def settled(b: Broker, tasks: int, waiters: int) -> bool:
    now_tasks, now_waiters = loop_state(b)
    return now_tasks <= tasks and now_waiters <= waiters


def test_unknown_and_illegal_names(broker):
    ack = V2.AckMessageRequest()
    ack.group.name = GROUP
    ack.entries.add(message_id="x", receipt_handle="not a handle")
    with grpc.insecure_channel(broker.controller.grpc_address) as ch:
        # unknown: the codes Apache's proxy answers (its route lookup, the broker's POP / ack)
        assert unary(ch, "SendMessage", send_request("NoSuchTopic", b"lost")).status.code == Code.TOPIC_NOT_FOUND
        assert broker.controller.topic_config_manager.select_topic_config("NoSuchTopic") is None  # not auto-created
        assert first_status(ch, receive_request(topic="NoSuchTopic")) == Code.TOPIC_NOT_FOUND
        assert first_status(ch, receive_request(group="no_such_cg")) == Code.CONSUMER_GROUP_NOT_FOUND
        ack.topic.name = "NoSuchTopic"
        r = unary(ch, "AckMessage", ack)
        assert r.status.code == Code.INVALID_RECEIPT_HANDLE  # the handle is checked first: nothing to ack
        # illegal or system names: refused before anything is looked up (GrpcValidator)
        for topic in ("TBW102", "rmq_sys_wheel_timer", "bad topic", ""):
            route = V2.QueryRouteRequest(topic=V2.Resource(name=topic))
            assert unary(ch, "QueryRoute", route).status.code == Code.ILLEGAL_TOPIC, topic
            assert first_status(ch, receive_request(topic=topic)) == Code.ILLEGAL_TOPIC, topic
            ack.topic.name = topic
            assert unary(ch, "AckMessage", ack).status.code == Code.ILLEGAL_TOPIC, topic
        assert unary(ch, "SendMessage", send_request("TBW102", b"x")).status.code == Code.ILLEGAL_TOPIC
        for group in ("CID_RMQ_SYS_TRANS", "bad group", "x" * 121, ""):
            assert first_status(ch, receive_request(group=group)) == Code.ILLEGAL_CONSUMER_GROUP, group
        settings = V2.Settings(client_type=ClientType.SIMPLE_CONSUMER)
        settings.subscription.group.name = "CID_RMQ_SYS_X"
        telemetry = ch.stream_stream(
            f"/{SERVICE}/Telemetry",
            request_serializer=V2.TelemetryCommand.SerializeToString,
            response_deserializer=V2.TelemetryCommand.FromString,
        )(iter([V2.TelemetryCommand(settings=settings)]), metadata=md("bad-settings@1"), timeout=10)
        answers = list(telemetry)  # the refusal, then the stream ends
        assert [a.status.code for a in answers] == [Code.ILLEGAL_CONSUMER_GROUP], answers


def test_a_client_that_never_sends_settings_is_served_and_leaves_nothing(broker):
    addr = broker.controller.grpc_address
    with grpc.insecure_channel(addr) as warm:  # grpc's own first-use tasks are not the clients'
        unary(warm, "QueryRoute", V2.QueryRouteRequest(topic=V2.Resource(name=TOPIC)))
    tasks_before, waiters_before = loop_state(broker)
    service = broker.controller.grpc_server.service
    ids = [f"no-settings-{i}@1" for i in range(8)]
    for n, cid in enumerate(ids):
        with grpc.insecure_channel(addr) as ch:
            assert (
                unary(ch, "QueryRoute", V2.QueryRouteRequest(topic=V2.Resource(name=TOPIC)), cid).status.code == Code.OK
            )
            hb = V2.HeartbeatRequest(client_type=ClientType.SIMPLE_CONSUMER)
            hb.group.name = GROUP
            assert unary(ch, "Heartbeat", hb, cid).status.code == Code.UNRECOGNIZED_CLIENT_TYPE  # as Apache
            # a long poll on an empty topic and a Telemetry stream with no Settings, both left mid-way
            poll = receive_call(ch, receive_request(topic=EMPTY, poll_ms=20_000), cid)
            telemetry = ch.stream_stream(
                f"/{SERVICE}/Telemetry",
                request_serializer=V2.TelemetryCommand.SerializeToString,
                response_deserializer=V2.TelemetryCommand.FromString,
            )(iter(()), metadata=md(cid), timeout=30)
            wait_until(lambda: loop_state(broker)[1] > waiters_before, "the long poll waits")
            poll.cancel()
            telemetry.cancel()
            # sends and receives are served without Settings (Apache fails such a receive: "settings is null")
            sent = unary(ch, "SendMessage", send_request(TOPIC, f"ns{n}".encode()), cid)
            assert sent.status.code == Code.OK
            frames = list(receive_call(ch, receive_request(), cid))
            msgs = [f.message for f in frames if f.WhichOneof("content") == "message"]
            assert frames[0].status.code == Code.OK and [m.body for m in msgs] == [f"ns{n}".encode()]
            ack = V2.AckMessageRequest()
            ack.group.name, ack.topic.name = GROUP, TOPIC
            ack.entries.add(message_id=msgs[0].system_properties.message_id,
                            receipt_handle=msgs[0].system_properties.receipt_handle)  # fmt: skip
            assert unary(ch, "AckMessage", ack, cid).status.code == Code.OK
            if n % 2 == 0:  # half of them say goodbye; the others just disconnect (the 120 s sweep forgets them)
                assert (
                    unary(ch, "NotifyClientTermination", V2.NotifyClientTerminationRequest(), cid).status.code
                    == Code.OK
                )
    wait_until(lambda: settled(broker, tasks_before, waiters_before), "every task and waiter gone", 10)
    assert not [c for c in ids[::2] if c in service.clients]
    assert all(service.clients[c].outbox is None for c in ids[1::2])  # no stream held for them
    assert on_loop(broker, lambda: service.sweep(broker.controller.now_ms() + 121_000)) >= len(ids[1::2])
    assert not [c for c in ids if c in service.clients]


def test_streams_never_read_are_bounded_and_a_normal_client_is_served(broker):
    addr = broker.controller.grpc_address
    tasks_before, waiters_before = loop_state(broker)
    service = broker.controller.grpc_server.service
    hostile = RawH2(addr)
    try:
        poll = receive_request(topic=EMPTY, poll_ms=20_000).SerializeToString()
        for i in range(MAX_STREAMS_PER_CONNECTION - 1):
            hostile.open("ReceiveMessage", f"hostile-{i}", poll, end=True)
        settings = V2.Settings(client_type=ClientType.SIMPLE_CONSUMER)
        settings.subscription.group.name = GROUP
        settings.subscription.subscriptions.add().topic.name = TOPIC
        sid = hostile.open("Telemetry", "hostile-t", V2.TelemetryCommand(settings=settings).SerializeToString(), False)
        for i in range(600):  # distinct Settings (one flow-control window), each answered; the client reads none
            settings.user_agent.hostname = str(i)
            hostile.send(sid, V2.TelemetryCommand(settings=settings).SerializeToString())
        wait_until(
            lambda: loop_state(broker)[1] - waiters_before == MAX_STREAMS_PER_CONNECTION - 1, "every poll waits", 20
        )
        channel = wait_until(lambda: service.clients.get("hostile-t"), "the Telemetry stream is open")
        wait_until(lambda: channel.settings is not None and channel.settings.user_agent.hostname == "599", "Settings")
        # a stream beyond the connection's limit is not served
        hostile.open("ReceiveMessage", "hostile-over", poll, end=True)
        time.sleep(0.3)
        assert loop_state(broker)[1] - waiters_before <= MAX_STREAMS_PER_CONNECTION - 1
        # a normal client on its own connection: served at once
        with grpc.insecure_channel(addr) as ch:
            assert unary(ch, "SendMessage", send_request(TOPIC, b"normal")).status.code == Code.OK
            t = time.monotonic()
            frames = list(receive_call(ch, receive_request()))
            took = time.monotonic() - t
            assert [f.message.body for f in frames if f.WhichOneof("content") == "message"] == [b"normal"]
            assert took < 5.0, took  # not held behind the hostile streams (a 20 s poll would be)
            ack = V2.AckMessageRequest()
            ack.group.name, ack.topic.name = GROUP, TOPIC
            ack.entries.add(receipt_handle=frames[1].message.system_properties.receipt_handle)
            assert unary(ch, "AckMessage", ack).status.code == Code.OK
    finally:
        hostile.close()
    wait_until(lambda: settled(broker, tasks_before, waiters_before), "the hostile's tasks gone", 10)
    assert service.clients["hostile-t"].outbox is None


def test_bad_handles_change_and_forward_nothing(broker):
    """Beside test_grpc_receipt_handles' acks: ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue with a
    malformed, foreign or expired handle → INVALID_RECEIPT_HANDLE, nothing forwarded; a batch ack with one good and
    one bad handle acks the good one only (MULTIPLE_RESULTS)."""
    with grpc.insecure_channel(broker.controller.grpc_address) as ch:
        assert unary(ch, "SendMessage", send_request(TOPIC, b"held")).status.code == Code.OK
        frames = list(receive_call(ch, receive_request()))
        (msg,) = [f.message for f in frames if f.WhichOneof("content") == "message"]
        handle = msg.system_properties.receipt_handle
        fields = handle.split(" ")
        foreign = " ".join(fields[:5] + ["another-broker"] + fields[6:])
        expired = " ".join([fields[0], str(int(fields[1]) - 3_600_000)] + fields[2:])
        for bad in ("not a handle", foreign, expired):
            change = V2.ChangeInvisibleDurationRequest(receipt_handle=bad, message_id="x")
            change.group.name, change.topic.name = GROUP, TOPIC
            change.invisible_duration.FromSeconds(30)
            assert unary(ch, "ChangeInvisibleDuration", change).status.code == Code.INVALID_RECEIPT_HANDLE, bad
            dlq = V2.ForwardMessageToDeadLetterQueueRequest(receipt_handle=bad, message_id="x", max_delivery_attempts=1)
            dlq.group.name, dlq.topic.name = GROUP, TOPIC
            assert unary(ch, "ForwardMessageToDeadLetterQueue", dlq).status.code == Code.INVALID_RECEIPT_HANDLE, bad
        assert broker.controller.topic_config_manager.select_topic_config(f"%DLQ%{GROUP}") is None  # nothing sent
        ack = V2.AckMessageRequest()
        ack.group.name, ack.topic.name = GROUP, TOPIC
        ack.entries.add(message_id="good", receipt_handle=handle)
        ack.entries.add(message_id="bad", receipt_handle=foreign)
        r = unary(ch, "AckMessage", ack)
        assert r.status.code == Code.MULTIPLE_RESULTS
        assert [e.status.code for e in r.entries] == [Code.OK, Code.INVALID_RECEIPT_HANDLE]
