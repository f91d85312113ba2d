"""ClientChannelInfo (br/client/ClientChannelInfo.java): one client connection as a producer or consumer group member.

``conn`` is the remoting ``Connection`` the heartbeat came on (any hashable object works: managers key by it);
``last_update_timestamp`` (ms) is refreshed by every heartbeat and drives the 120 s inactivity expiry.

Mutable (the timestamp); owned by the broker's event loop.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(eq=False)
class ClientChannelInfo:
    conn: Any
    client_id: str
    language: str = "JAVA"
    version: int = 0
    last_update_timestamp: int = field(default_factory=_now_ms)

    def __repr__(self) -> str:
        addr = getattr(self.conn, "remote_address", self.conn)
        return (
            f"ClientChannelInfo(addr={addr}, client_id={self.client_id!r}, language={self.language}, "
            f"version={self.version}, last_update_timestamp={self.last_update_timestamp})"
        )
