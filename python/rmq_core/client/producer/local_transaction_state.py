"""LocalTransactionState (4.9 ``client/producer/LocalTransactionState.java``): what a local transaction says —
commit the half message, roll it back, or not known yet (the broker will ask again: CHECK_TRANSACTION_STATE).
Immutable."""

from __future__ import annotations

import enum

from rmq_core.message import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE


class LocalTransactionState(str, enum.Enum):
    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"  # sic, RocketMQ's name

    @property
    def commit_or_rollback(self) -> int:
        """The END_TRANSACTION header's ``commitOrRollback``: the sys flag's transaction value."""
        if self is LocalTransactionState.COMMIT_MESSAGE:
            return TRANSACTION_COMMIT_TYPE
        if self is LocalTransactionState.ROLLBACK_MESSAGE:
            return TRANSACTION_ROLLBACK_TYPE
        return TRANSACTION_NOT_TYPE
