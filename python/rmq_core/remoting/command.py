"""RemotingCommand and its frame codec, as Apache RocketMQ's remoting layer puts them on the wire.

Frame (all big-endian):
    int32  length        = 4 + header_length + body_length (the length field itself excluded)
    int32  type+length   high byte = serialize type (0 JSON, 1 ROCKETMQ), low 24 bits = header_length
    bytes  header        JSON (UTF-8) or ROCKETMQ binary (layout: docs/BROKER_DESIGN.md, 'Remoting frames')
    bytes  body          opaque
Invariants:
1. JSON headers are written; JSON and ROCKETMQ headers are read (decided per frame by the type byte).
2. A frame longer than MAX_FRAME_LENGTH, a header length beyond the frame, or a header that does not parse raises
   RemotingCommandError; nothing partial is returned.
3. ``ext_fields`` values are strings, as Java's ``HashMap<String, String>`` holds them.
"""

from __future__ import annotations

import itertools
import json
import struct
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

import orjson

from rmq_core.errors import RmqError

MAX_FRAME_LENGTH = 16 * 1024 * 1024  # com.rocketmq.remoting.frameMaxLength
SERIALIZE_JSON = 0
SERIALIZE_ROCKETMQ = 1
RPC_TYPE_RESPONSE = 1 << 0
RPC_ONEWAY = 1 << 1

LANGUAGE_CODES = {
    "JAVA": 0,
    "CPP": 1,
    "DOTNET": 2,
    "PYTHON": 3,
    "DELPHI": 4,
    "ERLANG": 5,
    "RUBY": 6,
    "OTHER": 7,
    "HTTP": 8,
    "GO": 9,
    "PHP": 10,
    "OMS": 11,
    "RUST": 12,
    "NODE_JS": 13,
}
LANGUAGE_NAMES = {v: k for k, v in LANGUAGE_CODES.items()}
DEFAULT_VERSION = 409  # MQVersion V4_9_8: ≥ V4_9_4 (401), so name servers answer routes in standard JSON

_INT = struct.Struct(">i")
_STR_ONLY = frozenset((str,))
_opaque = itertools.count(1)
_opaque_lock = threading.Lock()


def _next_opaque_locked() -> int:
    with _opaque_lock:
        return next(_opaque) & 0x7FFFFFFF


def _next_opaque_gil() -> int:
    return next(_opaque) & 0x7FFFFFFF  # one C call: atomic under the GIL (a lock here cost ~0.2 µs of every send)


# A fresh request id (wraps past 2**31 - 1); any thread. The lock only where there is no GIL (free-threaded builds).
next_opaque = _next_opaque_gil if getattr(sys, "_is_gil_enabled", lambda: True)() else _next_opaque_locked


class RemotingCommandError(RmqError):
    """A frame or header that is not a valid RemotingCommand."""


@dataclass
class RemotingCommand:
    code: int
    language: str = "PYTHON"
    version: int = DEFAULT_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    serialize_type: int = field(
        default=SERIALIZE_JSON, compare=False
    )  # how this command was (or will be) framed; 4.9 answers in the request's

    # --- construction ----------------------------------------------------------------------------------------
    @classmethod
    def request(cls, code: int, ext_fields: dict[str, Any] | None = None, body: bytes | None = None) -> RemotingCommand:
        return cls(code=code, opaque=next_opaque(), ext_fields=_stringify(ext_fields), body=body)

    @classmethod
    def response_to(
        cls,
        req: RemotingCommand,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, Any] | None = None,
        body: bytes | None = None,
    ) -> RemotingCommand:
        return cls(
            code=code,
            language="JAVA",
            version=req.version,
            opaque=req.opaque,
            flag=RPC_TYPE_RESPONSE,
            remark=remark,
            ext_fields=_stringify(ext_fields),
            body=body,
            serialize_type=req.serialize_type,
        )

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RPC_TYPE_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & RPC_ONEWAY)

    def mark_oneway(self) -> RemotingCommand:
        self.flag |= RPC_ONEWAY
        return self

    # --- encoding --------------------------------------------------------------------------------------------
    def encode_header_json(self) -> bytes:
        doc: dict[str, Any] = {
            "code": self.code,
            "language": self.language,
            "version": self.version,
            "opaque": self.opaque,
            "flag": self.flag,
            "serializeTypeCurrentRPC": "JSON",
        }
        if self.remark is not None:
            doc["remark"] = self.remark
        doc["extFields"] = self.ext_fields
        try:  # orjson writes the same bytes as the stdlib below (compact, UTF-8, control characters as \u00XX)
            return orjson.dumps(doc)
        except TypeError:  # what orjson refuses (an int over 64 bits, a non-str key): the stdlib's answer
            return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    def encode_header_rocketmq(self) -> bytes:
        remark = self.remark.encode("utf-8") if self.remark is not None else b""
        parts = [
            struct.pack(
                ">hBhii", self.code, LANGUAGE_CODES.get(self.language, 7), self.version, self.opaque, self.flag
            ),
            struct.pack(">i", len(remark)),
            remark,
        ]
        ext = bytearray()
        for k, v in self.ext_fields.items():
            kb, vb = k.encode("utf-8"), v.encode("utf-8")
            ext += struct.pack(">h", len(kb)) + kb + struct.pack(">i", len(vb)) + vb
        parts += [struct.pack(">i", len(ext)), bytes(ext)]
        return b"".join(parts)

    def encode(self, serialize_type: int | None = None) -> bytes:
        head, body = self.encode_parts(serialize_type)
        return head + body

    def encode_parts(self, serialize_type: int | None = None) -> tuple[bytes, bytes]:
        """``encode()``'s bytes in two parts: (the length, mark and header; the body), so that a large body is
        written as it is, not copied into the frame."""
        if serialize_type is None:
            serialize_type = self.serialize_type
        header = self.encode_header_json() if serialize_type == SERIALIZE_JSON else self.encode_header_rocketmq()
        body = self.body or b""
        length = 4 + len(header) + len(body)
        if length > MAX_FRAME_LENGTH:
            raise RemotingCommandError(f"frame of {length} bytes is over the {MAX_FRAME_LENGTH}-byte limit")
        return struct.pack(">ii", length, (serialize_type << 24) | len(header)) + header, body

    # --- decoding --------------------------------------------------------------------------------------------
    @classmethod
    def decode_frame(cls, frame: bytes | memoryview) -> RemotingCommand:
        """Decode a frame *without* its leading length field (what the frame decoder hands over)."""
        if len(frame) < 4:
            raise RemotingCommandError(f"frame of {len(frame)} bytes is shorter than its header-length field")
        (mark,) = _INT.unpack_from(frame, 0)
        serialize_type = (mark >> 24) & 0xFF
        header_length = mark & 0xFFFFFF
        if 4 + header_length > len(frame):
            raise RemotingCommandError(f"header length {header_length} runs past the {len(frame)}-byte frame")
        header = bytes(frame[4 : 4 + header_length])
        body = bytes(frame[4 + header_length :]) or None
        if serialize_type == SERIALIZE_JSON:
            cmd = cls._from_json(header)
        elif serialize_type == SERIALIZE_ROCKETMQ:
            cmd = cls._from_rocketmq(header)
        else:
            raise RemotingCommandError(f"unknown serialize type {serialize_type}")
        cmd.body = body
        cmd.serialize_type = serialize_type
        return cmd

    @classmethod
    def _from_json(cls, header: bytes) -> RemotingCommand:
        try:
            doc = orjson.loads(header)
        except orjson.JSONDecodeError:  # what orjson refuses and the stdlib may take (a lone surrogate escape, an
            try:  # int over 64 bits), or the stdlib's own error for the message
                doc = json.loads(header.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError) as e:  # RecursionError: nested too deep
                raise RemotingCommandError(f"header is not JSON: {e}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("code"), int):
            raise RemotingCommandError("JSON header has no integer 'code'")
        ext = doc.get("extFields") or {}
        if not isinstance(ext, dict):
            raise RemotingCommandError("extFields is not an object")
        language = doc.get("language", "JAVA")
        if isinstance(language, int):
            language = LANGUAGE_NAMES.get(language, "OTHER")
        try:
            return cls(
                code=doc["code"],
                language=str(language),
                version=int(doc.get("version", 0)),
                opaque=int(doc.get("opaque", 0)),
                flag=int(doc.get("flag", 0)),
                remark=doc.get("remark"),
                ext_fields=ext
                if _STR_ONLY.issuperset(map(type, ext.values()))
                # JSON keys are str
                else {k: v if v.__class__ is str else _java_str(v) for k, v in ext.items() if v is not None},
            )
        except (TypeError, ValueError, OverflowError) as e:  # OverflowError: int() of an Infinity the stdlib reads
            raise RemotingCommandError(f"bad JSON header field: {e}") from None

    @classmethod
    def _from_rocketmq(cls, header: bytes) -> RemotingCommand:
        try:
            code, lang, version, opaque, flag = struct.unpack_from(">hBhii", header, 0)
            pos = 13
            (remark_len,) = struct.unpack_from(">i", header, pos)
            pos += 4
            if remark_len < 0 or pos + remark_len > len(header):
                raise RemotingCommandError("remark length out of range")
            remark = header[pos : pos + remark_len].decode("utf-8") if remark_len else None
            pos += remark_len
            (ext_len,) = struct.unpack_from(">i", header, pos)
            pos += 4
            end = pos + ext_len
            if ext_len < 0 or end > len(header):
                raise RemotingCommandError("extFields length out of range")
            ext: dict[str, str] = {}
            while pos < end:
                (kl,) = struct.unpack_from(">h", header, pos)
                pos += 2
                key = header[pos : pos + kl].decode("utf-8")
                pos += kl
                (vl,) = struct.unpack_from(">i", header, pos)
                pos += 4
                if kl < 0 or vl < 0 or pos + vl > end:
                    raise RemotingCommandError("extFields entry out of range")
                ext[key] = header[pos : pos + vl].decode("utf-8")
                pos += vl
        except struct.error as e:
            raise RemotingCommandError(f"truncated ROCKETMQ header: {e}") from None
        except UnicodeDecodeError as e:
            raise RemotingCommandError(f"ROCKETMQ header is not UTF-8: {e}") from None
        return cls(
            code=code,
            language=LANGUAGE_NAMES.get(lang, "OTHER"),
            version=version,
            opaque=opaque,
            flag=flag,
            remark=remark,
            ext_fields=ext,
        )


def _java_str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return v if isinstance(v, str) else str(v)


def _stringify(fields: dict[str, Any] | None) -> dict[str, str]:
    if not fields:
        return {}
    return {k: v if v.__class__ is str else _java_str(v) for k, v in fields.items() if v is not None}
