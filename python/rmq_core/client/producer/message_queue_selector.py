"""MessageQueueSelector (4.9 ``org.apache.rocketmq.client.producer.MessageQueueSelector``) and the built-in
``SelectMessageQueueByHash`` / ``SelectMessageQueueByRandom``: for ordered sends, the caller picks the queue.

``SelectMessageQueueByHash`` uses Java's ``hashCode`` of the argument for str (String.hashCode), int (Integer /
Long.hashCode) and bool, so the same key picks the same queue index as a Java producer; other types use Python's
``hash``. A selector may be a plain function ``fn(mqs, msg, arg) -> MessageQueue`` too.
Thread-safety: stateless (the random selector uses the module RNG).
"""

from __future__ import annotations

import random
from typing import Any, Protocol, runtime_checkable

from rmq_core.format.cq_unit import to_int32
from rmq_core.message import Message, MessageQueue, tags_hash


@runtime_checkable
class MessageQueueSelector(Protocol):
    def select(self, mqs: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue: ...


def java_hash_code(arg: Any) -> int:
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, int):
        if -(1 << 31) <= arg < (1 << 31):
            return arg
        v = arg & 0xFFFFFFFFFFFFFFFF
        return to_int32(v ^ (v >> 32))
    if isinstance(arg, str):
        return tags_hash(arg)  # Java's String.hashCode, as RocketMQ's tagsCode is
    return to_int32(hash(arg))


class SelectMessageQueueByHash:
    def select(self, mqs: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        value = abs(java_hash_code(arg)) % len(mqs)
        return mqs[value]


class SelectMessageQueueByRandom:
    def select(self, mqs: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return mqs[random.randrange(len(mqs))]
