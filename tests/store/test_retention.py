"""Retention (store_clean_service.py, 4.9 CleanCommitLogService / CleanConsumeQueueService / isSpaceFull) on a real
store of each engine: which CommitLog files a pass deletes (the deleteWhen hour, the file age from the files' real
mtimes set with os.utime, disk pressure, forcible cleaning, the batch limit, never the last file, never a file in the
middle), the ConsumeQueue and index clean-up after it and what a pull below the new min offset gets, and the
DISK_FULL flag refusing every put (nothing stored) until the disk is back under the warning level.

The wall clock and the disk usage are the service's injectable ``clock`` / ``disk_usage``; one test runs on the real
clock and the real disk."""

from __future__ import annotations

import os
import time

import pytest

from rmq_core.message import Message
from rmq_core.store import GetMessageStatus, PutMessageStatus, StoreConfig
from rmq_core.store_clean_service import HOUR_MS, MAX_MANUAL_DELETE_FILE_TIMES, StoreCleanService, is_it_time_to_do

from support.helpers import CL_SIZE, cl_dir, cq_dir, small_config, wait_until

T = "Retention"
RECORD_BODY = 500  # ~650-byte records: ~100 per 64 KiB CommitLog file, 100 units per ConsumeQueue file
N = 400  # 4 CommitLog files (the last one partly written), 4 ConsumeQueue files


def local_ms(hour: int, minute: int = 30) -> int:
    """A wall-clock time (ms) whose local hour is ``hour`` (what 4.9's Calendar.getInstance() reads)."""
    return int(time.mktime((2026, 1, 10, hour, minute, 0, 0, 0, -1)) * 1000)


def config(**kw: object) -> StoreConfig:
    kw.setdefault("delete_commit_log_files_interval", 0)
    kw.setdefault("max_hash_slot_num", 100)
    kw.setdefault("max_index_num", 50)  # ~49 entries per index file: several files
    return small_config(**kw)


def fill(store, n: int = N) -> list:
    rs = store.put_messages([(Message(T, bytes([65 + i % 26]) * RECORD_BODY), 0) for i in range(n)])
    assert rs.all_ok
    store.flush()
    return list(rs)


def files(path: str) -> list[int]:
    return sorted(int(n) for n in os.listdir(path) if n.isdigit())


def age_files(store, now_ms: int, hours: dict[int, float] | float) -> None:
    """Sets the CommitLog files' real mtimes: ``hours`` old at ``now_ms`` (per file index, or all alike)."""
    starts = files(cl_dir(store.root_dir))
    for i, start in enumerate(starts):
        h = hours if isinstance(hours, (int, float)) else hours.get(i)
        if h is None:
            continue
        t = (now_ms - int(h * HOUR_MS)) / 1000.0
        os.utime(os.path.join(cl_dir(store.root_dir), f"{start:020d}"), (t, t))


class Disk:
    """An injected disk usage: ``ratio`` for every path (a fraction, as UtilAll.getDiskPartitionSpaceUsedPercent)."""

    def __init__(self, ratio: float) -> None:
        self.ratio = ratio
        self.paths: list[str] = []

    def __call__(self, path: str) -> float:
        self.paths.append(path)
        return self.ratio


def service(store, now_ms: int, disk: Disk) -> StoreCleanService:
    store.clean_service = StoreCleanService(store, clock=lambda: now_ms, disk_usage=disk)
    return store.clean_service


def test_is_it_time_to_do_reads_the_local_hour():
    assert is_it_time_to_do("04", local_ms(4, 0))
    assert is_it_time_to_do("04", local_ms(4, 59))
    assert not is_it_time_to_do("04", local_ms(5, 0))
    assert not is_it_time_to_do("04", local_ms(3, 59))
    assert is_it_time_to_do("04;16", local_ms(16))
    assert not is_it_time_to_do("04;16", local_ms(15))


def test_bad_delete_when_is_refused_at_config():
    with pytest.raises(ValueError, match="delete_when"):
        StoreConfig(delete_when="4am")
    with pytest.raises(ValueError, match="delete_file_batch_max"):
        StoreConfig(delete_file_batch_max=0)


def test_expired_files_go_at_delete_when_only_and_queues_follow(backend):
    store = backend.open(config=config())
    rs = fill(store)
    cl = cl_dir(store.root_dir)
    assert files(cl) == [0, CL_SIZE, 2 * CL_SIZE, 3 * CL_SIZE]
    index_before = len(os.listdir(os.path.join(store.root_dir, "index")))
    assert index_before > 3
    disk = Disk(0.30)
    at_3 = local_ms(3)
    age_files(store, at_3, 73)
    svc = service(store, at_3, disk)
    assert svc.clean_files_periodically() == 0  # 03:30: not a deleteWhen hour, the disk is fine
    assert files(cl) == [0, CL_SIZE, 2 * CL_SIZE, 3 * CL_SIZE]
    assert svc.clean_commit_log_service.clean_immediately is False
    assert not store.running_flags.is_disk_full()

    at_4 = local_ms(4)
    age_files(store, at_4, 73)
    svc = service(store, at_4, disk)
    assert svc.clean_files_periodically() == 3  # never the last file
    assert files(cl) == [3 * CL_SIZE]
    assert store.min_physical_offset == 3 * CL_SIZE
    # CleanConsumeQueueService: min offset = first unit in the remaining CommitLog; the files wholly below go
    first_kept = next(i for i, r in enumerate(rs) if r.commitlog_offset >= 3 * CL_SIZE)
    assert store.get_min_offset_in_queue(T, 0) == first_kept
    assert store.get_max_offset_in_queue(T, 0) == N
    cq_files = files(cq_dir(store.root_dir, T, 0))
    assert cq_files and cq_files[0] == (first_kept // 100) * 2000
    assert len(os.listdir(os.path.join(store.root_dir, "index"))) < index_before
    # a consumer below the new min: OFFSET_TOO_SMALL, next begin offset = the min offset (4.9 getMessage)
    g = store.get_message("g", T, 0, 5, 32)
    assert g.status == GetMessageStatus.OFFSET_TOO_SMALL
    assert (g.next_begin_offset, g.min_offset, g.max_offset) == (first_kept, first_kept, N)
    g = store.get_message("g", T, 0, first_kept, 32)
    assert g.status == GetMessageStatus.FOUND
    assert g.decode()[0].commitlog_offset == rs[first_kept].commitlog_offset
    # what is left survives a reopen
    store.close()
    store = backend.open(config=config())
    assert store.min_physical_offset == 3 * CL_SIZE
    assert store.get_min_offset_in_queue(T, 0) == first_kept
    assert store.put_message(Message(T, b"after"), 0).queue_offset == N


def test_young_file_stops_the_pass(backend):
    """4.9 deletes in order and stops at the first file younger than fileReservedTime (never one in the middle)."""
    store = backend.open(config=config())
    fill(store)
    now = local_ms(4)
    age_files(store, now, {0: 100, 1: 71.9, 2: 100, 3: 100})
    assert service(store, now, Disk(0.30)).clean_files_periodically() == 1
    assert files(cl_dir(store.root_dir)) == [CL_SIZE, 2 * CL_SIZE, 3 * CL_SIZE]
    age_files(store, now, {0: 72})  # exactly fileReservedTime: expired (now >= lastModified + reserved)
    assert service(store, now, Disk(0.30)).clean_files_periodically() == 2
    assert files(cl_dir(store.root_dir)) == [3 * CL_SIZE]


def test_disk_pressure_deletes_expired_files_at_any_hour(backend):
    store = backend.open(config=config())
    fill(store)
    now = local_ms(13)
    age_files(store, now, {0: 80, 1: 80, 2: 1})
    disk = Disk(0.75)  # not above diskMaxUsedSpaceRatio
    assert service(store, now, disk).clean_files_periodically() == 0
    disk.ratio = 0.76
    svc = service(store, now, disk)
    assert svc.clean_files_periodically() == 2  # the young third file stays: no forcible cleaning below 85 %
    assert svc.clean_commit_log_service.clean_immediately is False
    assert files(cl_dir(store.root_dir)) == [2 * CL_SIZE, 3 * CL_SIZE]
    assert os.path.join(store.root_dir, "commitlog") in disk.paths
    assert not store.running_flags.is_disk_full()


def test_forcible_cleaning_ignores_age_in_batches(backend):
    store = backend.open(config=config(delete_file_batch_max=2))
    fill(store)
    now = local_ms(13)
    age_files(store, now, 0)  # every file just written
    svc = service(store, now, Disk(0.86))
    assert svc.clean_files_periodically() == 2  # deleteFileBatchMax per pass
    assert svc.clean_commit_log_service.clean_immediately is True
    assert not store.running_flags.is_disk_full()  # 86 % is under the warning level
    assert svc.clean_files_periodically() == 1  # never the last file
    assert svc.clean_files_periodically() == 0
    assert files(cl_dir(store.root_dir)) == [3 * CL_SIZE]


def test_forcible_cleaning_can_be_disabled(backend):
    store = backend.open(config=config(clean_file_forcibly_enable=False))
    fill(store)
    now = local_ms(13)
    age_files(store, now, {0: 80, 1: 0, 2: 0})
    assert service(store, now, Disk(0.95)).clean_files_periodically() == 1  # only the expired one
    assert files(cl_dir(store.root_dir)) == [CL_SIZE, 2 * CL_SIZE, 3 * CL_SIZE]


def test_the_last_file_is_never_deleted(backend):
    store = backend.open(config=config())
    store.put_message(Message(T, b"only"), 0)
    store.flush()
    now = local_ms(4)
    age_files(store, now, 1000)
    svc = service(store, now, Disk(0.99))
    svc.clean_commit_log_service.execute_delete_files_manually()
    assert svc.clean_files_periodically() == 0
    assert files(cl_dir(store.root_dir)) == [0]
    assert store.get_message("g", T, 0, 0, 32).status == GetMessageStatus.FOUND


def test_disk_full_refuses_every_put_and_stores_nothing_until_the_disk_is_ok(backend):
    store = backend.open(config=config())
    first = store.put_message(Message(T, b"before"), 0)
    assert first.status == PutMessageStatus.PUT_OK
    max_phys = store.max_physical_offset
    disk = Disk(0.91)
    svc = service(store, local_ms(13), disk)
    assert svc.clean_commit_log_service.is_space_full() is True
    assert store.running_flags.is_disk_full() and not store.running_flags.is_writeable()
    r = store.put_message(Message(T, b"refused"), 0)
    assert (r.status, r.commitlog_offset, r.queue_offset, r.wrote_bytes, r.msg_id) == (
        PutMessageStatus.SERVICE_NOT_AVAILABLE,
        -1,
        -1,
        0,
        None,
    )
    rs = store.put_messages([(Message(T, b"a"), 0), (Message(T, b"b"), 1)])
    assert rs.statuses == [PutMessageStatus.SERVICE_NOT_AVAILABLE] * 2
    assert [x.commitlog_offset for x in rs] == [-1, -1]
    assert store.max_physical_offset == max_phys
    assert store.get_max_offset_in_queue(T, 0) == 1
    assert store.get_max_offset_in_queue(T, 1) == 0
    # reads go on
    assert store.get_message("g", T, 0, 0, 32).message_count == 1
    # between the forcible ratio and the warning level the clean pass keeps the flag (4.9 isSpaceToDelete) …
    disk.ratio = 0.88
    svc.clean_commit_log_service.is_space_to_delete()
    assert store.running_flags.is_disk_full()
    assert svc.clean_commit_log_service.clean_immediately is True
    # … the 10 s disk check clears it at or under the warning level (4.9 isSpaceFull)
    assert svc.clean_commit_log_service.is_space_full() is False
    assert store.running_flags.is_writeable()
    r = store.put_message(Message(T, b"after"), 0)
    assert (r.status, r.commitlog_offset, r.queue_offset) == (PutMessageStatus.PUT_OK, max_phys, 1)
    # and the clean pass sets and clears it too
    disk.ratio = 0.95
    svc.clean_files_periodically()
    assert store.running_flags.is_disk_full()
    disk.ratio = 0.40
    svc.clean_files_periodically()
    assert store.running_flags.is_writeable()


def test_unreadable_disk_usage_counts_as_full_for_cleaning_not_for_writing(backend):
    """4.9: a usage of -1 (the path is unknown) makes the pass clean expired files at any hour; it never sets
    DISK_FULL."""
    store = backend.open(config=config())
    fill(store)
    now = local_ms(13)
    age_files(store, now, {0: 80, 1: 0})
    assert service(store, now, Disk(-1.0)).clean_files_periodically() == 1
    assert store.running_flags.is_writeable()


def test_manual_deletion_on_the_real_clock_and_real_mtimes(backend):
    """DELETE_EXPIRED_COMMITLOG's executeDeleteFilesManually: the next passes delete expired files whatever the hour
    (not the young ones); real clock, real disk (this machine's disk is under 75 %: the pass would not run
    otherwise unless it is 04:00)."""
    store = backend.open(config=config(delete_when="99"))  # an hour that never comes
    fill(store)
    now = int(time.time() * 1000)
    age_files(store, now, {0: 73, 1: 73, 2: 1})
    svc = store.clean_service
    if svc.clean_commit_log_service.is_space_to_delete():
        pytest.skip("this machine's disk is above diskMaxUsedSpaceRatio: the pass deletes without the trigger")
    assert svc.clean_files_periodically() == 0
    store.execute_delete_files_manually()
    assert svc.clean_files_periodically() == 2
    assert svc.clean_commit_log_service.manual_delete_file_several_times == MAX_MANUAL_DELETE_FILE_TIMES - 1
    assert files(cl_dir(store.root_dir)) == [2 * CL_SIZE, 3 * CL_SIZE]
    assert store.get_min_offset_in_queue(T, 0) > 0


def test_the_scheduled_service_cleans_in_the_background(backend):
    store = backend.open(config=config(clean_resource_interval=50))
    fill(store)
    now = local_ms(4)
    age_files(store, now, 80)
    svc = service(store, now, Disk(0.30))
    svc.start(clean_first_delay_s=0.0)
    wait_until(lambda: files(cl_dir(store.root_dir)) == [3 * CL_SIZE], "the scheduled clean pass")
    wait_until(lambda: store.get_min_offset_in_queue(T, 0) > 0, "the queues corrected")
    store.close()  # stops the thread
    assert svc._thread is not None and not svc._thread.is_alive()


def test_a_file_created_ahead_of_the_end_does_not_make_the_last_file_deletable(backend):
    """A CommitLog file past the store's end (created ahead, as a warm-up would) is not the store's last file: the
    file holding the end is, and it stays."""
    store = backend.open(config=config())
    fill(store)
    ahead = os.path.join(cl_dir(store.root_dir), f"{4 * CL_SIZE:020d}")
    with open(ahead, "wb") as f:
        f.truncate(CL_SIZE)
    now = local_ms(13)
    age_files(store, now, 0)
    svc = service(store, now, Disk(0.99))
    assert svc.clean_files_periodically() == 3
    assert files(cl_dir(store.root_dir)) == [3 * CL_SIZE, 4 * CL_SIZE]
    assert store.min_physical_offset == 3 * CL_SIZE
    assert svc.clean_files_periodically() == 0
    assert store.get_message("g", T, 0, N - 1, 1).status == GetMessageStatus.FOUND
