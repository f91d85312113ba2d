"""``MessageStore.put_batch`` (SEND_BATCH_MESSAGE's put, the engine reading the batch body): the records are 4.9.7's
(each block's property string byte for byte, a ``\\x02`` if it lacks one, then the batch's property string: a name
in both stays twice), the answer's fields are those of the records, a malformed body stores nothing, and the Rust and
the Python engine answer and write the same (random batches, hypothesis).
"""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq_core import _backend
from rmq_core.message import Message, create_offset_msg_id, decode_messages, decode_offset_msg_id
from rmq_core.message_encoding import (
    append_properties,
    encode_batch,
    encode_message,
    properties_to_string,
    string_to_properties,
)
from rmq_core.store import MessageStore
from rmq_core.store_status import PutMessageStatus

from support.helpers import STORE_HOST, Clock, UniqIds, commit_log_bytes, small_config, stored_properties

pytestmark = pytest.mark.both_backends

BORN = ("10.0.0.7", 40404)
BATCH_PROPS = properties_to_string({"CLUSTER": "DefaultCluster", "WAIT": "true"})


def _records(store: MessageStore, msg_ids: str) -> list[bytes]:
    """The raw records the answer's msgIds name, as stored."""
    out = []
    for msg_id in msg_ids.split(","):
        offset = decode_offset_msg_id(msg_id)[1]
        head = store.read_commit_log(offset, 4)
        assert head is not None
        raw = store.read_commit_log(offset, int.from_bytes(head, "big"))
        assert raw is not None
        out.append(raw)
    return out


def test_records_keep_each_block_s_properties_then_the_batch_s(backend):
    """4.9.7's ``MessageExtBatchEncoder``: the block's bytes, a separator when missing, the batch's bytes; a name in
    both (WAIT) is there twice, as Apache stores it; the answer names the records."""
    msgs = [
        Message("TopicB", b"first", tags="T0", properties={"UNIQ_KEY": "U0", "WAIT": "true"}, flag=3),
        Message("TopicB", b"", properties={"UNIQ_KEY": "U1"}),
        Message("TopicB", b"x" * 300, keys=["k1", "k2"], properties={"UNIQ_KEY": "U2"}),
    ]
    blocks = [encode_message(msgs[0], trailing_separator=False), encode_message(msgs[1]), encode_message(msgs[2])]
    store = backend.open()
    r = store.put_batch("TopicB", 2, b"".join(blocks), BATCH_PROPS, BORN, born_timestamp=555, wait_flush=False)
    assert (r.status, r.stored, r.queue_offset, r.malformed) == (PutMessageStatus.PUT_OK, 3, 0, None)
    records = _records(store, r.msg_ids)
    for m, block, raw in zip(msgs, blocks, records):
        own = block[22 + len(m.body) :].decode()
        assert stored_properties(raw) == append_properties(own, BATCH_PROPS).encode()
        [ext] = decode_messages(raw)
        assert (ext.body, ext.flag, ext.born_timestamp, ext.born_host) == (m.body, m.flag, 555, BORN)
    assert stored_properties(records[0]).count(b"WAIT\x01true") == 2
    offsets = [decode_messages(raw)[0].commitlog_offset for raw in records]
    assert r.msg_ids == ",".join(create_offset_msg_id(STORE_HOST, o) for o in offsets)
    assert r.wrote_bytes == sum(len(raw) for raw in records)
    assert r.end_offset == offsets[-1] + len(records[-1])
    again = store.put_batch("TopicB", 2, blocks[1], "", BORN)
    assert (again.queue_offset, again.stored) == (3, 1)
    assert [stored_properties(raw) for raw in _records(store, again.msg_ids)] == [b"UNIQ_KEY\x01U1\x02"]


def test_a_block_without_uniq_key_gets_one(backend):
    store = backend.open(uniq_id=UniqIds(prefix=0x0A0B0C0D))
    body = encode_batch([Message("TopicU", b"a"), Message("TopicU", b"b", properties={"UNIQ_KEY": "MINE"})])
    # the batch-level string as the processor writes it (4.9.7's: no \x02 after its last entry)
    r = store.put_batch("TopicU", 0, body, "CLUSTER\x01c", BORN)
    assert r.status == PutMessageStatus.PUT_OK
    first, second = (stored_properties(raw) for raw in _records(store, r.msg_ids))
    assert first == b"CLUSTER\x01c\x02UNIQ_KEY\x010A0B0C0D" + b"%024X" % 1  # a \x02 before the id, none after
    assert second == b"UNIQ_KEY\x01MINE\x02CLUSTER\x01c"
    assert string_to_properties(first.decode())["CLUSTER"] == "c"


@pytest.mark.parametrize("mangle", ["truncated", "garbled", "empty", "bad_utf8"])
def test_a_malformed_body_stores_nothing(backend, mangle):
    good = encode_message(Message("TopicM", b"first", tags="A"))
    second = encode_message(Message("TopicM", b"second", tags="B"))
    body = {
        "truncated": good + second[:-3],
        "garbled": good + b"\0\0\0\x09garbage!!",
        "empty": b"",
        "bad_utf8": good + second[:-1] + b"\xff",
    }[mangle]
    store = backend.open()
    before = store.max_physical_offset
    r = store.put_batch("TopicM", 0, body, BATCH_PROPS, BORN)
    assert (r.status, r.stored, r.queue_offset, r.msg_ids, r.end_offset) == (
        PutMessageStatus.MESSAGE_ILLEGAL,
        0,
        -1,
        "",
        -1,
    )
    assert r.malformed
    if mangle != "empty":
        assert "block 1 at byte" in r.malformed
    assert store.max_physical_offset == before and store.get_max_offset_in_queue("TopicM", 0) == 0
    store.running_flags.get_and_make_disk_full()  # not writeable: a malformed body is still refused as such
    again = store.put_batch("TopicM", 0, body, BATCH_PROPS, BORN)
    assert (again.status, again.malformed) == (PutMessageStatus.MESSAGE_ILLEGAL, r.malformed)
    refused = store.put_batch("TopicM", 0, good, BATCH_PROPS, BORN)
    assert refused.status == PutMessageStatus.SERVICE_NOT_AVAILABLE and refused.malformed is None
    assert store.get_max_offset_in_queue("TopicM", 0) == 0


def test_an_oversized_block_stores_nothing(backend):
    store = backend.open(config=small_config(max_message_size=100))
    body = encode_batch([Message("TopicO", b"a"), Message("TopicO", b"z" * 101)])
    r = store.put_batch("TopicO", 0, body, BATCH_PROPS, BORN)
    assert (r.status, r.stored, r.malformed) == (PutMessageStatus.MESSAGE_ILLEGAL, 0, None)
    assert store.get_max_offset_in_queue("TopicO", 0) == 0


def test_arrival_listeners_hear_each_record(backend):
    store = backend.open()
    heard: list[tuple[str, int, int, int | None, dict[str, str] | None]] = []
    store.add_arrival_listener(lambda *a: heard.append(a), topics=["TopicL"])
    body = encode_batch([Message("TopicL", b"a", tags="TA"), Message("TopicL", b"b", properties={"UNIQ_KEY": "U"})])
    store.put_batch("TopicL", 1, body, BATCH_PROPS, BORN)
    store.put_batch("Other", 1, body, BATCH_PROPS, BORN)  # not a topic the listener takes
    assert [(t, q, max_offset) for t, q, max_offset, _, _ in heard] == [("TopicL", 1, 1), ("TopicL", 1, 2)]
    assert heard[0][4] is not None and heard[0][4]["TAGS"] == "TA" and heard[1][4]["UNIQ_KEY"] == "U"


# --- parity ----------------------------------------------------------------------------------------------------
_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x01\x02"), min_size=1, max_size=6
)
_PROPS = st.dictionaries(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "a", "日本"]) | _TEXT, _TEXT, max_size=4)
_BLOCK = st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=200), _PROPS, st.booleans())
_MANGLE = st.one_of(st.none(), st.tuples(st.integers(0, 400), st.binary(min_size=1, max_size=4)))


def _body(blocks, mangle) -> bytes:
    body = b"".join(
        encode_message(Message("P", b, flag=f, properties=p), trailing_separator=trailing)
        for f, b, p, trailing in blocks
    )
    if mangle is not None:
        at, junk = mangle
        at = min(at, len(body))
        body = body[:at] + junk + body[at + len(junk) :]
    return body


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.lists(_BLOCK, max_size=5), _MANGLE, _PROPS, st.integers(0, 2)), min_size=1, max_size=4))
def test_both_engines_answer_and_write_the_same(batches):
    """Random batches (any properties, duplicates across block and batch, with and without the trailing separator,
    some bodies mangled) through both engines with the same clock and ids: the same answers and the same files."""
    with tempfile.TemporaryDirectory() as tmp:
        images = []
        for name in ("rust", "python"):
            root = os.path.join(tmp, name)
            s = MessageStore(root, small_config(), backend=name, clock=Clock(), uniq_id=UniqIds())
            try:
                answers = [
                    tuple(s.put_batch("PB", q, _body(blocks, mangle), properties_to_string(props), BORN))
                    for blocks, mangle, props, q in batches
                ]
                s.flush()
                images.append((answers, commit_log_bytes(root)))
            finally:
                s.close()
        assert images[0] == images[1]


@given(st.lists(_BLOCK, max_size=4), _MANGLE)
@settings(max_examples=60, deadline=None)
def test_split_batch_parity(blocks, mangle):
    body = _body(blocks, mangle)
    answers = []
    for impl in (_backend.load("rust"), _backend.load("python")):
        try:
            answers.append(impl.split_batch(body))
        except ValueError as e:
            answers.append(str(e))
    assert answers[0] == answers[1]
