"""RocketMQ 5's timer-message files (``store/timer/``: ``TimerWheel``, ``Slot``, ``TimerLog``, ``TimerCheckpoint``).

Owns: the byte layouts of ``<root>/timerwheel``, the ``<root>/timerlog/`` units and ``<root>/config/timercheck``,
their encode/decode, the magic bits and the file-size rules. The broker's ``broker/timer/`` package does the I/O.
Format (big-endian, as Java's ByteBuffer): the wheel is 7 days × 86 400 slots × 2 of 32 bytes (38 707 200 bytes);
the timer log is mapped files (100 MiB) of 52-byte units linked backwards per slot, a blank filling a file's tail;
timercheck is one 4 096-byte page. Departure from 5.x: a unit's ``reserved`` field holds the exact deliver time
(0: the end of the slot); 5.x reads our units unchanged.
Invariants: 1. a unit is valid when ``size == 52`` and ``(magic | 0xF) == 0xF`` (5.x ``isMagicOK``); an all-zero
unit ends the written data. 2. slot index and slot time use integer division by the precision.
Thread-safety: pure functions and constants.
Details (every field): docs/CORE_API.md, 'Timer files'.
"""

from __future__ import annotations

import mmap
import struct
from typing import NamedTuple

from .message import tags_hash

TIMER_WHEEL_TTL_DAY = 7
DAY_SECS = 24 * 3600
SLOTS_TOTAL = TIMER_WHEEL_TTL_DAY * DAY_SECS  # TimerMessageStore.slotsTotal
TIMER_BLANK_SLOTS = 60
SLOT_SIZE = 32
WHEEL_LENGTH = SLOTS_TOTAL * 2 * SLOT_SIZE

BLANK = -1  # TimerWheel.BLANK: no position
IGNORE = -2  # TimerWheel.IGNORE: leave this position as it is (reviseSlot)

MAGIC_DEFAULT = 1
MAGIC_ROLL = 1 << 1
MAGIC_DELETE = 1 << 2

UNIT_SIZE = 4 + 8 + 4 + 8 + 4 + 8 + 4 + 4 + 8  # 52
UNIT_PRE_SIZE_FOR_MSG = 28  # offset of offset_py in a unit
MIN_BLANK_LEN = 4 + 8 + 4
# Java: ``0xBBCCDDEE ^ 1880681586 + 8`` with int arithmetic (``+`` binds first), i.e. a signed 32-bit value
_BLANK_RAW = (0xBBCCDDEE ^ ((1880681586 + 8) & 0xFFFFFFFF)) & 0xFFFFFFFF
BLANK_MAGIC_CODE = _BLANK_RAW - (1 << 32) if _BLANK_RAW >= 1 << 31 else _BLANK_RAW

CHECKPOINT_FILE_SIZE = 4096
TIMER_WHEEL_FILE = "timerwheel"
TIMER_LOG_DIR = "timerlog"
TIMER_CHECK_FILE = "timercheck"  # under <root>/config/

Buf = bytes | bytearray | memoryview | mmap.mmap  # what the decoders read from (a mapping included)

SLOT = struct.Struct(">qqqii")
UNIT = struct.Struct(">iqiqiqiiq")
BLANK_UNIT = struct.Struct(">iqi")
CHECKPOINT = struct.Struct(">qqqqqqq")


class Slot(NamedTuple):
    """``Slot``: the slot's time in ms (-1 when empty), first and last timerlog positions, count, magic."""

    time_ms: int
    first_pos: int
    last_pos: int
    num: int = 0
    magic: int = 0


EMPTY_SLOT = Slot(-1, -1, -1)


class TimerLogUnit(NamedTuple):
    size: int
    prev_pos: int
    magic: int
    curr_write_time_ms: int
    delay_ms: int  # slot time − write time
    offset_py: int
    size_py: int
    topic_hash: int
    reserved: int  # rmq_core: the exact deliver time in ms (0: the end of the slot)

    @property
    def delayed_time_ms(self) -> int:
        """The slot time the unit was filed under (``curr_write_time + delay``)."""
        return self.curr_write_time_ms + self.delay_ms


class TimerCheckpointData(NamedTuple):
    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0


def slot_index(time_ms: int, precision_ms: int) -> int:
    """``TimerWheel.getSlotIndex``."""
    return time_ms // precision_ms % (SLOTS_TOTAL * 2)


def encode_slot(time_ms: int, first_pos: int, last_pos: int, num: int, magic: int, precision_ms: int) -> bytes:
    return SLOT.pack(time_ms // precision_ms, first_pos, last_pos, num, magic)


def decode_slot(buf: Buf, pos: int, precision_ms: int) -> Slot:
    t, first, last, num, magic = SLOT.unpack_from(buf, pos)
    return Slot(t * precision_ms, first, last, num, magic)


def encode_unit(
    prev_pos: int,
    magic: int,
    curr_write_time_ms: int,
    delay_ms: int,
    offset_py: int,
    size_py: int,
    topic_hash: int,
    deliver_ms: int,
) -> bytes:
    return UNIT.pack(
        UNIT_SIZE, prev_pos, magic, curr_write_time_ms, delay_ms, offset_py, size_py, topic_hash, deliver_ms
    )


def decode_unit(buf: Buf, pos: int = 0) -> TimerLogUnit:
    return TimerLogUnit(*UNIT.unpack_from(buf, pos))


def encode_blank(remaining: int) -> bytes:
    return BLANK_UNIT.pack(remaining, 0, BLANK_MAGIC_CODE)


def is_magic_ok(magic: int) -> bool:
    """``TimerMessageStore.isMagicOK``."""
    return (magic | 0xF) == 0xF


def need_roll(magic: int) -> bool:
    return (magic & MAGIC_ROLL) != 0


def need_delete(magic: int) -> bool:
    return (magic & MAGIC_DELETE) != 0


def encode_checkpoint(cp: TimerCheckpointData) -> bytes:
    return CHECKPOINT.pack(*cp)


def decode_checkpoint(buf: Buf) -> TimerCheckpointData:
    return TimerCheckpointData(*CHECKPOINT.unpack_from(buf, 0))


def offset_for_last_unit(file_size: int) -> int:
    """``TimerLog.getOffsetForLastUnit``: the position of the last unit a full file can hold."""
    return file_size - (file_size - MIN_BLANK_LEN) % UNIT_SIZE - MIN_BLANK_LEN - UNIT_SIZE


def topic_hash(topic: str | None) -> int:
    """``hashTopicForMetrics``: Java ``String.hashCode`` of the real topic (signed int32), 0 for None."""
    return 0 if topic is None else tags_hash(topic)
