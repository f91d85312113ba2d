"""TimerCheckpoint: the timer's progress, RocketMQ 5's ``store/timer/TimerCheckpoint.java``.

Owns: ``<root>/config/timercheck`` (one 4 096-byte page, layout in ``rmq_core.format.timer``): the read
time up to which every slot has been delivered (``last_read_time_ms``), the timer log position matching the queue
offset below (``last_timer_log_flush_pos``), the offset of ``rmq_sys_wheel_timer`` queue 0 below which every message
is in the timer log or delivered (``last_timer_queue_offset``, and ``master_timer_queue_offset``, the same on a
master), and a data version. ``flush()`` writes the fields and msyncs the page.

Invariants: a missing file reads as all zeros (a new broker); the file is created (preallocated) by the first
``flush()``, which the timer store only calls once it has a wheel. Thread-safety: none; owned by the broker's loop.
"""

from __future__ import annotations

import mmap
import os

from rmq_core.errors import StoreError
from rmq_core.format import timer as fmt


class TimerCheckpoint:
    def __init__(self, path: str) -> None:
        self.path = path
        self._mm: mmap.mmap | None = None
        self.data = fmt.TimerCheckpointData()
        if os.path.exists(path):
            self._map()
            assert self._mm is not None
            self.data = fmt.decode_checkpoint(self._mm)

    def _map(self) -> None:
        """Open (or create, preallocated) the page and map it."""
        path = self.path
        try:
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise StoreError(f"cannot open timer checkpoint {path}: {e}") from e
        try:
            if os.fstat(fd).st_size < fmt.CHECKPOINT_FILE_SIZE:
                os.posix_fallocate(fd, 0, fmt.CHECKPOINT_FILE_SIZE)
            self._mm = mmap.mmap(fd, fmt.CHECKPOINT_FILE_SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as e:
            raise StoreError(f"cannot map timer checkpoint {path}: {e}") from e
        finally:
            os.close(fd)

    def update(
        self, last_read_time_ms: int, last_timer_log_flush_pos: int, last_timer_queue_offset: int, now_ms: int
    ) -> None:
        d = self.data
        changed = (last_read_time_ms, last_timer_queue_offset) != (d.last_read_time_ms, d.last_timer_queue_offset)
        self.data = fmt.TimerCheckpointData(
            last_read_time_ms,
            last_timer_log_flush_pos,
            last_timer_queue_offset,
            last_timer_queue_offset,  # master: masterTimerQueueOffset = commitQueueOffset
            d.state_version,
            now_ms if changed else d.timestamp,  # DataVersion.nextVersion
            d.counter + 1 if changed else d.counter,
        )

    def flush(self) -> None:
        """Write the fields and msync (creating the file the first time)."""
        if self._mm is None:
            self._map()
        assert self._mm is not None
        self._mm[0 : fmt.CHECKPOINT.size] = fmt.encode_checkpoint(self.data)
        try:
            self._mm.flush()
        except (OSError, ValueError) as e:
            raise StoreError(f"cannot flush timer checkpoint {self.path}: {e}") from e

    def close(self, flush: bool = True) -> None:
        if flush:
            self.flush()
        if self._mm is not None and not self._mm.closed:
            self._mm.close()
