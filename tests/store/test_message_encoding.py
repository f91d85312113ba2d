"""rmq_core.message_encoding: the property string as MessageDecoder writes and reads it, and the SEND_BATCH_MESSAGE
body (4.9 ``MessageDecoder``), including the malformed inputs a broker must refuse without storing anything."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmq_core.message import Message
from rmq_core.message_encoding import (
    BATCH_BLOCK_OVERHEAD,
    BatchDecodeError,
    append_properties,
    decode_batch,
    encode_batch,
    encode_message,
    java_hash_map_order,
    properties_to_string,
    string_to_properties,
)


# --- property string -----------------------------------------------------------------------------------------
def test_properties_to_string_layout_in_dict_order():
    s = properties_to_string({"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABC"})
    assert s == "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01ABC\x02"
    assert properties_to_string({"TAGS": "TagA", "KEYS": "k"}, trailing_separator=False) == "TAGS\x01TagA\x02KEYS\x01k"


def test_properties_to_string_skips_none_and_handles_empty():
    assert properties_to_string({"A": None, "B": "1"}) == "B\x011\x02"
    assert properties_to_string({}) == ""
    assert properties_to_string(None) == ""
    assert properties_to_string({"A": None}, trailing_separator=False) == ""


@pytest.mark.parametrize(
    "bad",
    [
        {"": "v"},
        {"a\x01b": "v"},
        {"a\x02b": "v"},
        {"k": ""},
        {"k": "x\x02y"},
        {"k": 5},
    ],
)
def test_properties_to_string_refuses_what_cannot_be_read_back(bad):
    with pytest.raises(ValueError):
        properties_to_string(bad)


def test_string_to_properties_reads_java_strings_with_and_without_trailing_separator():
    assert string_to_properties("TAGS\x01TagA\x02KEYS\x01k1 k2\x02") == {"TAGS": "TagA", "KEYS": "k1 k2"}
    assert string_to_properties("TAGS\x01TagA\x02KEYS\x01k1 k2") == {"TAGS": "TagA", "KEYS": "k1 k2"}
    assert string_to_properties("") == {} and string_to_properties(None) == {}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a\x01", {}),  # segment shorter than 3 chars
        ("ab\x01\x02c\x01d", {"c": "d"}),  # separator is the last char: dropped
        ("\x01ab\x02c\x01d", {"c": "d"}),  # separator first: dropped
        ("abc\x02c\x01d", {"c": "d"}),  # no separator at all
        ("k\x01v1\x02k\x01v2", {"k": "v2"}),  # later duplicate wins
        ("k\x01a\x01b", {"k": "a\x01b"}),  # split at the first \x01 only
        ("\x02\x02k\x01v\x02\x02", {"k": "v"}),
        ("k\x01v\x01", {"k": "v\x01"}),
        ("名字\x01值\x02", {"名字": "值"}),
    ],
)
def test_string_to_properties_edge_cases_as_java(text, expected):
    assert string_to_properties(text) == expected


_name = st.text(min_size=1, max_size=12).filter(lambda s: "\x01" not in s and "\x02" not in s)
_value = st.text(min_size=1, max_size=20).filter(lambda s: "\x02" not in s)


@given(st.dictionaries(_name, _value, max_size=8), st.booleans())
def test_property_string_round_trip(props, trailing):
    s = properties_to_string(props, trailing_separator=trailing)
    assert string_to_properties(s) == props
    assert list(string_to_properties(s)) == list(props)  # order kept too


@pytest.mark.parametrize(
    "names, java_order",
    [  # the orders java.util.HashMap (Java 17) iterates these names in, inserted in the order given
        ("WAIT,CLUSTER", "CLUSTER,WAIT"),
        ("CLUSTER,WAIT", "CLUSTER,WAIT"),
        ("TAGS,KEYS,UNIQ_KEY,WAIT,CLUSTER", "KEYS,UNIQ_KEY,CLUSTER,WAIT,TAGS"),
        (",".join([f"k{i}" for i in range(13)] + ["CLUSTER"]), "k0,k1,k2,k3,k4,k5,k11,k6,k10,k7,k8,k12,k9,CLUSTER"),
        ("日本,😀,a,CLUSTER", "a,😀,日本,CLUSTER"),
    ],
)
def test_java_hash_map_order(names, java_order):
    props = {name: f"v{i}" for i, name in enumerate(names.split(","))}
    ordered = java_hash_map_order(props)
    assert ",".join(ordered) == java_order and ordered == props


def test_append_properties_as_the_4_9_batch_encoder():
    assert append_properties("A\x011", "CLUSTER\x01c\x02") == "A\x011\x02CLUSTER\x01c\x02"
    assert append_properties("A\x011\x02", "CLUSTER\x01c") == "A\x011\x02CLUSTER\x01c"
    assert append_properties("", "CLUSTER\x01c") == "CLUSTER\x01c"
    assert append_properties("A\x011", "") == "A\x011"
    merged = string_to_properties(append_properties("A\x011\x02K\x01x", "K\x01y\x02C\x01z"))
    assert merged == {"A": "1", "K": "y", "C": "z"}


# --- batch body ----------------------------------------------------------------------------------------------
def _msgs():
    return [
        Message("T", b"hello", tags="TagA", keys=["k1", "k2"], flag=7),
        Message("T", b"", properties={"UNIQ_KEY": "0A0B"}),
        Message("T", bytes(range(256)) * 3, tags="TagB"),
    ]


def test_encode_message_layout():
    m = Message("T", b"abc", tags="X", flag=5)
    raw = encode_message(m)
    props = b"TAGS\x01X\x02"
    assert len(raw) == BATCH_BLOCK_OVERHEAD + 3 + len(props)
    assert struct.unpack_from(">iiiii", raw) == (len(raw), 0, 0, 5, 3)
    assert raw[20:23] == b"abc"
    assert struct.unpack_from(">h", raw, 23) == (len(props),)
    assert raw[25:] == props
    assert encode_message(m, trailing_separator=False)[25:] == b"TAGS\x01X"


def test_batch_round_trip():
    msgs = _msgs()
    body = encode_batch(msgs)
    out = decode_batch(body)
    assert [(b.flag, b.body, b.properties) for b in out] == [(m.flag, m.body, m.properties) for m in msgs]
    assert decode_batch(bytearray(body)) == out and decode_batch(memoryview(body)) == out
    assert decode_batch(b"") == []
    flag, body0, props = out[0]  # plain tuples
    assert (flag, body0, props["TAGS"]) == (7, b"hello", "TagA")


def test_batch_blocks_without_trailing_separator_decode_the_same():
    msgs = _msgs()
    assert decode_batch(encode_batch(msgs, trailing_separator=False)) == decode_batch(encode_batch(msgs))


def test_encode_refuses_oversized_properties():
    with pytest.raises(ValueError, match="32767"):
        encode_message(Message("T", b"x", properties={"big": "v" * 40000}))


@pytest.mark.parametrize("cut", [1, 10, 21, 30, -1])
def test_truncated_batch_is_refused(cut):
    body = encode_batch(_msgs())
    bad = body[:cut]
    with pytest.raises(BatchDecodeError, match=r"truncated|runs past|run past"):
        decode_batch(bad)


def test_truncated_second_block_names_it():
    one = encode_message(Message("T", b"abc"))
    with pytest.raises(BatchDecodeError, match=f"block 1 at byte {len(one)}"):
        decode_batch(one + one[:-2])


def test_garbled_total_size_is_refused():
    raw = bytearray(encode_message(Message("T", b"abc", tags="A")))
    struct.pack_into(">i", raw, 0, len(raw) + 4)
    with pytest.raises(BatchDecodeError, match="TOTALSIZE"):
        decode_batch(bytes(raw) + b"\0\0\0\0")


def test_negative_lengths_are_refused():
    raw = bytearray(encode_message(Message("T", b"abc")))
    struct.pack_into(">i", raw, 16, -3)
    with pytest.raises(BatchDecodeError, match="negative body length"):
        decode_batch(bytes(raw))
    raw = bytearray(encode_message(Message("T", b"abc", tags="A")))
    struct.pack_into(">h", raw, 23, -1)
    with pytest.raises(BatchDecodeError, match="negative properties length"):
        decode_batch(bytes(raw))


def test_body_length_past_the_end_is_refused():
    raw = bytearray(encode_message(Message("T", b"abc")))
    struct.pack_into(">i", raw, 16, 1000)
    with pytest.raises(BatchDecodeError, match="runs past"):
        decode_batch(bytes(raw))


def test_non_utf8_properties_are_refused():
    raw = bytearray(encode_message(Message("T", b"abc", tags="AB")))
    raw[-2] = 0xFF
    with pytest.raises(BatchDecodeError, match="UTF-8"):
        decode_batch(bytes(raw))


def test_garbage_is_refused():
    with pytest.raises(BatchDecodeError):
        decode_batch(b"not a batch body at all, just text")
