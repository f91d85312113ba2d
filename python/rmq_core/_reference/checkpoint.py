"""``<root>/checkpoint``, RocketMQ's ``StoreCheckpoint`` (5.x layout): what was durable at the last flush.

Owns: the checkpoint file, reading it at open and rewriting it on every full flush.
Format: 4096 bytes; i64 BE @0 physicMsgTimestamp, @8 logicsMsgTimestamp, @16 indexMsgTimestamp, @24
masterFlushedOffset (always 0), @32 confirmPhyOffset; the rest zero.
Invariants: 1. written only after the CommitLog (then the ConsumeQueues due) were msynced; 2. physicMsgTimestamp
is the last appended record's STORETIMESTAMP, logicsMsgTimestamp the last dispatched one's as of the last thorough
flush; 3. opening creates a missing file, and a missing or short file reads as zeros; 4. each write rewrites all
4096 bytes, truncates to 4096 and fdatasyncs.
Thread-safety: none of its own; the engine serialises flushes.
Details (each invariant in full): docs/CORE_API.md, 'Checkpoint file'.
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
