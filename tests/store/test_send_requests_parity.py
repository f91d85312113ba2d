"""The store engine's plain-send columns (``SendRequestParser``, ``SendRequestColumns``, ``StoreEngine.
put_send_requests``): the Rust side and its pure-Python twin (``_reference/send_requests.py``) give the same keys,
runs, records, results, answer frames, arrivals and totals for the same chunk, and refuse the same misuse."""

from __future__ import annotations

import re

import pytest

from rmq_core import _backend
from rmq_core.message import UNIQ_KEY, decode_messages
from rmq_core.remoting.codes import RequestCode
from rmq_core.remoting.command import RPC_ONEWAY, RPC_TYPE_RESPONSE
from rmq_core.remoting.header import SendMessageRequestHeader, field_names
from rmq_core.remoting.transport import encode_frames, split_frames
from rmq_core.store import MessageStore, StoreConfig

from support.send_corpus import send_corpus

_ASSIGNED = re.compile(rb"UNIQ_KEY\x01[0-9A-F]{28}[0-9A-F]{4}\x02")
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
    return _ASSIGNED.sub(b"UNIQ_KEY\x01" + b"X" * 32 + b"\x02", raw)


def _run(tmp_path, backend: str, seed: int, assign_uniq: bool = True):
    impl = _backend.load(backend)
    sends = _parser(impl, assign_uniq).parse(_wire(seed), "Cluster-1")
    keys = sends.keys
    sys_flag_or = [4 * (i % 2) for i in range(len(keys))]
    segments = sends.segments([k[1] < 4 and not k[0].startswith("%") and " " not in k[0] for k in keys])
    out = {"key_of": sends.key_of, "keys": keys, "segments": segments, "runs": []}
    cfg = StoreConfig(mapped_file_size_commit_log=1 << 20, max_message_size=2048)
    with MessageStore(tmp_path / backend, cfg, clock=lambda: 1_700_000_000_999, backend=backend) as store:
        for start, end, plain in segments:
            if not plain:
                continue
            raw = store.put_send_requests(sends, start, end, sys_flag_or, ("10.0.0.7", 4242), wait_flush=False)
            out["runs"].append(
                (
                    raw,
                    sends.answers(start, end, raw, CODES, "R1", "false", ("127.0.0.1", 10911)),
                    [(*a[:4], _blank(a[4])) for a in sends.arrivals(start, end, raw)],
                    sends.totals(start, end, raw, [c >= 0 for c in CODES]),
                )
            )
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
