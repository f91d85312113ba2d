"""AllocateMessageQueueAveragely ("AVG"): contiguous blocks, the first ``len(mq) % len(cid)`` consumers get one more.

8 queues, 3 consumers → c1: q0..q2, c2: q3..q5, c3: q6..q7. More consumers than queues → the extra consumers get
nothing. Stateless; thread-safe.
"""

from __future__ import annotations

from collections.abc import Sequence

from rmq_core.client.consumer.allocate.strategy import AllocateMessageQueueStrategy
from rmq_core.message import MessageQueue


class AllocateMessageQueueAveragely(AllocateMessageQueueStrategy):
    def name(self) -> str:
        return "AVG"

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not self.check(consumer_group, current_cid, mq_all, cid_all):
            return []
        n_mq, n_cid = len(mq_all), len(cid_all)
        index = list(cid_all).index(current_cid)
        mod = n_mq % n_cid
        if n_mq <= n_cid:
            average_size = 1
        elif mod > 0 and index < mod:
            average_size = n_mq // n_cid + 1
        else:
            average_size = n_mq // n_cid
        start_index = index * average_size if (mod > 0 and index < mod) else index * average_size + mod
        range_ = min(average_size, n_mq - start_index)
        return [mq_all[(start_index + i) % n_mq] for i in range(range_)]
