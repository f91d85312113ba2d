"""RollbackStats (4.9 ``common.admin.RollbackStats``): one queue of a consumer group's offsets reset by time without
the broker's help (``Admin.reset_offset_by_time_old``, mqadmin's ``resetOffsetByTimeOld``).

Plain data; no shared state.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RollbackStats:
    """``consumer_offset``: the group's offset before (None: none committed); ``timestamp_offset``: the queue's offset
    at the time asked; ``rollback_offset``: the offset the group has now (``timestamp_offset`` when it was committed,
    the old one when a reset without force would have moved it forwards)."""

    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int | None
    timestamp_offset: int
    rollback_offset: int

    @property
    def committed(self) -> bool:
        """Whether the timestamp's offset was committed (else the group's offset was kept)."""
        return self.rollback_offset == self.timestamp_offset
