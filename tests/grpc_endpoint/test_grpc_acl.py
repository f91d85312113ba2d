"""The broker's plain ACL (``aclEnable``, plain_acl.yml) over gRPC, with RocketMQ's 5.x Python SDK: the SDK signs
each call (``authorization: MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=x-mq-date-time, Signature=hex(HMAC-SHA1(
secret, x-mq-date-time))``); with the right key its Producer sends and its SimpleConsumer receives and acks; a wrong
secret, an unknown key, or an account without PUB on the topic / SUB on the group is refused with Code UNAUTHORIZED
(as Apache 5.3's proxy) and nothing is stored or consumed. Raw grpcio calls check the code, the unsigned case and
the per-RPC resources (SendMessage PUB, ReceiveMessage the group SUB); a global white address applies to TLS clients
(relayed by the TLS front) from their own address."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("grpc", reason="the rmq_core[grpc] extra (grpcio) is not installed")
pytest.importorskip("yaml", reason="the rmq_core[acl] extra (PyYAML) is not installed")

from rmq_core.broker.grpc.messaging_v2 import SERVICE, V2, Code
from rmq_core.common.topic_config import TopicConfig

from support.grpc5_helpers import endpoint, grpc_cluster, needs_sdk, sdk
from support.send_helpers import on_loop

pytestmark = needs_sdk

TOPIC, READ_ONLY, GROUP = "grpcAclTopic", "grpcAclReadOnly", "grpcAclGroup"
AK, SK = "grpc-user", "grpc-secret-1"
NO_GROUP_AK, NO_GROUP_SK = "grpc-nogroup", "grpc-secret-2"
PLAIN_ACL_YML = f"""
accounts:
  - accessKey: {AK}
    secretKey: {SK}
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - {TOPIC}=PUB|SUB
      - {READ_ONLY}=SUB
    groupPerms:
      - {GROUP}=SUB
  - accessKey: {NO_GROUP_AK}
    secretKey: {NO_GROUP_SK}
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: DENY
"""


@pytest.fixture(name="acl_cluster")
def _acl_cluster(tmp_path):
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(PLAIN_ACL_YML)
    with grpc_cluster(tmp_path, acl_enable=True, acl_file=str(acl)) as c:
        b = c.brokers[0]
        for name in (TOPIC, READ_ONLY):
            on_loop(b, lambda name=name: b.controller.topic_config_manager.update_topic_config(TopicConfig(name, 4, 4)))
        yield c


def _stored(c, name: str) -> int:
    store = c.brokers[0].controller.message_store
    return sum(max(store.get_max_offset_in_queue(name, q), 0) for q in range(4))


def _unauthorized(result: dict) -> None:
    """The SDK failed (it words a refused route as "failed to fetch topic route"; the codes: the raw test)."""
    assert result.get("errors"), result


def test_right_credentials_send_receive_and_ack(acl_cluster):
    c = acl_cluster
    sent = sdk(endpoint(c), "produce", {"topic": TOPIC, "ak": AK, "sk": SK, "messages": [{"body": "a"}] * 3})["sent"]
    assert len(sent) == 3 and _stored(c, TOPIC) == 3
    steps = [{"op": "receive", "until": 3, "invisible_s": 30, "then": "ack", "timeout_s": 30}]
    r = sdk(endpoint(c), "simple", {"topic": TOPIC, "group": GROUP, "ak": AK, "sk": SK, "await_s": 2, "steps": steps})
    [step] = r["steps"]
    assert sorted(m["message_id"] for m in step["messages"]) == sorted(s["message_id"] for s in sent)


@pytest.mark.parametrize(
    "ak,sk,name",
    [(AK, "not-the-secret", TOPIC), ("nobody", "x", TOPIC), (AK, SK, READ_ONLY)],
    ids=["wrong-secret", "unknown-key", "no-pub-on-topic"],
)
def test_refused_producers_store_nothing(acl_cluster, ak, sk, name):
    c = acl_cluster
    r = sdk(
        endpoint(c), "produce", {"topic": name, "ak": ak, "sk": sk, "messages": [{"body": "x"}], "collect_errors": 1}
    )
    _unauthorized(r)
    assert not r.get("sent") and _stored(c, name) == 0


@pytest.mark.parametrize(
    "ak,sk,why",
    [
        (AK, "not-the-secret", "failed to fetch topic"),  # its QueryRoute refused
        (NO_GROUP_AK, NO_GROUP_SK, f"UnauthorizedException('No default permission for group:{GROUP}')"),
    ],
    ids=["wrong-secret", "no-sub-on-group"],
)
def test_refused_simple_consumers_consume_nothing(acl_cluster, ak, sk, why):
    c = acl_cluster
    sdk(endpoint(c), "produce", {"topic": TOPIC, "ak": AK, "sk": SK, "messages": [{"body": "kept"}]})
    steps = [{"op": "receive", "until": 1, "invisible_s": 30, "then": "ack", "timeout_s": 6}]
    args = {"topic": TOPIC, "group": GROUP, "ak": ak, "sk": sk, "await_s": 2, "steps": steps, "collect_errors": 1}
    r = sdk(endpoint(c), "simple", args)
    [step] = r["steps"]  # the SDK starts anyway (its Settings are refused on the stream): each receive fails
    assert step["messages"] == [] and step["errors"] and all(why in e for e in step["errors"]), r
    # the message is still there for the right account
    steps = [{"op": "receive", "until": 1, "invisible_s": 30, "then": "ack", "timeout_s": 30}]
    r = sdk(endpoint(c), "simple", {"topic": TOPIC, "group": GROUP, "ak": AK, "sk": SK, "await_s": 2, "steps": steps})
    assert [m["body"] for m in r["steps"][0]["messages"]] == ["kept"]


def _call(c, method: str, request, metadata) -> object:
    import grpc

    with grpc.insecure_channel(endpoint(c)) as ch:
        rpc = ch.unary_unary(
            f"/{SERVICE}/{method}",
            request_serializer=type(request).SerializeToString,
            response_deserializer=getattr(V2, method + "Response").FromString,
        )
        return rpc(request, metadata=metadata, timeout=10)


def test_raw_calls_unsigned_refused_signed_served(acl_cluster):
    import hashlib
    import hmac

    c = acl_cluster
    request = V2.QueryRouteRequest()
    request.topic.name = TOPIC
    base = [("x-mq-client-id", "raw-acl-client"), ("x-mq-date-time", "20261128T002900Z")]
    unsigned = _call(c, "QueryRoute", request, base)
    assert unsigned.status.code == Code.UNAUTHORIZED and "accessKey" in unsigned.status.message
    sig = hmac.new(SK.encode(), b"20261128T002900Z", hashlib.sha1).hexdigest()
    auth = f"MQv2-HMAC-SHA1 Credential={AK}, SignedHeaders=x-mq-date-time, Signature={sig}"
    served = _call(c, "QueryRoute", request, [*base, ("authorization", auth)])
    assert served.status.code == Code.OK and len(served.message_queues) == 4
    # the same signature with another date: refused
    other = [("x-mq-client-id", "raw-acl-client"), ("x-mq-date-time", "20261128T003000Z"), ("authorization", auth)]
    assert _call(c, "QueryRoute", request, other).status.code == Code.UNAUTHORIZED
    # not hex
    bad = [*base, ("authorization", f"MQv2-HMAC-SHA1 Credential={AK}, SignedHeaders=x-mq-date-time, Signature=zz")]
    assert _call(c, "QueryRoute", request, bad).status.code == Code.UNAUTHORIZED


def _signed(ak: str, sk: str) -> list[tuple[str, str]]:
    import hashlib
    import hmac

    when = "20261128T003100Z"
    sig = hmac.new(sk.encode(), when.encode(), hashlib.sha1).hexdigest()
    auth = f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}"
    return [("x-mq-client-id", f"raw-{ak}"), ("x-mq-date-time", when), ("authorization", auth)]


def test_raw_calls_need_the_resources_permissions(acl_cluster):
    import grpc

    c = acl_cluster
    send = V2.SendMessageRequest()
    m = send.messages.add()
    m.topic.name, m.body = READ_ONLY, b"x"
    m.system_properties.message_id = "01RAWACL0000000000000001"
    r = _call(c, "SendMessage", send, _signed(AK, SK))
    assert r.status.code == Code.UNAUTHORIZED and f"topic:{READ_ONLY}" in r.status.message, r.status
    assert _stored(c, READ_ONLY) == 0
    m.topic.name = TOPIC
    assert _call(c, "SendMessage", send, _signed(AK, SK)).status.code == Code.OK
    assert _stored(c, TOPIC) == 1

    receive = V2.ReceiveMessageRequest(batch_size=1, auto_renew=False)
    receive.group.name = GROUP
    receive.message_queue.topic.name = TOPIC
    receive.message_queue.id = -1
    receive.invisible_duration.FromSeconds(30)
    with grpc.insecure_channel(endpoint(c)) as ch:
        rpc = ch.unary_stream(
            f"/{SERVICE}/ReceiveMessage",
            request_serializer=V2.ReceiveMessageRequest.SerializeToString,
            response_deserializer=V2.ReceiveMessageResponse.FromString,
        )
        frames = list(rpc(receive, metadata=_signed(NO_GROUP_AK, NO_GROUP_SK), timeout=10))
    assert len(frames) == 1 and frames[0].status.code == Code.UNAUTHORIZED, frames
    assert f"group:{GROUP}" in frames[0].status.message


@contextlib.contextmanager
def _relay_from(source_ip: str, target: tuple[str, int]) -> Iterator[str]:
    """A TCP relay on 127.0.0.1 whose connections to ``target`` come from ``source_ip``: a client on another host."""
    listener = socket.create_server(("127.0.0.1", 0))
    sockets: list[socket.socket] = []
    threads: list[threading.Thread] = []

    def pump(a: socket.socket, b: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := a.recv(65536):
                b.sendall(data)
        with contextlib.suppress(OSError):
            b.shutdown(socket.SHUT_WR)

    def accept() -> None:
        while True:
            try:
                inbound, _ = listener.accept()
            except OSError:
                return  # the listener shut
            out = socket.socket()
            sockets.extend((inbound, out))
            out.bind((source_ip, 0))
            out.connect(target)
            for a, b in ((inbound, out), (out, inbound)):
                threads.append(threading.Thread(target=pump, args=(a, b), daemon=True))
                threads[-1].start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        acceptor.join(5)
        listener.close()
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        for t in threads:
            t.join(5)
        for s in sockets:
            s.close()


def test_white_address_applies_to_tls_clients(grpc_transport, tmp_path):
    """With TLS on, the broker sees each client's own address (the native front serves TLS itself; on grpc.aio the
    first-byte front relays every connection to a loopback listener and maps it back): a global white address admits
    a TLS (and a plaintext) client from it, not one from elsewhere, and that address is the client's connection
    address and its messages' born host."""
    import grpc

    from rmq_core.broker import Broker, BrokerConfig
    from rmq_core.message import decode_messages

    from support.admin_helpers import add_topic_config
    from support.helpers import wait_until

    acl = tmp_path / "plain_acl.yml"
    acl.write_text(f"globalWhiteRemoteAddresses:\n  - 127.0.0.2\n{PLAIN_ACL_YML}")
    cfg = BrokerConfig(listen_port=0, grpc_port=0, store_path_root_dir=str(tmp_path / "s"), grpc_tls_self_signed=True)
    cfg.acl_enable, cfg.acl_file = True, str(acl)
    with Broker(cfg) as b:
        add_topic_config(b, TopicConfig(TOPIC, 1, 1))
        cert = (tmp_path / "s" / "config" / "grpc-tls-cert.pem").read_bytes()
        host, port = b.controller.grpc_address.rsplit(":", 1)
        route = V2.QueryRouteRequest(topic=V2.Resource(name=TOPIC))
        send = V2.SendMessageRequest()
        m = send.messages.add(body=b"white")
        m.topic.name = TOPIC
        m.system_properties.message_id = "01WHITEADDRESS0000000001"
        md = [("x-mq-client-id", "white-client"), ("x-mq-date-time", "20261128T003100Z")]

        def rpc(ch: Any, method: str, request: Any) -> Any:
            return ch.unary_unary(
                f"/{SERVICE}/{method}",
                request_serializer=type(request).SerializeToString,
                response_deserializer=getattr(V2, method + "Response").FromString,
            )(request, metadata=md, timeout=10)

        tls = grpc.ssl_channel_credentials(root_certificates=cert)
        with grpc.secure_channel(f"{host}:{port}", tls) as direct:  # from 127.0.0.1: not white, unsigned
            assert rpc(direct, "QueryRoute", route).status.code == Code.UNAUTHORIZED
        with _relay_from("127.0.0.2", (host, int(port))) as addr:
            with grpc.secure_channel(addr, tls) as white:
                assert rpc(white, "QueryRoute", route).status.code == Code.OK
                assert rpc(white, "SendMessage", send).status.code == Code.OK
                rpc(white, "Heartbeat", V2.HeartbeatRequest())  # the client is known (before Settings: refused)
                remote = b.controller.grpc_server.service.clients["white-client"].remote_address
            with grpc.insecure_channel(addr) as plain:
                assert rpc(plain, "QueryRoute", route).status.code == Code.OK
        assert remote.startswith("127.0.0.2:"), remote
        [stored] = decode_messages(b.controller.message_store.get_message("g", TOPIC, 0, 0, 1).body)
        assert stored.born_host[0] == "127.0.0.2" and stored.body == b"white", stored.born_host
        front = b.controller.grpc_server.front
        if grpc_transport == "native":
            assert front is None, "TLS without the relay"
        else:
            wait_until(lambda: not front.relayed, "each relayed connection's entry gone with it")
