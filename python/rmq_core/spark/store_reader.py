"""Read-only access to a RocketMQ store directory, without opening a ``MessageStore``.

Why: ``MessageStore`` (Rust and Python engines) ``flock``s ``<root>/lock`` exclusively, runs recovery and creates
``abort`` at open — a second handle on one directory fails (even in the same process), and opening is a write.
Spark runs several tasks at once (``local[2]`` = two Python workers) and the directory may belong to a running
broker, so the ``path`` source reads the files directly: ConsumeQueue units with ``pread``, CommitLog records
through a read-only ``mmap`` (MAP_SHARED pages are coherent with a live writer on the same machine).

Invariants:
1. Nothing under the root is created, written, locked or deleted.
2. ``min_offset``/``max_offset`` follow the engine's rules: max = end of the written units (an all-zero unit ends
   them; the last unit is checked against its CommitLog record, so a unit being written is not returned early);
   min = first unit, not pre-blank, whose CommitLog offset is at or above the CommitLog's first file start.
3. ``read_records`` returns whole records, byte for byte, in queue order; units below the queue's min (deleted
   data) and pre-blank units are never returned.

Thread-safety: one instance per task/thread (file handles are not shared); no locks.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from rmq_core import _backend

if TYPE_CHECKING:
    from typing_extensions import Buffer

CQ_UNIT = 20
PRE_BLANK_SIZE = 0x7FFFFFFF
UNIT_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
_MAGIC_V1 = -626843481  # 0xDAA320A7 as int32 (MESSAGE_MAGIC_CODE)
_MAGIC_V2 = -626843477  # 0xDAA320AB (MESSAGE_MAGIC_CODE_V2)
_BLANK_MAGIC = -875286124  # 0xCBD43194


def _numbered_files(d: str) -> list[tuple[int, str]]:
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return []
    out = [(int(n), os.path.join(d, n)) for n in names if n.isdigit() and len(n) == 20]
    out.sort()
    return out


class ReadOnlyStore:
    """``ReadOnlyStore(root_dir)``: topics, queue min/max offsets and raw records of a store directory."""

    def __init__(self, root_dir: str | os.PathLike[str]) -> None:
        self.root_dir = os.fspath(root_dir)
        if not os.path.isdir(os.path.join(self.root_dir, "commitlog")) and not os.path.isdir(
            os.path.join(self.root_dir, "consumequeue")
        ):
            raise FileNotFoundError(
                f"{self.root_dir} is not a RocketMQ store directory (no commitlog/ or consumequeue/)"
            )
        self._cl_files: list[tuple[int, str]] = []
        self._cl_size = 0
        self._maps: dict[int, mmap.mmap] = {}
        self._refresh_commit_log()

    # --- lifecycle ---------------------------------------------------------------------------------------------
    def close(self) -> None:
        for m in self._maps.values():
            try:
                m.close()
            except BufferError:  # a view still alive; the GC closes it
                pass
        self._maps.clear()

    def __enter__(self) -> ReadOnlyStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- CommitLog ---------------------------------------------------------------------------------------------
    def _refresh_commit_log(self) -> None:
        self._cl_files = _numbered_files(os.path.join(self.root_dir, "commitlog"))
        if self._cl_files and not self._cl_size:
            self._cl_size = os.path.getsize(self._cl_files[0][1])

    @property
    def min_physical_offset(self) -> int:
        return self._cl_files[0][0] if self._cl_files else 0

    def _map(self, start: int) -> mmap.mmap | None:
        m = self._maps.get(start)
        if m is None:
            path = os.path.join(self.root_dir, "commitlog", f"{start:020d}")
            try:
                with open(path, "rb") as f:
                    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except (FileNotFoundError, ValueError):
                return None
            self._maps[start] = m
        return m

    def _file_start_of(self, offset: int) -> int | None:
        if not self._cl_size:
            self._refresh_commit_log()
            if not self._cl_size:
                return None
        return offset - offset % self._cl_size

    def _record_matches(self, offset: int, size: int) -> bool:
        start = self._file_start_of(offset)
        if start is None:
            return False
        m = self._map(start)
        pos = offset - start
        if m is None or pos + size > len(m) or size < 8:
            return False
        total, magic = struct.unpack_from(">ii", m, pos)
        return total == size and magic in (_MAGIC_V1, _MAGIC_V2)

    # --- ConsumeQueues -----------------------------------------------------------------------------------------
    def topics(self) -> list[tuple[str, int]]:
        """Every (topic, queue_id) with a ConsumeQueue directory, sorted."""
        base = os.path.join(self.root_dir, "consumequeue")
        out: list[tuple[str, int]] = []
        try:
            topics = os.listdir(base)
        except FileNotFoundError:
            return []
        for t in topics:
            try:
                qids = os.listdir(os.path.join(base, t))
            except NotADirectoryError:
                continue
            out.extend((t, int(q)) for q in qids if q.isdigit() and str(int(q)) == q)
        out.sort()
        return out

    def _cq_files(self, topic: str, queue_id: int) -> list[tuple[int, str]]:
        return _numbered_files(os.path.join(self.root_dir, "consumequeue", topic, str(queue_id)))

    @staticmethod
    def _read_units(path: str, first: int, count: int) -> np.ndarray:
        """Units [first, first+count) of one file (local indices); fewer at end of file; empty if gone."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return np.empty(0, UNIT_DTYPE)
        try:
            raw = os.pread(fd, count * CQ_UNIT, first * CQ_UNIT)
        finally:
            os.close(fd)
        return np.frombuffer(raw[: len(raw) - len(raw) % CQ_UNIT], UNIT_DTYPE)

    def max_offset(self, topic: str, queue_id: int) -> int:
        files = self._cq_files(topic, queue_id)
        while files:
            start, path = files[-1]
            units = self._read_units(path, 0, os.path.getsize(path) // CQ_UNIT)
            ends = np.flatnonzero(units["size"] == 0)
            n = int(ends[0]) if len(ends) else len(units)
            if n == 0 and len(files) > 1:
                # a freshly rolled empty file: the data ends in the previous one only if that one is full
                files.pop()
                continue
            base = start // CQ_UNIT
            # the last unit may be in flight: accept it only once its record is readable (invariant 2)
            while n > 0:
                u = units[n - 1]
                if int(u["size"]) == PRE_BLANK_SIZE or self._record_matches(int(u["offset"]), int(u["size"])):
                    break
                self._refresh_commit_log()
                if self._record_matches(int(u["offset"]), int(u["size"])):
                    break
                n -= 1
            return base + n
        return 0

    def min_offset(self, topic: str, queue_id: int) -> int:
        files = self._cq_files(topic, queue_id)
        if not files:
            return 0
        max_off = self.max_offset(topic, queue_id)
        min_phys = self.min_physical_offset
        for start, path in files:
            units = self._read_units(path, 0, os.path.getsize(path) // CQ_UNIT)
            ok = (units["size"] > 0) & (units["size"] != PRE_BLANK_SIZE) & (units["offset"] >= min_phys)
            hit = np.flatnonzero(ok)
            if len(hit):
                return min(start // CQ_UNIT + int(hit[0]), max_off)
        return max_off

    def units(self, topic: str, queue_id: int, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
        """(queue offsets, units) for the written units in [start, end) whose files exist."""
        files = self._cq_files(topic, queue_id)
        offs: list[np.ndarray] = []
        parts: list[np.ndarray] = []
        for i, (fstart, path) in enumerate(files):
            first = fstart // CQ_UNIT
            nxt = files[i + 1][0] // CQ_UNIT if i + 1 < len(files) else None
            lo = max(start, first)
            hi = end if nxt is None else min(end, nxt)
            if lo >= hi:
                continue
            u = self._read_units(path, lo - first, hi - lo)
            parts.append(u)
            offs.append(np.arange(lo, lo + len(u), dtype=np.int64))
        if not parts:
            return np.empty(0, np.int64), np.empty(0, UNIT_DTYPE)
        return np.concatenate(offs), np.concatenate(parts)

    def read_records(
        self, topic: str, queue_id: int, start: int, end: int, tag_codes: Sequence[int] | None = None
    ) -> tuple[Buffer, int]:
        """The records of units [start, end) (tag-code filtered when ``tag_codes`` is given), concatenated, and
        how many there are. Units below the CommitLog's first file, pre-blank and unwritten units are skipped.
        The records are a ``ColumnBuffer`` (Rust backend; ``bytes`` with the Python one): equal to their ``bytes``,
        taken by ``decode_columns`` as is."""
        _qoffs, units = self.units(topic, queue_id, start, end)
        if not len(units):
            return b"", 0
        size = units["size"].astype(np.int64)
        off = units["offset"].astype(np.int64)
        keep = (size > 0) & (size != PRE_BLANK_SIZE) & (off >= self.min_physical_offset)
        if tag_codes is not None:
            codes = np.array([c & 0xFFFFFFFF for c in tag_codes], dtype=np.int64)
            keep &= np.isin(units["tags_code"].astype(np.int64) & 0xFFFFFFFF, codes)
        off = off[keep]
        size = size[keep]
        if not len(off):
            return b"", 0
        if self._cl_size == 0 or off[-1] + size[-1] > self._cl_files[-1][0] + self._cl_size:
            self._refresh_commit_log()
        fstarts = off - off % self._cl_size
        out: list[Buffer] = []
        bounds = np.flatnonzero(np.diff(fstarts)) + 1
        for seg in np.split(np.arange(len(off)), bounds):
            fs = int(fstarts[seg[0]])
            m = self._map(fs)
            if m is None:
                raise FileNotFoundError(
                    f"CommitLog file {fs:020d} of {self.root_dir} disappeared while reading {topic}:{queue_id}"
                )
            local = off[seg] - fs
            ends = local + size[seg]
            # records that sit back to back in the CommitLog are copied as one run; the runs of one file are
            # gathered in one call (Rust, GIL released: a queue's records are interleaved with the other queues')
            breaks = np.flatnonzero(local[1:] != ends[:-1]) + 1
            run_starts = np.ascontiguousarray(np.concatenate(([local[0]], local[breaks])), dtype=np.int64)
            run_ends = np.ascontiguousarray(np.concatenate((ends[breaks - 1], [ends[-1]])), dtype=np.int64)
            out.append(_backend.impl.gather_runs(m, run_starts, run_ends))
        return (out[0] if len(out) == 1 else b"".join(out)), len(off)  # a range across files: rare
