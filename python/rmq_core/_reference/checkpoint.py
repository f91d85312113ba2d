"""``<root>/checkpoint``, RocketMQ's ``StoreCheckpoint`` (5.x layout): what was durable at the last flush.

Owns: the checkpoint file, reading it at open and rewriting it on every full flush.
Format: 4096 bytes; i64 BE @0 physicMsgTimestamp, @8 logicsMsgTimestamp, @16 indexMsgTimestamp (the newest index entry's store
timestamp msynced before this write; 0 with no index),
@24 masterFlushedOffset (always 0), @32 confirmPhyOffset; the rest zero.
Invariants:
  1. Written only after the CommitLog (then the ConsumeQueues due) were msynced: ``confirm_phy_offset`` is the
     flushed CommitLog offset; abnormal recovery starts from the file holding it (and from where the ConsumeQueues'
     own last units end, if earlier).
  2. physicMsgTimestamp = STORETIMESTAMP of the last record appended (in this or an earlier run);
     logicsMsgTimestamp = STORETIMESTAMP of the last record that got a ConsumeQueue unit (puts and re-dispatch,
     the latter as a running max) as of the last flush that left no ConsumeQueue unit unflushed (the flush thread's
     tick skips queues with few dirty pages, as 4.9's FlushConsumeQueueService, which also advances it only at its
     thorough flushes). Both keep the values loaded at open until something newer is durable.
  3. Opening creates the file if missing (empty until the first write); a missing or shorter-than-40-byte file
     reads as all zeros.
  4. Each write rewrites the whole 4096 bytes at offset 0, truncates the file to 4096, and fdatasyncs it.
Thread-safety: none of its own; the engine serialises flushes.
"""

from __future__ import annotations

import os
import struct

from rmq_core.errors import StoreError
from rmq_core.format import CHECKPOINT_FILE_SIZE, CHECKPOINT_USED_BYTES

_LAYOUT = struct.Struct(">qqqqq")


class StoreCheckpoint:
    __slots__ = (
        "_fd",
        "confirm_phy_offset",
        "existed",
        "index_msg_timestamp",
        "logics_msg_timestamp",
        "path",
        "physic_msg_timestamp",
    )

    def __init__(self, path: str) -> None:
        self.path = path
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.confirm_phy_offset = 0
        self.existed = False
        self._fd: int | None = None

    def open(self) -> None:
        """Invariant 3."""
        self.existed = os.path.exists(self.path)
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            raw = os.pread(self._fd, CHECKPOINT_USED_BYTES, 0)
        except OSError as e:
            raise StoreError(f"cannot open checkpoint {self.path}: {e}") from e
        if len(raw) < CHECKPOINT_USED_BYTES:
            return
        physic, logics, index, _master, confirm = _LAYOUT.unpack(raw)
        self.index_msg_timestamp = index
        self.physic_msg_timestamp = physic
        self.logics_msg_timestamp = logics
        self.confirm_phy_offset = confirm

    def write(
        self,
        physic_msg_timestamp: int,
        logics_msg_timestamp: int,
        confirm_phy_offset: int,
        index_msg_timestamp: int = 0,
    ) -> None:
        """Invariant 4."""
        if self._fd is None:
            raise StoreError(f"checkpoint {self.path} is closed")
        data = bytearray(CHECKPOINT_FILE_SIZE)
        _LAYOUT.pack_into(
            data, 0, physic_msg_timestamp, logics_msg_timestamp, index_msg_timestamp, 0, confirm_phy_offset
        )
        try:
            os.pwrite(self._fd, data, 0)
            os.ftruncate(self._fd, CHECKPOINT_FILE_SIZE)
            os.fdatasync(self._fd)
        except OSError as e:
            raise StoreError(f"cannot write checkpoint {self.path}: {e}") from e

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
