"""HAConnection: the master's side of one slave (4.9 ``HAConnection``: its ReadSocketService and WriteSocketService as
two tasks on the broker's loop).

Reads the slave's 8-byte offset reports (acknowledgements), writes ``[offset][size][bytes]`` frames from the first
report on (an empty slave: the master's last CommitLog file), heartbeats when idle. Format: ``ha_protocol``.
Invariants:
1. Whatever a slave sends or fails to read affects only its connection: a bad report (negative, beyond the master's
   max offset, garbage) or silence for ``ha_housekeeping_interval`` ms closes this connection only, with a log line.
2. A slave whose first report is beyond the master's CommitLog end (a log this master never wrote) is refused: an
   error line and closed (4.9 would splice two histories); the operator must clear that slave's store.
3. A slow slave only fills its own socket buffer: the writer awaits ``drain()`` and the loop keeps serving others.
Thread-safety: the broker's loop only.
Details: docs/BROKER_DESIGN.md, 'Replication: the master's side'.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Protocol

from rmq_core.broker.ha.ha_protocol import REPORT, encode_frame_header

if TYPE_CHECKING:
    from rmq_core.store import MessageStore

log = logging.getLogger(__name__)

READ_CHUNK = 64 * 1024


class ConnectionOwner(Protocol):
    """What a connection needs of its ``HAService``: the store, the transfer settings, the wake-up event and the two
    callbacks. A Protocol, so that the service imports its connections and not the other way round."""

    message_store: MessageStore
    mapped_file_size_commit_log: int
    ha_transfer_batch_size: int
    ha_send_heartbeat_interval: int
    ha_housekeeping_interval: int
    data_event: asyncio.Event

    def notify_transfer_some(self, offset: int) -> None: ...
    def remove_connection(self, conn: HAConnection) -> None: ...


class HAConnection:
    def __init__(self, service: ConnectionOwner, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.client_addr = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.next_transfer_from = -1
        self._request_known = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False
        self.close_reason: str | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._read_loop(), name=f"ha-read {self.client_addr}"),
            loop.create_task(self._write_loop(), name=f"ha-write {self.client_addr}"),
        ]

    def close(self, reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        self.close_reason = reason
        log.info("HA connection to slave %s closed: %s", self.client_addr, reason)
        for t in self._tasks:
            if t is not asyncio.current_task():
                t.cancel()
        try:
            self.writer.close()
        except Exception:  # already gone
            pass
        self.service.remove_connection(self)

    # --- ReadSocketService ------------------------------------------------------------------------------------
    async def _read_loop(self) -> None:
        svc = self.service
        buf = bytearray()
        housekeeping = svc.ha_housekeeping_interval / 1000.0
        try:
            while True:
                try:
                    chunk = await asyncio.wait_for(self.reader.read(READ_CHUNK), housekeeping)
                except TimeoutError:
                    self.close(f"ha housekeeping: nothing read for {svc.ha_housekeeping_interval} ms")
                    return
                if not chunk:
                    self.close("the slave closed the connection")
                    return
                buf += chunk
                n = len(buf) - len(buf) % 8
                if n == 0:
                    continue
                offset = REPORT.unpack_from(buf, n - 8)[0]
                del buf[:n]
                if not self._on_report(offset):
                    return
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a reset connection and the like
            self.close(f"read failed: {type(e).__name__}: {e}")

    def _on_report(self, offset: int) -> bool:
        svc = self.service
        master_max = svc.message_store.max_physical_offset
        if offset < 0:
            self.close(f"garbage: negative offset report {offset}")
            return False
        if offset > master_max:
            if self.slave_request_offset < 0:
                log.error(
                    "slave %s reports its CommitLog ends at %d, beyond this master's end %d: its log was not written "
                    "by this master (another master's slave, or this master lost data); refusing it, clear the "
                    "slave's store to replicate from here",
                    self.client_addr,
                    offset,
                    master_max,
                )
                self.close(f"slave offset {offset} beyond the master's end {master_max}")
            else:
                log.warning(
                    "slave[%s] request offset=%d greater than local commitLog offset=%d",
                    self.client_addr,
                    offset,
                    master_max,
                )
                self.close(f"slave ack {offset} beyond the master's end {master_max}")
            return False
        self.slave_ack_offset = offset
        if self.slave_request_offset < 0:
            self.slave_request_offset = offset
            log.info("slave[%s] request offset %d", self.client_addr, offset)
            self._request_known.set()
        svc.notify_transfer_some(offset)
        return True

    # --- WriteSocketService -----------------------------------------------------------------------------------
    async def _write_loop(self) -> None:
        svc = self.service
        store = svc.message_store
        writer = self.writer
        try:
            await self._request_known.wait()
            if self.slave_request_offset == 0:
                master_offset = store.max_physical_offset
                master_offset -= master_offset % svc.mapped_file_size_commit_log
                self.next_transfer_from = max(master_offset, 0)
            else:
                self.next_transfer_from = self.slave_request_offset
            log.info(
                "master transfer data from %d to slave[%s], and slave request %d",
                self.next_transfer_from,
                self.client_addr,
                self.slave_request_offset,
            )
            heartbeat = svc.ha_send_heartbeat_interval / 1000.0
            batch = svc.ha_transfer_batch_size
            last_write = 0.0
            event = svc.data_event
            while True:
                data = store.get_commit_log_data(self.next_transfer_from, batch)
                if data:
                    writer.write(encode_frame_header(self.next_transfer_from, len(data)))
                    writer.write(data)
                    self.next_transfer_from += len(data)
                    await writer.drain()
                    last_write = time.monotonic()
                    continue
                now = time.monotonic()
                if now - last_write >= heartbeat:
                    writer.write(encode_frame_header(self.next_transfer_from, 0))
                    await writer.drain()
                    last_write = now
                event.clear()
                if store.max_physical_offset > self.next_transfer_from:
                    continue
                try:
                    await asyncio.wait_for(event.wait(), max(0.0, heartbeat - (time.monotonic() - last_write)))
                except TimeoutError:
                    pass
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.close(f"write failed: {type(e).__name__}: {e}")
