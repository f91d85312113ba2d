"""GrpcTlsFront: plaintext and TLS gRPC on one port (Apache's proxy ``tlsMode=permissive``) for grpc.aio
(``RMQ_CORE_BACKEND=python``; the extension's GrpcFront does TLS itself). grpc cannot serve both on
one listener, so with TLS on the broker's gRPC server listens on two loopback ports (one plaintext, one TLS) and this
front owns the public port: the first byte of each connection picks the listener (0x16, a TLS handshake record → the
TLS one; anything else, e.g. HTTP/2's preface → the plaintext one) and the bytes are relayed both ways as they are.
Each direction pauses reading while the other side's write buffer is full (flow control). The listeners see the
front's loopback socket as their peer, so the front keeps, per relayed connection, the loopback port of its outbound
socket → the client's real ``host:port`` (``client_address``; set before the first byte is relayed, dropped when the
connection ends): the servicer resolves ``context.peer()`` through it (ACL white addresses, born host, admin's
connection list). ``self_signed_cert`` makes a certificate for tests and trials (openssl). On the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
from typing import Any

log = logging.getLogger(__name__)

TLS_HANDSHAKE = 0x16  # the content type of a TLS record carrying the ClientHello
LOOPBACK = "127.0.0.1"  # where the two listeners are


class _Side(asyncio.Protocol):
    """One socket of a relayed pair; ``other`` is the peer side once both are connected."""

    def __init__(self, front: GrpcTlsFront, other: _Side | None = None) -> None:
        self.front = front
        self.other = other
        self.transport: Any = None
        self.pending: list[bytes] = []  # bytes read before the other side connected
        self.relay_port = 0  # the outbound side: its loopback source port, a key of ``front.relayed``

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        if self.other is not None:  # the outbound side: flush what the client sent meanwhile
            if self.other.transport.is_closing():  # the client left while we connected
                transport.close()
                return
            self.relay_port = int(transport.get_extra_info("sockname")[1])
            self.front.relayed[self.relay_port] = _address(self.other.transport.get_extra_info("peername"))
            self.other.other = self
            for chunk in self.other.pending:
                transport.write(chunk)
            self.other.pending.clear()
            self.other.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        other = self.other
        if other is not None and other.transport is not None:
            other.transport.write(data)
            return
        self.pending.append(data)
        if other is None and len(self.pending) == 1:  # the first bytes of a client: pick the listener
            self.transport.pause_reading()
            tls = data[0] == TLS_HANDSHAKE
            self.front.connect(self, self.front.tls_port if tls else self.front.plain_port)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.relay_port:
            self.front.relayed.pop(self.relay_port, None)
        other = self.other
        if other is not None and other.transport is not None:
            other.transport.close()

    def pause_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.other is not None and self.other.transport is not None:
            self.other.transport.resume_reading()


def _address(peername: Any) -> str:
    """A socket's peer name as ``host:port`` (``[host]:port`` for IPv6), as ``peer_address`` writes grpc's."""
    if not peername:
        return ""
    host, port = str(peername[0]), int(peername[1])
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class GrpcTlsFront:
    def __init__(self, plain_port: int, tls_port: int) -> None:
        self.plain_port = plain_port
        self.tls_port = tls_port
        self.relayed: dict[int, str] = {}  # loopback source port of an outbound socket → its client's host:port
        self._server: asyncio.AbstractServer | None = None
        self._connecting: set[asyncio.Task[Any]] = set()

    def client_address(self, address: str) -> str:
        """The real client of a listener's peer ``address`` (``127.0.0.1:port``) if the front relays it, else it."""
        host, _, port = address.rpartition(":")
        if host == LOOPBACK and port.isdigit():
            return self.relayed.get(int(port), address)
        return address

    async def start(self, host: str, port: int) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Side(self), host, port)
        return int(self._server.sockets[0].getsockname()[1])

    def connect(self, inbound: _Side, port: int) -> None:
        async def run() -> None:
            try:
                await asyncio.get_running_loop().create_connection(lambda: _Side(self, inbound), LOOPBACK, port)
            except OSError as e:
                log.warning("gRPC front: the local listener %d refused: %s", port, e)
                inbound.transport.close()

        task = asyncio.ensure_future(run())
        self._connecting.add(task)
        task.add_done_callback(self._connecting.discard)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()


def self_signed_cert(directory: str, host: str) -> tuple[bytes, bytes]:
    """(key, certificate) PEM of a self-signed certificate for ``host`` (IP or DNS name, and localhost), made once
    with openssl in ``directory`` and reused. RuntimeError when openssl is not installed."""
    key_path, cert_path = os.path.join(directory, "grpc-tls-key.pem"), os.path.join(directory, "grpc-tls-cert.pem")
    if not (os.path.exists(key_path) and os.path.exists(cert_path)):
        openssl = shutil.which("openssl")
        if openssl is None:
            raise RuntimeError("a self-signed gRPC TLS certificate needs the openssl command")
        os.makedirs(directory, exist_ok=True)
        san = f"IP:{host}" if host.replace(".", "").isdigit() or ":" in host else f"DNS:{host}"
        subprocess.run(
            [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", f"/CN={host}",
             "-addext", f"subjectAltName={san},DNS:localhost,IP:127.0.0.1", "-keyout", key_path, "-out", cert_path],
            check=True,
            capture_output=True,
        )  # fmt: skip
    with open(key_path, "rb") as k, open(cert_path, "rb") as c:
        return k.read(), c.read()
