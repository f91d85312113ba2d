"""Queue ranges and the offset JSON of the ``rocketmq`` source.

``QueueRange(topic, broker_name, queue_id, start, end)`` is one slice of one message queue, ``[start, end)`` in queue
offsets. Streaming offsets are JSON objects ``{"topic": {"broker": {"qid": offset}}}`` (the ``qid`` keys are
strings); in Python they are ``OffsetMap`` = ``{(topic, broker, queue_id): offset}``. An offset of -2 (EARLIEST)
in a start map means "the queue's min offset when read" (a queue that appeared after the previous batch).

Invariants: ``to_json(from_json(d)) == d`` for well-formed d; keys sorted so equal maps serialise equally.
Thread-safety: pure functions and immutable values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

QueueKey = tuple[str, str, int]
OffsetMap = dict[QueueKey, int]


@dataclass(frozen=True, order=True)
class QueueRange:
    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int

    @property
    def key(self) -> QueueKey:
        return (self.topic, self.broker_name, self.queue_id)

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def to_json(offsets: Mapping[QueueKey, int]) -> dict[str, dict[str, dict[str, int]]]:
    out: dict[str, dict[str, dict[str, int]]] = {}
    for (topic, broker, qid), off in sorted(offsets.items()):
        out.setdefault(topic, {}).setdefault(broker, {})[str(qid)] = int(off)
    return out


def from_json(doc: Mapping[str, Any] | None) -> OffsetMap:
    """The inverse of ``to_json``; raises ValueError naming the bad entry."""
    out: OffsetMap = {}
    for topic, brokers in (doc or {}).items():
        if not isinstance(brokers, Mapping):
            raise ValueError(f"offset JSON: topic {topic!r} must map to an object of brokers")
        for broker, queues in brokers.items():
            if not isinstance(queues, Mapping):
                raise ValueError(f"offset JSON: {topic}/{broker} must map to an object of queue ids")
            for qid, off in queues.items():
                try:
                    out[(str(topic), str(broker), int(qid))] = int(off)
                except (TypeError, ValueError):
                    raise ValueError(f"offset JSON: bad entry {topic}/{broker}/{qid}: {off!r}") from None
    return out


def describe(key: QueueKey) -> str:
    topic, broker, qid = key
    return f"topic {topic!r} broker {broker!r} queue {qid}"
