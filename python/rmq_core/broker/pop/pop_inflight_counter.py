"""PopInflightCounter: how many popped messages of each (group, topic, queue) are not yet acked or revived (5.x
``PopInflightMessageCounter``), for admin's consumer progress: a POP group's consumer offset is its pop offset less
this, its pull offset the pop offset (as 5.x's ``ConsumerLagCalculator`` counts a POP group's lag).

In memory, kept across a clean restart (departure: Apache's restarts at 0): ``save`` at shutdown writes
``config/popInflight.json`` ``{"startMs":N,"counts":[[group,topic,queueId,n],...]}``; ``restore`` at the next start
reads it back (with its ``startMs``) only after a normal recovery, and removes it either way, so a crash never
leaves an old file to be trusted. Otherwise counts start at 0 and pops from before the start are not counted (their
acks and revives are ignored by pop time, as Apache's ``shouldStartTime``). FIFO pops are not counted: their offset
moves on acks only, so it already is the acked offset. Never negative. Owned by the broker's event loop.
"""

from __future__ import annotations

import json
import logging
import os
import time

log = logging.getLogger(__name__)

POP_INFLIGHT_FILE = "popInflight.json"


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

    # --- across a clean restart --------------------------------------------------------------------------------
    def save(self, path: str) -> None:
        """Write the counts and their start (tmp, fsync, rename): at a clean shutdown, after the last pop and ack."""
        doc = {"startMs": self.start_ms, "counts": [[g, t, q, n] for (g, t, q), n in sorted(self._counts.items())]}
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def restore(self, path: str, trusted: bool) -> None:
        """Take the saved counts and start when ``trusted`` (the store recovered normally) and the file decodes;
        remove the file in every case (it describes only the run that wrote it)."""
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return
        try:
            os.remove(path)
        except OSError as e:
            log.warning("could not remove %s: %s", path, e)
        if not trusted:
            log.info("%s ignored: the broker did not stop cleanly (in-flight counts start at 0)", path)
            return
        try:
            doc = json.loads(text)
            start = int(doc["startMs"])
            counts = {(str(g), str(t), int(q)): int(n) for g, t, q, n in doc["counts"] if int(n) > 0}
        except (ValueError, KeyError, TypeError) as e:
            log.warning("%s ignored, not an in-flight count file: %s", path, e)
            return
        self.start_ms, self._counts = start, counts
