"""An independent reader and writer of RocketMQ's store bytes, written from RocketMQ 4.9's layouts (CommitLog record, ConsumeQueue unit,
§8) and NOT from rmq_core's engines. Tests compare what the engines write with what this module decodes.

Format (all integers big-endian):
  CommitLog record (v1, IPv4 hosts; 91 fixed bytes + body + topic + properties):
    TOTALSIZE i32 | MAGIC u32 (v1 0xDAA320A7, v2 0xDAA320AB) | BODYCRC i32 (zlib.crc32 & 0x7FFFFFFF) | QUEUEID i32 |
    FLAG i32 | QUEUEOFFSET i64 | PHYSICALOFFSET i64 | SYSFLAG i32 | BORNTIMESTAMP i64 | BORNHOST 4+4 or 16+4 (sysflag
    0x10) | STORETIMESTAMP i64 | STOREHOST 4+4 or 16+4 (sysflag 0x20) | RECONSUMETIMES i32 | PREPAREDTXOFFSET i64 |
    BODYLEN i32 + BODY | TOPICLEN (u8 for v1, u16 for v2) + TOPIC | PROPLEN i16 + PROPERTIES
  BLANK at the end of a file: TOTALSIZE = bytes left in the file, MAGIC 0xCBD43194 (8 bytes written).
  ConsumeQueue unit: commitlog offset i64 | size i32 | tags code i64 (20 bytes).
  File names: the start offset, 20 decimal digits.
"""

from __future__ import annotations

import os
import socket
import struct
import zlib
from dataclasses import dataclass, field

MAGIC_V1 = 0xDAA320A7
MAGIC_V2 = 0xDAA320AB
BLANK_MAGIC = 0xCBD43194
MAGIC_V1_SIGNED = -626843481
MAGIC_V2_SIGNED = -626843477
BLANK_MAGIC_SIGNED = -875286124
END_FILE_MIN_BLANK_LENGTH = 8
CQ_UNIT = 20
FIXED_V1_IPV4 = 91
PROPERTIES_MAX = 32767
BORNHOST_V6_FLAG = 0x10
STOREHOST_V6_FLAG = 0x20
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"


# --- small helpers --------------------------------------------------------------------------------------------
def java_string_hash(s: str) -> int:
    """java.lang.String.hashCode: h = 31*h + c over UTF-16 code units, int32 wrap-around, signed."""
    h = 0
    raw = s.encode("utf-16-be")
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def masked_crc32(data: bytes) -> int:
    return zlib.crc32(data) & 0x7FFFFFFF


def file_name(offset: int) -> str:
    return f"{offset:020d}"


def encode_properties(props: dict[str, str]) -> bytes:
    return "".join(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in props.items()).encode("utf-8")


def parse_properties(raw: bytes) -> dict[str, str]:
    """MessageDecoder.string2messageProperties."""
    text = raw.decode("utf-8", errors="replace")
    out: dict[str, str] = {}
    for seg in text.split(PROPERTY_SEPARATOR):
        if len(seg) < 3:
            continue
        i = seg.find(NAME_VALUE_SEPARATOR)
        if i > 0 and i != len(seg) - 1:
            out[seg[:i]] = seg[i + 1 :]
    return out


def _encode_host(host: tuple[str, int]) -> tuple[bytes, bool]:
    ip, port = host
    if ":" in ip:
        return socket.inet_pton(socket.AF_INET6, ip) + struct.pack(">i", port), True
    return socket.inet_aton(ip) + struct.pack(">i", port), False


def _decode_host(buf: bytes, pos: int, v6: bool) -> tuple[tuple[str, int], int]:
    if v6:
        ip = socket.inet_ntop(socket.AF_INET6, buf[pos : pos + 16])
        pos += 16
    else:
        ip = socket.inet_ntop(socket.AF_INET, buf[pos : pos + 4])
        pos += 4
    (port,) = struct.unpack_from(">i", buf, pos)
    return (ip, port), pos + 4


def offset_msg_id(store_host: tuple[str, int], commitlog_offset: int) -> str:
    raw, _ = _encode_host(store_host)
    return (raw + struct.pack(">q", commitlog_offset)).hex().upper()


# --- records --------------------------------------------------------------------------------------------------
@dataclass
class Record:
    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties_raw: bytes
    properties: dict[str, str] = field(default_factory=dict)
    raw: bytes = b""

    @property
    def crc_ok(self) -> bool:
        return self.body_crc == masked_crc32(self.body)


@dataclass
class Blank:
    total_size: int


class SpecParseError(Exception):
    pass


def parse_record(buf: bytes, pos: int = 0) -> Record | Blank:
    """Parse one record (or BLANK) starting at ``pos``; raises SpecParseError on anything else."""
    if pos + 8 > len(buf):
        raise SpecParseError(f"truncated header at {pos}")
    total, magic = struct.unpack_from(">iI", buf, pos)
    if magic == BLANK_MAGIC:
        return Blank(total)
    if magic not in (MAGIC_V1, MAGIC_V2):
        raise SpecParseError(f"bad magic {magic:#x} at {pos}")
    if total < FIXED_V1_IPV4 or pos + total > len(buf):
        raise SpecParseError(f"bad total size {total} at {pos}")
    p = pos + 8
    body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts = struct.unpack_from(">iiiqqiq", buf, p)
    p += 4 + 4 + 4 + 8 + 8 + 4 + 8
    born_host, p = _decode_host(buf, p, bool(sys_flag & BORNHOST_V6_FLAG))
    (store_ts,) = struct.unpack_from(">q", buf, p)
    p += 8
    store_host, p = _decode_host(buf, p, bool(sys_flag & STOREHOST_V6_FLAG))
    reconsume, prepared, body_len = struct.unpack_from(">iqi", buf, p)
    p += 16
    body = bytes(buf[p : p + body_len])
    p += body_len
    if magic == MAGIC_V1:
        topic_len = buf[p]
        p += 1
    else:
        (topic_len,) = struct.unpack_from(">H", buf, p)
        p += 2
    topic = bytes(buf[p : p + topic_len]).decode("utf-8")
    p += topic_len
    (prop_len,) = struct.unpack_from(">h", buf, p)
    p += 2
    props_raw = bytes(buf[p : p + prop_len])
    p += prop_len
    if p - pos != total:
        raise SpecParseError(f"fields add up to {p - pos} bytes, TOTALSIZE says {total} (at {pos})")
    return Record(
        total, magic, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts, born_host,
        store_ts, store_host, reconsume, prepared, body, topic, props_raw, parse_properties(props_raw),
        bytes(buf[pos : pos + total]),
    )  # fmt: skip


def parse_records(buf: bytes) -> list[Record]:
    """Concatenated records (a pull body): every one must parse, no BLANKs."""
    out: list[Record] = []
    pos = 0
    while pos < len(buf):
        r = parse_record(buf, pos)
        if isinstance(r, Blank):
            raise SpecParseError(f"BLANK inside a pull body at {pos}")
        out.append(r)
        pos += r.total_size
    return out


def build_record(
    *,
    topic: str,
    body: bytes,
    properties: bytes | dict[str, str] = b"",
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: tuple[str, int] = ("127.0.0.1", 0),
    store_timestamp: int = 0,
    store_host: tuple[str, int] = ("127.0.0.1", 10911),
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    version: int = 1,
    body_crc: int | None = None,
) -> bytes:
    """Encode a record exactly as RocketMQ 4.9's CommitLog lays it out (v1 or v2). Host v6 flags are derived from the hosts."""
    if isinstance(properties, dict):
        properties = encode_properties(properties)
    bh, bh6 = _encode_host(born_host)
    sh, sh6 = _encode_host(store_host)
    sys_flag = sys_flag | (BORNHOST_V6_FLAG if bh6 else 0) | (STOREHOST_V6_FLAG if sh6 else 0)
    t = topic.encode("utf-8")
    topic_part = (struct.pack(">B", len(t)) if version == 1 else struct.pack(">H", len(t))) + t
    crc = masked_crc32(body) if body_crc is None else body_crc
    rest = (
        struct.pack(">iiiqqiq", crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_timestamp)
        + bh
        + struct.pack(">q", store_timestamp)
        + sh
        + struct.pack(">iqi", reconsume_times, prepared_transaction_offset, len(body))
        + body
        + topic_part
        + struct.pack(">h", len(properties))
        + properties
    )
    total = 8 + len(rest)
    return struct.pack(">iI", total, MAGIC_V1 if version == 1 else MAGIC_V2) + rest


def record_length(topic: str, body_len: int, props: bytes | dict[str, str], v6_hosts: int = 0) -> int:
    if isinstance(props, dict):
        props = encode_properties(props)
    return FIXED_V1_IPV4 + 12 * v6_hosts + body_len + len(topic.encode()) + len(props)


# --- files ----------------------------------------------------------------------------------------------------
def list_files(directory: str) -> list[str]:
    if not os.path.isdir(directory):
        return []
    return sorted(os.listdir(directory))


def read_commitlog(root: str) -> tuple[list[tuple[int, Record]], list[tuple[int, int]], int]:
    """Walk the CommitLog as RocketMQ's recovery does: records until a zero TOTALSIZE, BLANK → next file.

    Returns ([(global offset, record)], [(global offset of BLANK, its total size)], end offset). Raises
    SpecParseError on anything that is neither a record, a BLANK nor the zero tail.
    """
    d = os.path.join(root, "commitlog")
    records: list[tuple[int, Record]] = []
    blanks: list[tuple[int, int]] = []
    end = 0
    for name in list_files(d):
        start = int(name)
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        pos = 0
        end = start
        while pos + 8 <= len(data):
            total, magic = struct.unpack_from(">iI", data, pos)
            if total == 0 and magic == 0:
                break
            r = parse_record(data, pos)
            if isinstance(r, Blank):
                blanks.append((start + pos, r.total_size))
                end = start + len(data)
                break
            records.append((start + pos, r))
            pos += r.total_size
            end = start + pos
    return records, blanks, end


def parse_cq_units(data: bytes) -> list[tuple[int, int, int]]:
    return [struct.unpack_from(">qiq", data, i) for i in range(0, len(data) - len(data) % CQ_UNIT, CQ_UNIT)]


def read_cq(root: str, topic: str, queue_id: int) -> list[tuple[int, int, int]]:
    """Every written unit of a queue from its first file on (stops at the first all-zero unit of the last file)."""
    d = os.path.join(root, "consumequeue", topic, str(queue_id))
    units: list[tuple[int, int, int]] = []
    for name in list_files(d):
        with open(os.path.join(d, name), "rb") as f:
            for u in parse_cq_units(f.read()):
                if u == (0, 0, 0):
                    break
                units.append(u)
    return units


def read_checkpoint(root: str) -> tuple[int, int, int, int, int]:
    with open(os.path.join(root, "checkpoint"), "rb") as f:
        data = f.read()
    return struct.unpack_from(">qqqqq", data, 0)
