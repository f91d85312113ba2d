"""Every CPython assumption of ``rmq_core._core`` (the table A1-A10 in ``rust/rmq-py/src/cpython/mod.rs``), checked in
the running interpreter against what the build compiled in (``_core.cpython_assumptions()``). With the plain-PyO3
build (``enabled`` false) the layout checks are skipped and the fallback's own promise is checked instead: the class
written in message.py, nothing untracked. Runs under pytest, or as a script without pytest:
``python tests/store/test_cpython_layout.py`` (compat/wheel/check_wheel.sh runs it so under 3.11, 3.12 and 3.13).
"""

from __future__ import annotations

import ctypes
import gc
import sys
import tempfile

from rmq_core import _backend, _core
from rmq_core.message import Message, MessageExt
from rmq_core.message import _python_init as python_init
from rmq_core.store import MessageStore, StoreConfig

ASSUMED = _core.cpython_assumptions()
ENABLED = bool(ASSUMED["enabled"])
#: the native class is in use: the feature built in and the Rust engine chosen
NATIVE = ENABLED and _backend.backend() == "rust"
HAVE_GC, BASETYPE, HEAPTYPE = 1 << 14, 1 << 10, 1 << 9  # CPython's Include/object.h, 3.11-3.13
FIELDS = ("body", "flag", "properties", "topic")


class Skip(Exception):
    """A check that does not apply to this build or backend (pytest: skipped)."""


def _skip(reason: str) -> None:
    """Skips the check: pytest's skip under pytest, ``Skip`` when run as a script."""
    if "pytest" in sys.modules:
        import pytest

        pytest.skip(reason)
    raise Skip(reason)


def _needs_native() -> None:
    if not NATIVE:
        _skip("the native Message class is not in use (fallback build or the Python engine)")


def _pull_body(n: int = 3) -> bytes:
    """The records of ``n`` messages put on queue 0 of a small store, as a pull returns them."""
    config = StoreConfig(mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=20 * 64)
    with tempfile.TemporaryDirectory() as d, MessageStore(d, config, backend="rust") as s:
        batch = [(Message("T", b"m%d" % i, tags="A", keys=["k%d" % i]), 0) for i in range(n)]
        assert s.put_messages(batch).all_ok
        return s.get_message("g", "T", 0, 0, 32).body


def test_header_and_pointer_sizes_are_the_interpreters():
    """A1: an object header of 16 bytes on a 64-bit GIL build (3.12's refcount union kept the size)."""
    _needs_native()
    assert ASSUMED["object_header_size"] == object.__basicsize__ == sys.getsizeof(object())
    assert ASSUMED["pointer_size"] == ctypes.sizeof(ctypes.c_void_p)


def test_message_layout_is_the_slots_layout_cpython_makes():
    """A1: the native Message is a header then four object pointers, at the offsets CPython gives a ``__slots__``
    class of the same names; read back through ctypes from each instance."""
    _needs_native()

    class Slotted:
        __slots__ = ("topic", "body", "flag", "properties")  # noqa: RUF023 - unsorted: CPython sorts them itself

    header, ptr = ASSUMED["object_header_size"], ASSUMED["pointer_size"]
    assert Message.__basicsize__ == ASSUMED["message_basicsize"] == Slotted.__basicsize__ == header + 4 * ptr
    assert [name for name, _ in ASSUMED["message_offsets"]] == list(FIELDS)
    native, written = Message("T", b"body", tags="A"), Slotted()
    for obj in (written, native):
        for name in FIELDS:
            setattr(obj, name, getattr(native, name))
        for name, offset in ASSUMED["message_offsets"]:
            assert ctypes.c_void_p.from_address(id(obj) + offset).value == id(getattr(obj, name)), (obj, name)


def test_unset_fields_read_as_unset_slots():
    """A2: Py_T_OBJECT_EX members: NULL reads as AttributeError; set and delete go through the descriptor."""
    _needs_native()
    blank = Message.__new__(Message)
    for name in FIELDS:
        assert not hasattr(blank, name)
        setattr(blank, name, "v")
        assert getattr(blank, name) == "v"
        delattr(blank, name)
        assert not hasattr(blank, name)


def test_dealloc_drops_the_type_and_the_fields():
    """A3: each instance holds its heap type; tp_dealloc drops it and the fields, for a GC subclass too."""
    _needs_native()

    class Sub(Message):
        pass

    body, topic = b"body-%d" % 99, "topic-%d" % 99
    warm = [Message(topic, body), Sub(topic, body)]  # caches filled once (method cache, specialised calls)
    del warm
    gc.collect()  # classes other tests made (each holds Message) are freed now, not during the count
    gc.disable()
    try:
        before = (sys.getrefcount(Message), sys.getrefcount(Sub), sys.getrefcount(body), sys.getrefcount(topic))
        many = [Message(topic, body) for _ in range(1000)] + [Sub(topic, body) for _ in range(1000)]
        assert sys.getrefcount(body) == before[2] + 2000 and sys.getrefcount(Sub) == before[1] + 1000
        del many
        after = (sys.getrefcount(Message), sys.getrefcount(Sub), sys.getrefcount(body), sys.getrefcount(topic))
    finally:
        gc.enable()
    assert after == before


def test_type_flags_are_the_interpreters():
    """A4: the flag bits the build uses are the interpreter's; Message has no HAVE_GC, a Python subclass has it."""
    _needs_native()
    assert (ASSUMED["tpflags_have_gc"], ASSUMED["tpflags_basetype"], ASSUMED["tpflags_heaptype"]) == (
        HAVE_GC,
        BASETYPE,
        HEAPTYPE,
    )

    class Plain:
        pass

    class Sub(Message):
        pass

    assert Plain.__flags__ & (HAVE_GC | BASETYPE | HEAPTYPE) == HAVE_GC | BASETYPE | HEAPTYPE
    assert not int.__flags__ & HEAPTYPE and not type(None).__flags__ & HAVE_GC
    assert Message.__flags__ & ASSUMED["message_flags"] == ASSUMED["message_flags"]
    assert Message.__flags__ & HEAPTYPE and not Message.__flags__ & HAVE_GC
    assert Sub.__flags__ & HAVE_GC and gc.is_tracked(Sub("T", b"x")) and not gc.is_tracked(Message("T", b"x"))


def test_the_class_namespace_is_copied():
    """A5: the heap type took the written class's methods, properties and ``__slots__``."""
    _needs_native()
    assert Message.__slots__ == FIELDS and Message.__hash__ is None
    assert isinstance(Message.__dict__["tags"], property) and Message.__eq__.__qualname__ == "Message.__eq__"
    assert Message.__init__ is not python_init and MessageExt.__init__ is not python_init


def test_every_slot_descriptor_is_a_member_descriptor():
    """A6 (and A9's descriptor type): Message's fields and every MessageExt slot share one descriptor type."""
    _needs_native()
    member_descriptor = type(Message.body)
    assert member_descriptor.__name__ == "member_descriptor"
    for cls in type.mro(MessageExt):
        for name in cls.__dict__.get("__slots__", ()):
            assert type(getattr(MessageExt, name)) is member_descriptor, name


def test_a_keyword_that_is_not_interned_gives_the_same_message():
    """A7: the native ``__init__`` matches keyword names by identity; another str object of the name still works
    (the Python ``__init__`` answers)."""
    name = "".join(["to", "pic"])
    m = Message(**{name: "T", "body": b"x", "tags": "A"})
    assert (m.topic, m.body, m.properties, m.flag) == ("T", b"x", {"TAGS": "A"}, 0)


def test_decoded_objects_are_untracked_and_freed_by_reference_counting():
    """A8: a decoded MessageExt is untracked; what it holds is freed with it."""
    _needs_native()
    freed = []

    class Marker(str):
        def __del__(self) -> None:
            freed.append(True)

    [m, *_] = _core.decode_messages(_pull_body())
    assert type(m) is MessageExt and not gc.is_tracked(m)
    m.properties["marker"] = Marker("v")
    del m, _
    assert freed == [True]


def test_decoded_slots_are_the_twins_and_unset_ones_raise():
    """A9, A10: tp_alloc gives a zeroed MessageExt whose 18 slots the C setters fill: the twin's values."""
    _needs_native()
    body = _pull_body()
    mine, twins = _core.decode_messages(body), _backend.load("python").decode_messages(body)
    names = [n for cls in type.mro(MessageExt) for n in cls.__dict__.get("__slots__", ())]
    assert len(names) == 18
    assert [[getattr(m, n) for n in names] for m in mine] == [[getattr(m, n) for n in names] for m in twins]
    blank = MessageExt.__new__(MessageExt)
    assert not any(hasattr(blank, n) for n in names)


def test_the_fallback_assumes_nothing():
    """The plain-PyO3 build: the class written in message.py (a GC type, its own ``__init__``), decoded objects
    tracked as Python made them, the same values."""
    if ENABLED:
        _skip("the build has the CPython internals")
    assert ASSUMED == {"enabled": False}
    assert Message.__init__ is python_init and Message.__flags__ & HAVE_GC and gc.is_tracked(Message("T", b"x"))
    [m, *_] = _core.decode_messages(_pull_body())
    assert type(m) is MessageExt and gc.is_tracked(m)


def main() -> int:
    """Runs every check; prints one line each and the Python version; exit status 1 if any failed."""
    failed = 0
    for name, fn in sorted((n, f) for n, f in globals().items() if n.startswith("test_")):
        try:
            fn()
            print(f"ok    {name}")
        except Skip:
            print(f"skip  {name}")
        except Exception as e:  # every failure is reported, then the status says it
            failed += 1
            print(f"FAIL  {name}: {e!r}")
    print(f"python {sys.version.split()[0]}, cpython internals {'on' if ENABLED else 'off'}: {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
