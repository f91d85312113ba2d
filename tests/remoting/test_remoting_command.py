"""RemotingCommand frames against RocketMQ's frame layout (4.9 ``RemotingCommand.encode``), decoded by hand here, not by the codec."""

from __future__ import annotations

import json
import struct

import pytest

from rmq_core.remoting import MAX_FRAME_LENGTH, RemotingCommand, RemotingCommandError
from rmq_core.remoting.command import SERIALIZE_ROCKETMQ


def test_json_frame_layout():
    cmd = RemotingCommand.request(11, {"consumerGroup": "g", "queueId": 3, "queueOffset": 10, "flag": True}, b"BODY")
    frame = cmd.encode()
    length, mark = struct.unpack_from(">ii", frame)
    assert length == len(frame) - 4
    assert mark >> 24 == 0
    header_len = mark & 0xFFFFFF
    header = json.loads(frame[8 : 8 + header_len])
    assert header["code"] == 11 and header["opaque"] == cmd.opaque and header["flag"] == 0
    assert header["extFields"] == {"consumerGroup": "g", "queueId": "3", "queueOffset": "10", "flag": "true"}
    assert frame[8 + header_len :] == b"BODY"


def test_rocketmq_binary_header_round_trip_and_layout():
    cmd = RemotingCommand(
        code=310,
        language="JAVA",
        version=413,
        opaque=7,
        flag=0,
        remark="r",
        ext_fields={"a": "1", "b": "xyz"},
        body=b"\x00\x01",
    )
    frame = cmd.encode(SERIALIZE_ROCKETMQ)
    mark = struct.unpack_from(">i", frame, 4)[0]
    assert mark >> 24 == 1
    code, lang, version, opaque, flag, rlen = struct.unpack_from(">hBhiii", frame, 8)
    assert (code, lang, version, opaque, flag, rlen) == (310, 0, 413, 7, 0, 1)
    back = RemotingCommand.decode_frame(frame[4:])
    assert back == cmd


def test_response_flags_and_oneway():
    req = RemotingCommand.request(34).mark_oneway()
    assert req.is_oneway and not req.is_response
    resp = RemotingCommand.response_to(req, 0, remark="ok")
    assert resp.is_response and resp.opaque == req.opaque
    assert RemotingCommand.decode_frame(resp.encode()[4:]).remark == "ok"


def test_decodes_java_style_json_with_numbers_in_ext_fields():
    header = json.dumps(
        {
            "code": 0,
            "language": "JAVA",
            "version": 409,
            "opaque": 5,
            "flag": 1,
            "extFields": {"queueId": 2, "ok": True},
            "serializeTypeCurrentRPC": "JSON",
        }
    ).encode()
    frame = struct.pack(">i", len(header)) + header
    cmd = RemotingCommand.decode_frame(frame)
    assert cmd.ext_fields == {"queueId": "2", "ok": "true"} and cmd.body is None and cmd.is_response


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\x00\x00",
        struct.pack(">i", 100) + b"{}",  # header length past the frame
        struct.pack(">i", 5) + b"nope!",  # not JSON
        struct.pack(">i", 2) + b"[]",  # JSON but not an object
        struct.pack(">i", (1 << 24) | 3) + b"\x00\x01\x02",  # truncated binary header
        struct.pack(">i", (7 << 24) | 2) + b"{}",  # unknown serialize type
    ],
)
def test_garbled_frames_raise(frame):
    with pytest.raises(RemotingCommandError):
        RemotingCommand.decode_frame(frame)


def test_oversized_frame_refused():
    with pytest.raises(RemotingCommandError, match="limit"):
        RemotingCommand.request(10, body=b"x" * MAX_FRAME_LENGTH).encode()


def test_json_headers_orjson_refuses_still_decode_as_the_stdlib_does():
    """Headers are read with orjson; what it refuses and Java's fastjson writes or accepts (an integer over 64 bits,
    an escaped lone surrogate, NaN) falls back to the stdlib parser instead of closing the connection."""
    header = (
        b'{"code":0,"opaque":5,"flag":1,"remark":"\\ud800x","extFields":{"big":123456789012345678901234567890,'
        b'"nan":NaN,"s":"v\\u0001\xc3\xa9"}}'
    )
    cmd = RemotingCommand.decode_frame(struct.pack(">i", len(header)) + header)
    assert cmd.remark == "\ud800x"
    assert cmd.ext_fields == {"big": "123456789012345678901234567890", "nan": "nan", "s": "v\x01é"}


def test_json_header_bytes_are_the_stdlib_encoding():
    """orjson writes the frame header; its bytes must be what the stdlib's compact, non-ASCII-escaping dump writes
    (the frame-capture tests compare bytes), and what orjson refuses (a >64-bit opaque) still encodes."""
    cmd = RemotingCommand(
        code=10,
        language="JAVA",
        version=409,
        opaque=7,
        flag=0,
        remark='q"\\\n\x01é€😀',
        ext_fields={"k\x7f": "v\t", "é": "😀"},
    )
    doc = {
        "code": 10,
        "language": "JAVA",
        "version": 409,
        "opaque": 7,
        "flag": 0,
        "serializeTypeCurrentRPC": "JSON",
        "remark": cmd.remark,
        "extFields": cmd.ext_fields,
    }
    assert cmd.encode_header_json() == json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    cmd.opaque = 1 << 70
    assert json.loads(cmd.encode_header_json())["opaque"] == 1 << 70


def test_encode_header_writes_each_non_none_field_as_java_to_string():
    # the generated encoder against the rule it implements, for the send header (short names too) and a pull header
    import dataclasses

    from rmq_core.remoting.header import (
        PullMessageRequestHeader,
        SendMessageRequestHeader,
        encode_header,
    )

    class Name(str):
        pass

    send = SendMessageRequestHeader(
        producerGroup=Name("pg"),
        topic="T",
        defaultTopic="TBW102",
        defaultTopicQueueNums=4,
        queueId=-1,
        sysFlag=0,
        bornTimestamp=1700000000000,
        flag=0,
        properties="a\x01b\x02",
        reconsumeTimes=None,
        unitMode=False,
        batch=True,
    )
    pull = PullMessageRequestHeader(
        consumerGroup="g",
        topic="T",
        queueId=1,
        queueOffset=5,
        maxMsgNums=32,
        sysFlag=2,
        commitOffset=0,
        suspendTimeoutMillis=15000,
        subscription="*",
        subVersion=0,
    )
    for header, short in ((send, True), (send, False), (pull, False)):
        expected = {}
        for f in dataclasses.fields(header):
            v = getattr(header, f.name)
            if v is None:
                continue
            key = f.metadata.get("short") if short and f.metadata.get("short") else f.name
            expected[key] = ("true" if v else "false") if isinstance(v, bool) else str(v)
        got = encode_header(header, short_names=short)
        assert got == expected and list(got) == list(expected)
        assert all(type(v) is str for v in got.values())
    assert encode_header(send, short_names=True)["k"] == "false" and encode_header(send)["batch"] == "true"


def test_a_header_with_an_infinite_number_is_a_remoting_command_error():
    # the stdlib JSON reader (orjson's fallback) takes Infinity and NaN; int() of them must not escape as another error
    for raw in (b'{"code":1,"version":Infinity}', b'{"code":1,"opaque":-Infinity}', b'{"code":1,"flag":NaN}'):
        frame = struct.pack(">i", len(raw)) + raw
        with pytest.raises(RemotingCommandError, match="bad JSON header field"):
            RemotingCommand.decode_frame(frame)
