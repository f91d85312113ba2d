"""One memory-mapped store file, RocketMQ's ``MappedFile`` (twin of ``rust/rmq-store/src/mapped_file.rs``): the pure-Python
engine's CommitLog and ConsumeQueue segments, and the broker timer's timerlog files (Python under either backend).

Owns: the file at ``<dir>/<20-digit start offset>``, its shared read-write mapping, its write and flush positions.
Format: a file of exactly ``size`` bytes, zero-filled, its blocks reserved with ``posix_fallocate`` (all at once, or
ahead of the writer), so a full disk fails with a clear error, never SIGBUS.
Invariants: 1. ``0 <= flushed <= wrote <= size``, bytes above ``wrote`` zero; 2. ``read(pos, n)`` returns data only
below ``wrote``; 3. a file that failed creation is removed, a created file is full size; 4. I/O errors raise
``StoreError`` naming the file.
Thread-safety: none of its own; its owner serialises every call (the twin engine's lock; the timer's: the broker's loop).
Details (the reservation steps): docs/CORE_API.md, 'Mapped files'.
"""

from __future__ import annotations

import mmap
import os

from rmq_core.errors import StoreError

_ZERO_SCAN_CHUNK = 1 << 20
RESERVE_STEP = 64 << 20  # the engine's mapped_file::RESERVE_STEP


def create_mapping(path: str, size: int, reserve: int, what: str) -> mmap.mmap:
    """Creates ``path`` (it must not exist) with ``size`` bytes, the first ``reserve`` reserved on disk, and maps it
    shared read-write; StoreError naming ``what`` and the file, the file removed, when it cannot (invariant 3)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError as e:
        raise StoreError(f"cannot create {what} {path}: {e}") from e
    try:
        try:
            os.ftruncate(fd, size)
            if reserve:
                os.posix_fallocate(fd, 0, reserve)
            return mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
    except OSError as e:
        try:
            os.unlink(path)
        except OSError:
            pass
        raise StoreError(f"cannot allocate {what} {path} ({size} bytes): {e}") from e


def reserve_blocks(path: str, start: int, end: int) -> None:
    """Reserves the blocks of ``path`` in ``[start, end)`` (``posix_fallocate``); OSError when the disk is full."""
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, start, end - start)
    finally:
        os.close(fd)


class MappedFile:
    __slots__ = ("_mm", "flushed", "path", "reserved", "size", "start", "wrote")

    def __init__(self, path: str, start: int, size: int, mm: mmap.mmap) -> None:
        self.path = path
        self.start = start
        self.size = size
        self.wrote = 0
        self.flushed = 0
        self._mm = mm
        self.reserved = 0  # blocks [0, reserved) reserved; 0 for a file opened (the first write reserves from 0)

    # -- lifecycle ------------------------------------------------------------------------------------------

    @classmethod
    def create(cls, path: str, start: int, size: int, reserve: int | None = None) -> MappedFile:
        """Creates the file, ``reserve`` bytes of it (default: all) reserved on disk, the rest sparse."""
        reserve = size if reserve is None else min(reserve, size)
        mm = create_mapping(path, size, reserve, "mapped file")
        f = cls(path, start, size, mm)
        f.reserved = reserve
        return f

    def ensure_reserved(self, end: int) -> None:
        """Reserves the blocks up to ``end`` (to the next multiple of ``RESERVE_STEP``, at most the size) before a
        write there; StoreError (nothing written) when the disk is full."""
        if end <= self.reserved:
            return
        to = min(self.size, max(-(-end // RESERVE_STEP) * RESERVE_STEP, min(end, self.size)))
        try:
            reserve_blocks(self.path, self.reserved, to)
        except OSError as e:
            raise StoreError(f"cannot reserve {to - self.reserved} bytes of {self.path}: {e}") from e
        self.reserved = to

    @classmethod
    def open(cls, path: str, start: int, size: int) -> MappedFile:
        """Maps an existing file; its size must be ``size``. ``wrote`` starts at 0 (recovery sets it)."""
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError as e:
            raise StoreError(f"cannot open mapped file {path}: {e}") from e
        try:
            actual = os.fstat(fd).st_size
            if actual != size:
                raise StoreError(f"mapped file {path} has {actual} bytes, expected {size}")
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as e:
            raise StoreError(f"cannot map {path}: {e}") from e
        finally:
            os.close(fd)
        return cls(path, start, size, mm)

    def close(self) -> None:
        if not self._mm.closed:
            self._mm.close()

    def destroy(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise StoreError(f"cannot delete mapped file {self.path}: {e}") from e

    # -- data -----------------------------------------------------------------------------------------------

    @property
    def end(self) -> int:
        """Global offset just after this file."""
        return self.start + self.size

    @property
    def remaining(self) -> int:
        return self.size - self.wrote

    @property
    def buffer(self) -> mmap.mmap:
        """The mapping itself, for ``struct.unpack_from`` without copies (never keep a memoryview of it)."""
        return self._mm

    def read(self, pos: int, n: int) -> bytes | None:
        if pos < 0 or n < 0 or pos + n > self.wrote:
            return None
        return self._mm[pos : pos + n]

    def read_raw(self, pos: int, n: int) -> bytes:
        """Bytes regardless of ``wrote`` (recovery and inspection)."""
        return self._mm[pos : pos + n]

    def write(self, pos: int, data: bytes | bytearray) -> None:
        self._mm[pos : pos + len(data)] = data

    def append(self, data: bytes | bytearray) -> int:
        """Writes at ``wrote`` and advances it; returns the file-relative position written."""
        pos = self.wrote
        self._mm[pos : pos + len(data)] = data
        self.wrote = pos + len(data)
        return pos

    def data_end(self, from_pos: int) -> int:
        """Position just after the last non-zero byte in ``[from_pos, size)``, or ``from_pos`` if all zero."""
        hi = self.size
        while hi > from_pos:
            lo = max(from_pos, hi - _ZERO_SCAN_CHUNK)
            chunk = self._mm[lo:hi]
            stripped = len(chunk.rstrip(b"\0"))
            if stripped:
                return lo + stripped
            hi = lo
        return from_pos

    def zero(self, from_pos: int, to_pos: int) -> None:
        """Zeroes ``[from_pos, to_pos)`` in chunks."""
        pos = from_pos
        while pos < to_pos:
            n = min(_ZERO_SCAN_CHUNK, to_pos - pos)
            self._mm[pos : pos + n] = bytes(n)
            pos += n

    def flush_range(self, from_pos: int, to_pos: int) -> None:
        """msync ``[from_pos rounded down to a page, to_pos)`` (recovery's zeroing), whatever ``flushed`` says."""
        if to_pos > from_pos:
            begin = from_pos - from_pos % mmap.PAGESIZE
            try:
                self._mm.flush(begin, to_pos - begin)
            except (OSError, ValueError) as e:
                raise StoreError(f"cannot flush {self.path}: {e}") from e

    def flush(self) -> int:
        """msync ``[flushed rounded down to a page, wrote)``; returns the new flushed position."""
        wrote = self.wrote
        if wrote > self.flushed:
            begin = self.flushed - self.flushed % mmap.PAGESIZE
            try:
                self._mm.flush(begin, wrote - begin)
            except (OSError, ValueError) as e:
                raise StoreError(f"cannot flush {self.path}: {e}") from e
            self.flushed = wrote
        return self.flushed

    def flush_all(self) -> None:
        """msync the whole mapping (after recovery rewrote bytes anywhere in it)."""
        try:
            self._mm.flush()
        except (OSError, ValueError) as e:
            raise StoreError(f"cannot flush {self.path}: {e}") from e
        self.flushed = self.wrote
