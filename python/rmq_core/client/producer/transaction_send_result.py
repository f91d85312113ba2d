"""TransactionSendResult (4.9 ``client/producer/TransactionSendResult.java``): the half message's SendResult plus the
local transaction's state. ``transaction_id`` is the message's UNIQ_KEY (the id the check-back names it by).
Immutable by convention."""

from __future__ import annotations

from dataclasses import dataclass

from rmq_core.client.producer.local_transaction_state import LocalTransactionState
from rmq_core.client.send_result import SendResult


@dataclass
class TransactionSendResult(SendResult):
    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW

    def __str__(self) -> str:
        return f"{super().__str__()[:-1]}, localTransactionState={self.local_transaction_state.value}]"
