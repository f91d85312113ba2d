"""PullMessageService (cl/impl/consumer/PullMessageService.java): one per client instance (which builds it), an asyncio task on the
instance's loop taking PullRequests from an ``asyncio.Queue`` and handing each to its consumer's
``impl.pull_message(pr)``.

``pull_message`` only runs the checks and issues the pull (the network wait and the PullCallback run in their own
task), so the service never waits for a broker's long poll. Requests for a group with no registered consumer are
dropped with a warning.

Thread-safety: ``execute_pull_request_immediately``/``_later`` and ``execute_task_later`` may be called from any
thread (they hop onto the loop with ``call_soon_threadsafe``). Timers still pending at ``shutdown`` are cancelled.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from rmq_core.common.tasks import cancel_and_wait

log = logging.getLogger(__name__)


class PullRequestView(Protocol):
    """What the service needs of a consumer's PullRequest (``rmq_core.client.consumer.pull_request``): the group
    whose registered consumer pulls it. A Protocol, so that the service sits below the consumers."""

    @property
    def consumer_group(self) -> str: ...


class PullMessageService:
    def __init__(self, instance: Any) -> None:
        self.instance = instance
        self._queue: asyncio.Queue[PullRequestView] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._timers: set[asyncio.TimerHandle] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loop_thread: int | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.instance.loop  # type: ignore[no-any-return]

    def _on_loop(self) -> bool:
        return self._loop_thread == threading.get_ident()

    def _call_on_loop(self, fn: Callable[..., Any], *args: Any) -> None:
        if self._on_loop():
            fn(*args)
        else:
            try:
                self.loop.call_soon_threadsafe(fn, *args)
            except RuntimeError:  # loop closed: the instance is shut down
                log.warning("PullMessageService: the loop is closed, dropping %r", args)

    # --- life cycle -----------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the service task (from any thread; idempotent)."""
        self._stopped = False
        self._call_on_loop(self._start_on_loop)

    def _start_on_loop(self) -> None:
        self._loop_thread = threading.get_ident()
        if self._task is None or self._task.done():
            self._task = self.loop.create_task(self._run(), name="PullMessageService")

    def shutdown(self) -> None:
        """Stop taking requests, cancel pending timers (from any thread)."""
        self._stopped = True
        self._call_on_loop(self._shutdown_on_loop)

    def _shutdown_on_loop(self) -> None:
        for h in self._timers:
            h.cancel()
        self._timers.clear()
        for t in list(self._tasks):
            t.cancel()
        if self._task is not None:
            self._task.cancel()

    async def shutdown_async(self) -> None:
        """shutdown on the loop, waiting for the service task to end."""
        self._stopped = True
        self._shutdown_on_loop()
        await cancel_and_wait([t for t in [self._task, *self._tasks] if t is not None])
        self._task = None

    @property
    def is_stopped(self) -> bool:
        return self._stopped

    # --- requests -------------------------------------------------------------------------------------------------
    def execute_pull_request_immediately(self, pull_request: PullRequestView) -> None:
        if self._stopped:
            return
        self._call_on_loop(self._queue.put_nowait, pull_request)

    def execute_pull_request_later(self, pull_request: PullRequestView, time_delay_ms: int) -> None:
        if self._stopped:
            log.warning("PullMessageServiceScheduledThread has shutdown")
            return
        self._call_on_loop(self._schedule, time_delay_ms, self._queue.put_nowait, pull_request)

    def execute_task_later(self, task: Callable[[], Any], time_delay_ms: int) -> None:
        """Run ``task`` (a function, or a coroutine function) on the loop after ``time_delay_ms``."""
        if self._stopped:
            log.warning("PullMessageServiceScheduledThread has shutdown")
            return
        self._call_on_loop(self._schedule, time_delay_ms, self._run_task, task)

    def _schedule(self, delay_ms: int, fn: Callable[..., Any], arg: Any) -> None:
        if self._stopped:
            return
        if self._loop_thread is None:
            self._loop_thread = threading.get_ident()
        handle: asyncio.TimerHandle | None = None

        def fire() -> None:
            self._timers.discard(handle)
            if not self._stopped:
                fn(arg)

        handle = self.loop.call_later(max(delay_ms, 0) / 1000.0, fire)
        self._timers.add(handle)

    def _run_task(self, task: Callable[[], Any]) -> None:
        try:
            result = task()
        except Exception:
            log.exception("PullMessageService: scheduled task failed")
            return
        if inspect.isawaitable(result):
            self.spawn(result)

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        """Run a coroutine as a task the service owns (cancelled at shutdown). Loop thread only."""
        t: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(t)
        t.add_done_callback(self._task_done)
        return t

    def _task_done(self, t: asyncio.Task[Any]) -> None:
        self._tasks.discard(t)
        if not t.cancelled() and t.exception() is not None:
            log.error("PullMessageService: task failed", exc_info=t.exception())

    async def _run(self) -> None:
        self._loop_thread = threading.get_ident()
        log.info("PullMessageService service started")
        queue = self._queue
        while not self._stopped:
            pr = await queue.get()
            consumer = self.instance.select_consumer(pr.consumer_group)
            if consumer is None:
                log.warning("No matched consumer for the PullRequest %s, drop it", pr)
                continue
            impl = getattr(consumer, "impl", consumer)
            try:
                await impl.pull_message(pr)
            except Exception:
                log.exception("Pull Message Service Run Method exception")
        log.info("PullMessageService service end")
