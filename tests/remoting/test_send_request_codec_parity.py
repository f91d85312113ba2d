"""Parity of a producer send's one-call encoder (``encode_send_request``, rust/rmq-py/src/remoting.rs) with its Python
twin (python/rmq_core/_reference/remoting_frames.py, which hands every request to the Python codec
``mq_client_api.encode_send_values``), and of both with the bytes the coroutine path writes
(``send_message_request(SendMessageRequestHeader(...), body).encode()``): the same frame for any header values and
properties, the same error (type and text) for what the Python codec refuses (a property ``properties_to_string``
refuses, a frame over the limit, a value of the wrong count), and the Python codec reached for every shape the Rust
side does not write itself (subclasses, big ints, lone surrogates).
"""

from __future__ import annotations

import enum
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq_core import _backend
from rmq_core.client.mq_client_api import SEND_HEADER_NAMES, encode_send_values, send_message_request
from rmq_core.message_encoding import properties_to_string
from rmq_core.remoting.codes import RequestCode
from rmq_core.remoting.command import DEFAULT_VERSION, MAX_FRAME_LENGTH, RemotingCommandError
from rmq_core.remoting.header import SendMessageRequestHeader

RUST, PY = _backend.load("rust"), _backend.load("python")
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CODE = RequestCode.SEND_MESSAGE_V2


def values(properties: Any = None, **over: Any) -> list[Any]:
    v: dict[str, Any] = dict(
        producerGroup="g",
        topic="T",
        defaultTopic="TBW102",
        defaultTopicQueueNums=4,
        queueId=3,
        sysFlag=0,
        bornTimestamp=1_700_000_000_123,
        flag=0,
        properties={"TAGS": "a", "UNIQ_KEY": "7F0000011F2A18B4AAC2"} if properties is None else properties,
        reconsumeTimes=0,
        unitMode=False,
        maxReconsumeTimes=None,
        batch=False,
        brokerName=None,
    )
    v.update(over)
    return list(v.values())


def both(
    vals: list[Any], body: bytes = b"body", *, code: int = CODE, language: str = "PYTHON", opaque: int = 7
) -> bytes:
    """The frame from each backend (their errors, when they raise, must match too)."""
    out = []
    for impl in (RUST, PY):
        try:
            out.append(
                impl.encode_send_request(
                    code,
                    language,
                    DEFAULT_VERSION,
                    opaque,
                    SEND_HEADER_NAMES,
                    vals,
                    body,
                    encode_send_values,
                    MAX_FRAME_LENGTH,
                )
            )
        except Exception as e:
            out.append(e)
    rust, py = out
    if isinstance(py, Exception):
        assert type(rust) is type(py) and str(rust) == str(py), (rust, py)
        raise py
    assert rust == py
    return rust


def coroutine_path(vals: list[Any], body: bytes, opaque: int, language: str = "PYTHON", batch: bool = False) -> bytes:
    """What the coroutine path writes for the same header (``_send_header`` + ``send_message_request``)."""
    fields = list(vals)
    if isinstance(fields[8], dict):
        fields[8] = properties_to_string(fields[8])
    request = send_message_request(SendMessageRequestHeader(*fields), body, batch)
    request.opaque, request.language = opaque, language
    return request.encode()


def test_names_are_the_send_headers_short_names_in_order() -> None:
    assert tuple("abcdefghijklmn") == SEND_HEADER_NAMES


def test_a_plain_send_is_the_coroutine_paths_frame() -> None:
    vals = values()
    frame = both(vals, b"x" * 1024, opaque=12345)
    assert frame == coroutine_path(vals, b"x" * 1024, 12345)
    assert b'"i":"TAGS\\u0001a\\u0002UNIQ_KEY\\u00017F0000011F2A18B4AAC2\\u0002"' in frame
    assert b'"k":"false","m":"false"}' in frame and b'"l"' not in frame and b'"n"' not in frame


def test_every_optional_field_a_batch_and_text_that_json_escapes() -> None:
    vals = values(
        {"KEYS": 'k "1" \\ \n\t\x7f é 😀', "TAGS": "x"},
        topic="%RETRY%grp",
        maxReconsumeTimes=16,
        reconsumeTimes=3,
        batch=True,
        unitMode=True,
        brokerName="broker-a",
        sysFlag=-(2**31),
        bornTimestamp=2**63 - 1,
    )
    frame = both(vals, b"", code=RequestCode.SEND_BATCH_MESSAGE, language="JAVA", opaque=2**31 - 1)
    assert frame == coroutine_path(vals, b"", 2**31 - 1, "JAVA", batch=True)


def test_properties_as_text_none_values_and_an_empty_dict() -> None:
    for props in ("TAGS\x01a\x02", "", {}, {"A": "1", "B": None, "C": "3"}):
        vals = values(props)
        assert both(vals) == coroutine_path(vals, b"body", 7)


@pytest.mark.parametrize(
    "props",
    [
        {"": "v"},
        {"A": ""},
        {"A\x01": "v"},
        {"A\x02": "v"},
        {"A": "v\x02"},
        {"A": 1},
        {1: "v"},
    ],
)
def test_properties_properties_to_string_refuses_raise_its_error(props: dict[Any, Any]) -> None:
    with pytest.raises(ValueError) as e:
        both(values(props))
    with pytest.raises(ValueError) as expected:
        properties_to_string(props)
    assert str(e.value) == str(expected.value)


def test_a_value_in_the_name_separator_is_kept() -> None:
    vals = values({"A": "v\x01w"})
    assert both(vals) == coroutine_path(vals, b"body", 7)


class _Code(enum.IntEnum):
    X = 5


class _Str(str):
    pass


@pytest.mark.parametrize(
    "over",
    [
        {"queueId": _Code.X},  # an int subclass: str(v)
        {"topic": _Str("T2")},
        {"bornTimestamp": 2**70},  # past i64
        {"flag": 1.5},
        {"topic": "bad \ud800 surrogate"},
    ],
)
def test_shapes_the_rust_side_hands_to_the_python_codec(over: dict[str, Any]) -> None:
    vals = values(**over)
    try:
        expected: bytes | Exception = coroutine_path(vals, b"body", 7)
    except Exception as e:
        expected = e
    if isinstance(expected, Exception):
        with pytest.raises(type(expected)):
            both(vals)
    else:
        assert both(vals) == expected


def test_a_frame_over_the_limit_and_a_wrong_count_raise_the_python_codecs_errors() -> None:
    with pytest.raises(RemotingCommandError, match="over the"):
        both(values(), b"x" * MAX_FRAME_LENGTH)
    with pytest.raises(ValueError):
        both(values()[:-1])
    # a body that is not bytes: the Python codec's answer (None is no body)
    assert both(values(), None) == coroutine_path(values(), b"", 7)  # type: ignore[arg-type]


TEXT = st.text(max_size=12)


@given(
    props=st.dictionaries(TEXT, st.one_of(st.none(), TEXT), max_size=6),
    group=TEXT,
    topic=TEXT,
    ints=st.lists(st.integers(-(2**63), 2**63 - 1), min_size=6, max_size=6),
    flags=st.lists(st.booleans(), min_size=2, max_size=2),
    body=st.binary(max_size=64),
    opaque=st.integers(0, 2**31 - 1),
)
@SETTINGS
def test_random_headers_and_properties(
    props: dict[str, str | None],
    group: str,
    topic: str,
    ints: list[int],
    flags: list[bool],
    body: bytes,
    opaque: int,
) -> None:
    vals = values(
        props,
        producerGroup=group,
        topic=topic,
        defaultTopicQueueNums=ints[0],
        queueId=ints[1],
        sysFlag=ints[2],
        bornTimestamp=ints[3],
        flag=ints[4],
        reconsumeTimes=ints[5],
        unitMode=flags[0],
        batch=flags[1],
    )
    try:
        expected: bytes | Exception = coroutine_path(vals, body, opaque)
    except Exception as e:
        expected = e
    if isinstance(expected, Exception):
        with pytest.raises(type(expected)):
            both(vals, body, opaque=opaque)
    else:
        assert both(vals, body, opaque=opaque) == expected


def test_the_rust_side_writes_the_common_shape_itself() -> None:
    """A plain send (str, bool and int values, a dict of properties, a bytes body; a list or a tuple) never reaches
    the Python codec on the Rust side; the twin always does."""
    calls: list[Any] = []

    def python_codec(*args: Any) -> bytes:
        calls.append(args)
        return encode_send_values(*args)

    for vals in (values(), tuple(values()), values("TAGS\x01a\x02")):
        frame = RUST.encode_send_request(
            CODE, "PYTHON", DEFAULT_VERSION, 9, SEND_HEADER_NAMES, vals, b"b", python_codec, MAX_FRAME_LENGTH
        )
        assert frame == coroutine_path(list(vals), b"b", 9)
    assert calls == []
    PY.encode_send_request(
        CODE, "PYTHON", DEFAULT_VERSION, 9, SEND_HEADER_NAMES, values(), b"b", python_codec, MAX_FRAME_LENGTH
    )
    assert len(calls) == 1
