"""PullStatus, PullResult and PullResultExt (cl/consumer/PullResult.java, cl/impl/consumer/PullResultExt.java).

``PullResultExt`` is what ``MQClientAPIImpl.pull_message`` returns: the raw body (``message_binary``) and the broker's
``suggest_which_broker_id``; ``PullAPIWrapper.process_pull_result`` decodes the body into ``msg_found_list`` and
drops the binary. Plain data; a result belongs to one pull at a time (no locking).
"""

from __future__ import annotations

import enum

from rmq_core.message import MessageExt


class PullStatus(str, enum.Enum):
    FOUND = "FOUND"  # SUCCESS (0)
    NO_NEW_MSG = "NO_NEW_MSG"  # PULL_NOT_FOUND (19)
    NO_MATCHED_MSG = "NO_MATCHED_MSG"  # PULL_RETRY_IMMEDIATELY (20)
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"  # PULL_OFFSET_MOVED (21)


class PullResult:
    __slots__ = ("max_offset", "min_offset", "msg_found_list", "next_begin_offset", "pull_status")

    def __init__(
        self,
        pull_status: PullStatus,
        next_begin_offset: int,
        min_offset: int,
        max_offset: int,
        msg_found_list: list[MessageExt] | None = None,
    ) -> None:
        self.pull_status = pull_status
        self.next_begin_offset = next_begin_offset
        self.min_offset = min_offset
        self.max_offset = max_offset
        self.msg_found_list: list[MessageExt] = msg_found_list if msg_found_list is not None else []

    def __repr__(self) -> str:
        return (
            f"PullResult [pullStatus={self.pull_status.value}, nextBeginOffset={self.next_begin_offset}, "
            f"minOffset={self.min_offset}, maxOffset={self.max_offset}, "
            f"msgFoundList={len(self.msg_found_list)}]"
        )


class PullResultExt(PullResult):
    __slots__ = ("message_binary", "suggest_which_broker_id")

    def __init__(
        self,
        pull_status: PullStatus,
        next_begin_offset: int,
        min_offset: int,
        max_offset: int,
        msg_found_list: list[MessageExt] | None = None,
        suggest_which_broker_id: int = 0,
        message_binary: bytes | None = None,
    ) -> None:
        super().__init__(pull_status, next_begin_offset, min_offset, max_offset, msg_found_list)
        self.suggest_which_broker_id = suggest_which_broker_id
        self.message_binary = message_binary
