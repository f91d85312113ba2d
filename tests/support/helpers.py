"""Helpers shared by the store tests: deterministic clock and UNIQ_KEYs, small configs, direct file access, the
``Backend`` handle the ``backend`` fixture yields. Imported by conftest.py and by the test modules."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

import rmq_core
from rmq_core import _backend
from rmq_core.message import decode_offset_msg_id
from rmq_core.store import MessageStore, StoreConfig

BACKENDS = ("rust", "python")
KiB = 1024
CL_SIZE = 64 * KiB  # small CommitLog files: roll-over after a few messages
CQ_UNITS = 100
CQ_SIZE = CQ_UNITS * 20  # 2000 bytes = 100 units per ConsumeQueue file
CLOCK_START = 1_700_000_000_000
STORE_HOST = ("127.0.0.1", 10911)


def package_pythonpath() -> str:
    """PYTHONPATH for subprocesses: wherever this process imported rmq_core from."""
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(rmq_core.__file__)))
    extra = os.environ.get("PYTHONPATH", "")
    return pkg_parent + (os.pathsep + extra if extra else "")


def subprocess_env(backend_name: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = package_pythonpath()
    if backend_name is not None:
        env["RMQ_CORE_BACKEND"] = backend_name
    return env


class Clock:
    """Deterministic millisecond clock: returns ``now`` and advances by ``step`` on each call."""

    def __init__(self, start: int = CLOCK_START, step: int = 1) -> None:
        self.now = start
        self.step = step
        self.calls: list[int] = []

    def __call__(self) -> int:
        t = self.now
        self.now += self.step
        self.calls.append(t)
        return t


class UniqIds:
    """Deterministic UNIQ_KEYs: 32 uppercase hex chars, like MessageClientIDSetter's, counting up."""

    def __init__(self, prefix: int = 0x7F000001) -> None:
        self.prefix = prefix
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"{self.prefix:08X}{self.n:024X}"


# (max_hash_slot_num, max_index_num) of index files in tests: 4.9's 420 MB geometry scaled down (84 KB)
SMALL_INDEX = (1024, 4096)


def small_config(**overrides: object) -> StoreConfig:
    kw: dict[str, object] = dict(
        mapped_file_size_commit_log=CL_SIZE,
        mapped_file_size_consume_queue=CQ_SIZE,
        store_host=STORE_HOST,
        max_hash_slot_num=SMALL_INDEX[0],
        max_index_num=SMALL_INDEX[1],
    )
    kw.update(overrides)
    return StoreConfig(**kw)  # type: ignore[arg-type]


class Backend(str):
    """The engine name ("rust"/"python") plus helpers to open stores on it; stores opened here are closed at teardown."""

    tmp: str
    _opened: list[MessageStore]

    def __new__(cls, name: str, tmp: str) -> Backend:
        self = super().__new__(cls, name)
        self.tmp = tmp
        self._opened = []
        return self

    @property
    def name(self) -> str:
        return str(self)

    @property
    def impl(self):  # the engine module (rmq_core._core or rmq_core._reference)
        return _backend.load(self.name)

    def open(
        self,
        root: str | os.PathLike[str] | None = None,
        config: StoreConfig | None = None,
        *,
        clock: Callable[[], int] | None = None,
        uniq_id: Callable[[], str] | None = None,
    ) -> MessageStore:
        root = os.fspath(root) if root is not None else os.path.join(self.tmp, "store")
        store = MessageStore(
            root,
            config if config is not None else small_config(),
            backend=self.name,
            clock=clock if clock is not None else Clock(),
            uniq_id=uniq_id if uniq_id is not None else UniqIds(),
        )
        self._opened.append(store)
        return store

    def close_all(self) -> None:
        for s in self._opened:
            try:
                s.close()
            except Exception:
                pass


def cl_dir(root: str) -> str:
    return os.path.join(root, "commitlog")


def commit_log_bytes(root: str) -> bytes:
    """Every CommitLog file of the store at ``root``, concatenated in name order."""
    out = b""
    for name in sorted(os.listdir(cl_dir(root))):
        with open(os.path.join(cl_dir(root), name), "rb") as f:
            out += f.read()
    return out


def stored_properties(record: bytes) -> bytes:
    """The PROPERTIES field of one IPv4 CommitLog record (the last field): its length is the 2 bytes before it."""
    body_len = int.from_bytes(record[84:88], "big")
    topic_at = 88 + body_len
    props_at = topic_at + 1 + record[topic_at] + 2
    assert int.from_bytes(record[props_at - 2 : props_at], "big") == len(record) - props_at
    return record[props_at:]


# IPv4 record fields a broker fills in from where it runs: PHYSICALOFFSET, BORNHOST (the client's port differs),
# STORETIMESTAMP, STOREHOST
_RUN_OWN_FIELDS = ((28, 36), (48, 56), (56, 64), (64, 72))


def masked_record(record: bytes) -> bytes:
    """An IPv4 record with the fields a broker fills in from where it runs zeroed: what two brokers storing the same
    send must agree on byte for byte."""
    out = bytearray(record)
    for start, end in _RUN_OWN_FIELDS:
        out[start:end] = bytes(end - start)
    return bytes(out)


def record_at(commit_log: bytes, msg_id: str) -> bytes:
    """The record an offset msg id names in ``commit_log`` (the CommitLog's bytes from offset 0)."""
    offset = decode_offset_msg_id(msg_id)[1]
    (total,) = struct.unpack_from(">i", commit_log, offset)
    return commit_log[offset : offset + total]


def cq_dir(root: str, topic: str, queue_id: int) -> str:
    return os.path.join(root, "consumequeue", topic, str(queue_id))


def read_raw(root: str, offset: int, size: int, file_size: int = CL_SIZE) -> bytes:
    """Bytes of the CommitLog at a global offset, read from the file itself (not through the engine)."""
    start = offset - offset % file_size
    with open(os.path.join(cl_dir(root), f"{start:020d}"), "rb") as f:
        f.seek(offset - start)
        return f.read(size)


def put_ok(store: MessageStore, msg, queue_id: int = 0, **kw):
    """put_message that must succeed; returns the PutMessageResult."""
    r = store.put_message(msg, queue_id, **kw)
    assert r.status == 0, f"put failed: {r}"
    return r


def cq_file_bytes(root: str, topic: str, queue_id: int, start_offset_bytes: int = 0) -> bytes:
    with open(os.path.join(cq_dir(root, topic, queue_id), f"{start_offset_bytes:020d}"), "rb") as f:
        return f.read()


def drain_queue(store: MessageStore, topic: str, queue_id: int, max_nums: int = 32) -> list:
    """Pull a whole queue from its min offset, as a consumer would; every served record must parse (spec parser) with
    a good CRC and belong to this queue at the offset the CQ says. Returns the spec Records in order."""
    from support import spec_parser as sp  # local: spec_parser is needed by this one helper only

    out = []
    off = store.get_min_offset_in_queue(topic, queue_id)
    mx = store.get_max_offset_in_queue(topic, queue_id)
    guard = 0
    while off < mx:
        g = store.get_message("drain", topic, queue_id, off, max_nums)
        assert g.next_begin_offset > off or g.status != 0, g
        recs = sp.parse_records(g.body)
        assert len(recs) == g.message_count
        for r in recs:
            assert r.crc_ok, f"served a record with a bad CRC at {r.physical_offset}"
            assert (r.topic, r.queue_id) == (topic, queue_id)
            assert off <= r.queue_offset < g.next_begin_offset
        out.extend(recs)
        if g.next_begin_offset <= off:
            break
        off = g.next_begin_offset
        guard += 1
        assert guard < 100_000
    return out


def wait_until(fn, what: str = "a condition", timeout: float = 10.0, interval: float = 0.02):  # type: ignore[no-untyped-def]
    """Poll ``fn`` until it returns something truthy and return it; AssertionError naming ``what`` after ``timeout``."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
