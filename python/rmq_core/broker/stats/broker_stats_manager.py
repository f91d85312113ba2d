"""BrokerStatsManager: the broker's put/get statistics under RocketMQ's stat names (store/stats/BrokerStatsManager.java,
4.9), and the consume-message hooks the pull path calls (broker/mqtrace/ConsumeMessageHook.java).

Owns, per stat name (``GROUP_GET_NUMS``, ``TOPIC_PUT_NUMS`` …), a table of RocketMQ's stat keys to a ``StatsItem``
(``value``, ``times``), cumulative since start (no sampling); ``snapshot()`` returns a plain copy. Invariants:
1. Counters only grow (except the moment stats ``GROUP_GET_FALL_SIZE``/``GROUP_GET_FALL_TIME``, which hold the last
   value set) until ``on_topic_deleted``/``on_group_deleted`` drops their keys, as RocketMQ does.
2. A hook that raises is logged and never stops the pull that called it (RocketMQ swallows hook exceptions).
Thread-safety: counters are guarded by one lock (processors run on the broker loop, but a SYNC_FLUSH send may finish
on an executor thread); hooks run on the caller's thread.
Details: docs/BROKER_DESIGN.md, 'Put and get statistics'.
"""

from __future__ import annotations

import enum
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger(__name__)

# Stat names (common/stats/Stats.java), values as RocketMQ spells them.
QUEUE_PUT_NUMS = "QUEUE_PUT_NUMS"
QUEUE_PUT_SIZE = "QUEUE_PUT_SIZE"
QUEUE_GET_NUMS = "QUEUE_GET_NUMS"
QUEUE_GET_SIZE = "QUEUE_GET_SIZE"
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
GROUP_GET_FROM_DISK_NUMS = "GROUP_GET_FROM_DISK_NUMS"
GROUP_GET_FROM_DISK_SIZE = "GROUP_GET_FROM_DISK_SIZE"
BROKER_GET_FROM_DISK_NUMS = "BROKER_GET_FROM_DISK_NUMS"
BROKER_GET_FROM_DISK_SIZE = "BROKER_GET_FROM_DISK_SIZE"
COMMERCIAL_SEND_TIMES = "COMMERCIAL_SEND_TIMES"
COMMERCIAL_SNDBCK_TIMES = "COMMERCIAL_SNDBCK_TIMES"
COMMERCIAL_RCV_TIMES = "COMMERCIAL_RCV_TIMES"
COMMERCIAL_RCV_EPOLLS = "COMMERCIAL_RCV_EPOLLS"
COMMERCIAL_SEND_SIZE = "COMMERCIAL_SEND_SIZE"
COMMERCIAL_RCV_SIZE = "COMMERCIAL_RCV_SIZE"
COMMERCIAL_PERM_FAILURES = "COMMERCIAL_PERM_FAILURES"
GROUP_GET_FALL_SIZE = "GROUP_GET_FALL_SIZE"
GROUP_GET_FALL_TIME = "GROUP_GET_FALL_TIME"
GROUP_GET_LATENCY = "GROUP_GET_LATENCY"

COMMERCIAL_OWNER = "Owner"  # the request extField naming the commercial owner
SIZE_PER_COUNT = 64 * 1024  # message size counted as one commercial "call"

_QUEUE_STATS = (QUEUE_PUT_NUMS, QUEUE_PUT_SIZE, QUEUE_GET_NUMS, QUEUE_GET_SIZE)
_STATS = (
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    GROUP_GET_LATENCY,
    SNDBCK_PUT_NUMS,
    BROKER_PUT_NUMS,
    BROKER_GET_NUMS,
    GROUP_GET_FROM_DISK_NUMS,
    GROUP_GET_FROM_DISK_SIZE,
    BROKER_GET_FROM_DISK_NUMS,
    BROKER_GET_FROM_DISK_SIZE,
    COMMERCIAL_SEND_TIMES,
    COMMERCIAL_RCV_TIMES,
    COMMERCIAL_SEND_SIZE,
    COMMERCIAL_RCV_SIZE,
    COMMERCIAL_RCV_EPOLLS,
    COMMERCIAL_SNDBCK_TIMES,
    COMMERCIAL_PERM_FAILURES,
)
_MOMENT_STATS = (GROUP_GET_FALL_SIZE, GROUP_GET_FALL_TIME)


class StatsType(str, enum.Enum):
    """BrokerStatsManager.StatsType."""

    SEND_SUCCESS = "SEND_SUCCESS"
    SEND_FAILURE = "SEND_FAILURE"
    SEND_BACK = "SEND_BACK"
    SEND_TIMER = "SEND_TIMER"
    SEND_TRANSACTION = "SEND_TRANSACTION"
    RCV_SUCCESS = "RCV_SUCCESS"
    RCV_EPOLLS = "RCV_EPOLLS"
    PERM_FAILURE = "PERM_FAILURE"


@dataclass
class StatsItem:
    """One stat key's cumulative ``value`` (sum of increments) and ``times`` (number of increments)."""

    value: int = 0
    times: int = 0


@dataclass
class ConsumeMessageContext:
    """What a ConsumeMessageHook sees of one pull (mqtrace/ConsumeMessageContext.java)."""

    consumer_group: str | None = None
    topic: str | None = None
    queue_id: int | None = None
    client_host: str | None = None
    store_host: str | None = None
    message_ids: dict[str, int] | None = None
    body_length: int = 0
    success: bool = False
    status: str | None = None
    mq_trace_context: Any = None
    commercial_owner: str | None = None
    commercial_rcv_stats: StatsType | None = None
    commercial_rcv_times: int = 0
    commercial_rcv_size: int = 0
    namespace: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class ConsumeMessageHook(Protocol):
    """mqtrace/ConsumeMessageHook: ``consume_message_before(context)`` is what the pull path calls.
    ``hook_name()`` and ``consume_message_after(context)`` are optional."""

    def consume_message_before(self, context: ConsumeMessageContext) -> None: ...


class BrokerStatsManager:
    """``BrokerStatsManager(cluster_name="DefaultCluster", enable_queue_stat=True)``: cumulative counters per stat
    name and key, plus the consume-message hook list."""

    def __init__(self, cluster_name: str = "DefaultCluster", enable_queue_stat: bool = True) -> None:
        self.cluster_name = cluster_name
        self.enable_queue_stat = enable_queue_stat
        self._lock = threading.Lock()
        names = (_QUEUE_STATS if enable_queue_stat else ()) + _STATS
        self._table: dict[str, dict[str, StatsItem]] = {n: {} for n in names}
        self._moment: dict[str, dict[str, int]] = {n: {} for n in _MOMENT_STATS}
        # (topic, group, queue id) → inc_get's counters (group nums, group size, broker nums) and keys (queue,
        # latency); emptied whenever a counter is deleted, so it never holds one that is no longer in the table
        self._get_items: dict[tuple[str, str, int], tuple[StatsItem, StatsItem, StatsItem, str, str]] = {}
        self._consume_message_hooks: list[ConsumeMessageHook] = []

    # --- lifecycle (nothing to schedule: counters are cumulative) -------------------------------------------
    def start(self) -> None:
        pass

    def shutdown(self) -> None:
        pass

    # --- keys --------------------------------------------------------------------------------------------------
    @staticmethod
    def build_stats_key(*parts: object) -> str:
        """``topic@group``, ``topic@queueId``, ``topic@queueId@group`` or ``queueId@topic@group``: the parts joined
        by ``@`` in the order given, as RocketMQ's overloads do."""
        return "@".join(map(str, parts))

    @staticmethod
    def build_commercial_stats_key(owner: str | None, topic: str, group: str, type_: str) -> str:
        return f"{owner}@{topic}@{group}@{type_}"

    def _add(self, name: str, key: str, value: int, times: int = 1) -> None:
        with self._lock:
            table = self._table.get(name)
            if table is None:
                return
            item = table.get(key)
            if item is None:
                item = table[key] = StatsItem()
            item.value += int(value)
            item.times += int(times)

    # --- put side ----------------------------------------------------------------------------------------------
    def inc_queue_put_nums(self, topic: str, queue_id: int, num: int = 1, times: int = 1) -> None:
        if self.enable_queue_stat:
            self._add(QUEUE_PUT_NUMS, self.build_stats_key(topic, queue_id), num, times)

    def inc_queue_put_size(self, topic: str, queue_id: int, size: int) -> None:
        if self.enable_queue_stat:
            self._add(QUEUE_PUT_SIZE, self.build_stats_key(topic, queue_id), size)

    def inc_topic_put_nums(self, topic: str, num: int = 1, times: int = 1) -> None:
        self._add(TOPIC_PUT_NUMS, topic, num, times)

    def inc_topic_put_size(self, topic: str, size: int) -> None:
        self._add(TOPIC_PUT_SIZE, topic, size)

    def inc_put(self, topic: str, num: int, size: int, times: int = 1) -> None:
        """``incTopicPutNums`` + ``incTopicPutSize`` + ``incBrokerPutNums`` for ``times`` stored sends of ``num``
        messages and ``size`` bytes in all (the send path counts a chunk's sends per topic at once), under one
        lock: the same counts as ``times`` calls, one per send."""
        with self._lock:
            for name, key, value in (
                (TOPIC_PUT_NUMS, topic, num),
                (TOPIC_PUT_SIZE, topic, size),
                (BROKER_PUT_NUMS, self.cluster_name, num),
            ):
                table = self._table.get(name)
                if table is None:
                    continue
                item = table.get(key)
                if item is None:
                    item = table[key] = StatsItem()
                item.value += value
                item.times += times

    def inc_broker_put_nums(self, inc_value: int = 1) -> None:
        self._add(BROKER_PUT_NUMS, self.cluster_name, inc_value)

    def inc_send_back_nums(self, group: str, topic: str) -> None:
        self._add(SNDBCK_PUT_NUMS, self.build_stats_key(topic, group), 1)

    # --- get side ----------------------------------------------------------------------------------------------
    def inc_queue_get_nums(self, group: str, topic: str, queue_id: int, inc_value: int) -> None:
        if self.enable_queue_stat:
            self._add(QUEUE_GET_NUMS, self.build_stats_key(topic, queue_id, group), inc_value)

    def inc_queue_get_size(self, group: str, topic: str, queue_id: int, inc_value: int) -> None:
        if self.enable_queue_stat:
            self._add(QUEUE_GET_SIZE, self.build_stats_key(topic, queue_id, group), inc_value)

    def inc_group_get_nums(self, group: str, topic: str, inc_value: int) -> None:
        self._add(GROUP_GET_NUMS, self.build_stats_key(topic, group), inc_value)

    def inc_group_get_size(self, group: str, topic: str, inc_value: int) -> None:
        self._add(GROUP_GET_SIZE, self.build_stats_key(topic, group), inc_value)

    def inc_group_get_latency(self, group: str, topic: str, queue_id: int, inc_value: int) -> None:
        key = (
            self.build_stats_key(queue_id, topic, group)
            if self.enable_queue_stat
            else self.build_stats_key(topic, group)
        )
        self._add(GROUP_GET_LATENCY, key, inc_value)

    def inc_get(
        self, group: str, topic: str, queue_id: int, num: int, size: int, fall_behind: int | None, latency: int | None
    ) -> None:
        """What a found pull counts, under one lock: ``incGroupGetNums`` + ``incGroupGetSize`` + ``incBrokerGetNums``
        for ``num`` messages of ``size`` bytes, and (when not None) ``recordDiskFallBehindTime`` and
        ``incGroupGetLatency``: the same counts as those calls, one by one. A queue's keys and its three counters are
        looked up once (``_get_items``, emptied whenever a counter is deleted)."""
        with self._lock:
            items = self._get_items.get((topic, group, queue_id))
            if items is None:
                group_key, queue_key = self.build_stats_key(topic, group), self.build_stats_key(queue_id, topic, group)
                items = self._get_items[(topic, group, queue_id)] = (
                    self._item(GROUP_GET_NUMS, group_key),
                    self._item(GROUP_GET_SIZE, group_key),
                    self._item(BROKER_GET_NUMS, self.cluster_name),
                    queue_key,
                    queue_key if self.enable_queue_stat else group_key,
                )
            nums, sizes, broker_nums, queue_key, latency_key = items
            nums.value += num
            nums.times += 1
            sizes.value += size
            sizes.times += 1
            broker_nums.value += num
            broker_nums.times += 1
            if fall_behind is not None:
                self._moment[GROUP_GET_FALL_TIME][queue_key] = int(fall_behind)
            if latency is not None:
                latency_item = self._item(GROUP_GET_LATENCY, latency_key)
                latency_item.value += int(latency)
                latency_item.times += 1

    def _item(self, name: str, key: str) -> StatsItem:
        """The counter of a stat that always exists, created at 0; the caller holds the lock."""
        table = self._table[name]
        item = table.get(key)
        if item is None:
            item = table[key] = StatsItem()
        return item

    def inc_broker_get_nums(self, inc_value: int) -> None:
        self._add(BROKER_GET_NUMS, self.cluster_name, inc_value)

    def inc_commercial_value(
        self, name: str, owner: str | None, group: str, topic: str, type_: str, inc_value: int
    ) -> None:
        self._add(name, self.build_commercial_stats_key(owner, topic, group, type_), inc_value)

    def record_disk_fall_behind_time(self, group: str, topic: str, queue_id: int, fall_behind: int) -> None:
        with self._lock:
            self._moment[GROUP_GET_FALL_TIME][self.build_stats_key(queue_id, topic, group)] = int(fall_behind)

    def record_disk_fall_behind_size(self, group: str, topic: str, queue_id: int, fall_behind: int) -> None:
        with self._lock:
            self._moment[GROUP_GET_FALL_SIZE][self.build_stats_key(queue_id, topic, group)] = int(fall_behind)

    # --- deletion ----------------------------------------------------------------------------------------------
    def on_topic_deleted(self, topic: str) -> None:
        with self._lock:
            self._get_items.clear()
            for name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
                self._table[name].pop(topic, None)
            prefixed = [GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS]
            if self.enable_queue_stat:
                prefixed += list(_QUEUE_STATS)
            for name in prefixed:
                self._drop(self._table[name], lambda parts: parts[0] == topic)
            self._drop(self._table[GROUP_GET_LATENCY], lambda parts: topic in parts[:-1])
            for moment in self._moment.values():
                self._drop(moment, lambda parts: len(parts) == 3 and parts[1] == topic)

    def on_group_deleted(self, group: str) -> None:
        with self._lock:
            self._get_items.clear()
            suffixed = [GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS, GROUP_GET_LATENCY]
            if self.enable_queue_stat:
                suffixed += [QUEUE_GET_NUMS, QUEUE_GET_SIZE]
            for name in suffixed:
                self._drop(self._table[name], lambda parts: parts[-1] == group)
            for moment in self._moment.values():
                self._drop(moment, lambda parts: parts[-1] == group)

    @staticmethod
    def _drop(table: dict[str, Any], doomed: Any) -> None:
        for key in [k for k in table if doomed(k.split("@"))]:
            del table[key]

    # --- reading -----------------------------------------------------------------------------------------------
    def get_stats_item(self, name: str, key: str) -> StatsItem | None:
        with self._lock:
            item = self._table.get(name, {}).get(key)
            return StatsItem(item.value, item.times) if item is not None else None

    def values(self, name: str) -> dict[str, int]:
        """``{stat key: value}`` of one stat name (a copy; what a sampler needs without a whole snapshot)."""
        with self._lock:
            return {k: it.value for k, it in self._table.get(name, {}).items()}

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """``{stat name: {stat key: {"value": v, "times": t}}}`` for the counters, ``{stat name: {key: v}}`` for the
        moment stats; a deep copy."""
        with self._lock:
            out: dict[str, dict[str, Any]] = {
                name: {k: {"value": it.value, "times": it.times} for k, it in table.items()}
                for name, table in self._table.items()
            }
            for name, moment in self._moment.items():
                out[name] = dict(moment)
            return out

    # --- consume message hooks ---------------------------------------------------------------------------------
    def register_consume_message_hook(self, hook: ConsumeMessageHook) -> None:
        if not callable(getattr(hook, "consume_message_before", None)):
            raise TypeError(f"{hook!r} has no consume_message_before(context)")
        self._consume_message_hooks.append(hook)

    def unregister_consume_message_hook(self, hook: ConsumeMessageHook) -> None:
        self._consume_message_hooks.remove(hook)

    @property
    def consume_message_hooks(self) -> list[ConsumeMessageHook]:
        return list(self._consume_message_hooks)

    def has_consume_message_hook(self) -> bool:
        return bool(self._consume_message_hooks)

    def execute_consume_message_hook_before(self, context: ConsumeMessageContext) -> None:
        for hook in list(self._consume_message_hooks):
            try:
                hook.consume_message_before(context)
            except Exception:  # invariant 2
                log.exception("consume message hook %r failed", hook)
