"""Concurrency (CORE_API §8): writers on several threads under SYNC_FLUSH group commit, and readers pulling while a
writer appends. Both backends."""

from __future__ import annotations

import threading

from rmq_core.message import Message
from rmq_core.store import GetMessageStatus, PutMessageStatus

from support.helpers import small_config

THREADS = 4
PER_THREAD = 150


def test_sync_flush_writers_on_threads_get_distinct_contiguous_offsets(backend):
    store = backend.open(config=small_config(flush_disk_type="SYNC_FLUSH"))
    results: dict[int, list] = {}
    errors: list[BaseException] = []

    def writer(q: int) -> None:
        try:
            out = []
            for i in range(PER_THREAD):
                out.append(store.put_message(Message("Conc", b"q%d-%d" % (q, i), tags=f"T{q}"), q))
            results[q] = out
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(q,)) for q in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    offsets = set()
    for out in results.values():
        assert [r.status for r in out] == [PutMessageStatus.PUT_OK] * PER_THREAD
        assert [r.queue_offset for r in out] == list(range(PER_THREAD))
        offsets.update(r.commitlog_offset for r in out)
    assert len(offsets) == THREADS * PER_THREAD
    for q in range(THREADS):
        got = []
        offset = 0
        while True:
            r = store.get_message("g", "Conc", q, offset, 32)
            if r.status != GetMessageStatus.FOUND:
                break
            got += [m.body for m in r.decode()]
            offset = r.next_begin_offset
        assert got == [b"q%d-%d" % (q, i) for i in range(PER_THREAD)]


def test_reader_pulls_while_writer_appends(backend):
    store = backend.open()
    total = 1500
    done = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(0, total, 50):
                batch = [(Message("Live", b"m%06d" % j, tags="A" if j % 3 else "B"), 0) for j in range(i, i + 50)]
                assert store.put_messages(batch).all_ok
        except BaseException as e:
            errors.append(e)
        finally:
            done.set()

    t = threading.Thread(target=writer)
    t.start()
    seen: list[int] = []
    offset = 0
    while True:
        r = store.get_message("g", "Live", 0, offset, 32, "A")
        if r.status == GetMessageStatus.FOUND:
            for m in r.decode():
                assert m.tags == "A" and m.body == b"m%06d" % m.queue_offset
                seen.append(m.queue_offset)
        if r.next_begin_offset > offset:
            offset = r.next_begin_offset
        elif done.is_set() and offset >= store.get_max_offset_in_queue("Live", 0):
            break
    t.join(30)
    assert not errors
    assert seen == [j for j in range(total) if j % 3]
