"""The pure-Python twin of the remoting frame codec's fast path (``rust/rmq-py/src/remoting.rs`` over
``rust/rmq-store/src/format/remoting.rs``): one call per received chunk and per burst of answers, and one per
producer send (``encode_send_request``).

Owns nothing of the layout: the per-frame codec is ``rmq_core.remoting.command``'s (passed in, so this package
imports nothing above the store). Format: ``int32 length`` (at least 4), then the frame ``decode_frame`` takes.
Invariants: the same commands, bytes consumed and error text as the Rust side for any buffer; ``encode_frames`` and
``encode_send_request`` are ``encode_one``'s frames; ``split_client_frames`` is ``split_frames`` plus the answers
of the ``light_type`` waiters.
Thread-safety: pure functions.
Details: docs/REMOTING_DESIGN.md, 'Frame codec twin'.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

_LENGTH = struct.Struct(">i")


def split_frames(
    buf: bytes | bytearray,
    command_type: type,
    decode_frame: Callable[[bytes | memoryview], Any],
    error_type: type[BaseException],
    max_frame_length: int,
) -> tuple[list[Any], int, str | None]:
    """The whole frames at the start of ``buf``, each ``decode_frame(frame)``: (commands, bytes consumed, error).
    ``error`` is the text of the first bad frame (its length outside [4, ``max_frame_length``], or ``decode_frame``
    raising ``error_type``); nothing after it is read. ``command_type`` is what ``decode_frame`` builds (the Rust
    side builds it itself for the frames it decodes)."""
    out: list[Any] = []
    error: str | None = None
    pos, end = 0, len(buf)
    unpack = _LENGTH.unpack_from
    with memoryview(buf) as view:  # released before the caller resizes ``buf``
        while end - pos >= 4:
            (length,) = unpack(buf, pos)
            if length < 4 or length > max_frame_length:
                error = f"frame length {length} outside [4, {max_frame_length}]"
                break
            if end - pos - 4 < length:
                break
            try:
                out.append(decode_frame(view[pos + 4 : pos + 4 + length]))
            except error_type as e:  # its text only: the traceback would keep a slice of ``view`` alive
                error = str(e)
                break
            pos += 4 + length
    return out, pos, error


def split_client_frames(
    buf: bytes | bytearray,
    pending: dict[int, Any],
    light_type: type,
    names: tuple[str, ...],
    response_flag: int,
    command_type: type,
    decode_frame: Callable[[bytes | memoryview], Any],
    error_type: type[BaseException],
    max_frame_length: int,
) -> tuple[list[Any], int, str | None]:
    """``split_frames`` for a client's connection: while the frames are responses (a flag with ``response_flag``),
    up to the chunk's first request, a response whose waiter in ``pending`` (by opaque) is a ``light_type``
    instance is taken out of ``pending`` and comes back as ``(waiter, code, remark, *(ext_fields.get(n) for n in
    names))`` in place of its command."""
    cmds, used, error = split_frames(buf, command_type, decode_frame, error_type, max_frame_length)
    out: list[Any] = []
    for i, cmd in enumerate(cmds):
        if not cmd.flag & response_flag:
            out.extend(cmds[i:])
            break
        waiter = pending.get(cmd.opaque)
        if isinstance(waiter, light_type):
            del pending[cmd.opaque]
            ext = cmd.ext_fields
            out.append((waiter, cmd.code, cmd.remark, *[ext.get(n) for n in names]))
        else:
            out.append(cmd)
    return out, used, error


def encode_frames(cmds: list[Any], encode_one: Callable[[Any], bytes], max_frame_length: int) -> bytes:
    """The frames of ``cmds`` in order as one buffer (``max_frame_length`` is ``encode_one``'s to enforce); a ``bytes``
    item is a frame already encoded, kept as it is."""
    return b"".join([c if type(c) is bytes else encode_one(c) for c in cmds])


def encode_send_request(
    code: int,
    language: str,
    version: int,
    opaque: int,
    names: tuple[str, ...],
    values: Sequence[Any],
    body: bytes,
    encode_one: Callable[..., bytes],
    max_frame_length: int,
) -> bytes:
    """A producer's send request as one frame: ``encode_one(code, language, version, opaque, names, values, body)``
    (the Rust side writes the common shape itself: exact str / bool / int header values, a dict of properties, a
    bytes body; ``max_frame_length`` is ``encode_one``'s to enforce)."""
    return encode_one(code, language, version, opaque, names, values, body)
