"""Master/slave replication at the store level, the twin of ``rust/rmq-store/src/replica.rs`` (4.9's
``DefaultMessageStore.getCommitLogData`` / ``appendToCommitLog`` and the slave's ``ReputMessageService``).

Owns: ``get_commit_log_data``, ``append_commit_log`` and the parse of appended bytes; the engine holds the dispatch
position ``reput_from``. Format: raw CommitLog bytes (records, BLANK, zeros) as ``format/message.py`` lays them out.
Invariants (the Rust module's, same results and errors): 1. reads never cross a file end; 2. appends only at the
end (or a file boundary of an empty CommitLog), else ValueError, nothing written; 3. new bytes are parsed before
they are published, and a bad record is CorruptRecordError with the new bytes zeroed; 4. each whole record is
dispatched once, in order.
Thread-safety: the caller holds the engine's lock.
Details (each invariant in full): docs/CORE_API.md, 'Replication at the store level'.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from rmq_core.errors import CorruptRecordError, StoreError
from rmq_core.format.index import is_indexed_sys_flag
from rmq_core.format.message import (
    _HEADER8,
    _I32,
    _I64,
    BLANK_MAGIC,
    MAGIC_V1,
    MAGIC_V2,
    MIN_RECORD_LEN_V1_IPV4,
    PHY_POS_POSITION,
    QUEUE_OFFSET_POSITION,
    QUEUEID_POSITION,
    RecordFormatError,
    decode_properties,
    is_legal_topic,
    is_tx_prepared_or_rollback,
    record_layout,
    tags_code_of,
)

if TYPE_CHECKING:
    from .commit_log import CommitLog
    from .consume_queue import ConsumeQueue
    from .index_service import IndexService


class StoreEngine(Protocol):
    """What replication needs of ``message_store.StoreEngine`` (its internals: these functions are its HA half, kept
    in their own module). A Protocol, so that the engine imports this module and not the other way round."""

    _commit_log: CommitLog
    _reput_from: int
    _index: IndexService | None
    _index_stop_reason: str | None
    _last_physic_ts: int

    def _queue_or_create(self, topic: str, queue_id: int) -> ConsumeQueue: ...
    def _note_redispatched(self, store_timestamp: int) -> None: ...
    def _stop_index(self, e: Exception) -> None: ...


_INCOMPLETE = -1
_BLANK = -2


def _corrupt(offset: int, reason: str) -> CorruptRecordError:
    return CorruptRecordError(f"corrupt record at offset {offset}: {reason}", offset)


def _step(buf: Any, pos: int, limit: int, offset: int, file_remaining: int) -> int:
    """Size of the whole record at ``buf[pos:limit]``, ``_BLANK`` or ``_INCOMPLETE``; raises CorruptRecordError."""
    if limit - pos < 8:
        return _INCOMPLETE
    size, magic = _HEADER8.unpack_from(buf, pos)
    if magic == BLANK_MAGIC:
        if size < 0 or size != file_remaining:
            raise _corrupt(offset, f"BLANK of {size} bytes but {file_remaining} bytes are left in its file")
        return _BLANK
    if magic not in (MAGIC_V1, MAGIC_V2):
        raise _corrupt(offset, f"bad magic 0x{magic & 0xFFFFFFFF:08X}")
    if size < MIN_RECORD_LEN_V1_IPV4 or size > file_remaining:
        raise _corrupt(offset, f"total size {size} impossible with {file_remaining} bytes left in its file")
    if size > limit - pos:
        return _INCOMPLETE
    try:
        record_layout(buf, pos, pos + size)
    except RecordFormatError as e:
        raise _corrupt(offset, str(e)) from None
    phys = _I64.unpack_from(buf, pos + PHY_POS_POSITION)[0]
    if phys != offset:
        raise _corrupt(offset, f"the record says PHYSICALOFFSET {phys} (not the offset it is appended at)")
    return int(size)


def get_commit_log_data(engine: StoreEngine, offset: int, max_size: int) -> bytes | None:
    if max_size <= 0 or offset < 0:
        raise ValueError(f"invalid argument: offset must be >= 0 and max_size > 0, got {offset}, {max_size}")
    f = engine._commit_log.queue.find(offset)
    if f is None:
        return None
    pos = offset - f.start
    if pos >= f.wrote:
        return None
    return f.read(pos, min(f.wrote - pos, max_size))


def append_commit_log(engine: StoreEngine, offset: int, data: bytes) -> list[tuple[str, int, int]]:
    cl = engine._commit_log
    q = cl.queue
    fs = cl.file_size
    end = cl.max_offset
    empty = not q.files
    if empty:
        if offset < 0 or offset % fs != 0:
            raise ValueError(
                f"invalid argument: append at {offset}: an empty CommitLog can only start at a file boundary "
                f"(file size {fs})"
            )
    elif offset != end:
        raise ValueError(f"invalid argument: append at {offset} but the CommitLog ends at {end} (a gap or an overlap)")
    if not data:
        return []
    last = q.last
    if last is not None and last.wrote < last.size:
        f = last
    else:
        try:
            f = q.create(last.end if last is not None else offset)
        except OSError as e:
            raise StoreError(f"cannot create a CommitLog file: {e}") from e
        if last is None:
            cl.write_offset = offset
            engine._reput_from = offset
    pos = offset - f.start
    if pos + len(data) > f.size:
        raise ValueError(
            f"invalid argument: append of {len(data)} bytes at {offset} crosses the end of the file at {f.end} "
            f"({f.size - pos} bytes left)"
        )
    f.ensure_reserved(pos + len(data))
    f.write(pos, data)
    new_wrote = pos + len(data)
    buf = f.buffer
    p = max(engine._reput_from, f.start) - f.start
    records: list[tuple[int, int]] = []
    blank = False
    try:
        while p < new_wrote:
            n = _step(buf, p, new_wrote, f.start + p, f.size - p)
            if n == _BLANK:
                blank = True
                break
            if n == _INCOMPLETE:
                break
            records.append((p, n))
            p += n
    except CorruptRecordError:
        f.write(pos, bytes(len(data)))
        raise
    f.wrote = new_wrote
    cl.write_offset = f.start + new_wrote
    engine._reput_from = f.end if blank else f.start + p
    out: list[tuple[str, int, int]] = []
    where: dict[tuple[str, int], int] = {}
    index = engine._index if engine._index_stop_reason is None else None
    last_ts = None
    for at, n in records:
        total, _magic, sys_flag, st_pos, _bp, _bl, topic_pos, topic_len = record_layout(buf, at, at + n)
        off = f.start + at
        store_ts = _I64.unpack_from(buf, at + st_pos)[0]
        last_ts = store_ts
        topic_raw = bytes(buf[at + topic_pos : at + topic_pos + topic_len])
        props = bytes(buf[at + topic_pos + topic_len + 2 : at + total])
        if not is_tx_prepared_or_rollback(sys_flag):
            topic = topic_raw.decode("utf-8", errors="replace")
            queue_id = _I32.unpack_from(buf, at + QUEUEID_POSITION)[0]
            if is_legal_topic(topic) and queue_id >= 0:
                cq = engine._queue_or_create(topic, queue_id)
                queue_offset = _I64.unpack_from(buf, at + QUEUE_OFFSET_POSITION)[0]
                if cq.put(queue_offset, off, total, tags_code_of(decode_properties(props))):
                    engine._note_redispatched(store_ts)
                    key = (topic, queue_id)
                    if key in where:
                        out[where[key]] = (topic, queue_id, cq.max_offset)
                    else:
                        where[key] = len(out)
                        out.append((topic, queue_id, cq.max_offset))
        if index is not None and is_indexed_sys_flag(sys_flag):
            try:
                index.build_index(topic_raw, props, off, store_ts, 0)
            except StoreError as e:
                engine._stop_index(e)
                index = None
    if last_ts is not None:
        engine._last_physic_ts = last_ts
    return out
