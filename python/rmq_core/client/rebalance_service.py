"""RebalanceService (4.9 client/impl/consumer/RebalanceService): the instance's periodic rebalance.

An asyncio task on the client instance's loop: wait ``rebalance_interval_ms`` (20 s by default, as
``rocketmq.client.rebalance.waitInterval``) or until ``wakeup()``, then ``await instance.do_rebalance()`` (a plain
``instance.do_rebalance()`` is accepted too). A wake-up that arrives while a rebalance runs is remembered, so the
next round starts at once (ServiceThread's ``hasNotified``). A failing round is logged; the loop goes on.

Threading: ``start()``/``shutdown()`` are coroutines run on the instance loop; ``wakeup()`` may be called from any
thread (it hops onto the loop with ``call_soon_threadsafe`` when needed).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from typing import Any

log = logging.getLogger("rmq_core.client.rebalance")

DEFAULT_REBALANCE_INTERVAL_MS = 20000


class RebalanceService:
    def __init__(self, instance: Any, rebalance_interval_ms: int | None = None) -> None:
        if rebalance_interval_ms is None:
            cfg = getattr(instance, "client_config", None)
            rebalance_interval_ms = getattr(cfg, "rebalance_interval_ms", None) or DEFAULT_REBALANCE_INTERVAL_MS
        if rebalance_interval_ms <= 0:
            raise ValueError(f"rebalance_interval_ms must be positive, not {rebalance_interval_ms}")
        self.instance = instance
        self.rebalance_interval_ms = rebalance_interval_ms
        self._event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self.rounds = 0  # completed rebalance rounds (diagnostics, tests)

    async def start(self) -> None:
        if self._task is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()
        self._stopped = False
        self._task = self._loop.create_task(self._run(), name="RebalanceService")

    def wakeup(self) -> None:
        loop, event = self._loop, self._event
        if loop is None or event is None or loop.is_closed():
            return
        if getattr(loop, "_thread_id", None) == threading.get_ident():
            event.set()
        else:
            loop.call_soon_threadsafe(event.set)

    async def _run(self) -> None:
        assert self._event is not None
        log.info("RebalanceService service started")
        while not self._stopped:
            try:
                await asyncio.wait_for(self._event.wait(), self.rebalance_interval_ms / 1000.0)
            except TimeoutError:
                pass
            self._event.clear()
            if self._stopped:
                break
            try:
                result = self.instance.do_rebalance()
                if inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("doRebalance failed: %r", e)
            self.rounds += 1
        log.info("RebalanceService service end")

    async def shutdown(self) -> None:
        self._stopped = True
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
