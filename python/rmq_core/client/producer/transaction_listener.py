"""TransactionListener (4.9 ``client/producer/TransactionListener.java``): the application's side of a transactional
send. ``execute_local_transaction(msg, arg)`` runs right after the half message is stored (on the sending thread);
``check_local_transaction(msg_ext)`` answers the broker's check-back for a transaction still open (on the producer's
check executor, never the client's event loop). Either may return ``LocalTransactionState.UNKNOW`` (or raise: taken
as UNKNOW) to leave the decision to a later check.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from rmq_core.client.producer.local_transaction_state import LocalTransactionState
from rmq_core.message import Message, MessageExt


@runtime_checkable
class TransactionListener(Protocol):
    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState: ...

    def check_local_transaction(self, msg_ext: MessageExt) -> LocalTransactionState: ...
