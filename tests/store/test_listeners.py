"""Arrival listeners (store.py invariant 1): called after a message is appended and dispatched, once per stored
message, in order, with (topic, queue_id, max_offset, tags_code, properties); a failing listener never breaks a put.
"""

from __future__ import annotations

import logging

from rmq_core.message import Message
from rmq_core.store import GetMessageStatus, PutMessageStatus

from support import spec_parser as sp
from support.helpers import put_ok, small_config


def test_listener_called_after_dispatch(backend):
    store = backend.open()
    calls = []

    def listener(topic, queue_id, max_offset, tags_code, properties):
        # already dispatched: the queue's max offset and a pull see the message
        assert store.get_max_offset_in_queue(topic, queue_id) == max_offset
        g = store.get_message("g", topic, queue_id, max_offset - 1, 1)
        assert g.status == GetMessageStatus.FOUND
        calls.append((topic, queue_id, max_offset, tags_code, dict(properties), g.decode()[0].body))

    store.add_arrival_listener(listener)
    put_ok(store, Message("L", b"one", tags="TagA", keys="k"), 2)
    put_ok(store, Message("L", b"two"), 2)
    res = store.put_messages([(Message("L", b"three", tags="日本"), 0), (Message("M", b"four", tags="TagB"), 2)])
    assert res.all_ok
    assert [c[:4] for c in calls] == [
        ("L", 2, 1, 2598919),
        ("L", 2, 2, 0),
        ("L", 0, 1, sp.java_string_hash("日本")),
        ("M", 2, 1, 2598920),
    ]
    assert [c[5] for c in calls] == [b"one", b"two", b"three", b"four"]
    assert calls[0][4]["TAGS"] == "TagA" and calls[0][4]["KEYS"] == "k" and len(calls[0][4]["UNIQ_KEY"]) == 32
    store.remove_arrival_listener(listener)
    put_ok(store, Message("L", b"five"), 2)
    assert len(calls) == 4


def test_failing_listener_does_not_break_the_put(backend, caplog):
    store = backend.open()
    seen = []

    def bad(*args):
        raise RuntimeError("listener boom")

    store.add_arrival_listener(bad)
    store.add_arrival_listener(lambda *a: seen.append(a[:3]))
    with caplog.at_level(logging.ERROR, logger="rmq_core.store"):
        r = put_ok(store, Message("L", b"survives"), 0)
    assert r.queue_offset == 0
    assert seen == [("L", 0, 1)]  # later listeners still run
    assert "listener boom" in caplog.text or any(rec.exc_info for rec in caplog.records)
    assert store.look_message_by_offset(r.commitlog_offset).body == b"survives"
    assert store.get_max_offset_in_queue("L", 0) == 1


def test_listener_not_called_for_failed_puts(backend):
    store = backend.open(config=small_config(max_message_size=10))
    calls = []
    store.add_arrival_listener(lambda *a: calls.append(a))
    r = store.put_message(Message("L", b"x" * 11), 0)
    assert r.status == PutMessageStatus.MESSAGE_ILLEGAL
    res = store.put_messages([(Message("L", b"ok"), 0), (Message("L", b"x" * 11), 0)])
    assert not res.all_ok
    assert calls == []


def test_scoped_listeners_get_only_their_topics_and_nothing_while_inactive(backend):
    store = backend.open()
    everything, scoped, gated = [], [], []
    awake = [False]
    store.add_arrival_listener(lambda *a: everything.append(a[:3]))
    store.add_arrival_listener(lambda *a: scoped.append(a[:3]), topics=("S",))
    store.add_arrival_listener(lambda *a: gated.append(a[:4]), active=lambda: awake[0])
    batch = [(Message("L", b"1"), 0), (Message("S", b"2", tags="TagA"), 1), (Message("L", b"3"), 0)]
    assert store.put_messages(batch).all_ok
    assert everything == [("L", 0, 1), ("S", 1, 1), ("L", 0, 2)]
    assert scoped == [("S", 1, 1)]
    assert gated == []  # asked once for the put: inactive, so none of its messages
    awake[0] = True
    assert store.put_messages([(Message("S", b"4", tags="TagA"), 1)]).all_ok
    assert gated == [("S", 1, 2, 2598919)]
    assert scoped == [("S", 1, 1), ("S", 1, 2)]
