"""The revive log's records: RocketMQ 5's ``PopCheckPoint`` (tag ``ck``), ``AckMsg`` (``ack``), ``BatchAckMsg`` (``bAck``).

Bodies are fastjson JSON with the short names, keys sorted as fastjson writes them, null fields left out:
CK ``{"bm","bn","c","d","it","n","pt","q","reviveTime","ro","so","t"}`` (``reviveTime`` is fastjson's getter
property: popTime + invisibleTime), ACK ``{"ao","bn","c","pt","q","so","t"}``, batch ACK adds ``"aol"`` (a list).
Readers accept the long names too (fastjson's ``alternateNames``). The merge key pairing an ACK with its CK is
topic + group + queueId + startOffset + popTime + brokerName (``PopReviveService``).
Thread-safety: plain values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


def _dumps(doc: dict[str, Any]) -> bytes:
    return json.dumps(
        {k: doc[k] for k in sorted(doc) if doc[k] is not None}, separators=(",", ":"), ensure_ascii=False
    ).encode()


def _get(doc: dict[str, Any], short: str, long: str, default: Any = None) -> Any:
    v = doc.get(short)
    return doc.get(long, default) if v is None else v


@dataclass
class PopCheckPoint:
    start_offset: int
    pop_time: int
    invisible_time: int
    num: int
    queue_id: int
    topic: str
    cid: str
    broker_name: str | None = None
    bit_map: int = 0
    revive_offset: int = 0
    queue_offset_diff: list[int] = field(default_factory=list)
    re_put_times: str | None = None

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    @property
    def merge_key(self) -> str:
        return f"{self.topic}{self.cid}{self.queue_id}{self.start_offset}{self.pop_time}{self.broker_name}"

    def index_of_ack(self, ack_offset: int) -> int:
        """``PopCheckPoint.indexOfAck``: the bit of a queue offset, -1 when the CK does not hold it."""
        if ack_offset < self.start_offset:
            return -1
        if not self.queue_offset_diff:
            return ack_offset - self.start_offset if ack_offset - self.start_offset < self.num else -1
        try:
            return self.queue_offset_diff.index(ack_offset - self.start_offset)
        except ValueError:
            return -1

    def ack_offset_by_index(self, index: int) -> int:
        if not self.queue_offset_diff:
            return self.start_offset + index
        return self.start_offset + self.queue_offset_diff[index]

    def re_put_times_count(self) -> int:
        """``parseRePutTimes``: how often the CK was put back after a failed revive (0: never)."""
        try:
            return int(self.re_put_times) if self.re_put_times else 0
        except ValueError:
            return 0

    def unacked_offsets(self) -> list[int]:
        return [self.ack_offset_by_index(i) for i in range(self.num) if not (self.bit_map >> i) & 1]

    def encode(self) -> bytes:
        return _dumps(
            {
                "so": self.start_offset,
                "pt": self.pop_time,
                "it": self.invisible_time,
                "bm": self.bit_map,
                "n": self.num,
                "q": self.queue_id,
                "t": self.topic,
                "c": self.cid,
                "ro": self.revive_offset,
                "d": list(self.queue_offset_diff) or None,
                "bn": self.broker_name,
                "rp": self.re_put_times,
                "reviveTime": self.revive_time,
            }
        )

    @classmethod
    def decode(cls, body: bytes) -> PopCheckPoint:
        d = json.loads(body)
        return cls(
            start_offset=int(_get(d, "so", "startOffset", 0)),
            pop_time=int(_get(d, "pt", "popTime", 0)),
            invisible_time=int(_get(d, "it", "invisibleTime", 0)),
            num=int(_get(d, "n", "num", 0)),
            queue_id=int(_get(d, "q", "queueId", 0)),
            topic=_get(d, "t", "topic"),
            cid=_get(d, "c", "cid"),
            broker_name=_get(d, "bn", "brokerName"),
            bit_map=int(_get(d, "bm", "bitMap", 0)),
            revive_offset=int(_get(d, "ro", "reviveOffset", 0)),
            queue_offset_diff=[int(x) for x in (_get(d, "d", "queueOffsetDiff") or [])],
            re_put_times=_get(d, "rp", "rePutTimes"),
        )


@dataclass
class AckMsg:
    """An ACK (``ack_offsets`` of one entry, ``ack_offset`` set) or a batch ACK (``batch`` True, ``ack_offset`` -1)."""

    ack_offset: int
    start_offset: int
    consumer_group: str
    topic: str
    queue_id: int
    pop_time: int
    broker_name: str | None
    ack_offsets: list[int] = field(default_factory=list)
    batch: bool = False

    @property
    def merge_key(self) -> str:
        return f"{self.topic}{self.consumer_group}{self.queue_id}{self.start_offset}{self.pop_time}{self.broker_name}"

    def offsets(self) -> list[int]:
        return list(self.ack_offsets) if self.batch else [self.ack_offset]

    def unique_id(self) -> str:
        """``PopMessageProcessor.genAckUniqueId`` / ``genBatchAckUniqueId`` (the record's UNIQ_KEY)."""
        if self.batch:
            listed = "[" + ", ".join(str(o) for o in self.ack_offsets) + "]"
            return "@".join((self.topic, str(self.queue_id), listed, self.consumer_group, str(self.pop_time), "bAck"))
        return "@".join(
            (
                self.topic,
                str(self.queue_id),
                str(self.ack_offset),
                self.consumer_group,
                str(self.pop_time),
                str(self.broker_name),
                "ack",
            )
        )

    def encode(self) -> bytes:
        return _dumps(
            {
                "ao": self.ack_offset,
                "so": self.start_offset,
                "c": self.consumer_group,
                "t": self.topic,
                "q": self.queue_id,
                "pt": self.pop_time,
                "bn": self.broker_name,
                "aol": list(self.ack_offsets) if self.batch else None,
            }
        )

    @classmethod
    def decode(cls, body: bytes, batch: bool = False) -> AckMsg:
        d = json.loads(body)
        return cls(
            ack_offset=int(_get(d, "ao", "ackOffset", -1)),
            start_offset=int(_get(d, "so", "startOffset", 0)),
            consumer_group=_get(d, "c", "consumerGroup"),
            topic=_get(d, "t", "topic"),
            queue_id=int(_get(d, "q", "queueId", 0)),
            pop_time=int(_get(d, "pt", "popTime", 0)),
            broker_name=_get(d, "bn", "brokerName"),
            ack_offsets=[int(x) for x in (_get(d, "aol", "ackOffsetList") or [])],
            batch=batch,
        )


def ck_unique_id(ck: PopCheckPoint) -> str:
    """``PopMessageProcessor.genCkUniqueId``."""
    return "@".join(
        (ck.topic, str(ck.queue_id), str(ck.start_offset), ck.cid, str(ck.pop_time), str(ck.broker_name), "ck")
    )
