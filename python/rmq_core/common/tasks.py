"""Ending asyncio tasks for good: ``cancel_and_wait``.

Owns the one rule the clients use to stop their tasks on a loop that lives on (``rmq_core.aio`` runs on the
caller's loop, so nothing may be left pending): cancel, wait, and cancel again whatever swallowed the cancellation
— Python 3.11's ``asyncio.wait_for`` returns the inner result when it completes as the cancel arrives, and a
periodic loop around such an await would otherwise go on sleeping.
Thread-safety: call on the tasks' loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any] | asyncio.Future[Any]], retry_s: float = 0.05) -> None:
    """Cancel ``tasks`` and return once every one has ended (re-cancelling every ``retry_s`` those still running).
    The caller's own task is skipped."""
    current = asyncio.current_task()
    pending = {t for t in tasks if t is not current and not t.done()}
    while pending:
        for t in pending:
            t.cancel()
        _done, pending = await asyncio.wait(pending, timeout=retry_s)
