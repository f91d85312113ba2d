"""The ``Message`` object (python/rmq_core/message.py invariants 4 and 5): with the Rust engine a ``Message`` is not
tracked by the cyclic garbage collector (the class ``_core.message_class`` makes is not a GC type; the Python twin keeps
the class as written) and its ``__init__`` is native for the common call, and nothing a user relies on changes with it:
the same fields or errors as the ``__init__`` written in Python, properties readable and mutable, the tags/keys views,
equality, pickling, freeing when the last reference goes. Subclasses stay tracked; ``MessageExt`` objects the Rust
decoder builds are untracked (invariant 4), those the twin builds are tracked.
"""

from __future__ import annotations

import copy
import gc
import pickle

import pytest

from rmq_core import _backend, _core
from rmq_core.message import Message, MessageExt, decode_messages
from rmq_core.message import _python_init as python_init
from rmq_core.store import MessageStore

from support.helpers import UniqIds, small_config

#: the Rust engine's build has the CPython internals (rust/rmq-py/src/cpython/): native class, untracking
ENABLED = bool(_core.cpython_assumptions()["enabled"])
#: ... and the Rust engine is the one in use
NATIVE = ENABLED and _backend.backend() == "rust"


def test_message_is_untracked_with_the_rust_engine_only():
    m = Message("T", b"body", tags="TagA", keys=["k1", "k2"], properties={"a": "1"})
    assert gc.is_tracked(m) is not NATIVE
    assert gc.is_tracked(Message("T", b"")) is not NATIVE


@pytest.mark.parametrize("backend", ["rust", "python"])
def test_untrack_message_touches_exact_messages_only(backend):
    """The engine function itself, on both engines: a Message loses its tracking on Rust, a subclass instance, a
    MessageExt and any other object keep theirs; nothing is returned."""
    impl = _backend.load(backend)

    class Sub(Message):
        __slots__ = ()

    # tracked with the twin's class, as every new instance of a class written in Python; never with the Rust
    # engine's (not a GC type: message.py invariant 4)
    plain = Message.__new__(Message)
    python_class = not NATIVE
    sub, ext, other = Sub("T", b"x"), MessageExt.__new__(MessageExt), [1]
    assert gc.is_tracked(plain) is python_class and gc.is_tracked(sub) and gc.is_tracked(ext)
    for obj in (plain, sub, ext, other):
        assert impl.untrack_message(obj) is None
    assert gc.is_tracked(plain) is (python_class and not (backend == "rust" and ENABLED))
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
        # the Rust decoder's MessageExt objects are untracked (a consumer's cache costs the collector nothing)
        untracked = NATIVE
        assert all(type(m) is MessageExt and gc.is_tracked(m) is not untracked for m in got)


def test_decoded_message_ext_is_untracked_and_freed_with_its_last_reference(tmp_path):
    freed = []

    class Marker(str):
        def __del__(self) -> None:
            freed.append(True)

    with MessageStore(str(tmp_path), small_config(), backend="rust", uniq_id=UniqIds()) as s:
        assert s.put_messages([(Message("T", b"x", tags="A"), 0)]).all_ok
        [m] = _backend.load("rust").decode_messages(s.get_message("g", "T", 0, 0, 32).body)
    assert gc.is_tracked(m) is not ENABLED and m.body == b"x" and m.tags == "A"
    m.properties["marker"] = Marker("v")  # what it holds is freed with it, by reference counting
    m.body = b"changed"  # its slots stay writable
    del m
    assert freed == [True]


BODY = b"payload"
CALLS = [
    (("T", BODY), {}),
    (("T", BODY, "TagA"), {}),
    (("T", BODY), {"tags": "TagA"}),
    (("T", BODY), {"tags": "TagA", "flag": 7}),
    (("T", BODY, "TagA"), {"flag": -3}),
    (("T", BODY), {"flag": "not-an-int"}),  # stored as given, as the Python __init__ does
    (("T", BODY, ""), {}),
    (("T", BODY, None), {}),
    (("T", b""), {"tags": "日本"}),
    ((123, BODY), {}),  # any topic is stored as given; the store refuses it later
    (("T", bytearray(b"ba")), {"tags": "A"}),
    (("T", memoryview(b"mv")), {}),
    (("T", "a str body"), {}),
    (("T",), {}),
    ((), {"topic": "T", "body": BODY}),
    (("T", BODY, "A", "k1"), {}),
    (("T", BODY), {"keys": ["k1", "k2"], "tags": "A"}),
    (("T", BODY), {"properties": {"a": 1, "b": None, 3: "x"}}),
    (("T", BODY), {"delay_time_level": 3, "tags": "A"}),
    (("T", BODY), {"delay_time_level": -1}),
    (("T", BODY), {"deliver_time_ms": 5.5}),
    (("T", BODY), {"tags": 5}),
    (("T", BODY), {"tags": type("S", (str,), {})("sub")}),
    (("T", BODY, "A"), {"tags": "B"}),
    (("T", BODY), {"nope": 1}),
    (("T", BODY), {"tags": "A", "keys": None, "properties": None, "delay_time_level": 0, "deliver_time_ms": None}),
    (("T", BODY, "A", None, None, 9, 0, None), {}),
    (("T", BODY, "A", None, None), {"flag": 2, "delay_time_level": 0}),
    (("T", BODY), {"delay_time_level": False}),
    (("T", BODY), {"keys": ""}),
    (("T", BODY), {"properties": {}}),
    (("T", BODY, "A", None), {"keys": None}),
    (("T", BODY, "A", None, None, 1), {"flag": 1}),
    (("T", BODY, "A", None, None, 1, 2, None, "extra"), {}),
]


def _outcome(fn, args, kwargs):
    m = Message.__new__(Message)
    try:
        fn(m, *args, **kwargs)
    except Exception as e:  # the error is part of the result
        return ("error", type(e), str(e))
    return ("ok", m.topic, type(m.body), m.body, m.flag, list(m.properties.items()), gc.is_tracked(m))


@pytest.mark.parametrize("args, kwargs", CALLS)
def test_native_init_gives_what_the_python_init_gives(args, kwargs):
    """``Message.__init__`` (the Rust engine's native fast path, message.py invariant 5) and the ``__init__`` written
    in Python give the same message, or the same error, for common and uncommon calls (the fast path hands the
    uncommon ones to the Python one); both untrack (Rust) or neither (twin)."""
    want = _outcome(python_init, args, kwargs)
    assert _outcome(Message.__init__, args, kwargs) == want
    try:
        m = Message(*args, **kwargs)
    except Exception as e:
        assert want == ("error", type(e), str(e))
    else:
        assert want[0] == "ok"
        assert (m.topic, type(m.body), m.body, m.flag, list(m.properties.items()), gc.is_tracked(m)) == want[1:]


def test_init_is_native_with_the_rust_engine_only():
    native = NATIVE
    assert (Message.__init__ is python_init) is not native
    assert (type(Message).__name__, Message.__name__, Message.__module__) == ("type", "Message", "rmq_core.message")

    class Written:
        pass

    assert _backend.load("python").message_class(Written, python_init) is Written


def test_message_class_is_not_a_gc_type_with_the_rust_engine_only():
    """message.py invariant 4: the Rust engine's Message is not a GC type, so the tuples of a (message, queue id)
    batch are untracked by a collection, as tuples of atoms are; subclasses (MessageExt, a user's) are GC types."""
    native = NATIVE
    gc_flag = 1 << 14  # Py_TPFLAGS_HAVE_GC
    assert bool(Message.__flags__ & gc_flag) is not native
    assert MessageExt.__flags__ & gc_flag

    class Sub(Message):
        pass

    assert Sub.__flags__ & gc_flag and gc.is_tracked(Sub("T", b"x"))
    batch = [(Message("T", b"m%d" % i, tags="A"), i) for i in range(3)]
    gc.collect()
    assert [gc.is_tracked(pair) for pair in batch] == [not native] * 3
    assert Message.__slots__ == ("body", "flag", "properties", "topic")
    blank = Message.__new__(Message)
    with pytest.raises(AttributeError):
        blank.topic  # noqa: B018 - an unset field raises, as an unset slot does
    blank.topic = "T"
    del blank.topic
    assert not hasattr(blank, "topic")


def test_message_fields_are_freed_with_it_and_replaced_by_a_second_init():
    """The native class's fields hold references (dealloc and a second ``__init__`` drop them)."""
    import sys

    body, topic = b"body-%d" % 12345, "topic-%d" % 12345
    before = (sys.getrefcount(body), sys.getrefcount(topic))
    m = Message(topic, body, tags="A")
    assert (sys.getrefcount(body), sys.getrefcount(topic)) == (before[0] + 1, before[1] + 1)
    m.__init__("T", b"other")  # type: ignore[misc]
    assert (sys.getrefcount(body), sys.getrefcount(topic)) == before and m.body == b"other"
    m = Message(topic, body)
    ext = MessageExt.__new__(MessageExt)
    ext.body = body
    del m, ext
    assert (sys.getrefcount(body), sys.getrefcount(topic)) == before


def test_subclass_init_runs_the_python_init():
    """A subclass's instance never takes the fast path: its property setters run, and it stays tracked."""
    seen = []

    class Watched(Message):
        __slots__ = ()

        @property  # type: ignore[override]
        def topic(self) -> str:
            return "W"

        @topic.setter
        def topic(self, value: str) -> None:
            seen.append(value)

    w = Watched("T", BODY, tags="A")
    assert seen == ["T"] and w.topic == "W" and w.tags == "A" and gc.is_tracked(w)
