"""Parity (CORE_API: "both write the same bytes and give the same results"): random operation sequences applied to
the Rust and the Python engine in separate directories, with the same clock and UNIQ_KEYs, give identical return
values and identical CommitLog, ConsumeQueue, index and checkpoint bytes; a store written by one engine is opened and
served by the other. Module functions (tags_hash, properties codec, decode_messages) agree on random input.
"""

from __future__ import annotations

import os
import re
import struct
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq_core import _backend
from rmq_core.errors import StoreError
from rmq_core.message import Message, create_offset_msg_id
from rmq_core.store import MessageStore
from rmq_core.store_status import PutMessageStatus

from support import spec_parser as sp
from support.helpers import Clock, UniqIds, commit_log_bytes, small_config

pytestmark = pytest.mark.both_backends

SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)

TOPICS = ["PA", "PB", "%RETRY%grp", "Long_" + "x" * 120]
TAGS = [None, "TagA", "TagB", "日本", "😀", "polygenelubricants", "a b"]
FILTERS = [None, "*", "TagA", "TagA || 日本", "nope", "😀 || polygenelubricants || TagB"]
SAFE_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x01\x02 "), min_size=1, max_size=8
)

put_args = st.tuples(
    st.sampled_from(TOPICS),
    st.integers(0, 3),
    st.sampled_from(TAGS),
    st.one_of(st.none(), st.lists(SAFE_TEXT, min_size=1, max_size=3)),
    st.one_of(
        st.just(b""),
        st.binary(max_size=64),
        st.text(max_size=40).map(str.encode),
        st.binary(min_size=3000, max_size=9000),
    ),
    st.dictionaries(SAFE_TEXT.filter(lambda k: k not in ("TAGS", "KEYS", "UNIQ_KEY")), SAFE_TEXT, max_size=3),
    st.integers(-(2**31), 2**31 - 1),
)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("put"), put_args, st.sampled_from([0, 0x8])),
        st.tuples(st.just("batch"), st.lists(put_args, min_size=1, max_size=5)),
        st.tuples(
            st.just("get"),
            st.sampled_from(TOPICS + ["Absent"]),
            st.integers(0, 4),
            st.integers(0, 300),
            st.integers(1, 40),
            st.sampled_from(FILTERS),
        ),
        st.tuples(st.just("time"), st.sampled_from(TOPICS), st.integers(0, 3), st.integers(-5, 400)),
        st.tuples(st.just("look"), st.integers(0, 10_000)),
        st.tuples(st.just("reopen")),
        st.tuples(st.just("flush")),
    ),
    min_size=1,
    max_size=40,
)


def _msg(args) -> tuple[Message, int]:
    topic, qid, tags, keys, body, props, flag = args
    return Message(topic, body, tags=tags, keys=keys, properties=props, flag=flag), qid


class Twin:
    """One engine's store plus its deterministic clock and ids; reopen keeps the clock running."""

    def __init__(self, name: str, root: str) -> None:
        self.name, self.root = name, root
        self.clock, self.uniq = Clock(step=5), UniqIds()
        self.cfg = small_config()
        self.store = self._open()
        self.offsets: list[int] = []

    def _open(self) -> MessageStore:
        return MessageStore(self.root, self.cfg, backend=self.name, clock=self.clock, uniq_id=self.uniq)

    def apply(self, op):
        s = self.store
        kind = op[0]
        if kind == "put":
            m, q = _msg(op[1])
            r = s.put_message(m, q, born_timestamp=1_600_000_000_000, sys_flag=op[2])
            if r.ok:
                self.offsets.append(r.commitlog_offset)
            return ("put", r.status, r.commitlog_offset, r.queue_offset, r.wrote_bytes, r.msg_id)
        if kind == "batch":
            res = s.put_messages([_msg(a) for a in op[1]], born_host=("192.168.7.9", 4321))
            self.offsets.extend(r.commitlog_offset for r in res if r.ok)
            return ("batch", [(r.status, r.commitlog_offset, r.queue_offset, r.wrote_bytes) for r in res])
        if kind == "get":
            _, topic, qid, off, n, flt = op
            g = s.get_message("g", topic, qid, off, n, flt)
            return (
                "get",
                g.status,
                g.next_begin_offset,
                g.min_offset,
                g.max_offset,
                g.message_count,
                g.buffer_total_size,
                g.suggest_pulling_from_slave,
                g.body,
                g.max_phy_offset_pulling,
            )
        if kind == "time":
            _, topic, qid, delta = op
            return (
                "time",
                s.get_offset_in_queue_by_time(topic, qid, self.clock.now - 5 * delta),
                s.get_earliest_message_time(topic, qid),
                s.get_min_offset_in_queue(topic, qid),
                s.get_max_offset_in_queue(topic, qid),
            )
        if kind == "look":
            if not self.offsets:
                return ("look", None)
            m = s.look_message_by_offset(self.offsets[op[1] % len(self.offsets)])
            return ("look", m.to_dict())
        if kind == "reopen":
            s.close()
            self.store = self._open()
            rep = self.store.recovery_report
            return ("reopen", rep, self.store.max_physical_offset, self.store.min_physical_offset)
        if kind == "flush":
            return ("flush", s.flush())
        raise AssertionError(op)

    def close(self) -> None:
        self.store.close()


def files_of(root: str) -> dict[str, bytes]:
    out = {}
    for sub in ("commitlog", "consumequeue"):
        for dirpath, _, names in os.walk(os.path.join(root, sub)):
            for n in names:
                p = os.path.join(dirpath, n)
                with open(p, "rb") as f:
                    out[os.path.relpath(p, root)] = f.read()
    with open(os.path.join(root, "checkpoint"), "rb") as f:
        out["checkpoint"] = f.read()
    index = os.path.join(root, "index")
    # index files by position: their names are the local time of their creation
    for i, n in enumerate(sorted(os.listdir(index)) if os.path.isdir(index) else []):
        with open(os.path.join(index, n), "rb") as f:
            out[f"index#{i}"] = f.read()
    return out


def _run_twins(operations, tmp: str) -> None:
    rust = Twin("rust", os.path.join(tmp, "rust"))
    py = Twin("python", os.path.join(tmp, "python"))
    try:
        for i, op in enumerate(operations):
            a, b = rust.apply(op), py.apply(op)
            assert a == b, f"op {i} {op[0]}: rust {a!r} != python {b!r}"
    finally:
        rust.close()
        py.close()
    fa, fb = files_of(rust.root), files_of(py.root)
    assert sorted(fa) == sorted(fb)
    for name in fa:
        assert fa[name] == fb[name], f"{name} differs"


@SETTINGS
@given(operations=ops)
def test_random_operations_identical(operations):
    with tempfile.TemporaryDirectory() as tmp:
        _run_twins(operations, tmp)


def test_fixed_long_sequence_identical(tmp_path):
    """A deterministic sequence that rolls CommitLog and ConsumeQueue files and reopens."""
    operations = []
    for i in range(400):
        tags = TAGS[i % len(TAGS)]
        body = bytes([i % 256]) * (i * 37 % 5000)
        operations.append(("put", (TOPICS[i % 3], i % 2, tags, [f"k{i}"], body, {"i": str(i)}, i), 0))
        if i % 97 == 0:
            operations.append(("reopen",))
        if i % 13 == 0:
            operations.append(("get", TOPICS[i % 3], i % 2, i // 7, 1 + i % 40, FILTERS[i % len(FILTERS)]))
    for t in TOPICS[:3]:
        for q in (0, 1):
            for off in range(0, 140, 9):
                operations.append(("get", t, q, off, 32, None))
                operations.append(("get", t, q, off, 7, "TagA || 日本"))
    _run_twins(operations, str(tmp_path))


def _write(name: str, root: str, start: int, n: int, clock: Clock, uniq: UniqIds) -> None:
    s = MessageStore(root, small_config(), backend=name, clock=clock, uniq_id=uniq)
    try:
        for i in range(start, start + n):
            r = s.put_message(Message(TOPICS[i % 2], f"cross-{i}".encode() * (i % 200), tags=TAGS[i % 7]), i % 3)
            assert r.ok
    finally:
        s.close()


def _serve_all(name: str, root: str) -> list:
    s = MessageStore(root, small_config(), backend=name, clock=Clock(), uniq_id=UniqIds())
    try:
        out = [tuple(x) for x in s.topics()]
        for t, q in list(out):
            off = 0
            while True:
                g = s.get_message("g", t, q, off, 16, "TagA || TagB || *")
                out.append((t, q, off, g.status, g.next_begin_offset, g.message_count, g.body))
                if g.next_begin_offset == off or g.status != 0:
                    break
                off = g.next_begin_offset
            out.append(("time", s.get_offset_in_queue_by_time(t, q, 0), s.get_earliest_message_time(t, q)))
        out.append((s.max_physical_offset, s.min_physical_offset, s.recovery_report))
        return out
    finally:
        s.close()


@pytest.mark.parametrize("first, second", [("rust", "python"), ("python", "rust")])
def test_store_written_by_one_is_served_by_the_other(tmp_path, first, second):
    mixed, pure = str(tmp_path / "mixed"), str(tmp_path / "pure")
    c1, u1, c2, u2 = Clock(), UniqIds(), Clock(), UniqIds()
    _write(first, mixed, 0, 300, c1, u1)
    _write(first, pure, 0, 300, c2, u2)
    assert _serve_all(second, mixed) == _serve_all(first, pure)  # served identically by the other engine
    _write(second, mixed, 300, 200, c1, u1)  # the other engine appends to it
    _write(first, pure, 300, 200, c2, u2)
    assert files_of(mixed) == files_of(pure)
    assert _serve_all(first, mixed) == _serve_all(second, pure)


# --- module functions -------------------------------------------------------------------------------------------------
@SETTINGS
@given(st.text(max_size=50))
def test_tags_hash_parity(s):
    assert _backend.load("rust").tags_hash(s) == _backend.load("python").tags_hash(s) == sp.java_string_hash(s)


@SETTINGS
@given(
    st.binary(max_size=200)
    | st.lists(st.sampled_from([b"\x01", b"\x02", b"a", b"bc", b"\xff", "é".encode()])).map(b"".join)
)
def test_decode_properties_parity(raw):
    a = _backend.load("rust").decode_properties(raw)
    b = _backend.load("python").decode_properties(raw)
    assert a == b == sp.parse_properties(raw)


@SETTINGS
@given(st.dictionaries(st.text(max_size=10), st.one_of(st.none(), st.text(max_size=10)), max_size=5))
def test_encode_properties_parity(props):
    expected = sp.encode_properties({k: v for k, v in props.items() if v is not None})  # None values skipped
    assert _backend.load("rust").encode_properties(props) == expected
    assert _backend.load("python").encode_properties(props) == expected


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.text(alphabet="abcXYZ_%|-0", min_size=1, max_size=200),
            st.binary(max_size=100),
            st.dictionaries(SAFE_TEXT, SAFE_TEXT, max_size=3),
            st.sampled_from([("1.2.3.4", 5), ("::1", 9)]),
            st.sampled_from([("10.0.0.1", 10911), ("2001:db8::5", 10911)]),
            st.integers(0, 2**40),
        ),
        max_size=5,
    )
)
def test_decode_messages_parity(records):
    buf = b""
    for topic, body, props, born, store_host, phys in records:
        version = 2 if len(topic.encode()) > 127 else 1
        buf += sp.build_record(
            topic=topic,
            body=body,
            properties=props,
            born_host=born,
            store_host=store_host,
            physical_offset=phys,
            version=version,
            born_timestamp=phys,
            store_timestamp=phys + 1,
        )
    a = [m.to_dict() for m in _backend.load("rust").decode_messages(buf)]
    b = [m.to_dict() for m in _backend.load("python").decode_messages(buf)]
    assert a == b
    assert [(m["topic"], m["body"], m["properties"]) for m in a] == [(t, bd, p) for t, bd, p, *_ in records]


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.binary(max_size=60),
            st.sampled_from([("1.2.3.4", 5), ("::1", 9)]),
            st.integers(-(2**63), 2**63 - 1),
        ),
        max_size=4,
    ),
    st.integers(0, 200),
    st.binary(max_size=12),
)
def test_last_store_timestamp_parity(records, cut, tail):
    """A pull body's last whole record's STORETIMESTAMP, as both engines read it: whole bodies give the last record's,
    an empty one 0; a body cut short or with bytes after its records gives what the other engine gives."""
    built = [
        sp.build_record(topic="T", body=body, born_host=born, store_timestamp=ts, physical_offset=i)
        for i, (body, born, ts) in enumerate(records)
    ]
    buf = b"".join(built)
    rust, python = _backend.load("rust"), _backend.load("python")
    expected = records[-1][2] if records else 0
    assert rust.last_store_timestamp(buf) == python.last_store_timestamp(buf) == expected
    for odd in (buf[: max(0, len(buf) - cut)], buf + tail, buf[:cut] + tail):
        assert rust.last_store_timestamp(odd) == python.last_store_timestamp(odd)
    if len(built) >= 2:  # the last record cut: the one before it counts
        assert rust.last_store_timestamp(buf[:-1]) == records[-2][2]


def test_errors_are_the_same_classes(tmp_path):
    for name in ("rust", "python"):
        s = MessageStore(str(tmp_path / name), small_config(), backend=name, clock=Clock(), uniq_id=UniqIds())
        with pytest.raises(StoreError):
            MessageStore(str(tmp_path / name), small_config(), backend=name)
        s.close()


_RAW_TEXT = st.lists(st.sampled_from([b"\x01", b"\x02", b"a", b"bc", b"\xff", b"\xe6\x97", "é".encode()]), max_size=12)


@SETTINGS
@given(_RAW_TEXT.map(b"".join).filter(len), _RAW_TEXT.map(b"".join), st.binary(max_size=40))
def test_decode_messages_parity_raw_bytes(topic, props, body):
    """Records whose topic and properties are not valid UTF-8 (written by another client): both decoders give the same
    objects, with U+FFFD where the bytes do not decode, as ``bytes.decode("utf-8", "replace")`` does."""
    placeholder = "T" * len(topic)
    rec = sp.build_record(topic=placeholder, body=body, properties=props, physical_offset=77)
    rec = rec.replace(placeholder.encode() + struct.pack(">h", len(props)), topic + struct.pack(">h", len(props)), 1)
    a = _backend.load("rust").decode_messages(rec * 2)
    b = _backend.load("python").decode_messages(rec * 2)
    assert [m.to_dict() for m in a] == [m.to_dict() for m in b]
    assert a[0].topic == topic.decode("utf-8", "replace")
    assert a[1].properties == sp.parse_properties(props)


@SETTINGS
@given(
    st.lists(st.one_of(st.none(), st.text(alphabet="0123456789ABCDEF", min_size=1, max_size=32)), max_size=20),
    st.integers(0, 2**70),
    st.text(alphabet="0123456789ABCDEF", min_size=28, max_size=28),
)
def test_assign_uniq_keys_parity(existing, start, prefix):
    """Both backends give the messages without a UNIQ_KEY the same ids (prefix + counter & 0xFFFF as 4 hex digits),
    in order, leave the others alone, and draw exactly one counter value per id."""
    import itertools

    out = []
    for backend in ("rust", "python"):
        msgs = [Message("T", b"", tags="A", properties=None if u is None else {"UNIQ_KEY": u}) for u in existing]
        counter = itertools.count(start)
        n = _backend.load(backend).assign_uniq_keys(msgs, prefix, counter)
        out.append(([m.properties for m in msgs], n, next(counter)))
    assert out[0] == out[1]
    props, n, after = out[0]
    assert n == existing.count(None) and after == start + n
    ids = [p["UNIQ_KEY"] for p, u in zip(props, existing) if u is None]
    assert ids == [f"{prefix}{(start + i) & 0xFFFF:04X}" for i in range(n)]
    assert all(list(p) == ["TAGS", "UNIQ_KEY"] for p in props)  # appended after the existing entries


def test_assign_uniq_keys_errors_are_the_same():
    import itertools

    class NoProps:
        properties = None

    for bad, exc in (([NoProps()], TypeError), ([object()], AttributeError)):
        for backend in ("rust", "python"):
            with pytest.raises(exc):
                _backend.load(backend).assign_uniq_keys(bad, "0" * 28, itertools.count())


def test_put_reads_subclasses_and_unset_slots_like_getattr(tmp_path):
    """put_messages reads Message/MessageExt slots directly; a subclass that overrides an attribute is read through
    it, and a message whose slot was never set raises AttributeError, on both backends, storing nothing."""

    class Renamed(Message):
        __slots__ = ()

        @property  # type: ignore[override]
        def topic(self) -> str:
            return "Overridden"

        @topic.setter
        def topic(self, value: str) -> None:
            pass

    for backend in ("rust", "python"):
        with MessageStore(str(tmp_path / backend), small_config(), backend=backend, uniq_id=UniqIds()) as s:
            assert s.put_messages([(Renamed("Ignored", b"x"), 0), (Message("Plain", b"y"), 0)]).all_ok
            assert s.get_max_offset_in_queue("Overridden", 0) == 1 and s.get_max_offset_in_queue("Plain", 0) == 1
            blank = Message.__new__(Message)
            blank.properties = {"UNIQ_KEY": "X"}
            with pytest.raises(AttributeError):
                s.put_messages([(Message("Plain", b"z"), 0), (blank, 0)])
            assert s.get_max_offset_in_queue("Plain", 0) == 1


def test_own_fields_batch_writes_what_one_by_one_puts_write(tmp_path):
    """``put_messages(own_fields=...)`` (the broker's batch of separate sends) writes, in both engines, the bytes
    that one ``put_message`` per send with its own born timestamp, sys flag and reconsume times writes; a
    transaction PREPARED record in the middle gets no ConsumeQueue unit either way."""
    sends = [
        (Message("PA", b"body-%d" % i * (i + 1), tags=TAGS[i % len(TAGS)]), i % 3, 1_700_000_000_000 + i * 7, f, i % 5)
        for i, f in enumerate([0, 0, 2, 0, 0x4, 0, 3, 0, 0])  # 0x4: PREPARED
    ]
    images = []
    for name in ("rust", "python"):
        for mode in ("batch", "single"):
            root = str(tmp_path / f"{name}-{mode}")
            s = MessageStore(root, small_config(), backend=name, clock=Clock(step=0), uniq_id=UniqIds())
            try:
                if mode == "batch":
                    results = s.put_messages(
                        [
                            (Message(m.topic, m.body, flag=m.flag, properties=dict(m.properties)), q)
                            for m, q, *_ in sends
                        ],
                        ("10.0.0.1", 4321),
                        own_fields=[(born, flag, recon) for _, _, born, flag, recon in sends],
                    )
                    raw = [(r.status, r.commitlog_offset, r.queue_offset, r.wrote_bytes) for r in results]
                else:
                    raw = []
                    for m, q, born, flag, recon in sends:
                        r = s.put_message(
                            Message(m.topic, m.body, flag=m.flag, properties=dict(m.properties)),
                            q,
                            ("10.0.0.1", 4321),
                            born_timestamp=born,
                            sys_flag=flag,
                            reconsume_times=recon,
                        )
                        raw.append((r.status, r.commitlog_offset, r.queue_offset, r.wrote_bytes))
                s.flush()
                images.append((raw, [s.get_max_offset_in_queue("PA", q) for q in range(3)], commit_log_bytes(root)))
            finally:
                s.close()
    for img in images[1:]:
        assert img[0] == images[0][0]
        assert img[1] == images[0][1]
        assert img[2] == images[0][2]
    assert images[0][1] == [3, 2, 3]  # the PREPARED record (send 4, queue 1) is not in its queue


def test_own_fields_of_another_length_is_refused(tmp_path):
    for name in ("rust", "python"):
        s = MessageStore(str(tmp_path / name), small_config(), backend=name)
        try:
            with pytest.raises(ValueError):
                s.put_messages([(Message("PA", b"x"), 0)] * 2, own_fields=[(1, 0, 0)])
            assert s.get_max_offset_in_queue("PA", 0) == 0
        finally:
            s.close()


def test_batch_over_many_queues_writes_the_same_and_answers_the_same_columns(tmp_path):
    """One put over more (topic, queue) pairs than the Rust put keeps at hand (16), in an interleaved order that
    comes back to earlier queues, with PREPARED records among them: both engines return the same result columns
    (``put_messages``' raw answer, CORE_API §3) and write the same CommitLog, ConsumeQueue and index bytes; every
    queue's offsets count up from 0 in batch order."""
    order = [(TOPICS[(i * 7) % 3], (i * 5) % 12) for i in range(400)]  # 3 topics x 12 queues, interleaved
    answers = []
    for name in ("rust", "python"):
        root = str(tmp_path / name)
        s = MessageStore(root, small_config(), backend=name, clock=Clock(step=0), uniq_id=UniqIds())
        try:
            batch = [(Message(t, b"m%d" % i, tags=TAGS[i % len(TAGS)]), q) for i, (t, q) in enumerate(order)]
            columns = s._engine.put_messages(
                [m for m, _ in batch], [q for _, q in batch], 0, 1_700_000_000_000, ("10.0.0.2", 77), 0, 1, True
            )
            prepared = s._engine.put_messages([Message("PA", b"half")], [3], 0x4, 1, ("10.0.0.2", 77), 0, 2, True)
            answers.append((columns, prepared))
        finally:
            s.close()
        results = list(memoryview(columns[2]).cast("q"))
        expected, seen = [], {}
        for key in order:
            expected.append(seen.get(key, 0))
            seen[key] = expected[-1] + 1
        assert results == expected and len(results) == 400
        assert columns[0] == bytes(400)  # every status PUT_OK
    assert answers[0] == answers[1]
    assert files_of(str(tmp_path / "rust")) == files_of(str(tmp_path / "python"))


def test_put_results_columns_read_as_results(tmp_path):
    """``PutMessageResults`` over the engine's columns: indexing (negative too), slices, iteration, ``all_ok`` and
    ``statuses``, for a stored batch and for a refused one (every entry the first failing status, offsets -1), the
    same on both engines."""
    seen = []
    for name in ("rust", "python"):
        with MessageStore(str(tmp_path / name), small_config(), backend=name, clock=Clock(), uniq_id=UniqIds()) as s:
            ok = s.put_messages([(Message("PA", b"x" * i), i % 2) for i in range(5)])
            assert len(ok) == 5 and ok.all_ok and ok.statuses == [PutMessageStatus.PUT_OK] * 5
            rows = [(r.status, r.commitlog_offset, r.queue_offset, r.wrote_bytes) for r in ok]
            assert [r.queue_offset for r in ok] == [0, 0, 1, 1, 2]
            assert ok[-1] == ok[4] and ok[1:4] == [ok[1], ok[2], ok[3]] and ok[::-2] == [ok[4], ok[2], ok[0]]
            assert ok[0].msg_id == create_offset_msg_id(s.config.store_host, ok[0].commitlog_offset)
            with pytest.raises(IndexError):
                ok[5]
            big = Message("PA", b"x" * (s.config.max_message_size + 1))
            bad = s.put_messages([(Message("PA", b"y"), 0), (big, 0)])
            assert not bad.all_ok and bad.statuses == [PutMessageStatus.MESSAGE_ILLEGAL] * 2
            assert [(r.commitlog_offset, r.queue_offset, r.wrote_bytes, r.msg_id) for r in bad] == [
                (-1, -1, 0, None)
            ] * 2
            one = s.put_message(Message("PA", b"z"), 1)
            seen.append((rows, one.commitlog_offset, one.queue_offset, one.wrote_bytes))
    assert seen[0] == seen[1]


def test_engine_reads_pairs_and_assigns_uniq_keys_in_its_pass(tmp_path):
    """``StoreEngine.put_messages(pairs, None, ..., uniq_prefix, uniq_counter)`` (what ``MessageStore.put_messages``
    sends for a list batch with the default id generator): both engines store the same bytes, answer the same columns
    and leave the same properties (ids only where UNIQ_KEY was absent, in batch order, one counter value each) as
    ``assign_uniq_keys`` over the messages, then the put of the two split lists."""
    import itertools

    prefix = "0A0B0C0D0E0F0123456789ABCDEF"
    order = [(TOPICS[i % 3], (i * 5) % 7) for i in range(60)]
    images = []
    for name in ("rust", "python"):
        for mode in ("pairs", "split"):
            root = str(tmp_path / f"{name}-{mode}")
            s = MessageStore(root, small_config(), backend=name, clock=Clock(step=0), uniq_id=UniqIds())
            try:
                batch = [
                    (Message(t, b"m%d" % i, tags=TAGS[i % len(TAGS)], properties=_given_uniq(i)), q)
                    for i, (t, q) in enumerate(order)
                ]
                counter = itertools.count(65_530)  # wraps past 0xFFFF inside the batch
                args = (0, 1_700_000_000_000, ("10.0.0.2", 77), 0, 1, True, None, 0)
                if mode == "pairs":
                    columns = s._engine.put_messages(batch, None, *args, prefix, counter)
                else:
                    msgs = [m for m, _ in batch]
                    _backend.load(name).assign_uniq_keys(msgs, prefix, counter)
                    columns = s._engine.put_messages(msgs, [q for _, q in batch], *args)
                images.append((columns, [m.properties for m, _ in batch], next(counter)))
            finally:
                s.close()
    for img in images[1:]:
        assert img == images[0]
    for root in ("rust-split", "python-pairs", "python-split"):
        assert files_of(str(tmp_path / "rust-pairs")) == files_of(str(tmp_path / root))
    props = images[0][1]
    assert images[0][2] == 65_530 + 40  # 20 of the 60 had a UNIQ_KEY already
    assert props[1]["UNIQ_KEY"] == prefix + "FFFA" and props[10]["UNIQ_KEY"] == prefix + "0000"
    assert props[0]["UNIQ_KEY"] == "GIVEN0"


@pytest.mark.parametrize("start", [0, 1, 65_530, 2**63 - 3])
def test_uniq_counter_gives_the_values_of_itertools_count(tmp_path, start):
    """The default UNIQ_KEY generator's counter (``uniq_counter``: native with the Rust engine, ``itertools.count`` in
    the twin) gives ``start``, ``start + 1``, … through ``next()``, ``assign_uniq_keys`` and the engine's pass over
    the pairs alike, so the ids are the ones ``itertools.count`` gave before (wrapping past 0xFFFF)."""
    import itertools

    prefix = "0A0B0C0D0E0F0123456789ABCDEF"
    got = []
    for name in ("rust", "python"):
        impl = _backend.load(name)
        counter = impl.uniq_counter(start)
        assert iter(counter) is counter
        firsts = [next(counter) for _ in range(3)]
        msgs = [Message("T", b"m%d" % i, properties=_given_uniq(i)) for i in range(9)]
        impl.assign_uniq_keys(msgs, prefix, counter)
        s = MessageStore(str(tmp_path / name), small_config(), backend=name, clock=Clock(step=0), uniq_id=UniqIds())
        try:
            batch = [
                (Message("T", b"p%d" % i, properties=_given_uniq(i)), i % 2) for i in range(70_000 if start == 1 else 9)
            ]
            s._engine.put_messages(
                batch, None, 0, 1_700_000_000_000, ("10.0.0.2", 77), 0, 1, True, None, 0, prefix, counter
            )
        finally:
            s.close()
        ids = [m.properties["UNIQ_KEY"] for m in msgs] + [m.properties["UNIQ_KEY"] for m, _ in batch]
        got.append((firsts, ids, next(counter)))
    assert got[0] == got[1]
    ref = itertools.count(start)
    firsts, ids, after = got[0]
    assert firsts == [next(ref) for _ in range(3)]
    assert [u for u in ids if not u.startswith("GIVEN")] == [
        f"{prefix}{next(ref) & 0xFFFF:04X}" for u in ids if not u.startswith("GIVEN")
    ]
    assert after == next(ref)


def _given_uniq(i: int) -> dict[str, str] | None:
    return {"UNIQ_KEY": f"GIVEN{i}"} if i % 3 == 0 else None


def test_engine_pairs_errors_are_the_same(tmp_path):
    """A batch the engine cannot read: items that are not pairs raise Python's unpacking errors before anything is
    assigned; a message with a bad body (a str) raises TypeError after every message of the batch
    got its UNIQ_KEY (as ``assign_uniq_keys`` first, then the put); nothing is stored; on both engines. A list of
    lists is read as pairs."""
    import itertools

    prefix = "0" * 28
    for name in ("rust", "python"):
        s = MessageStore(str(tmp_path / name), small_config(), backend=name, clock=Clock(step=0))
        try:
            args = (0, 1, ("10.0.0.2", 77), 0, 1, True, None, 0, prefix)
            good = Message("PA", b"x")
            for bad, exc, text in (
                ([(good, 0), 5], TypeError, "cannot unpack non-iterable int object"),
                ([(good, 0), (good,)], ValueError, "not enough values to unpack (expected 2, got 1)"),
                ([(good, 0), (good, 0, 1)], ValueError, "too many values to unpack (expected 2)"),
            ):
                counter = itertools.count()
                with pytest.raises(exc, match=re.escape(text)):
                    s._engine.put_messages(bad, None, *args, counter)
                assert next(counter) == 0 and "UNIQ_KEY" not in good.properties
            for bad_at in (0, 1):
                msgs = [Message("PA", b"a"), Message("PA", b"b"), Message("PA", b"c")]
                msgs[bad_at].body = "text"  # type: ignore[assignment]
                counter = itertools.count()
                with pytest.raises(TypeError):
                    s._engine.put_messages([(m, 0) for m in msgs], None, *args, counter)
                assert [m.properties["UNIQ_KEY"] for m in msgs] == [prefix + "0000", prefix + "0001", prefix + "0002"]
            assert s.get_max_offset_in_queue("PA", 0) == 0
            assert s.put_messages([[Message("PA", b"l"), 1]]).all_ok  # a list of lists: read as pairs
            assert s.get_max_offset_in_queue("PA", 1) == 1
        finally:
            s.close()
