"""The pure-Python twin of ``rust/rmq-store/src/format/batch.rs``: the SEND_BATCH_MESSAGE body (4.9's
``MessageDecoder.encodeMessages`` layout) read block by block, and each block's stored properties as 4.9.7's
``CommitLog.MessageExtBatchEncoder`` writes them (block properties, then the batch's: header properties + CLUSTER).

Format (per block, big-endian): TOTALSIZE i32 · MAGIC i32 · BODYCRC i32 · FLAG i32 · BODYLEN i32 + BODY ·
PROPLEN i16 + PROPERTIES. ``encode_batch_messages`` writes a producer's batch body, missing UNIQ_KEYs set.
Invariants (the Rust module's): 1. ``split_batch`` returns every block or raises ValueError naming the block and its
byte position, never part of it; 2. ``batch_records`` gives each block the properties ``append_batch_properties``
writes, and a block without UNIQ_KEY the caller's next id appended last.
Thread-safety: pure functions.
Details (the separator rule, what is malformed): docs/CORE_API.md, 'Batch bodies'.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

from .message import (
    MAX_PROPERTIES_SIZE,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    UNIQ_KEY,
    append_property,
    create_offset_msg_id,
    iter_properties,
)

# TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLEN
BATCH_BLOCK_HEAD = struct.Struct(">iiiii")
BATCH_PROP_LEN = struct.Struct(">h")
BATCH_BLOCK_OVERHEAD = BATCH_BLOCK_HEAD.size + BATCH_PROP_LEN.size  # 22 bytes besides body and properties
_SEPARATOR = PROPERTY_SEPARATOR.encode()
NO_BLOCK_IN_BATCH = "the batch body holds no message"  # why a body without a block is refused

# (flag, body, properties as sent)
BatchBlock = tuple[int, bytes, bytes]


def split_batch(body: bytes | bytearray | memoryview) -> list[BatchBlock]:
    """The blocks of a SEND_BATCH_MESSAGE body in order (invariant 1)."""
    buf = memoryview(body)
    if buf.format != "B" or buf.ndim != 1:
        buf = buf.cast("B")
    n = len(buf)
    out: list[BatchBlock] = []
    pos = 0
    while pos < n:
        index = len(out)
        if n - pos < BATCH_BLOCK_OVERHEAD:
            raise ValueError(
                f"batch block {index} at byte {pos} is truncated: {n - pos} bytes left, "
                f"a block needs at least {BATCH_BLOCK_OVERHEAD}"
            )
        total, _magic, _crc, flag, body_len = BATCH_BLOCK_HEAD.unpack_from(buf, pos)
        if body_len < 0:
            raise ValueError(f"batch block {index} at byte {pos} has a negative body length {body_len}")
        body_pos = pos + BATCH_BLOCK_HEAD.size
        prop_len_pos = body_pos + body_len
        if prop_len_pos + BATCH_PROP_LEN.size > n:
            raise ValueError(
                f"batch block {index} at byte {pos}: body of {body_len} bytes runs past the {n}-byte batch"
            )
        (prop_len,) = BATCH_PROP_LEN.unpack_from(buf, prop_len_pos)
        if prop_len < 0:
            raise ValueError(f"batch block {index} at byte {pos} has a negative properties length {prop_len}")
        props_pos = prop_len_pos + BATCH_PROP_LEN.size
        end = props_pos + prop_len
        if end > n:
            raise ValueError(
                f"batch block {index} at byte {pos}: properties of {prop_len} bytes run past the {n}-byte batch"
            )
        if total != end - pos:
            raise ValueError(
                f"batch block {index} at byte {pos}: TOTALSIZE {total} does not match its "
                f"{end - pos} bytes (body {body_len}, properties {prop_len})"
            )
        props = bytes(buf[props_pos:end])
        try:
            props.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(
                f"batch block {index} at byte {pos}: properties are not UTF-8 (invalid byte at {e.start})"
            ) from None
        out.append((flag, bytes(buf[body_pos:prop_len_pos]), props))
        pos = end
    return out


def append_batch_properties(block: bytes, batch: bytes) -> bytes:
    """What 4.9.7's batch encoder stores for a block: ``block``, a ``\\x02`` when ``block`` is non-empty, ``batch``
    is non-empty and ``block`` does not end with one, then ``batch``."""
    if not batch:
        return block
    if block and not block.endswith(_SEPARATOR):
        return block + _SEPARATOR + batch
    return block + batch


def has_property(properties: bytes, name: str) -> bool:
    """Whether a reader's map of ``properties`` holds ``name``."""
    return any(k == name for k, _ in iter_properties(properties.decode("utf-8", errors="replace")))


def batch_records(
    body: bytes | bytearray | memoryview, batch_properties: bytes, next_uniq_id: Callable[[], str] | None
) -> tuple[list[tuple[int, bytes, bytes]], str | None]:
    """``(records, None)``: per block ``(flag, body, stored properties)`` (invariant 2; ``next_uniq_id`` None: no
    UNIQ_KEY assigned); ``([], reason)`` when the body is malformed or holds no block."""
    try:
        blocks = split_batch(body)
    except ValueError as e:
        return [], str(e)
    if not blocks:
        return [], NO_BLOCK_IN_BATCH
    out = []
    for flag, block_body, block_props in blocks:
        props = append_batch_properties(block_props, batch_properties)
        if next_uniq_id is not None and not has_property(props, UNIQ_KEY):
            props = append_property(props, UNIQ_KEY, next_uniq_id())
        out.append((flag, block_body, props))
    return out, None


def join_offset_msg_ids(store_host: tuple[str, int], offsets: list[int]) -> str:
    """4.9's batch answer msgId: the offset msg ids of ``offsets`` joined with ','."""
    return ",".join(create_offset_msg_id(store_host, o) for o in offsets)


def _encodable(name: str, value: str) -> bool:
    """``property_encodable``: what ``properties_to_string`` writes as it is rather than refusing."""
    return (
        bool(name)
        and bool(value)
        and NAME_VALUE_SEPARATOR not in name
        and PROPERTY_SEPARATOR not in name
        and PROPERTY_SEPARATOR not in value
    )


def encode_batch_messages(
    msgs: list[Any], uniq_key: str, prefix: str, counter: Iterator[int], max_body_size: int
) -> bytes | None:
    """A producer's batch body: each message's block (``append_block``'s layout) after its ``uniq_key`` is set to
    ``prefix + "%04X" % (next(counter) & 0xFFFF)`` when absent; None at the first message outside the shape
    (``body`` not exact bytes of 1 to ``max_body_size`` bytes, ``flag`` not an exact 32-bit int, ``properties`` not
    an exact dict of exact str entries ``properties_to_string`` writes as they are — checked before its id is set —
    or, with the id, over ``MAX_PROPERTIES_SIZE`` bytes); the messages before it keep their ids."""
    out: list[bytes] = []
    for m in msgs:
        try:
            body, flag, props = m.body, m.flag, m.properties
        except AttributeError:
            return None
        if type(body) is not bytes or not 0 < len(body) <= max_body_size:
            return None
        if type(flag) is not int or not -(2**31) <= flag < 2**31:
            return None
        if type(props) is not dict:
            return None
        parts: list[str] = []
        for name, value in props.items():
            if type(name) is not str:
                return None
            if value is None:
                continue
            if type(value) is not str or not _encodable(name, value):
                return None
            parts += (name, NAME_VALUE_SEPARATOR, value, PROPERTY_SEPARATOR)
        try:
            encoded = "".join(parts).encode("utf-8")
        except UnicodeEncodeError:  # (a lone surrogate: the Rust side cannot read the str)
            return None
        if uniq_key not in props:
            uniq = f"{prefix}{next(counter) & 0xFFFF:04X}"
            props[uniq_key] = uniq
            encoded += f"{uniq_key}{NAME_VALUE_SEPARATOR}{uniq}{PROPERTY_SEPARATOR}".encode()
        if len(encoded) > MAX_PROPERTIES_SIZE:
            return None
        total = BATCH_BLOCK_OVERHEAD + len(body) + len(encoded)
        out += (BATCH_BLOCK_HEAD.pack(total, 0, 0, flag, len(body)), body, BATCH_PROP_LEN.pack(len(encoded)), encoded)
    return b"".join(out)
