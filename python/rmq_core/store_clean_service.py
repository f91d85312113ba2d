"""The store's retention: when CommitLog files are deleted, when the store refuses puts for a full disk, and the
ConsumeQueue / index clean-up that follows (4.9 ``DefaultMessageStore``'s CleanCommitLogService,
CleanConsumeQueueService, the disk check ``isSpaceFull`` and the scheduled task ``cleanFilesPeriodically``).

Owns the policy (``CleanCommitLogService``: which expired files go and when; the disk check and its DISK_FULL flag;
``CleanConsumeQueueService``; the ``StoreCleanService`` scheduler thread); the mechanisms are the engine's
(``delete_commit_log_files_before``, ``correct_min_offsets``), so both engines give the same results.
Invariants: only the oldest files go, in order (never one in the middle, never the last); above
``disk_space_warning_level_ratio`` every put is refused and nothing is stored. ``clock`` and ``disk_usage`` are
attributes a test may replace.
Thread-safety: a pass runs on the scheduler thread or the caller's; the engine serialises the deletion with puts.
``execute_delete_files_manually`` may be called from any thread.
Details (every rule and key): docs/CORE_API.md, '10. Retention'.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from rmq_core.common.clock import now_ms
from rmq_core.common.disk_usage import disk_partition_space_used_percent
from rmq_core.format import COMMITLOG_DIR, CONSUMEQUEUE_DIR
from rmq_core.format.file_name import parse_file_name
from rmq_core.format.index import INDEX_DIR

if TYPE_CHECKING:
    from rmq_core.store_running_flags import RunningFlags

log = logging.getLogger(__name__)


class RetentionConfig(Protocol):
    """The retention settings of ``rmq_core.store.StoreConfig`` (MessageStoreConfig's names) these services read."""

    @property
    def delete_when(self) -> str: ...
    @property
    def file_reserved_time(self) -> int: ...
    @property
    def disk_max_used_space_ratio(self) -> int: ...
    @property
    def disk_space_warning_level_ratio(self) -> int: ...
    @property
    def disk_space_clean_forcibly_ratio(self) -> int: ...
    @property
    def clean_file_forcibly_enable(self) -> bool: ...
    @property
    def delete_commit_log_files_interval(self) -> int: ...
    @property
    def delete_file_batch_max(self) -> int: ...
    @property
    def clean_resource_interval(self) -> int: ...


class CleanedStore(Protocol):
    """What retention needs of ``rmq_core.store.MessageStore``: a Protocol, so that the store imports its services and
    not the other way round."""

    @property
    def root_dir(self) -> str: ...
    @property
    def config(self) -> RetentionConfig: ...
    @property
    def running_flags(self) -> RunningFlags: ...
    @property
    def min_physical_offset(self) -> int: ...
    @property
    def max_physical_offset(self) -> int: ...
    def delete_commit_log_files_before(self, offset: int) -> int: ...
    def correct_min_offsets(self) -> None: ...


MAX_MANUAL_DELETE_FILE_TIMES = 20
CLEAN_FIRST_DELAY_S = 60.0  # 4.9 addScheduleTask: cleanFilesPeriodically from one minute after start
DISK_CHECK_FIRST_DELAY_S = 1.0
DISK_CHECK_INTERVAL_S = 10.0
HOUR_MS = 60 * 60 * 1000

DiskUsage = Callable[[str], float]


def parse_delete_when(when: str) -> list[int]:
    """``deleteWhen``'s hours (``"04"``, ``"04;16"``); ValueError naming the bad part (4.9 fails at each pass)."""
    hours = []
    for part in when.split(";"):
        try:
            hour = int(part)
        except ValueError:
            raise ValueError(f"delete_when must be hours separated by ';' (e.g. '04;16'), got {when!r}") from None
        hours.append(hour)
    return hours


def is_it_time_to_do(when: str, now: int) -> bool:
    """4.9 ``UtilAll.isItTimeToDo``: the local hour of ``now`` (ms) is one of ``when``'s hours."""
    return time.localtime(now / 1000.0).tm_hour in parse_delete_when(when)


class CleanCommitLogService:
    """``CleanCommitLogService(store, clock=now_ms, disk_usage=disk_partition_space_used_percent, stop=None)``;
    ``stop``: set when the store closes (a pass waiting between two deletions returns), its own Event by default."""

    def __init__(
        self,
        store: CleanedStore,
        *,
        clock: Callable[[], int] = now_ms,
        disk_usage: DiskUsage = disk_partition_space_used_percent,
        stop: threading.Event | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.disk_usage = disk_usage
        self.manual_delete_file_several_times = 0
        self.clean_immediately = False
        self._stop = stop if stop is not None else threading.Event()

    # --- paths and ratios --------------------------------------------------------------------------------------
    @property
    def store_path_physic(self) -> str:
        return os.path.join(self.store.root_dir, COMMITLOG_DIR)

    @property
    def store_path_logic(self) -> str:
        return os.path.join(self.store.root_dir, CONSUMEQUEUE_DIR)

    @property
    def store_path_index(self) -> str:
        return os.path.join(self.store.root_dir, INDEX_DIR)

    def _ratios(self) -> tuple[float, float, float]:
        """(disk_max_used_space_ratio, disk_space_warning_level_ratio, disk_space_clean_forcibly_ratio) as fractions."""
        cfg = self.store.config
        max_used = min(max(cfg.disk_max_used_space_ratio, 10), 95)  # 4.9 getDiskMaxUsedSpaceRatio
        return max_used / 100.0, cfg.disk_space_warning_level_ratio / 100.0, cfg.disk_space_clean_forcibly_ratio / 100.0

    def disk_util(self) -> str:
        """The send path's remark figures (4.9 ``SendMessageProcessor#diskUtil``): ``CL:  0.91 CQ:  0.91 INDEX: -1.00``."""
        cl = self.disk_usage(self.store_path_physic)
        cq = self.disk_usage(self.store_path_logic)
        index = self.disk_usage(self.store_path_index)
        return f"CL: {cl:5.2f} CQ: {cq:5.2f} INDEX: {index:5.2f}"

    # --- the decisions -----------------------------------------------------------------------------------------
    def execute_delete_files_manually(self) -> None:
        """4.9 ``executeDeleteFilesManually`` (mqadmin deleteExpiredCommitLog): the next 20 passes delete expired
        files whatever the hour."""
        self.manual_delete_file_several_times = MAX_MANUAL_DELETE_FILE_TIMES
        log.info("executeDeleteFilesManually was invoked")

    def is_time_to_delete(self) -> bool:
        when = self.store.config.delete_when
        if is_it_time_to_do(when, self.clock()):
            log.info("it's time to reclaim disk space, %s", when)
            return True
        return False

    def _check_path(self, ratio: float, what: str) -> None:
        """One path's part of 4.9 ``isSpaceToDelete``: DISK_FULL above the warning level (and clean at once), clean
        at once above the forcible ratio, the disk OK otherwise."""
        _max_used, warning, forcibly = self._ratios()
        flags = self.store.running_flags
        if ratio > warning:
            if flags.get_and_make_disk_full():
                log.error("%s disk maybe full soon %s, so mark disk full", what, ratio)
            self.clean_immediately = True
        elif ratio > forcibly:
            self.clean_immediately = True
        elif not flags.get_and_make_disk_ok():
            log.info("%s disk space OK %s, so mark disk ok", what, ratio)

    def is_space_to_delete(self) -> bool:
        """4.9 ``isSpaceToDelete``: sets DISK_FULL / ``clean_immediately`` from the CommitLog's then the ConsumeQueues'
        disk; True when one is used above ``disk_max_used_space_ratio`` (or cannot be read)."""
        max_used, _warning, _forcibly = self._ratios()
        self.clean_immediately = False
        physic = self.disk_usage(self.store_path_physic)
        self._check_path(physic, "physic")
        if physic < 0 or physic > max_used:
            log.info("physic disk maybe full soon, so reclaim space, %s", physic)
            return True
        logics = self.disk_usage(self.store_path_logic)
        self._check_path(logics, "logics")
        if logics < 0 or logics > max_used:
            log.info("logics disk maybe full soon, so reclaim space, %s", logics)
            return True
        return False

    def is_space_full(self) -> bool:
        """4.9 ``isSpaceFull`` (the 10 s disk check): DISK_FULL set above the warning level, cleared otherwise; True
        when set."""
        max_used, warning, _forcibly = self._ratios()
        physic = self.disk_usage(self.store_path_physic)
        flags = self.store.running_flags
        if physic > max_used:
            log.info("physic disk of commitLog used: %s", physic)
        if physic > warning:
            if flags.get_and_make_disk_full():
                log.error("physic disk of commitLog maybe full soon, used %s, so mark disk full", physic)
            return True
        if not flags.get_and_make_disk_ok():
            log.info("physic disk space of commitLog OK %s, so mark disk ok", physic)
        return False

    # --- the pass ----------------------------------------------------------------------------------------------
    def run(self) -> int:
        """One pass (4.9 ``deleteExpiredFiles``); returns how many CommitLog files it deleted."""
        cfg = self.store.config
        timeup = self.is_time_to_delete()
        spacefull = self.is_space_to_delete()
        manual = self.manual_delete_file_several_times > 0
        if not (timeup or spacefull or manual):
            return 0
        if manual:
            self.manual_delete_file_several_times -= 1
        clean_at_once = cfg.clean_file_forcibly_enable and self.clean_immediately
        log.info(
            "begin to delete before %d hours file. timeup: %s spacefull: %s manualDeleteFileSeveralTimes: %d "
            "cleanAtOnce: %s",
            cfg.file_reserved_time,
            timeup,
            spacefull,
            self.manual_delete_file_several_times,
            clean_at_once,
        )
        deleted = self.delete_expired_files(
            cfg.file_reserved_time * HOUR_MS, cfg.delete_commit_log_files_interval, clean_at_once
        )
        if deleted == 0 and spacefull:
            log.warning("disk space will be full soon, but delete file failed.")
        return deleted

    def commit_log_files(self) -> list[tuple[int, int]]:
        """``(start offset, last modification ms)`` of the store's CommitLog files, oldest first."""
        out = []
        min_offset = self.store.min_physical_offset
        with os.scandir(self.store_path_physic) as it:
            for entry in it:
                start = parse_file_name(entry.name)
                if start is None or start < min_offset or not entry.is_file():
                    continue
                out.append((start, entry.stat().st_mtime_ns // 1_000_000))
        out.sort()
        return out

    def delete_expired_files(self, expired_ms: int, interval_ms: int, clean_immediately: bool) -> int:
        """4.9 ``MappedFileQueue#deleteExpiredFileByTime``: the oldest files (never the last) last modified
        ``expired_ms`` ago or more — or any, ``clean_immediately`` — one by one, stopping at the first kept one."""
        files = self.commit_log_files()
        # never the last file: the one holding the store's end (a file past it, created ahead, is not the store's yet)
        end = self.store.max_physical_offset
        candidates = sum(1 for start, _modified in files if start <= end) - 1
        batch_max = self.store.config.delete_file_batch_max
        now = self.clock()
        deleted = 0
        for i in range(candidates):
            _start, modified = files[i]
            if not (now >= modified + expired_ms or clean_immediately):
                break  # never a file in the middle
            end = files[i + 1][0]
            if self.store.delete_commit_log_files_before(end) == 0:
                break
            deleted += 1
            log.info("deleted CommitLog file starting at %d (last modified %d)", files[i][0], modified)
            if deleted >= batch_max:
                break
            if interval_ms > 0 and i + 1 < candidates and self._stop.wait(interval_ms / 1000.0):
                break  # the store is closing
        return deleted


class CleanConsumeQueueService:
    """``CleanConsumeQueueService(store)``: after CommitLog files went, the queues' min offsets and files follow."""

    def __init__(self, store: CleanedStore) -> None:
        self.store = store
        self.last_physical_min_offset = 0

    def run(self) -> bool:
        """One pass (4.9 ``deleteExpiredFiles``); True when the CommitLog's min offset moved and queues were
        corrected."""
        min_offset = self.store.min_physical_offset
        if min_offset <= self.last_physical_min_offset:
            return False
        self.last_physical_min_offset = min_offset
        self.store.correct_min_offsets()
        return True


class StoreCleanService:
    """``StoreCleanService(store, clock=..., disk_usage=...)``: both services and their schedule (``start()``)."""

    def __init__(
        self,
        store: CleanedStore,
        *,
        clock: Callable[[], int] = now_ms,
        disk_usage: DiskUsage = disk_partition_space_used_percent,
    ) -> None:
        self._stop = threading.Event()  # shutdown: ends the schedule and a pass waiting between two deletions
        self.clean_commit_log_service = CleanCommitLogService(
            store, clock=clock, disk_usage=disk_usage, stop=self._stop
        )
        self.clean_consume_queue_service = CleanConsumeQueueService(store)
        self._thread: threading.Thread | None = None

    def clean_files_periodically(self) -> int:
        """One clean pass (4.9 ``cleanFilesPeriodically``): CommitLog files, then the queues; the files deleted."""
        deleted = self.clean_commit_log_service.run()
        self.clean_consume_queue_service.run()
        return deleted

    def start(self, clean_first_delay_s: float = CLEAN_FIRST_DELAY_S) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._loop, args=(clean_first_delay_s,), name="rmq-store-clean", daemon=True
        )
        self._thread.start()

    def _loop(self, clean_first_delay_s: float) -> None:
        store = self.clean_commit_log_service.store
        began = time.monotonic()
        next_clean = began + clean_first_delay_s
        next_check = began + DISK_CHECK_FIRST_DELAY_S
        while True:
            wait = max(0.0, min(next_clean, next_check) - time.monotonic())
            if self._stop.wait(wait):
                return
            now = time.monotonic()
            try:
                if now >= next_check:
                    next_check = now + DISK_CHECK_INTERVAL_S
                    self.clean_commit_log_service.is_space_full()
                if now >= next_clean:
                    next_clean = now + store.config.clean_resource_interval / 1000.0
                    self.clean_files_periodically()
            except Exception:  # logged, as 4.9's services do; the next pass tries again
                if self._stop.is_set():
                    return
                log.exception("store clean service of %s failed", store.root_dir)

    def shutdown(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(10)
