"""The wall clock in milliseconds since the epoch: Java's ``System.currentTimeMillis()``, the unit of every
timestamp RocketMQ stores or sends (store/born timestamps, heartbeats, lock expiry, data versions).

One owner, so that a component that takes a clock (``now_ms: Callable[[], int] = now_ms``) can be given a fake one
in a test. Thread-safety: a pure function.
"""

from __future__ import annotations

import time


def now_ms() -> int:
    return time.time_ns() // 1_000_000
