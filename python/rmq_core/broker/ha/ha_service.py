"""HAService: the master's replication endpoint (4.9 ``HAService``: AcceptSocketService + the connection list +
``push2SlaveMaxOffset`` + ``isSlaveOK``), on the broker's loop.

Owns the listener (``ha_listen_port``), an ``HAConnection`` per slave, ``push2_slave_max_offset`` (forwarded to the
``GroupTransferService``) and ``data_event`` (wakes the writers; registered only while a slave is connected).
Invariants:
1. ``is_slave_ok(end)``: at least one slave is connected and ``end - push2_slave_max_offset < ha_slave_fallbehind_max``
   (4.9 ``isSlaveOK``); otherwise a SYNC_MASTER send is answered SLAVE_NOT_AVAILABLE at once.
2. A connection's failure removes only that connection (HAConnection invariant 1).
3. ``shutdown()`` closes the listener and every connection and answers every waiting send False.
Thread-safety: the broker's loop; ``wake()`` may be called from any thread.
Details: docs/BROKER_DESIGN.md, 'Replication: the master's side'.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING

from rmq_core.broker.ha.group_transfer_service import GroupTransferService
from rmq_core.broker.ha.ha_connection import HAConnection
from rmq_core.broker.ha.ha_protocol import (
    DEFAULT_HA_HOUSEKEEPING_INTERVAL_MS,
    DEFAULT_HA_SEND_HEARTBEAT_INTERVAL_MS,
    DEFAULT_HA_SLAVE_FALLBEHIND_MAX,
    DEFAULT_HA_TRANSFER_BATCH_SIZE,
)

if TYPE_CHECKING:
    from rmq_core.store import MessageStore

log = logging.getLogger(__name__)


class HAService:
    def __init__(
        self,
        message_store: MessageStore,
        host: str,
        port: int,
        *,
        mapped_file_size_commit_log: int,
        ha_transfer_batch_size: int = DEFAULT_HA_TRANSFER_BATCH_SIZE,
        ha_send_heartbeat_interval: int = DEFAULT_HA_SEND_HEARTBEAT_INTERVAL_MS,
        ha_housekeeping_interval: int = DEFAULT_HA_HOUSEKEEPING_INTERVAL_MS,
        ha_slave_fallbehind_max: int = DEFAULT_HA_SLAVE_FALLBEHIND_MAX,
        sync_flush_timeout: int = 5000,
    ) -> None:
        self.message_store = message_store
        self.host = host
        self.port = port
        self.mapped_file_size_commit_log = mapped_file_size_commit_log
        self.ha_transfer_batch_size = ha_transfer_batch_size
        self.ha_send_heartbeat_interval = ha_send_heartbeat_interval
        self.ha_housekeeping_interval = ha_housekeeping_interval
        self.ha_slave_fallbehind_max = ha_slave_fallbehind_max
        self.group_transfer_service = GroupTransferService(sync_flush_timeout)
        self.connections: list[HAConnection] = []
        self.data_event = asyncio.Event()
        self._server: asyncio.AbstractServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._listening = False

    @property
    def push2_slave_max_offset(self) -> int:
        return self.group_transfer_service.acked

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.current_thread()
        self._server = await asyncio.start_server(self._accept, self.host, self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("HA service listening on %s:%d", self.host, self.port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = HAConnection(self, reader, writer)
        log.info("HAService receive new connection, %s", conn.client_addr)
        if not self.connections and not self._listening:  # the arrival listener only while a slave is connected
            self.message_store.add_arrival_listener(self._on_arrival)
            self._listening = True
        self.connections.append(conn)
        conn.start()

    def remove_connection(self, conn: HAConnection) -> None:
        if conn in self.connections:
            self.connections.remove(conn)
        if not self.connections:
            self._stop_listening()

    def _stop_listening(self) -> None:
        if self._listening:
            self._listening = False
            try:
                self.message_store.remove_arrival_listener(self._on_arrival)
            except ValueError:
                pass

    def notify_transfer_some(self, offset: int) -> None:
        self.group_transfer_service.notify_transfer_some(offset)

    def is_slave_ok(self, master_put_where: int) -> bool:
        return (
            len(self.connections) > 0 and master_put_where - self.push2_slave_max_offset < self.ha_slave_fallbehind_max
        )

    def wait_for_slave(self, upto: int) -> asyncio.Future[bool]:
        """SYNC_MASTER: resolved True once a slave acknowledged ``upto``, False at the timeout."""
        self.wake()
        return self.group_transfer_service.wait(upto)

    def wake(self) -> None:
        """The store grew: the writers send it."""
        if self._loop is None:
            return
        if threading.current_thread() is self._loop_thread:
            self.data_event.set()
        else:
            self._loop.call_soon_threadsafe(self.data_event.set)

    def _on_arrival(self, *_args: object) -> None:
        self.wake()

    async def shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        self._stop_listening()
        for conn in list(self.connections):
            conn.close("the master is shutting down")
        self.group_transfer_service.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
