"""Checking a store directory read-only — ours or Apache RocketMQ's, of any mapped file size — for
``rmq-core store verify|inspect``.

Owns: ``store_file_sizes`` (from a ``broker.conf``, else from the files), ``verify_store`` (every CommitLog record and
ConsumeQueue unit checked, by ``record_layout`` and ``StoreReader``) and ``StoreProblem``. Invariants:
1. Nothing under the root is created, written, locked or deleted (read-only files and ``ACCESS_READ`` mappings, no
   recovery), so a copy of Apache's store is verified as it is (a live broker's record being written may show torn).
2. Every problem names its file (relative to the root), the byte in that file and the global offset; the scan goes
   on with the next file or unit, so one bad spot does not hide the others.
3. CommitLog: structure, PHYSICALOFFSET, body CRC; a BLANK ends every full file; zeros only after the last record.
4. ConsumeQueue: every unit between the queue's min and max points at a whole record of its topic and queue id.
Thread-safety: functions without shared state; one call per thread.
Details: docs/CORE_API.md, '11. Verifying a store directory'.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from rmq_core import _backend
from rmq_core.format import COMMITLOG_DIR, CONSUMEQUEUE_DIR
from rmq_core.format.cq_unit import CQ_STORE_UNIT_SIZE, UNIT
from rmq_core.format.file_name import list_mapped_files, offset_to_file_name
from rmq_core.format.message import (
    BLANK_MAGIC,
    BODYCRC_POSITION,
    PHY_POS_POSITION,
    RecordFormatError,
    body_crc,
    record_layout,
)
from rmq_core.store_reader import StoreReader, mapped_file_size

_ZERO_CHUNK = 16 << 20
_CQ_BATCH = 1024


@dataclass(frozen=True)
class StoreFileSizes:
    """The mapped file sizes a store is read with, and where they came from (``files`` or a broker.conf path)."""

    commit_log: int | None
    consume_queue: int | None
    source: str
    on_disk_commit_log: int | None = None
    on_disk_consume_queue: int | None = None

    def mismatches(self) -> list[str]:
        """Where a broker.conf's sizes disagree with the files: a broker with that config would refuse the store."""
        out = []
        for name, key, conf, disk in (
            ("CommitLog", "mappedFileSizeCommitLog", self.commit_log, self.on_disk_commit_log),
            ("ConsumeQueue", "mappedFileSizeConsumeQueue", self.consume_queue, self.on_disk_consume_queue),
        ):
            if disk is not None and conf is not None and disk != conf:
                out.append(
                    f"{self.source}: {key}={conf:,} but the {name} files are {disk:,} bytes "
                    f"(a broker started with this config refuses the store)"
                )
        return out


def _on_disk_consume_queue_size(root: str) -> int | None:
    base = os.path.join(root, CONSUMEQUEUE_DIR)
    try:
        topics = sorted(os.listdir(base))
    except (FileNotFoundError, NotADirectoryError):
        return None
    best: int | None = None
    for t in topics:
        tdir = os.path.join(base, t)
        if not os.path.isdir(tdir):
            continue
        for q in sorted(os.listdir(tdir)):
            size = mapped_file_size(os.path.join(tdir, q))
            if size is None:
                continue
            files = list_mapped_files(os.path.join(tdir, q))
            if len(files) > 1:
                return size  # a gap between two files is certain; one file's length is only a hint
            best = size if best is None else max(best, size)
    return best


def store_file_sizes(root: str | os.PathLike[str], broker_conf: str | os.PathLike[str] | None = None) -> StoreFileSizes:
    """The sizes to read ``root`` with: ``mappedFileSizeCommitLog`` / ``mappedFileSizeConsumeQueue`` of
    ``broker_conf`` when given, else the files' own (None where no file tells)."""
    root = os.fspath(root)
    disk_cl = mapped_file_size(os.path.join(root, COMMITLOG_DIR))
    disk_cq = _on_disk_consume_queue_size(root)
    if broker_conf is not None:
        from rmq_core.broker.broker_config import BrokerConfig

        cfg = BrokerConfig.from_properties_file(broker_conf)
        return StoreFileSizes(
            cfg.mapped_file_size_commit_log,
            cfg.mapped_file_size_consume_queue,
            os.fspath(broker_conf),
            disk_cl,
            disk_cq,
        )
    return StoreFileSizes(disk_cl, disk_cq, "files", disk_cl, disk_cq)


@dataclass(frozen=True)
class StoreProblem:
    """One thing wrong: ``path`` relative to the store root, ``file_offset`` the byte in it, ``offset`` the global
    offset (CommitLog byte, or ConsumeQueue unit index)."""

    path: str
    file_offset: int
    offset: int
    message: str

    def __str__(self) -> str:
        return f"{self.path} at byte {self.file_offset:,} (offset {self.offset:,}): {self.message}"


@dataclass
class VerifyReport:
    commit_log_files: int = 0
    records: int = 0
    blanks: int = 0
    data_end: int = 0
    queues: int = 0
    units: int = 0
    problems: list[StoreProblem] = field(default_factory=list)


def _nonzero_after(mm: mmap.mmap, pos: int) -> int | None:
    """The first non-zero byte at or after ``pos``, or None."""
    while pos < len(mm):
        chunk = mm[pos : pos + _ZERO_CHUNK]
        stripped = chunk.lstrip(b"\0")
        if stripped:
            return pos + len(chunk) - len(stripped)
        pos += len(chunk)
    return None


def _verify_commit_log(root: str, file_size: int | None, report: VerifyReport) -> None:
    files = list_mapped_files(os.path.join(root, COMMITLOG_DIR))
    report.commit_log_files = len(files)
    for n, (start, path) in enumerate(files):
        rel = os.path.join(COMMITLOG_DIR, offset_to_file_name(start))
        is_last = n == len(files) - 1
        length = os.path.getsize(path)

        def problem(pos: int, msg: str, rel: str = rel, start: int = start) -> None:
            report.problems.append(StoreProblem(rel, pos, start + pos, msg))

        if file_size is not None and length != file_size:
            problem(0, f"file length {length:,} is not the mapped file size {file_size:,}")
        if not is_last and file_size is not None and files[n + 1][0] - start != file_size:
            problem(0, f"the next file starts at {files[n + 1][0]:,}, not {start + file_size:,}")
        limit = min(length, file_size) if file_size is not None else length
        if limit == 0:
            continue
        with open(path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            pos = 0
            while True:
                if pos + 8 > limit:
                    if not is_last:
                        problem(pos, "a full file ends without a BLANK")
                    break
                total = int.from_bytes(mm[pos : pos + 4], "big", signed=True)
                magic = int.from_bytes(mm[pos + 4 : pos + 8], "big", signed=True)
                if magic == BLANK_MAGIC:
                    report.blanks += 1
                    if is_last:
                        report.data_end = start + limit
                    break
                if total == 0 and magic == 0:
                    report.data_end = start + pos
                    if not is_last:
                        problem(pos, "zeros where a record or the BLANK should be (a full file ends early)")
                    else:
                        junk = _nonzero_after(mm, pos)
                        if junk is not None and junk < limit:
                            problem(junk, f"non-zero bytes after the end of the data at {start + pos:,} (torn write)")
                    break
                try:
                    layout = record_layout(mm, pos, limit)
                except RecordFormatError as e:
                    problem(pos, f"bad record: {e}")
                    break
                rec_total, body_pos, body_len = layout[0], layout[4], layout[5]
                phy = int.from_bytes(mm[pos + PHY_POS_POSITION : pos + PHY_POS_POSITION + 8], "big", signed=True)
                if phy != start + pos:
                    problem(pos, f"record says PHYSICALOFFSET {phy:,}")
                crc = int.from_bytes(mm[pos + BODYCRC_POSITION : pos + BODYCRC_POSITION + 4], "big", signed=True)
                actual = body_crc(mm[pos + body_pos : pos + body_pos + body_len])
                if crc != actual:
                    problem(pos, f"body CRC {crc} but the body's is {actual}")
                report.records += 1
                pos += rec_total
                if is_last:
                    report.data_end = start + pos
        finally:
            mm.close()


def _unit_location(root: str, topic: str, queue_id: int, index: int) -> tuple[str, int, tuple[int, int, int] | None]:
    qdir = os.path.join(root, CONSUMEQUEUE_DIR, topic, str(queue_id))
    files = [(s, p) for s, p in list_mapped_files(qdir) if s <= index * CQ_STORE_UNIT_SIZE]
    if not files:
        return os.path.join(CONSUMEQUEUE_DIR, topic, str(queue_id)), index * CQ_STORE_UNIT_SIZE, None
    start, path = files[-1]
    file_offset = index * CQ_STORE_UNIT_SIZE - start
    with open(path, "rb") as f:
        f.seek(file_offset)
        raw = f.read(CQ_STORE_UNIT_SIZE)
    unit = UNIT.unpack(raw) if len(raw) == CQ_STORE_UNIT_SIZE else None
    return os.path.join(CONSUMEQUEUE_DIR, topic, str(queue_id), offset_to_file_name(start)), file_offset, unit


def _verify_consume_queues(
    root: str, reader: StoreReader, cq_size: int | None, report: VerifyReport, progress: Callable[[str], None] | None
) -> None:
    decode = _backend.impl.decode_messages
    for topic, queue_id in reader.queues():
        report.queues += 1
        qdir = os.path.join(root, CONSUMEQUEUE_DIR, topic, str(queue_id))
        if cq_size is not None:
            for start, path in list_mapped_files(qdir):
                length = os.path.getsize(path)
                if length != cq_size:
                    rel = os.path.join(CONSUMEQUEUE_DIR, topic, str(queue_id), offset_to_file_name(start))
                    report.problems.append(
                        StoreProblem(
                            rel,
                            0,
                            start // CQ_STORE_UNIT_SIZE,
                            f"file length {length:,} is not the mapped file size {cq_size:,}",
                        )
                    )
        offset, end = reader.min_offset(topic, queue_id), reader.max_offset(topic, queue_id)
        while offset < end:
            batch_end = min(offset + _CQ_BATCH, end)
            records, count, nxt = reader.read_records(topic, queue_id, offset, batch_end)
            if count:
                for m in decode(bytes(records), False):
                    if m.topic != topic or m.queue_id != queue_id:
                        rel, fpos, _unit = _unit_location(root, topic, queue_id, m.queue_offset)
                        report.problems.append(
                            StoreProblem(
                                rel,
                                fpos,
                                m.queue_offset,
                                f"unit points at commitlog offset {m.commitlog_offset:,}, a record of "
                                f"{m.topic}/{m.queue_id}",
                            )
                        )
                report.units += count
            if nxt < batch_end:
                rel, fpos, unit = _unit_location(root, topic, queue_id, nxt)
                what = (
                    f"unit (commitlog offset {unit[0]:,}, size {unit[1]:,}) points at no whole record"
                    if unit is not None and unit[1] != 0
                    else "unit missing below the queue's max offset"
                )
                report.problems.append(StoreProblem(rel, fpos, nxt, what))
                nxt += 1
            offset = nxt
        if progress is not None:
            progress(f"{topic}/{queue_id}")


def verify_store(
    root: str | os.PathLike[str],
    sizes: StoreFileSizes | None = None,
    progress: Callable[[str], None] | None = None,
) -> VerifyReport:
    """Checks every CommitLog record and ConsumeQueue unit of ``root`` read-only (invariants 3 and 4)."""
    root = os.fspath(root)
    sizes = sizes if sizes is not None else store_file_sizes(root)
    report = VerifyReport()
    for msg in sizes.mismatches():
        report.problems.append(StoreProblem(sizes.source, 0, 0, msg))
    _verify_commit_log(root, sizes.commit_log, report)
    with StoreReader(root, sizes.commit_log, sizes.consume_queue) as reader:
        _verify_consume_queues(root, reader, sizes.consume_queue, report, progress)
    return report


__all__ = ["StoreFileSizes", "StoreProblem", "VerifyReport", "store_file_sizes", "verify_store"]
