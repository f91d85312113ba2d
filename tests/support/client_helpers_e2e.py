"""Helpers for the client end-to-end tests (tests/client/test_client_e2e.py, tests/interop/test_client_apache.py): a name server
plus brokers in-process, topic creation over UPDATE_AND_CREATE_TOPIC, waiting for a route, a thread-safe recorder of
deliveries, reading what a broker holds and the offsets it has committed, and a push consumer's process queues.

Invariants: everything started here is stopped by the context manager that started it (sockets, threads, loops);
``wait_until`` fails with an AssertionError naming what it waited for. Thread-safety: ``Deliveries`` is safe to
call from any consume thread; the rest is used from the test thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.message import MessageExt, decode_messages
from rmq_core.namesrv import NameServer

from support.admin_helpers import create_topic
from support.helpers import wait_until  # noqa: F401 (re-exported to the tests)

# 18 delay levels of one second each: retries come back quickly (level 3 + reconsume times is used by the broker)
FAST_DELAY_LEVELS = " ".join(["1s"] * 18)

# client settings that make rebalancing, heartbeats and offset persistence quick enough for tests
FAST_CLIENT = {
    "rebalance_interval_ms": 300,
    "heartbeat_broker_interval": 1000,
    "persist_consumer_offset_interval": 200,
    "poll_name_server_interval": 1000,
}


@dataclass
class Cluster:
    """A name server and brokers (masters, broker names ``broker-<i>``) running in this process."""

    namesrv: NameServer
    brokers: list[Broker] = field(default_factory=list)

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.address

    @property
    def broker(self) -> Broker:
        return self.brokers[0]

    def create_topic(self, topic: str, queues: int = 4, order: bool = False) -> None:
        """Create ``topic`` on every broker with ``queues`` read/write queues; returns once the name server routes it
        to every broker."""
        create_topic([b.address for b in self.brokers], topic, queues, order=order, namesrv=self.namesrv_addr)

    def stored(self, topic: str, queue_id: int = 0, broker_index: int = 0) -> list[MessageExt]:
        """Every message a broker's store holds in one queue."""
        store = self.brokers[broker_index].message_store
        out: list[MessageExt] = []
        offset = 0
        while True:
            r = store.get_message("test", topic, queue_id, offset, 32)
            if not r.body:
                return out
            out.extend(decode_messages(r.body))
            offset = r.next_begin_offset

    def committed_offset(self, group: str, topic: str, queue_id: int, broker_index: int = 0) -> int:
        """The offset the broker has committed for (group, topic, queue) (-1 when none), read on its loop."""
        broker = self.brokers[broker_index]

        async def read() -> int:
            return int(broker.controller.consumer_offset_manager.query_offset(group, topic, queue_id))

        return asyncio.run_coroutine_threadsafe(read(), broker.controller.loop).result(5.0)


@contextlib.contextmanager
def cluster(tmp_path: Any, brokers: int = 1, **broker_settings: Any) -> Iterator[Cluster]:
    """A name server and ``brokers`` master brokers (small files, ``broker_settings`` applied to each), registered
    with the name server before this yields."""
    ns = NameServer(listen_port=0)
    ns.start()
    c = Cluster(ns)
    try:
        for i in range(brokers):
            cfg = BrokerConfig(
                listen_port=0,
                namesrv_addr=ns.address,
                broker_name=f"broker-{i}",
                store_path_root_dir=os.path.join(str(tmp_path), f"broker-{i}"),
                **broker_settings,
            )
            b = Broker(cfg)
            b.start()
            c.brokers.append(b)
        yield c
    finally:
        for b in c.brokers:
            b.shutdown()
        ns.shutdown()


@dataclass(frozen=True)
class Delivery:
    """One message as a listener saw it."""

    consumer: str
    key: str
    topic: str
    queue_id: int
    queue_offset: int
    reconsume_times: int
    tags: str | None
    at: float


class Deliveries:
    """A thread-safe record of every delivery to listeners, in arrival order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.items: list[Delivery] = []

    def add(self, consumer: str, msgs: list[MessageExt]) -> None:
        now = time.monotonic()
        with self._lock:
            for m in msgs:
                self.items.append(
                    Delivery(
                        consumer,
                        m.keys or m.body.decode("utf-8", "replace"),
                        m.topic,
                        m.queue_id,
                        m.queue_offset,
                        m.reconsume_times,
                        m.tags,
                        now,
                    )
                )

    def snapshot(self) -> list[Delivery]:
        with self._lock:
            return list(self.items)

    def keys(self, consumer: str | None = None) -> list[str]:
        return [d.key for d in self.snapshot() if consumer is None or d.consumer == consumer]

    def __len__(self) -> int:
        with self._lock:
            return len(self.items)


class OrderlyRecorder:
    """Orderly listeners that record, per queue, ``(consumer name, queue offset)`` in delivery order, and every
    queue on which two listener calls ran at once (``overlaps``); each call also checks that its messages and its
    context are of one queue. Thread-safe: listeners run on the consumers' threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy: set[int] = set()
        self.overlaps: list[int] = []
        self.seen: dict[int, list[tuple[str, int]]] = defaultdict(list)

    def listener(self, name: str) -> Any:
        from rmq_core.client.consumer.listener import ConsumeOrderlyStatus

        def listener(msgs: Any, ctx: Any) -> ConsumeOrderlyStatus:
            q = msgs[0].queue_id
            assert all(m.queue_id == q for m in msgs) and ctx.message_queue.queue_id == q
            with self._lock:
                if q in self._busy:
                    self.overlaps.append(q)
                self._busy.add(q)
            time.sleep(0.001)
            with self._lock:
                self._busy.discard(q)
                self.seen[q].extend((name, m.queue_offset) for m in msgs)
            return ConsumeOrderlyStatus.SUCCESS

        return listener

    def consumed(self) -> int:
        with self._lock:
            return sum(len(v) for v in self.seen.values())

    def check_per_queue_order(self, queues: int, per_queue: int) -> None:
        """No overlapping calls; each queue's offsets 0..per_queue-1 in order, all by one consumer."""
        assert not self.overlaps, f"two listener calls at once on queues {self.overlaps}"
        for q in range(queues):
            offsets = [off for _, off in self.seen[q]]
            assert offsets == list(range(per_queue)), f"queue {q} consumed out of order: {offsets[:20]}..."
            assert len({name for name, _ in self.seen[q]}) == 1, f"queue {q} consumed by both consumers"


def process_queue_table(push_consumer: Any, topic: str | None = None) -> dict[Any, Any]:
    """The push consumer's MessageQueue → ProcessQueue table (RebalanceImpl.processQueueTable), copied; only
    ``topic``'s queues when given (clustering consumers also hold their group's %RETRY% queue)."""
    table = dict(push_consumer.impl.rebalance_impl.process_queue_table)
    return {mq: pq for mq, pq in table.items() if topic is None or mq.topic == topic}


def _number(v: Any) -> int:
    v = v() if callable(v) else v
    return int(getattr(v, "value", v))


def cached_count(pq: Any) -> int:
    """A ProcessQueue's cached message count (msgCount)."""
    return _number(pq.msg_count)


def cached_size(pq: Any) -> int:
    """A ProcessQueue's cached body bytes (msgSize)."""
    return _number(pq.msg_size)
