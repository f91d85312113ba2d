"""One ConsumeQueue: the 20-byte index units of one (topic, queue id), RocketMQ's ``ConsumeQueue``.

Owns: ``<root>/consumequeue/<topic>/<queueId>/`` (a MappedFileQueue), the min/max logical offsets, the end of the
last indexed record (for idempotent re-dispatch), unit writes with pre-blank filling, and the queue's recovery.
Format: files of ``mapped_file_size_consume_queue`` bytes (a multiple of 20) named by their start *byte* offset;
logical offset N is the unit at byte N×20 (see format/cq_unit.py).
Invariants: 1. units ``[min_offset, max_offset)`` are the queue's messages; 2. files before the last are full, bytes
above the written end zero; 3. a unit is written only at ``max_offset`` or beyond, gaps pre-blank filled;
4. ``max_physic_offset`` is the end of the last real unit (re-dispatch skips below it); 5. load finds the last valid
unit, zeroes after it and deletes later files.
Thread-safety: none of its own; the engine's lock serialises every call.
Details (each invariant in full): docs/CORE_API.md, 'ConsumeQueue files'.
"""

from __future__ import annotations

import os

from rmq_core.format import CONSUMEQUEUE_DIR
from rmq_core.format.cq_unit import (
    CQ_STORE_UNIT_SIZE,
    PRE_BLANK_BYTES,
    UNIT,
    encode_unit,
    is_pre_blank,
)
from rmq_core.mapped_file import MappedFile

from .mapped_file_queue import MappedFileQueue

U = CQ_STORE_UNIT_SIZE


class ConsumeQueue:
    __slots__ = ("file_size", "max_offset", "max_physic_offset", "min_offset", "queue", "queue_id", "topic")

    def __init__(self, root_dir: str, topic: str, queue_id: int, file_size: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.queue = MappedFileQueue(os.path.join(root_dir, CONSUMEQUEUE_DIR, topic, str(queue_id)), file_size)
        self.min_offset = 0
        self.max_offset = 0
        self.max_physic_offset = -1

    @property
    def units_per_file(self) -> int:
        return self.file_size // U

    def roll_next_file(self, offset: int) -> int:
        """``rollNextFile`` in logical offsets."""
        n = self.units_per_file
        return offset + n - offset % n

    # -- load / recovery ------------------------------------------------------------------------------------

    def load_and_recover(self) -> None:
        """Invariant 5."""
        self.queue.load()
        files = self.queue.files
        if not files:
            return
        keep_idx, wrote = 0, 0
        for fi in range(len(files) - 1, -1, -1):
            n = self._last_valid_unit(files[fi])
            if n >= 0:
                keep_idx, wrote = fi, (n + 1) * U
                break
        for f in files[:keep_idx]:
            f.wrote = f.flushed = f.size
        holder = files[keep_idx]
        tail_end = holder.data_end(wrote)
        holder.wrote = holder.flushed = wrote
        if tail_end > wrote:
            holder.zero(wrote, tail_end)
            holder.flush_range(wrote, tail_end)
        self.queue.delete_from_index(keep_idx + 1)
        self.max_offset = (holder.start + wrote) // U
        self._recompute_min()
        self._recompute_max_physic()

    @staticmethod
    def _last_valid_unit(f: MappedFile) -> int:
        """Index of the last valid unit (offset >= 0 and size > 0) in the file, scanning back from its end; -1."""
        data = f.read_raw(0, f.size)
        nonzero = len(data.rstrip(b"\0"))  # all-zero units are invalid: start at the last one with data
        for ui in range((nonzero + U - 1) // U - 1, -1, -1):
            offset, size, _tags = UNIT.unpack_from(data, ui * U)
            if offset >= 0 and size > 0:
                return ui
        return -1

    def _recompute_min(self) -> None:
        first = self.queue.first
        off = first.start // U if first is not None else self.max_offset
        while off < self.max_offset:
            u = self.unit_at(off)
            if u is None or not is_pre_blank(*u):
                break
            off += 1
        self.min_offset = off

    def _recompute_max_physic(self) -> None:
        self.max_physic_offset = -1
        first = self.queue.first
        min_start = first.start // U if first is not None else 0
        off = self.max_offset - 1
        while off >= min_start:
            u = self.unit_at(off)
            if u is None:
                break
            if not is_pre_blank(*u):
                self.max_physic_offset = u[0] + u[1]
                break
            off -= 1

    def truncate_beyond(self, phys_end: int) -> int:
        """Removes the trailing units pointing at or beyond CommitLog offset ``phys_end`` (scanning back from the
        end; a pre-blank unit, a missing unit or the first file's start stops it); returns how many."""
        first = self.queue.first
        first_off = first.start // U if first is not None else 0
        new_max = self.max_offset
        while new_max > first_off:
            u = self.unit_at(new_max - 1)
            if u is None or is_pre_blank(*u) or u[0] < phys_end:
                break
            new_max -= 1
        removed = self.max_offset - new_max
        if removed:
            self.queue.truncate(new_max * U)
            self.max_offset = new_max
            if self.min_offset > new_max:
                self.min_offset = new_max
            self._recompute_max_physic()
        return removed

    # -- write path -----------------------------------------------------------------------------------------

    def ensure_file_for(self, queue_offset: int) -> None:
        """Creates the file that will hold unit ``queue_offset`` if it is missing (StoreError if the disk refuses)."""
        pos = queue_offset * U
        if self.queue.find(pos) is None:
            self.queue.create(self.queue.file_start_of(pos))

    def put(self, queue_offset: int, offset: int, size: int, tags_code: int) -> bool:
        """Writes one unit at ``queue_offset`` (invariant 3). Returns False (and writes nothing) if
        ``queue_offset < max_offset`` (already indexed), or if it is more than one file's worth of units past
        ``max_offset`` in a non-empty queue (puts never leave a gap: only a damaged QUEUEOFFSET met by recovery's
        re-dispatch asks for one, and filling it would create every file up to it)."""
        if queue_offset < self.max_offset:
            return False
        if self.queue.files and queue_offset - self.max_offset > self.file_size // U:
            return False
        pos = queue_offset * U
        if not self.queue.files:
            # the queue's first file: pre-blank from its start (fillPreBlank), min = this offset
            fill = self.queue.file_start_of(pos)
            self.min_offset = queue_offset
        else:
            fill = self.max_offset * U
        while fill < pos:
            f = self._writable_file(fill)
            n = min(pos, f.end) - fill
            f.write(fill - f.start, PRE_BLANK_BYTES * (n // U))
            f.wrote = fill - f.start + n
            fill += n
        f = self._writable_file(pos)
        f.write(pos - f.start, encode_unit(offset, size, tags_code))
        f.wrote = pos - f.start + U
        self.max_offset = queue_offset + 1
        if not is_pre_blank(offset, size, tags_code):
            self.max_physic_offset = offset + size
        return True

    def _writable_file(self, pos: int) -> MappedFile:
        f = self.queue.find(pos)
        if f is None:
            f = self.queue.create(self.queue.file_start_of(pos))
        return f

    # -- read path ------------------------------------------------------------------------------------------

    def unit_at(self, offset: int) -> tuple[int, int, int] | None:
        """The unit at logical ``offset`` if its file exists and holds it in its written data."""
        pos = offset * U
        f = self.queue.find(pos)
        if f is None or pos - f.start + U > f.wrote:
            return None
        return UNIT.unpack_from(f.buffer, pos - f.start)

    def index_buffer(self, offset: int, max_bytes: int) -> bytes | None:
        """4.9 ``getIndexBuffer``: the written units of the one file holding ``offset``, from ``offset`` on (at most
        the units the scan can reach with cap ``max_bytes``); None if that file is missing or ``offset`` is not
        written."""
        pos = offset * U
        f = self.queue.find(pos)
        if f is None:
            return None
        rel = pos - f.start
        if rel >= f.wrote:
            return None
        # the 4.9 loop runs while i < cap, i stepping by 20: ceil(cap / 20) units at most
        n = min(f.wrote - rel, -(-max(max_bytes, 0) // U) * U)
        return f.read_raw(rel, n)

    def units(self, start: int, end: int) -> list[tuple[int, bytes]]:
        """Raw units of ``[start, end)`` as ``(first_offset, bytes)`` runs, one per file, skipping missing files."""
        out = []
        off = start
        while off < end:
            pos = off * U
            f = self.queue.find(pos)
            nxt = self.roll_next_file(off)
            if f is not None:
                rel = pos - f.start
                stop = min(end, nxt)
                n = min((stop - off) * U, max(f.wrote - rel, 0))
                if n > 0:
                    out.append((off, f.read_raw(rel, n)))
            off = nxt
        return out

    # -- maintenance ----------------------------------------------------------------------------------------

    def correct_min_offset_only(self, min_phys: int) -> None:
        """min offset = the first unit (from the current min) whose CommitLog offset >= ``min_phys`` and that is not
        pre-blank (the max if none). What open does after recovery (RocketMQ's ``recoverTopicQueueTable``)."""
        off = self.min_offset
        while off < self.max_offset:
            u = self.unit_at(off)
            if u is not None and u[0] >= min_phys and not is_pre_blank(*u):
                break
            off += 1
        self.min_offset = off

    def correct_min_offset(self, min_phys: int) -> None:
        """``correctMinOffset``: ``correct_min_offset_only``, then delete the files wholly below the new min, never the
        last file."""
        self.correct_min_offset_only(min_phys)
        for f in list(self.queue.files[:-1]):
            if f.end <= self.min_offset * U:
                self.queue.remove(f)

    def flush(self) -> None:
        self.queue.flush()

    def flush_if_dirty(self, least_pages: int) -> bool:
        """The flush thread's rule (4.9's ``flush(flushConsumeQueueLeastPages)``): msyncs the queue when at least
        ``least_pages`` pages are dirty (0: any unflushed unit). True when no unit is left unflushed."""
        if self.queue.is_able_to_flush(least_pages):
            self.queue.flush()
            return True
        return not self.queue.is_able_to_flush(0)

    def close(self) -> None:
        self.queue.close()
