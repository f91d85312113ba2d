"""The message store facade: RocketMQ's DefaultMessageStore as Python users see it.

Owns the configuration, the result types, message-filter translation, UNIQ_KEY assignment, the arrival listeners,
the running flags and the retention services; the engine (Rust or the Python twin, docs/CORE_API.md) owns the files,
the append, dispatch, the get_message scan, flushing and recovery.
Invariants: 1. arrival listeners run once per stored message, after append and dispatch, in order, on the putting
thread, and their exceptions never undo the write; 2. ``get_message`` returns only records the engine validated;
3. after ``close()`` every method raises StoreError; 4. while not writeable (DISK_FULL) every put answers
SERVICE_NOT_AVAILABLE and stores nothing (the HA slave's append is not refused); 5. while not readable
``get_message`` raises StoreError.
Thread-safety: safe to share between threads (the engine serialises writes; reads run concurrently).
Details (each invariant in full): docs/CORE_API.md, 'Store facade'.
"""

from __future__ import annotations

import enum
import logging
import os
import threading
import time
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, overload

from rmq_core import _backend
from rmq_core.errors import StoreError
from rmq_core.filter.message_selector import ExpressionType, MessageSelector
from rmq_core.filter.sql92 import Sql92Filter
from rmq_core.filter.subscription_data import build_subscription_data
from rmq_core.format.batch import NO_BLOCK_IN_BATCH as NO_BLOCK_IN_BATCH  # the reason put_batch gives
from rmq_core.format.cq_unit import CQ_STORE_UNIT_SIZE
from rmq_core.format.index import DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM, MAX_MSGS_NUM_BATCH
from rmq_core.message import (
    PROPERTY_TAGS,
    UNIQ_KEY,
    Message,
    MessageExt,
    _UniqIdGenerator,
    create_offset_msg_id,
    create_uniq_id,
    decode_messages,
    tags_hash,
)
from rmq_core.store_clean_service import StoreCleanService, parse_delete_when
from rmq_core.store_running_flags import RunningFlags
from rmq_core.store_status import GetMessageStatus, PutMessageStatus

if TYPE_CHECKING:
    from rmq_core import _core

log = logging.getLogger(__name__)

GiB = 1024 * 1024 * 1024


class FlushDiskType(str, enum.Enum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover - non-POSIX
        return 16 * GiB


@dataclass
class StoreConfig:
    """MessageStoreConfig's names in snake_case, with RocketMQ's defaults."""

    mapped_file_size_commit_log: int = 1 * GiB
    mapped_file_size_consume_queue: int = 300_000 * CQ_STORE_UNIT_SIZE
    max_message_size: int = 4 * 1024 * 1024
    flush_disk_type: str = FlushDiskType.ASYNC_FLUSH.value
    flush_interval_commit_log: int = 500
    #: flushCommitLogTimed (ASYNC_FLUSH): True, 4.9.7's default — the flush thread msyncs the CommitLog every
    #: ``flush_interval_commit_log`` ms and puts do not wake it; False — a put wakes it once 4 pages
    #: (flushCommitLogLeastPages) are appended, so dirty data waits less and each msync is small
    flush_commit_log_timed: bool = True
    sync_flush_timeout: int = 5000
    check_crc_on_recover: bool = True
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40
    total_physical_memory: int = field(default_factory=_physical_memory)
    max_filter_message_size: int = 16000
    store_host: tuple[str, int] = ("127.0.0.1", 10911)
    #: messageIndexEnable: build ``index/`` files on put and answer ``query_message`` from them
    message_index_enable: bool = True
    #: maxHashSlotNum / maxIndexNum: each index file's geometry (4.9's 420 MB file by default; tests use small ones)
    max_hash_slot_num: int = DEFAULT_MAX_HASH_SLOT_NUM
    max_index_num: int = DEFAULT_MAX_INDEX_NUM
    #: maxMsgsNumBatch: the most messages one query returns
    max_msgs_num_batch: int = MAX_MSGS_NUM_BATCH
    #: warmMapedFileEnable: a background thread keeps the pages the writer will reach next faulted (the CommitLog's,
    #: the ConsumeQueues', the index's), so a put does not pay those page faults (the Rust engine; the Python twin
    #: writes through its own mapping unwarmed)
    warm_mapped_file_enable: bool = True
    # retention (store_clean_service.py; MessageStoreConfig's names and 4.9's defaults)
    #: cleanResourceInterval: ms between two clean passes
    clean_resource_interval: int = 10_000
    #: deleteWhen: the local hours at which expired CommitLog files are deleted, ';'-separated
    delete_when: str = "04"
    #: fileReservedTime: hours a CommitLog file is kept after its last modification
    file_reserved_time: int = 72
    #: diskMaxUsedSpaceRatio: % of the disk above which expired files are deleted at any hour (clamped to 10..95)
    disk_max_used_space_ratio: int = 75
    #: deleteCommitLogFilesInterval / deleteConsumeQueueFilesInterval: ms between two deleted files
    delete_commit_log_files_interval: int = 100
    delete_consume_queue_files_interval: int = 100
    #: cleanFileForciblyEnable: above disk_space_clean_forcibly_ratio, delete the oldest files whatever their age
    clean_file_forcibly_enable: bool = True
    #: RocketMQ 5's diskSpaceWarningLevelRatio / diskSpaceCleanForciblyRatio (%): above the first the store refuses
    #: puts (DISK_FULL); above the second it cleans forcibly (4.9: system properties, 0.90 / 0.85)
    disk_space_warning_level_ratio: int = 90
    disk_space_clean_forcibly_ratio: int = 85
    #: RocketMQ 5's deleteFileBatchMax (4.9's MappedFileQueue.DELETE_FILES_BATCH_MAX): files deleted per pass at most
    delete_file_batch_max: int = 10

    def __post_init__(self) -> None:
        if isinstance(self.flush_disk_type, FlushDiskType):
            self.flush_disk_type = self.flush_disk_type.value
        if self.flush_disk_type not in (FlushDiskType.ASYNC_FLUSH.value, FlushDiskType.SYNC_FLUSH.value):
            raise ValueError(f"flush_disk_type must be ASYNC_FLUSH or SYNC_FLUSH, got {self.flush_disk_type!r}")
        if self.mapped_file_size_commit_log < 4096:
            raise ValueError("mapped_file_size_commit_log must be at least 4096 bytes")
        if self.mapped_file_size_consume_queue < CQ_STORE_UNIT_SIZE:
            raise ValueError("mapped_file_size_consume_queue must hold at least one unit")
        if not self.max_message_size > 0:
            raise ValueError("max_message_size must be positive")
        self.store_host = (str(self.store_host[0]), int(self.store_host[1]))
        parse_delete_when(self.delete_when)
        if self.delete_file_batch_max < 1:
            raise ValueError("delete_file_batch_max must be at least 1")

    def to_engine(self) -> dict[str, object]:
        return asdict(self)


class PutMessageResult:
    """What one put did: ``status``, ``commitlog_offset``, ``queue_offset``, ``wrote_bytes`` and the offset ``msg_id``."""

    __slots__ = ("commitlog_offset", "queue_offset", "status", "store_host", "wrote_bytes")

    def __init__(
        self,
        status: PutMessageStatus,
        commitlog_offset: int,
        queue_offset: int,
        wrote_bytes: int,
        store_host: tuple[str, int],
    ) -> None:
        self.status = status
        self.commitlog_offset = commitlog_offset
        self.queue_offset = queue_offset
        self.wrote_bytes = wrote_bytes
        self.store_host = store_host

    @property
    def ok(self) -> bool:
        return self.status == PutMessageStatus.PUT_OK

    @property
    def msg_id(self) -> str | None:
        """The offset msg id (store host + commitlog offset), None when nothing was written."""
        if self.commitlog_offset < 0:
            return None
        return create_offset_msg_id(self.store_host, self.commitlog_offset)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PutMessageResult):
            return NotImplemented
        return (self.status, self.commitlog_offset, self.queue_offset, self.wrote_bytes, self.store_host) == (
            other.status,
            other.commitlog_offset,
            other.queue_offset,
            other.wrote_bytes,
            other.store_host,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"PutMessageResult(status={self.status.name}, commitlog_offset={self.commitlog_offset}, "
            f"queue_offset={self.queue_offset}, wrote_bytes={self.wrote_bytes})"
        )


_PUT_STATUS = tuple(PutMessageStatus)  # index by ordinal: cheaper than calling the enum on the hot path
_NOT_AVAILABLE = int(PutMessageStatus.SERVICE_NOT_AVAILABLE)
_PUT_OK = int(PutMessageStatus.PUT_OK)


# put_messages' answer from the engine: statuses (a byte each), CommitLog offsets, queue offsets (int64), wrote bytes
# (int32), native byte order
PutResultColumns = tuple[bytes, bytes, bytes, bytes]


class PutMessageResults(Sequence[PutMessageResult]):
    """The results of one ``put_messages`` call, one per message in order, built on access (batches are hot): the
    engine answers with columns (docs/CORE_API.md §3), read here through memoryviews."""

    __slots__ = ("_commitlog_offsets", "_queue_offsets", "_statuses", "_store_host", "_wrote_bytes")

    def __init__(self, columns: PutResultColumns, store_host: tuple[str, int]) -> None:
        statuses, commitlog_offsets, queue_offsets, wrote_bytes = columns
        self._statuses = statuses
        self._commitlog_offsets = memoryview(commitlog_offsets).cast("q")
        self._queue_offsets = memoryview(queue_offsets).cast("q")
        self._wrote_bytes = memoryview(wrote_bytes).cast("i")
        self._store_host = store_host

    def __len__(self) -> int:
        return len(self._statuses)

    @overload
    def __getitem__(self, i: int) -> PutMessageResult: ...
    @overload
    def __getitem__(self, i: slice) -> list[PutMessageResult]: ...
    def __getitem__(self, i: int | slice) -> PutMessageResult | list[PutMessageResult]:
        if isinstance(i, slice):
            return [self._make(k) for k in range(len(self._statuses))[i]]
        return self._make(i)

    def __iter__(self) -> Iterator[PutMessageResult]:
        return map(self._make, range(len(self._statuses)))

    def _make(self, i: int) -> PutMessageResult:
        return PutMessageResult(
            _PUT_STATUS[self._statuses[i]],
            self._commitlog_offsets[i],
            self._queue_offsets[i],
            self._wrote_bytes[i],
            self._store_host,
        )

    @property
    def all_ok(self) -> bool:
        return self._statuses.count(0) == len(self._statuses)

    @property
    def statuses(self) -> list[PutMessageStatus]:
        return [_PUT_STATUS[s] for s in self._statuses]


class BatchPutResult(NamedTuple):
    """What ``put_batch`` did: ``status`` (the first record's that is not PUT_OK, else PUT_OK), how many records
    were appended (``stored``, from the first; fewer than the blocks only when an I/O failure cut the put short), the
    first one's ``queue_offset`` (-1: none), the 4.9 answer's ``msg_ids`` (their offset msg ids joined with ','),
    ``wrote_bytes`` (all of them), ``end_offset`` (where the last one ends: what a flush or a slave must reach; -1:
    none) and ``malformed`` (why the body was refused, else None)."""

    status: PutMessageStatus
    stored: int
    queue_offset: int
    msg_ids: str
    wrote_bytes: int
    end_offset: int
    malformed: str | None = None


@dataclass
class GetMessageResult:
    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    message_count: int = 0
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False
    body: bytes = b""
    max_phy_offset_pulling: int = 0

    def decode(self) -> list[MessageExt]:
        return decode_messages(self.body) if self.body else []

    def last_store_timestamp(self) -> int:
        """The STORETIMESTAMP of the body's last record (0 when there is none), read by the engine's walk."""
        return _backend.impl.last_store_timestamp(self.body)


# the engine's status ordinal → the status (a KeyError for one it never returns), cheaper than the enum call per pull
_GET_MESSAGE_STATUS = {int(s): s for s in GetMessageStatus}


@dataclass(frozen=True)
class QueryMessageResult:
    """RocketMQ's ``QueryMessageResult``: the matching records concatenated (CommitLog order) and the index's last
    update (``indexLastUpdateTimestamp`` / ``indexLastUpdatePhyoffset`` of the newest index file)."""

    records: bytes
    count: int
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


# (topic, queue_id, max_offset, tags_code, properties); tags_code and properties are None for records a slave
# appended from its master (``append_commit_log``): one call per queue, the pulls parked on it re-run their filters
ArrivalListener = Callable[[str, int, int, int | None, Mapping[str, str] | None], None]
PropertyFilter = Callable[[Mapping[str, str]], bool]


class MessageStore:
    """``MessageStore(root_dir, config=None)``: opens (recovering after a crash) or creates a RocketMQ store directory."""

    def __init__(
        self,
        root_dir: str | os.PathLike[str],
        config: StoreConfig | None = None,
        *,
        clock: Callable[[], int] | None = None,
        uniq_id: Callable[[], str] | None = None,
        backend: str | None = None,
    ) -> None:
        self.root_dir = os.fspath(root_dir)
        self.config = config or StoreConfig()
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._uniq_id = uniq_id or create_uniq_id
        impl = _backend.load(backend) if backend else _backend.impl
        self.backend = backend or _backend.backend()
        self._impl = impl
        os.makedirs(self.root_dir, exist_ok=True)
        self._engine: _core.StoreEngine = impl.StoreEngine(self.root_dir, self.config.to_engine())
        for note in self._engine.index_notes():
            log.warning("store %s: %s", self.root_dir, note)
        self._listeners: list[ArrivalListener] = []
        # (fn, topics, active) per listener, in order: rebuilt on add/remove, read without a lock by every put
        self._scoped_listeners: tuple[
            tuple[ArrivalListener, frozenset[str] | None, Callable[[], bool] | None], ...
        ] = ()
        #: every topic a topic-scoped listener takes (a send path put to none of them skips its arrivals)
        self._listened_topics: frozenset[str] = frozenset()
        self._closed = False
        self._close_lock = threading.Lock()
        #: 4.9's RunningFlags: a put while not writeable (DISK_FULL, …) is answered SERVICE_NOT_AVAILABLE
        self.running_flags = RunningFlags()
        self._refused_puts = 0
        #: retention (store_clean_service.py): passes on demand; ``clean_service.start()`` schedules them (the broker)
        self.clean_service = StoreCleanService(self)

    # --- lifecycle -------------------------------------------------------------------------------------------
    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            self.clean_service.shutdown()
            self._engine.close()

    def flush(self) -> int:
        self._check_open()
        return self._engine.flush()

    @property
    def index_notes(self) -> list[str]:
        """What open did to ``index/`` (refused or deleted files) and whether building the index stopped since (no
        space for a new index file: the records stay, the next open re-indexes them), one sentence each."""
        self._check_open()
        return self._engine.index_notes()

    @property
    def recovery_report(self) -> dict[str, bool | int]:
        return self._engine.recovery_report()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"message store {self.root_dir} is closed")

    # --- write path ------------------------------------------------------------------------------------------
    def put_message(
        self,
        msg: Message,
        queue_id: int,
        born_host: tuple[str, int] = ("127.0.0.1", 0),
        *,
        born_timestamp: int | None = None,
        sys_flag: int = 0,
        reconsume_times: int = 0,
        wait_flush: bool = True,
        prepared_transaction_offset: int = 0,
        trailing_separator: bool = True,
    ) -> PutMessageResult:
        """Append one message. ``wait_flush=False`` (SYNC_FLUSH): return once appended and dispatched, without
        waiting for the flush; the caller then waits with ``wait_flushed(commitlog_offset + wrote_bytes)``.
        ``prepared_transaction_offset``: the record's field of that name (a committed transactional message's half
        message offset, as 4.9's EndTransactionProcessor sets it). ``trailing_separator`` False: the property string
        without the ``\x02`` after its last entry, as 4.9.7's ``messageProperties2String`` writes it (a broker's
        send, whose ``properties`` are then in Java ``HashMap`` order: ``message_encoding.java_hash_map_order``)."""
        columns = self._put(
            [msg],
            [queue_id],
            born_host,
            born_timestamp,
            sys_flag,
            reconsume_times,
            wait_flush,
            prepared_transaction_offset=prepared_transaction_offset,
            trailing_separator=trailing_separator,
        )
        return PutMessageResults(columns, self.config.store_host)[0]

    def put_messages(
        self,
        batch: Sequence[tuple[Message, int]],
        born_host: tuple[str, int] = ("127.0.0.1", 0),
        *,
        born_timestamp: int | None = None,
        sys_flag: int = 0,
        reconsume_times: int = 0,
        wait_flush: bool = True,
        own_fields: Sequence[tuple[int, int, int]] | None = None,
        trailing_separator: bool = True,
    ) -> PutMessageResults:
        """Append many messages under one lock; each is its own CommitLog record. All-or-nothing on validation.
        ``wait_flush`` as in ``put_message``. ``own_fields``: each message's own ``(born_timestamp, sys_flag,
        reconsume_times)`` instead of the shared ones (separate sends stored in one call). ``trailing_separator`` as
        in ``put_message``."""
        msgs: list[Any]
        queue_ids: list[int] | None
        if type(batch) is list:  # the engine unpacks the pairs itself (no two lists built here per message)
            msgs, queue_ids = batch, None
        else:
            msgs, queue_ids = [m for m, _ in batch], [q for _, q in batch]
        raw = self._put(
            msgs,
            queue_ids,
            born_host,
            born_timestamp,
            sys_flag,
            reconsume_times,
            wait_flush,
            own_fields,
            trailing_separator=trailing_separator,
        )
        return PutMessageResults(raw, self.config.store_host)

    def wait_flushed(self, upto: int) -> bool:
        """Blocks (up to ``sync_flush_timeout``) until a CommitLog flush covers ``upto`` (the end offset of a
        ``wait_flush=False`` put); False on timeout, flush failure or a closed store. Waiters at the same time
        share one msync."""
        if self._closed:
            return False
        return self._engine.wait_flushed(upto)

    def _put(
        self,
        msgs: list[Any],  # the messages, or the (message, queue id) pairs when queue_ids is None
        queue_ids: list[int] | None,
        born_host: tuple[str, int],
        born_timestamp: int | None,
        sys_flag: int,
        reconsume_times: int,
        wait_flush: bool = True,
        own_fields: Sequence[tuple[int, int, int]] | None = None,
        prepared_transaction_offset: int = 0,
        trailing_separator: bool = True,
    ) -> PutResultColumns:
        if self._closed:
            raise StoreError(f"message store {self.root_dir} is closed")
        if not self.running_flags.is_writeable():
            n = len(msgs)
            self._refuse_put(n)
            refused = array("q", [-1]) * n
            return bytes([_NOT_AVAILABLE]) * n, refused.tobytes(), refused.tobytes(), bytes(4 * n)
        # ``queue_ids`` None: ``msgs`` is the caller's list of (message, queue id) pairs, unpacked by the engine
        uniq = self._uniq_id
        # the broker assigns UNIQ_KEY when the producer did not (SendMessageProcessor)
        uniq_prefix, uniq_counter = "", None
        if type(uniq) is _UniqIdGenerator:  # the default generator: the engine assigns the ids in its reading pass
            uniq_prefix, uniq_counter = uniq.batch_prefix()
        else:
            for m in msgs if queue_ids is not None else [m for m, _ in msgs]:
                if UNIQ_KEY not in m.properties:
                    m.properties[UNIQ_KEY] = uniq()
        now = self._clock()
        raw = self._engine.put_messages(
            msgs,
            queue_ids,
            sys_flag,
            now if born_timestamp is None else born_timestamp,
            born_host,
            reconsume_times,
            now,
            wait_flush,
            None if own_fields is None else list(own_fields),
            prepared_transaction_offset,
            uniq_prefix,
            uniq_counter,
            trailing_separator,
        )
        if self._listeners:
            pairs = msgs if queue_ids is None else zip(msgs, queue_ids)
            self._notify_arrivals(
                (m.topic, q, status, queue_offset, m.properties)
                for (m, q), status, queue_offset in zip(pairs, raw[0], memoryview(raw[2]).cast("q"))
            )
        return raw

    def put_send_requests(
        self,
        sends: _core.SendRequestColumns,
        start: int,
        end: int,
        sys_flag_or: list[int],
        born_host: tuple[str, int],
        *,
        wait_flush: bool = True,
    ) -> list[tuple[int, int, int, int]]:
        """Append the plain sends ``[start, end)`` of ``sends`` (the broker's send path, ``SendRequestParser``) under
        one lock, each with its own born timestamp, sys flag (| ``sys_flag_or`` of its key), reconsume times and the
        properties the send path stores (a UNIQ_KEY assigned where a send has none): what ``put_messages`` with
        ``own_fields`` would append for the same sends. Results ``(status, commitlog_offset, queue_offset,
        wrote_bytes)`` per send; ``wait_flush`` as in ``put_message``."""
        if self._closed:
            raise StoreError(f"message store {self.root_dir} is closed")
        if not self.running_flags.is_writeable():
            self._refuse_put(end - start)
            return [(_NOT_AVAILABLE, -1, -1, 0)] * (end - start)
        uniq = self._uniq_id
        if sends.needs_uniq_keys and type(uniq) is _UniqIdGenerator:
            prefix, counter = uniq.batch_prefix()
            raw = self._engine.put_send_requests(
                sends, start, end, sys_flag_or, born_host, self._clock(), wait_flush, prefix, counter
            )
        else:
            raw = self._engine.put_send_requests(sends, start, end, sys_flag_or, born_host, self._clock(), wait_flush)
        if self._listeners:
            listeners, topics = self._put_listeners()
            if listeners:
                arrivals = sends.arrivals(start, end, raw, topics)
                if arrivals:
                    self._notify_arrivals(arrivals, listeners)
        return raw

    def put_batch(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        batch_properties: str,
        born_host: tuple[str, int] = ("127.0.0.1", 0),
        *,
        born_timestamp: int | None = None,
        sys_flag: int = 0,
        reconsume_times: int = 0,
        wait_flush: bool = True,
    ) -> BatchPutResult:
        """SEND_BATCH_MESSAGE's put (4.9 ``asyncPutMessages`` of a ``MessageExtBatch``): every block of ``body`` (the
        batch body, ``message_encoding``) becomes a record of ``topic``/``queue_id`` whose properties are the block's
        property string followed by ``batch_properties`` byte for byte (4.9.7's ``MessageExtBatchEncoder``: a
        ``\\x02`` between them when the block's does not end with one), a block without UNIQ_KEY given one; appended
        under one lock, all-or-nothing on validation, read and stored by the engine without a Python object per
        record. A malformed body (or one without a block) stores nothing: MESSAGE_ILLEGAL with ``malformed`` saying
        why (also while the store is not writeable). ``wait_flush`` as in ``put_message``."""
        if self._closed:
            raise StoreError(f"message store {self.root_dir} is closed")
        if type(body) is not bytes:
            body = bytes(body)
        if not self.running_flags.is_writeable():
            try:
                n = len(self._impl.split_batch(body))
            except ValueError as e:
                return BatchPutResult(PutMessageStatus.MESSAGE_ILLEGAL, 0, -1, "", 0, -1, str(e))
            if n == 0:
                return BatchPutResult(PutMessageStatus.MESSAGE_ILLEGAL, 0, -1, "", 0, -1, NO_BLOCK_IN_BATCH)
            self._refuse_put(n)
            return BatchPutResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, 0, -1, "", 0, -1)
        listeners: list[tuple[ArrivalListener, frozenset[str] | None]] = []
        if self._listeners:
            listeners, topics = self._put_listeners()
            if topics is not None and topic not in topics:
                listeners = []
        now = self._clock()
        status, stored, queue_offset, msg_ids, wrote, end, malformed, props = self._engine.put_batch(
            topic,
            queue_id,
            body,
            batch_properties.encode("utf-8"),
            sys_flag,
            now if born_timestamp is None else born_timestamp,
            born_host,
            reconsume_times,
            now,
            wait_flush,
            self._uniq_id,
            bool(listeners),
        )
        result = BatchPutResult(_PUT_STATUS[status], stored, queue_offset, msg_ids, wrote, end, malformed)
        if props:  # the records appended (PUT_OK: dispatched, whatever the put's status says of later ones)
            self._notify_arrivals(
                ((topic, queue_id, _PUT_OK, queue_offset + i, p) for i, p in enumerate(props)), listeners
            )
        return result

    def _refuse_put(self, n: int) -> None:
        """4.9 ``checkStoreStatus``: the store is not writeable; logged once per 50 000 refused puts."""
        if self._refused_puts % 50_000 == 0:
            log.warning(
                "the message store %s is not writable (flags %d). It may be caused by one of the following reasons: "
                "the broker's disk is full, write to logic queue error, write to index file error, etc",
                self.root_dir,
                self.running_flags.flag_bits,
            )
        self._refused_puts += n

    @property
    def assigns_uniq_keys_in_batch(self) -> bool:
        """``put_send_requests`` can give a send without a UNIQ_KEY its id (the default generator: ids in one engine
        call); with another generator such a send is put through ``put_messages``."""
        return type(self._uniq_id) is _UniqIdGenerator

    def _active_listeners(self) -> list[tuple[ArrivalListener, frozenset[str] | None]]:
        """The listeners that hear the current put (those whose ``active`` says True, or that have none)."""
        return [(fn, topics) for fn, topics, active in self._scoped_listeners if active is None or active()]

    def _put_listeners(self) -> tuple[list[tuple[ArrivalListener, frozenset[str] | None]], frozenset[str] | None]:
        """``_active_listeners()`` and the topics any of them takes: None when one takes every topic, else the
        topics of every topic-scoped listener (a superset; ``_notify_arrivals`` narrows per listener)."""
        listeners: list[tuple[ArrivalListener, frozenset[str] | None]] = []
        topics: frozenset[str] | None = self._listened_topics
        for fn, scope, active in self._scoped_listeners:
            if active is None or active():
                listeners.append((fn, scope))
                if scope is None:
                    topics = None
        return listeners, topics

    def _notify_arrivals(
        self,
        arrivals: Iterable[tuple[str, int, int, int, Mapping[str, str] | bytes]],
        listeners: list[tuple[ArrivalListener, frozenset[str] | None]] | None = None,
    ) -> None:
        """Each listener gets each stored message it is scoped to (``add_arrival_listener``): a listener whose
        ``active`` says False is skipped for the whole put, one with ``topics`` for the messages of other topics,
        and a message no listener takes costs no tags hash nor properties decode (the send path puts a chunk of sends
        at a time). ``arrivals``: ``(topic, queue_id, status, queue_offset, properties)``, the properties as a map or
        as stored; ``listeners``: ``_active_listeners()`` when the caller has them already."""
        if listeners is None:
            listeners = self._active_listeners()
        if not listeners:
            return
        for topic, q, status, queue_offset, props in arrivals:
            if status not in (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT):
                continue
            code: int | None = None
            properties: Mapping[str, str] | None = None
            for fn, topics in listeners:
                if topics is not None and topic not in topics:
                    continue
                if properties is None:
                    properties = self._impl.decode_properties(props) if isinstance(props, bytes) else props
                    tags = properties.get(PROPERTY_TAGS)
                    code = tags_hash(tags) if tags else 0
                try:
                    fn(topic, q, queue_offset + 1, code, properties)
                except Exception:  # a listener must never undo or block a write
                    log.exception("arrival listener %r failed for %s:%d", fn, topic, q)

    def add_arrival_listener(
        self,
        fn: ArrivalListener,
        *,
        topics: Collection[str] | None = None,
        active: Callable[[], bool] | None = None,
    ) -> None:
        """``fn(topic, queue_id, max_offset, tags_code, properties)`` after each message is dispatched. ``topics``:
        only for messages of these topics; ``active``: asked once per put, the put's messages skip ``fn`` when it
        says False (e.g. nobody waits). Both only narrow calls ``fn`` would ignore anyway; the HA slave's appends
        (``append_commit_log``) reach every listener."""
        self._listeners.append(fn)
        scope = None if topics is None else frozenset(topics)
        self._scoped_listeners = (*self._scoped_listeners, (fn, scope, active))
        self._listened_topics = self._listened_topics | (scope or frozenset())

    def remove_arrival_listener(self, fn: ArrivalListener) -> None:
        self._listeners.remove(fn)
        scoped = list(self._scoped_listeners)
        del scoped[next(i for i, entry in enumerate(scoped) if entry[0] == fn)]
        self._scoped_listeners = tuple(scoped)
        self._listened_topics = frozenset().union(*(scope for _, scope, _ in scoped if scope is not None))

    # --- read path -------------------------------------------------------------------------------------------
    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageSelector | str | None = None,
        *,
        property_filter: PropertyFilter | None = None,
    ) -> GetMessageResult:
        """DefaultMessageStore.getMessage (4.9): every GetMessageStatus, tag-hash filter, batch-full rules.

        ``message_filter`` is a MessageSelector or a tag expression; ``property_filter`` is the CommitLog-record
        hook (``isMatchedByCommitLog``) called with a record's properties for units that passed the tag filter.
        """
        self._check_open()
        if not self.running_flags.is_readable():
            raise StoreError(
                f"message store is not readable, so getMessage is forbidden {self.running_flags.flag_bits}"
            )
        tag_codes: list[int] | None = None
        if message_filter is not None:
            sub = build_subscription_data(topic, message_filter)
            if sub.expression_type == ExpressionType.SQL92:
                sql = Sql92Filter(sub.sub_string)
                extra = property_filter
                property_filter = sql if extra is None else (lambda props: sql(props) and extra(props))
            elif not sub.selects_all:
                tag_codes = sorted(sub.code_set)
        r = self._engine.get_message(topic, queue_id, offset, max_msg_nums, tag_codes, property_filter)
        return GetMessageResult(_GET_MESSAGE_STATUS[r[0]], *r[1:])

    def scan_consume_queue(
        self, topic: str, queue_id: int, start: int, max_units: int, tag_codes: Sequence[int] | None = None
    ) -> tuple[int, bytes]:
        """Bulk filtered scan of a ConsumeQueue: ``(next_offset, matching 20-byte units concatenated)``."""
        self._check_open()
        return self._engine.scan_consume_queue(
            topic, queue_id, start, max_units, list(tag_codes) if tag_codes else None
        )

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        self._check_open()
        return self._engine.get_max_offset_in_queue(topic, queue_id)

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        self._check_open()
        return self._engine.get_min_offset_in_queue(topic, queue_id)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        self._check_open()
        return self._engine.get_offset_in_queue_by_time(topic, queue_id, timestamp_ms)

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        self._check_open()
        return self._engine.get_earliest_message_time(topic, queue_id)

    @property
    def max_physical_offset(self) -> int:
        self._check_open()
        return self._engine.max_physical_offset

    @property
    def min_physical_offset(self) -> int:
        self._check_open()
        return self._engine.min_physical_offset

    def read_commit_log(self, offset: int, size: int) -> bytes | None:
        self._check_open()
        return self._engine.read_commit_log(offset, size)

    # --- replication (rust/rmq-store/src/replica.rs, _reference/replica.py) ---------------------------------------
    def get_commit_log_data(self, offset: int, max_size: int) -> bytes | None:
        """4.9 ``getCommitLogData`` for the HA master: up to ``max_size`` written CommitLog bytes from ``offset``, never
        across a file end; None when nothing is written at ``offset`` (yet, or any more)."""
        self._check_open()
        return self._engine.get_commit_log_data(offset, max_size)

    def append_commit_log(self, offset: int, data: bytes) -> list[tuple[str, int, int]]:
        """4.9 ``appendToCommitLog`` for the HA slave: appends the master's bytes at exactly ``offset`` (the CommitLog's
        end, or a file boundary when empty; ValueError otherwise, CorruptRecordError for bytes that are not records;
        nothing written either way) and dispatches the whole records they complete (ConsumeQueue units, index). The
        arrival listeners then run once per queue that got units (tags code and properties None). Returns
        ``[(topic, queue_id, new max offset)]``."""
        self._check_open()
        out = self._engine.append_commit_log(offset, data)
        if out and self._listeners:
            for topic, queue_id, max_offset in out:
                for fn in list(self._listeners):
                    try:
                        fn(topic, queue_id, max_offset, None, None)
                    except Exception:  # a listener must never undo or block a write
                        log.exception("arrival listener %r failed for %s:%d", fn, topic, queue_id)
        return out

    def look_message_by_offset(self, commitlog_offset: int) -> MessageExt | None:
        """The message stored at ``commitlog_offset``; None past the end; CorruptRecordError if it is not a record."""
        self._check_open()
        raw = self._engine.look_message_by_offset(commitlog_offset)
        if raw is None:
            return None
        return decode_messages(raw)[0]

    def query_message(
        self, topic: str, key: str, max_num: int, begin_timestamp: int, end_timestamp: int
    ) -> list[MessageExt]:
        """The messages of ``topic`` whose UNIQ_KEY or KEYS hold ``key``, stored in ``[begin, end]`` (ms), oldest first;
        at most ``min(max_num, max_msgs_num_batch)`` (RocketMQ's ``queryMessage`` over the index files)."""
        return decode_messages(self.query_message_result(topic, key, max_num, begin_timestamp, end_timestamp).records)

    def query_message_result(
        self, topic: str, key: str, max_num: int, begin_timestamp: int, end_timestamp: int
    ) -> QueryMessageResult:
        """``query_message`` as the broker needs it: the records byte for byte and the index's last update."""
        self._check_open()
        records, count, ts, phy = self._engine.query_message(topic, key, max_num, begin_timestamp, end_timestamp)
        return QueryMessageResult(records, count, ts, phy)

    def topics(self) -> list[tuple[str, int]]:
        """Every (topic, queue_id) that has a ConsumeQueue."""
        self._check_open()
        return self._engine.topics()

    # --- maintenance -----------------------------------------------------------------------------------------
    def delete_commit_log_files_before(self, offset: int) -> int:
        self._check_open()
        return self._engine.delete_commit_log_files_before(offset)

    def correct_min_offsets(self) -> None:
        """Every ConsumeQueue's min offset to its first unit at or above the CommitLog's min offset, its files wholly
        below deleted, and the index files wholly below (4.9 CleanConsumeQueueService's work)."""
        self._check_open()
        self._engine.correct_min_offsets()

    def execute_delete_files_manually(self) -> None:
        """4.9 ``executeDeleteFilesManually`` (DELETE_EXPIRED_COMMITLOG): the next clean passes delete expired
        CommitLog files whatever the hour (``store_clean_service.py``)."""
        self._check_open()
        self.clean_service.clean_commit_log_service.execute_delete_files_manually()


__all__ = [
    "CQ_STORE_UNIT_SIZE",
    "DEFAULT_MAX_HASH_SLOT_NUM",
    "DEFAULT_MAX_INDEX_NUM",
    "MAX_MSGS_NUM_BATCH",
    "PROPERTY_TAGS",
    "UNIQ_KEY",
    "ArrivalListener",
    "ExpressionType",
    "FlushDiskType",
    "GetMessageResult",
    "GetMessageStatus",
    "GiB",
    "Message",
    "MessageExt",
    "MessageSelector",
    "MessageStore",
    "PropertyFilter",
    "PutMessageResult",
    "PutMessageResults",
    "PutMessageStatus",
    "QueryMessageResult",
    "Sql92Filter",
    "StoreConfig",
    "StoreError",
    "build_subscription_data",
    "create_offset_msg_id",
    "create_uniq_id",
    "decode_messages",
    "tags_hash",
]
