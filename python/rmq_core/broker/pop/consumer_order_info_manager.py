"""ConsumerOrderInfoManager (5.x ``broker/offset/ConsumerOrderInfoManager.java``): FIFO pops' queue locks →
``<config_dir>/consumerOrderInfo.json``.

Per ``topic@group`` and queue id an OrderInfo: ``popTime``, ``i`` (invisible time), ``o`` (the popped offsets: the
first, then the others as differences from it), ``ot`` (offset → next visible time, set by change-invisible), ``oc``
(offset → times popped before), ``l`` (last pop), ``cm`` (acked bits), ``a`` (attempt id). A queue is blocked while
one of its popped offsets is neither acked nor visible again; a pop with the same attempt id is not blocked (a
retried receive gets the same messages again). An ack commits its bit and moves the group's offset to the first
unacked one. File: ``{"table":{"topic@group":{0:{...}}}}`` (fastjson, int keys bare).
Not thread-safe: owned by the broker's event loop.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from rmq_core.broker.config_manager import ConfigManager
from rmq_core.broker.pop import extra_info as ei
from rmq_core.broker.pop.pop_results import AckResult, ChangeInvisibleResult
from rmq_core.remoting import fastjson
from rmq_core.remoting.codes import ResponseCode

if TYPE_CHECKING:
    from rmq_core.broker.consumer_offset_manager import ConsumerOffsetManager
    from rmq_core.broker.pop.extra_info import ReceiptHandle

CONSUMER_ORDER_INFO_FILE = "consumerOrderInfo.json"


class OrderlyAckHost(Protocol):
    """What an orderly ack or change of invisible time needs of ``pop_service.PopService``."""

    @property
    def consumer_offset_manager(self) -> ConsumerOffsetManager: ...

    def notify(self, topic: str) -> None: ...


def _now() -> int:
    return int(time.time() * 1000)


@dataclass
class OrderInfo:
    pop_time: int
    invisible_time: int | None
    offset_list: list[int]
    attempt_id: str | None = None
    commit_offset_bit: int = 0
    last_consume_timestamp: int = 0
    offset_next_visible_time: dict[int, int] = field(default_factory=dict)
    offset_consumed_count: dict[int, int] = field(default_factory=dict)

    @staticmethod
    def build(offsets: list[int]) -> list[int]:
        if len(offsets) <= 1:
            return list(offsets)
        return [offsets[0]] + [o - offsets[0] for o in offsets[1:]]

    def queue_offset(self, i: int) -> int:
        return self.offset_list[0] if i == 0 else self.offset_list[0] + self.offset_list[i]

    def offsets(self) -> list[int]:
        return [self.queue_offset(i) for i in range(len(self.offset_list))]

    def is_not_ack(self, i: int) -> bool:
        return not (self.commit_offset_bit >> i) & 1

    def need_block(self, attempt_id: str | None, invisible_time: int) -> bool:
        if not self.offset_list:
            return False
        if self.attempt_id is not None and self.attempt_id == attempt_id:
            return False
        if not self.invisible_time or self.invisible_time <= 0:
            self.invisible_time = invisible_time
        now = _now()
        for i in range(len(self.offset_list)):
            if self.is_not_ack(i):
                visible = self.offset_next_visible_time.get(self.queue_offset(i), self.pop_time + self.invisible_time)
                if now < visible:
                    return True
        return False

    def next_offset(self) -> int:
        if not self.offset_list:
            return -2
        for i in range(len(self.offset_list)):
            if self.is_not_ack(i):
                return self.queue_offset(i)
        return self.queue_offset(len(self.offset_list) - 1) + 1

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "a": self.attempt_id,
            "cm": self.commit_offset_bit,
            "i": self.invisible_time,
            "l": self.last_consume_timestamp,
            "o": self.offset_list,
            "oc": self.offset_consumed_count or None,
            "ot": self.offset_next_visible_time or None,
            "popTime": self.pop_time,
        }
        return {k: v for k, v in doc.items() if v is not None}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> OrderInfo:
        return cls(
            pop_time=int(d.get("popTime", 0)),
            invisible_time=None if d.get("i") is None else int(d["i"]),
            offset_list=[int(x) for x in d.get("o") or []],
            attempt_id=d.get("a"),
            commit_offset_bit=int(d.get("cm", 0)),
            last_consume_timestamp=int(d.get("l", 0)),
            offset_next_visible_time={int(k): int(v) for k, v in (d.get("ot") or {}).items()},
            offset_consumed_count={int(k): int(v) for k, v in (d.get("oc") or {}).items()},
        )


class ConsumerOrderInfoManager(ConfigManager):
    """``ConsumerOrderInfoManager(config_dir)``: ``check_block``, ``update``, ``ack_orderly``,
    ``change_invisible_orderly``, ``clear_block``."""

    def __init__(self, config_dir: str) -> None:
        super().__init__(os.path.join(os.fspath(config_dir), CONSUMER_ORDER_INFO_FILE))
        self.table: dict[str, dict[int, OrderInfo]] = {}

    @staticmethod
    def key(topic: str, group: str) -> str:
        return f"{topic}@{group}"

    def get(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        return self.table.get(self.key(topic, group), {}).get(queue_id)

    def check_block(self, attempt_id: str | None, topic: str, group: str, queue_id: int, invisible_time: int) -> bool:
        info = self.get(topic, group, queue_id)
        return info is not None and info.need_block(attempt_id, invisible_time)

    def clear_block(self, topic: str, group: str, queue_id: int) -> None:
        """``clearBlock``: forget the queue's FIFO lock (its offset was reset: what was locked is not pending)."""
        qs = self.table.get(self.key(topic, group))
        if qs is not None:
            qs.pop(queue_id, None)

    def update(
        self,
        attempt_id: str | None,
        is_retry: bool,
        topic: str,
        group: str,
        queue_id: int,
        pop_time: int,
        invisible_time: int,
        offsets: list[int],
    ) -> list[tuple[int, int]]:
        """Record a FIFO pop of ``offsets``; returns (offset, times popped before) for the answer's orderCountInfo."""
        qs = self.table.setdefault(self.key(topic, group), {})
        prev = qs.get(queue_id)
        info = OrderInfo(pop_time, invisible_time, OrderInfo.build(offsets), attempt_id, 0, _now())
        if prev is not None:
            if prev.attempt_id is not None and prev.attempt_id == attempt_id:
                info.offset_consumed_count = dict(prev.offset_consumed_count)
            else:
                before = set(prev.offsets())
                info.offset_consumed_count = {
                    o: prev.offset_consumed_count.get(o, 0) + 1 for o in info.offsets() if o in before
                }
        qs[queue_id] = info
        return [(o, info.offset_consumed_count.get(o, 0)) for o in offsets]

    def commit_and_next(self, topic: str, group: str, queue_id: int, queue_offset: int, pop_time: int) -> int:
        """The group's next offset after acking ``queue_offset``; -1: not popped, -2: another pop's handle."""
        info = self.get(topic, group, queue_id)
        if info is None:
            return queue_offset + 1
        if not info.offset_list:
            return -1
        if pop_time != info.pop_time:
            return -2
        offsets = info.offsets()
        if queue_offset not in offsets:
            return -1
        info.commit_offset_bit |= 1 << offsets.index(queue_offset)
        return info.next_offset()

    def ack_orderly(
        self, service: OrderlyAckHost, group: str, topic: str, queue_id: int, offset: int, handle: ReceiptHandle
    ) -> AckResult:
        com = service.consumer_offset_manager
        if offset < com.query_offset(group, topic, queue_id):
            return AckResult(ResponseCode.SUCCESS)
        nxt = self.commit_and_next(topic, group, queue_id, offset, handle.pop_time)
        if nxt == -1:
            return AckResult(
                ResponseCode.MESSAGE_ILLEGAL,
                f"offset is illegal, key:{topic}@{group}@{queue_id}, commit:{offset}, next:{nxt}",
            )
        if nxt > -1:
            com.commit_offset("ackOrderly", group, topic, queue_id, nxt)
            if not self.check_block(None, topic, group, queue_id, handle.invisible_time):
                service.notify(topic)
        return AckResult(ResponseCode.SUCCESS)

    def change_invisible_orderly(
        self,
        service: OrderlyAckHost,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        handle: ReceiptHandle,
        invisible_time: int,
    ) -> ChangeInvisibleResult:
        pop_time = handle.pop_time
        info = self.get(topic, group, queue_id)
        next_visible = _now() + invisible_time
        if offset >= service.consumer_offset_manager.query_offset(group, topic, queue_id):
            if info is not None and info.pop_time == pop_time:
                info.offset_next_visible_time[offset] = next_visible
        new_invisible = next_visible - pop_time
        new_handle = ei.build_extra_info(
            offset, pop_time, new_invisible, handle.revive_qid, topic, handle.broker_name, queue_id, offset
        )
        return ChangeInvisibleResult(ResponseCode.SUCCESS, None, new_handle, pop_time, new_invisible, handle.revive_qid)

    # --- file ----------------------------------------------------------------------------------------------------
    def encode(self, pretty: bool = False) -> str:
        doc = {"table": {k: {q: info.to_json() for q, info in qs.items()} for k, qs in self.table.items()}}
        return fastjson.dumps(doc, pretty=pretty)

    def decode(self, text: str) -> None:
        doc = fastjson.loads(text)
        table: dict[str, dict[int, OrderInfo]] = {}
        for k, qs in (doc.get("table") or {}).items():
            table[str(k)] = {int(q): OrderInfo.from_json(v) for q, v in (qs or {}).items()}
        self.table = table
