"""A default send's state across its attempts (4.9 ``sendDefaultImpl``'s locals), shared by the Producer's coroutine
way (``producer.py``) and its fast send (``fast_send.py``, whose first attempt hands its state on to the coroutine),
with the send modes and the monotonic clock its costs are measured on. A state belongs to one send: one thread at a
time (the caller's, then the loop's).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmq_core.client.send_result import SendResult
    from rmq_core.message import MessageQueue

SYNC, ASYNC, ONEWAY = "SYNC", "ASYNC", "ONEWAY"


def monotonic_ms() -> int:
    """The clock of a send's costs and timeouts (sendDefaultImpl's ``System.currentTimeMillis()`` differences)."""
    return time.monotonic_ns() // 1_000_000


class SendState:
    """sendDefaultImpl's state across its attempts (the fast send hands its first attempt's on to the coroutine)."""

    __slots__ = ("begin_first", "brokers_sent", "call_timeout", "exception", "mq", "send_result", "times")

    def __init__(self, begin_first: int) -> None:
        self.begin_first = begin_first
        self.times = 0
        self.mq: MessageQueue | None = None
        self.exception: BaseException | None = None
        self.send_result: SendResult | None = None
        self.call_timeout = False
        self.brokers_sent: list[str] = []
