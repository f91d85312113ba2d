"""A producer's batch body in one call (``encode_batch_messages``: rust/rmq-py/src/codec/batch.rs and its twin
python/rmq_core/format/batch.py): both engines write the body ``message_encoding.encode_batch`` writes
once each message has its UNIQ_KEY (ids as ``assign_uniq_keys`` gives them), decline (None) at the same message for
the same reason, and leave the same ids behind; ``Producer.batch`` gives the same batch whichever way it is built,
and every error of the general way (a bad body, illegal properties) still names the message.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq_core import _backend
from rmq_core.client import MQClientException, Producer
from rmq_core.message import UNIQ_KEY, Message
from rmq_core.message_encoding import encode_batch

RUST, PY = _backend.load("rust"), _backend.load("python")
PREFIX = "7F0000010001000000000000000A"  # 28 hex digits: what create_uniq_id.batch_prefix() gives
MAX_BODY = 64


class Plain:
    """Not a Message: any object with the three attributes (the encoder reads attributes)."""

    def __init__(self, body: Any, flag: Any, properties: Any) -> None:
        self.body, self.flag, self.properties = body, flag, properties


def _message(body: Any, flag: Any, props: Any) -> Any:
    if type(body) is bytes and body and type(props) is dict and type(flag) is int:
        m = Message("T", body, flag=flag)
        m.properties = props
        return m
    return Plain(body, flag, props)


def _run(engine: Any, specs: list[tuple[Any, Any, Any]]) -> tuple[bytes | None, list[Any]]:
    msgs = [_message(b, f, dict(p) if type(p) is dict else p) for b, f, p in specs]
    counter = engine.uniq_counter(0xFFF0)  # wraps past 0xFFFF within a batch
    body = engine.encode_batch_messages(msgs, UNIQ_KEY, PREFIX, counter, MAX_BODY)
    return body, [m.properties for m in msgs]


NAMES = st.sampled_from(["TAGS", "KEYS", "a", "b\x01", "", "é", UNIQ_KEY, "x\x02"])
VALUES = st.one_of(st.none(), st.sampled_from(["v", "", "w\x02", "x\x01y", "\ud800", "ü" * 3]), st.text(max_size=4))
PROPS = st.one_of(
    st.dictionaries(NAMES, VALUES, max_size=4),
    st.dictionaries(st.sampled_from(["TAGS", "KEYS"]), st.just("v" * 20000), max_size=2),  # over 32,767 bytes
    st.just({1: "v"}),
    st.just(None),
)
BODIES = st.one_of(st.binary(min_size=1, max_size=MAX_BODY), st.just(b""), st.just(b"z" * (MAX_BODY + 1)))
FLAGS = st.one_of(st.integers(-(2**31), 2**31 - 1), st.just(2**31), st.just(True))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(BODIES, FLAGS, PROPS), min_size=1, max_size=6))
def test_both_engines_write_decline_and_assign_the_same(specs: list[tuple[Any, Any, Any]]) -> None:
    rust_body, rust_props = _run(RUST, specs)
    py_body, py_props = _run(PY, specs)
    assert rust_body == py_body
    assert rust_props == py_props
    if rust_body is not None:  # the general way's encoder, given the same ids, writes the same body
        msgs = [_message(b, f, p) for (b, f, _), p in zip(specs, rust_props, strict=True)]
        assert rust_body == encode_batch(msgs)


def test_ids_are_set_only_where_missing_and_in_order() -> None:
    for engine in (RUST, PY):
        msgs = [Message("T", b"a"), Message("T", b"b", properties={UNIQ_KEY: "KEPT"}), Message("T", b"c")]
        msgs.append(Message("T", b"d"))
        msgs[3].properties[UNIQ_KEY] = None  # type: ignore[assignment]  # present: kept (and not written)
        body = engine.encode_batch_messages(msgs, UNIQ_KEY, PREFIX, engine.uniq_counter(0x1FFFF), MAX_BODY)
        assert body is not None
        assert [m.properties.get(UNIQ_KEY) for m in msgs] == [PREFIX + "FFFF", "KEPT", PREFIX + "0000", None]


def test_a_declined_message_keeps_the_ids_before_it_and_gets_none() -> None:
    for engine in (RUST, PY):
        msgs = [Message("T", b"a"), Message("T", b"b", properties={"K": "bad\x02"}), Message("T", b"c")]
        assert engine.encode_batch_messages(msgs, UNIQ_KEY, PREFIX, engine.uniq_counter(5), MAX_BODY) is None
        assert msgs[0].properties[UNIQ_KEY] == PREFIX + "0005"
        assert UNIQ_KEY not in msgs[1].properties and UNIQ_KEY not in msgs[2].properties


@pytest.fixture(params=["rust", "python"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``Producer.batch`` on either engine's encoder."""
    monkeypatch.setattr(_backend, "impl", _backend.load(request.param))
    return str(request.param)


def test_producer_batch_is_the_general_ways_batch(engine: str) -> None:
    """``Producer.batch`` through the one-call encoder gives the body the per-message way gives for the same ids."""
    p = Producer("BatchBodyProducer")
    msgs = [Message("BatchTopic", f"m{i}".encode() * (i + 1), tags="T", keys=f"k{i}", flag=i) for i in range(40)]
    msgs[7].properties[UNIQ_KEY] = "MINE"
    batch = p.batch(msgs)
    assert batch.messages == msgs and all(m.properties.get(UNIQ_KEY) for m in msgs)
    assert msgs[7].properties[UNIQ_KEY] == "MINE"
    assert len({m.properties[UNIQ_KEY] for m in msgs}) == 40
    assert batch.body == encode_batch(msgs)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (Message("BatchTopic", b"x" * 5000), "the message body size over max value"),
        (Message("BatchTopic", b"x", properties={"K": "v\x02"}), "the message properties are illegal"),
    ],
    ids=["oversized", "illegal-properties"],
)
def test_producer_batch_errors_name_the_message(engine: str, bad: Message, message: str) -> None:
    p = Producer("BatchBodyProducer", max_message_size=4096)
    msgs = [Message("BatchTopic", b"ok"), bad, Message("BatchTopic", b"ok2")]
    with pytest.raises(MQClientException, match=message):
        p.batch(msgs)
    assert UNIQ_KEY in msgs[0].properties and UNIQ_KEY not in msgs[2].properties


def test_producer_batch_checks_the_batchs_topic(engine: str) -> None:
    p = Producer("BatchBodyProducer")
    msgs = [Message("Bad Topic!", b"x"), Message("Bad Topic!", b"y")]
    with pytest.raises(MQClientException, match="Bad Topic!"):
        p.batch(msgs)
    assert not any(UNIQ_KEY in m.properties for m in msgs)


def test_the_properties_limit_counts_the_new_id() -> None:
    """32,767 bytes of properties with the id set here is a block; one byte more declines — after the id is set,
    as the general way sets it before its encoder finds the properties too long."""
    id_entry = len(f"{UNIQ_KEY}\x01{PREFIX}0000\x02")
    for engine in (RUST, PY):
        fits = Message("T", b"a", tags="v" * (32767 - id_entry - len("TAGS\x01\x02")))
        body = engine.encode_batch_messages([fits], UNIQ_KEY, PREFIX, engine.uniq_counter(0), MAX_BODY)
        assert body == encode_batch([fits])
        over = Message("T", b"a", tags="v" * (32768 - id_entry - len("TAGS\x01\x02")))
        assert engine.encode_batch_messages([over], UNIQ_KEY, PREFIX, engine.uniq_counter(0), MAX_BODY) is None
        assert over.properties[UNIQ_KEY] == PREFIX + "0000"
