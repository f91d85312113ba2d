"""The index service (RocketMQ 4.9 ``IndexService`` + ``IndexFile``). Twin of rust/rmq-store/src/index_service.rs.

Owns: the list of ``<root>/index/`` files, building entries on dispatch, the key walk of a query, loading (with 4.9's
abnormal-exit rule) and refusing bad files. Format: ``format.index``.
Invariants: 1. entries in CommitLog order, never indexed twice; 2. blocks reserved ahead of the writer (a full disk
fails a creation or a put, never SIGBUS); 3. a new file starts where the full one ended; 4. a file that does not fit
the geometry is moved to ``<root>/index_refused/`` and re-indexed; 5. after an abnormal exit, files newer than the
checkpoint are deleted unless the crash was within this boot (then kept and repaired); 6. a query walk never loops.
Thread-safety: none of its own; the engine's lock serialises every call.
Details (each invariant in full; the layout: §9): docs/CORE_API.md, 'Index service'.
"""

from __future__ import annotations

import mmap
import os
import time

from rmq_core.errors import StoreError
from rmq_core.format.index import (
    ENTRY,
    INDEX_DIR,
    INDEX_HEADER_SIZE,
    INDEX_REFUSED_DIR,
    INVALID_INDEX,
    SLOT,
    IndexHeader,
    entry_position,
    index_file_name,
    index_file_size,
    index_key_hash,
    index_keys,
    is_index_file_name,
    next_index_file_name,
    slot_position,
    time_diff_seconds,
)
from rmq_core.mapped_file import create_mapping, reserve_blocks

INDEX_RESERVE_STEP = 16 << 20  # the engine's index_service::INDEX_RESERVE_STEP


class IndexFile:
    __slots__ = ("dirty", "hash_slot_num", "header", "index_num", "mm", "name", "path", "reserved")

    def __init__(self, path: str, mm: mmap.mmap, hash_slot_num: int, index_num: int, header: IndexHeader) -> None:
        self.path = path
        self.name = os.path.basename(path)
        self.mm = mm
        self.reserved = 0  # blocks [0, reserved) reserved; 0 for a file opened (the first put reserves from 0)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.header = header
        self.dirty = False

    @classmethod
    def create(cls, path: str, hash_slot_num: int, index_num: int, end_phy: int, end_ts: int) -> IndexFile:
        size = index_file_size(hash_slot_num, index_num)
        # header, slots, first entries reserved, nothing written: a full disk fails here, not with SIGBUS
        reserved = min(size, slot_position(hash_slot_num) + INDEX_RESERVE_STEP)
        mm = create_mapping(path, size, reserved, "index file")
        h = IndexHeader()
        if end_phy > 0:
            h.begin_phy_offset = h.end_phy_offset = end_phy
        if end_ts > 0:
            h.begin_timestamp = h.end_timestamp = end_ts
        f = cls(path, mm, hash_slot_num, index_num, h)
        f.reserved = reserved
        f.write_header()
        f.dirty = True
        return f

    @classmethod
    def open(cls, path: str, hash_slot_num: int, index_num: int) -> IndexFile | str:
        """The mapped file, or why it is refused."""
        size = index_file_size(hash_slot_num, index_num)
        try:
            fd = os.open(path, os.O_RDWR)
            try:
                length = os.fstat(fd).st_size
                if length != size:
                    return f"size {length} is not {size} (maxHashSlotNum {hash_slot_num}, maxIndexNum {index_num})"
                mm = mmap.mmap(fd, size)
            finally:
                os.close(fd)
        except OSError as e:
            return str(e)
        h = IndexHeader.decode(mm[:INDEX_HEADER_SIZE])
        reason = h.check(hash_slot_num, index_num)
        if reason is not None:
            mm.close()
            return reason
        return cls(path, mm, hash_slot_num, index_num, h)

    def is_write_full(self) -> bool:
        return self.header.index_count >= self.index_num

    def _reserve_to(self, end: int) -> bool:
        """Reserves the blocks up to ``end`` and the step after it (invariant 2); False when the disk is full."""
        to = min(len(self.mm), end + INDEX_RESERVE_STEP)
        try:
            reserve_blocks(self.path, self.reserved, to)
        except OSError:
            return False
        self.reserved = to
        return True

    def write_header(self) -> None:
        self.mm[:INDEX_HEADER_SIZE] = self.header.encode()

    def put_key(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """``IndexFile.putKey``; False when full."""
        h = self.header
        if self.is_write_full():
            return False
        mm = self.mm
        slot_pos = slot_position(key_hash % self.hash_slot_num)
        slot_value = SLOT.unpack_from(mm, slot_pos)[0]
        if slot_value <= INVALID_INDEX or slot_value > h.index_count:
            slot_value = INVALID_INDEX
        count = h.index_count
        at = entry_position(self.hash_slot_num, count)
        if at + ENTRY.size > self.reserved and not self._reserve_to(at + ENTRY.size):
            return False  # a full disk: as a full file (a new one is tried, which the full disk refuses too)
        ENTRY.pack_into(
            mm,
            at,
            key_hash,
            phy_offset,
            time_diff_seconds(store_timestamp, h.begin_timestamp),
            slot_value,
        )
        SLOT.pack_into(mm, slot_pos, count)
        if count <= 1:
            h.begin_phy_offset = phy_offset
            h.begin_timestamp = store_timestamp
        if slot_value == INVALID_INDEX:
            h.hash_slot_count += 1
        h.index_count += 1
        h.end_phy_offset = phy_offset
        h.end_timestamp = store_timestamp
        self.mm[:INDEX_HEADER_SIZE] = h.encode()  # written through, as 4.9's IndexHeader setters do
        self.dirty = True
        return True

    def repair_torn_put(self) -> int:
        """Invariant 5, same boot: undo the slot write of a put whose header was never written; the slots repaired."""
        count = self.header.index_count
        if count < 1 or count >= self.index_num:
            return 0
        saved = ENTRY.unpack_from(self.mm, entry_position(self.hash_slot_num, count))[3]
        restored = saved if INVALID_INDEX < saved < count else INVALID_INDEX
        repaired = 0
        for slot in range(self.hash_slot_num):
            pos = slot_position(slot)
            if SLOT.unpack_from(self.mm, pos)[0] == count:
                SLOT.pack_into(self.mm, pos, restored)
                repaired += 1
        if repaired:
            self.dirty = True
        return repaired

    def select_phy_offsets(self, out: list[int], key_hash: int, max_num: int, begin: int, end: int) -> None:
        """``IndexFile.selectPhyOffset``: newest-first walk of the key's slot chain."""
        h = self.header
        mm = self.mm
        slot_value = SLOT.unpack_from(mm, slot_position(key_hash % self.hash_slot_num))[0]
        if slot_value <= INVALID_INDEX or slot_value > h.index_count or h.index_count <= 1:
            return
        nxt = slot_value
        steps = 0
        while True:
            if len(out) >= max_num or nxt >= h.index_count or nxt <= INVALID_INDEX:
                break
            steps += 1
            if steps > h.index_count:
                break
            kh, phy, diff, prev = ENTRY.unpack_from(mm, entry_position(self.hash_slot_num, nxt))
            if diff < 0:
                break
            time_read = h.begin_timestamp + diff * 1000
            if kh == key_hash and begin <= time_read <= end:
                out.append(phy)
            if prev <= INVALID_INDEX or prev > h.index_count or prev >= nxt or time_read < begin:
                break
            nxt = prev

    def flush(self) -> None:
        if not self.dirty:
            return
        self.write_header()
        try:
            self.mm.flush()
        except OSError as e:
            raise StoreError(f"cannot flush index file {self.path}: {e}") from e
        self.dirty = False

    def close(self) -> None:
        self.mm.close()


class IndexService:
    def __init__(self, root: str, hash_slot_num: int, index_num: int) -> None:
        self.root = root
        self.dir = os.path.join(root, INDEX_DIR)
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.files: list[IndexFile] = []
        self.refused: list[tuple[str, str]] = []
        self.dropped: list[str] = []
        self.repaired_slots = 0

    def load(self, abnormal: bool, index_msg_timestamp: int, same_boot: bool = False) -> None:
        """``IndexService.load(lastExitOK)``: invariants 4 and 5 (``same_boot``: a process crash within this boot)."""
        try:
            os.makedirs(self.dir, exist_ok=True)
            names = sorted(
                n for n in os.listdir(self.dir) if is_index_file_name(n) and os.path.isfile(os.path.join(self.dir, n))
            )
        except OSError as e:
            raise StoreError(f"cannot list {self.dir}: {e}") from e
        refused_from: str | None = None
        for name in names:
            path = os.path.join(self.dir, name)
            opened = (
                f"follows the refused file {refused_from}"
                if refused_from is not None
                else IndexFile.open(path, self.hash_slot_num, self.index_num)
            )
            if isinstance(opened, IndexFile):
                if abnormal and not same_boot and opened.header.end_timestamp > index_msg_timestamp:
                    opened.close()
                    os.unlink(path)
                    self.dropped.append(name)
                    continue
                self.files.append(opened)
                continue
            refused_dir = os.path.join(self.root, INDEX_REFUSED_DIR)
            try:
                os.makedirs(refused_dir, exist_ok=True)
                os.replace(path, os.path.join(refused_dir, name))
            except OSError as e:
                raise StoreError(f"cannot move refused index file {path}: {e}") from e
            if refused_from is None:
                refused_from = name
            self.refused.append((name, opened))
        if abnormal and same_boot and self.files:
            self.repaired_slots = self.files[-1].repair_torn_put()

    def last_indexed_offset(self) -> int | None:
        for f in reversed(self.files):
            if f.header.index_count > 1:
                return f.header.end_phy_offset
        return None

    def drop_files_beyond(self, end: int) -> list[str]:
        dropped = []
        while self.files and self.files[-1].header.index_count > 1 and self.files[-1].header.end_phy_offset >= end:
            f = self.files.pop()
            f.close()
            os.unlink(f.path)
            dropped.append(f.name)
        return dropped

    def _new_file(self) -> None:
        last = self.files[-1] if self.files else None
        end_phy, end_ts = (last.header.end_phy_offset, last.header.end_timestamp) if last else (0, 0)
        if last is not None:
            last.flush()
        name = index_file_name(time.time_ns() // 1_000_000)
        while (last is not None and last.name >= name) or os.path.exists(os.path.join(self.dir, name)):
            name = next_index_file_name(max(last.name, name) if last is not None else name)
        self.files.append(
            IndexFile.create(os.path.join(self.dir, name), self.hash_slot_num, self.index_num, end_phy, end_ts)
        )

    def entries_at_tail(self, offset: int) -> int:
        """How many entries at the end of the index point at ``offset`` (the last record's keys that made it)."""
        n = 0
        for f in reversed(self.files):
            for i in range(f.header.index_count - 1, 0, -1):
                if ENTRY.unpack_from(f.mm, entry_position(f.hash_slot_num, i))[1] != offset:
                    return n
                n += 1
        return n

    def build_index(
        self, topic: bytes, properties: bytes, phy_offset: int, store_timestamp: int, skip: int = 0
    ) -> None:
        """``IndexService.buildIndex`` for one record (the caller applies the rollback skip rule), without its first
        ``skip`` keys (already indexed by a build that stopped inside the record)."""
        if not self.files or self.files[-1].is_write_full():
            self._new_file()
        if phy_offset < self.files[-1].header.end_phy_offset:
            return
        for nth, key in enumerate(index_keys(properties)):
            if nth < skip:
                continue
            h = index_key_hash(topic, key)
            if not self.files[-1].put_key(h, phy_offset, store_timestamp):
                self._new_file()
                self.files[-1].put_key(h, phy_offset, store_timestamp)

    def query_offset(self, topic: bytes, key: bytes, max_num: int, begin: int, end: int) -> tuple[list[int], int, int]:
        """``IndexService.queryOffset``: (offsets, indexLastUpdateTimestamp, indexLastUpdatePhyoffset)."""
        out: list[int] = []
        last_ts = last_phy = 0
        key_hash = index_key_hash(topic, key)
        n = len(self.files)
        for i in range(n - 1, -1, -1):
            f = self.files[i]
            if i == n - 1:
                last_ts, last_phy = f.header.end_timestamp, f.header.end_phy_offset
            if f.header.is_time_matched(begin, end):
                f.select_phy_offsets(out, key_hash, max_num, begin, end)
            if f.header.begin_timestamp < begin or len(out) >= max_num:
                break
        return out, last_ts, last_phy

    def delete_expired_files(self, offset: int) -> int:
        """``IndexService.deleteExpiredFile(offset)``: the leading files (never the last) whose endPhyOffset < offset."""
        n = 0
        while len(self.files) > 1 and self.files[0].header.end_phy_offset < offset:
            f = self.files.pop(0)
            f.close()
            try:
                os.unlink(f.path)
            except OSError as e:
                raise StoreError(f"cannot delete index file {f.path}: {e}") from e
            n += 1
        return n

    def flush(self, live: bool = True) -> int:
        """msync the files written since the last flush: every one with ``live``, else only the full ones (4.9
        flushes an index file once it is full; the one being written is not msynced on a timer). Returns the newest
        endTimestamp now durable (the checkpoint's indexMsgTimestamp), 0 when none is."""
        durable = 0
        for f in self.files:
            if live or f.is_write_full():
                f.flush()
                durable = f.header.end_timestamp
        return durable

    def close(self) -> None:
        for f in self.files:
            f.close()
        self.files.clear()
