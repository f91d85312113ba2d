"""ProducerManager (br/client/ProducerManager.java): which connections belong to which producer group.

- ``register_producer(group, info)``: a new connection is added; a known one gets its ``last_update_timestamp``
  refreshed to ``info``'s (the heartbeat time). The client id → connection index is kept for ``find_channel``.
- ``unregister_producer`` / ``do_channel_close_event(conn)`` remove the connection; an emptied group is dropped by
  unregister (as Java does; a close event leaves the empty group, also as Java, harmless).
- ``scan_not_active_channel(now_ms)`` removes and closes connections silent for more than ``expired_ms`` (120 s).
- ``get_available_channel(group)``: round-robin over the group's open connections (transaction check-back).

Not thread-safe: owned by the broker's event loop.
"""

from __future__ import annotations

import logging
from typing import Any

from rmq_core.broker.client.client_channel_info import ClientChannelInfo

log = logging.getLogger(__name__)

CHANNEL_EXPIRED_TIMEOUT_MS = 120_000


class ProducerManager:
    def __init__(self, expired_ms: int = CHANNEL_EXPIRED_TIMEOUT_MS) -> None:
        self.group_channel_table: dict[str, dict[Any, ClientChannelInfo]] = {}
        self.client_channel_table: dict[str, Any] = {}
        self.expired_ms = expired_ms
        self._rr = 0

    def register_producer(self, group: str, info: ClientChannelInfo) -> None:
        table = self.group_channel_table.setdefault(group, {})
        found = table.get(info.conn)
        if found is None:
            table[info.conn] = info
            self.client_channel_table[info.client_id] = info.conn
            log.info("new producer connected, group: %s channel: %r", group, info)
        else:
            found.last_update_timestamp = info.last_update_timestamp

    def unregister_producer(self, group: str, info: ClientChannelInfo) -> None:
        table = self.group_channel_table.get(group)
        if not table:
            return
        old = table.pop(info.conn, None)
        if self.client_channel_table.get(info.client_id) is info.conn:
            del self.client_channel_table[info.client_id]
        if old is not None:
            log.info("unregister a producer[%s] from groupChannelTable %r", group, info)
        if not table:
            del self.group_channel_table[group]
            log.info("unregister a producer group[%s] from groupChannelTable", group)

    def do_channel_close_event(self, conn: Any) -> bool:
        removed = False
        for group, table in self.group_channel_table.items():
            info = table.pop(conn, None)
            if info is not None:
                removed = True
                if self.client_channel_table.get(info.client_id) is conn:
                    del self.client_channel_table[info.client_id]
                log.info("remove closed channel %r from producer group %s", info, group)
        return removed

    def scan_not_active_channel(self, now_ms: int, expired_ms: int | None = None) -> list[ClientChannelInfo]:
        limit = self.expired_ms if expired_ms is None else expired_ms
        removed: list[ClientChannelInfo] = []
        for group, table in self.group_channel_table.items():
            for info in [i for i in table.values() if now_ms - i.last_update_timestamp > limit]:
                del table[info.conn]
                if self.client_channel_table.get(info.client_id) is info.conn:
                    del self.client_channel_table[info.client_id]
                log.warning(
                    "SCAN: remove expired channel %r from ProducerManager groupChannelTable, producer group name: %s",
                    info,
                    group,
                )
                close = getattr(info.conn, "close", None)
                if callable(close):
                    try:
                        close()
                    except Exception:
                        log.exception("closing expired channel %r failed", info.conn)
                removed.append(info)
        return removed

    def find_channel(self, client_id: str) -> Any | None:
        """The connection of the producer ``client_id`` (any group), or None."""
        return self.client_channel_table.get(client_id)

    def find_channel_in_group(self, group: str, client_id: str) -> ClientChannelInfo | None:
        for info in self.group_channel_table.get(group, {}).values():
            if info.client_id == client_id:
                return info
        return None

    def get_available_channel(self, group: str | None) -> Any | None:
        if group is None:
            return None
        conns = list(self.group_channel_table.get(group, {}))
        if not conns:
            return None
        for _ in range(len(conns)):
            self._rr = (self._rr + 1) & 0x7FFFFFFF
            conn = conns[self._rr % len(conns)]
            if not getattr(conn, "closed", False):
                return conn
        return None
