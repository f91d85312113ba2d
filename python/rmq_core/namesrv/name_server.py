"""``NameServer``: RocketMQ's name server (``NamesrvController``) on a background thread: the route tables, the
request processor, a scan expiring inactive brokers every 5 s, and route removal when a broker's connection closes.

Usage::

    with NameServer(listen_port=0) as ns:      # port 0 picks a free port
        ns.address                             # "127.0.0.1:PORT"

Invariants: every table access happens on the server's event loop; ``call``/``scan_not_active_broker`` hop onto it
from other threads. ``shutdown`` stops the scan task before the loop closes, so nothing is left pending.

Thread-safety: ``start``/``shutdown``/``call`` may be called from any thread except the server's own loop thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Self, TypeVar

from rmq_core.namesrv.default_request_processor import DefaultRequestProcessor
from rmq_core.namesrv.kv_config_manager import KVConfigManager
from rmq_core.namesrv.route_info_manager import RouteInfoManager
from rmq_core.remoting.connection import Connection
from rmq_core.remoting.remoting_server import (
    FRAME_DEADLINE_S,
    SERVER_CHANNEL_MAX_IDLE_TIME_S,
    SERVER_MAX_CONNECTIONS,
    RemotingServer,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

SCAN_NOT_ACTIVE_BROKER_INTERVAL_S = 5.0  # NamesrvController: scanNotActiveBroker every 5 s


class NameServer:
    def __init__(
        self,
        listen_port: int = 9876,
        host: str = "127.0.0.1",
        scan_not_active_broker_interval_s: float = SCAN_NOT_ACTIVE_BROKER_INTERVAL_S,
        now_ms: Callable[[], int] | None = None,
        kv_config_path: str | None = None,
        max_connections: int = SERVER_MAX_CONNECTIONS,
        idle_timeout_s: float = SERVER_CHANNEL_MAX_IDLE_TIME_S,
        frame_deadline_s: float = FRAME_DEADLINE_S,
    ) -> None:
        self.host = host
        self.listen_port = listen_port
        self.scan_not_active_broker_interval_s = scan_not_active_broker_interval_s
        self.now_ms: Callable[[], int] = now_ms or (lambda: int(time.time() * 1000))
        self.route_info_manager = RouteInfoManager()
        self.remoting_server = RemotingServer(
            host,
            listen_port,
            max_connections=max_connections,
            idle_timeout_s=idle_timeout_s,
            frame_deadline_s=frame_deadline_s,
        )
        self.kv_config_manager = KVConfigManager(kv_config_path)  # None: in memory only
        self.kv_config_manager.load()
        self.processor = DefaultRequestProcessor(self.route_info_manager, self.now_ms, self.kv_config_manager)
        self.processor.register_to(self.remoting_server)
        self.remoting_server.on_close.append(self._on_channel_close)
        self._scan_task: asyncio.Task[None] | None = None
        self._started = False

    # --- lifecycle -----------------------------------------------------------------------------------------------
    def start(self) -> Self:
        """Listen (on a background thread) and start the inactive-broker scan; returns once listening."""
        if self._started:
            return self
        self.remoting_server.start_in_thread(name=f"rmq-namesrv-{self.listen_port}")
        self._started = True
        self.call_async(self._start_tasks)
        log.info("name server listening on %s", self.address)
        return self

    async def _start_tasks(self) -> None:
        self._scan_task = asyncio.get_running_loop().create_task(self._scan_loop(), name="namesrv-scan")

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self.scan_not_active_broker_interval_s)
            try:
                self.route_info_manager.scan_not_active_broker(self.now_ms())
            except Exception:  # a scan failure must not end the periodic task
                log.exception("scanNotActiveBroker failed")

    async def _stop_tasks(self) -> None:
        task, self._scan_task = self._scan_task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    def shutdown(self) -> None:
        if not self._started:
            return
        try:
            self.call_async(self._stop_tasks)
        finally:
            self._started = False
            self.remoting_server.stop_thread()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.remoting_server.port}"

    @property
    def port(self) -> int:
        return self.remoting_server.port

    # --- loop hopping ----------------------------------------------------------------------------------------------
    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        loop = self.remoting_server.loop
        if loop is None or not self._started:
            raise RuntimeError("name server is not started")
        return loop

    def call(self, fn: Callable[..., T], *args: Any, timeout: float = 5.0) -> T:
        """Run ``fn(*args)`` on the server's loop and return its result (for tests and tools)."""
        loop = self.loop

        async def run() -> T:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout)

    def call_async(self, coro_fn: Callable[[], Any], timeout: float = 5.0) -> Any:
        """Run the coroutine ``coro_fn()`` on the server's loop and return its result."""
        loop = self.loop
        return asyncio.run_coroutine_threadsafe(coro_fn(), loop).result(timeout)

    def scan_not_active_broker(self, now_ms: int | None = None) -> int:
        """Run one expiry scan now (on the loop), with ``now_ms`` as the current time; returns brokers removed."""
        now = self.now_ms() if now_ms is None else now_ms
        return self.call(self.route_info_manager.scan_not_active_broker, now)

    # --- connection events -----------------------------------------------------------------------------------------
    def _on_channel_close(self, conn: Connection) -> None:
        self.route_info_manager.on_channel_destroy(conn.remote_address, conn)
