"""RocketMQ's message encodings inside remoting commands (``cm/message/MessageDecoder.java``): the property string and
the batch body.

Format: the **property string** is ``name \\x01 value \\x02`` per entry; the **batch body** of SEND_BATCH_MESSAGE
(4.9 ``MessageDecoder.encodeMessages``) is, per message, TOTALSIZE · MAGIC 0 · BODYCRC 0 · FLAG · BODYLEN + BODY ·
PROPLEN int16 + PROPS. Invariants:
1. ``string_to_properties`` reads exactly what Java's parser reads (with or without the trailing ``\\x02``).
2. ``properties_to_string`` writes entries in dict order, skips ``None`` values, and refuses (ValueError) what no
   reader could get back, so ``string_to_properties(properties_to_string(d)) == d`` for every ``d`` it accepts.
3. ``decode_batch`` returns every block or raises ``BatchDecodeError`` naming the block and byte position; it never
   returns a partial list. ``decode_batch(encode_batch(ms))`` gives back each message's flag, body and properties.
Thread-safety: pure functions, no shared state.
Details (the parse and refusal rules): docs/BROKER_DESIGN.md, 'Message encodings'.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple, Protocol

from rmq_core import _backend
from rmq_core.format.batch import (
    BATCH_BLOCK_HEAD,
    BATCH_BLOCK_OVERHEAD,
    BATCH_PROP_LEN,
    append_batch_properties,
)
from rmq_core.format.message import (
    MAX_PROPERTIES_SIZE,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    properties_from_text,
)


class BatchDecodeError(ValueError):
    """A SEND_BATCH_MESSAGE body that is not a sequence of well-formed message blocks."""


class BatchMessage(NamedTuple):
    """One block of a batch body: the user ``flag``, the ``body`` and the decoded ``properties``."""

    flag: int
    body: bytes
    properties: dict[str, str]


class _MessageLike(Protocol):
    flag: int
    body: bytes
    properties: dict[str, str]


# --- property string -----------------------------------------------------------------------------------------
def properties_to_string(properties: Mapping[str, str | None] | None, *, trailing_separator: bool = True) -> str:
    """``MessageDecoder.messageProperties2String``. ``trailing_separator=False`` writes what Java 4.9.3–5.1.4 write
    (no ``\\x02`` after the last entry); the default matches 4.9.0–4.9.2, 5.2+ and the store's records."""
    if not properties:
        return ""
    parts: list[str] = []
    for name, value in properties.items():
        if value is None:
            continue
        if not isinstance(name, str) or not isinstance(value, str):
            raise ValueError(f"property names and values must be strings, got {name!r}={value!r}")
        if not name:
            raise ValueError(f"property name is empty (value {value!r}); no reader could get it back")
        if NAME_VALUE_SEPARATOR in name or PROPERTY_SEPARATOR in name:
            raise ValueError(f"property name {name!r} contains a separator character (\\x01 or \\x02)")
        if not value:
            raise ValueError(f"property {name!r} has an empty value; RocketMQ's parser drops such entries")
        if PROPERTY_SEPARATOR in value:
            raise ValueError(f"property {name!r} value {value!r} contains the property separator \\x02")
        parts.append(name)
        parts.append(NAME_VALUE_SEPARATOR)
        parts.append(value)
        parts.append(PROPERTY_SEPARATOR)
    if parts and not trailing_separator:
        parts.pop()
    return "".join(parts)


def java_hash_map_order(properties: Mapping[str, str]) -> dict[str, str]:
    """``properties`` (put in this order) in the order a ``java.util.HashMap`` filled in that order iterates them:
    what 4.9.7's ``messageProperties2String`` writes for a map the broker filled itself (a send's or a batch's
    properties: ``string2messageProperties`` of the header's, then CLUSTER, ...). The engine's
    ``java_hash_map_order`` owns the rule (its doc: buckets, resizes, a treeified bin not modelled)."""
    names = list(properties)
    order, _exact = _backend.impl.java_hash_map_order(names)
    return {names[i]: properties[names[i]] for i in order}


def string_to_properties(text: str | None) -> dict[str, str]:
    """``MessageDecoder.string2messageProperties``: never fails; malformed segments are skipped as Java skips them.
    Parsed by the backend's ``decode_properties`` (the separators are ASCII, so splitting the UTF-8 bytes splits the
    text); a text UTF-8 cannot hold (a lone surrogate) is parsed as text."""
    if not text:
        return {}
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        return properties_from_text(text)
    return _backend.impl.decode_properties(raw)


def append_properties(block_properties: str, batch_properties: str) -> str:
    """What 4.9.7 stores for a batch block: the block's property string, then the batch-level one, with a ``\\x02``
    inserted when the block's string is non-empty and does not already end with one (``CommitLog`` batch encoder;
    ``format/batch``'s ``append_batch_properties``)."""
    return append_batch_properties(block_properties.encode(), batch_properties.encode()).decode()


# --- batch body ----------------------------------------------------------------------------------------------
def encode_message(message: _MessageLike, *, trailing_separator: bool = True) -> bytes:
    """``MessageDecoder.encodeMessage``: one batch block (flag, body, properties; magic and CRC written as 0)."""
    props = properties_to_string(message.properties, trailing_separator=trailing_separator).encode("utf-8")
    if len(props) > MAX_PROPERTIES_SIZE:
        raise ValueError(f"properties of {len(props)} bytes exceed the {MAX_PROPERTIES_SIZE}-byte limit")
    body = bytes(message.body)
    total = BATCH_BLOCK_OVERHEAD + len(body) + len(props)
    return b"".join(
        (BATCH_BLOCK_HEAD.pack(total, 0, 0, message.flag, len(body)), body, BATCH_PROP_LEN.pack(len(props)), props)
    )


def encode_batch(messages: Iterable[_MessageLike], *, trailing_separator: bool = True) -> bytes:
    """``MessageDecoder.encodeMessages``: the blocks of ``messages`` concatenated (a SEND_BATCH_MESSAGE body)."""
    return b"".join(encode_message(m, trailing_separator=trailing_separator) for m in messages)


def decode_batch(body: bytes | bytearray | memoryview) -> list[BatchMessage]:
    """Split a SEND_BATCH_MESSAGE body into its blocks (the backend's ``split_batch``: the layout's owner is
    ``format/batch``). Stricter than Java's ``decodeMessages`` (which trusts the lengths): TOTALSIZE must equal the
    block's real size, no length may be negative or run past the body, and the properties must be UTF-8. Any
    violation raises BatchDecodeError naming the block and nothing is returned."""
    try:
        blocks = _backend.impl.split_batch(body if type(body) is bytes else bytes(body))
    except ValueError as e:
        raise BatchDecodeError(str(e)) from None
    decode = _backend.impl.decode_properties
    return [BatchMessage(flag, block_body, decode(props)) for flag, block_body, props in blocks]
