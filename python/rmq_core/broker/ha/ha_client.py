"""HAClient: the slave's side of replication (4.9 ``HAService.HAClient``), a task on the broker's loop.

Connects to the master's HA address, reports its CommitLog end, appends each frame at exactly its offset
(``MessageStore.append_commit_log``). Invariants:
1. A frame whose offset is not the slave's CommitLog end (when the slave is not empty; 4.9's check, heartbeats
   included), a body the store refuses (a gap, garbage) or a frame header announcing more than 4 MiB closes the
   connection with a log line; the client reconnects and reports its own end again, so the master resends from there.
2. Nothing is appended twice or out of order: frames are handled in the order read, one at a time.
3. A master silent for ``ha_housekeeping_interval`` ms is dropped and reconnected (4.9 housekeeping).
4. A refused connection is retried every 5 s (4.9 ``waitForRunning(5000)``); a dropped one after 1 s.
Thread-safety: the broker's loop only.
Details: docs/BROKER_DESIGN.md, 'Replication: the slave's side'.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from rmq_core.broker.ha.ha_protocol import (
    DEFAULT_HA_HOUSEKEEPING_INTERVAL_MS,
    DEFAULT_HA_SEND_HEARTBEAT_INTERVAL_MS,
    FRAME_HEADER,
    FRAME_HEADER_SIZE,
    MAX_FRAME_BODY,
    encode_report,
)

if TYPE_CHECKING:
    from rmq_core.store import MessageStore

log = logging.getLogger(__name__)

READ_CHUNK = 256 * 1024
CONNECT_RETRY_S = 5.0
RECONNECT_AFTER_ERROR_S = 1.0


class HAClient:
    def __init__(
        self,
        message_store: MessageStore,
        *,
        ha_send_heartbeat_interval: int = DEFAULT_HA_SEND_HEARTBEAT_INTERVAL_MS,
        ha_housekeeping_interval: int = DEFAULT_HA_HOUSEKEEPING_INTERVAL_MS,
    ) -> None:
        self.message_store = message_store
        self.ha_send_heartbeat_interval = ha_send_heartbeat_interval
        self.ha_housekeeping_interval = ha_housekeeping_interval
        self.master_address: str | None = None
        self.current_reported_offset = 0
        self.connected = False
        self.last_error: str | None = None
        self._addr_changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None

    def update_master_address(self, addr: str | None) -> None:
        if addr and addr != self.master_address:
            log.info("update master address, OLD: %s NEW: %s", self.master_address, addr)
            self.master_address = addr
            self._addr_changed.set()
            if self._writer is not None:  # follow the new master
                self._writer.close()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="ha-client")

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _run(self) -> None:
        while True:
            addr = self.master_address
            if addr is None:
                await self._master_address_changed()
                continue
            host, _, port = addr.rpartition(":")
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 3.0)
            except (TimeoutError, OSError, ValueError) as e:
                self.last_error = f"connect to master {addr} failed: {e}"
                log.debug("HAClient: %s", self.last_error)
                await self._master_address_changed()
                continue
            self._writer = writer
            self.connected = True
            log.info("HAClient connected to master %s", addr)
            try:
                reason = await self._serve(reader, writer)
            finally:
                self.connected = False
                self._writer = None
                writer.close()
            self.last_error = reason
            log.warning("HAClient: connection to master %s closed: %s", addr, reason)
            await asyncio.sleep(RECONNECT_AFTER_ERROR_S)

    async def _master_address_changed(self) -> None:
        """Until the master's address is set again, or CONNECT_RETRY_S at most."""
        self._addr_changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._addr_changed.wait(), CONNECT_RETRY_S)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
        store = self.message_store
        self.current_reported_offset = store.max_physical_offset
        writer.write(encode_report(self.current_reported_offset))
        heartbeat = asyncio.get_running_loop().create_task(self._heartbeat(writer))
        housekeeping = self.ha_housekeeping_interval / 1000.0
        buf = bytearray()
        pos = 0
        try:
            while True:
                try:
                    chunk = await asyncio.wait_for(reader.read(READ_CHUNK), housekeeping)
                except TimeoutError:
                    return f"housekeeping: the master sent nothing for {self.ha_housekeeping_interval} ms"
                if not chunk:
                    return "the master closed the connection"
                buf += chunk
                while len(buf) - pos >= FRAME_HEADER_SIZE:
                    master_offset, size = FRAME_HEADER.unpack_from(buf, pos)
                    slave_offset = store.max_physical_offset
                    if slave_offset != 0 and slave_offset != master_offset:
                        return (
                            "master pushed offset not equal the max phy offset in slave, "
                            f"SLAVE: {slave_offset} MASTER: {master_offset}"
                        )
                    if size < 0 or size > MAX_FRAME_BODY:
                        return f"garbage frame header: body size {size} at offset {master_offset}"
                    if len(buf) - pos < FRAME_HEADER_SIZE + size:
                        break
                    start = pos + FRAME_HEADER_SIZE
                    pos = start + size
                    if size:
                        try:
                            store.append_commit_log(master_offset, bytes(buf[start:pos]))
                        except (ValueError, OSError, Exception) as e:  # StoreError / CorruptRecordError included
                            return f"append at {master_offset} refused: {e}"
                        end = store.max_physical_offset
                        if end > self.current_reported_offset:
                            self.current_reported_offset = end
                            writer.write(encode_report(end))
                if pos:
                    del buf[:pos]
                    pos = 0
                await writer.drain()
        except (ConnectionError, OSError) as e:
            return f"{type(e).__name__}: {e}"
        finally:
            heartbeat.cancel()

    async def _heartbeat(self, writer: asyncio.StreamWriter) -> None:
        interval = self.ha_send_heartbeat_interval / 1000.0
        try:
            while True:
                await asyncio.sleep(interval)
                writer.write(encode_report(self.current_reported_offset))
        except (ConnectionError, OSError):
            writer.close()
