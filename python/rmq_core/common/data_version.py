"""DataVersion (cm/DataVersion.java): the (timestamp, counter) pair a broker bumps on every topic or subscription-group
change; the name server compares it to decide whether a REGISTER_BROKER carries new topic data.

JSON as fastjson writes it (fields sorted): ``{"counter":3,"timestamp":1700000000000}``; 5.x adds ``stateVersion``
(kept when read, written only when non-zero). Equality is (timestamp, counter), as in Java (5.x also stateVersion).

Not thread-safe: owned by the manager that holds it (on the broker's event loop).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class DataVersion:
    timestamp: int = field(default_factory=_now_ms)
    counter: int = 0
    state_version: int = 0

    def next_version(self, now_ms: int | None = None) -> None:
        self.timestamp = _now_ms() if now_ms is None else now_ms
        self.counter += 1

    def assign_new_one(self, other: DataVersion) -> None:
        self.timestamp, self.counter, self.state_version = other.timestamp, other.counter, other.state_version

    def copy(self) -> DataVersion:
        return DataVersion(self.timestamp, self.counter, self.state_version)

    def to_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"counter": self.counter}
        if self.state_version:
            d["stateVersion"] = self.state_version
        d["timestamp"] = self.timestamp
        return d

    @classmethod
    def from_json_dict(cls, d: dict[str, Any] | None) -> DataVersion:
        if d is None:
            return cls()
        if not isinstance(d, dict):
            raise ValueError(f"dataVersion must be an object, not {type(d).__name__}")
        return cls(
            timestamp=_long(d, "timestamp"),
            counter=_long(d, "counter"),
            state_version=_long(d, "stateVersion"),
        )


def _long(d: dict[str, Any], key: str) -> int:
    """A dataVersion field: a number or a numeric string (fastjson writes numbers); ValueError for anything else."""
    v = d.get(key) or 0
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise ValueError(f"dataVersion.{key} must be a number, not {type(v).__name__}")
    try:
        return int(v)
    except (ValueError, OverflowError) as e:
        raise ValueError(f"dataVersion.{key}: {e}") from None
