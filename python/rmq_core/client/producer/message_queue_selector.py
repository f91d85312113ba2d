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

from rmq_core.message import Message, MessageQueue


@runtime_checkable
class MessageQueueSelector(Protocol):
    def select(self, mqs: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue: ...


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def java_hash_code(arg: Any) -> int:
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, int):
        if -(1 << 31) <= arg < (1 << 31):
            return arg
        v = arg & 0xFFFFFFFFFFFFFFFF
        return _int32(v ^ (v >> 32))
    if isinstance(arg, str):
        h = 0
        for unit in arg.encode("utf-16-be").hex(" ", 2).split(" ") if arg else ():
            h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
        return _int32(h)
    return _int32(hash(arg))


class SelectMessageQueueByHash:
    def select(self, mqs: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        value = abs(java_hash_code(arg)) % len(mqs)
        return mqs[value]


class SelectMessageQueueByRandom:
    def select(self, mqs: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return mqs[random.randrange(len(mqs))]
