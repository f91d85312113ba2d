"""GrpcServer: the broker's ``apache.rocketmq.v2.MessagingService`` endpoint (``--grpc-port``) on the broker's own event
loop. With the Rust backend the extension's ``GrpcFront`` serves the port (``grpc_native_transport.py``; HTTP/2,
gRPC framing and TLS on the extension's threads; with a certificate, TLS and plaintext on the same port, the first
byte picks); with ``RMQ_CORE_BACKEND=python`` a ``grpc.aio`` server (with a certificate: ``grpc_tls_front.py`` relays
TLS connections to a grpc.aio TLS listener, plaintext ones to the plaintext one). Both run the same handlers.

The service's methods are registered by name through a generic handler (no generated stubs: the messages come from
``messaging_v2``); an RPC rmq_core does not serve (PullMessage, offsets, Recall, Lite) answers UNIMPLEMENTED, as any
gRPC server does for an unknown method. A refusal (``GrpcStatusError``) is answered as the response's v2 ``status``;
any other exception of a handler is logged and answered INTERNAL.
Needs the ``grpcio`` package (``rmq_core[grpc]``); ``rmq_core.broker.grpc.require_grpc`` checks it with a one-line
error. Started and stopped on the broker's loop (``BrokerController``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import grpc

from rmq_core._backend import backend
from rmq_core.broker.grpc.grpc_consumer_service import GrpcConsumerService
from rmq_core.broker.grpc.grpc_message_converter import GrpcStatusError
from rmq_core.broker.grpc.grpc_messaging_service import GrpcMessagingService, status
from rmq_core.broker.grpc.grpc_tls_front import LOOPBACK, GrpcTlsFront, self_signed_cert
from rmq_core.broker.grpc.messaging_v2 import RPCS, SERVICE, V2

if TYPE_CHECKING:
    from rmq_core.broker.grpc.grpc_broker import GrpcBroker
    from rmq_core.broker.grpc.grpc_native_transport import GrpcNativeTransport

log = logging.getLogger(__name__)

SWEEP_PERIOD_S = 10.0  # how often silent clients are looked for (as the broker's channel scan)
STOP_GRACE_S = 1.0  # in-flight RPCs get this long at shutdown
MAX_RECEIVE_MESSAGE_BYTES = 8 * 1024 * 1024  # above the 4 MiB body limit (a body is refused by status, not by grpc)
# HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS: the streams one connection may hold open (long polls, Telemetry); a client
# that never reads costs at most this many handlers' buffers; grpc clients queue calls beyond it
MAX_STREAMS_PER_CONNECTION = 256
# plaintext served by the extension's front (Rust backend); False: by grpc.aio (RMQ_CORE_BACKEND=python; tests set it)
NATIVE_FRONT = backend() == "rust"


_BACKGROUND: set[asyncio.Task[Any]] = set()  # clean-ups in flight (a task nobody holds may be collected)


def _spawn(coro: Any) -> None:
    task = asyncio.ensure_future(coro)
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def _answering_refusals(
    impl: Callable[..., Any], response: Any, streaming: bool, check: Callable[[Any, Any], None] | None = None
) -> Callable[..., Any]:
    """``impl`` with a ``GrpcStatusError`` answered as its response's ``status`` (every v2 response has one);
    ``check(request, context)`` (the ACL) first when given."""
    if streaming:

        async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
            try:
                if check is not None:
                    check(request, context)
                async for item in impl(request, context):
                    yield item
            except GrpcStatusError as e:
                yield response(status=status(e.code, e.message))

        return stream

    async def unary(request: Any, context: Any) -> Any:
        try:
            if check is not None:
                check(request, context)
            return await impl(request, context)
        except GrpcStatusError as e:
            return response(status=status(e.code, e.message))

    return unary


class GrpcServer:
    def __init__(self, controller: GrpcBroker) -> None:
        self.controller = controller
        self.service = GrpcMessagingService(controller)
        self.consumer_service = GrpcConsumerService(self.service)
        renewal = self.consumer_service.renewal
        self.service.on_client_gone = lambda client_id: _spawn(renewal.clear_client(client_id))
        self._server: Any = None  # grpc.aio's server, with the Python backend
        self.native: GrpcNativeTransport | None = None  # the extension's front (plaintext and TLS), Rust backend
        self._serving = False
        self.front: GrpcTlsFront | None = None  # with TLS on grpc.aio: the public port's first-byte relay
        self.port = 0
        self._sweeper: asyncio.Task[None] | None = None

    def _methods(self) -> list[tuple[str, Callable[..., Any], Any, Any, bool, bool]]:
        """The served RPCs: (name, handler with refusals answered, request class, response class, client streaming,
        server streaming); an RPC rmq_core does not serve is left out (answered UNIMPLEMENTED)."""
        methods = []
        for rpc, req, resp, client_streaming, server_streaming in RPCS:
            name = _snake(rpc)
            impl: Callable[..., Any] | None = getattr(self.consumer_service, name, None) or getattr(
                self.service, name, None
            )
            if impl is None:
                continue
            check = None if client_streaming else self.service.check_request
            handler = _answering_refusals(impl, getattr(V2, resp), server_streaming, check)
            methods.append((rpc, handler, getattr(V2, req), getattr(V2, resp), client_streaming, server_streaming))
        return methods

    def _handlers(self) -> Any:
        handlers: dict[str, Any] = {}
        for rpc, handler, req, resp, client_streaming, server_streaming in self._methods():
            kind = {
                (False, False): grpc.unary_unary_rpc_method_handler,
                (False, True): grpc.unary_stream_rpc_method_handler,
                (True, True): grpc.stream_stream_rpc_method_handler,
            }[(client_streaming, server_streaming)]
            handlers[rpc] = kind(
                handler, request_deserializer=req.FromString, response_serializer=resp.SerializeToString
            )
        return grpc.method_handlers_generic_handler(SERVICE, handlers)

    def _native_front(self, host: str, port: int, tls: tuple[bytes, bytes] | None) -> GrpcNativeTransport:
        """The extension's HTTP/2 front bound to ``host:port``, serving the same methods (OSError when taken); with
        ``tls`` (key, certificate PEM) TLS beside plaintext (ValueError naming a PEM it cannot use)."""
        from rmq_core._core import GrpcFront
        from rmq_core.broker.grpc.grpc_native_transport import GrpcNativeTransport, NativeMethod

        methods = {
            f"/{SERVICE}/{rpc}": NativeMethod(handler, req.FromString, client_streaming, server_streaming)
            for rpc, handler, req, _resp, client_streaming, server_streaming in self._methods()
        }
        streaming = [f"/{SERVICE}/{rpc}" for rpc, _req, _resp, cs, _ss in RPCS if cs]
        front = GrpcFront(
            host,
            port,
            client_streaming=streaming,
            max_concurrent_streams=MAX_STREAMS_PER_CONNECTION,
            max_message_bytes=MAX_RECEIVE_MESSAGE_BYTES,
            tls_cert_pem=None if tls is None else tls[1],
            tls_key_pem=None if tls is None else tls[0],
        )
        return GrpcNativeTransport(front, methods)

    async def start(self, host: str, port: int) -> int:
        """Bind ``host:port`` (0: a free port) and serve; returns the bound port. The extension's front
        (``grpc_native_transport``) serves plaintext and TLS with the Rust backend; grpc.aio with the Python one."""
        tls = self._tls_pem()
        native = NATIVE_FRONT
        server = None
        if native:
            try:
                self.native = self._native_front(host, port, tls)
            except ValueError as e:  # a PEM the front cannot use: name the settings it came from
                raise ValueError(f"gRPC TLS ({self._tls_source()}): {e}") from None
            self.native.start()
            bound = int(self.native.front.port)
        else:
            server = grpc.aio.server(
                options=[
                    ("grpc.max_receive_message_length", MAX_RECEIVE_MESSAGE_BYTES),
                    ("grpc.so_reuseport", 0),
                    ("grpc.max_concurrent_streams", MAX_STREAMS_PER_CONNECTION),
                ]
            )
            server.add_generic_rpc_handlers((self._handlers(),))
            if tls is None:
                bound = server.add_insecure_port(f"{host}:{port}")
                if bound == 0:
                    raise OSError(f"gRPC port {host}:{port} could not be bound")
                await server.start()
            else:  # plaintext and TLS on one port: two loopback listeners behind the first-byte relay
                plain_port = server.add_insecure_port(f"{LOOPBACK}:0")
                tls_port = server.add_secure_port(f"{LOOPBACK}:0", grpc.ssl_server_credentials([tls]))
                await server.start()
                self.front = GrpcTlsFront(plain_port, tls_port)
                self.service.client_address = self.front.client_address
                try:
                    bound = await self.front.start(host, port)
                except OSError:
                    await self._stop_servers(server)
                    raise
        self.consumer_service.renewal.start()
        self._server = server
        self._serving = True
        self.port = bound
        self.service.advertised = (self.controller.broker_config.broker_ip1, bound)
        log.info("gRPC MessagingService serving at %s:%d (%s)", host, bound, "native" if native else "grpc.aio")
        return bound

    async def _sweep_clients(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_PERIOD_S)
            try:
                self.service.sweep(self.controller.now_ms())
            except Exception:
                log.exception("sweeping gRPC clients failed")

    def _tls_pem(self) -> tuple[bytes, bytes] | None:
        """(key, certificate) PEM of the configured TLS (files, or self-signed), None without TLS settings."""
        cfg = self.controller.broker_config
        if cfg.grpc_tls_cert_file or cfg.grpc_tls_key_file:
            if not (cfg.grpc_tls_cert_file and cfg.grpc_tls_key_file):
                raise ValueError("gRPC TLS needs both grpcTlsCertFile and grpcTlsKeyFile")
            with open(cfg.grpc_tls_key_file, "rb") as k, open(cfg.grpc_tls_cert_file, "rb") as c:
                key, cert = k.read(), c.read()
        elif cfg.grpc_tls_self_signed:
            key, cert = self_signed_cert(cfg.store_config_dir, cfg.broker_ip1)
        else:
            return None
        return key, cert

    def _tls_source(self) -> str:
        cfg = self.controller.broker_config
        if cfg.grpc_tls_cert_file:
            return f"grpcTlsCertFile={cfg.grpc_tls_cert_file}, grpcTlsKeyFile={cfg.grpc_tls_key_file}"
        return f"grpcTlsSelfSigned, in {cfg.store_config_dir}"

    async def _stop_servers(self, server: Any) -> None:
        native, self.native = self.native, None
        if native is not None:
            await native.stop(STOP_GRACE_S)
        if server is not None:
            await server.stop(STOP_GRACE_S)

    async def stop(self) -> None:
        if not self._serving:
            return
        self._serving = False
        server, self._server = self._server, None
        if self.front is not None:
            await self.front.stop()
        await self.consumer_service.renewal.stop()
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
            await asyncio.gather(sweeper, return_exceptions=True)
        self.service.on_client_gone = None  # a stopping broker releases nothing: its handles expire as they are
        for channel in list(self.service.clients.values()):
            self.service.forget_client(channel)
        await self._stop_servers(server)
