"""``LightFuture`` behaves as ``concurrent.futures.Future`` (the same scenario run on both): results, exceptions,
cancellation, callbacks before and after completion, waits with and without timeouts from several threads at once,
and the module's ``wait`` / ``as_completed`` over a mix of both kinds."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Any

import pytest

from rmq_core.common.light_future import LightFuture

KINDS = [concurrent.futures.Future, LightFuture]


@pytest.mark.parametrize("kind", KINDS, ids=["Future", "LightFuture"])
def test_result_exception_cancel_and_callbacks(kind: type[concurrent.futures.Future[Any]]) -> None:
    f = kind()
    assert isinstance(f, concurrent.futures.Future)
    seen: list[Any] = []
    f.add_done_callback(lambda x: seen.append(("before", x.result())))
    assert not f.done() and not f.running() and not f.cancelled()
    with pytest.raises(concurrent.futures.TimeoutError):
        f.result(0)
    with pytest.raises(concurrent.futures.TimeoutError):
        f.result(0.05)
    assert f.set_running_or_notify_cancel() and f.running()
    assert not f.cancel()
    f.set_result(42)
    assert f.result() == 42 and f.exception() is None and f.done()
    f.add_done_callback(lambda x: seen.append(("after", x.result())))
    assert seen == [("before", 42), ("after", 42)]
    with pytest.raises(concurrent.futures.InvalidStateError):
        f.set_result(1)
    assert "finished returned int" in repr(f)

    e = kind()
    e.set_exception(ValueError("bad"))
    assert isinstance(e.exception(0), ValueError)
    with pytest.raises(ValueError, match="bad"):
        e.result(0)

    c = kind()
    assert c.cancel() and c.cancelled() and not c.set_running_or_notify_cancel()
    with pytest.raises(concurrent.futures.CancelledError):
        c.result(0)


@pytest.mark.parametrize("kind", KINDS, ids=["Future", "LightFuture"])
def test_every_waiting_thread_wakes_and_a_timed_out_one_leaves(kind: type[concurrent.futures.Future[Any]]) -> None:
    f = kind()
    got: list[Any] = []
    timed_out: list[bool] = []

    def waiter() -> None:
        got.append(f.result(10))

    def impatient() -> None:
        try:
            f.result(0.05)
        except concurrent.futures.TimeoutError:
            timed_out.append(True)

    threads = [threading.Thread(target=waiter) for _ in range(4)] + [threading.Thread(target=impatient)]
    for t in threads:
        t.start()
    threads[-1].join(5)
    assert timed_out == [True]
    time.sleep(0.05)
    f.set_result("x")
    for t in threads:
        t.join(5)
    assert got == ["x"] * 4
    # nested holding of the condition (as the module's wait does) still lets a waiter in
    g = kind()
    with g._condition, g._condition:
        threading.Timer(0.05, g.set_result, args=(1,)).start()
        assert g._condition.wait(5)
    assert g.result(0) == 1


def test_wait_and_as_completed_over_both_kinds() -> None:
    fs = [LightFuture(), concurrent.futures.Future(), LightFuture()]
    done, not_done = concurrent.futures.wait(fs, timeout=0.05)
    assert not done and len(not_done) == 3
    threading.Timer(0.05, fs[2].set_result, args=(2,)).start()
    done, _ = concurrent.futures.wait(fs, timeout=5, return_when=concurrent.futures.FIRST_COMPLETED)
    assert done == {fs[2]}
    threading.Timer(0.05, fs[0].set_exception, args=(RuntimeError("x"),)).start()
    threading.Timer(0.1, fs[1].set_result, args=(1,)).start()
    order = list(concurrent.futures.as_completed(fs, timeout=5))
    assert order[0] is fs[2] and set(order) == set(fs)
    assert not fs[0]._waiters and fs[0]._condition._waiters is None  # type: ignore[attr-defined]


def _settle_the_executor_way(f: concurrent.futures.Future[Any], result: Any, exception: BaseException | None) -> None:
    if f.set_running_or_notify_cancel():
        if exception is not None:
            f.set_exception(exception)
        else:
            f.set_result(result)


@pytest.mark.parametrize("outcome", ["result", "exception", "cancelled", "running"])
def test_settle_is_what_an_executor_does_in_two_calls(outcome: str) -> None:
    """``LightFuture.settle`` against a ``Future`` settled by ``set_running_or_notify_cancel`` + ``set_result`` /
    ``set_exception``: the same state, outcome, callbacks and wake-ups of ``wait`` / ``as_completed``."""
    error = ValueError("boom")
    states = []
    for kind in KINDS:
        f = kind()
        seen: list[Any] = []
        f.add_done_callback(
            lambda x, seen=seen: seen.append(("cancelled",) if x.cancelled() else (x.exception(), x._result))
        )
        woken: list[Any] = []
        waiter = threading.Thread(target=lambda f=f, woken=woken: woken.append(concurrent.futures.wait([f], timeout=5)))
        waiter.start()
        time.sleep(0.05)
        if outcome == "cancelled":
            assert f.cancel()
        if outcome == "running":
            assert f.set_running_or_notify_cancel()
        settle: Any = (
            f.settle
            if isinstance(f, LightFuture)
            else lambda r=None, exception=None, f=f: _settle_the_executor_way(f, r, exception)
        )
        if outcome == "running":
            with pytest.raises(RuntimeError):
                settle(1)
            f.set_result(2)
        else:
            settle(7, exception=error if outcome == "exception" else None)
        waiter.join(5)
        done, not_done = woken[0]
        states.append((f._state, f.done(), f.cancelled(), seen, len(done), len(not_done)))
    assert states[0] == states[1]
    assert states[1][1] is True


def test_a_finished_future_is_read_without_its_lock() -> None:
    """``result()`` / ``exception()`` of a settled LightFuture do not take its condition's lock (held here by another
    thread): its state never changes again. A pending one still waits for it; a failed one's ``result()`` raises."""
    ok, failed, pending = LightFuture[int](), LightFuture[int](), LightFuture[int]()
    ok.settle(7)
    failed.settle(exception=KeyError("k"))
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with ok._condition, failed._condition, pending._condition:
            held.set()
            release.wait(10)

    t = threading.Thread(target=holder)
    t.start()
    assert held.wait(5)
    read: list[Any] = []

    def reader() -> None:
        read.extend([ok.result(), ok.exception(), failed.exception()])

    r = threading.Thread(target=reader)
    r.start()
    r.join(2)
    blocked = r.is_alive()
    release.set()
    t.join(5)
    r.join(5)
    assert not blocked
    assert read[:2] == [7, None] and isinstance(read[2], KeyError)
    with pytest.raises(KeyError):
        failed.result()
    with pytest.raises(concurrent.futures.TimeoutError):
        pending.result(0.05)
