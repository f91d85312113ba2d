"""TimerLog: the append-only log of timer units, RocketMQ 5's ``store/timer/TimerLog.java``.

Owns: ``<root>/timerlog/<20-digit start offset>`` mapped files of ``mapped_file_size_timer_log`` bytes (created on the
first append, preallocated), the write position, appending a 52-byte unit (a blank fills a file's tail that cannot
hold one more unit + a blank: 5.x's rule), reading a unit at a global position, recovery's truncation and the
deletion of whole files that no pending timer refers to. Byte layout: ``rmq_core.format.timer``.

Invariants: 1. units never straddle files; a position is ``file start + offset in file``. 2. ``write_pos`` is the
end of the last valid unit (recovery sets it with ``truncate_dirty``). 3. files are deleted only from the head.
Thread-safety: none; owned by the broker's event loop (``TimerMessageStore``).

Why Python and not Rust: a unit is one ``struct.pack`` into an mmap (≈1 µs); the per-timer cost is dominated by
decoding the record and putting it again, which already run in the Rust store (see ``timer_message_store.py``).
"""

from __future__ import annotations

import os

from rmq_core.errors import StoreError
from rmq_core.format import timer as fmt
from rmq_core.format.file_name import offset_to_file_name, parse_file_name
from rmq_core.mapped_file import MappedFile


class TimerLog:
    """``TimerLog(store_path, file_size)``: ``load()``, ``append(unit_bytes) -> position``, ``read_unit(pos)``,
    ``units_in(pos, end)``, ``truncate_dirty(pos)``, ``flush()``, ``delete_files_before(pos)``, ``close()``."""

    def __init__(self, store_path: str, file_size: int) -> None:
        if file_size < fmt.UNIT_SIZE + fmt.MIN_BLANK_LEN:
            raise ValueError(f"mappedFileSizeTimerLog {file_size} cannot hold one timer unit")
        self.store_path = store_path
        self.file_size = file_size
        self.files: list[MappedFile] = []

    # --- files -------------------------------------------------------------------------------------------------
    def load(self) -> None:
        """Map the existing files (each must be ``file_size`` bytes). Write positions are set by ``truncate_dirty``."""
        if not os.path.isdir(self.store_path):
            return
        starts = sorted(s for s in (parse_file_name(n) for n in os.listdir(self.store_path)) if s is not None)
        for start in starts:
            path = os.path.join(self.store_path, offset_to_file_name(start))
            if os.path.getsize(path) != self.file_size:
                raise StoreError(
                    f"timer log file {path} has {os.path.getsize(path)} bytes, expected mappedFileSizeTimerLog "
                    f"{self.file_size}"
                )
            mf = MappedFile.open(path, start, self.file_size)
            mf.wrote = self.file_size  # until recovery says otherwise
            mf.flushed = self.file_size
            self.files.append(mf)

    @property
    def write_pos(self) -> int:
        if not self.files:
            return 0
        last = self.files[-1]
        return last.start + last.wrote

    @property
    def min_pos(self) -> int:
        return self.files[0].start if self.files else 0

    def _new_file(self, start: int) -> MappedFile:
        os.makedirs(self.store_path, exist_ok=True)
        mf = MappedFile.create(os.path.join(self.store_path, offset_to_file_name(start)), start, self.file_size)
        self.files.append(mf)
        return mf

    def _file_of(self, pos: int) -> MappedFile | None:
        if not self.files or pos < self.files[0].start:
            return None
        i = (pos - self.files[0].start) // self.file_size
        if i >= len(self.files):
            return None
        mf = self.files[i]
        return mf if mf.start <= pos < mf.end else None

    # --- write -------------------------------------------------------------------------------------------------
    def append(self, unit: bytes) -> int:
        """Append one unit; returns its global position."""
        mf = self.files[-1] if self.files else None
        if mf is None:
            mf = self._new_file(0)
        elif mf.remaining < len(unit) + fmt.MIN_BLANK_LEN:
            if mf.remaining >= fmt.MIN_BLANK_LEN:
                mf.write(mf.wrote, fmt.encode_blank(mf.remaining))
            mf.wrote = mf.size
            mf = self._new_file(mf.end)
        return mf.start + mf.append(unit)

    # --- read --------------------------------------------------------------------------------------------------
    def read_unit(self, pos: int) -> fmt.TimerLogUnit | None:
        mf = self._file_of(pos)
        if mf is None or pos - mf.start + fmt.UNIT_SIZE > mf.size:
            return None
        return fmt.decode_unit(mf.buffer, pos - mf.start)

    def units_in(self, pos: int, end: int) -> list[tuple[int, fmt.TimerLogUnit]]:
        """Every valid unit from ``pos`` (a unit boundary) to ``min(end, write_pos)``, with its position."""
        out: list[tuple[int, fmt.TimerLogUnit]] = []
        end = min(end, self.write_pos)
        while pos < end:
            mf = self._file_of(pos)
            if mf is None:
                break
            u = fmt.decode_unit(mf.buffer, pos - mf.start) if pos - mf.start + fmt.UNIT_SIZE <= mf.size else None
            if u is None or u.magic == fmt.BLANK_MAGIC_CODE or u.size != fmt.UNIT_SIZE:
                pos = mf.end
                continue
            out.append((pos, u))
            pos += fmt.UNIT_SIZE
        return out

    def last_unit_in(self, start: int, end: int) -> fmt.TimerLogUnit | None:
        """The last valid unit of the file ``[start, end)`` (its units are contiguous from the file's start)."""
        mf = self._file_of(start)
        if mf is None:
            return None
        n = min(mf.wrote, mf.size) // fmt.UNIT_SIZE
        while n > 0:
            u = fmt.decode_unit(mf.buffer, (n - 1) * fmt.UNIT_SIZE)
            if u.size == fmt.UNIT_SIZE and fmt.is_magic_ok(u.magic):
                return u
            n -= 1
        return None

    # --- recovery ----------------------------------------------------------------------------------------------
    def scan_valid(self, begin: int, from_file_start: bool = True) -> tuple[int, list[tuple[int, fmt.TimerLogUnit]]]:
        """5.x ``recoverAndRevise(begin, checkTimerLog=true)``: every valid unit up to the first invalid one (size ≠
        52 or a bad magic: the unwritten zeros or a torn unit), from the start of the file holding ``begin`` (5.x),
        or from ``begin`` itself (a unit boundary) when not ``from_file_start``. Returns (the end of the valid
        data, the units with their positions)."""
        if not self.files:
            return 0, []
        idx = 0
        for i in range(len(self.files) - 1, -1, -1):
            if begin >= self.files[i].start:
                idx = i
                break
        first = self.files[idx]
        start_in_first = 0 if from_file_start or begin < first.start else begin - first.start
        units: list[tuple[int, fmt.TimerLogUnit]] = []
        check = first.start + start_in_first
        for mf in self.files[idx:]:
            buf = mf.buffer
            pos = start_in_first if mf is first else 0
            while pos + fmt.UNIT_SIZE <= mf.size:
                u = fmt.decode_unit(buf, pos)
                if u.magic == fmt.BLANK_MAGIC_CODE:  # the file's tail: it is complete
                    pos = mf.size
                    break
                if u.size != fmt.UNIT_SIZE or not fmt.is_magic_ok(u.magic):  # unwritten zeros or a torn unit
                    return mf.start + pos, units
                units.append((mf.start + pos, u))
                pos += fmt.UNIT_SIZE
            check = mf.end
        return check, units

    def unit_ok_before(self, pos: int) -> bool:
        """Whether the unit just before ``pos`` in its file is a valid one (or ``pos`` starts a file)."""
        mf = self._file_of(pos)
        if mf is None:
            mf = self.files[-1] if self.files and pos == self.files[-1].end else None
            if mf is None:
                return False
        rel = pos - mf.start
        if rel == 0 or rel == mf.size:
            return True
        if rel < fmt.UNIT_SIZE or rel % fmt.UNIT_SIZE:
            return False
        u = fmt.decode_unit(mf.buffer, rel - fmt.UNIT_SIZE)
        return u.size == fmt.UNIT_SIZE and fmt.is_magic_ok(u.magic)

    def truncate_dirty(self, pos: int) -> None:
        """Drop everything from ``pos`` on: files starting after it are deleted, the file holding it is zeroed
        from there and its write position set."""
        keep: list[MappedFile] = []
        for mf in self.files:
            if mf.start > pos or (mf.start == pos and mf is not self.files[0] and pos > 0):
                mf.destroy()
                continue
            keep.append(mf)
        self.files = keep
        if keep:
            last = keep[-1]
            rel = min(pos - last.start, last.size)
            if rel < last.size:
                last.zero(rel, last.size)
                last.flush_range(rel, last.size)
            last.wrote = rel
            last.flushed = rel
            for mf in keep[:-1]:
                mf.wrote = mf.size
                mf.flushed = mf.size

    # --- flush / clean -----------------------------------------------------------------------------------------
    def flush(self) -> None:
        for mf in self.files:
            if mf.wrote > mf.flushed:
                mf.flush()

    def delete_files_before(self, pos: int) -> int:
        """Delete the head files that end at or before ``pos`` (never the last file); returns how many."""
        n = 0
        while len(self.files) > 1 and self.files[0].end <= pos:
            self.files.pop(0).destroy()
            n += 1
        return n

    def close(self) -> None:
        for mf in self.files:
            try:
                mf.flush()
            except StoreError:
                pass
            mf.close()
        self.files = []
