"""``LightFuture``: a ``concurrent.futures.Future`` whose condition costs one object instead of about eight.

Owns ``_FutureCondition`` (an RLock with the parts of ``threading.Condition`` a Future uses, with its semantics) and
``settle`` (``set_running_or_notify_cancel()`` then ``set_result`` / ``set_exception`` in one pass under the lock).
Invariants: a ``LightFuture`` is a ``concurrent.futures.Future`` (isinstance, every public method, ``wait`` and
``as_completed``); no ``threading.Condition`` is built; the list of waiting threads exists only while one waits; a
finished future's state never changes again and its outcome is set before its state says FINISHED, so ``result()``
and ``exception()`` read a FINISHED one without the lock (the GIL orders the writes).
Thread-safety: as ``concurrent.futures.Future``: any thread.
Details: docs/CLIENT_DESIGN.md, 'LightFuture'.
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


class _FutureCondition(_thread.RLock):  # type: ignore[misc]  # (typeshed marks RLock final; CPython allows it)
    """threading.Condition over its own RLock — it *is* the RLock, so that ``with``, ``acquire`` and ``release`` are
    the lock's own C methods, not Python frames around them — reduced to what a Future needs (the caller holds the
    lock around ``wait`` and ``notify_all``, as Future's methods always do)."""

    _waiters: list[Any] | None = None  # the locks of the threads in wait(), while there are any (set on the instance)

    def wait(self, timeout: float | None = None) -> bool:
        waiter = _thread.allocate_lock()
        waiter.acquire()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(waiter)
        saved = self._release_save()  # type: ignore[attr-defined]
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
            self._acquire_restore(saved)  # type: ignore[attr-defined]
            if not got and self._waiters is not None:
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass

    def notify_all(self) -> None:
        waiters = self._waiters
        if waiters:  # (no attribute written when nobody waits: most futures are never waited on)
            self._waiters = None
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
        condition: _FutureCondition = self._condition  # type: ignore[assignment]  # (no cast() call per settle)
        with condition:
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
            if condition._waiters:
                condition.notify_all()
        self._invoke_callbacks()  # type: ignore[attr-defined]

    def result(self, timeout: float | None = None) -> T:
        if self._state == _FINISHED and self._exception is None:  # settled for good (module docstring)
            return self._result  # type: ignore[return-value]
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state == _FINISHED:  # settled for good (module docstring)
            return self._exception
        return super().exception(timeout)
