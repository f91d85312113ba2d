"""PopInflightCounter: how many popped messages of each (group, topic, queue) are not yet acked or revived (5.x
``PopInflightMessageCounter``), for admin's consumer progress: a POP group's consumer offset is its pop offset less
this, its pull offset the pop offset (as 5.x's ``ConsumerLagCalculator`` counts a POP group's lag).

In memory: counts start at 0 at broker start and pops from before then are not counted (their acks and revives are
ignored by pop time, as Apache's ``shouldStartTime``). FIFO pops are not counted: their offset moves on acks only,
so it already is the acked offset. Never negative. Owned by the broker's event loop.
"""

from __future__ import annotations

import time


class PopInflightCounter:
    def __init__(self, start_ms: int | None = None) -> None:
        self.start_ms = time.time_ns() // 1_000_000 if start_ms is None else start_ms
        self._counts: dict[tuple[str, str, int], int] = {}

    def get(self, group: str, topic: str, queue_id: int) -> int:
        return self._counts.get((group, topic, queue_id), 0)

    def increment(self, group: str, topic: str, queue_id: int, num: int) -> None:
        if num > 0:
            key = (group, topic, queue_id)
            self._counts[key] = self._counts.get(key, 0) + num

    def clear(self, group: str, topic: str, queue_id: int) -> None:
        """``clearInFlightMessageNum``: the queue's offset was reset; what was popped no longer counts."""
        self._counts.pop((group, topic, queue_id), None)

    def decrement(self, group: str, topic: str, queue_id: int, pop_time: int, num: int = 1) -> None:
        """``num`` messages of a pop at ``pop_time`` acked or revived (pops from before the start: ignored)."""
        key = (group, topic, queue_id)
        if pop_time < self.start_ms or num <= 0 or key not in self._counts:
            return
        left = self._counts[key] - num
        if left > 0:
            self._counts[key] = left
        else:
            del self._counts[key]
