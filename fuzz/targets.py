"""Fuzz targets: everything rmq_core parses from outside, each a function of one byte string that returns normally for
any input the decoder accepts or refuses *with its documented error*, and raises anything else (an undocumented
exception, a Rust panic surfacing as ``pyo3_runtime.PanicException``, a disagreement between the Rust decoder and its
Python twin). ``fuzz/run.py`` drives them with atheris (libFuzzer); ``tests/tools/test_fuzz_targets.py`` runs each over its
seed corpus and random inputs in the suite.

Targets (name → what parses the bytes):
- ``decode_messages``: stored records / pull bodies, Rust and Python decoders compared message for message;
- ``decode_properties``: the properties string of a record, both backends compared;
- ``decode_columns``: the Arrow-column decoder of the Spark source, both backends compared (row counts, offsets);
- ``gather_runs``: the record-run gatherer, fed (source, starts, ends) carved from the input, both backends compared;
- ``remoting_frame``: a remoting frame (JSON or ROCKETMQ header), then every custom header class decoded from its
  extFields (long and V2 short names);
- ``sql92``: an SQL92 selector compiled, then evaluated on properties carved from the input;
- ``broker_conf``: a broker.conf (Java Properties) and BrokerConfig built from it;
- ``config_json``: the JSON config files (topics, subscriptionGroup, consumerOffset, consumerFilter, delayOffset);
- ``store_recovery``: a small store directory (two CommitLog files, two queues, a checkpoint) corrupted as the input
  says (bytes flipped or overwritten, files truncated or deleted, the abort marker added or removed), then opened by
  the backend the input picks: it opens or refuses with ``StoreError``; once open, every queue is pulled from its min
  to its max offset and every record served must be whole (good CRC) and be exactly the message written at that
  queue and offset (topic, queue, offset, body: what the format's fields and BODYCRC protect; damage to a field no
  checksum covers, such as the sys flag, may reach the client, whose decoder refuses it with CorruptRecordError);
  queries by key over the (possibly damaged) index files serve only the message written with that key.

Thread-safety: one thread; targets keep no state between calls except the scratch directory (the config files, the
store_recovery base store written once and its work copy).
"""

from __future__ import annotations

import array
import atexit
import dataclasses
import os
import shutil
import struct
import tempfile
from collections.abc import Callable

from rmq_core import _backend
from rmq_core.broker.broker_config import BrokerConfig, parse_properties
from rmq_core.broker.config_manager import ConfigManager
from rmq_core.broker.consumer_filter_manager import ConsumerFilterManager
from rmq_core.broker.consumer_offset_manager import ConsumerOffsetManager
from rmq_core.broker.schedule.schedule_message_service import ScheduleMessageService
from rmq_core.broker.subscription_group_manager import SubscriptionGroupManager
from rmq_core.broker.topic_config_manager import TopicConfigManager
from rmq_core.errors import CorruptRecordError, RmqError, StoreError
from rmq_core.filter.sql92 import FilterParseError, Sql92Filter
from rmq_core.format.message import body_crc
from rmq_core.message import Message
from rmq_core.message import decode_messages as decode_message_objects
from rmq_core.remoting import header as header_module
from rmq_core.remoting.command import RemotingCommand, RemotingCommandError
from rmq_core.store import MessageStore, StoreConfig

RUST = _backend.load("rust")
PYTHON = _backend.load("python")

Target = Callable[[bytes], None]


def _same(what: str, rust: object, python: object) -> None:
    if rust != python:
        raise AssertionError(f"{what}: the Rust and Python decoders disagree: {rust!r} != {python!r}")


def _both(what: str, call: Callable[[object], object], refuses: tuple[type[BaseException], ...]) -> None:
    """Run ``call`` on both backends: both refuse (with a documented error) or both return equal results."""
    outcomes = []
    for impl in (RUST, PYTHON):
        try:
            outcomes.append(("ok", call(impl)))
        except refuses as e:
            outcomes.append(("refused", type(e).__name__))
    if outcomes[0][0] != outcomes[1][0]:
        raise AssertionError(f"{what}: Rust {outcomes[0]!r} but Python {outcomes[1]!r}")
    if outcomes[0][0] == "ok":
        _same(what, outcomes[0][1], outcomes[1][1])


def _message_view(m: object) -> tuple[object, ...]:
    names = ("topic", "queue_id", "queue_offset", "commitlog_offset", "store_size", "sys_flag", "body", "flag")
    return tuple(getattr(m, n) for n in names) + (tuple(sorted(m.properties.items())),)  # type: ignore[attr-defined]


def decode_messages(data: bytes) -> None:
    _both(
        "decode_messages",
        lambda impl: [_message_view(m) for m in impl.decode_messages(data)],
        (CorruptRecordError, ValueError),  # ValueError: a compression type with no codec built in
    )


def decode_properties(data: bytes) -> None:
    _both("decode_properties", lambda impl: impl.decode_properties(data), (ValueError,))


def decode_columns(data: bytes) -> None:
    def call(impl: object) -> object:
        cols = impl.decode_columns(data)  # type: ignore[attr-defined]
        return {k: bytes(v) if isinstance(v, (bytes, bytearray, memoryview)) else v for k, v in cols.items()}

    outcomes = []
    for impl in (RUST, PYTHON):
        try:
            cols = call(impl)
            outcomes.append(("ok", cols.get("num_rows") if isinstance(cols, dict) else None))
        except (CorruptRecordError, ValueError) as e:  # ValueError: a compression type with no codec built in
            outcomes.append(("refused", type(e).__name__))
    if outcomes[0] != outcomes[1]:
        raise AssertionError(f"decode_columns: Rust {outcomes[0]!r} but Python {outcomes[1]!r}")


def gather_runs(data: bytes) -> None:
    if len(data) < 2:
        return
    n = data[0] % 8
    src = data[1:]
    bounds = [b % (len(src) + 4) for b in data[1 : 1 + 2 * n]]
    starts = array.array("q", bounds[0::2])  # int64 arrays, as the Spark reader passes them
    ends = array.array("q", bounds[1::2])
    _both("gather_runs", lambda impl: bytes(impl.gather_runs(src, starts, ends)), (ValueError, IndexError))


_HEADER_CLASSES = [
    c
    for c in vars(header_module).values()
    if isinstance(c, type) and dataclasses.is_dataclass(c) and c.__module__ == header_module.__name__
]


def remoting_frame(data: bytes) -> None:
    try:
        cmd = RemotingCommand.decode_frame(data)
    except RemotingCommandError:
        return
    ext = cmd.ext_fields or {}
    for cls in _HEADER_CLASSES:
        for short in (False, True):
            try:
                header_module.decode_header(cls, ext, short_names=short)
            except (header_module.HeaderError, ValueError):
                pass


def sql92(data: bytes) -> None:
    text, _, rest = data.partition(b"\x00")
    try:
        selector = Sql92Filter(text.decode("utf-8", "replace"))
    except FilterParseError:
        return
    props = {}
    for pair in rest.split(b"\x01")[:8]:
        k, _, v = pair.partition(b"=")
        props[k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
    selector.evaluate(props)


def broker_conf(data: bytes) -> None:
    try:
        BrokerConfig.from_properties(parse_properties(data.decode("utf-8", "replace")))
    except ValueError:
        pass


_SCRATCH = tempfile.mkdtemp(prefix="rmq-fuzz-config-")
atexit.register(shutil.rmtree, _SCRATCH, True)


def config_json(data: bytes) -> None:
    # fresh managers per input (30 us): a manager's decode merges into its tables, so managers kept across inputs
    # grew without bound and a million-input campaign timed out on the accumulated tables, not on the input
    cfg = BrokerConfig(store_path_root_dir=_SCRATCH, broker_name="fuzz")
    managers: list[ConfigManager] = [
        TopicConfigManager(cfg, _SCRATCH),
        SubscriptionGroupManager(cfg, _SCRATCH),
        ConsumerOffsetManager(_SCRATCH),
        ConsumerFilterManager(_SCRATCH),
        ScheduleMessageService(cfg),
    ]
    text = data.decode("utf-8", "replace")
    for manager in managers:
        try:
            manager.decode(text)
        except (ValueError, RmqError):
            continue
        manager.encode()  # what was accepted can be written back


_RECOVERY_TOPIC = "FuzzRecovery"
_RECOVERY_CONFIG = StoreConfig(
    mapped_file_size_commit_log=16 * 1024,
    mapped_file_size_consume_queue=40 * 20,
    max_hash_slot_num=64,  # a 1.6 KiB index file (4.9's default is 420 MB, copied for every input)
    max_index_num=64,
    store_host=("127.0.0.1", 10911),
)
_RECOVERY_BASE = os.path.join(_SCRATCH, "recovery-base")
_RECOVERY_WORK = os.path.join(_SCRATCH, "recovery-work")
_RECOVERY_WRITTEN: dict[tuple[int, int], bytes] = {}  # (queue id, queue offset) -> body
_RECOVERY_KEYS: dict[str, bytes] = {}  # KEYS -> body
_MUTATION = struct.Struct(">BBIH")  # file index, operation, position, value or length


def _recovery_base() -> list[str]:
    """Writes the base store once (Rust engine; both write the same bytes) and lists its files, sorted."""
    if not _RECOVERY_WRITTEN:
        with MessageStore(_RECOVERY_BASE, _RECOVERY_CONFIG, backend="rust") as store:
            for i in range(48):  # ~600 B each: three 16 KiB CommitLog files, two ConsumeQueue files per queue
                body = (b"%03d:" % i) * (100 + i % 50)
                msg = Message(_RECOVERY_TOPIC, body, tags="T", keys=f"k{i}")
                result = store.put_message(msg, i % 2, ("127.0.0.1", 1))
                _RECOVERY_WRITTEN[(i % 2, result.queue_offset)] = body
                _RECOVERY_KEYS[f"k{i}"] = body
    files = []
    for d, _dirs, names in os.walk(_RECOVERY_BASE):
        files.extend(os.path.relpath(os.path.join(d, n), _RECOVERY_BASE) for n in names if n != "lock")
    return sorted(files)


def store_recovery(data: bytes) -> None:
    files = _recovery_base()
    shutil.rmtree(_RECOVERY_WORK, ignore_errors=True)
    shutil.copytree(_RECOVERY_BASE, _RECOVERY_WORK)
    backend = "rust" if not data or data[0] % 2 == 0 else "python"
    for k in range(1, len(data) - _MUTATION.size + 1, _MUTATION.size):
        index, op, pos, value = _MUTATION.unpack_from(data, k)
        if index % 8 == 7:  # the abort marker: an unclean stop (abnormal recovery) or a clean one
            marker = os.path.join(_RECOVERY_WORK, "abort")
            if os.path.exists(marker):
                os.unlink(marker)
            else:
                open(marker, "wb").close()
            continue
        path = os.path.join(_RECOVERY_WORK, files[index % len(files)])
        if not os.path.exists(path):
            continue
        size = os.path.getsize(path)
        op %= 4
        with open(path, "r+b") as f:
            if op == 0 and size:  # flip one byte
                f.seek(pos % size)
                b = f.read(1)
                f.seek(pos % size)
                f.write(bytes([b[0] ^ (value & 0xFF or 1)]))
            elif op == 1 and size:  # overwrite a run with one byte value
                at = pos % size
                f.seek(at)
                f.write(bytes([value & 0xFF]) * min(1 + (value >> 8), size - at))
            elif op == 2:  # truncate
                f.truncate(pos % (size + 1))
        if op == 3:
            os.unlink(path)
    try:
        store = MessageStore(_RECOVERY_WORK, _RECOVERY_CONFIG, backend=backend)
    except StoreError:
        return  # refused, with its reason: documented
    with store:
        for qid in (0, 1):
            offset = store.get_min_offset_in_queue(_RECOVERY_TOPIC, qid)
            end = store.get_max_offset_in_queue(_RECOVERY_TOPIC, qid)
            guard = 0
            while offset < end:
                got = store.get_message("fuzz", _RECOVERY_TOPIC, qid, offset, 8)
                if got.message_count:
                    try:
                        served = decode_message_objects(bytes(got.body))
                    except CorruptRecordError:  # damage in a field no checksum covers (a compressed flag set on a
                        served = []  # plain body): the client refuses it with the documented error
                    for m in served:
                        if body_crc(m.body) != m.body_crc:
                            raise AssertionError(
                                f"{backend}: served a record with a bad body CRC at {m.commitlog_offset}"
                            )
                        want = _RECOVERY_WRITTEN.get((qid, m.queue_offset))
                        if m.topic != _RECOVERY_TOPIC or m.queue_id != qid or m.body != want:
                            raise AssertionError(
                                f"{backend}: served a record that was not written at queue {qid} offset "
                                f"{m.queue_offset} (topic {m.topic!r}, queue {m.queue_id}, body {m.body[:16]!r})"
                            )
                if got.next_begin_offset <= offset:
                    break
                offset = got.next_begin_offset
                guard += 1
                if guard > 1000:
                    raise AssertionError(f"{backend}: queue {qid} never reaches its max offset {end}")
        for key in ("k0", f"k{len(data) % 48}", "k47"):  # the index files (damaged too) serve only what was written
            try:
                found = store.query_message(_RECOVERY_TOPIC, key, 32, 0, 2**62)
            except CorruptRecordError:
                found = []
            for m in found:
                if m.body != _RECOVERY_KEYS[key] or body_crc(m.body) != m.body_crc:
                    raise AssertionError(f"{backend}: query by key {key} served {m.body[:16]!r}")


TARGETS: dict[str, Target] = {
    "decode_messages": decode_messages,
    "decode_properties": decode_properties,
    "decode_columns": decode_columns,
    "gather_runs": gather_runs,
    "remoting_frame": remoting_frame,
    "sql92": sql92,
    "broker_conf": broker_conf,
    "config_json": config_json,
    "store_recovery": store_recovery,
}

CORPUS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
