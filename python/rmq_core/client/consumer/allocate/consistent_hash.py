"""AllocateMessageQueueConsistentHash ("CONSISTENT_HASH") over RocketMQ's ConsistentHashRouter (common/consistenthash).

The ring holds ``virtual_node_cnt`` virtual nodes per consumer id, keyed ``"<cid>-<replica>"`` and hashed with
RocketMQ's MD5Hash: the first 4 bytes of MD5(UTF-8 key) as an unsigned big-endian 32-bit number. A queue is routed by
hashing ``str(mq)`` (Java's ``MessageQueue.toString()``: "MessageQueue [topic=…, brokerName=…, queueId=…]") and taking
the first ring key >= that hash, wrapping to the smallest. A later virtual node with an equal hash replaces the earlier
one (TreeMap.put), and a consumer id listed twice gets replicas numbered after its existing ones, as in Java — so the
assignment equals the Java client's for the same inputs.

``hash_function`` may replace MD5 (Java's customHashFunction): a callable str → int. Routers are built per call;
strategies are thread-safe.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Sequence

from rmq_core.client.consumer.allocate.strategy import AllocateMessageQueueStrategy
from rmq_core.message import MessageQueue

HashFunction = Callable[[str], int]


def md5_hash(key: str) -> int:
    """ConsistentHashRouter.MD5Hash.hash: the digest's first 4 bytes, big-endian, as a non-negative long."""
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


class ConsistentHashRouter:
    """A hash ring of physical node keys (strings) with virtual nodes; ``route_node(key)`` → physical key or None."""

    def __init__(self, nodes: Sequence[str], virtual_node_count: int, hash_function: HashFunction = md5_hash) -> None:
        self._hash = hash_function
        self._ring: dict[int, tuple[str, int]] = {}  # hash -> (physical key, replica index)
        self._sorted: list[int] = []
        for node in nodes:
            self.add_node(node, virtual_node_count)

    def add_node(self, node: str, virtual_node_count: int) -> None:
        if virtual_node_count < 0:
            raise ValueError(f"illegal virtual node counts :{virtual_node_count}")
        existing = self.existing_replicas(node)
        for i in range(virtual_node_count):
            replica = i + existing
            self._ring[self._hash(f"{node}-{replica}")] = (node, replica)
        self._sorted = sorted(self._ring)

    def remove_node(self, node: str) -> None:
        self._ring = {h: v for h, v in self._ring.items() if v[0] != node}
        self._sorted = sorted(self._ring)

    def existing_replicas(self, node: str) -> int:
        return sum(1 for v in self._ring.values() if v[0] == node)

    def route_node(self, object_key: str) -> str | None:
        if not self._sorted:
            return None
        i = bisect.bisect_left(self._sorted, self._hash(object_key))
        return self._ring[self._sorted[i if i < len(self._sorted) else 0]][0]


class AllocateMessageQueueConsistentHash(AllocateMessageQueueStrategy):
    def __init__(self, virtual_node_cnt: int = 10, hash_function: HashFunction | None = None) -> None:
        if virtual_node_cnt < 0:
            raise ValueError(f"illegal virtualNodeCnt :{virtual_node_cnt}")
        self.virtual_node_cnt = virtual_node_cnt
        self.hash_function = hash_function

    def name(self) -> str:
        return "CONSISTENT_HASH"

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not self.check(consumer_group, current_cid, mq_all, cid_all):
            return []
        router = ConsistentHashRouter(cid_all, self.virtual_node_cnt, self.hash_function or md5_hash)
        return [mq for mq in mq_all if router.route_node(str(mq)) == current_cid]

    def __repr__(self) -> str:
        return f"AllocateMessageQueueConsistentHash(virtual_node_cnt={self.virtual_node_cnt})"
