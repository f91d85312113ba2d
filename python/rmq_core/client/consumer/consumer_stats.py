"""Consumer statistics (cl/stat/ConsumerStatsManager.java, reduced): pull RT/TPS and consume RT/OK/FAILED counts per
(group, topic). Counters are plain ints updated without a lock: they are statistics, a lost increment under a race is
acceptable (as RocketMQ's sampling is approximate)."""

from __future__ import annotations

from collections import defaultdict

from rmq_core.remoting.body.consumer_running_info import ConsumeStatus


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

    def consume_status(self, group: str, topic: str, elapsed_s: float) -> ConsumeStatus:
        """ConsumeStatus of (group, topic): mean pull and consume RT, and TPS as totals over ``elapsed_s``."""
        k = self._key(group, topic)
        return ConsumeStatus(
            pull_rt=self.pull_rt_ms[k] / self.pull_times[k] if self.pull_times[k] else 0.0,
            pull_tps=self.pull_tps[k] / elapsed_s,
            consume_rt=self.consume_rt_ms[k] / self.consume_times[k] if self.consume_times[k] else 0.0,
            consume_ok_tps=self.consume_ok[k] / elapsed_s,
            consume_failed_tps=self.consume_failed[k] / elapsed_s,
            consume_failed_msgs=self.consume_failed[k],
        )
