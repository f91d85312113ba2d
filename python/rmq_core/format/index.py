"""The index file layout (RocketMQ 4.9 ``IndexFile``/``IndexHeader``/``IndexService``): ``<root>/index/<yyyyMMddHHmmssSSS>``.
Twin of rust/rmq-store/src/format/index.rs.

Owns: the header, hash slot and entry layouts, the key hash (``topic#key``, Java ``String.hashCode`` made
non-negative as ``IndexFile.indexKeyHashMethod`` does), the file name, and which keys of a record are indexed.
Format (big-endian): header 40 bytes (@0 beginTimestamp q, @8 endTimestamp q, @16 beginPhyOffset q, @24 endPhyOffset q,
@32 hashSlotCount i, @36 indexCount i, starting at 1); hashSlotNum slots of 4 bytes (i: newest entry of the slot, 0 =
empty); indexNum entries of 20 bytes (@0 keyHash i, @4 phyOffset q, @12 timeDiff i seconds since beginTimestamp,
@16 prevIndex i). File size = 40 + 4 * hashSlotNum + 20 * indexNum (4.9's defaults give 420,000,040 bytes).
Invariants: pure layout; a key's slot is ``hash % hashSlotNum``; entry ``i`` is valid iff ``1 <= i < indexCount``.
Thread-safety: pure functions and constants.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass

from .message import TRANSACTION_ROLLBACK_TYPE, TRANSACTION_TYPE_MASK

INDEX_DIR = "index"
INDEX_REFUSED_DIR = "index_refused"
INDEX_HEADER_SIZE = 40
HASH_SLOT_SIZE = 4
INDEX_ENTRY_SIZE = 20
INVALID_INDEX = 0
DEFAULT_MAX_HASH_SLOT_NUM = 5_000_000
DEFAULT_MAX_INDEX_NUM = 20_000_000
MAX_MSGS_NUM_BATCH = 64  # MessageStoreConfig.maxMsgsNumBatch
DEFAULT_QUERY_MAX_NUM = 32  # MessageStoreConfig.defaultQueryMaxNum: the broker's max for a _UNIQUE_KEY_QUERY
QUERY_ROUNDS = 3  # DefaultMessageStore.queryMessage's retries with an earlier end time
PROPERTY_KEYS = b"KEYS"
PROPERTY_UNIQ_KEY = b"UNIQ_KEY"
KEY_SEPARATOR = b" "
INDEX_FILE_NAME_LEN = 17

HEADER = struct.Struct(">qqqqii")
ENTRY = struct.Struct(">iqii")
SLOT = struct.Struct(">i")
_I32_MAX = 2**31 - 1
_MASK = 0xFFFFFFFF


@dataclass
class IndexHeader:
    begin_timestamp: int = 0
    end_timestamp: int = 0
    begin_phy_offset: int = 0
    end_phy_offset: int = 0
    hash_slot_count: int = 0
    index_count: int = 1

    @classmethod
    def decode(cls, buf: bytes | memoryview | bytearray) -> IndexHeader:
        """``IndexHeader.load``: an index count <= 0 reads as 1."""
        bt, et, bp, ep, hc, ic = HEADER.unpack_from(buf, 0)
        return cls(bt, et, bp, ep, hc, ic if ic > 0 else 1)

    def encode(self) -> bytes:
        return HEADER.pack(
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        )

    def check(self, hash_slot_num: int, index_num: int) -> str | None:
        """Why this header cannot belong to a file of this geometry, or None."""
        if self.index_count > index_num + 1:
            return f"index count {self.index_count} above maxIndexNum {index_num}"
        if not 0 <= self.hash_slot_count <= hash_slot_num:
            return f"hash slot count {self.hash_slot_count} outside [0, {hash_slot_num}]"
        if self.end_phy_offset < self.begin_phy_offset or self.begin_phy_offset < 0:
            return f"phy offsets [{self.begin_phy_offset}, {self.end_phy_offset}] out of order"
        if self.end_timestamp < self.begin_timestamp:
            return f"timestamps [{self.begin_timestamp}, {self.end_timestamp}] out of order"
        return None

    def is_time_matched(self, begin: int, end: int) -> bool:
        """``IndexFile.isTimeMatched``."""
        b, e = self.begin_timestamp, self.end_timestamp
        return (begin < b and end > e) or (b <= begin <= e) or (b <= end <= e)


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE


def slot_position(slot: int) -> int:
    return INDEX_HEADER_SIZE + slot * HASH_SLOT_SIZE


def entry_position(hash_slot_num: int, index: int) -> int:
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index * INDEX_ENTRY_SIZE


def time_diff_seconds(store_timestamp: int, begin_timestamp: int) -> int:
    """``IndexFile.putKey``'s timeDiff: seconds since begin (Java long division), clamped to [0, 2^31-1]; 0 while
    the file has no begin timestamp."""
    if begin_timestamp <= 0:
        return 0
    d = store_timestamp - begin_timestamp
    d = abs(d) // 1000 * (1 if d >= 0 else -1)
    return max(0, min(d, _I32_MAX))


def _java_hash_continue(h: int, s: bytes) -> int:
    if s.isascii():
        for b in s:
            h = (h * 31 + b) & _MASK
    else:
        units = s.decode("utf-8", errors="replace").encode("utf-16-be", errors="surrogatepass")
        for i in range(0, len(units), 2):
            h = (h * 31 + ((units[i] << 8) | units[i + 1])) & _MASK
    return h


def index_key_hash(topic: bytes, key: bytes) -> int:
    """``IndexFile.indexKeyHashMethod(topic + "#" + key)``: Java ``String.hashCode`` (UTF-16 units), ``Math.abs``,
    ``Integer.MIN_VALUE`` → 0."""
    h = _java_hash_continue(0, topic)
    h = (h * 31 + 0x23) & _MASK
    h = _java_hash_continue(h, key)
    if h >= 0x80000000:
        h -= 1 << 32
    a = abs(h)
    return 0 if a > _I32_MAX else a


def is_indexed_sys_flag(sys_flag: int) -> bool:
    """``IndexService.buildIndex``'s skip rule: rollback records are not indexed (NOT/PREPARED/COMMIT are)."""
    return sys_flag & TRANSACTION_TYPE_MASK != TRANSACTION_ROLLBACK_TYPE


def find_property(raw: bytes, name: bytes) -> bytes | None:
    """The value of property ``name`` in encoded properties (the last occurrence wins), on bytes like the Rust twin."""
    found = None
    for seg in raw.split(b"\x02"):
        if len(seg) < 3:
            continue
        kv = seg.find(b"\x01")
        if 0 < kv < len(seg) - 1 and seg[:kv] == name:
            found = seg[kv + 1 :]
    return found


def index_keys(properties: bytes) -> Iterator[bytes]:
    """The keys ``IndexService.buildIndex`` indexes, in its order: UNIQ_KEY when present (even empty), then each
    non-empty space-separated part of KEYS."""
    if not properties:
        return
    u = find_property(properties, PROPERTY_UNIQ_KEY)
    if u is not None:
        yield u
    keys = find_property(properties, PROPERTY_KEYS)
    if keys is not None:
        for k in keys.split(KEY_SEPARATOR):
            if k:
                yield k


def record_has_index_key(properties: bytes, key: bytes) -> bool:
    return any(k == key for k in index_keys(properties))


def index_file_name(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString``: ``yyyyMMddHHmmssSSS`` in local time."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(ms // 1000)) + f"{ms % 1000:03d}"


def is_index_file_name(name: str) -> bool:
    return len(name) == INDEX_FILE_NAME_LEN and name.isascii() and name.isdigit()


def next_index_file_name(name: str) -> str:
    return f"{int(name) + 1:0{INDEX_FILE_NAME_LEN}d}"
