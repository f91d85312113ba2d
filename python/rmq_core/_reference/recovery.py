"""Recovery on open (docs/CORE_API.md §7): make the CommitLog and the ConsumeQueues agree on a validated end.

Owns: the CommitLog scan (normal and abnormal), the truncation of dirty ConsumeQueue units, the re-dispatch of
records after a crash, and the recovery report (each ConsumeQueue's own recovery runs before this).
Format: reads ``commitlog/``, ``consumequeue/``, ``checkpoint``; zeroes torn bytes in place; deletes files wholly
beyond the end; writes re-dispatched units.
Invariants: 1. the scan (from the last 3 files, or the checkpoint's file after a crash) ends at the first invalid
record; 2. after the end, bytes are zeroed and later files deleted; 3. both modes drop every queue's trailing units
at or past the end; 4. abnormal only: records are re-dispatched from the earliest undispatched point to the end.
Thread-safety: runs inside the engine constructor, before any other thread exists.
Details (each invariant in full): docs/CORE_API.md, 'Recovery scan'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from rmq_core.format import RECOVER_NORMAL_FILE_COUNT
from rmq_core.format.message import (
    _HEADER8,
    _I32,
    _I64,
    BLANK_MAGIC,
    QUEUE_OFFSET_POSITION,
    QUEUEID_POSITION,
    RecordFormatError,
    body_crc,
    decode_properties,
    is_legal_topic,
    is_tx_prepared_or_rollback,
    record_layout,
    tags_code_of,
)
from rmq_core.mapped_file import MappedFile

from .checkpoint import StoreCheckpoint
from .commit_log import CommitLog
from .consume_queue import ConsumeQueue

BLANK = -1
INVALID = -2


def check_record(buf: Any, pos: int, limit: int, check_crc: bool) -> tuple[int, Any]:
    """What recovery finds at ``buf[pos:limit]`` (``CommitLog.checkMessageAndReturnSize``): ``(size, layout)`` for a
    record, ``(BLANK, None)`` or ``(INVALID, None)``."""
    if limit - pos >= 8 and _HEADER8.unpack_from(buf, pos)[1] == BLANK_MAGIC:
        return BLANK, None
    try:
        layout = record_layout(buf, pos, limit)
    except RecordFormatError:
        return INVALID, None
    total, _magic, _sf, _st, body_pos, body_len, _tp, _tl = layout
    if check_crc:
        stored = _I32.unpack_from(buf, pos + 8)[0]
        if body_crc(buf[pos + body_pos : pos + body_pos + body_len]) != stored:
            return INVALID, None
    return total, layout


def _start_index(files: list[MappedFile], abnormal: bool, checkpoint: StoreCheckpoint) -> int:
    if not abnormal:
        return max(0, len(files) - RECOVER_NORMAL_FILE_COUNT)
    confirm = max(checkpoint.confirm_phy_offset, 0)
    if confirm <= 0:
        return 0
    for i in range(len(files) - 1, -1, -1):
        if files[i].start <= confirm:
            return i
    return 0


def recover_commit_log(
    commit_log: CommitLog, abnormal: bool, checkpoint: StoreCheckpoint, check_crc: bool
) -> tuple[int, int]:
    """Invariants 1 and 2: returns ``(end, truncated_bytes)``."""
    files = list(commit_log.queue.files)
    if not files:
        return 0, 0
    idx = _start_index(files, abnormal, checkpoint)
    pos = 0
    while True:
        f = files[idx]
        if pos >= f.size:
            if idx + 1 < len(files):
                idx, pos = idx + 1, 0
                continue
            end = f.end
            break
        size, _layout = check_record(f.buffer, pos, f.size, check_crc)
        if size == BLANK:
            if idx + 1 < len(files):
                idx, pos = idx + 1, 0
                continue
            end = f.end
            break
        if size == INVALID:
            end = f.start + pos
            break
        pos += size

    garbage_end = end
    for f in reversed(files):
        if f.end <= end:
            break
        frm = max(end - f.start, 0)
        nz = f.data_end(frm)
        if nz > frm:
            garbage_end = f.start + nz
            break
    truncated = max(garbage_end - end, 0)

    for f in files:
        if f.end <= end:
            f.wrote = f.flushed = f.size
        elif f.start <= end:
            p = end - f.start
            zero_to = min(max(garbage_end - f.start, 0), f.size)
            f.wrote = f.flushed = p
            if zero_to > p:
                f.zero(p, zero_to)
                f.flush_range(p, zero_to)
        else:
            commit_log.queue.remove(f)
    return end, truncated


def recover(
    commit_log: CommitLog,
    queues: dict[tuple[str, int], ConsumeQueue],
    get_or_create_queue: Callable[[str, int], ConsumeQueue],
    checkpoint: StoreCheckpoint,
    abnormal: bool,
    check_crc: bool,
    note_dispatched: Callable[[int], None],
) -> dict:
    end, truncated = recover_commit_log(commit_log, abnormal, checkpoint, check_crc)
    commit_log.write_offset = end

    cq_truncated = 0
    for cq in list(queues.values()):
        cq_truncated += cq.truncate_beyond(end)

    redispatched = 0
    if abnormal:
        start = max(checkpoint.confirm_phy_offset, 0)
        for cq in queues.values():
            if cq.max_physic_offset >= 0 and cq.max_physic_offset < start:
                start = cq.max_physic_offset
        start = min(max(start, commit_log.min_offset), end)
        redispatched = redispatch(commit_log, start, end, queues, get_or_create_queue, note_dispatched)

    # RocketMQ's recoverTopicQueueTable: min offsets follow the CommitLog's first file (no CQ file is deleted)
    cl_min = commit_log.min_offset
    for cq in queues.values():
        cq.correct_min_offset_only(cl_min)

    return {
        "abnormal": abnormal,
        "commit_log_end": end,
        "truncated_bytes": truncated,
        "redispatched": redispatched,
        "cq_truncated_units": cq_truncated,
    }


def redispatch(
    commit_log: CommitLog,
    start: int,
    end: int,
    queues: dict[tuple[str, int], ConsumeQueue],
    get_or_create_queue: Callable[[str, int], ConsumeQueue],
    note_dispatched: Callable[[int], None],
) -> int:
    """Invariant 4. ``note_dispatched(store_timestamp)`` is called for every unit written."""
    written = 0
    for offset, buf, pos, layout in iter_records(commit_log, start, end):
        size, _magic, sys_flag, _st, _bp, _bl, topic_pos, topic_len = layout
        if is_tx_prepared_or_rollback(sys_flag):
            continue
        topic = bytes(buf[pos + topic_pos : pos + topic_pos + topic_len]).decode("utf-8", errors="replace")
        queue_id = _I32.unpack_from(buf, pos + QUEUEID_POSITION)[0]
        queue_offset = _I64.unpack_from(buf, pos + QUEUE_OFFSET_POSITION)[0]
        cq = queues.get((topic, queue_id))
        if not is_legal_topic(topic) or queue_id < 0:
            continue
        if cq is None or (offset + size > cq.max_physic_offset and queue_offset >= cq.max_offset):
            if cq is None:
                cq = get_or_create_queue(topic, queue_id)
            props = decode_properties(bytes(buf[pos + topic_pos + topic_len + 2 : pos + size]))
            if cq.put(queue_offset, offset, size, tags_code_of(props)):
                written += 1
                note_dispatched(_I64.unpack_from(buf, pos + layout[3])[0])
    return written


def iter_records(commit_log: CommitLog, start: int, end: int) -> Iterator[tuple[int, Any, int, Any]]:
    """``(offset, buffer, pos, layout)`` for every valid record from ``start`` to ``end`` (BLANK → next file; stops
    at the first invalid record), like the Rust ``for_each_record``."""
    offset = start
    while offset < end:
        f = commit_log.queue.find(offset)
        if f is None:
            break
        pos = offset - f.start
        if pos >= f.wrote:
            offset = f.end
            continue
        size, layout = check_record(f.buffer, pos, f.wrote, False)
        if size == BLANK:
            offset = f.end
            continue
        if size == INVALID:
            break
        yield offset, f.buffer, pos, layout
        offset += size
