"""Columnar decode (twin of rust/rmq-store/src/format/columns.rs): concatenated CommitLog records into Arrow-layout
column buffers, the same dict and the same bytes as ``rmq_core._core.decode_columns`` (which hands out Rust-owned
``ColumnBuffer`` objects that compare equal to these ``bytes``).

Format: :func:`decode_columns` returns a dict of little-endian buffers: ``num_rows``, fixed-width i32/i64 columns,
``(validity, offsets, data)`` string/binary columns and a ``properties`` map<utf8, utf8> column.
Invariants (shared with the Rust side): rows equal ``rmq_core.message.decode_messages`` on the same bytes (bodies
inflated, every property kept, a later duplicate wins); strings are UTF-8 with U+FFFD; filtered rows are still
checked structurally; a bad record → ``CorruptRecordError(offset=<index in buf>)``, an unknown compression or a
column over 2 GiB → ``ValueError``.
Thread-safety: pure function.
Details (every column, the filters, the decisions): docs/CORE_API.md, 'Columnar decode'.
"""

from __future__ import annotations

import operator
import struct
import sys
import zlib
from array import array
from itertools import accumulate
from typing import Any

from rmq_core.errors import CorruptRecordError

from .message import (
    _HEAD,
    _PORT_AND_OFFSET,
    COMPRESSED_FLAG,
    COMPRESSION_CODE_ZLIB,
    IPV4_HOST_LEN,
    IPV6_HOST_LEN,
    STOREHOSTADDRESS_V6_FLAG,
    RecordFormatError,
    compression_type,
    decode_properties,
    record_layout,
)

_I64 = struct.Struct(">q")
_MAX_DATA = 2**31 - 1
_LITTLE = sys.byteorder == "little"


def _le(typecode: str, values: list[int]) -> bytes:
    a = array(typecode, values)
    if not _LITTLE:  # pragma: no cover - big-endian hosts
        a.byteswap()
    return a.tobytes()


def _var(name: str, values: list[bytes | None]) -> tuple[bytes | None, bytes, bytes]:
    data = b"".join(v for v in values if v is not None)
    if len(data) > _MAX_DATA:
        raise ValueError(
            f"invalid argument: column {name} holds more than 2 GiB (i32 Arrow offsets): decode a smaller buffer"
        )
    offsets = _le("i", [0, *accumulate(0 if v is None else len(v) for v in values)])
    validity = None
    if any(v is None for v in values):
        bits = bytearray((len(values) + 7) // 8)
        for i, v in enumerate(values):
            if v is not None:
                bits[i >> 3] |= 1 << (i & 7)
        validity = bytes(bits)
    return validity, offsets, data


def _tag_set(tag_filter: Any) -> set[str]:
    if isinstance(tag_filter, (str, bytes)) or not isinstance(tag_filter, (list, tuple)):
        raise TypeError(f"tag_filter must be a list of str, got {type(tag_filter).__name__}")
    for t in tag_filter:
        if not isinstance(t, str):
            raise TypeError(f"tag_filter entries must be str, got {type(t).__name__}")
    return set(tag_filter)


def _utf8(raw: Any) -> bytes:
    return bytes(raw).decode("utf-8", errors="replace").encode()


def decode_columns(
    buf: Any, tag_filter: list[str] | None = None, min_queue_offset: int | None = None
) -> dict[str, Any]:
    """Every record of ``buf`` (concatenated, no padding; ``bytes`` or any byte buffer, e.g. what ``gather_runs``
    returns) as column buffers, keeping the rows the filters accept."""
    if not isinstance(buf, bytes):
        buf = bytes(memoryview(buf).cast("B"))
    tag_set = None if tag_filter is None else _tag_set(tag_filter)
    if min_queue_offset is not None:
        min_queue_offset = operator.index(min_queue_offset)  # TypeError for floats/str, as the Rust binding
        if not -(2**63) <= min_queue_offset < 2**63:
            raise OverflowError(f"min_queue_offset out of int64 range: {min_queue_offset}")
    topic: list[bytes | None] = []
    msg_id: list[bytes | None] = []
    tags: list[bytes | None] = []
    keys: list[bytes | None] = []
    body: list[bytes | None] = []
    queue_id: list[int] = []
    queue_offset: list[int] = []
    commitlog_offset: list[int] = []
    born_ts: list[int] = []
    store_ts: list[int] = []
    reconsume: list[int] = []
    map_offsets = [0]
    map_keys: list[bytes | None] = []
    map_values: list[bytes | None] = []

    pos = 0
    end = len(buf)
    while pos < end:
        try:
            total, _magic, sys_flag, st_pos, body_pos, body_len, topic_pos, topic_len = record_layout(buf, pos, end)
        except RecordFormatError as e:
            raise CorruptRecordError(f"corrupt record at offset {pos}: {e}", offset=pos) from None
        at = pos
        pos += total
        (_t, _m, _crc, qid, _flag, qoff, phys, _sf, born) = _HEAD.unpack_from(buf, at)
        if min_queue_offset is not None and qoff < min_queue_offset:
            continue
        props = decode_properties(bytes(buf[at + topic_pos + topic_len + 2 : at + total]))
        tag = props.get("TAGS")
        if tag_set is not None and (tag is None or tag not in tag_set):
            continue
        raw_body = bytes(buf[at + body_pos : at + body_pos + body_len])
        if sys_flag & COMPRESSED_FLAG:
            kind = compression_type(sys_flag)
            if kind not in (0, COMPRESSION_CODE_ZLIB):
                raise ValueError(
                    f"invalid argument: record at offset {at}: unsupported compression type {kind} "
                    f"(sys_flag {sys_flag:#x}); only ZLIB is built in"
                )
            try:
                raw_body = zlib.decompress(raw_body)
            except zlib.error as e:
                raise CorruptRecordError(
                    f"corrupt record at offset {at}: compressed body does not inflate (zlib): {e}", offset=at
                ) from None
        body.append(raw_body)
        tags.append(None if tag is None else tag.encode())
        k = props.get("KEYS")
        keys.append(None if k is None else k.encode())
        for pk, pv in props.items():
            map_keys.append(pk.encode())
            map_values.append(pv.encode())
        map_offsets.append(len(map_keys))
        topic.append(_utf8(buf[at + topic_pos : at + topic_pos + topic_len]))
        store_host_pos = st_pos + 8
        host_len = IPV6_HOST_LEN if sys_flag & STOREHOSTADDRESS_V6_FLAG else IPV4_HOST_LEN
        raw_host = bytes(buf[at + store_host_pos : at + store_host_pos + host_len])
        msg_id.append((raw_host + _I64.pack(phys)).hex().upper().encode())
        queue_id.append(qid)
        queue_offset.append(qoff)
        commitlog_offset.append(phys)
        born_ts.append(born)
        store_ts.append(_I64.unpack_from(buf, at + st_pos)[0])
        reconsume.append(_PORT_AND_OFFSET.unpack_from(buf, at + store_host_pos + host_len)[0])

    _kv, key_offsets, key_data = _var("properties.key", map_keys)
    _vv, value_offsets, value_data = _var("properties.value", map_values)
    return {
        "num_rows": len(queue_id),
        "topic": _var("topic", topic),
        "queue_id": _le("i", queue_id),
        "queue_offset": _le("q", queue_offset),
        "commitlog_offset": _le("q", commitlog_offset),
        "msg_id": _var("msg_id", msg_id),
        "tags": _var("tags", tags),
        "keys": _var("keys", keys),
        "body": _var("body", body),
        "properties": (_le("i", map_offsets), key_offsets, key_data, value_offsets, value_data),
        "born_timestamp": _le("q", born_ts),
        "store_timestamp": _le("q", store_ts),
        "reconsume_times": _le("i", reconsume),
    }


__all__ = ["decode_columns"]
