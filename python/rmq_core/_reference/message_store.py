"""The engine: ties the CommitLog, the ConsumeQueues, the flush thread, the checkpoint and recovery together behind
the contract of docs/CORE_API.md (the write path and dispatch live here). Mirrors rust/rmq-store/src/message_store.rs.

Owns: the store root (``commitlog/``, ``consumequeue/``, ``index/``, ``checkpoint``, ``abort``, ``lock``, ``config/``),
the queue table, the engine lock, open/close, and the query by key over the index service.
Format: see §1 of the contract; record/unit layouts in ``format``.
Invariants:
  1. One ``threading.RLock`` serialises writes and reads; a record is written (CommitLog write offset) before its
     ConsumeQueue unit.
  2. Validation happens for every message before anything is written: a put either raises (illegal topic,
     negative queue id — these win over statuses, whatever their position), returns the first failing status for
     every message, or writes messages in order until the first I/O failure (that message and the rest get
     CREATE_MAPPED_FILE_FAILED). Per message: queue lookup/creation, CommitLog space (BLANK + next file), the
     ConsumeQueue file for the unit, then record and unit.
  3. The sys flag bits 0x10/0x20 are set from the hosts (and cleared when IPv4), whatever the caller passed.
  4. ``<root>/lock`` is flock'ed before recovery touches anything and released at close; ``abort`` exists from the
     end of a successful open until close. Opening does not flush or write the checkpoint.
  5. After ``close`` every call raises StoreError (``recovery_report`` included), except ``close`` itself
     (idempotent) and ``is_the_batch_full`` (pure).
  6. With ``message_index_enable`` every appended record that is not a rollback gets its UNIQ_KEY and KEYS indexed in
     the same put; open re-indexes the records after the index's last entry (4.9's abnormal-exit rule first);
     ``query_message`` serves only whole records whose topic and key match.

Decisions where the contract is silent (shared with the Rust engine):
  * a ConsumeQueue (and its directory) is created on the first dispatched put to it (not for PREPARED/ROLLBACK
    records, which return queue offset 0 and get no unit);
  * ``min_physical_offset``/``max_physical_offset`` are 0 when there is no CommitLog file;
  * ``read_commit_log``: size < 0 → ValueError; size 0 inside a file's data → b"";
  * ``look_message_by_offset``: None when fewer than 8 written bytes exist at ``offset``; otherwise the record must
    decode within the written data, else CorruptRecordError(offset); CRC not checked;
  * ``get_offset_in_queue_by_time``: lower-bound binary search ``lo = min, hi = max, mid = lo + (hi - lo) // 2``;
    a unit whose record cannot be read counts as older than any ts;
  * ``get_earliest_message_time``: -1 when min >= max or the record cannot be read;
  * ``scan_consume_queue``: start/max_units < 0 → ValueError; no queue → (start, b""); s = max(start, min);
    s >= max → (s, b""); else (e, units of [s, e) that match) with e = min(max, s + max_units);
  * ``consume_queue_units``: start/count < 0 → ValueError; units [start, min(start + count, max)) whose file exists
    and holds them; no queue → b"";
  * ``topics()`` lists queues loaded from ``consumequeue/<topic>/<qid>`` (qid a canonical non-negative int) or
    created by puts, sorted by (topic, qid);
  * SYNC_FLUSH timeout turns every PUT_OK of that call into FLUSH_DISK_TIMEOUT (offsets kept).
Thread-safety: every public method takes the engine RLock (the flush thread takes it for each flush); SYNC_FLUSH
writers wait for the flush after releasing it.
"""

from __future__ import annotations

import fcntl
import os
import struct
import threading
import time
from array import array
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from rmq_core.errors import CorruptRecordError, IllegalTopicError, StoreError
from rmq_core.format import (
    ABORT_FILE,
    BOOT_ID_PATH,
    CHECKPOINT_FILE,
    COMMITLOG_DIR,
    CONFIG_DIR,
    CONSUMEQUEUE_DIR,
    FLUSH_CONSUME_QUEUE_LEAST_PAGES,
    FLUSH_CONSUME_QUEUE_THOROUGH_INTERVAL_MS,
    LOCK_FILE,
    decode_abort_boot_id,
)
from rmq_core.format.batch import batch_records, join_offset_msg_ids
from rmq_core.format.index import QUERY_ROUNDS, index_keys, is_indexed_sys_flag, record_has_index_key
from rmq_core.format.message import (
    BODYCRC_POSITION,
    BORNHOST_V6_FLAG,
    MAX_PROPERTIES_SIZE,
    PHY_POS_POSITION,
    STOREHOSTADDRESS_V6_FLAG,
    RecordFormatError,
    assign_uniq_keys,
    body_crc,
    decode_properties,
    encode_host,
    encode_properties,
    encode_record,
    is_legal_topic,
    is_tx_prepared_or_rollback,
    is_v6_host,
    patch_offsets,
    record_layout,
    record_store_timestamp,
    tags_code_of,
)
from rmq_core.store_status import PutMessageStatus

from . import get_message as _get_message
from . import replica as _replica
from .checkpoint import StoreCheckpoint
from .commit_log import CommitLog
from .config import StoreConfig
from .consume_queue import ConsumeQueue
from .flush import FlushService
from .index_service import IndexService
from .recovery import iter_records, recover

if TYPE_CHECKING:
    from .send_requests import SendRequestColumns

_PUT_OK = int(PutMessageStatus.PUT_OK)
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")


def _record_properties(record: bytes | bytearray) -> bytes:
    """The encoded properties of one whole record."""
    total, _m, _sf, _st, _bp, _bl, topic_pos, topic_len = record_layout(record, 0, len(record))
    return bytes(record[topic_pos + topic_len + 2 : total])


_CREATE_FAILED = (int(PutMessageStatus.CREATE_MAPPED_FILE_FAILED), -1, -1, 0)

# A validated record of a put (``StoreEngine._validate``): topic, queue id, the encoded record (offsets patched when
# appended), its tags code, whether it gets a ConsumeQueue unit, its sys flag.
_Prepared = tuple[str, int, bytearray, int, bool, int]


def _result_columns(results: list[tuple[int, int, int, int]]) -> tuple[bytes, bytes, bytes, bytes]:
    """``put_messages``' answer (docs/CORE_API.md §3): the statuses (one byte each), CommitLog offsets and queue
    offsets (int64) and wrote bytes (int32) as columns, native byte order, as the Rust engine returns them."""
    return (
        bytes(r[0] for r in results),
        array("q", [r[1] for r in results]).tobytes(),
        array("q", [r[2] for r in results]).tobytes(),
        array("i", [r[3] for r in results]).tobytes(),
    )


def _tags_code(properties: dict[str, str], encoded: bytes) -> int:
    """tagsCode of the TAGS entry *as stored*: the dict's value when the encoding is regular (one separator pair per
    entry), else re-parsed from the encoded bytes (a separator inside a key or value changes what is stored)."""
    entries = sum(1 for v in properties.values() if v is not None)
    if encoded.count(1) == entries and encoded.count(2) == entries:
        return tags_code_of(properties)
    return tags_code_of(decode_properties(encoded))


class StoreEngine:
    """The pure-Python store engine (docs/CORE_API.md)."""

    def __init__(self, root_dir: str, config: dict[str, Any]) -> None:
        self._closed = True
        self._released = False  # files unmapped (end of close): the flush thread must not touch them
        self._lock = threading.RLock()
        self._config = cfg = StoreConfig.from_dict(config)
        self._root = root = os.path.abspath(os.fspath(root_dir))
        self._store_host_raw = encode_host(cfg.store_host)
        self._store_host_v6 = is_v6_host(cfg.store_host)
        for d in (
            root,
            os.path.join(root, COMMITLOG_DIR),
            os.path.join(root, CONSUMEQUEUE_DIR),
            os.path.join(root, CONFIG_DIR),
        ):
            try:
                os.makedirs(d, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create directory {d}: {e}") from e
        self._lock_fd: int | None = self._lock_root()
        self._commit_log = CommitLog(root, cfg.mapped_file_size_commit_log)
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._checkpoint = StoreCheckpoint(os.path.join(root, CHECKPOINT_FILE))
        try:
            abort_path = os.path.join(root, ABORT_FILE)
            abnormal = os.path.exists(abort_path)
            boot = _current_boot_id()
            same_boot = abnormal and boot is not None and _read_abort_boot_id(abort_path) == boot
            self._checkpoint.open()
            self._commit_log.load()
            self._load_queues()
            self._last_physic_ts = self._checkpoint.physic_msg_timestamp
            self._last_logics_ts = self._checkpoint.logics_msg_timestamp
            # the checkpoint's logicsMsgTimestamp: the last dispatch time as of a flush that left no ConsumeQueue
            # unit unflushed (the tick skips queues with few dirty pages); when the tick last msynced every queue
            self._flushed_logics_ts = self._last_logics_ts
            self._last_thorough_cq_flush = time.monotonic()
            self._index: IndexService | None = None
            self._last_index_ts = self._checkpoint.index_msg_timestamp
            self._index_notes: list[str] = []
            self._index_stop_reason: str | None = None
            if cfg.message_index_enable:
                self._index = IndexService(root, cfg.max_hash_slot_num, cfg.max_index_num)
                self._index.load(abnormal, self._checkpoint.index_msg_timestamp, same_boot)
            self._report = recover(
                self._commit_log,
                self._queues,
                self._queue_or_create,
                self._checkpoint,
                abnormal,
                cfg.check_crc_on_recover,
                self._note_redispatched,
            )
            self._open_index(self._report)
            # where the next whole record to dispatch starts (replica.py): the recovered end, then each put's end
            self._reput_from = self._commit_log.max_offset
            try:
                with open(abort_path, "wb") as f:
                    f.write((boot or "").encode("ascii"))
            except OSError as e:
                raise StoreError(f"cannot create {abort_path}: {e}") from e
        except BaseException:
            self._release_files()
            raise
        self._flush_service = FlushService(
            self._flush_commit_log_quietly,
            self._dirty_commit_log_bytes,
            self._flush_all_quietly,
            cfg.flush_interval_commit_log,
        )
        self._closed = False
        self._flush_service.start()

    # -- open / close helpers -------------------------------------------------------------------------------

    def _lock_root(self) -> int:
        path = os.path.join(self._root, LOCK_FILE)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise StoreError(f"cannot open lock file {path}: {e}") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreError(f"the store is locked by another process or engine: {path}") from None
        except OSError as e:
            os.close(fd)
            raise StoreError(f"cannot lock {path}: {e}") from e
        return fd

    def _load_queues(self) -> None:
        base = os.path.join(self._root, CONSUMEQUEUE_DIR)
        try:
            topics = sorted(os.listdir(base))
        except OSError as e:
            raise StoreError(f"cannot list {base}: {e}") from e
        for topic in topics:
            topic_dir = os.path.join(base, topic)
            if not os.path.isdir(topic_dir):
                continue
            try:
                names = sorted(os.listdir(topic_dir))
            except OSError as e:
                raise StoreError(f"cannot list {topic_dir}: {e}") from e
            for name in names:
                if not (name.isascii() and name.isdigit()) or str(int(name)) != name or int(name) > 2**31 - 1:
                    continue
                if not os.path.isdir(os.path.join(topic_dir, name)):
                    continue
                cq = ConsumeQueue(self._root, topic, int(name), self._config.mapped_file_size_consume_queue)
                cq.load_and_recover()
                self._queues[(topic, int(name))] = cq

    def _queue_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            cq = ConsumeQueue(self._root, topic, queue_id, self._config.mapped_file_size_consume_queue)
            try:
                os.makedirs(cq.queue.directory, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create directory {cq.queue.directory}: {e}") from e
            self._queues[(topic, queue_id)] = cq
        return cq

    def _open_index(self, report: dict) -> None:
        """Index notes and the re-index of the records after the index's last entry (Rust: open + reindex)."""
        report["index_rebuilt"] = 0
        report["index_files_refused"] = 0
        report["index_files_dropped"] = 0
        index = self._index
        if index is None:
            return
        end = report["commit_log_end"]
        if index.repaired_slots:
            self._index_notes.append(
                f"index: {index.repaired_slots} slot(s) of a key put cut short by the crash restored (the files are "
                "kept: a process crash within this boot)"
            )
        for name, reason in index.refused:
            self._index_notes.append(
                f"index file {name} refused ({reason}): moved to index_refused/, its records are re-indexed"
            )
        for name in index.dropped:
            self._index_notes.append(
                f"index file {name} deleted: abnormal exit and its endTimestamp is above the checkpoint's "
                f"indexMsgTimestamp {self._checkpoint.index_msg_timestamp}; its records are re-indexed"
            )
        beyond = index.drop_files_beyond(end)
        for name in beyond:
            self._index_notes.append(
                f"index file {name} deleted: it indexes offsets at or beyond the recovered CommitLog end {end}"
            )
        report["index_files_refused"] = len(index.refused)
        report["index_files_dropped"] = len(index.dropped) + len(beyond)
        cl_min = self._commit_log.min_offset
        last = index.last_indexed_offset()
        start, skip_at_or_below = (max(last, cl_min), last) if last is not None else (cl_min, -1)
        count = 0
        # the last indexed record may have only its first keys (a build that stopped inside it): finish it
        done_at_last = index.entries_at_tail(skip_at_or_below)
        try:
            for off, buf, pos, layout in iter_records(self._commit_log, start, end):
                total, _magic, sys_flag, st_pos, _bp, _bl, topic_pos, topic_len = layout
                if off < skip_at_or_below or not is_indexed_sys_flag(sys_flag):
                    continue
                topic = bytes(buf[pos + topic_pos : pos + topic_pos + topic_len])
                props = bytes(buf[pos + topic_pos + topic_len + 2 : pos + total])
                skip = 0
                if off == skip_at_or_below:
                    if done_at_last >= sum(1 for _ in index_keys(props)):
                        continue
                    skip = done_at_last
                index.build_index(topic, props, off, _I64.unpack_from(buf, pos + st_pos)[0], skip)
                count += 1
        except StoreError as e:
            self._stop_index(e)
            count = 0
        report["index_rebuilt"] = count

    def _stop_index(self, e: Exception) -> None:
        self._index_stop_reason = (
            f"building the index stopped until the next open (its records are re-indexed then): {e}"
        )

    def _note_redispatched(self, store_timestamp: int) -> None:
        if store_timestamp > self._last_logics_ts:
            self._last_logics_ts = store_timestamp

    def _release_files(self) -> None:
        self._released = True
        self._commit_log.close()
        for cq in self._queues.values():
            cq.close()
        if getattr(self, "_index", None) is not None:
            self._index.close()  # type: ignore[union-attr]
        self._checkpoint.close()
        if self._lock_fd is not None:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            finally:
                os.close(self._lock_fd)
            self._lock_fd = None

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the message store is closed")

    # -- flushing -------------------------------------------------------------------------------------------

    def _flush_all_locked(self, explicit: bool = True) -> int:
        """``explicit`` (``flush()``, close): the CommitLog, every ConsumeQueue and index file. Otherwise the flush
        thread's tick: the CommitLog, the ConsumeQueues with at least FLUSH_CONSUME_QUEUE_LEAST_PAGES dirty (all of
        them once per FLUSH_CONSUME_QUEUE_THOROUGH_INTERVAL_MS), the full index files. Then the checkpoint; returns
        the flushed CommitLog offset."""
        physic_ts, logics_ts = self._last_physic_ts, self._last_logics_ts
        flushed = self._commit_log.flush()
        now = time.monotonic()
        if explicit or (now - self._last_thorough_cq_flush) * 1000 >= FLUSH_CONSUME_QUEUE_THOROUGH_INTERVAL_MS:
            self._last_thorough_cq_flush = now
            least_pages = 0
        else:
            least_pages = FLUSH_CONSUME_QUEUE_LEAST_PAGES
        every_unit_flushed = True
        for cq in list(self._queues.values()):
            every_unit_flushed &= cq.flush_if_dirty(least_pages)
        if every_unit_flushed:
            self._flushed_logics_ts = max(self._flushed_logics_ts, logics_ts)
        if self._index is not None:
            self._last_index_ts = max(self._last_index_ts, self._index.flush(explicit))
        self._checkpoint.write(physic_ts, self._flushed_logics_ts, flushed, self._last_index_ts)
        return flushed

    def _flush_all_quietly(self) -> int | None:
        with self._lock:
            if self._released:
                return None
            try:
                return self._flush_all_locked(explicit=False)
            except StoreError:
                return None

    def _flush_commit_log_quietly(self) -> int | None:
        with self._lock:
            if self._released:
                return None
            try:
                return self._commit_log.flush()
            except StoreError:
                return None

    def _dirty_commit_log_bytes(self) -> int:
        with self._lock:
            last = self._commit_log.queue.last
            return 0 if last is None or self._released else max(last.wrote - last.flushed, 0)

    def flush(self) -> int:
        """msync the CommitLog, every ConsumeQueue and index file, write the checkpoint; returns the flushed CommitLog
        offset."""
        with self._lock:
            self._check_open()
            return self._flush_all_locked()

    def close(self) -> None:
        """Stop the flush thread, flush, write the checkpoint, unmap, delete ``abort``, release ``lock``. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._flush_service.stop()  # outside the lock: the thread's last flush needs it
        with self._lock:
            error: Exception | None = None
            try:
                self._flush_all_locked()
            except StoreError as e:
                error = e
            self._release_files()
            self._queues.clear()
            abort = os.path.join(self._root, ABORT_FILE)
            try:
                os.unlink(abort)
            except FileNotFoundError:
                pass
            except OSError as e:
                error = error or StoreError(f"cannot delete {abort}: {e}")
            if error is not None:
                raise error

    def __del__(self) -> None:
        """Dropped without ``close()``: like a crash for the files (no flush, ``abort`` stays), but the flush thread
        stops and the mappings and ``lock`` are released (as the Rust engine's Drop does)."""
        if getattr(self, "_closed", True) or getattr(self, "_released", True):
            return
        try:
            self._closed = True
            self._flush_service.stop()
            self._release_files()
        except Exception:
            pass

    # -- write path -----------------------------------------------------------------------------------------

    def put_send_requests(
        self,
        sends: SendRequestColumns,
        start: int,
        end: int,
        sys_flag_or: list[int],
        born_host: tuple[str, int],
        store_timestamp: int,
        wait_flush: bool = True,
        uniq_prefix: str = "",
        uniq_counter: Iterator[int] | None = None,
    ) -> list[tuple[int, int, int, int]]:
        """The plain sends ``[start, end)`` of ``sends`` in one ``put_messages``, each with its own fields and its
        key's ``sys_flag_or`` bits; a send without a UNIQ_KEY given the next id of (``uniq_prefix``,
        ``uniq_counter``) as ``assign_uniq_keys`` gives them (``rust/rmq-py/src/store.rs``)."""
        rows = sends.plain_rows(start, end)
        counter = uniq_counter

        def new_id() -> str:
            assert counter is not None
            return f"{uniq_prefix}{next(counter) & 0xFFFF:04X}"

        stored = sends.stored_properties(start, end, None if counter is None else new_id)
        msgs, queue_ids, own = [], [], []
        for r, props in zip(rows, stored):
            if r.key >= len(sys_flag_or):
                raise ValueError("sys_flag_or has no entry for a key")
            topic, queue_id = sends.key(r.key)[:2]
            # the properties as the send path wrote them (put_messages stores bytes as they are)
            msg = SimpleNamespace(topic=topic, body=r.body or b"", flag=r.flag, properties=props.encode())
            msgs.append(msg)
            queue_ids.append(queue_id)
            own.append((r.born_timestamp, r.sys_flag | sys_flag_or[r.key], r.reconsume_times))
        statuses, offsets, queue_offsets, wrote = self.put_messages(
            msgs, queue_ids, 0, 0, born_host, 0, store_timestamp, wait_flush, own
        )
        cast = [memoryview(offsets).cast("q"), memoryview(queue_offsets).cast("q"), memoryview(wrote).cast("i")]
        return list(zip(statuses, *cast))

    def put_batch(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        batch_properties: bytes,
        sys_flag: int,
        born_timestamp: int,
        born_host: tuple[str, int],
        reconsume_times: int,
        store_timestamp: int,
        wait_flush: bool = True,
        uniq_id: Callable[[], str] | None = None,
        keep_properties: bool = False,
    ) -> tuple[int, int, int, str, int, int, str | None, list[bytes] | None]:
        """SEND_BATCH_MESSAGE's put (``rust/rmq-py/src/store.rs``): the blocks of ``body`` (``format/batch.py``),
        each a record of ``topic``/``queue_id`` whose properties are the block's followed by ``batch_properties``, a
        block without UNIQ_KEY given ``uniq_id()``, in one ``put_messages``. ``(status, stored, queue_offset,
        msg_ids, wrote_bytes, end_offset, malformed, properties)``."""
        self._check_open()
        records, malformed = batch_records(body, batch_properties, uniq_id)
        if malformed is not None:
            return int(PutMessageStatus.MESSAGE_ILLEGAL), 0, -1, "", 0, -1, malformed, None
        msgs = [SimpleNamespace(topic=topic, body=b, flag=f, properties=p) for f, b, p in records]
        statuses, offsets, queue_offsets, wrote = self.put_messages(
            msgs,
            [queue_id] * len(msgs),
            sys_flag,
            born_timestamp,
            born_host,
            reconsume_times,
            store_timestamp,
            wait_flush,
        )
        offs = memoryview(offsets).cast("q")
        stored = next((i for i, o in enumerate(offs) if o < 0), len(offs))
        status = next((s for s in statuses if s != _PUT_OK), _PUT_OK)
        sizes = memoryview(wrote).cast("i")[:stored]
        return (
            status,
            stored,
            memoryview(queue_offsets).cast("q")[0] if stored else -1,
            join_offset_msg_ids(self._config.store_host, list(offs[:stored])),
            sum(sizes),
            offs[stored - 1] + sizes[stored - 1] if stored else -1,
            None,
            [p for _, _, p in records[:stored]] if keep_properties else None,
        )

    def put_messages(
        self,
        msgs: list,
        queue_ids: list[int] | None,
        sys_flag: int,
        born_timestamp: int,
        born_host: tuple[str, int],
        reconsume_times: int,
        store_timestamp: int,
        wait_flush: bool = True,
        own_fields: list[tuple[int, int, int]] | None = None,
        prepared_transaction_offset: int = 0,
        uniq_prefix: str = "",
        uniq_counter: Iterator[int] | None = None,
        trailing_separator: bool = True,
    ) -> tuple[bytes, bytes, bytes, bytes]:
        """``queue_ids`` None: ``msgs`` is the batch of ``(message, queue_id)`` pairs. ``uniq_counter``: first
        ``assign_uniq_keys(msgs, uniq_prefix, uniq_counter)`` (the Rust engine assigns them in its reading pass, with
        the same results and side effects: every message gets its id before a rejected message's error is raised).
        ``trailing_separator`` False: a message's property string without the ``\x02`` after its last entry.

        The phases of the Rust engine's put (``rust/rmq-store/src/put_message.rs``), with the same names:
        ``_validate``, then under the engine lock ``_queue_cursor`` and ``_append_one`` per message,
        ``_index_hand_off``, ``_after_put``; then ``_handle_disk_flush``. The twin has no warm-ahead pacing."""
        if queue_ids is None:
            pairs = msgs
            msgs = [m for m, _ in pairs]
            queue_ids = [q for _, q in pairs]
        if uniq_counter is not None:
            assign_uniq_keys(msgs, uniq_prefix, uniq_counter)
        if len(msgs) != len(queue_ids):
            raise ValueError(f"{len(msgs)} messages but {len(queue_ids)} queue ids")
        if own_fields is not None and len(own_fields) != len(msgs):
            raise ValueError(f"{len(msgs)} messages but {len(own_fields)} own fields")
        prepared, first_fail = self._validate(
            msgs,
            queue_ids,
            own_fields,
            (born_timestamp, sys_flag, reconsume_times),
            born_host,
            store_timestamp,
            prepared_transaction_offset,
            trailing_separator,
        )
        if first_fail is not None:
            return _result_columns([(int(first_fail), -1, -1, 0)] * len(msgs))
        results: list[tuple[int, int, int, int]] = []
        end = -1
        dispatched_any = False
        with self._lock:
            self._check_open()
            for p in prepared:
                result = self._append_one(p)
                if result is None:
                    break
                results.append(result)
                if result[0] != _PUT_OK:
                    break
                end = result[1] + result[3]
                dispatched_any |= p[4]
            self._index_hand_off(prepared, results, store_timestamp)
            self._after_put(end, dispatched_any, store_timestamp)
        while len(results) < len(msgs):
            results.append(_CREATE_FAILED)
        return _result_columns(self._handle_disk_flush(results, end, wait_flush))

    def _validate(
        self,
        msgs: list,
        queue_ids: list[int],
        own_fields: list[tuple[int, int, int]] | None,
        shared: tuple[int, int, int],
        born_host: tuple[str, int],
        store_timestamp: int,
        prepared_transaction_offset: int,
        trailing_separator: bool,
    ) -> tuple[list[_Prepared], PutMessageStatus | None]:
        """Phase 1, validation (invariant 2; 4.9's ``checkMessage`` and the CommitLog's size checks), before the
        engine lock is taken: an illegal topic or a negative queue id raises wherever it stands in the put; otherwise
        the first message over a limit (body over ``max_message_size``, properties over ``MAX_PROPERTIES_SIZE``, a
        record longer than a CommitLog file holds) names the status every message gets. A message's born timestamp, sys flag and
        reconsume times are its ``own_fields`` entry, else ``shared``. Every record is encoded here with
        placeholder offsets (``_append_one`` patches them): ``(topic, queue_id, record, tags_code, dispatch, flags)``."""
        cfg = self._config
        born_raw = encode_host(born_host)
        host_flags = 0
        if is_v6_host(born_host):
            host_flags |= BORNHOST_V6_FLAG
        if self._store_host_v6:
            host_flags |= STOREHOSTADDRESS_V6_FLAG
        prepared: list[_Prepared] = []
        first_fail = None
        for i, (m, queue_id) in enumerate(zip(msgs, queue_ids)):
            m_born, m_sys, m_reconsume = own_fields[i] if own_fields is not None else shared
            flags = (m_sys & ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)) | host_flags
            dispatch = not is_tx_prepared_or_rollback(flags)
            topic = m.topic
            if not is_legal_topic(topic):
                raise IllegalTopicError(f"illegal topic {topic!r}: must be 1..=127 chars of [A-Za-z0-9%|_-]")
            if queue_id < 0:
                raise ValueError(f"queue id must be >= 0, got {queue_id}")
            if first_fail is not None:
                continue
            body = bytes(m.body)
            raw_props = type(m.properties) is bytes  # put_batch: the properties as stored, not a map
            props = m.properties if raw_props else encode_properties(m.properties)
            if not trailing_separator and not raw_props:
                props = props[:-1]  # the last entry's \x02: 4.9.7's messageProperties2String writes none
            if len(body) > cfg.max_message_size:
                first_fail = PutMessageStatus.MESSAGE_ILLEGAL
                continue
            if len(props) > MAX_PROPERTIES_SIZE:
                first_fail = PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
                continue
            record = encode_record(
                queue_id=queue_id,
                flag=m.flag,
                queue_offset=0,
                physical_offset=0,
                sys_flag=flags,
                born_timestamp=m_born,
                born_host_raw=born_raw,
                store_timestamp=store_timestamp,
                store_host_raw=self._store_host_raw,
                reconsume_times=m_reconsume,
                prepared_transaction_offset=prepared_transaction_offset,
                body=body,
                topic=topic.encode(),
                properties=props,
            )
            if not self._commit_log.fits_in_a_file(len(record)):
                first_fail = PutMessageStatus.MESSAGE_ILLEGAL
                continue
            prepared.append(
                (
                    topic,
                    queue_id,
                    record,
                    (tags_code_of(decode_properties(props)) if raw_props else _tags_code(m.properties, props))
                    if dispatch
                    else 0,
                    dispatch,
                    flags,
                )
            )
        return prepared, first_fail

    def _queue_cursor(self, topic: str, queue_id: int, dispatch: bool) -> tuple[ConsumeQueue | None, int]:
        """Phase 2, the queue a record's unit goes to (created, with its directory, at its first dispatched message)
        and its queue offset (the queue's max offset, 4.9's ``topicQueueTable`` entry); ``(None, 0)`` for a PREPARED
        or ROLLBACK record, which gets no unit. The twin asks the queue table each time (a dict lookup); the Rust
        engine keeps a put's queues at hand (``QueueCursors``). StoreError when the queue cannot be created."""
        if not dispatch:
            return None, 0
        cq = self._queue_or_create(topic, queue_id)
        return cq, cq.max_offset

    def _append_one(self, prepared: _Prepared) -> tuple[int, int, int, int] | None:
        """Phase 3, one record (4.9's ``doAppend``, then ``CommitLogDispatcherBuildConsumeQueue`` for it): its queue
        cursor, CommitLog space and the ConsumeQueue file of its unit had before a byte is written (None, nothing
        written, when one cannot be), then the record's offsets patched in and the record appended, then its unit
        dispatched (the Rust engine's ``dispatch_consume_queue``); a unit that cannot be written leaves the record
        stored without it (``_CREATE_FAILED``: recovery would dispatch it again after a crash). Engine lock held."""
        topic, queue_id, record, tags_code, dispatch, _flags = prepared
        cl = self._commit_log
        try:
            cq, queue_offset = self._queue_cursor(topic, queue_id, dispatch)
            f = cl.allocate(len(record))
            if cq is not None:
                cq.ensure_file_for(queue_offset)
        except StoreError:
            return None
        phys = cl.write_offset
        patch_offsets(record, queue_offset, phys)
        cl.append(f, record)
        if cq is not None:
            try:
                cq.put(queue_offset, phys, len(record), tags_code)
            except StoreError:
                return _CREATE_FAILED
        return (_PUT_OK, phys, queue_offset, len(record))

    def _index_hand_off(
        self, prepared: list[_Prepared], results: list[tuple[int, int, int, int]], store_timestamp: int
    ) -> None:
        """Phase 4, the put's keys (4.9's ``CommitLogDispatcherBuildIndex``, invariant 6): the UNIQ_KEY and KEYS of
        every appended record that is not a rollback, indexed in order. The twin builds every put inline (the Rust
        engine hands a large put to its builder thread, with the same index). A build error stops the index: the
        records are stored, the next open re-indexes them. Engine lock held."""
        index = self._index
        if index is None or not results or self._index_stop_reason is not None:
            return
        try:
            for (topic, _qid, record, _tc, _dispatch, m_flags), r in zip(prepared, results):
                if r[0] == _PUT_OK and is_indexed_sys_flag(m_flags):
                    index.build_index(topic.encode(), _record_properties(record), r[1], store_timestamp)
        except StoreError as e:
            # the record is stored; 4.9 stops building the index and the next open re-indexes what is missing
            self._stop_index(e)

    def _after_put(self, end: int, dispatched_any: bool, store_timestamp: int) -> None:
        """Phase 5, the end of a put that appended anything (``end`` >= 0, where its last record ends), engine lock
        held: where the next record to dispatch starts (``replica.py``) and the checkpoint's physic and logics
        timestamps (logics only when a record got a unit)."""
        if end >= 0:
            self._reput_from = end
            self._last_physic_ts = store_timestamp
            if dispatched_any:
                self._last_logics_ts = store_timestamp

    def _handle_disk_flush(
        self, results: list[tuple[int, int, int, int]], end: int, wait_flush: bool
    ) -> list[tuple[int, int, int, int]]:
        """Phase 5, the engine lock released (4.9's ``CommitLog.handleDiskFlush``), when the put appended anything:
        SYNC_FLUSH waits up to ``sync_flush_timeout`` for a flush covering ``end`` (unless ``wait_flush`` is False) and
        turns every PUT_OK into FLUSH_DISK_TIMEOUT when none comes (offsets kept); ASYNC_FLUSH wakes the flush thread
        unless ``flush_commit_log_timed``. Returns the results."""
        if end < 0:
            return results
        cfg = self._config
        if cfg.sync_flush:
            if wait_flush and not self._flush_service.sync(end, cfg.sync_flush_timeout):
                timeout = int(PutMessageStatus.FLUSH_DISK_TIMEOUT)
                results = [(timeout, *r[1:]) if r[0] == _PUT_OK else r for r in results]
        elif not cfg.flush_commit_log_timed:
            self._flush_service.wake()
        return results

    def wait_flushed(self, upto: int) -> bool:
        """Waits (up to ``sync_flush_timeout``) until a CommitLog flush covers ``upto``, the end offset of a put
        made with ``wait_flush=False``; False on timeout, flush failure or a closed store."""
        if self._closed:
            return False
        return self._flush_service.sync(upto, self._config.sync_flush_timeout)

    # -- read path ------------------------------------------------------------------------------------------

    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        tag_codes: list[int] | None,
        property_filter: Callable[[dict[str, str]], bool] | None,
    ) -> tuple:
        with self._lock:
            self._check_open()
            return _get_message.get_message(
                self._config,
                self._commit_log,
                self._queues.get((topic, queue_id)),
                offset,
                max_msg_nums,
                tag_codes,
                property_filter,
            )

    def is_the_batch_full(
        self, phy_size: int, max_msg_nums: int, buffer_total: int, msg_total: int, in_disk: bool
    ) -> bool:
        return _get_message.is_the_batch_full(self._config, phy_size, max_msg_nums, buffer_total, msg_total, in_disk)

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        with self._lock:
            self._check_open()
            cq = self._queues.get((topic, queue_id))
            return cq.max_offset if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        with self._lock:
            self._check_open()
            cq = self._queues.get((topic, queue_id))
            return cq.min_offset if cq is not None else 0

    def _store_time_of(self, unit: tuple[int, int, int] | None) -> int | None:
        if unit is None:
            return None
        record = self._commit_log.get_message(unit[0], unit[1])
        if record is None or len(record) < 40:
            return None
        try:
            return record_store_timestamp(record)
        except Exception:  # struct.error: the record is too short for its STORETIMESTAMP
            return None

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, ts: int) -> int:
        with self._lock:
            self._check_open()
            cq = self._queues.get((topic, queue_id))
            if cq is None:
                return 0
            lo, hi = cq.min_offset, cq.max_offset
            while lo < hi:
                mid = lo + (hi - lo) // 2
                t = self._store_time_of(cq.unit_at(mid))
                if t is not None and t >= ts:
                    hi = mid
                else:
                    lo = mid + 1
            return lo

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        with self._lock:
            self._check_open()
            cq = self._queues.get((topic, queue_id))
            if cq is None or cq.min_offset >= cq.max_offset:
                return -1
            t = self._store_time_of(cq.unit_at(cq.min_offset))
            return -1 if t is None else t

    @property
    def max_physical_offset(self) -> int:
        with self._lock:
            self._check_open()
            return self._commit_log.max_offset

    @property
    def min_physical_offset(self) -> int:
        with self._lock:
            self._check_open()
            return self._commit_log.min_offset

    def read_commit_log(self, offset: int, size: int) -> bytes | None:
        with self._lock:
            self._check_open()
            if size < 0:
                raise ValueError(f"size must be >= 0, got {size}")
            return self._commit_log.read(offset, size)

    def get_commit_log_data(self, offset: int, max_size: int) -> bytes | None:
        """``getCommitLogData`` (replica.py): up to ``max_size`` written bytes from ``offset``, within one file."""
        with self._lock:
            self._check_open()
            return _replica.get_commit_log_data(self, offset, max_size)

    def append_commit_log(self, offset: int, data: bytes) -> list[tuple[str, int, int]]:
        """``appendToCommitLog`` + the slave's dispatch (replica.py)."""
        with self._lock:
            self._check_open()
            out = _replica.append_commit_log(self, offset, bytes(data))
        # a SYNC_FLUSH slave flushes what it copies at once (4.9's GroupCommitService flushes it every 10 ms);
        # under ASYNC_FLUSH the timed flush leaves it to the tick, as the master's puts
        if self._config.sync_flush or not self._config.flush_commit_log_timed:
            self._flush_service.wake()
        return out

    def look_message_by_offset(self, offset: int) -> bytes | None:
        with self._lock:
            self._check_open()
            f = self._commit_log.queue.find(offset)
            if f is None:
                return None
            pos = offset - f.start
            if pos + 8 > f.wrote:
                return None
            try:
                total = record_layout(f.buffer, pos, f.wrote)[0]
            except RecordFormatError as e:
                raise CorruptRecordError(f"corrupt record at offset {offset}: {e}", offset=offset) from None
            return f.read(pos, total)

    def scan_consume_queue(
        self, topic: str, queue_id: int, start: int, max_units: int, tag_codes: list[int] | None
    ) -> tuple[int, bytes]:
        with self._lock:
            self._check_open()
            if start < 0 or max_units < 0:
                raise ValueError("start and max_units must be >= 0")
            cq = self._queues.get((topic, queue_id))
            if cq is None:
                return start, b""
            s = max(start, cq.min_offset)
            max_offset = cq.max_offset
            if s >= max_offset:
                return s, b""
            e = min(max_offset, s + max_units)
            codes = None if tag_codes is None else set(tag_codes)
            out = []
            for _first, units in cq.units(s, e):
                if codes is None:
                    out.append(units)
                    continue
                for i in range(0, len(units), 20):
                    # the low 32 bits of tagsCode, as Java's (int) cast
                    if int.from_bytes(units[i + 16 : i + 20], "big", signed=True) in codes:
                        out.append(units[i : i + 20])
            return e, b"".join(out)

    def consume_queue_units(self, topic: str, queue_id: int, start: int, count: int) -> bytes:
        with self._lock:
            self._check_open()
            if start < 0 or count < 0:
                raise ValueError("start and count must be >= 0")
            cq = self._queues.get((topic, queue_id))
            if cq is None:
                return b""
            e = min(cq.max_offset, start + count)
            return b"".join(units for _first, units in cq.units(start, e))

    def topics(self) -> list[tuple[str, int]]:
        with self._lock:
            self._check_open()
            return sorted(self._queues)

    # -- maintenance ----------------------------------------------------------------------------------------

    def delete_commit_log_files_before(self, offset: int) -> int:
        with self._lock:
            self._check_open()
            return self._commit_log.delete_files_before(offset)

    def correct_min_offsets(self) -> None:
        with self._lock:
            self._check_open()
            min_phys = self._commit_log.min_offset
            for cq in list(self._queues.values()):
                cq.correct_min_offset(min_phys)
            # 4.9's CleanConsumeQueueService then IndexService.deleteExpiredFile(commitLog min offset)
            if self._index is not None:
                self._index.delete_expired_files(min_phys)

    def index_notes(self) -> list[str]:
        with self._lock:
            self._check_open()
            notes = list(self._index_notes)
            if self._index_stop_reason is not None:
                notes.append(self._index_stop_reason)
            return notes

    def query_message(
        self, topic: str, key: str, max_num: int, begin_timestamp: int, end_timestamp: int
    ) -> tuple[bytes, int, int, int]:
        """``DefaultMessageStore.queryMessage`` (see the Rust twin): (records, count, indexLastUpdateTimestamp,
        indexLastUpdatePhyoffset)."""
        with self._lock:
            self._check_open()
            index = self._index
            if index is None:
                return b"", 0, 0, 0
            max_num = max(min(max_num, self._config.max_msgs_num_batch), 0)
            t, k = topic.encode(), key.encode()
            out: list[bytes] = []
            last_ts = last_phy = 0
            last_query_time = end_timestamp
            for _ in range(QUERY_ROUNDS):
                offsets, its, iphy = index.query_offset(t, k, max_num, begin_timestamp, last_query_time)
                if not offsets:
                    break
                last_ts, last_phy = its, iphy
                for m, off in enumerate(sorted(set(offsets))):
                    try:
                        rec = self.look_message_by_offset(off)
                        if rec is None:
                            continue
                        total, _mg, _sf, _st, body_pos, body_len, topic_pos, topic_len = record_layout(rec, 0, len(rec))
                    except (CorruptRecordError, RecordFormatError):
                        continue
                    if m == 0:
                        last_query_time = record_store_timestamp(rec)
                    if (
                        _I64.unpack_from(rec, PHY_POS_POSITION)[0] != off
                        or rec[topic_pos : topic_pos + topic_len] != t
                        or not record_has_index_key(bytes(rec[topic_pos + topic_len + 2 : total]), k)
                        or (
                            self._config.check_crc_on_recover
                            and body_crc(rec[body_pos : body_pos + body_len])
                            != _I32.unpack_from(rec, BODYCRC_POSITION)[0]
                        )
                    ):
                        continue
                    out.append(bytes(rec))
                if out or last_query_time < begin_timestamp:
                    break
            return b"".join(out), len(out), last_ts, last_phy

    def recovery_report(self) -> dict:
        with self._lock:
            self._check_open()
            return dict(self._report)

    @property
    def closed(self) -> bool:
        return self._closed


def _current_boot_id() -> str | None:
    """This machine's boot id (Linux; None elsewhere: every abnormal exit is then a machine's)."""
    return _read_abort_boot_id(BOOT_ID_PATH)


def _read_abort_boot_id(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return decode_abort_boot_id(f.read(64))
    except OSError:
        return None
