"""The broker's gRPC endpoint over real HTTP/2 on 127.0.0.1, spoken to with grpcio and rmq_core's own v2 message
classes: QueryRoute (queue ids and permissions as Apache's RouteActivity lays them out, endpoints, message types,
an unknown topic), Settings answers (max_body_size from the broker's maxMessageSize), Heartbeat before Settings,
the ``authorization`` / ``x-mq-*`` metadata accepted, refused sends (nothing stored), a bad transaction id, the FIFO
queue choice (Guava's consistentHash, golden values from Guava 32.0.1), and the broker without the gRPC extra."""

from __future__ import annotations

import asyncio
import os
import queue
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("grpc", reason="the rmq_core[grpc] extra (grpcio) is not installed")

import grpc

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.broker.grpc.grpc_messaging_service import consistent_hash
from rmq_core.broker.grpc.messaging_v2 import (
    SERVICE,
    V2,
    ClientType,
    Code,
    MessageType,
    Permission,
)
from rmq_core.common.perm_name import PERM_READ
from rmq_core.common.topic_config import TopicConfig
from rmq_core.message import tags_hash

from support.admin_helpers import add_topic_config
from support.helpers import wait_until

METADATA = (
    ("x-mq-client-id", "test-client@1"),
    ("x-mq-language", "PYTHON"),
    ("x-mq-protocol", "v2"),
    ("x-mq-client-version", "5.1.2"),
    ("x-mq-date-time", "20261127T000000Z"),
    ("x-mq-request-id", "r-1"),
    ("authorization", "MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature=00"),
)


@pytest.fixture
def broker(grpc_transport: str, tmp_path) -> Iterator[Broker]:  # on both transports (conftest)
    cfg = BrokerConfig(
        listen_port=0, grpc_port=0, store_path_root_dir=str(tmp_path / "store"), max_message_size=1024 * 1024
    )
    with Broker(cfg) as b:
        yield b


@pytest.fixture
def channel(broker: Broker) -> Iterator[Any]:
    with grpc.insecure_channel(broker.controller.grpc_address) as ch:
        yield ch


def call(ch: Any, rpc: str, request: Any, response: str, metadata: Any = METADATA) -> Any:
    method = ch.unary_unary(
        f"/{SERVICE}/{rpc}",
        request_serializer=type(request).SerializeToString,
        response_deserializer=getattr(V2, response).FromString,
    )
    return method(request, metadata=metadata, timeout=10)


def settings_reply(ch: Any, settings: Any) -> Any:
    """Open Telemetry, write ``settings``, return the first command the broker writes back."""
    outbox: queue.Queue[Any] = queue.Queue()
    outbox.put(V2.TelemetryCommand(settings=settings))

    def commands() -> Iterator[Any]:
        while (item := outbox.get()) is not None:
            yield item

    stream = ch.stream_stream(
        f"/{SERVICE}/Telemetry",
        request_serializer=V2.TelemetryCommand.SerializeToString,
        response_deserializer=V2.TelemetryCommand.FromString,
    )(commands(), metadata=METADATA, timeout=10)
    try:
        return next(stream)
    finally:
        outbox.put(None)
        stream.cancel()


def test_query_route_lays_out_queues_as_apache(broker, channel):
    add_topic_config(broker, TopicConfig("RouteT", read_queue_nums=4, write_queue_nums=2))
    add_topic_config(broker, TopicConfig("MixedT", 2, 2, attributes={"message.type": "MIXED"}))
    add_topic_config(broker, TopicConfig("ReadOnlyT", 3, 3, perm=PERM_READ))
    r = call(channel, "QueryRoute", V2.QueryRouteRequest(topic=V2.Resource(name="RouteT")), "QueryRouteResponse")
    assert r.status.code == Code.OK
    # read-only ids first (4 - 2), then write-only (0), then read-write (2)
    assert [(q.id, q.permission) for q in r.message_queues] == [
        (0, Permission.READ),
        (1, Permission.READ),
        (2, Permission.READ_WRITE),
        (3, Permission.READ_WRITE),
    ]
    q = r.message_queues[0]
    host, port = broker.controller.grpc_address.split(":")
    assert (q.broker.name, q.broker.id) == (broker.config.broker_name, 0)
    assert [(a.host, a.port) for a in q.broker.endpoints.addresses] == [(host, int(port))]
    assert list(q.accept_message_types) == [MessageType.NORMAL]  # no message.type attribute: NORMAL
    r = call(channel, "QueryRoute", V2.QueryRouteRequest(topic=V2.Resource(name="MixedT")), "QueryRouteResponse")
    assert set(r.message_queues[0].accept_message_types) == {
        MessageType.NORMAL,
        MessageType.FIFO,
        MessageType.DELAY,
        MessageType.TRANSACTION,
    }
    r = call(channel, "QueryRoute", V2.QueryRouteRequest(topic=V2.Resource(name="ReadOnlyT")), "QueryRouteResponse")
    assert [q.permission for q in r.message_queues] == [Permission.READ] * 3
    r = call(channel, "QueryRoute", V2.QueryRouteRequest(topic=V2.Resource(name="NoSuchT")), "QueryRouteResponse")
    assert r.status.code == Code.TOPIC_NOT_FOUND and not r.message_queues


def test_settings_heartbeat_and_termination(broker, channel):
    hb = call(channel, "Heartbeat", V2.HeartbeatRequest(client_type=ClientType.PRODUCER), "HeartbeatResponse")
    assert hb.status.code == Code.UNRECOGNIZED_CLIENT_TYPE  # no Settings yet: as Apache
    settings = V2.Settings(client_type=ClientType.PRODUCER)
    settings.publishing.topics.add(name="SettingsT")
    reply = settings_reply(channel, settings)
    assert reply.status.code == Code.OK
    assert reply.settings.WhichOneof("pub_sub") == "publishing"
    assert reply.settings.publishing.max_body_size == 1024 * 1024  # the broker's maxMessageSize
    assert reply.settings.publishing.validate_message_type
    assert reply.settings.HasField("metric") and not reply.settings.metric.on
    assert reply.settings.backoff_policy.max_attempts == 3
    hb = call(channel, "Heartbeat", V2.HeartbeatRequest(client_type=ClientType.PRODUCER), "HeartbeatResponse")
    assert hb.status.code == Code.OK
    producers = broker.controller.producer_manager
    assert producers.find_channel_in_group("SettingsT", "test-client@1") is not None
    r = call(channel, "NotifyClientTermination", V2.NotifyClientTerminationRequest(), "NotifyClientTerminationResponse")
    assert r.status.code == Code.OK
    assert producers.find_channel_in_group("SettingsT", "test-client@1") is None
    # no client id: refused
    r = call(channel, "Heartbeat", V2.HeartbeatRequest(client_type=ClientType.PRODUCER), "HeartbeatResponse", ())
    assert r.status.code == Code.CLIENT_ID_REQUIRED


def test_a_silent_client_without_a_stream_is_forgotten(broker, channel):
    settings = V2.Settings(client_type=ClientType.PRODUCER)
    settings.publishing.topics.add(name="SweepT")
    settings_reply(channel, settings)  # its stream ends; no NotifyClientTermination (a crashed client)
    service = broker.controller.grpc_server.service
    wait_until(lambda: service.clients["test-client@1"].outbox is None, "the server saw the stream end")
    now = broker.controller.now_ms()

    def sweep(at: int) -> int:  # on the broker's loop, which owns the clients
        async def run() -> int:
            return int(service.sweep(at))

        return asyncio.run_coroutine_threadsafe(run(), broker.controller.loop).result(10)

    assert sweep(now) == 0  # not silent long enough
    assert sweep(now + 121_000) == 1
    assert "test-client@1" not in service.clients
    assert broker.controller.producer_manager.find_channel_in_group("SweepT", "test-client@1") is None


def test_push_consumer_settings(broker, channel):
    settings = V2.Settings(client_type=ClientType.PUSH_CONSUMER)
    settings.subscription.group.name = "push_cg"
    reply = settings_reply(channel, settings)
    sub = reply.settings.subscription
    assert reply.status.code == Code.OK and sub.group.name == "push_cg"
    assert sub.HasField("fifo") and not sub.fifo
    assert sub.receive_batch_size == 32 and sub.long_polling_timeout.seconds == 20
    policy = reply.settings.backoff_policy
    assert policy.max_attempts == 17 and policy.WhichOneof("strategy") == "customized_backoff"
    assert [d.seconds for d in policy.customized_backoff.next][:4] == [1, 5, 10, 30]


def _message(body: bytes, message_id: str = "01ABC", **props: str) -> Any:
    m = V2.Message(body=body)
    m.topic.name = "SendT"
    m.system_properties.message_id = message_id
    m.system_properties.message_type = MessageType.NORMAL
    m.user_properties.update(props)
    return m


def test_refused_sends_store_nothing(broker, channel):
    add_topic_config(broker, TopicConfig("SendT", 1, 1))
    cases = [
        (_message(b""), Code.MESSAGE_BODY_EMPTY),
        (_message(b"x" * (1024 * 1024 + 1)), Code.MESSAGE_BODY_TOO_LARGE),
        (_message(b"x", message_id=""), Code.ILLEGAL_MESSAGE_ID),
        (_message(b"x", UNIQ_KEY="mine"), Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
        (_message(b"x", k="a\x01b"), Code.ILLEGAL_MESSAGE_PROPERTY_KEY),
    ]
    for msg, code in cases:
        r = call(channel, "SendMessage", V2.SendMessageRequest(messages=[msg]), "SendMessageResponse")
        assert r.status.code == code, (msg, r)
    tagged = _message(b"x")
    tagged.system_properties.tag = "a|b"
    r = call(channel, "SendMessage", V2.SendMessageRequest(messages=[tagged]), "SendMessageResponse")
    assert r.status.code == Code.ILLEGAL_MESSAGE_TAG
    assert broker.message_store.get_max_offset_in_queue("SendT", 0) == 0
    ok = call(channel, "SendMessage", V2.SendMessageRequest(messages=[_message(b"fine")]), "SendMessageResponse")
    assert ok.status.code == Code.OK and ok.entries[0].message_id == "01ABC" and ok.entries[0].offset == 0
    assert broker.message_store.get_max_offset_in_queue("SendT", 0) == 1


def test_end_transaction_with_a_bad_id(broker, channel):
    req = V2.EndTransactionRequest(transaction_id="not-an-id", message_id="01ABC", resolution=1)
    req.topic.name = "SendT"
    r = call(channel, "EndTransaction", req, "EndTransactionResponse")
    assert r.status.code == Code.INVALID_TRANSACTION_ID
    req.transaction_id = "0000000000000000-0000000000000000"  # no half message there
    r = call(channel, "EndTransaction", req, "EndTransactionResponse")
    assert r.status.code != Code.OK


# Guava 32.0.1 Hashing.consistentHash(key.hashCode(), n) for n = 1, 2, 4, 8, 16, 33 (computed with java)
GUAVA_CONSISTENT_HASH = {
    "order-1": [0, 0, 3, 3, 3, 3],
    "order-2": [0, 0, 2, 2, 11, 28],
    "order-3": [0, 1, 3, 7, 7, 21],
    "a": [0, 0, 0, 0, 0, 29],
    "": [0, 0, 0, 0, 0, 0],
    "été": [0, 1, 1, 7, 7, 25],
    "fifo-group-0": [0, 0, 2, 6, 13, 30],
    "z" * 20: [0, 1, 3, 3, 10, 30],
}


def test_fifo_queue_choice_is_guava_consistent_hash():
    for key, want in GUAVA_CONSISTENT_HASH.items():
        assert [consistent_hash(tags_hash(key), n) for n in (1, 2, 4, 8, 16, 33)] == want, key


def _run(code: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)  # the rmq_core this test runs (installed, or PYTHONPATH's source tree)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)


def test_without_the_extra_grpc_port_is_one_line_and_the_broker_needs_no_grpc(tmp_path):
    blocked = "import sys; sys.modules['grpc'] = None\n"
    r = _run(
        blocked
        + f"from rmq_core.cli import main; sys.exit(main(['broker', '--dir', {str(tmp_path)!r}, '--port', '0', '--grpc-port', '0']))"
    )
    assert r.returncode == 1, r
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "rmq_core[grpc]" in lines[0], r.stderr
    r = _run(
        "import sys\n"
        "from rmq_core.broker import Broker, BrokerConfig\n"
        f"b = Broker(BrokerConfig(listen_port=0, store_path_root_dir={str(tmp_path / 's')!r})).start()\n"
        "b.shutdown()\n"
        "print('grpc' in sys.modules, b.controller.grpc_address)\n"
    )
    assert r.returncode == 0 and r.stdout.split() == ["False", "None"], r


def test_plaintext_and_tls_on_one_port(grpc_transport, tmp_path):
    """TLS and plaintext on the gRPC port: the native front's own TLS, or grpc.aio's listeners behind the relay."""
    cfg = BrokerConfig(
        listen_port=0, grpc_port=0, store_path_root_dir=str(tmp_path / "store"), grpc_tls_self_signed=True
    )
    with Broker(cfg) as b:
        add_topic_config(b, TopicConfig("TlsT", 2, 2))
        addr = b.controller.grpc_address
        server = b.controller.grpc_server
        assert (server.native is not None, server.front is None) == (grpc_transport == "native",) * 2
        cert = (Path(cfg.store_config_dir) / "grpc-tls-cert.pem").read_bytes()
        req = V2.QueryRouteRequest(topic=V2.Resource(name="TlsT"))
        with grpc.insecure_channel(addr) as plain:
            assert call(plain, "QueryRoute", req, "QueryRouteResponse").status.code == Code.OK
        with grpc.secure_channel(addr, grpc.ssl_channel_credentials(root_certificates=cert)) as tls:
            r = call(tls, "QueryRoute", req, "QueryRouteResponse")
            assert r.status.code == Code.OK and len(r.message_queues) == 2
        # a TLS client that does not trust the certificate is refused in the handshake
        with grpc.secure_channel(addr, grpc.ssl_channel_credentials()) as untrusted:
            with pytest.raises(grpc.RpcError) as e:
                call(untrusted, "QueryRoute", req, "QueryRouteResponse")
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE


def test_cli_broker_serves_grpc(tmp_path):
    env = dict(os.environ)  # the rmq_core this test runs (installed, or PYTHONPATH's source tree)
    cmd = [sys.executable, "-m", "rmq_core.cli", "broker", "--dir", str(tmp_path), "--port", "0", "--grpc-port", "0"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env) as proc:
        _check_cli_broker(proc)


def _check_cli_broker(proc: subprocess.Popen[str]) -> None:
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert ", gRPC 127.0.0.1:" in line, line
        addr = line.rsplit("gRPC ", 1)[1].strip()
        with grpc.insecure_channel(addr) as ch:
            cluster = V2.QueryRouteRequest(topic=V2.Resource(name="DefaultCluster"))  # TBW102: a system topic
            r = call(ch, "QueryRoute", cluster, "QueryRouteResponse")
            assert r.status.code == Code.OK and r.message_queues
    finally:
        proc.terminate()
        assert proc.wait(30) == 0


def test_a_node_gives_each_broker_its_grpc_port_and_tls(tmp_path):
    """``serve --brokers 2 --grpc-port P --grpc-tls-self-signed``: broker i serves gRPC on P + i, plaintext and TLS
    (each its own certificate, made in its store)."""
    from rmq_core.testing.topic_admin import create_topic

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        base = probe.getsockname()[1]
    root = tmp_path / "node"
    cmd = [sys.executable, "-m", "rmq_core.cli", "serve", "--brokers", "2", "--dir", str(root), "--namesrv-port", "0"]
    cmd += ["--port", "0", "--name", "gn", "--grpc-port", str(base), "--grpc-tls-self-signed"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ)) as p:
        try:
            assert p.stdout is not None
            lines = [p.stdout.readline()]  # log lines, then the serve line, then one line per broker
            while lines[0] and not lines[0].startswith("rmq-core serve: name server "):
                lines[0] = p.stdout.readline()
            lines += [p.stdout.readline(), p.stdout.readline()]
            namesrv = lines[0].split("name server ", 1)[1].split(",", 1)[0]
            assert [f"gRPC port {base + i}" in line for i, line in enumerate(lines[1:])] == [True, True], lines
            create_topic(namesrv, "NodeGrpcT", queues=2)
            req = V2.QueryRouteRequest(topic=V2.Resource(name="NodeGrpcT"))
            for i in range(2):
                addr = f"127.0.0.1:{base + i}"
                cert = (root / f"gn-{i}" / "config" / "grpc-tls-cert.pem").read_bytes()
                with grpc.secure_channel(addr, grpc.ssl_channel_credentials(root_certificates=cert)) as tls:
                    r = call(tls, "QueryRoute", req, "QueryRouteResponse")
                with grpc.insecure_channel(addr) as ch:
                    assert call(ch, "QueryRoute", req, "QueryRouteResponse").status.code == Code.OK
                assert r.status.code == Code.OK
                assert {q.broker.name for q in r.message_queues} == {f"gn-{i}"}  # each broker advertises itself
                assert {q.broker.endpoints.addresses[0].port for q in r.message_queues} == {base + i}
        finally:
            p.terminate()
            assert p.wait(60) == 0


def test_a_certificate_file_the_front_cannot_use_is_named_at_start(tmp_path, monkeypatch):
    """A grpcTlsCertFile that is no PEM certificate stops the broker's start with one error naming the setting (the
    native front's check; grpc.aio's TLS listener serves only the Python backend)."""
    from rmq_core.broker.grpc import grpc_server

    monkeypatch.setattr(grpc_server, "NATIVE_FRONT", True)
    (tmp_path / "cert.pem").write_text("not a certificate\n")
    (tmp_path / "key.pem").write_text("not a key\n")
    cfg = BrokerConfig(
        listen_port=0,
        grpc_port=0,
        store_path_root_dir=str(tmp_path / "store"),
        grpc_tls_cert_file=str(tmp_path / "cert.pem"),
        grpc_tls_key_file=str(tmp_path / "key.pem"),
    )
    with pytest.raises(ValueError, match=r"grpcTlsCertFile=.*cert\.pem") as e:
        Broker(cfg).start()
    assert "tls_cert_pem" in str(e.value) or "tls_key_pem" in str(e.value)
