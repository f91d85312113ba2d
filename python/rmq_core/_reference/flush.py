"""The background flush thread: RocketMQ's ``FlushRealTimeService`` (ASYNC_FLUSH), ``GroupCommitService``
(SYNC_FLUSH) and the periodic ConsumeQueue/checkpoint flush, in one daemon thread.

Owns: the thread and the condition variable writers wait on. Format: none on disk (it calls back into the engine).
Invariants: 1. every ``flush_interval_commit_log`` ms ``flush_all`` runs, whatever the mode; 2. ASYNC_FLUSH with
``flush_commit_log_timed``: puts do not wake the thread (invariant 1 flushes), without it a put wakes it;
3. SYNC_FLUSH: one msync for every writer waiting, a writer satisfied iff the flushed offset covers it;
4. ``stop`` flushes the CommitLog once more, then joins; 5. the engine is held only weakly.
Thread-safety: the condition guards ``_flushed``/``_requested``/``_woken``/``_stopping``; the callbacks take the
engine lock themselves and are never called with the condition held.
Details (each invariant in full): docs/CORE_API.md, 'Flush thread'.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable

from rmq_core.format import FLUSH_LEAST_PAGES, OS_PAGE_SIZE


class FlushService:
    def __init__(
        self,
        flush_commit_log: Callable[[], int | None],
        dirty_commit_log_bytes: Callable[[], int],
        flush_all: Callable[[], int | None],
        interval_ms: int,
    ) -> None:
        # weak: an engine dropped without close() can be collected (its __del__ stops this thread)
        self._flush_commit_log = weakref.WeakMethod(flush_commit_log)
        self._dirty_commit_log_bytes = weakref.WeakMethod(dirty_commit_log_bytes)
        self._flush_all = weakref.WeakMethod(flush_all)
        self._interval = interval_ms / 1000.0
        self._cond = threading.Condition()
        self._flushed = -1
        self._requested = -1
        self._failed = -1  # highest request answered by a failed msync
        self._woken = False
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="rmq-store-flush", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def wake(self) -> None:
        """ASYNC_FLUSH wake-up (never blocks on a flush)."""
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    def sync(self, upto: int, timeout_ms: int) -> bool:
        """SYNC_FLUSH: wait until a flush covers ``upto``; False on timeout or flush failure."""
        deadline = time.monotonic() + timeout_ms / 1000.0
        with self._cond:
            if upto > self._requested:
                self._requested = upto
            self._cond.notify_all()
            while self._flushed < upto:
                if self._failed >= upto:
                    return False
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._thread.is_alive():
                    return False
                self._cond.wait(remaining)
            return True

    def _publish(self, flushed: int | None, answering: int = -1) -> None:
        with self._cond:
            if flushed is None:
                self._failed = max(self._failed, answering)
            elif flushed > self._flushed:
                self._flushed = flushed
            self._cond.notify_all()

    @staticmethod
    def _call(ref: weakref.WeakMethod, default=None):
        fn = ref()
        return default if fn is None else fn()

    def _run(self) -> None:
        next_tick = time.monotonic() + self._interval
        while True:
            with self._cond:
                while not (self._stopping or self._woken or self._requested > max(self._flushed, self._failed)):
                    remaining = next_tick - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                stopping = self._stopping
                woken = self._woken
                self._woken = False
                requested = self._requested
                sync_pending = requested > max(self._flushed, self._failed)
            if stopping:
                self._publish(self._call(self._flush_commit_log), requested)
                return
            if sync_pending:
                self._publish(self._call(self._flush_commit_log), requested)  # one msync for every writer waiting now
            elif woken:
                if self._call(self._dirty_commit_log_bytes, 0) >= FLUSH_LEAST_PAGES * OS_PAGE_SIZE:
                    self._publish(self._call(self._flush_commit_log))
            if time.monotonic() >= next_tick:
                self._publish(self._call(self._flush_all))
                next_tick = time.monotonic() + self._interval
