"""The per-queue offset tables of the admin requests (rp/admin/TopicStatsTable.java, TopicOffset.java,
ConsumeStats.java, OffsetWrapper.java).

Owns TopicStatsTable (202), ConsumeStats (208), ResetOffsetBody (220/222) and GetConsumerStatusBody (221/223): maps
keyed by a MessageQueue JSON object (``{"brokerName","queueId","topic"}``, ``fastjson.RawKey``), fields in
alphabetical order, as fastjson writes ``Map<MessageQueue, …>``.
Invariant: a body read back (``decode``) that is not of that shape raises ``BodyDecodeError``.
Plain data; no shared state.
Details (each body's JSON): docs/BROKER_DESIGN.md, 'Queue offset tables'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmq_core.message import MessageQueue
from rmq_core.remoting import fastjson
from rmq_core.remoting.body.lock_batch import mq_from_json_dict, mq_to_json_dict
from rmq_core.remoting.body.route import BodyDecodeError


def mq_key(mq: MessageQueue) -> fastjson.RawKey:
    """A MessageQueue as the key of a fastjson map."""
    return fastjson.RawKey(fastjson.dumps(mq_to_json_dict(mq)))


def _mq_table(data: bytes | str, what: str) -> tuple[list[tuple[MessageQueue, Any]], Any]:
    """The ``offsetTable`` entries of a body (MessageQueue, value) and the whole document's other fields."""
    text = bytes(data).decode("utf-8") if not isinstance(data, str) else data
    raw = fastjson.raw_field(text, "offsetTable")
    try:
        items = fastjson.map_items(raw) if raw is not None else []
        return [(mq_from_json_dict(k), v) for k, v in items], text
    except (ValueError, KeyError, TypeError) as e:
        raise BodyDecodeError(f"{what}: bad offsetTable: {e}") from None


@dataclass
class TopicOffset:
    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "lastUpdateTimestamp": self.last_update_timestamp,
            "maxOffset": self.max_offset,
            "minOffset": self.min_offset,
        }


@dataclass
class TopicStatsTable:
    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)

    def encode(self) -> bytes:
        table = {mq_key(mq): v.to_json_dict() for mq, v in sorted(self.offset_table.items())}
        return fastjson.dumps({"offsetTable": table}).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes | str) -> TopicStatsTable:
        items, _ = _mq_table(data, "TopicStatsTable")
        return cls(
            {
                mq: TopicOffset(int(v["minOffset"]), int(v["maxOffset"]), int(v.get("lastUpdateTimestamp", 0)))
                for mq, v in items
            }
        )


@dataclass
class OffsetWrapper:
    broker_offset: int = 0
    consumer_offset: int = 0
    last_timestamp: int = 0
    pull_offset: int = -1  # 5.x: read up to here (in flight: pull − consumer); -1: not sent (4.x), read as consumer

    def __post_init__(self) -> None:
        if self.pull_offset < 0:
            self.pull_offset = self.consumer_offset

    @property
    def inflight(self) -> int:
        return max(self.pull_offset - self.consumer_offset, 0)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "pullOffset": self.pull_offset,
            "lastTimestamp": self.last_timestamp,
        }


@dataclass
class ConsumeStats:
    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def compute_total_diff(self) -> int:
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())

    def compute_inflight_total_diff(self) -> int:
        return sum(w.pull_offset - w.consumer_offset for w in self.offset_table.values())

    def encode(self) -> bytes:
        table = {mq_key(mq): v.to_json_dict() for mq, v in sorted(self.offset_table.items())}
        return fastjson.dumps({"consumeTps": float(self.consume_tps), "offsetTable": table}).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes | str) -> ConsumeStats:
        items, text = _mq_table(data, "ConsumeStats")
        tps = fastjson.raw_field(text, "consumeTps")
        return cls(
            {
                mq: OffsetWrapper(
                    int(v["brokerOffset"]),
                    int(v["consumerOffset"]),
                    int(v.get("lastTimestamp", 0)),
                    int(v.get("pullOffset", -1)),
                )
                for mq, v in items
            },
            float(tps) if tps else 0.0,
        )


@dataclass
class ResetOffsetBody:
    offset_table: dict[MessageQueue, int] = field(default_factory=dict)

    def encode(self) -> bytes:
        table = {mq_key(mq): int(v) for mq, v in sorted(self.offset_table.items())}
        return fastjson.dumps({"offsetTable": table}).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes | str) -> ResetOffsetBody:
        items, _ = _mq_table(data, "ResetOffsetBody")
        return cls({mq: int(v) for mq, v in items})


@dataclass
class GetConsumerStatusBody:
    """The broker's answer (``consumer_table``, one client's table each) and a client's answer to
    GET_CONSUMER_STATUS_FROM_CLIENT (``message_queue_table``: its offsets of the topic's queues)."""

    consumer_table: dict[str, fastjson.RawValue] = field(default_factory=dict)
    message_queue_table: dict[MessageQueue, int] = field(default_factory=dict)

    def encode(self) -> bytes:
        mqs = {mq_key(mq): int(v) for mq, v in sorted(self.message_queue_table.items())}
        doc = {"consumerTable": dict(sorted(self.consumer_table.items())), "messageQueueTable": mqs}
        return fastjson.dumps(doc).encode("utf-8")

    @classmethod
    def decode_message_queue_table(cls, data: bytes | str) -> dict[MessageQueue, int]:
        """A client's answer: its ``messageQueueTable``."""
        text = bytes(data).decode("utf-8") if not isinstance(data, str) else data
        raw = fastjson.raw_field(text, "messageQueueTable")
        try:
            return {mq_from_json_dict(k): int(v) for k, v in (fastjson.map_items(raw) if raw else [])}
        except (ValueError, KeyError, TypeError) as e:
            raise BodyDecodeError(f"GetConsumerStatusBody: bad messageQueueTable: {e}") from None
