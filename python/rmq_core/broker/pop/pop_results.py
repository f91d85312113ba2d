"""The answers of an ack and a change of invisible time (``PopService.ack`` / ``change_invisible_time``), below
both the POP service and the FIFO lock manager that builds them for orderly queues.

``code`` is a RemotingSysResponseCode / ResponseCode; ``remark`` says why when it is not SUCCESS. A change of invisible
time answers the new receipt handle (ExtraInfoUtil's format) with the pop time, invisible time and revive queue it
encodes. Plain values; no thread-safety concerns.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class AckResult:
    code: int
    remark: str | None = None


@dataclass
class ChangeInvisibleResult:
    code: int
    remark: str | None = None
    receipt_handle: str = ""
    pop_time: int = 0
    invisible_time: int = 0
    revive_qid: int = 0
