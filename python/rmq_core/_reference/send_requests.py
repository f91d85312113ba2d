"""The pure-Python twin of ``rust/rmq-py/src/send_request.rs``: a chunk's send requests read into the columns of the
records their plain sends store (``SendRequestParser.parse`` → ``SendRequestColumns``), the runs of plain and general
requests, and the answers of the stored ones. ``StoreEngine.put_send_requests`` (``message_store.py``) stores a run.

Invariants (the Rust side's): a request is plain only when each field the general path reads decodes the same here;
an answer is the bytes ``RemotingCommand.encode`` writes for the general path's answer (a JSON header, compact, in
``encode_header_json``'s key order, no body).

Thread-safety: both classes are immutable once built.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from rmq_core.format.message import append_property, create_offset_msg_id
from rmq_core.format.send_request import PlainPropertyRules, parse_decimal, parse_java_bool, rewrite_plain_properties

FIELDS = 13
REQUIRED = 8
SERIALIZE_JSON = 0
_FRAME_HEAD = struct.Struct(">ii")
Raw = tuple[int, int, int, int]


@dataclass(frozen=True)
class _Row:
    key: int
    body: bytes | None
    flag: int
    sys_flag: int
    born_timestamp: int
    reconsume_times: int
    properties: str
    needs_uniq: bool
    opaque: int
    version: int
    oneway: bool


def _exact_int(v: Any) -> int | None:
    """An int (an IntEnum code too), not a bool, that fits i64."""
    return int(v) if isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63 else None


class SendRequestColumns:
    """The sends of one chunk, as columns (see the module header)."""

    def __init__(self, uniq_key: str, answer_language: str, answer_flag: int, answer_keys: tuple[str, ...]) -> None:
        self._keys: list[tuple[str, int, bool, str, int]] = []
        self._rows: list[_Row | None] = []
        self._uniq_key = uniq_key
        self._assigned: dict[int, str] = {}  # row → the properties stored once the store gave it a UNIQ_KEY
        self._answer = (answer_language, answer_flag, answer_keys)

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def needs_uniq_keys(self) -> bool:
        return any(r is not None and r.needs_uniq for r in self._rows)

    @property
    def all_plain(self) -> bool:
        return all(r is not None for r in self._rows)

    @property
    def key_of(self) -> list[int]:
        return [-1 if r is None else r.key for r in self._rows]

    @property
    def keys(self) -> list[tuple[str, int, bool, str, int]]:
        return list(self._keys)

    def segments(self, plain_keys: Sequence[bool]) -> list[tuple[int, int, bool]]:
        if len(plain_keys) != len(self._keys):
            raise ValueError("one bool per key")
        out: list[tuple[int, int, bool]] = []
        for i, r in enumerate(self._rows):
            plain = r is not None and bool(plain_keys[r.key])
            if out and out[-1][2] == plain:
                out[-1] = (out[-1][0], i + 1, plain)
            else:
                out.append((i, i + 1, plain))
        return out

    def plain_rows(self, start: int, end: int) -> list[_Row]:
        if not 0 <= start <= end <= len(self._rows):
            raise ValueError(f"rows [{start}, {end}) outside 0..{len(self._rows)}")
        rows = self._rows[start:end]
        out = [r for r in rows if r is not None]
        if len(out) != len(rows):
            raise ValueError("a general request in a plain run")
        return out

    def key(self, i: int) -> tuple[str, int, bool, str, int]:
        return self._keys[i]

    def stored_properties(self, start: int, end: int, new_id: Callable[[], str] | None) -> list[str]:
        """The properties each row of ``[start, end)`` stores: a row without a UNIQ_KEY gets ``new_id()`` appended
        (remembered for ``arrivals``)."""
        out = []
        for i, r in enumerate(self.plain_rows(start, end), start):
            props = r.properties
            if r.needs_uniq:
                if new_id is None:
                    raise ValueError("a send without UNIQ_KEY and no id generator")
                props = self._assigned[i] = append_property(props.encode(), self._uniq_key, new_id()).decode()
            out.append(props)
        return out

    @staticmethod
    def _check(rows: Sequence[_Row], raw: Sequence[Raw]) -> None:
        if len(rows) != len(raw):
            raise ValueError(f"{len(rows)} rows but {len(raw)} results")

    def answer(
        self, start: int, end: int, raw: Sequence[Raw], spec: SendAnswerSpec
    ) -> tuple[list[bytes | None], list[tuple[int, int, int]]]:
        rows = self.plain_rows(start, end)
        self._check(rows, raw)
        answers = self._answer_frames(rows, raw, spec.codes, spec.region, spec.trace_on, spec.store_host)
        return answers, self._count_totals(rows, raw, spec.counted)

    def _answer_frames(
        self,
        rows: Sequence[_Row],
        raw: Sequence[Raw],
        codes: Sequence[int],
        region: str,
        trace_on: str,
        store_host: tuple[str, int],
    ) -> list[bytes | None]:
        language, flag, k = self._answer
        out: list[bytes | None] = []
        for r, (status, clo, qo, _) in zip(rows, raw):
            code = codes[status] if 0 <= status < len(codes) else -1
            if r.oneway or code < 0:
                out.append(None)
                continue
            doc = {
                "code": code,
                "language": language,
                "version": r.version,
                "opaque": r.opaque,
                "flag": flag,
                "serializeTypeCurrentRPC": "JSON",
                "extFields": {
                    k[0]: region,
                    k[1]: trace_on,
                    k[2]: create_offset_msg_id(store_host, clo),
                    k[3]: str(self._keys[r.key][1]),
                    k[4]: str(qo),
                },
            }
            header = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
            out.append(_FRAME_HEAD.pack(4 + len(header), len(header)) + header)
        return out

    def arrivals(
        self, start: int, end: int, raw: Sequence[Raw], topics: Collection[str] | None = None
    ) -> list[tuple[str, int, int, int, bytes]]:
        rows = self.plain_rows(start, end)
        self._check(rows, raw)
        return [
            (
                self._keys[r.key][0],
                self._keys[r.key][1],
                status,
                qo,
                self._assigned.get(i, r.properties).encode("utf-8"),
            )
            for i, (r, (status, _, qo, _)) in enumerate(zip(rows, raw), start)
            if topics is None or self._keys[r.key][0] in topics
        ]

    @staticmethod
    def _count_totals(rows: Sequence[_Row], raw: Sequence[Raw], counted: Sequence[bool]) -> list[tuple[int, int, int]]:
        out: dict[int, list[int]] = {}
        for r, (status, _, _, wrote) in zip(rows, raw):
            if not (0 <= status < len(counted) and counted[status]):
                continue
            t = out.setdefault(r.key, [0, 0])
            t[0] += 1
            t[1] += wrote
        return [(key, n, size) for key, (n, size) in out.items()]


class SendAnswerSpec:
    """The broker's settings of a plain send's answer (see the Rust side): the answer code of each put status (< 0:
    the caller answers it), whether a status counts in the put stats, the region and trace extFields, the store host
    the msgId is made of."""

    def __init__(
        self, codes: Sequence[int], counted: Sequence[bool], region: str, trace_on: str, store_host: tuple[str, int]
    ) -> None:
        create_offset_msg_id(store_host, 0)  # a bad host is refused here, as the Rust side does
        self.codes = list(codes)
        self.counted = list(counted)
        self.region = region
        self.trace_on = trace_on
        self.store_host = store_host


class SendRequestParser:
    """How a plain send is recognised and answered; every name comes from the caller."""

    def __init__(
        self,
        codes: tuple[int, int],
        v1_names: Sequence[str],
        v2_names: Sequence[str],
        general: Sequence[str],
        wait: str,
        cluster: str,
        uniq_key: str,
        assign_uniq: bool,
        oneway_bit: int,
        answer_language: str,
        answer_flag: int,
        answer_keys: Sequence[str],
    ) -> None:
        if len(v1_names) != FIELDS or len(v2_names) != FIELDS:
            raise ValueError(f"a send header has {FIELDS} field names")
        if len(answer_keys) != 5:
            raise ValueError("an answer has 5 extFields names")
        self._codes = (codes[0], codes[1])
        self._names = (tuple(v1_names), tuple(v2_names))
        self._rules = PlainPropertyRules(tuple(general), wait, cluster, uniq_key)
        self._assign_uniq = assign_uniq
        self._oneway_bit = oneway_bit
        self._answer = (answer_language, answer_flag, tuple(answer_keys))

    def parse(self, requests: list[Any], cluster_name: str) -> SendRequestColumns:
        cols = SendRequestColumns(self._rules.uniq_key, *self._answer)
        index: dict[tuple[str, int, bool, str, int], int] = {}
        for req in requests:
            cols._rows.append(self._parse_one(req, cluster_name, cols, index))
        return cols

    def _parse_one(
        self,
        req: Any,
        cluster_name: str,
        cols: SendRequestColumns,
        index: dict[tuple[str, int, bool, str, int], int],
    ) -> _Row | None:
        code = _exact_int(req.code)
        if code is None or code not in self._codes:
            return None
        if _exact_int(req.serialize_type) != SERIALIZE_JSON:
            return None
        ext = req.ext_fields
        if type(ext) is not dict:
            return None
        f: list[str | None] = []
        for name in self._names[self._codes.index(code)]:
            v = ext.get(name)
            if v is not None and type(v) is not str:
                return None
            if v is not None:
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    return None
            f.append(v)
        if any(v is None for v in f[:REQUIRED]):
            return None
        topic, default_topic = f[1], f[2]
        assert topic is not None and default_topic is not None
        ints = [parse_decimal(f[i] or "", 64 if i == 6 else 32) for i in (3, 4, 5, 6, 7)]
        if any(v is None for v in ints):
            return None
        dtqn, queue_id, sys_flag, born_timestamp, flag = (int(v or 0) for v in ints)
        reconsume_times = 0 if f[9] is None else parse_decimal(f[9], 32)
        unit_mode = False if f[10] is None else parse_java_bool(f[10])
        if reconsume_times is None or unit_mode is None:
            return None
        if f[11] is not None and parse_decimal(f[11], 32) is None:
            return None
        if f[12] is not None and parse_java_bool(f[12]) is not False:
            return None
        if queue_id < 0:
            return None
        body = req.body
        if body is not None and type(body) is not bytes:
            return None
        opaque, version, cmd_flag = _exact_int(req.opaque), _exact_int(req.version), _exact_int(req.flag)
        if opaque is None or version is None or cmd_flag is None:
            return None
        rewritten = rewrite_plain_properties(f[8] or "", self._rules, cluster_name, self._assign_uniq)
        if rewritten is None:
            return None
        props, needs_uniq = rewritten
        key = (topic, queue_id, unit_mode, default_topic, dtqn)
        k = index.get(key)
        if k is None:
            k = index[key] = len(cols._keys)
            cols._keys.append(key)
        return _Row(
            k,
            body,
            flag,
            sys_flag,
            born_timestamp,
            reconsume_times,
            props,
            needs_uniq,
            opaque,
            version,
            bool(cmd_flag & self._oneway_bit),
        )
