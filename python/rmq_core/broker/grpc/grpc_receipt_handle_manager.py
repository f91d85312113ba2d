"""GrpcReceiptHandleManager: the invisible time of a push consumer's messages renewed by the server while the client
holds them, as Apache's proxy does (``DefaultReceiptHandleManager``, ``RenewStrategyPolicy``).

A receive with ``auto_renew`` pops with 60 s and ``hold``s each message's handle under (client id, group, original
handle). Every ``RENEW_PERIOD_S`` the held handles due within ``RENEW_AHEAD_MS`` get a new invisible time (1 m, 3 m,
5 m, 10 m, 30 m, then 1 h: CHANGE_MESSAGE_INVISIBLETIME), and the held entry the new handle. The client keeps the
original handle: its ack / change-invisible / forward-to-DLQ is done with the latest one (``take`` / ``current``).
After ``RENEW_MAX_MS`` (3 h) a message is no longer renewed (it comes back when its time runs out). When the
client goes away (Telemetry ends, NotifyClientTermination) its held messages are made visible again in
``CLEAR_INVISIBLE_MS`` (1 s) instead of waiting out the renewed time. Bounded: at most ``MAX_HELD_PER_CLIENT`` held
per client (beyond it a message is simply not renewed). On the broker's event loop only.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

RENEW_PERIOD_S = 5.0  # ProxyConfig.renewSchedulePeriodMillis
RENEW_AHEAD_MS = 10_000  # renewAheadTimeMillis
RENEW_MAX_MS = 3 * 3_600_000  # renewMaxTimeMillis
CLEAR_INVISIBLE_MS = 1_000  # invisibleTimeMillisWhenClear
RENEW_STEPS_MS = (60_000, 180_000, 300_000, 600_000, 1_800_000, 3_600_000)  # RenewStrategyPolicy
MAX_HELD_PER_CLIENT = 100_000


@dataclass
class HeldHandle:
    group: str
    topic: str
    current: str  # the latest handle (the original one until the first renewal)
    expires_ms: int  # popTime + invisibleTime of ``current``
    first_ms: int  # when the client received it
    renew_times: int = 0


class GrpcReceiptHandleManager:
    def __init__(self, pop_service: Callable[[], Any], now_ms: Callable[[], int]) -> None:
        self._pop = pop_service
        self._now_ms = now_ms
        self.held: dict[str, dict[tuple[str, str], HeldHandle]] = {}  # client id → (group, original) → held
        self._task: asyncio.Task[None] | None = None
        self.renewals = 0  # invisible times renewed (a count for tests and stats)

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def hold(self, client_id: str, group: str, topic: str, handle: str, expires_ms: int) -> None:
        table = self.held.setdefault(client_id, {})
        if len(table) < MAX_HELD_PER_CLIENT:
            table[(group, handle)] = HeldHandle(group, topic, handle, expires_ms, self._now_ms())

    def current(self, client_id: str, group: str, handle: str) -> str:
        held = self.held.get(client_id, {}).get((group, handle))
        return handle if held is None else held.current

    def take(self, client_id: str, group: str, handle: str) -> str:
        """The latest handle of ``handle``, no longer renewed (the client acked or nacked it)."""
        table = self.held.get(client_id)
        held = table.pop((group, handle), None) if table is not None else None
        if table is not None and not table:
            del self.held[client_id]
        return handle if held is None else held.current

    async def clear_client(self, client_id: str) -> None:
        """The client is gone: its held messages visible again soon, to the group's other consumers."""
        table = self.held.pop(client_id, None) or {}
        for held in table.values():
            await self._change(held, CLEAR_INVISIBLE_MS)

    async def _change(self, held: HeldHandle, invisible_ms: int) -> Any:
        pop = self._pop()
        if pop is None:
            return None
        result = pop.change_invisible_time(held.group, held.topic, held.current, invisible_ms)
        return await result if inspect.isawaitable(result) else result

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(RENEW_PERIOD_S)
            try:
                await self.renew_due()
            except Exception:
                log.exception("renewing gRPC consumers' receipt handles failed")

    async def renew_due(self) -> None:
        now = self._now_ms()
        for client_id, table in list(self.held.items()):
            for key, held in list(table.items()):
                if held.expires_ms - now > RENEW_AHEAD_MS:
                    continue
                if now - held.first_ms >= RENEW_MAX_MS or held.expires_ms <= now:
                    table.pop(key, None)  # held too long, or already expired: its time runs out as it is
                    continue
                step = RENEW_STEPS_MS[min(held.renew_times, len(RENEW_STEPS_MS) - 1)]
                result = await self._change(held, step)
                if result is None or result.code != 0 or not result.receipt_handle:
                    log.warning(
                        "renewing %s of %s failed: %s", held.current, client_id, getattr(result, "remark", None)
                    )
                    table.pop(key, None)
                    continue
                held.current = result.receipt_handle
                held.expires_ms = result.pop_time + result.invisible_time
                held.renew_times += 1
                self.renewals += 1
            if not table:
                self.held.pop(client_id, None)
