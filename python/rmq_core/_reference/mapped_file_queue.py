"""An ordered run of same-size mapped files in one directory, RocketMQ's ``MappedFileQueue``.

Owns: the directory's files (by start offset), lookup by global offset, creation of the next file, truncation of
dirty tails and deletion of old files.
Format: ``<dir>/<20-digit start offset>``, every file ``file_size`` bytes, start offsets multiples of ``file_size``;
another name is ignored, a misplaced start or size is refused (``StoreError``), a zero stub newest file is deleted.
Invariants: 1. ``files`` is sorted by ``start`` (``starts`` mirrors it for bisect); 2. ``truncate(end)`` keeps the
files with ``start <= end`` (the holding one zeroed past ``end``) and deletes the rest (truncateDirtyFiles).
Thread-safety: none of its own; the engine's lock serialises every call.
Details (the load rules, gaps): docs/CORE_API.md, 'Mapped file queue'.
"""

from __future__ import annotations

import bisect
import os

from rmq_core.errors import StoreError
from rmq_core.format import OS_PAGE_SIZE
from rmq_core.format.file_name import offset_to_file_name, parse_file_name
from rmq_core.mapped_file import MappedFile


class MappedFileQueue:
    __slots__ = ("directory", "file_size", "files", "reserve", "starts")

    def __init__(self, directory: str, file_size: int, reserve: int | None = None) -> None:
        self.directory = directory
        self.file_size = file_size
        self.reserve = reserve  # bytes of a new file reserved at creation (None: all; the CommitLog: RESERVE_STEP)
        self.files: list[MappedFile] = []
        self.starts: list[int] = []

    def load(self) -> None:
        """Maps every store file of the directory (``wrote`` = 0 until recovery sets it)."""
        try:
            names = sorted(os.listdir(self.directory))
        except FileNotFoundError:
            return
        except OSError as e:
            raise StoreError(f"cannot list {self.directory}: {e}") from e
        found = []
        for name in names:
            start = parse_file_name(name)
            if start is None:
                continue
            path = os.path.join(self.directory, name)
            if not os.path.isfile(path):
                continue
            if start % self.file_size:
                raise StoreError(f"mapped file {path} does not start at a multiple of the file size {self.file_size}")
            found.append((start, path))
        found.sort()
        # a crash between creating and sizing the newest file leaves it short and all zero: drop it
        if found:
            start, path = found[-1]
            try:
                if os.path.getsize(path) < self.file_size:
                    with open(path, "rb") as fh:
                        if not fh.read().strip(b"\0"):
                            os.unlink(path)
                            found.pop()
            except OSError as e:
                raise StoreError(f"cannot inspect {path}: {e}") from e
        for start, path in found:
            self.files.append(MappedFile.open(path, start, self.file_size))
            self.starts.append(start)

    # -- lookup ---------------------------------------------------------------------------------------------

    @property
    def first(self) -> MappedFile | None:
        return self.files[0] if self.files else None

    @property
    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def file_start_of(self, offset: int) -> int:
        return offset - offset % self.file_size

    def roll_next_file(self, offset: int) -> int:
        """``rollNextFile``: the start of the file after the one holding ``offset``."""
        return offset + self.file_size - offset % self.file_size

    def find(self, offset: int) -> MappedFile | None:
        """The file whose range holds ``offset`` (regardless of its written data), or None."""
        if offset < 0:
            return None
        i = bisect.bisect_right(self.starts, offset) - 1
        if i < 0:
            return None
        f = self.files[i]
        return f if offset < f.start + self.file_size else None

    def index_of(self, offset: int) -> int:
        """Index of the first file whose start is >= ``file_start_of(offset)``."""
        return bisect.bisect_left(self.starts, self.file_start_of(offset))

    # -- mutation -------------------------------------------------------------------------------------------

    def create(self, start: int) -> MappedFile:
        """Creates the file starting at ``start`` (full size, zero-filled). StoreError if the disk refuses."""
        os.makedirs(self.directory, exist_ok=True)
        f = MappedFile.create(
            os.path.join(self.directory, offset_to_file_name(start)), start, self.file_size, self.reserve
        )
        i = bisect.bisect_left(self.starts, start)
        self.files.insert(i, f)
        self.starts.insert(i, start)
        return f

    def remove(self, f: MappedFile) -> None:
        """Unmaps and deletes one file."""
        i = self.files.index(f)
        del self.files[i]
        del self.starts[i]
        f.destroy()

    def truncate(self, offset: int) -> None:
        """Invariant 2: the file holding ``offset`` keeps ``offset - start`` written bytes (the rest up to its old
        write position is zeroed); files starting after ``offset`` are deleted; one starting exactly at ``offset``
        is kept, empty."""
        for f in list(self.files):
            if f.end <= offset:
                continue
            if f.start <= offset:
                pos = offset - f.start
                old = f.wrote
                f.wrote = pos
                f.flushed = min(f.flushed, pos)
                if old > pos:
                    f.zero(pos, old)
                    f.flush_range(pos, old)
            else:
                self.remove(f)

    def delete_from_index(self, index: int) -> None:
        """Deletes every file from ``files[index]`` on (recovery)."""
        for f in list(self.files[index:]):
            self.remove(f)

    def flush(self) -> None:
        for f in self.files:
            if f.wrote > f.flushed:
                f.flush()

    def is_able_to_flush(self, least_pages: int) -> bool:
        """4.9's ``isAbleToFlush(leastPages)`` over the run: a file before the last one with unflushed bytes (it is
        full), or at least ``least_pages`` OS pages between the last file's flushed and written positions; with 0, any
        unflushed byte."""
        if not self.files:
            return False
        if any(f.flushed < f.wrote for f in self.files[:-1]):
            return True
        last = self.files[-1]
        if least_pages == 0:
            return last.wrote > last.flushed
        return max(last.wrote // OS_PAGE_SIZE - last.flushed // OS_PAGE_SIZE, 0) >= least_pages

    def close(self) -> None:
        for f in self.files:
            f.close()
