"""The native gRPC front (``rmq_core._core.GrpcFront``, rust/rmq-grpc) under a raw grpcio generic client, with a tiny
echo service on an asyncio loop (``loop.add_reader(front.fileno(), ...)``, as the broker's transport serves it) and no
broker: unary with metadata, peer and deadline as the CALL carries them, server streaming, bidi (client-streaming
MESSAGE / HALF_CLOSE events), an error status with a non-ASCII message, a client's deadline and cancel (one CANCELLED,
then the call is gone), an oversize request, a taken port, close; and TLS beside plaintext on one port (grpcio's
ssl_channel_credentials with the broker's self-signed test certificate), bad PEMs as ValueErrors naming them."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("grpc", reason="the rmq_core[grpc] extra (grpcio) is not installed")

import grpc

from rmq_core._core import GRPC_CALL, GRPC_CANCELLED, GRPC_HALF_CLOSE, GRPC_MESSAGE, GrpcFront
from rmq_core.broker.grpc.grpc_tls_front import self_signed_cert

from support.helpers import wait_until

BIDI = "/echo.Echo/Bidi"
MAX_MESSAGE = 64 * 1024


class EchoLoop:
    """An asyncio loop on its own thread serving the echo methods over one GrpcFront."""

    def __init__(self, cert_pem: bytes | None = None, key_pem: bytes | None = None) -> None:
        self.front = GrpcFront(
            "127.0.0.1", 0, client_streaming=[BIDI], max_message_bytes=MAX_MESSAGE, tls_cert_pem=cert_pem,
            tls_key_pem=key_pem,
        )  # fmt: skip
        self.loop = asyncio.new_event_loop()
        self.cancelled: list[int] = []
        self.hanging: list[int] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.loop.add_reader(self.front.fileno(), self._ready)
        self.loop.run_forever()

    def _ready(self) -> None:
        f = self.front
        for kind, call_id, payload in f.drain():
            if kind == GRPC_CALL:
                method, metadata, peer, timeout_s, request = payload
                if method == "/echo.Echo/Unary":
                    assert f.finish(call_id, 0, "", request)
                elif method == "/echo.Echo/Meta":
                    md = [[k, v.hex() if isinstance(v, bytes) else v] for k, v in metadata]
                    answer = {"metadata": md, "peer": peer, "timeout_s": timeout_s}
                    f.finish(call_id, 0, "", json.dumps(answer).encode())
                elif method == "/echo.Echo/Stream":
                    for i in range(request[0]):
                        assert f.send_message(call_id, bytes([i]) * 10)
                    f.finish(call_id, 0)
                elif method == "/echo.Echo/Fail":
                    f.finish(call_id, 5, "no such topic: é 100%")
                elif method == "/echo.Echo/Hang":
                    self.hanging.append(call_id)
                elif method != BIDI:
                    f.finish(call_id, 12, f"unknown method {method}")
            elif kind == GRPC_MESSAGE:
                assert f.send_message(call_id, payload.upper())
            elif kind == GRPC_HALF_CLOSE:
                f.finish(call_id, 0, "", b"bye")
            elif kind == GRPC_CANCELLED:
                self.cancelled.append(call_id)

    def close(self) -> None:
        async def stop() -> None:
            self.loop.remove_reader(self.front.fileno())

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.front.close(0.5)
        self.loop.close()


@pytest.fixture(scope="module")
def echo() -> Iterator[EchoLoop]:
    e = EchoLoop()
    yield e
    e.close()


@pytest.fixture
def channel(echo: EchoLoop) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"127.0.0.1:{echo.front.port}") as ch:
        yield ch


def test_unary_carries_metadata_peer_and_deadline(channel: grpc.Channel) -> None:
    assert channel.unary_unary("/echo.Echo/Unary")(b"hello") == b"hello"
    raw = channel.unary_unary("/echo.Echo/Meta")(b"", metadata=[("x-key", "v"), ("x-b-bin", b"\x00\xff")], timeout=30)
    got: dict[str, Any] = json.loads(raw)
    assert ["x-key", "v"] in got["metadata"] and ["x-b-bin", "00ff"] in got["metadata"]
    assert not [k for k, _ in got["metadata"] if k in ("content-type", "te", "grpc-timeout", "user-agent")]
    assert got["peer"].startswith("ipv4:127.0.0.1:")
    assert 25 < got["timeout_s"] <= 30.1


def test_server_streaming_and_an_error_status(channel: grpc.Channel) -> None:
    assert list(channel.unary_stream("/echo.Echo/Stream")(bytes([3]))) == [bytes([i]) * 10 for i in range(3)]
    with pytest.raises(grpc.RpcError) as e:
        channel.unary_unary("/echo.Echo/Fail")(b"")
    assert e.value.code() == grpc.StatusCode.NOT_FOUND and e.value.details() == "no such topic: é 100%"
    with pytest.raises(grpc.RpcError) as e:
        channel.unary_unary("/echo.Echo/Nope")(b"")
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_bidi_messages_one_by_one(channel: grpc.Channel) -> None:
    answers = list(channel.stream_stream(BIDI)(iter([b"a", b"bb", b"ccc"])))
    assert answers == [b"A", b"BB", b"CCC", b"bye"]


def test_a_deadline_and_a_cancel_reach_the_loop_once(echo: EchoLoop, channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as e:
        channel.unary_unary("/echo.Echo/Hang")(b"", timeout=0.2)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    first = wait_until(lambda: echo.hanging[:1], "the hanging call")[0]
    wait_until(lambda: first in echo.cancelled, "its CANCELLED")
    future = channel.unary_unary("/echo.Echo/Hang").future(b"")
    second = wait_until(lambda: echo.hanging[1:2], "the second hanging call")[0]
    future.cancel()
    wait_until(lambda: second in echo.cancelled, "the cancelled call's CANCELLED")
    assert echo.cancelled.count(first) == 1 and echo.cancelled.count(second) == 1
    assert not echo.front.finish(second, 0) and not echo.front.send_message(second, b"late")
    assert echo.front.live_calls() == 0


def test_an_oversize_request_is_refused_by_the_front(echo: EchoLoop, channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as e:
        channel.unary_unary("/echo.Echo/Unary")(b"x" * (MAX_MESSAGE + 1))
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert channel.unary_unary("/echo.Echo/Unary")(b"x" * MAX_MESSAGE) == b"x" * MAX_MESSAGE


def test_a_taken_port_is_an_os_error_naming_it(echo: EchoLoop) -> None:
    with pytest.raises(OSError, match=f"127.0.0.1:{echo.front.port}"):
        GrpcFront("127.0.0.1", echo.front.port, client_streaming=[])


def test_bad_arguments_are_value_errors(echo: EchoLoop) -> None:
    with pytest.raises(ValueError, match="max_events"):
        echo.front.drain(0)
    with pytest.raises(ValueError, match="worker_threads"):
        GrpcFront("127.0.0.1", 0, client_streaming=[], worker_threads=0)
    with pytest.raises(ValueError, match="grace_s"):
        echo.front.close(-1)


def test_close_stops_listening() -> None:
    front = GrpcFront("127.0.0.1", 0, client_streaming=[])
    port = front.port
    front.close(0)
    front.close(0)  # idempotent
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_a_front_dropped_without_close_leaves_no_thread(echo: EchoLoop) -> None:
    before = len(os.listdir("/proc/self/task"))
    front = GrpcFront("127.0.0.1", 0, client_streaming=[], worker_threads=2)
    assert len(os.listdir("/proc/self/task")) > before
    del front
    gc.collect()
    wait_until(lambda: len(os.listdir("/proc/self/task")) == before, "the front's threads to end")


@pytest.fixture(scope="module")
def tls_pem(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    """(key, certificate) PEM for 127.0.0.1, as the broker's grpcTlsSelfSigned makes them."""
    return self_signed_cert(str(tmp_path_factory.mktemp("tls")), "127.0.0.1")


def test_tls_and_plaintext_on_one_port(tls_pem: tuple[bytes, bytes]) -> None:
    key, cert = tls_pem
    e = EchoLoop(cert, key)
    try:
        target = f"127.0.0.1:{e.front.port}"
        with grpc.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=cert)) as ch:
            assert ch.unary_unary("/echo.Echo/Unary")(b"over tls") == b"over tls"
            got: dict[str, Any] = json.loads(ch.unary_unary("/echo.Echo/Meta")(b"", metadata=[("x-key", "v")]))
            assert ["x-key", "v"] in got["metadata"] and got["peer"].startswith("ipv4:127.0.0.1:")
            assert list(ch.unary_stream("/echo.Echo/Stream")(bytes([2]))) == [bytes([0]) * 10, bytes([1]) * 10]
            assert list(ch.stream_stream(BIDI)(iter([b"a", b"bb"]))) == [b"A", b"BB", b"bye"]
        with grpc.insecure_channel(target) as ch:
            assert ch.unary_unary("/echo.Echo/Unary")(b"in plaintext") == b"in plaintext"
        wrong_ca = grpc.ssl_channel_credentials(root_certificates=None)  # the system's roots do not know ours
        with grpc.secure_channel(target, wrong_ca) as ch, pytest.raises(grpc.RpcError) as err:
            ch.unary_unary("/echo.Echo/Unary")(b"", timeout=5)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert e.front.live_calls() == 0
    finally:
        e.close()


def test_a_bad_tls_pem_is_a_value_error_naming_it(tls_pem: tuple[bytes, bytes]) -> None:
    key, cert = tls_pem
    with pytest.raises(ValueError, match="tls_cert_pem"):
        GrpcFront("127.0.0.1", 0, client_streaming=[], tls_cert_pem=b"not a pem", tls_key_pem=key)
    with pytest.raises(ValueError, match="tls_key_pem"):
        GrpcFront("127.0.0.1", 0, client_streaming=[], tls_cert_pem=cert, tls_key_pem=cert)
    with pytest.raises(ValueError, match="both"):
        GrpcFront("127.0.0.1", 0, client_streaming=[], tls_cert_pem=cert)
