"""A read-only view of a store directory — ours or a live broker's — without opening a ``MessageStore``: the twin of
``rust/rmq-store/src/store_reader.rs``, identical results (its header has the full rules).

Owns: ``StoreReader`` (queues, min/max logical offsets, a queue range's CommitLog records, a record by its physical
offset) and ``mapped_file_size`` (a directory's mapped file size from its files).
Format: ``commitlog/`` records and ``consumequeue/<topic>/<queue id>/`` 20-byte units, each offset in the file with
the greatest start at or below it.
Invariants: 1. nothing under the root is created, written, locked or deleted; 2. a missing or short file is
looked at again once; 3. a record is served only if ``record_head_matches`` its unit; 4. ``max_offset`` /
``min_offset`` count only written, valid units; 5. units below the CommitLog's min, pre-blanks and tag misses skip.
Thread-safety: one reader per thread (the map cache is not locked); the Rust reader may be shared.
Details (each invariant in full): docs/CORE_API.md, 'Store reader'.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Sequence

from rmq_core.format import COMMITLOG_DIR, CONSUMEQUEUE_DIR
from rmq_core.format.cq_unit import CQ_STORE_UNIT_SIZE, UNIT, is_pre_blank, to_int32
from rmq_core.format.file_name import infer_mapped_file_size, list_mapped_files, offset_to_file_name
from rmq_core.format.message import (
    MIN_RECORD_LEN_V1_IPV4,
    RECORD_HEADER_LEN,
    RecordFormatError,
    is_message_magic,
    record_head_matches,
    record_layout,
    record_magic,
    record_total_size,
)

_U = CQ_STORE_UNIT_SIZE


def _length(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def mapped_file_size(d: str | os.PathLike[str]) -> int | None:
    """The mapped file size of one directory of store files (``infer_mapped_file_size`` over the files on disk);
    None when nothing tells. Shared with ``rmq-core store verify|inspect``."""
    return infer_mapped_file_size([(s, _length(p)) for s, p in list_mapped_files(os.fspath(d))])


def _read_units(fd: int, first: int, count: int) -> bytes:
    """Units ``[first, first + count)`` of one file (local indices), fewer at its end; whole units only."""
    length = os.fstat(fd).st_size
    lo = min(first * _U, length)
    hi = min((first + count) * _U, length)
    raw = os.pread(fd, hi - lo, lo) if hi > lo else b""
    return raw[: len(raw) - len(raw) % _U]


def _read_unit(fd: int, index: int) -> tuple[int, int, int] | None:
    raw = os.pread(fd, _U, index * _U)
    return UNIT.unpack(raw) if len(raw) == _U else None


def _written_units(fd: int) -> int:
    lo, hi = 0, os.fstat(fd).st_size // _U
    while lo < hi:
        mid = (lo + hi) // 2
        u = _read_unit(fd, mid)
        if u is not None and u[1] != 0:
            lo = mid + 1
        else:
            hi = mid
    return lo


class StoreReader:
    """``StoreReader(root, commit_log_file_size=None, consume_queue_file_size=None)``: read-only access to a store
    directory; sizes not given are taken from the files on disk."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        commit_log_file_size: int | None = None,
        consume_queue_file_size: int | None = None,
    ) -> None:
        self._root = os.fspath(root)
        if not os.path.isdir(os.path.join(self._root, COMMITLOG_DIR)) and not os.path.isdir(
            os.path.join(self._root, CONSUMEQUEUE_DIR)
        ):
            raise FileNotFoundError(
                f"I/O error on {self._root}: not a RocketMQ store directory (no commitlog/ or consumequeue/)"
            )
        for name, size in (
            ("commit_log_file_size", commit_log_file_size),
            ("consume_queue_file_size", consume_queue_file_size),
        ):
            if size is not None and size <= 0:
                raise ValueError(f"invalid argument: {name} must be positive")
        self._cl_size = commit_log_file_size
        self._cq_size = consume_queue_file_size
        self._cl_files: list[int] = self._list_commit_log()
        self._maps: dict[int, mmap.mmap] = {}

    # --- lifecycle ---------------------------------------------------------------------------------------------
    @property
    def root(self) -> str:
        return self._root

    def close(self) -> None:
        for m in self._maps.values():
            try:
                m.close()
            except BufferError:  # a view is still alive; the GC closes it
                pass
        self._maps.clear()

    def __enter__(self) -> StoreReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- listings ----------------------------------------------------------------------------------------------
    def _list_commit_log(self) -> list[int]:
        return [s for s, _ in list_mapped_files(os.path.join(self._root, COMMITLOG_DIR))]

    @property
    def commit_log_file_size(self) -> int | None:
        return self._cl_size if self._cl_size is not None else mapped_file_size(os.path.join(self._root, COMMITLOG_DIR))

    @property
    def consume_queue_file_size(self) -> int | None:
        if self._cq_size is not None:
            return self._cq_size
        for t, q in self.queues():
            size = mapped_file_size(self._queue_dir(t, q))
            if size is not None:
                return size
        return None

    def topics(self) -> list[str]:
        return sorted({t for t, _ in self.queues()})

    def queues(self) -> list[tuple[str, int]]:
        base = os.path.join(self._root, CONSUMEQUEUE_DIR)
        out: list[tuple[str, int]] = []
        try:
            topics = os.listdir(base)
        except (FileNotFoundError, NotADirectoryError):
            return out
        for t in topics:
            try:
                names = os.listdir(os.path.join(base, t))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for n in names:
                if n.isascii() and n.lstrip("-").isdigit():
                    try:
                        q = int(n)
                    except ValueError:
                        continue
                    if str(q) == n and -(2**31) <= q < 2**31:
                        out.append((t, q))
        out.sort()
        return out

    @property
    def min_physical_offset(self) -> int:
        self._cl_files = self._list_commit_log()
        return self._cl_files[0] if self._cl_files else 0

    def _queue_dir(self, topic: str, queue_id: int) -> str:
        return os.path.join(self._root, CONSUMEQUEUE_DIR, topic, str(queue_id))

    def _queue_files(self, topic: str, queue_id: int) -> list[tuple[int, str]]:
        return list_mapped_files(self._queue_dir(topic, queue_id))

    # --- offsets -----------------------------------------------------------------------------------------------
    def max_offset(self, topic: str, queue_id: int) -> int:
        files = self._queue_files(topic, queue_id)
        min_phys = self.min_physical_offset
        while files:
            start, path = files[-1]
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                files.pop()
                continue
            try:
                n = _written_units(fd)
                if n == 0 and len(files) > 1:
                    files.pop()  # a freshly rolled file without units yet
                    continue
                while n > 0:
                    u = _read_unit(fd, n - 1)
                    if u is not None and self._unit_is_servable(u, min_phys):
                        break
                    n -= 1
                return start // _U + n
            finally:
                os.close(fd)
        return 0

    def min_offset(self, topic: str, queue_id: int) -> int:
        files = self._queue_files(topic, queue_id)
        if not files:
            return 0
        max_off = self.max_offset(topic, queue_id)
        min_phys = self.min_physical_offset
        for start, path in files:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                raw = _read_units(fd, 0, os.fstat(fd).st_size // _U)
            finally:
                os.close(fd)
            for i, (offset, size, tags_code) in enumerate(UNIT.iter_unpack(raw)):
                if size == 0:
                    break
                if not is_pre_blank(offset, size, tags_code) and offset >= min_phys:
                    return min(start // _U + i, max_off)
        return max_off

    # --- records -----------------------------------------------------------------------------------------------
    def read_records(
        self, topic: str, queue_id: int, start: int, end: int, tag_codes: Sequence[int] | None = None
    ) -> tuple[bytes, int, int]:
        """``(records, count, next_offset)``: the records of units ``[start, end)`` in queue order (tag-code
        filtered when ``tag_codes`` is given), how many, and the next unit to read (``end`` unless the read stopped
        at a unit not written yet or a record not whole)."""
        out: list[bytes] = []
        start = max(start, 0)
        if start >= end:
            return b"", 0, max(end, start)
        codes = None if tag_codes is None else {to_int32(c) for c in tag_codes}
        files = self._queue_files(topic, queue_id)
        min_phys = self.min_physical_offset
        cur = start
        while cur < end:
            idx = 0
            while idx < len(files) and files[idx][0] // _U <= cur:
                idx += 1
            if idx == 0:
                if not files:
                    break
                cur = min(files[0][0] // _U, end)  # below the queue's first file: deleted units
                continue
            fstart, path = files[idx - 1]
            base = fstart // _U
            is_last = idx == len(files)
            limit = end if is_last else min(end, files[idx][0] // _U)
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                raw = b""
            else:
                try:
                    raw = _read_units(fd, cur - base, limit - cur)
                finally:
                    os.close(fd)
            for offset, size, tags_code in UNIT.iter_unpack(raw):
                if size == 0:
                    return b"".join(out), len(out), cur
                if (
                    not is_pre_blank(offset, size, tags_code)
                    and offset >= min_phys
                    and (codes is None or to_int32(tags_code) in codes)
                ):
                    rec = self._bytes_at(offset, size)
                    if rec is None or not record_head_matches(rec, offset):
                        return b"".join(out), len(out), cur
                    out.append(rec)
                cur += 1
            if cur < limit:
                if is_last:
                    break  # the last file ends before the range: not written yet
                cur = limit
        return b"".join(out), len(out), cur

    def record_at(self, phy_offset: int) -> bytes | None:
        """The whole record that starts at CommitLog offset ``phy_offset``, or None when no message record starts
        there (it must decode and its PHYSICALOFFSET must be ``phy_offset``)."""
        if phy_offset < 0:
            return None
        head = self._bytes_at(phy_offset, RECORD_HEADER_LEN)
        if head is None or not is_message_magic(record_magic(head)):
            return None
        total = record_total_size(head)
        if total < MIN_RECORD_LEN_V1_IPV4:
            return None
        rec = self._bytes_at(phy_offset, total)
        if rec is None or not record_head_matches(rec, phy_offset):
            return None
        try:
            record_layout(rec, 0, len(rec))
        except RecordFormatError:
            return None
        return rec

    def _unit_is_servable(self, unit: tuple[int, int, int], min_phys: int) -> bool:
        offset, size, tags_code = unit
        if is_pre_blank(offset, size, tags_code) or offset < min_phys:
            return True
        if size <= 0:
            return False
        rec = self._bytes_at(offset, size)
        return rec is not None and record_head_matches(rec, offset)

    def _bytes_at(self, offset: int, length: int) -> bytes | None:
        """The ``length`` CommitLog bytes at ``offset`` when they lie inside one mapped file (listing and map
        refreshed once when they do not)."""
        if offset < 0 or length < 0:
            return None
        for attempt in (0, 1):
            if attempt == 1:
                self._cl_files = self._list_commit_log()
            files = self._cl_files
            idx = 0
            lo, hi = 0, len(files)
            while lo < hi:  # partition point: files starting at or below offset
                mid = (lo + hi) // 2
                if files[mid] <= offset:
                    lo = mid + 1
                else:
                    hi = mid
            idx = lo
            if idx == 0:
                continue
            start = files[idx - 1]
            if self._cl_size is not None:
                file_end = start + self._cl_size
            elif idx < len(files):
                file_end = files[idx]
            else:
                file_end = None
            if file_end is not None and offset + length > file_end:
                continue
            m = self._map(start, attempt == 1)
            if m is None:
                continue
            pos = offset - start
            if pos + length <= len(m):
                return m[pos : pos + length]
        return None

    def _map(self, start: int, refresh: bool) -> mmap.mmap | None:
        path = os.path.join(self._root, COMMITLOG_DIR, offset_to_file_name(start))
        m = self._maps.get(start)
        if m is not None and not (refresh and _length(path) > len(m)):
            return m
        try:
            with open(path, "rb") as f:
                nm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # gone, or length 0 (being created)
            return None
        if m is not None:
            try:
                m.close()
            except BufferError:
                pass
        self._maps[start] = nm
        return nm
