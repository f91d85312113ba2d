"""BrokerRuntimeStats: the rates and day totals RocketMQ's GET_BROKER_RUNTIME_INFO reports (store/StoreStatsService.java's
``putTps``/``getTransferedTps`` sampling, broker/BrokerStats.java's ``msgPutTotalTodayMorning`` …), derived from the
BrokerStatsManager's cumulative broker-wide counters (``BROKER_PUT_NUMS`` / ``BROKER_GET_NUMS`` under the cluster name)
by sampling them once a second — never from the send or pull path.

- ``sample(now_ms)``: called about once a second by the broker's periodic task; keeps the last 601 samples
  ``(time_ms, put_total, get_total)`` (StoreStatsService keeps 601 one-second CallSnapshots) and rolls the day totals
  at the first sample of a new local day (BrokerStats.record runs at midnight: yesterday ← today, today ← now).
- ``tps(kind, seconds)``: the rate over the last ``seconds`` samples as Java's ``String.valueOf(double)`` prints it,
  or ``""`` while fewer samples exist (StoreStatsService#getPutTps(int)); ``tps_triple(kind)`` is its
  ``"10s 60s 600s"`` string.

Invariants: sample times only grow; a rate is ``(v_now - v_then) * 1000 / (t_now - t_then)``.
Thread-safety: one lock; ``sample`` runs on the broker loop, readers may be on any thread (the metrics endpoint).
"""

from __future__ import annotations

import datetime
import threading
from collections import deque

from rmq_core.broker.stats.broker_stats_manager import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    BrokerStatsManager,
)

MAX_SAMPLES = 601
GROUP_SAMPLES = 61  # a minute of per-group samples: ConsumeStats' consumeTps is the group's TPS over the last minute
PUT = "put"
GET = "get"


def java_double(value: float) -> str:
    """``String.valueOf(double)`` for the values a rate takes (finite, non-negative)."""
    if value == int(value) and abs(value) < 1e7:
        return f"{value:.1f}"
    text = repr(value)
    return text if "e" not in text else f"{value:E}".replace("E+0", "E").replace("E+", "E")


class BrokerRuntimeStats:
    """``BrokerRuntimeStats(stats_manager, boot_ms)``; see the module docstring."""

    def __init__(self, stats_manager: BrokerStatsManager, boot_ms: int) -> None:
        self.stats_manager = stats_manager
        self.boot_ms = boot_ms
        self._lock = threading.Lock()
        self._samples: deque[tuple[int, int, int]] = deque(maxlen=MAX_SAMPLES)
        self._group_samples: deque[tuple[int, dict[str, int]]] = deque(maxlen=GROUP_SAMPLES)
        self._day: datetime.date | None = None
        self.msg_put_total_yesterday_morning = 0
        self.msg_put_total_today_morning = 0
        self.msg_get_total_yesterday_morning = 0
        self.msg_get_total_today_morning = 0

    def totals(self) -> tuple[int, int]:
        """(messages put, messages got) since the broker started."""
        cluster = self.stats_manager.cluster_name
        put = self.stats_manager.get_stats_item(BROKER_PUT_NUMS, cluster)
        got = self.stats_manager.get_stats_item(BROKER_GET_NUMS, cluster)
        return (put.value if put else 0, got.value if got else 0)

    def sample(self, now_ms: int) -> None:
        put, got = self.totals()
        groups = self.stats_manager.values(GROUP_GET_NUMS)
        day = datetime.datetime.fromtimestamp(now_ms / 1000).date()
        with self._lock:
            if self._samples and now_ms <= self._samples[-1][0]:
                return
            self._samples.append((now_ms, put, got))
            self._group_samples.append((now_ms, groups))
            if self._day is None:
                self._day = day
            elif day != self._day:
                self._day = day
                self.msg_put_total_yesterday_morning = self.msg_put_total_today_morning
                self.msg_get_total_yesterday_morning = self.msg_get_total_today_morning
                self.msg_put_total_today_morning = put
                self.msg_get_total_today_morning = got

    def rate(self, kind: str, seconds: int) -> float | None:
        """Messages per second over the last ``seconds`` samples; None while there are not that many."""
        idx = 1 if kind == PUT else 2
        with self._lock:
            if len(self._samples) <= seconds:
                return None
            last = self._samples[-1]
            before = self._samples[-(seconds + 1)]
        span = last[0] - before[0]
        return (last[idx] - before[idx]) * 1000.0 / span if span > 0 else 0.0

    def group_get_tps(self, group: str, topic: str) -> float:
        """Messages per second ``group`` got from ``topic`` over the samples of the last minute (0.0 before two
        samples exist): BrokerStatsManager#tpsGroupGetNums."""
        key = f"{topic}@{group}"
        with self._lock:
            if len(self._group_samples) < 2:
                return 0.0
            (t0, first), (t1, last) = self._group_samples[0], self._group_samples[-1]
        return (last.get(key, 0) - first.get(key, 0)) * 1000.0 / (t1 - t0) if t1 > t0 else 0.0

    def tps(self, kind: str, seconds: int) -> str:
        value = self.rate(kind, seconds)
        return "" if value is None else java_double(value)

    def tps_triple(self, kind: str) -> str:
        return " ".join(self.tps(kind, s) for s in (10, 60, 600))
