"""MQFaultStrategy and LatencyFaultTolerance (4.9 ``org.apache.rocketmq.client.latency``): with
``send_latency_fault_enable`` a broker whose sends were slow or failed is avoided for a while (the longer the latency,
the longer the pause); without it, queue choice only avoids the broker of the last failed attempt.

Invariants: latency → pause by RocketMQ's tables (50/100/550/1000/2000/3000/15000 ms → 0/0/30/60/120/180/600 s);
an isolated failure counts as 30 s latency. ``now_ms`` is injectable for tests.
Thread-safety: a lock guards the fault table; selection may run on any thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from rmq_core.client.topic_publish_info import ThreadLocalIndex, TopicPublishInfo
from rmq_core.message import MessageQueue

LATENCY_MAX = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION = (0, 0, 30000, 60000, 120000, 180000, 600000)


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass
class FaultItem:
    name: str
    current_latency: int
    start_timestamp: int

    def is_available(self, now_ms: int) -> bool:
        return now_ms - self.start_timestamp >= 0


class LatencyFaultTolerance:
    def __init__(self, now_ms: Callable[[], int] = _now_ms) -> None:
        self._items: dict[str, FaultItem] = {}
        self._lock = threading.Lock()
        self._now = now_ms
        self._which_worst = ThreadLocalIndex()

    def update_fault_item(self, name: str, current_latency: int, not_available_duration: int) -> None:
        with self._lock:
            self._items[name] = FaultItem(name, current_latency, self._now() + not_available_duration)

    def is_available(self, name: str) -> bool:
        item = self._items.get(name)
        return item is None or item.is_available(self._now())

    def remove(self, name: str) -> None:
        with self._lock:
            self._items.pop(name, None)

    def pick_one_at_least(self) -> str | None:
        with self._lock:
            items = list(self._items.values())
        if not items:
            return None
        now = self._now()
        items.sort(key=lambda i: (not i.is_available(now), i.current_latency, i.start_timestamp))
        half = len(items) // 2
        if half <= 0:
            return items[0].name
        return items[self._which_worst.increment_and_get() % half].name


class MQFaultStrategy:
    def __init__(self, send_latency_fault_enable: bool = False, now_ms: Callable[[], int] = _now_ms) -> None:
        self.send_latency_fault_enable = send_latency_fault_enable
        self.latency_fault_tolerance = LatencyFaultTolerance(now_ms)

    def select_one_message_queue(self, tp_info: TopicPublishInfo, last_broker_name: str | None) -> MessageQueue:
        if not self.send_latency_fault_enable:
            return tp_info.select_one_message_queue(last_broker_name)
        mqs = tp_info.message_queue_list
        for _ in range(len(mqs)):
            mq = mqs[tp_info.send_which_queue.increment_and_get() % len(mqs)]
            if self.latency_fault_tolerance.is_available(mq.broker_name):
                return mq
        not_best = self.latency_fault_tolerance.pick_one_at_least()
        if not_best is not None:
            write_queue_nums = tp_info.get_queue_id_by_broker(not_best)
            if write_queue_nums > 0:
                mq = tp_info.select_one_message_queue()
                return MessageQueue(mq.topic, not_best, tp_info.send_which_queue.increment_and_get() % write_queue_nums)
            self.latency_fault_tolerance.remove(not_best)
        return tp_info.select_one_message_queue()

    def update_fault_item(self, broker_name: str, current_latency: int, isolation: bool) -> None:
        if self.send_latency_fault_enable:
            duration = self.compute_not_available_duration(30000 if isolation else current_latency)
            self.latency_fault_tolerance.update_fault_item(broker_name, current_latency, duration)

    @staticmethod
    def compute_not_available_duration(current_latency: int) -> int:
        for i in range(len(LATENCY_MAX) - 1, -1, -1):
            if current_latency >= LATENCY_MAX[i]:
                return NOT_AVAILABLE_DURATION[i]
        return 0
