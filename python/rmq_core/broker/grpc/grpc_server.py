"""GrpcServer: the broker's ``apache.rocketmq.v2.MessagingService`` endpoint (``--grpc-port``), a ``grpc.aio`` server on
the broker's own event loop (grpc.aio runs on uvloop's loop), plaintext HTTP/2, and TLS on the same port when a
certificate is configured (``grpc_tls_front.py``).

The service's methods are registered by name through a generic handler (no generated stubs: the messages come from
``messaging_v2``); an RPC rmq_core does not serve (PullMessage, offsets, Recall, Lite) answers UNIMPLEMENTED, as any
gRPC server does for an unknown method. A refusal (``GrpcStatusError``) is answered as the response's v2 ``status``;
any other exception of a handler is logged and answered INTERNAL by grpc.
Needs the ``grpcio`` package (``rmq_core[grpc]``); ``rmq_core.broker.grpc.require_grpc`` checks it with a one-line
error. Started and stopped on the broker's loop (``BrokerController``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import grpc

from rmq_core.broker.grpc.grpc_consumer_service import GrpcConsumerService
from rmq_core.broker.grpc.grpc_message_converter import GrpcStatusError
from rmq_core.broker.grpc.grpc_messaging_service import GrpcMessagingService, status
from rmq_core.broker.grpc.grpc_tls_front import LOOPBACK, GrpcTlsFront, self_signed_cert
from rmq_core.broker.grpc.messaging_v2 import RPCS, SERVICE, V2

if TYPE_CHECKING:
    from rmq_core.broker.grpc.grpc_broker import GrpcBroker

log = logging.getLogger(__name__)

SWEEP_PERIOD_S = 10.0  # how often silent clients are looked for (as the broker's channel scan)
STOP_GRACE_S = 1.0  # in-flight RPCs get this long at shutdown
MAX_RECEIVE_MESSAGE_BYTES = 8 * 1024 * 1024  # above the 4 MiB body limit (a body is refused by status, not by grpc)
# HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS: the streams one connection may hold open (long polls, Telemetry); a client
# that never reads costs at most this many handlers' buffers; grpc clients queue calls beyond it
MAX_STREAMS_PER_CONNECTION = 256


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
        self._server: Any = None
        self.front: GrpcTlsFront | None = None  # with TLS: the public port's first-byte switch
        self.port = 0
        self._sweeper: asyncio.Task[None] | None = None

    def _handlers(self) -> Any:
        methods: dict[str, Any] = {}
        for rpc, req, resp, client_streaming, server_streaming in RPCS:
            name = _snake(rpc)
            impl: Callable[..., Any] | None = getattr(self.consumer_service, name, None) or getattr(
                self.service, name, None
            )
            if impl is None:
                continue  # not served yet: grpc answers UNIMPLEMENTED
            kind = {
                (False, False): grpc.unary_unary_rpc_method_handler,
                (False, True): grpc.unary_stream_rpc_method_handler,
                (True, True): grpc.stream_stream_rpc_method_handler,
            }[(client_streaming, server_streaming)]
            methods[rpc] = kind(
                _answering_refusals(
                    impl, getattr(V2, resp), server_streaming, None if client_streaming else self.service.check_request
                ),
                request_deserializer=getattr(V2, req).FromString,
                response_serializer=getattr(V2, resp).SerializeToString,
            )
        return grpc.method_handlers_generic_handler(SERVICE, methods)

    async def start(self, host: str, port: int) -> int:
        """Bind ``host:port`` (0: a free port) and serve; returns the bound port."""
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", MAX_RECEIVE_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0),
                ("grpc.max_concurrent_streams", MAX_STREAMS_PER_CONNECTION),
            ]
        )
        server.add_generic_rpc_handlers((self._handlers(),))
        tls = self._tls_credentials()
        if tls is None:
            bound = server.add_insecure_port(f"{host}:{port}")
            if bound == 0:
                raise OSError(f"gRPC port {host}:{port} could not be bound")
            await server.start()
        else:  # plaintext and TLS on one port: two loopback listeners behind the front
            plain_port = server.add_insecure_port(f"{LOOPBACK}:0")
            tls_port = server.add_secure_port(f"{LOOPBACK}:0", tls)
            await server.start()
            self.front = GrpcTlsFront(plain_port, tls_port)
            self.service.client_address = self.front.client_address
            try:
                bound = await self.front.start(host, port)
            except OSError:
                await server.stop(0)
                raise
        self.consumer_service.renewal.start()
        self._server = server
        self.port = bound
        self.service.advertised = (self.controller.broker_config.broker_ip1, bound)
        log.info("gRPC MessagingService serving at %s:%d", host, bound)
        return bound

    async def _sweep_clients(self) -> None:
        while True:
            await asyncio.sleep(SWEEP_PERIOD_S)
            try:
                self.service.sweep(self.controller.now_ms())
            except Exception:
                log.exception("sweeping gRPC clients failed")

    def _tls_credentials(self) -> Any:
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
        return grpc.ssl_server_credentials([(key, cert)])

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
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
        await server.stop(STOP_GRACE_S)
