"""Consumer statistics (cl/stat/ConsumerStatsManager.java, reduced): pull RT/TPS and consume RT/OK/FAILED counts per
(group, topic). Counters are plain ints updated without a lock: they are statistics, a lost increment under a race is
acceptable (as RocketMQ's sampling is approximate)."""

from __future__ import annotations

from collections import defaultdict


class ConsumerStatsManager:
    def __init__(self) -> None:
        self.pull_rt_ms: defaultdict[str, int] = defaultdict(int)
        self.pull_times: defaultdict[str, int] = defaultdict(int)
        self.pull_tps: defaultdict[str, int] = defaultdict(int)
        self.consume_rt_ms: defaultdict[str, int] = defaultdict(int)
        self.consume_times: defaultdict[str, int] = defaultdict(int)
        self.consume_ok: defaultdict[str, int] = defaultdict(int)
        self.consume_failed: defaultdict[str, int] = defaultdict(int)

    @staticmethod
    def _key(group: str, topic: str) -> str:
        return f"{topic}@{group}"

    def inc_pull_rt(self, group: str, topic: str, rt_ms: int) -> None:
        k = self._key(group, topic)
        self.pull_rt_ms[k] += rt_ms
        self.pull_times[k] += 1

    def inc_pull_tps(self, group: str, topic: str, msgs: int) -> None:
        self.pull_tps[self._key(group, topic)] += msgs

    def inc_consume_rt(self, group: str, topic: str, rt_ms: int) -> None:
        k = self._key(group, topic)
        self.consume_rt_ms[k] += rt_ms
        self.consume_times[k] += 1

    def inc_consume_ok_tps(self, group: str, topic: str, msgs: int) -> None:
        self.consume_ok[self._key(group, topic)] += msgs

    def inc_consume_failed_tps(self, group: str, topic: str, msgs: int) -> None:
        self.consume_failed[self._key(group, topic)] += msgs
