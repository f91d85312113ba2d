"""``LightFuture``: a ``concurrent.futures.Future`` whose condition costs two objects instead of about eight.

``concurrent.futures.Future()`` builds a ``threading.Condition`` (an RLock, a deque of waiters and six bound
methods it keeps as attributes): eleven objects the cyclic GC tracks, for every send a producer hands back as a
future. ``LightFuture`` keeps every method of ``Future`` (it only replaces ``_condition``) over ``_FutureCondition``:
the parts of ``threading.Condition`` a Future and the module's ``wait`` / ``as_completed`` use (``with``,
``acquire``, ``release``, ``wait(timeout)``, ``notify_all``), with threading.Condition's semantics: waiting releases
the RLock whatever its depth and takes it back at that depth; ``notify_all`` wakes every thread waiting then.

Invariants: a ``LightFuture`` is a ``concurrent.futures.Future`` (isinstance, every public method, ``wait`` and
``as_completed``); the list of waiting threads exists only while one waits. It sets the attributes
``Future.__init__`` sets (``_condition``, ``_state``, ``_result``, ``_exception``, ``_waiters``,
``_done_callbacks``: the same in CPython 3.11 to 3.13), so that no ``threading.Condition`` is built to be dropped.
``settle`` is ``set_running_or_notify_cancel()`` followed, unless that returned False, by ``set_result`` /
``set_exception``, in one pass under the lock (a producer's async send settles its future this way, once per send).
Thread-safety: as ``concurrent.futures.Future``: any thread.
"""

from __future__ import annotations

import _thread
import concurrent.futures
from concurrent.futures._base import CANCELLED as _CANCELLED
from concurrent.futures._base import CANCELLED_AND_NOTIFIED as _CANCELLED_AND_NOTIFIED
from concurrent.futures._base import FINISHED as _FINISHED
from concurrent.futures._base import PENDING as _PENDING
from typing import Any, TypeVar

T = TypeVar("T")


class _FutureCondition:
    """threading.Condition over a fresh RLock, reduced to what a Future needs (the caller holds the lock around
    ``wait`` and ``notify_all``, as Future's methods always do)."""

    __slots__ = ("_lock", "_waiters")

    def __init__(self) -> None:
        self._lock = _thread.RLock()
        self._waiters: list[Any] | None = None  # the locks of the threads in wait(), while there are any

    def __enter__(self) -> bool:
        return self._lock.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        self._lock.release()

    def wait(self, timeout: float | None = None) -> bool:
        waiter = _thread.allocate_lock()
        waiter.acquire()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        saved = self._lock._release_save()  # type: ignore[attr-defined]
        got = False
        try:
            if timeout is None:
                waiter.acquire()
                got = True
            elif timeout > 0:
                got = waiter.acquire(True, timeout)
            else:
                got = waiter.acquire(False)
            return got
        finally:
            self._lock._acquire_restore(saved)  # type: ignore[attr-defined]
            if not got and self._waiters is not None:
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass

    def notify_all(self) -> None:
        waiters, self._waiters = self._waiters, None
        if waiters:
            for waiter in waiters:
                waiter.release()


class LightFuture(concurrent.futures.Future[T]):
    """``concurrent.futures.Future`` with the lighter condition (module docstring)."""

    def __init__(self) -> None:  # Future.__init__'s attributes, without building a threading.Condition first
        self._condition = _FutureCondition()  # type: ignore[assignment]
        self._state = _PENDING
        self._result = None
        self._exception = None
        self._waiters: list[Any] = []
        self._done_callbacks: list[Any] = []

    def settle(self, result: T | None = None, exception: BaseException | None = None) -> None:
        """What an executor does when the work is done: ``if set_running_or_notify_cancel(): set_exception(exception)
        if exception is not None else set_result(result)``, with the lock taken once. A cancelled future is only
        marked notified (its waiters told); a future already running or done raises RuntimeError, as
        ``set_running_or_notify_cancel`` does."""
        with self._condition:
            state = self._state
            if state == _CANCELLED:
                self._state = _CANCELLED_AND_NOTIFIED
                for waiter in self._waiters:
                    waiter.add_cancelled(self)
                return
            if state != _PENDING:
                raise RuntimeError("Future in unexpected state")
            if exception is not None:
                self._exception = exception
                self._state = _FINISHED
                for waiter in self._waiters:
                    waiter.add_exception(self)
            else:
                self._result = result
                self._state = _FINISHED
                for waiter in self._waiters:
                    waiter.add_result(self)
            self._condition.notify_all()
        self._invoke_callbacks()  # type: ignore[attr-defined]
