"""What the transport under the handlers owns, on both: the extension's native front (the default) and grpc.aio (its
twin, RMQ_CORE_BACKEND=python or an extension without the front): an unknown method → UNIMPLEMENTED, an undecodable
request → UNKNOWN, a cancelled long poll releases its POP waiter, a connection dropped mid-stream leaves no task,
and the broker stops promptly with clients connected (their calls end, no task or front thread left). Real TCP on
127.0.0.1, a real broker per transport; the grpc.aio twin keeps the rest of tests/grpc_endpoint/ honest too
(test_grpc_endpoint.py runs on both)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
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
from support.helpers import wait_until
from support.send_helpers import on_loop

TOPIC, GROUP = "TransportT", "transport_cg"
MD = (("x-mq-client-id", "transport@1"),)


@pytest.fixture(scope="module")
def broker(grpc_transport: str, tmp_path_factory) -> Iterator[Broker]:
    cfg = BrokerConfig(listen_port=0, grpc_port=0, store_path_root_dir=str(tmp_path_factory.mktemp("tr") / "store"))
    with Broker(cfg) as b:
        assert (b.controller.grpc_server.native is not None) == (grpc_transport == "native")
        add_topic_config(b, TopicConfig(TOPIC, 1, 1))
        yield b


def loop_state(b: Broker) -> tuple[int, int]:
    """(asyncio tasks on the broker's loop, long polls waiting in the POP service)."""
    pop = b.controller.pop_service
    return on_loop(b, lambda: (len(asyncio.all_tasks()), len(set().union(*pop._waiters.values()))))


def long_poll(ch: Any, poll_ms: int = 20_000) -> Any:
    req = V2.ReceiveMessageRequest(batch_size=32)
    req.group.name, req.message_queue.topic.name, req.message_queue.id = GROUP, TOPIC, -1
    req.filter_expression.expression = "*"
    req.invisible_duration.FromSeconds(10)
    req.long_polling_timeout.FromMilliseconds(poll_ms)
    return ch.unary_stream(
        f"/{SERVICE}/ReceiveMessage",
        request_serializer=V2.ReceiveMessageRequest.SerializeToString,
        response_deserializer=V2.ReceiveMessageResponse.FromString,
    )(req, metadata=MD, timeout=poll_ms / 1000 + 5)


def telemetry(ch: Any, done: threading.Event) -> Any:
    """A Telemetry stream the client keeps open (no Settings, no half-close) until ``done``."""

    def commands() -> Iterator[Any]:
        done.wait(30)
        yield from ()

    return ch.stream_stream(
        f"/{SERVICE}/Telemetry",
        request_serializer=V2.TelemetryCommand.SerializeToString,
        response_deserializer=V2.TelemetryCommand.FromString,
    )(commands(), metadata=MD, timeout=30)


def settled(b: Broker, tasks: int, waiters: int) -> bool:
    now_tasks, now_waiters = loop_state(b)
    return now_tasks <= tasks and now_waiters <= waiters


def os_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def query_route(ch: Any) -> Any:
    """QueryRoute of the module's topic over ``ch``."""
    return ch.unary_unary(
        f"/{SERVICE}/QueryRoute",
        request_serializer=V2.QueryRouteRequest.SerializeToString,
        response_deserializer=V2.QueryRouteResponse.FromString,
    )(V2.QueryRouteRequest(topic=V2.Resource(name=TOPIC)), metadata=MD, timeout=10)


def warm(b: Broker) -> tuple[int, int]:
    """The loop's state once a first client came and went (grpc's own first-use tasks are not a client's)."""
    with grpc.insecure_channel(b.controller.grpc_address) as ch:
        route = query_route(ch)
        assert route.status.code == Code.OK
    return loop_state(b)


def test_an_unknown_method_is_unimplemented_and_garbage_is_unknown(broker):
    with grpc.insecure_channel(broker.controller.grpc_address) as ch:
        for path in (f"/{SERVICE}/PullMessage", f"/{SERVICE}/NoSuchRpc", "/no.such.Service/Call"):
            with pytest.raises(grpc.RpcError) as e:
                ch.unary_unary(path)(b"", metadata=MD, timeout=10)
            assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED, path
        with pytest.raises(grpc.RpcError) as e:  # not a QueryRouteRequest: refused before any handler
            ch.unary_unary(f"/{SERVICE}/QueryRoute")(b"\xff\xff\xff", metadata=MD, timeout=10)
        assert e.value.code() == grpc.StatusCode.UNKNOWN  # grpc.aio's answer to a decoder's exception
        # the connection serves on
        ok = query_route(ch)
        assert ok.status.code == Code.OK


def test_a_cancelled_long_poll_releases_its_waiter(broker):
    tasks, waiters = warm(broker)
    with grpc.insecure_channel(broker.controller.grpc_address) as ch:
        polls = [long_poll(ch) for _ in range(3)]
        wait_until(lambda: loop_state(broker)[1] >= waiters + 3, "the long polls wait")
        for poll in polls:
            poll.cancel()
        wait_until(lambda: settled(broker, tasks, waiters), "the waiters and their tasks gone", 10)
        for poll in polls:
            assert poll.code() == grpc.StatusCode.CANCELLED


def test_a_connection_dropped_mid_stream_leaves_no_task(broker):
    tasks, waiters = warm(broker)
    ch, done = grpc.insecure_channel(broker.controller.grpc_address), threading.Event()
    polls = [long_poll(ch) for _ in range(2)]
    stream = telemetry(ch, done)
    wait_until(lambda: loop_state(broker)[1] >= waiters + 2, "the long polls wait")
    wait_until(lambda: loop_state(broker)[0] >= tasks + 3, "the calls are served")
    ch.close()  # the connection goes, its streams with it (no RST per stream needed)
    wait_until(lambda: settled(broker, tasks, waiters), "every task and waiter gone", 10)
    done.set()
    for call in (*polls, stream):
        assert call.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)


def test_the_broker_stops_with_clients_connected(grpc_transport, tmp_path):
    with grpc.insecure_channel("127.0.0.1:1") as ch, contextlib.suppress(grpc.FutureTimeoutError):
        grpc.channel_ready_future(ch).result(0.3)  # grpc's own client threads start at first use
    threads_before, os_before = set(threading.enumerate()), os_threads()
    cfg = BrokerConfig(listen_port=0, grpc_port=0, store_path_root_dir=str(tmp_path / "store"))
    b = Broker(cfg).start()
    try:
        add_topic_config(b, TopicConfig(TOPIC, 1, 1))
        _tasks, waiters = warm(b)
        ch, done = grpc.insecure_channel(b.controller.grpc_address), threading.Event()
        polls = [long_poll(ch) for _ in range(2)]
        stream = telemetry(ch, done)
        wait_until(lambda: loop_state(b)[1] >= waiters + 2, "the long polls wait")
        t0 = time.monotonic()
    finally:
        b.shutdown()
    took = time.monotonic() - t0
    assert took < 10, took  # no long poll (20 s) waited out
    # each call ends (the stream as the broker forgets its client, or reset), none waits for its deadline
    wait_until(lambda: all(call.done() for call in (*polls, stream)), "the clients' calls ended", 5)
    done.set()
    ch.close()
    wait_until(lambda: not (set(threading.enumerate()) - threads_before), "no Python thread of the broker left", 10)
    wait_until(lambda: os_threads() <= os_before, "no thread of the front left", 10)
