"""JSON as RocketMQ's fastjson writes it, read and written.

fastjson writes maps with integer keys *unquoted* (``{0:"10.0.0.1:10911"}``, ``{"offsetTable":{"t@g":{0:5}}}``),
which standard JSON parsers reject. ``loads`` accepts both forms and returns int keys for bare integer keys;
``dumps`` writes int keys bare (``unquoted_int_keys=True``, fastjson's default, what RocketMQ's config files and
old-version route bodies use) or quoted (standard JSON, what route data uses for clients ≥ V4_9_4).

fastjson also writes maps keyed by objects (``Map<MessageQueue, OffsetWrapper>`` in ConsumeStats, TopicStatsTable)
with the key's JSON object as the key: ``{{"brokerName":"b","queueId":0,"topic":"T"}:{…}}``. ``dumps`` writes a
``RawKey`` key verbatim for that and a ``RawValue`` value verbatim (``loads`` does not read such maps back;
``raw_field(text, name)`` cuts a top-level field's JSON text out of a document unparsed, so such a map can be passed
on, and ``map_items(map_text)`` reads one as ``(key, value)`` pairs, an object key as a dict).

Invariant: ``loads(dumps(x, unquoted_int_keys=b)) == x`` for JSON-shaped ``x`` with str or int keys.
"""

from __future__ import annotations

import json
import re
from typing import Any

_WS = " \t\r\n"


_BARE_KEY = re.compile(r"[{,][ \t\r\n]*(-?[0-9]+)[ \t\r\n]*:")


def _quote_bare_keys(text: str) -> tuple[str, bool]:
    """Quote bare integer object keys outside strings; says whether any was found. The scan is the regex engine's
    and ``str.count``'s (no Python step per character): escapes are masked to same-length filler, so every ``"``
    left delimits a string and a key candidate is outside strings when an even number of them precede it."""
    masked = text.replace("\\\\", "\0\0").replace('\\"', "\0\0")
    out: list[str] = []
    last = pos = quotes = 0
    for m in _BARE_KEY.finditer(masked):
        start, end = m.span(1)
        quotes += masked.count('"', pos, start)
        pos = start
        if quotes & 1:  # inside a string
            continue
        out += (text[last:start], '"', text[start:end], '"')
        last = end
    if not out:
        return text, False
    out.append(text[last:])
    return "".join(out), True


class RawKey(str):
    """A map key ``dumps`` writes verbatim (already JSON: an object key as fastjson writes one)."""


class RawValue(str):
    """A value ``dumps`` writes verbatim (already JSON, e.g. a map with object keys cut out by ``raw_field``)."""


def raw_field(text: str | bytes, name: str) -> str | None:
    """The JSON text of the top-level object's field ``name`` (any value, object keys included), or None."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8")
    depth, i, n = 0, 0, len(text)
    key = json.dumps(name)
    while i < n:
        c = text[i]
        if c == '"':
            j = _string_end(text, i)
            if depth == 1 and text[i : j + 1] == key:
                k = j + 1
                while k < n and text[k] in _WS:
                    k += 1
                if k < n and text[k] == ":":
                    start = k + 1
                    return text[start : _value_end(text, start)].strip()
            i = j + 1
            continue
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
        i += 1
    return None


def map_items(text: str | bytes) -> list[tuple[Any, Any]]:
    """The entries of one JSON map as fastjson writes it, object keys allowed (``{{"topic":"T",…}:{…},…}``): a list
    of ``(key, value)``, each key and value read by ``loads`` (an object key becomes a dict). Raises ValueError."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8")
    n = len(text)

    def skip(i: int) -> int:
        while i < n and text[i] in _WS:
            i += 1
        return i

    i = skip(0)
    if i >= n or text[i] != "{":
        raise ValueError(f"not a JSON map: {text[:60]!r}")
    out: list[tuple[Any, Any]] = []
    i = skip(i + 1)
    if i < n and text[i] == "}":
        return out
    while i < n:
        if text[i] in '"{[':
            key_end = _value_end(text, i)
        else:  # a bare key (fastjson's unquoted int): up to the colon
            key_end = text.find(":", i)
            key_end = n if key_end < 0 else key_end
        key_text = text[i:key_end].strip()
        i = skip(key_end)
        if i >= n or text[i] != ":":
            raise ValueError(f"expected ':' after the key {key_text[:60]!r}")
        value_start = skip(i + 1)
        value_end = _value_end(text, value_start)
        key = loads(key_text) if key_text[:1] in ('"', "{", "[") else loads(f"[{key_text}]")[0]
        out.append((key, loads(text[value_start:value_end])))
        i = skip(value_end)
        if i < n and text[i] == ",":
            i = skip(i + 1)
            continue
        if i < n and text[i] == "}":
            return out
        raise ValueError(f"expected ',' or '}}' at {i}")
    raise ValueError("unterminated JSON map")


def _string_end(text: str, i: int) -> int:
    j = i + 1
    while j < len(text):
        if text[j] == "\\":
            j += 2
            continue
        if text[j] == '"':
            return j
        j += 1
    raise ValueError("unterminated string in JSON")


def _value_end(text: str, i: int) -> int:
    """The index just past the JSON value starting at or after ``i``."""
    depth = 0
    while i < len(text):
        c = text[i]
        if c == '"':
            i = _string_end(text, i) + 1
            if depth == 0:
                return i
            continue
        if c in "{[":
            depth += 1
        elif c in "}]":
            if depth == 0:
                return i
            depth -= 1
            if depth == 0:
                return i + 1
        elif c == "," and depth == 0:
            return i
        i += 1
    return i


def _int_keys(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {(int(k) if isinstance(k, str) and _is_int(k) else k): _int_keys(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_int_keys(v) for v in obj]
    return obj


def _is_int(s: str) -> bool:
    body = s[1:] if s.startswith("-") else s
    return body.isdigit() and len(body) > 0


def loads(text: str | bytes, *, int_keys: bool = True, fallback_max: int | None = None) -> Any:
    """Parse fastjson or standard JSON. With ``int_keys`` (default), keys that are integers become ``int``.
    ``fallback_max``: the longest text the bare-key fallback takes (a request body's: ``request_limits``); longer
    text that is not standard JSON raises the standard parser's error, with that limit named."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        if fallback_max is not None and len(text) > fallback_max:
            raise json.JSONDecodeError(
                f"{e.msg} (fastjson's bare keys are read in at most {fallback_max} characters)", e.doc, e.pos
            ) from None
        fixed, found = _quote_bare_keys(text)
        if not found:
            raise
        obj = json.loads(fixed)
    return _int_keys(obj) if int_keys else obj


def dumps(obj: Any, *, unquoted_int_keys: bool = True, pretty: bool = False, ensure_ascii: bool = False) -> str:
    """Serialise as fastjson does (int keys bare) or as standard JSON (``unquoted_int_keys=False``)."""
    nl = "\n" if pretty else ""
    step = "\t" if pretty else ""

    def enc(o: Any, depth: int) -> str:
        pad = nl + step * (depth + 1)
        end = nl + step * depth
        if isinstance(o, dict):
            if not o:
                return "{}"
            items = []
            for k, v in o.items():
                if isinstance(k, bool) or not isinstance(k, (str, int)):
                    raise TypeError(f"unsupported key {k!r}")
                key = (
                    str(k)
                    if isinstance(k, RawKey)
                    else str(k)
                    if (isinstance(k, int) and unquoted_int_keys)
                    else json.dumps(str(k), ensure_ascii=ensure_ascii)
                )
                items.append(f"{pad}{key}:{enc(v, depth + 1)}")
            return "{" + ",".join(items) + end + "}"
        if isinstance(o, (list, tuple, set, frozenset)):
            seq = sorted(o) if isinstance(o, (set, frozenset)) else o
            if not seq:
                return "[]"
            return "[" + ",".join(f"{pad}{enc(v, depth + 1)}" for v in seq) + end + "]"
        if isinstance(o, RawValue):
            return str(o)
        return json.dumps(o, ensure_ascii=ensure_ascii)

    return enc(obj, 0)
