"""Parity of the remoting frame codec's fast path (``split_frames`` / ``encode_frames``, rust/rmq-py/src/remoting.rs)
with its Python twin (python/rmq_core/_reference/remoting_frames.py), which hands every frame to
``RemotingCommand.decode_frame`` / ``encode``: for any buffer both give the same commands (every field, the serialize
type too), the same bytes consumed and the same error text; for any commands, the same bytes. The corpus holds what
the Java client, rmq_core and the C++ client write, and the shapes the Rust side must hand back (floats, int
languages, lone surrogates, duplicate keys, nulls, bad UTF-8, ROCKETMQ headers, bad lengths), then random mutations.
"""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq_core import _backend
from rmq_core.remoting.command import (
    MAX_FRAME_LENGTH,
    SERIALIZE_ROCKETMQ,
    RemotingCommand,
    RemotingCommandError,
)

RUST, PY = _backend.load("rust"), _backend.load("python")
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


JAVA_SEND = (
    b'{"code":310,"extFields":{"a":"g","b":"T","c":"TBW102","d":"4","e":"1","f":"0","g":"1700000000000","h":"0",'
    b'"i":"TAGS\\u0001a\\u0002","j":"0","k":"false","m":"false"},"flag":0,"language":"JAVA","opaque":12,'
    b'"serializeTypeCurrentRPC":"JSON","version":409}'
)
HEADERS = [
    JAVA_SEND,
    b'{"code":0}',
    b' { "code" : -3 , "opaque" : 2147483647 , "flag" : 3 } ',
    b'{"code":1,"remark":"r\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00 \xc3\xa9","extFields":{}}',
    b'{"code":1,"remark":null,"extFields":null}',
    b'{"code":1,"extFields":{"k":"1","k":"2","j":"x","j":null,"n":5,"t":true,"f":false,"z":null}}',
    b'{"code":1,"code":2,"language":"CPP","language":"GO"}',
    b'{"co\\u0064e":7,"unknown":"x","other":12,"b":true,"n":null}',
    # the shapes the Rust side hands to decode_frame (which decodes or refuses them)
    b'{"code":1.5}',
    b'{"code":1,"version":"409","opaque":"7"}',
    b'{"code":1,"version":1.5}',
    b'{"code":1,"version":Infinity}',
    b'{"code":1,"opaque":NaN}',
    b'{"code":1,"language":3}',
    b'{"code":1,"language":true}',
    b'{"code":1,"language":null}',
    b'{"code":1,"remark":"\\ud800"}',
    b'{"code":1,"remark":"\\udc00x"}',
    b'{"code":1,"remark":5}',
    b'{"code":1,"extFields":{"k":1.5}}',
    b'{"code":1,"extFields":{"k":[1]}}',
    b'{"code":1,"extFields":{"k":{"x":"y"}}}',
    b'{"code":1,"extFields":"x"}',
    b'{"code":1,"extFields":0}',
    b'{"code":1,"extFields":[]}',
    b'{"code":1,"x":[1,{"y":2}]}',
    b'{"code":99999999999999999999}',
    b'{"code":1,"opaque":18446744073709551615}',
    b'{"code":true}',
    b'{"code":null}',
    b'{"code":"1"}',
    b'{"code":01}',
    b'{"code":-0,"extFields":{"z":-0}}',
    b'{"opaque":1}',
    b"{}",
    b"[]",
    b'"x"',
    b'{"code":1} x',
    b'{"code":1,}',
    b'{"code":1,"remark":"a\x01"}',
    b'{"code":1,"remark":"\xff"}',
    b'{"code":1,"remark":"\\x"}',
    b"",
    b"{",
    b'{"code":1,"extFields":{' + b",".join(b'"k%d":"v"' % i for i in range(80)) + b"}}",
]
BODIES = [b"", b"body", bytes(range(256))]


def rocketmq_frame() -> bytes:
    cmd = RemotingCommand(code=11, language="CPP", opaque=5, remark="r", ext_fields={"a": "b"}, body=b"xy")
    return cmd.encode(SERIALIZE_ROCKETMQ)


def split(impl, buf: bytes | bytearray):
    cmds, used, error = impl.split_frames(
        buf, RemotingCommand, RemotingCommand.decode_frame, RemotingCommandError, MAX_FRAME_LENGTH
    )
    return [(c, c.serialize_type, type(c)) for c in cmds], used, error


def assert_same_split(buf: bytes) -> None:
    expected = split(PY, buf)
    assert split(RUST, buf) == expected
    assert split(RUST, bytearray(buf)) == expected


@pytest.mark.parametrize("header", HEADERS)
@pytest.mark.parametrize("body", BODIES)
def test_each_header_decodes_alike(header: bytes, body: bytes) -> None:
    assert_same_split(frame(header, body))
    assert_same_split(frame(header, body) + frame(JAVA_SEND, b"next"))  # the frame after it too, or not at all


def test_what_the_rust_side_decodes_is_what_decode_frame_makes() -> None:
    cmds, used, error = split(RUST, frame(JAVA_SEND, b"x" * 1024))
    assert used == len(frame(JAVA_SEND, b"x" * 1024))
    ((cmd, serialize_type, kind),) = cmds
    assert error is None and serialize_type == 0 and kind is RemotingCommand
    assert cmd.code == 310 and cmd.opaque == 12 and cmd.ext_fields["i"] == "TAGS\x01a\x02" and cmd.body == b"x" * 1024


def test_lengths_partial_frames_and_other_serialize_types() -> None:
    good = frame(JAVA_SEND, b"b")
    for buf in [
        b"",
        good[:3],
        good[:-1],
        good + good[:10],
        good + rocketmq_frame() + good,
        struct.pack(">i", 3) + b"xxxx",
        good + struct.pack(">i", MAX_FRAME_LENGTH + 1),
        good + struct.pack(">i", -1),
        struct.pack(">ii", 8, (7 << 24) | 0) + b"abcd",  # unknown serialize type
        struct.pack(">ii", 8, 100) + b"abcd",  # header past the frame
        struct.pack(">ii", 4, 0),  # empty header
    ]:
        assert_same_split(buf)


@given(st.binary(max_size=300), st.integers(0, 400), st.binary(max_size=8))
@SETTINGS
def test_random_mutations_of_a_java_frame(junk: bytes, at: int, body: bytes) -> None:
    base = bytearray(JAVA_SEND)
    at %= len(base) + 1
    mutated = bytes(base[:at]) + junk[:4] + bytes(base[at + len(junk[:4]) :])
    assert_same_split(frame(mutated, body))
    assert_same_split(frame(JAVA_SEND) + junk)


json_scalars = st.one_of(
    st.text(max_size=6), st.integers(-(2**70), 2**70), st.booleans(), st.none(), st.floats(allow_nan=False)
)


@given(
    st.dictionaries(
        st.sampled_from(["code", "language", "version", "opaque", "flag", "remark", "x"]), json_scalars, max_size=7
    ),
    st.one_of(st.none(), st.dictionaries(st.text(max_size=4), json_scalars, max_size=5)),
)
@SETTINGS
def test_random_json_headers(doc: dict, ext: dict | None) -> None:
    if ext is not None or doc.get("code", 0) == 0:
        doc = {**doc, "extFields": ext}
    raw = json.dumps(doc, ensure_ascii=bool(len(doc) % 2)).encode("utf-8", "surrogatepass")
    assert_same_split(frame(raw, b"b"))


def response(**kw) -> RemotingCommand:
    fields = dict(code=0, language="JAVA", version=409, opaque=7, flag=1, ext_fields={"msgId": "AB", "queueId": "1"})
    fields.update(kw)
    return RemotingCommand(**fields)


COMMANDS = [
    response(),
    response(remark='r"\\/\b\f\n\r\t\x00\x1f\x7f é 😀'),
    response(body=b"body", ext_fields={}),
    response(code=True),
    response(opaque=2**64),
    response(language="日本"),
    response(ext_fields={"k": 5}),
    response(ext_fields={"k\ud800": "v"}),
    response(serialize_type=SERIALIZE_ROCKETMQ, remark="x"),
    RemotingCommand.request(10, {"a": 1, "b": None, "c": True}, body=b"x"),
]


def test_encode_frames_writes_the_bytes_of_encode() -> None:
    ok = [c for c in COMMANDS if "k\ud800" not in c.ext_fields]
    assert RUST.encode_frames(ok, RemotingCommand.encode, MAX_FRAME_LENGTH) == b"".join(c.encode() for c in ok)
    assert PY.encode_frames(ok, RemotingCommand.encode, MAX_FRAME_LENGTH) == b"".join(c.encode() for c in ok)
    assert RUST.encode_frames([], RemotingCommand.encode, MAX_FRAME_LENGTH) == b""


@pytest.mark.parametrize("impl", [RUST, PY], ids=["rust", "python"])
def test_encode_frames_raises_what_encode_raises(impl) -> None:
    with pytest.raises(RemotingCommandError, match="over the"):
        impl.encode_frames(
            [response(), response(body=b"x" * MAX_FRAME_LENGTH)], RemotingCommand.encode, MAX_FRAME_LENGTH
        )
    with pytest.raises(UnicodeEncodeError):
        impl.encode_frames([response(ext_fields={"k\ud800": "v"})], RemotingCommand.encode, MAX_FRAME_LENGTH)


@given(
    st.integers(-(2**31), 2**31),
    st.text(max_size=5),
    st.one_of(st.none(), st.text(max_size=8)),
    st.dictionaries(st.text(max_size=4), st.text(max_size=6), max_size=4),
    st.one_of(st.none(), st.binary(max_size=16)),
)
@SETTINGS
def test_random_commands_encode_alike(code: int, language: str, remark: str | None, ext: dict, body) -> None:
    cmd = response(code=code, language=language, remark=remark, ext_fields=ext, body=body)
    try:
        expected = cmd.encode()
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            RUST.encode_frames([cmd], RemotingCommand.encode, MAX_FRAME_LENGTH)
        return
    assert RUST.encode_frames([cmd, cmd], RemotingCommand.encode, MAX_FRAME_LENGTH) == expected * 2


def test_the_rust_side_decodes_java_and_rmq_core_frames_itself() -> None:
    """The fast path is taken (else the parity above would hold trivially): with a ``decode_frame`` that refuses
    everything, the JSON frames Java and rmq_core write still decode; a ROCKETMQ header is handed over and refused."""

    def refuse(raw: bytes | memoryview) -> RemotingCommand:
        raise RemotingCommandError("handed over")

    ours = RemotingCommand.request(310, {"a": "g", "b": "T"}, body=b"x").encode()
    answer = response(remark="r é").encode()
    cmds, used, error = RUST.split_frames(
        frame(JAVA_SEND) + ours + answer + rocketmq_frame(), RemotingCommand, refuse, RemotingCommandError, 1 << 24
    )
    assert [c.code for c in cmds] == [310, 310, 0] and error == "handed over"
    assert used == len(frame(JAVA_SEND) + ours + answer)
