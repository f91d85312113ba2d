"""The ``Message`` object (python/rmq_core/message.py invariant 4): with the Rust engine a ``Message`` is not tracked by
the cyclic garbage collector (``_core.untrack_message``; the Python twin cannot untrack and does nothing), and nothing a
user relies on changes with it: properties readable and mutable, the tags/keys views, equality, pickling, freeing when
the last reference goes. Subclasses and decoded ``MessageExt`` objects stay tracked.
"""

from __future__ import annotations

import copy
import gc
import pickle

import pytest

from rmq_core import _backend
from rmq_core.message import Message, MessageExt, decode_messages
from rmq_core.store import MessageStore

from support.helpers import UniqIds, small_config


def test_message_is_untracked_with_the_rust_engine_only():
    m = Message("T", b"body", tags="TagA", keys=["k1", "k2"], properties={"a": "1"})
    assert gc.is_tracked(m) is (_backend.backend() == "python")
    assert gc.is_tracked(Message("T", b"")) is (_backend.backend() == "python")


@pytest.mark.parametrize("backend", ["rust", "python"])
def test_untrack_message_touches_exact_messages_only(backend):
    """The engine function itself, on both engines: a Message loses its tracking on Rust, a subclass instance, a
    MessageExt and any other object keep theirs; nothing is returned."""
    impl = _backend.load(backend)

    class Sub(Message):
        __slots__ = ()

    plain = Message.__new__(Message)  # tracked, as every new instance of a Python class
    sub, ext, other = Sub("T", b"x"), MessageExt.__new__(MessageExt), [1]
    assert gc.is_tracked(plain) and gc.is_tracked(sub) and gc.is_tracked(ext)
    for obj in (plain, sub, ext, other):
        assert impl.untrack_message(obj) is None
    assert gc.is_tracked(plain) is (backend == "python")
    assert gc.is_tracked(sub) and gc.is_tracked(ext) and gc.is_tracked(other)


def test_untracked_message_keeps_its_semantics():
    m = Message("T", b"body", tags="TagA", keys=["k1", "k2"], properties={"a": 1}, delay_time_level=3)
    assert m.properties == {"TAGS": "TagA", "KEYS": "k1 k2", "DELAY": "3", "a": "1"}
    m.properties["b"] = "2"
    m.tags = "TagB"
    m.keys = ["k3"]
    del m.properties["a"]
    assert (m.tags, m.keys, m.get_property("b"), m.delay_time_level) == ("TagB", "k3", "2", 3)
    same = Message("T", b"body", properties={"TAGS": "TagB", "KEYS": "k3", "DELAY": "3", "b": "2"})
    assert m == same and m != Message("T", b"other")
    back = pickle.loads(pickle.dumps(m))
    assert back == m and back.properties is not m.properties
    assert copy.deepcopy(m) == m


def test_untracked_message_is_freed_with_its_last_reference():
    freed = []

    class Marker(str):
        def __del__(self) -> None:
            freed.append(True)

    m = Message("T", b"x")
    m.properties["marker"] = Marker("v")  # a str subclass: what the message holds is freed with it
    del m
    assert freed == [True]


@pytest.mark.parametrize("backend", ["rust", "python"])
def test_batch_of_untracked_messages_is_stored_and_decoded(tmp_path, backend):
    with MessageStore(str(tmp_path), small_config(), backend=backend, uniq_id=UniqIds()) as s:
        batch = [(Message("T", b"m%d" % i, tags="TagA"), i % 2) for i in range(50)]
        gc.collect()
        assert s.put_messages(batch).all_ok
        got = decode_messages(s.get_message("g", "T", 1, 0, 32).body)
        assert [m.body for m in got] == [b"m%d" % i for i in range(1, 50, 2)]
        assert all(type(m) is MessageExt and gc.is_tracked(m) for m in got)
