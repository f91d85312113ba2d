"""Bad input against a running broker: an oversized frame, a truncated or garbled frame, a header that is not JSON
close *that* connection (other connections keep working, nothing stored changes); an unknown request code answers
REQUEST_CODE_NOT_SUPPORTED; a missing required header field answers SYSTEM_ERROR naming the field."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from rmq_core.broker import Broker
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import MAX_FRAME_LENGTH, RemotingCommand
from rmq_core.remoting.header import SendMessageRequestHeader, encode_header
from rmq_core.remoting.remoting_client import BlockingRemotingClient


def _send(client: BlockingRemotingClient, addr: str, body: bytes) -> RemotingCommand:
    h = SendMessageRequestHeader(
        producerGroup="p",
        topic="BadInputTopic",
        defaultTopic="TBW102",
        defaultTopicQueueNums=4,
        queueId=0,
        sysFlag=0,
        bornTimestamp=int(time.time() * 1000),
        flag=0,
        properties="TAGS\x01T\x02",
    )
    return client.invoke_sync(
        addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, encode_header(h, short_names=True), body)
    )


def _raw(addr: str) -> socket.socket:
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    return s


def _closed_by_peer(s: socket.socket) -> bool:
    s.settimeout(5)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def _stored(broker: Broker) -> bytes:
    r = broker.message_store.get_message("g", "BadInputTopic", 0, 0, 32)
    return r.body


BAD_FRAMES = {
    "oversized": struct.pack(">i", MAX_FRAME_LENGTH + 1),
    "negative length": struct.pack(">i", -5),
    "header past frame": struct.pack(">ii", 8, 100) + b"\0" * 4,
    "header not json": struct.pack(">ii", 4 + 9, 9) + b"{not json",
    "json without code": struct.pack(">ii", 4 + 2, 2) + b"{}",
    "unknown serialize type": struct.pack(">ii", 4 + 2, (7 << 24) | 2) + b"{}",
}


@pytest.mark.parametrize("frame", list(BAD_FRAMES.values()), ids=list(BAD_FRAMES))
def test_bad_frame_closes_only_that_connection(broker: Broker, client: BlockingRemotingClient, frame: bytes) -> None:
    assert _send(client, broker.address, b"before").code == ResponseCode.SUCCESS
    before = _stored(broker)
    with _raw(broker.address) as s:
        s.sendall(frame)
        assert _closed_by_peer(s)
    assert _send(client, broker.address, b"after").code == ResponseCode.SUCCESS
    after = _stored(broker)
    assert after.startswith(before) and len(after) > len(before)


def test_truncated_frame_then_disconnect_stores_nothing(broker: Broker, client: BlockingRemotingClient) -> None:
    assert _send(client, broker.address, b"one").code == ResponseCode.SUCCESS
    before = _stored(broker)
    h = SendMessageRequestHeader(
        producerGroup="p",
        topic="BadInputTopic",
        defaultTopic="TBW102",
        defaultTopicQueueNums=4,
        queueId=0,
        sysFlag=0,
        bornTimestamp=1,
        flag=0,
    )
    frame = RemotingCommand.request(
        RequestCode.SEND_MESSAGE_V2, encode_header(h, short_names=True), b"x" * 1000
    ).encode()
    with _raw(broker.address) as s:
        s.sendall(frame[: len(frame) // 2])
    time.sleep(0.2)
    assert _stored(broker) == before
    assert _send(client, broker.address, b"two").code == ResponseCode.SUCCESS


def test_unknown_request_code(broker: Broker, client: BlockingRemotingClient) -> None:
    r = client.invoke_sync(broker.address, RemotingCommand.request(9999, {}))
    assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert "9999" in (r.remark or "")


def test_missing_required_header_field_names_it(broker: Broker, client: BlockingRemotingClient) -> None:
    r = client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.PULL_MESSAGE, {"topic": "t"}))
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert "consumerGroup" in (r.remark or "")
    r = client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "p"}, b"x"))
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert "topic" in (r.remark or "")


def test_rocketmq_binary_header_is_understood(broker: Broker) -> None:
    """A request with a ROCKETMQ (binary) header, as the C++ client can send, is answered."""
    req = RemotingCommand.request(9999, {"k": "v"})
    with _raw(broker.address) as s:
        s.sendall(req.encode(serialize_type=1))
        head = s.recv(8)
        assert len(head) == 8
        (length,) = struct.unpack(">i", head[:4])
        rest = head[4:]
        while len(rest) < length:
            chunk = s.recv(length - len(rest))
            assert chunk
            rest += chunk
    resp = RemotingCommand.decode_frame(rest)
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and resp.opaque == req.opaque


def test_a_start_that_fails_late_releases_every_port_thread_and_file(tmp_path):
    # the metrics port is taken: start() fails after the remoting server, the HA service and the services started;
    # it raises, and leaves nothing behind — both ports can be bound again and a broker starts on the same store
    import threading

    from rmq_core.broker import BrokerConfig

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    root = str(tmp_path / "store")
    threads_before = {t.ident for t in threading.enumerate()}
    b = Broker(BrokerConfig(listen_port=0, store_path_root_dir=root, metrics_prom_exporter_port=taken.getsockname()[1]))
    with pytest.raises(OSError):
        b.start()
    taken.close()
    ha = b.controller.replication.ha_service
    assert ha is not None and ha.port > 0  # it had got that far
    for port in (b.controller.remoting_server.port, ha.port):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a listener still open fails it all the same
            s.bind(("127.0.0.1", port))  # released
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(
        t.ident not in threads_before and t.name.startswith("rmq-broker") for t in threading.enumerate()
    ):
        time.sleep(0.05)
    assert not [t.name for t in threading.enumerate() if t.ident not in threads_before and t.name.startswith("rmq-")]
    with Broker(BrokerConfig(listen_port=0, store_path_root_dir=root)) as again:
        assert again.address
