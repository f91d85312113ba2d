"""The ConsumeQueue unit: 20 bytes, ``commitLogOffset i64 · msgSize i32 · tagsCode i64``, big-endian.

Owns: the unit layout, its encode/decode, the pre-blank unit and the validity rule used by recovery.
Format: unit N of a queue lives at byte N×20 of the queue's concatenated files (file = N×20 − N×20 % file size).
Invariants:
  1. A valid unit has ``offset >= 0 and size > 0``; an all-zero unit ends the written data.
  2. The pre-blank unit ``(0, 2**31-1, 0)`` fills units before a queue's first real unit; it counts as valid.
  3. The tag filter compares ``tags_code`` as int32: only the low 4 bytes (unit bytes 16..20) matter.
Thread-safety: pure functions.
"""

from __future__ import annotations

import struct

CQ_STORE_UNIT_SIZE = 20
MSG_TAG_OFFSET_INDEX = 12
PRE_BLANK_SIZE = 0x7FFFFFFF

UNIT = struct.Struct(">qiq")
PRE_BLANK = (0, PRE_BLANK_SIZE, 0)
PRE_BLANK_BYTES = UNIT.pack(*PRE_BLANK)


def encode_unit(offset: int, size: int, tags_code: int) -> bytes:
    return UNIT.pack(offset, size, tags_code)


def decode_unit(buf, pos: int = 0) -> tuple[int, int, int]:
    return UNIT.unpack_from(buf, pos)


def is_valid(offset: int, size: int) -> bool:
    return offset >= 0 and size > 0


def is_pre_blank(offset: int, size: int, tags_code: int) -> bool:
    return offset == 0 and size == PRE_BLANK_SIZE and tags_code == 0


def to_int32(v: int) -> int:
    """Java's ``(int) tagsCode``: the low 32 bits, signed."""
    v &= 0xFFFFFFFF
    return v - 0x100000000 if v & 0x80000000 else v


def round_file_size(size: int) -> int:
    """``mappedFileSizeConsumeQueue`` rounded up to a multiple of the unit (MessageStoreConfig)."""
    return -(-size // CQ_STORE_UNIT_SIZE) * CQ_STORE_UNIT_SIZE
