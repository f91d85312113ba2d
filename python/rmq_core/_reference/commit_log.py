"""The CommitLog: every record of every topic, appended in order into mapped files (RocketMQ's ``CommitLog``).

Owns: ``<root>/commitlog/`` (a MappedFileQueue), the write position, appends (with the BLANK roll-over), raw
reads, and deletion of old files. PutMessageStatus comes from rmq_core.store_status.
Format: ``<root>/commitlog/<20-digit start offset>`` files of v1 records back to back (format/message.py), each
ending with an 8-byte BLANK followed by zeros.
Invariants: 1. every byte below ``write_offset`` is immutable; 2. a record needs ``len + 8`` bytes left in its file,
else BLANK and the next file; 3. roll-over creates the next file first, and a failed creation changes nothing
(CREATE_MAPPED_FILE_FAILED); 4. a fresh store has no files, the first append creates ``00000000000000000000``;
5. ``delete_files_before`` never deletes the last file.
Thread-safety: none of its own; the engine's lock serialises every call.
Details (each invariant in full): docs/CORE_API.md, 'CommitLog files'.
"""

from __future__ import annotations

import os

from rmq_core.format import COMMITLOG_DIR
from rmq_core.format.message import END_FILE_MIN_BLANK_LENGTH, encode_blank
from rmq_core.mapped_file import RESERVE_STEP, MappedFile

from .mapped_file_queue import MappedFileQueue


class CommitLog:
    __slots__ = ("file_size", "queue", "write_offset")

    def __init__(self, root_dir: str, file_size: int) -> None:
        self.file_size = file_size
        self.queue = MappedFileQueue(os.path.join(root_dir, COMMITLOG_DIR), file_size, RESERVE_STEP)
        self.write_offset = 0

    def load(self) -> None:
        self.queue.load()

    # -- offsets --------------------------------------------------------------------------------------------

    @property
    def max_offset(self) -> int:
        return self.write_offset

    @property
    def min_offset(self) -> int:
        first = self.queue.first
        return first.start if first is not None else 0

    def roll_next_file(self, offset: int) -> int:
        return self.queue.roll_next_file(offset)

    # -- write path -----------------------------------------------------------------------------------------

    def fits_in_a_file(self, record_len: int) -> bool:
        return record_len + END_FILE_MIN_BLANK_LENGTH <= self.file_size

    def allocate(self, record_len: int) -> MappedFile:
        """The file the next record of ``record_len`` bytes goes to (at ``write_offset``). When ``len + 8 >
        remaining`` the next file is created first, then the current file gets the BLANK (and counts as full); a
        creation failure raises StoreError and changes nothing (invariant 3)."""
        f = self.queue.last
        if f is None:
            f = self.queue.create(0)
            self.write_offset = 0
        remaining = f.size - f.wrote
        if record_len + END_FILE_MIN_BLANK_LENGTH <= remaining:
            f.ensure_reserved(f.wrote + record_len + END_FILE_MIN_BLANK_LENGTH)  # the record and a BLANK after it
            return f
        if remaining >= END_FILE_MIN_BLANK_LENGTH:
            f.ensure_reserved(f.wrote + END_FILE_MIN_BLANK_LENGTH)
        nxt = self.queue.create(f.end)
        nxt.ensure_reserved(record_len + END_FILE_MIN_BLANK_LENGTH)
        if remaining >= END_FILE_MIN_BLANK_LENGTH:
            f.write(f.wrote, encode_blank(remaining))
        f.wrote = f.size
        self.write_offset = f.end
        return nxt

    def append(self, f: MappedFile, record: bytes | bytearray) -> None:
        """Writes a record (already patched for ``write_offset``) at the end of ``f`` (from ``allocate``)."""
        f.append(record)
        self.write_offset = f.start + f.wrote

    # -- read path ------------------------------------------------------------------------------------------

    def read(self, offset: int, size: int) -> bytes | None:
        """Raw bytes if ``[offset, offset+size)`` lies wholly inside one file's written data, else None
        (``read_commit_log``; a size of 0 inside the data gives b"")."""
        f = self.queue.find(offset)
        if f is None:
            return None
        return f.read(offset - f.start, size)

    def get_message(self, offset: int, size: int) -> bytes | None:
        """``CommitLog.getMessage`` for the read path: like ``read`` but a size <= 0 gives None."""
        if size <= 0:
            return None
        return self.read(offset, size)

    # -- maintenance ----------------------------------------------------------------------------------------

    def flush(self) -> int:
        """msync every file with unflushed data; returns the flushed offset (= the write offset)."""
        offset = self.write_offset
        self.queue.flush()
        return offset

    def delete_files_before(self, offset: int) -> int:
        """Deletes files whose whole range ends <= ``offset``, never the last one; returns how many."""
        deleted = 0
        for f in list(self.queue.files[:-1]):
            if f.end <= offset:
                self.queue.remove(f)
                deleted += 1
        return deleted

    def close(self) -> None:
        self.queue.close()
