"""AllocateMessageQueueStrategy: the base of RocketMQ's queue allocation strategies (AbstractAllocateMessageQueueStrategy).

``allocate(consumer_group, current_cid, mq_all, cid_all)`` returns the queues ``current_cid`` owns. The caller
(RebalanceImpl) sorts ``mq_all`` and ``cid_all`` first, so every consumer of a group computes the same assignment.
``check`` validates as 4.9: an empty current id, queue list or id list is a ``ValueError`` (Java's
IllegalArgumentException); a current id missing from ``cid_all`` is logged ("[BUG]") and allocates nothing.

Strategies are stateless (ByConfig holds a list set before use) and safe to call from any thread.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence

from rmq_core.message import MessageQueue

log = logging.getLogger("rmq_core.client.rebalance")


class AllocateMessageQueueStrategy(ABC):
    """Which queues of ``mq_all`` belong to ``current_cid`` among ``cid_all``."""

    @abstractmethod
    def name(self) -> str:
        """The strategy's RocketMQ name (AVG, AVG_BY_CIRCLE, CONSISTENT_HASH, CONFIG)."""

    @abstractmethod
    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        """The queues ``current_cid`` consumes; ``mq_all`` and ``cid_all`` are expected sorted."""

    @staticmethod
    def check(consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
        """4.9's check: ValueError on empty input; False (logged) when ``current_cid`` is not in ``cid_all``."""
        if not current_cid:
            raise ValueError("currentCID is empty")
        if not mq_all:
            raise ValueError("mqAll is null or mqAll empty")
        if not cid_all:
            raise ValueError("cidAll is null or cidAll empty")
        if current_cid not in cid_all:
            log.info(
                "[BUG] ConsumerGroup: %s The consumerId: %s not in cidAll: %s",
                consumer_group,
                current_cid,
                list(cid_all),
            )
            return False
        return True

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
