"""Messages as RocketMQ models them: Message (what a producer sends), MessageExt (what the store holds),
MessageQueue (topic, broker, queue id), and the decoding of pull bodies.

Invariants:
1. Tags, keys and the delay level live in ``properties`` (``TAGS``, ``KEYS``, ``DELAY``), as in Java's ``Message``.
2. ``MessageExt`` instances are created by the decoders without ``__init__``: every slot is set.
3. ``msg_id`` on a MessageExt is the *offset* msg id; ``uniq_key`` is the producer's id.
4. With the Rust engine ``Message`` is not a garbage-collected type (a native copy of the class below), nor are the
   ``MessageExt`` objects its decoder builds; a cycle through one is never collected.
5. ``Message.__init__``: the Rust engine's class runs the common call natively, with this ``__init__``'s results.
Thread-safety: plain objects with no locks of their own (as Java's Message).
Details (each invariant in full): docs/CORE_API.md, 'Message objects'.
"""

from __future__ import annotations

import calendar
import os
import socket
import struct
import time
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmq_core import _backend
from rmq_core.errors import CorruptRecordError
from rmq_core.format.message import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    COMPRESSION_CODE_ZLIB,
    COMPRESSION_TYPE_MASK,
    MULTI_TAGS_FLAG,
    STOREHOSTADDRESS_V6_FLAG,
    SYSFLAG_COMPRESSION_ZLIB,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    compression_type,
)
from rmq_core.format.message import decode_offset_msg_id as _decode_offset_msg_id

_untrack_message = _backend.impl.untrack_message

# Well-known property names (MessageConst.java).
PROPERTY_TAGS = "TAGS"
PROPERTY_KEYS = "KEYS"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
# RocketMQ 5's timer messages (MessageConst.java 5.x)
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
PROPERTY_TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
# RocketMQ 5's POP consumption (MessageConst.java 5.x): a popped message's receipt handle, its first pop time
PROPERTY_POP_CK = "POP_CK"
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"
KEY_SEPARATOR = " "
UNIQ_KEY = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX

# MessageSysFlag.java: the SYSFLAG bits are the format module's (imported above, re-exported here)


class Message:
    """A message to send: ``Message(topic, body, tags=None, keys=None, properties=None, flag=0, delay_time_level=0,
    deliver_time_ms=None)``.

    ``deliver_time_ms`` (epoch ms) makes it a RocketMQ 5 timer message (property ``TIMER_DELIVER_MS``, Java's
    ``setDeliverTimeMs``); ``delay_time_sec`` / ``delay_time_ms`` are the relative forms (``TIMER_DELAY_SEC`` /
    ``TIMER_DELAY_MS``, ``setDelayTimeSec`` / ``setDelayTimeMs``). A 5.x broker (or rmq_core's) delivers it at that
    time; a delay level, when set too, wins."""

    __slots__ = ("body", "flag", "properties", "topic")
    topic: str
    body: bytes
    flag: int
    properties: dict[str, str]

    def __init__(
        self,
        topic: str,
        body: bytes,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        properties: dict[str, str] | None = None,
        flag: int = 0,
        delay_time_level: int = 0,
        deliver_time_ms: int | None = None,
    ) -> None:
        # the common case first and cheapest: bytes as they are, tags into a dict display (users build these by
        # the hundred thousand; each test or call here is measurable in bench_store_api's put+build)
        if type(body) is not bytes:
            if not isinstance(body, (bytes, bytearray, memoryview)):
                raise TypeError(f"body must be bytes, got {type(body).__name__}")
            body = bytes(body)
        self.topic = topic
        self.body = body
        self.flag = flag
        props: dict[str, str] = {PROPERTY_TAGS: tags} if tags else {}
        if keys:
            props[PROPERTY_KEYS] = keys if isinstance(keys, str) else KEY_SEPARATOR.join(keys)
        if delay_time_level > 0:
            props[PROPERTY_DELAY_TIME_LEVEL] = str(delay_time_level)
        if deliver_time_ms is not None:
            props[PROPERTY_TIMER_DELIVER_MS] = str(int(deliver_time_ms))
        if properties:
            for k, v in properties.items():
                if v is not None:
                    props[str(k)] = str(v)
        self.properties = props
        _untrack_message(self)  # invariant 4: a batch being built costs the collector nothing

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        self._set_property(PROPERTY_TAGS, value)

    @property
    def keys(self) -> str | None:
        return self.properties.get(PROPERTY_KEYS)

    @keys.setter
    def keys(self, value: str | Iterable[str] | None) -> None:
        if value is not None and not isinstance(value, str):
            value = KEY_SEPARATOR.join(value)
        self._set_property(PROPERTY_KEYS, value)

    @property
    def delay_time_level(self) -> int:
        return int(self.properties.get(PROPERTY_DELAY_TIME_LEVEL, "0") or 0)

    @delay_time_level.setter
    def delay_time_level(self, level: int) -> None:
        self._set_property(PROPERTY_DELAY_TIME_LEVEL, str(level) if level > 0 else None)

    @property
    def deliver_time_ms(self) -> int:
        """``getDeliverTimeMs``: the ``TIMER_DELIVER_MS`` property, 0 when absent."""
        return int(self.properties.get(PROPERTY_TIMER_DELIVER_MS, "0") or 0)

    @deliver_time_ms.setter
    def deliver_time_ms(self, time_ms: int | None) -> None:
        self._set_property(PROPERTY_TIMER_DELIVER_MS, None if time_ms is None else str(int(time_ms)))

    @property
    def delay_time_sec(self) -> int:
        """``getDelayTimeSec``: the ``TIMER_DELAY_SEC`` property, 0 when absent."""
        return int(self.properties.get(PROPERTY_TIMER_DELAY_SEC, "0") or 0)

    @delay_time_sec.setter
    def delay_time_sec(self, sec: int | None) -> None:
        self._set_property(PROPERTY_TIMER_DELAY_SEC, None if sec is None else str(int(sec)))

    @property
    def delay_time_ms(self) -> int:
        """``getDelayTimeMs``: the ``TIMER_DELAY_MS`` property, 0 when absent."""
        return int(self.properties.get(PROPERTY_TIMER_DELAY_MS, "0") or 0)

    @delay_time_ms.setter
    def delay_time_ms(self, time_ms: int | None) -> None:
        self._set_property(PROPERTY_TIMER_DELAY_MS, None if time_ms is None else str(int(time_ms)))

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(UNIQ_KEY)

    def get_property(self, name: str, default: str | None = None) -> str | None:
        return self.properties.get(name, default)

    def put_property(self, name: str, value: str) -> None:
        self.properties[name] = value

    def _set_property(self, name: str, value: str | None) -> None:
        if value is None:
            self.properties.pop(name, None)
        else:
            self.properties[name] = value

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, s) for s in _all_slots(type(self)))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        body = self.body if len(self.body) <= 32 else self.body[:32] + b"..."
        return f"{type(self).__name__}(topic={self.topic!r}, tags={self.tags!r}, body={body!r})"


# invariants 4 and 5: the engine's class (the Rust engine's native copy of the class above, not a GC type, its
# __init__ native for the common call and this one's for every other; the twin's is this class as written). Type
# checkers read the class above; parity tests call its __init__ as _python_init.
_python_init = Message.__init__
if not TYPE_CHECKING:
    Message = _backend.impl.message_class(Message, _python_init)


class MessageExt(Message):
    """A stored message, as decoded from the CommitLog or a pull body."""

    __slots__ = (
        "body_crc",
        "born_host",
        "born_timestamp",
        "broker_name",
        "commitlog_offset",
        "msg_id",
        "prepared_transaction_offset",
        "queue_id",
        "queue_offset",
        "reconsume_times",
        "store_host",
        "store_size",
        "store_timestamp",
        "sys_flag",
    )
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    store_size: int
    body_crc: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    prepared_transaction_offset: int
    msg_id: str
    broker_name: str | None

    @property
    def offset_msg_id(self) -> str:
        return self.msg_id

    @property
    def transaction_id(self) -> str | None:
        """Java's ``getTransactionId()`` of a pulled message (PullAPIWrapper.processPullResult): the UNIQ_KEY of a
        message whose TRAN_MSG property parses as true (Boolean.parseBoolean: "true" in any case) — a committed
        transactional message keeps it — else None."""
        props = self.properties
        flag = props.get(PROPERTY_TRANSACTION_PREPARED)
        if flag is None or flag.lower() != "true":
            return None
        return props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    def to_dict(self) -> dict[str, Any]:
        return {s: getattr(self, s) for s in _all_slots(type(self))}

    def __repr__(self) -> str:
        return (
            f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
            f"commitlog_offset={self.commitlog_offset}, tags={self.tags!r}, body_len={len(self.body)})"
        )


def _all_slots(cls: type) -> tuple[str, ...]:
    cached = _SLOTS_CACHE.get(cls)
    if cached is None:
        names: list[str] = []
        for klass in reversed(cls.__mro__):
            names.extend(getattr(klass, "__slots__", ()))
        cached = _SLOTS_CACHE[cls] = tuple(names)
    return cached


_SLOTS_CACHE: dict[type, tuple[str, ...]] = {}


@dataclass(frozen=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker. Hashable and ordered (topic, broker_name, queue_id), as RocketMQ compares them."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"


def tags_hash(tags: str) -> int:
    """Java ``String.hashCode`` of the tag string: RocketMQ's tagsCode (sign-extended int32)."""
    return _backend.impl.tags_hash(tags)


def decode_messages(buf: bytes, decompress: bool = True) -> list[MessageExt]:
    """Decode concatenated stored records (a pull body) into MessageExt objects.

    Compressed bodies (sys flag bit 0) are inflated when ``decompress`` is true, as RocketMQ's client does; a body
    flagged compressed that does not inflate raises ``CorruptRecordError`` (offset: where its record starts in ``buf``).
    """
    msgs = _backend.impl.decode_messages(buf)
    if decompress:
        pos = 0
        for m in msgs:
            if m.sys_flag & COMPRESSED_FLAG:
                try:
                    m.body = _decompress(m.body, m.sys_flag)
                except zlib.error as e:
                    raise CorruptRecordError(
                        f"corrupt record at offset {pos}: its body is flagged compressed but does not inflate ({e})",
                        offset=pos,
                    ) from None
            pos += m.store_size
    return msgs


def _decompress(body: bytes, sys_flag: int) -> bytes:
    kind = compression_type(sys_flag)
    if kind in (0, COMPRESSION_CODE_ZLIB):  # 0 is the legacy default, ZLIB
        return zlib.decompress(body)
    raise ValueError(f"unsupported compression type {kind} (sys_flag {sys_flag:#x}); only ZLIB is built in")


def create_offset_msg_id(store_host: tuple[str, int], commitlog_offset: int) -> str:
    """The offset msg id: uppercase hex of store ip + port + commitlog offset (MessageDecoder.createMessageId)."""
    return _backend.impl.create_offset_msg_id(store_host, commitlog_offset)


def decode_offset_msg_id(msg_id: str) -> tuple[tuple[str, int], int]:
    """Inverse of create_offset_msg_id: ((ip, port), commitlog_offset). 32 hex chars = IPv4, 56 = IPv6."""
    return _decode_offset_msg_id(msg_id)


_UNIQ_TAIL = struct.Struct(">iH").pack


class _UniqIdGenerator:
    """MessageClientIDSetter: ip(4) + pid(int16) + class-loader hash(int32) + ms since month start(int32) + counter(int16),
    as 32 uppercase hex digits. The fixed prefix is formatted once; the counter is the engine's ``uniq_counter``
    (native with the Rust engine: one atomic add per id; ``itertools.count`` in the twin, atomic under the GIL), so no
    lock is needed on this per-message path."""

    def __init__(self) -> None:
        try:
            ip = socket.inet_aton(socket.gethostbyname(socket.gethostname()))
        except OSError:
            ip = b"\x7f\x00\x00\x01"
        self._prefix = (ip + struct.pack(">hi", os.getpid() & 0x7FFF, id(self) & 0x7FFFFFFF)).hex().upper()
        self._counter: Iterator[int] = _backend.impl.uniq_counter(1)
        self._month_start_ms = 0
        self._next_month_ms = 0

    def _roll_month(self, now_ms: int) -> None:
        t = time.gmtime(now_ms / 1000)
        nxt_year, nxt_mon = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
        self._month_start_ms = calendar.timegm((t.tm_year, t.tm_mon, 1, 0, 0, 0)) * 1000
        self._next_month_ms = calendar.timegm((nxt_year, nxt_mon, 1, 0, 0, 0)) * 1000

    def batch_prefix(self) -> tuple[str, Iterator[int]]:
        """The first 28 hex digits of every id created now, and the counter giving the last 4 (``& 0xFFFF``, as 4
        uppercase hex digits): ``assign_uniq_keys`` makes a batch's ids from them without a call per message."""
        now = time.time_ns() // 1_000_000
        if now >= self._next_month_ms:
            self._roll_month(now)
        return f"{self._prefix}{(now - self._month_start_ms) & 0x7FFFFFFF:08X}", self._counter

    def __call__(self) -> str:
        now = time.time_ns() // 1_000_000
        if now >= self._next_month_ms:
            self._roll_month(now)
        return (
            self._prefix
            + _UNIQ_TAIL((now - self._month_start_ms) & 0x7FFFFFFF, next(self._counter) & 0xFFFF).hex().upper()
        )


create_uniq_id = _UniqIdGenerator()


__all__ = [
    "BORNHOST_V6_FLAG",
    "COMPRESSED_FLAG",
    "COMPRESSION_CODE_ZLIB",
    "COMPRESSION_TYPE_MASK",
    "KEY_SEPARATOR",
    "MULTI_TAGS_FLAG",
    "PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS",
    "PROPERTY_CLUSTER",
    "PROPERTY_CONSUME_START_TIMESTAMP",
    "PROPERTY_DELAY_TIME_LEVEL",
    "PROPERTY_KEYS",
    "PROPERTY_MAX_OFFSET",
    "PROPERTY_MAX_RECONSUME_TIMES",
    "PROPERTY_MIN_OFFSET",
    "PROPERTY_ORIGIN_MESSAGE_ID",
    "PROPERTY_PRODUCER_GROUP",
    "PROPERTY_REAL_QUEUE_ID",
    "PROPERTY_REAL_TOPIC",
    "PROPERTY_RECONSUME_TIME",
    "PROPERTY_RETRY_TOPIC",
    "PROPERTY_TAGS",
    "PROPERTY_TIMER_DELAY_MS",
    "PROPERTY_TIMER_DELAY_SEC",
    "PROPERTY_TIMER_DELIVER_MS",
    "PROPERTY_TIMER_DEL_UNIQKEY",
    "PROPERTY_TIMER_DEQUEUE_MS",
    "PROPERTY_TIMER_ENQUEUE_MS",
    "PROPERTY_TIMER_OUT_MS",
    "PROPERTY_TIMER_ROLL_TIMES",
    "PROPERTY_TRANSACTION_CHECK_TIMES",
    "PROPERTY_TRANSACTION_PREPARED",
    "PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET",
    "PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX",
    "PROPERTY_WAIT_STORE_MSG_OK",
    "STOREHOSTADDRESS_V6_FLAG",
    "SYSFLAG_COMPRESSION_ZLIB",
    "TRANSACTION_COMMIT_TYPE",
    "TRANSACTION_NOT_TYPE",
    "TRANSACTION_PREPARED_TYPE",
    "TRANSACTION_ROLLBACK_TYPE",
    "UNIQ_KEY",
    "CorruptRecordError",
    "Message",
    "MessageExt",
    "MessageQueue",
    "compression_type",
    "create_offset_msg_id",
    "create_uniq_id",
    "decode_messages",
    "decode_offset_msg_id",
    "tags_hash",
]
