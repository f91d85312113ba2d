"""The store engine's plain-send columns (``SendRequestParser``, ``SendRequestColumns``, ``StoreEngine.
put_send_requests``): the Rust side and its pure-Python twin (``_reference/send_requests.py``) give the same keys,
runs, records, results, answer frames, arrivals and totals for the same chunk, and refuse the same misuse."""

from __future__ import annotations

import re

import pytest

from rmq_core import _backend
from rmq_core.message import UNIQ_KEY, decode_messages
from rmq_core.message_encoding import properties_to_string
from rmq_core.remoting.codes import RequestCode
from rmq_core.remoting.command import RPC_ONEWAY, RPC_TYPE_RESPONSE
from rmq_core.remoting.frame_codec import encode_frames, split_frames
from rmq_core.remoting.header import SendMessageRequestHeader, field_names
from rmq_core.store import MessageStore, StoreConfig

from support.send_corpus import send_corpus
from support.send_helpers import send_request

_ASSIGNED = re.compile(rb"UNIQ_KEY\x01[0-9A-F]{28}[0-9A-F]{4}")
CODES = [0, 10, 12, 11, -1, -1, -1, -1, -1, -1]


def _parser(impl, assign_uniq: bool = True):
    return impl.SendRequestParser(
        (int(RequestCode.SEND_MESSAGE), int(RequestCode.SEND_MESSAGE_V2)),
        field_names(SendMessageRequestHeader)[:13],
        field_names(SendMessageRequestHeader, short_names=True)[:13],
        ["DELAY", "TRAN_MSG", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "TIMER_DELIVER_MS"],
        "WAIT",
        "CLUSTER",
        UNIQ_KEY,
        assign_uniq,
        RPC_ONEWAY,
        "JAVA",
        RPC_TYPE_RESPONSE,
        ["MSG_REGION", "TRACE_ON", "msgId", "queueId", "queueOffset"],
    )


def _wire(seed: int):
    cmds, _, error = split_frames(bytearray(encode_frames(send_corpus(seed))))
    assert error is None
    return cmds


def _blank(raw: bytes) -> bytes:
    return _ASSIGNED.sub(b"UNIQ_KEY\x01" + b"X" * 32, raw)


def _run(tmp_path, backend: str, seed: int, assign_uniq: bool = True):
    impl = _backend.load(backend)
    sends = _parser(impl, assign_uniq).parse(_wire(seed), "Cluster-1")
    keys = sends.keys
    sys_flag_or = [4 * (i % 2) for i in range(len(keys))]
    segments = sends.segments([k[1] < 4 and not k[0].startswith("%") and " " not in k[0] for k in keys])
    out = {"key_of": sends.key_of, "keys": keys, "segments": segments, "runs": [], "all_plain": sends.all_plain}
    counted = [c >= 0 for c in CODES]
    spec = impl.SendAnswerSpec(CODES, counted, "R1", "false", ("127.0.0.1", 10911))
    listened = frozenset({keys[0][0], "no such topic"})
    cfg = StoreConfig(mapped_file_size_commit_log=1 << 20, max_message_size=2048)
    with MessageStore(tmp_path / backend, cfg, clock=lambda: 1_700_000_000_999, backend=backend) as store:
        for start, end, plain in segments:
            if not plain:
                continue
            raw = store.put_send_requests(sends, start, end, sys_flag_or, ("10.0.0.7", 4242), wait_flush=False)
            answers, totals = sends.answer(start, end, raw, spec)
            arrivals = [(*a[:4], _blank(a[4])) for a in sends.arrivals(start, end, raw)]
            # arrivals(topics=...) gives what the full list gives for those topics
            assert [(*a[:4], _blank(a[4])) for a in sends.arrivals(start, end, raw, listened)] == [
                a for a in arrivals if a[0] in listened
            ]
            assert sends.arrivals(start, end, raw, frozenset()) == []
            out["runs"].append((raw, answers, arrivals, totals))
        data = store.read_commit_log(0, store.max_physical_offset) or b""
        out["records"] = [
            (m.topic, m.queue_id, m.queue_offset, m.sys_flag) for m in decode_messages(data, decompress=False)
        ]
        out["commit_log"] = _blank(data)
    return out


@pytest.mark.parametrize("seed", [1, 4, 7])
def test_rust_and_twin_agree(tmp_path, seed):
    rust, python = _run(tmp_path / "a", "rust", seed), _run(tmp_path / "b", "python", seed)
    assert rust["key_of"] == python["key_of"] and rust["keys"] == python["keys"]
    assert sum(k >= 0 for k in rust["key_of"]) > 60
    assert rust["segments"] == python["segments"]
    assert rust["all_plain"] is python["all_plain"] is False  # the corpus mixes in general requests
    assert rust["runs"] == python["runs"]
    assert rust["records"] == python["records"] and len(rust["records"]) > 40
    assert rust["commit_log"] == python["commit_log"]


def test_without_an_id_generator_a_send_lacking_uniq_key_is_general(tmp_path):
    for backend in ("rust", "python"):
        impl = _backend.load(backend)
        with_ids = _parser(impl).parse(_wire(1), "c").key_of
        without = _parser(impl, assign_uniq=False).parse(_wire(1), "c").key_of
        assert sum(k >= 0 for k in without) < sum(k >= 0 for k in with_ids)


@pytest.mark.parametrize("backend", ["rust", "python"])
def test_misuse_is_refused(tmp_path, backend):
    impl = _backend.load(backend)
    requests = _wire(1)
    sends = _parser(impl).parse(requests, "c")
    general = sends.key_of.index(-1)
    with MessageStore(tmp_path / backend, StoreConfig(mapped_file_size_commit_log=1 << 20), backend=backend) as store:
        with pytest.raises(ValueError):
            store.put_send_requests(sends, general, general + 1, [0] * len(sends.keys), ("1.2.3.4", 1))
        with pytest.raises(ValueError):
            store.put_send_requests(sends, 0, len(requests) + 1, [0] * len(sends.keys), ("1.2.3.4", 1))
        with pytest.raises(ValueError):
            sends.segments([True])
        assert store.max_physical_offset == 0  # nothing appended
    with pytest.raises(ValueError):
        impl.SendRequestParser((10, 310), ["a"], ["a"], [], "W", "C", "U", True, 2, "JAVA", 1, ["a"] * 5)
    with pytest.raises(ValueError):
        impl.SendAnswerSpec([0], [True], "R", "false", ("not an ip", 1))


@pytest.mark.parametrize("backend", ["rust", "python"])
def test_all_plain_says_whether_a_chunk_has_general_requests(backend):
    impl = _backend.load(backend)
    requests = _wire(1)
    key_of = _parser(impl).parse(requests, "c").key_of
    plain = [r for r, k in zip(requests, key_of) if k >= 0]
    assert _parser(impl).parse(plain, "c").all_plain
    assert not _parser(impl).parse(plain + [requests[key_of.index(-1)]], "c").all_plain


@pytest.mark.parametrize("backend", ["rust", "python"])
def test_send_path_arrivals_reach_the_listeners_of_their_topics(tmp_path, backend):
    """``put_send_requests`` hands a topic-scoped listener its topic's sends only, a gated one every send while it is
    active, and skips the arrivals of a put no active listener takes."""
    props = properties_to_string({"TAGS": "TagA", "UNIQ_KEY": "0" * 32})
    cmds, _, error = split_frames(
        bytearray(encode_frames([send_request(t, b"x", queue_id=q, properties=props) for t, q in (("L", 0), ("S", 1))]))
    )
    assert error is None
    sends = _parser(_backend.load(backend)).parse(cmds, "c")
    assert sends.all_plain
    scoped, gated = [], []
    awake = [False]
    with MessageStore(tmp_path, StoreConfig(mapped_file_size_commit_log=1 << 20), backend=backend) as store:
        store.add_arrival_listener(lambda *a: scoped.append(a[:3]), topics=("S",))
        store.add_arrival_listener(lambda *a: gated.append(a[:3]), active=lambda: awake[0])
        store.put_send_requests(sends, 0, 2, [0, 0], ("1.2.3.4", 1))
        assert scoped == [("S", 1, 1)] and gated == []
        awake[0] = True
        store.put_send_requests(sends, 0, 2, [0, 0], ("1.2.3.4", 1))
        assert scoped == [("S", 1, 1), ("S", 1, 2)] and gated == [("L", 0, 2), ("S", 1, 2)]
        store.remove_arrival_listener(store._listeners[0])  # the scoped one: its topic is no longer listened to
        awake[0] = False
        store.put_send_requests(sends, 1, 2, [0, 0], ("1.2.3.4", 1))
        assert len(scoped) == 2 and len(gated) == 2
