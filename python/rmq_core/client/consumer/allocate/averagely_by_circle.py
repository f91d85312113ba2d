"""AllocateMessageQueueAveragelyByCircle ("AVG_BY_CIRCLE"): queue i goes to consumer i mod len(cid_all).

8 queues, 3 consumers → c1: q0, q3, q6; c2: q1, q4, q7; c3: q2, q5. Stateless; thread-safe.
"""

from __future__ import annotations

from collections.abc import Sequence

from rmq_core.client.consumer.allocate.strategy import AllocateMessageQueueStrategy
from rmq_core.message import MessageQueue


class AllocateMessageQueueAveragelyByCircle(AllocateMessageQueueStrategy):
    def name(self) -> str:
        return "AVG_BY_CIRCLE"

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not self.check(consumer_group, current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        return [mq_all[i] for i in range(index, len(mq_all), len(cid_all))]
