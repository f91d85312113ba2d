"""The CommitLog record: layout constants, encode, decode (v1 and v2 magic, IPv4/IPv6 hosts), the properties
string, the tags hash and the offset msg id.

Format (big-endian): TOTALSIZE · MAGIC · BODYCRC · QUEUEID · FLAG · QUEUEOFFSET · PHYSICALOFFSET · SYSFLAG ·
BORNTIMESTAMP · BORNHOST · STORETIMESTAMP · STOREHOST · RECONSUMETIMES · PREPARED_TX_OFFSET · body · topic ·
properties (91 fixed bytes for v1 with IPv4 hosts); BLANK (MAGIC 0xCBD43194) ends a mapped file.
Invariants: 1. a record decodes only if its magic is v1/v2, TOTALSIZE >= 91 and the lengths add up to exactly
TOTALSIZE; 2. the engine writes v1 only (topics <= 127 chars), v2 is read; 3. properties are ``name \\x01 value \\x02``
per entry; 4. tags hash = Java ``String.hashCode``; 5. ``decode_messages`` never inflates bodies.
Thread-safety: pure functions.
Details (byte offsets, each invariant, the decisions the Rust side matches): docs/CORE_API.md, 'CommitLog record'.
"""

from __future__ import annotations

import re
import socket
import struct
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

from rmq_core.errors import CorruptRecordError

MAGIC_V1 = -626843481  # 0xDAA320A7
MAGIC_V2 = -626843477  # 0xDAA320AB
BLANK_MAGIC = -875286124  # 0xCBD43194
END_FILE_MIN_BLANK_LENGTH = 8

TOTALSIZE_POSITION = 0
MAGIC_POSITION = 4
BODYCRC_POSITION = 8
QUEUEID_POSITION = 12
FLAG_POSITION = 16
QUEUE_OFFSET_POSITION = 20
PHY_POS_POSITION = 28
SYSFLAG_POSITION = 36
BORN_TIMESTAMP_POSITION = 40
BORNHOST_POSITION = 48

IPV4_HOST_LEN = 8
IPV6_HOST_LEN = 20
MIN_RECORD_LEN_V1_IPV4 = 91

# SYSFLAG bits (MessageSysFlag.java)
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_TYPE_MASK = 0xC
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
# The compression type: SYSFLAG bits 8..10 (Java's COMPRESSION_TYPE_COMPARATOR). Two views of ZLIB, two names:
COMPRESSION_TYPE_MASK = 0x700
COMPRESSION_TYPE_SHIFT = 8
SYSFLAG_COMPRESSION_ZLIB = 0x300  # ZLIB in the sys flag's bits (Java's MessageSysFlag.COMPRESSION_ZLIB_TYPE)
COMPRESSION_CODE_ZLIB = 3  # ZLIB's type code once shifted down (CompressionType.ZLIB); code 0 (legacy) is ZLIB too

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
MAX_PROPERTIES_SIZE = 32767
MAX_TOPIC_LEN_V1 = 127
PROPERTY_TAGS = "TAGS"

_LEGAL_TOPIC = re.compile(r"[A-Za-z0-9%|_-]+")

_HEAD = struct.Struct(">iiiiiqqiq")  # TOTALSIZE .. BORNTIMESTAMP (48 bytes)
_HEADER8 = struct.Struct(">ii")  # TOTALSIZE, MAGIC
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_PORT_AND_OFFSET = struct.Struct(">iq")


class RecordFormatError(Exception):
    """Internal: the bytes at a position are not a record (callers turn this into CorruptRecordError or an end)."""


# ---------------------------------------------------------------------------------------------------------------
# hosts


def encode_host(host: tuple[str, int]) -> bytes:
    """ip (4 or 16 bytes) + port int32. IPv6 iff the ip contains ':'."""
    ip, port = host
    try:
        raw = socket.inet_pton(socket.AF_INET6 if ":" in ip else socket.AF_INET, ip)
    except (OSError, TypeError) as e:
        raise ValueError(f"not an ip address literal: {ip!r}") from e
    try:
        return raw + _I32.pack(port)
    except struct.error as e:
        raise ValueError(f"port out of int32 range: {port!r}") from e


def is_v6_host(host: tuple[str, int]) -> bool:
    return ":" in host[0]


def decode_host(buf: Any, pos: int, v6: bool) -> tuple[str, int]:
    if v6:
        return socket.inet_ntop(socket.AF_INET6, bytes(buf[pos : pos + 16])), _I32.unpack_from(buf, pos + 16)[0]
    return socket.inet_ntop(socket.AF_INET, bytes(buf[pos : pos + 4])), _I32.unpack_from(buf, pos + 4)[0]


def create_offset_msg_id(store_host: tuple[str, int], commitlog_offset: int) -> str:
    """Offset msg id: uppercase hex of ip (4|16) + port int32 + commitlog offset int64 (MessageDecoder.createMessageId)."""
    return (encode_host(store_host) + _I64.pack(commitlog_offset)).hex().upper()


def _msg_id_from_raw_host(raw_host: bytes, commitlog_offset: int) -> str:
    return (raw_host + _I64.pack(commitlog_offset)).hex().upper()


# ---------------------------------------------------------------------------------------------------------------
# properties, tags, topics


def encode_properties(props: dict[str, str]) -> bytes:
    """``name\\x01value\\x02`` per entry in dict order, values that are None skipped, UTF-8."""
    return "".join(
        f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in props.items() if v is not None
    ).encode()


UNIQ_KEY = "UNIQ_KEY"


def append_property(props: bytes, name: str, value: str) -> bytes:
    """``props`` with ``name \x01 value`` appended as 4.9.7's strings end (no ``\x02`` after the last entry): a
    ``\x02`` first unless ``props`` is empty or already ends with one (Rust ``append_property``)."""
    sep = b"" if not props or props.endswith(PROPERTY_SEPARATOR.encode()) else PROPERTY_SEPARATOR.encode()
    return b"".join((props, sep, f"{name}{NAME_VALUE_SEPARATOR}{value}".encode()))


def assign_uniq_keys(msgs: list[Any], prefix: str, counter: Iterator[int]) -> int:
    """For every message whose ``properties`` lack UNIQ_KEY: ``prefix`` + the next counter value's low 16 bits as 4
    uppercase hex digits (the broker's SendMessageProcessor assigns it when the producer did not); the count."""
    assigned = 0
    for m in msgs:
        props = m.properties
        if UNIQ_KEY not in props:
            props[UNIQ_KEY] = f"{prefix}{next(counter) & 0xFFFF:04X}"
            assigned += 1
    return assigned


def decode_properties(raw: bytes) -> dict[str, str]:
    """``MessageDecoder.string2messageProperties`` of the stored bytes; invalid UTF-8 becomes U+FFFD."""
    return properties_from_text(bytes(raw).decode("utf-8", errors="replace"))


def properties_from_text(text: str) -> dict[str, str]:
    """``MessageDecoder.string2messageProperties``: never fails; a segment without a name, a value or the separator
    is skipped, as Java skips it."""
    return dict(iter_properties(text))


def iter_properties(text: str) -> Iterator[tuple[str, str]]:
    """The entries of a properties text in order, duplicates included (a map lets later ones overwrite); a segment
    without a name, a value or the separator skipped (``for_each_property`` in Rust)."""
    for seg in text.split(PROPERTY_SEPARATOR):
        if len(seg) < 3:
            continue
        kv = seg.find(NAME_VALUE_SEPARATOR)
        if 0 < kv < len(seg) - 1:
            yield seg[:kv], seg[kv + 1 :]


def tags_hash(tags: str) -> int:
    """Java ``String.hashCode``: h = 31*h + UTF-16 code unit, int32 wrap-around; returned signed."""
    h = 0
    units = tags.encode("utf-16-be", errors="surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


_JAVA_MAP_FIRST_TABLE = 16
_JAVA_MAP_TREEIFY_LENGTH = 9
_JAVA_MAP_MIN_TREEIFY_TABLE = 64


def java_hash_map_order(names: Sequence[str]) -> tuple[list[int], bool]:
    """The indexes of ``names`` (distinct, in put order) in the order a ``java.util.HashMap`` iterates them, and
    False when Java would have treeified a bin (whose order is not modelled): the Rust ``java_hash_map_order``
    (its doc says how), given ``tags_hash`` of each name."""
    hashes = [tags_hash(n) & 0xFFFFFFFF for n in names]
    spread = [h ^ (h >> 16) for h in hashes]
    table, exact = _JAVA_MAP_FIRST_TABLE, True
    if len(names) >= _JAVA_MAP_TREEIFY_LENGTH:
        chains = [0] * table
        for i, s in enumerate(spread):
            b = s & (table - 1)
            chains[b] += 1
            if chains[b] >= _JAVA_MAP_TREEIFY_LENGTH:
                if table < _JAVA_MAP_MIN_TREEIFY_TABLE:
                    table *= 2
                    chains = _chains(spread[: i + 1], table)
                else:
                    exact = False
            if i + 1 > table // 4 * 3:
                table *= 2
                chains = _chains(spread[: i + 1], table)
    else:
        while len(names) > table // 4 * 3:
            table *= 2
    return sorted(range(len(names)), key=lambda i: spread[i] & (table - 1)), exact


def _chains(spread: Sequence[int], table: int) -> list[int]:
    chains = [0] * table
    for s in spread:
        chains[s & (table - 1)] += 1
    return chains


def tags_code_of(properties: dict[str, str]) -> int:
    """ConsumeQueue tagsCode: the sign-extended hash of TAGS, 0 when absent."""
    tags = properties.get(PROPERTY_TAGS)
    return tags_hash(tags) if tags else 0


def is_legal_topic(topic: Any) -> bool:
    return isinstance(topic, str) and 0 < len(topic) <= MAX_TOPIC_LEN_V1 and _LEGAL_TOPIC.fullmatch(topic) is not None


def compression_type(sys_flag: int) -> int:
    """The compression type code of a sys flag (``COMPRESSION_CODE_ZLIB``, or 0: the legacy default, also ZLIB)."""
    return (sys_flag & COMPRESSION_TYPE_MASK) >> COMPRESSION_TYPE_SHIFT


def decode_offset_msg_id(msg_id: str) -> tuple[tuple[str, int], int]:
    """Inverse of ``create_offset_msg_id``: ``((ip, port), commitlog_offset)``; 32 hex chars = IPv4, 56 = IPv6."""
    raw = bytes.fromhex(msg_id)
    if len(raw) == IPV4_HOST_LEN + 8:
        v6 = False
    elif len(raw) == IPV6_HOST_LEN + 8:
        v6 = True
    else:
        raise ValueError(f"not an offset msg id: {msg_id!r}")
    host_len = IPV6_HOST_LEN if v6 else IPV4_HOST_LEN
    return decode_host(raw, 0, v6), _I64.unpack_from(raw, host_len)[0]


def is_tx_prepared_or_rollback(sys_flag: int) -> bool:
    return (sys_flag & TRANSACTION_TYPE_MASK) in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


def body_crc(body: Any) -> int:
    """4.9 ``UtilAll.crc32``: CRC-32 masked to a non-negative int: a record's BODYCRC, REGISTER_BROKER's bodyCrc32."""
    return zlib.crc32(body) & 0x7FFFFFFF


# ---------------------------------------------------------------------------------------------------------------
# encode


def record_len_v1(body_len: int, topic_len: int, props_len: int, born_host_len: int, store_host_len: int) -> int:
    """``MessageExtEncoder.calMsgLength`` for a v1 record."""
    return (
        4
        + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + born_host_len
        + 8
        + store_host_len
        + 4
        + 8
        + 4
        + body_len
        + 1
        + topic_len
        + 2
        + props_len
    )


def encode_record(
    *,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host_raw: bytes,
    store_timestamp: int,
    store_host_raw: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes,
    topic: bytes,
    properties: bytes,
) -> bytearray:
    """One v1 record. QUEUEOFFSET/PHYSICALOFFSET may be placeholders patched later with :func:`patch_offsets`."""
    total = record_len_v1(len(body), len(topic), len(properties), len(born_host_raw), len(store_host_raw))
    rec = bytearray(
        _HEAD.pack(
            total, MAGIC_V1, body_crc(body), queue_id, flag, queue_offset, physical_offset, sys_flag, born_timestamp
        )
    )
    rec += born_host_raw
    rec += _I64.pack(store_timestamp)
    rec += store_host_raw
    rec += _PORT_AND_OFFSET.pack(reconsume_times, prepared_transaction_offset)
    rec += _I32.pack(len(body))
    rec += body
    rec.append(len(topic))
    rec += topic
    rec += _I16.pack(len(properties))
    rec += properties
    assert len(rec) == total
    return rec


def patch_offsets(rec: bytearray, queue_offset: int, physical_offset: int) -> None:
    _I64.pack_into(rec, QUEUE_OFFSET_POSITION, queue_offset)
    _I64.pack_into(rec, PHY_POS_POSITION, physical_offset)


def encode_blank(remaining: int) -> bytes:
    return _HEADER8.pack(remaining, BLANK_MAGIC)


# ---------------------------------------------------------------------------------------------------------------
# decode


def record_layout(buf: Any, pos: int, limit: int) -> tuple[int, int, int, int, int, int, int, int]:
    """Checks the structure of the record at ``buf[pos:limit]`` (invariant 1).

    Returns ``(total, magic, sys_flag, store_ts_pos, body_pos, body_len, topic_pos, topic_len)`` with positions
    relative to ``pos``; the properties are ``[topic_pos + topic_len + 2, total)``. Raises RecordFormatError.
    """
    avail = limit - pos
    if avail < 8:
        raise RecordFormatError(f"truncated header: {avail} bytes left")
    total, magic = _HEADER8.unpack_from(buf, pos)
    if magic == BLANK_MAGIC:
        raise RecordFormatError("BLANK (end-of-file padding) where a record was expected")
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        raise RecordFormatError(f"bad magic 0x{magic & 0xFFFFFFFF:08X}")
    if total < MIN_RECORD_LEN_V1_IPV4:
        raise RecordFormatError(f"total size {total} below the fixed part")
    if total > avail:
        raise RecordFormatError(f"truncated record: total size {total} but {avail} bytes left")
    sys_flag = _I32.unpack_from(buf, pos + SYSFLAG_POSITION)[0]
    born_len = IPV6_HOST_LEN if sys_flag & BORNHOST_V6_FLAG else IPV4_HOST_LEN
    store_len = IPV6_HOST_LEN if sys_flag & STOREHOSTADDRESS_V6_FLAG else IPV4_HOST_LEN
    store_ts_pos = BORNHOST_POSITION + born_len
    p = store_ts_pos + 8 + store_len + 4 + 8  # at BODYLEN
    if p + 4 > total:
        raise RecordFormatError(f"total size {total} too small for the hosts")
    body_len = _I32.unpack_from(buf, pos + p)[0]
    p += 4
    if body_len < 0 or p + body_len > total:
        raise RecordFormatError(f"body length {body_len} does not fit in total size {total}")
    body_pos = p
    p += body_len
    if magic == MAGIC_V2:
        if p + 2 > total:
            raise RecordFormatError("truncated topic length")
        topic_len = _U16.unpack_from(buf, pos + p)[0]
        p += 2
    else:
        if p + 1 > total:
            raise RecordFormatError("truncated topic length")
        topic_len = buf[pos + p]
        p += 1
    if p + topic_len + 2 > total:
        raise RecordFormatError(f"topic length {topic_len} does not fit in total size {total}")
    topic_pos = p
    p += topic_len
    props_len = _I16.unpack_from(buf, pos + p)[0]
    p += 2
    if props_len < 0 or p + props_len != total:
        raise RecordFormatError(f"lengths add up to {p + props_len} but total size is {total}")
    return total, magic, sys_flag, store_ts_pos, body_pos, body_len, topic_pos, topic_len


def record_matches_unit(
    record: Any, phy_offset: int, topic: str, queue_id: int, queue_offset: int, check_crc: bool
) -> bool:
    """Whether ``record`` (the ``phy_size`` bytes a ConsumeQueue unit points at) is the whole, intact record the unit
    says: it is well formed, its TOTALSIZE is all of ``record``, its PHYSICALOFFSET, TOPIC, QUEUEID and QUEUEOFFSET
    are the unit's queue's, and (``check_crc``) its BODYCRC matches its body. The read path serves nothing else. (The
    format has no checksum over the other fields: a damaged property or host is not detectable.)"""
    try:
        total, _magic, _sf, _ts, body_pos, body_len, topic_pos, topic_len = record_layout(record, 0, len(record))
    except RecordFormatError:
        return False
    (_t, _m, crc, rec_queue_id, _flag, rec_queue_offset, rec_phy, _sf, _born) = _HEAD.unpack_from(record, 0)
    if total != len(record) or rec_phy != phy_offset or rec_queue_id != queue_id or rec_queue_offset != queue_offset:
        return False
    if bytes(record[topic_pos : topic_pos + topic_len]) != topic.encode():
        return False
    return not check_crc or body_crc(record[body_pos : body_pos + body_len]) == crc


def record_properties(rec: Any) -> dict[str, str]:
    """The decoded properties of one whole record (already validated or read from a CQ-referenced range)."""
    total, _m, _sf, _st, _bp, _bl, topic_pos, topic_len = record_layout(rec, 0, len(rec))
    start = topic_pos + topic_len + 2
    return decode_properties(bytes(rec[start:total]))


def record_store_timestamp(rec: Any, pos: int = 0) -> int:
    """STORETIMESTAMP of the record at ``rec[pos]`` (needs at least the bytes up to it); its position depends on the
    born host."""
    return int(_I64.unpack_from(rec, pos + store_timestamp_position(record_sys_flag(rec, pos)))[0])


# --- record accessors: one field of the record that starts at ``buf[pos]`` (the Rust twins take the record's
# slice). The caller makes sure the bytes are there (``struct.error`` otherwise): ``MIN_RECORD_LEN_V1_IPV4`` bytes
# cover every fixed field of an IPv4 record, ``store_timestamp_position(sys_flag) + 8`` the store timestamp.

RECORD_HEADER_LEN = 8  # TOTALSIZE + MAGIC: what tells whether a record starts here


def store_timestamp_position(sys_flag: int) -> int:
    """Byte position of STORETIMESTAMP in a record with this sys flag (after a 4- or 16-byte born ip)."""
    return BORNHOST_POSITION + (IPV6_HOST_LEN if sys_flag & BORNHOST_V6_FLAG else IPV4_HOST_LEN)


def record_total_size(buf: Any, pos: int = 0) -> int:
    return int(_I32.unpack_from(buf, pos + TOTALSIZE_POSITION)[0])


def record_magic(buf: Any, pos: int = 0) -> int:
    return int(_I32.unpack_from(buf, pos + MAGIC_POSITION)[0])


def is_message_magic(magic: int) -> bool:
    """A message record's magic (v1 or v2), not BLANK or anything else."""
    return magic in (MAGIC_V1, MAGIC_V2)


def record_queue_offset(buf: Any, pos: int = 0) -> int:
    return int(_I64.unpack_from(buf, pos + QUEUE_OFFSET_POSITION)[0])


def record_physical_offset(buf: Any, pos: int = 0) -> int:
    """PHYSICALOFFSET: the record's own CommitLog offset (Java's ``wroteOffset``)."""
    return int(_I64.unpack_from(buf, pos + PHY_POS_POSITION)[0])


def record_sys_flag(buf: Any, pos: int = 0) -> int:
    return int(_I32.unpack_from(buf, pos + SYSFLAG_POSITION)[0])


def record_born_timestamp(buf: Any, pos: int = 0) -> int:
    return int(_I64.unpack_from(buf, pos + BORN_TIMESTAMP_POSITION)[0])


def record_born_host(buf: Any, pos: int = 0) -> tuple[str, int]:
    return decode_host(buf, pos + BORNHOST_POSITION, bool(record_sys_flag(buf, pos) & BORNHOST_V6_FLAG))


def record_store_host(buf: Any, pos: int = 0) -> tuple[str, int]:
    sys_flag = record_sys_flag(buf, pos)
    return decode_host(buf, pos + store_timestamp_position(sys_flag) + 8, bool(sys_flag & STOREHOSTADDRESS_V6_FLAG))


def record_offset_msg_id(buf: Any, pos: int = 0) -> str:
    """The offset msg id of the record (store host + PHYSICALOFFSET)."""
    return create_offset_msg_id(record_store_host(buf, pos), record_physical_offset(buf, pos))


def record_head_matches(rec: Any, phy_offset: int) -> bool:
    """Whether ``rec`` (exactly one record's bytes, read at CommitLog offset ``phy_offset``) looks whole: TOTALSIZE
    equals its length and is at least the fixed part, the magic is a message magic and PHYSICALOFFSET is
    ``phy_offset``. No CRC: what a reader beside a live writer checks before serving a record."""
    return (
        len(rec) >= MIN_RECORD_LEN_V1_IPV4
        and record_total_size(rec) == len(rec)
        and is_message_magic(record_magic(rec))
        and record_physical_offset(rec) == phy_offset
    )


def walk_records(buf: Any) -> Iterator[tuple[int, int]]:
    """``(position, TOTALSIZE)`` of each record of concatenated records (a pull body), while a TOTALSIZE can be read
    and is positive; the last one may run past the end of ``buf`` (the caller decides)."""
    pos, n = 0, len(buf)
    while pos + 4 <= n:
        size = record_total_size(buf, pos)
        if size <= 0:
            return
        yield pos, size
        pos += size


def last_store_timestamp(buf: Any) -> int:
    """The STORETIMESTAMP of the last whole record of a pull body, 0 when there is none (also when that record is too
    short to hold its sys flag and store timestamp); the walk stops at the first record that runs past the end."""
    n, last = len(buf), -1
    for pos, size in walk_records(buf):
        if pos + size > n:
            break
        last = pos
    if last < 0 or last + SYSFLAG_POSITION + 4 > n:
        return 0
    at = last + store_timestamp_position(record_sys_flag(buf, last))
    return int(_I64.unpack_from(buf, at)[0]) if at + 8 <= n else 0


def decode_record(buf: Any, pos: int, limit: int, message_ext_cls: Any) -> Any:
    """One MessageExt from the record at ``pos`` (every slot set, ``__init__`` not called)."""
    total, _magic, sys_flag, store_ts_pos, body_pos, body_len, topic_pos, topic_len = record_layout(buf, pos, limit)
    (_t, _m, crc, queue_id, flag, queue_offset, phys, _sf, born_ts) = _HEAD.unpack_from(buf, pos)
    born_v6 = bool(sys_flag & BORNHOST_V6_FLAG)
    store_v6 = bool(sys_flag & STOREHOSTADDRESS_V6_FLAG)
    store_host_pos = store_ts_pos + 8
    store_host_len = IPV6_HOST_LEN if store_v6 else IPV4_HOST_LEN
    after_store = store_host_pos + store_host_len
    reconsume, prepared = _PORT_AND_OFFSET.unpack_from(buf, pos + after_store)
    m = message_ext_cls.__new__(message_ext_cls)
    m.topic = bytes(buf[pos + topic_pos : pos + topic_pos + topic_len]).decode("utf-8", errors="replace")
    m.body = bytes(buf[pos + body_pos : pos + body_pos + body_len])
    m.flag = flag
    m.properties = decode_properties(bytes(buf[pos + topic_pos + topic_len + 2 : pos + total]))
    m.queue_id = queue_id
    m.queue_offset = queue_offset
    m.commitlog_offset = phys
    m.store_size = total
    m.body_crc = crc
    m.sys_flag = sys_flag
    m.born_timestamp = born_ts
    m.born_host = decode_host(buf, pos + BORNHOST_POSITION, born_v6)
    m.store_timestamp = _I64.unpack_from(buf, pos + store_ts_pos)[0]
    m.store_host = decode_host(buf, pos + store_host_pos, store_v6)
    m.reconsume_times = reconsume
    m.prepared_transaction_offset = prepared
    m.msg_id = _msg_id_from_raw_host(bytes(buf[pos + store_host_pos : pos + store_host_pos + store_host_len]), phys)
    m.broker_name = None
    return m


def decode_messages(buf: bytes, decompress: bool = True) -> list:
    """Decode concatenated v1/v2 records (a pull body). BLANK, garbage or a truncated tail raise
    ``CorruptRecordError(offset=<index in buf>)``. Bodies are returned as stored: ``decompress`` is accepted for
    signature parity and ignored (the wrapper in ``rmq_core.message`` inflates, for both backends)."""
    from rmq_core.message import MessageExt  # late: rmq_core.message imports this module

    out = []
    pos = 0
    end = len(buf)
    while pos < end:
        try:
            m = decode_record(buf, pos, end, MessageExt)
        except RecordFormatError as e:
            raise CorruptRecordError(f"corrupt record at offset {pos}: {e}", offset=pos) from None
        out.append(m)
        pos += m.store_size
    return out
