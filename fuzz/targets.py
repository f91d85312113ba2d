"""Fuzz targets: everything rmq_core parses from outside, each a function of one byte string that returns normally for
any input the decoder accepts or refuses *with its documented error*, and raises anything else (an undocumented
exception, a Rust panic surfacing as ``pyo3_runtime.PanicException``, a disagreement between the Rust decoder and its
Python twin). ``fuzz/run.py`` drives them with atheris (libFuzzer); ``tests/test_fuzz_targets.py`` runs each over its
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
- ``config_json``: the JSON config files (topics, subscriptionGroup, consumerOffset, consumerFilter, delayOffset).

Thread-safety: targets keep no state between calls except the config managers' scratch directory.
"""

from __future__ import annotations

import array
import atexit
import dataclasses
import os
import shutil
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
from rmq_core.errors import CorruptRecordError, RmqError
from rmq_core.filter.sql92 import FilterParseError, Sql92Filter
from rmq_core.remoting import header as header_module
from rmq_core.remoting.command import RemotingCommand, RemotingCommandError

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


_CONFIG_MANAGERS: list[ConfigManager] = []


def config_json(data: bytes) -> None:
    if not _CONFIG_MANAGERS:  # built once: each decode replaces or merges tables, and a bad document changes nothing
        cfg = BrokerConfig(store_path_root_dir=_SCRATCH, broker_name="fuzz")
        _CONFIG_MANAGERS.extend(
            [
                TopicConfigManager(cfg, _SCRATCH),
                SubscriptionGroupManager(cfg, _SCRATCH),
                ConsumerOffsetManager(_SCRATCH),
                ConsumerFilterManager(_SCRATCH),
                ScheduleMessageService(cfg),
            ]
        )
    text = data.decode("utf-8", "replace")
    for manager in _CONFIG_MANAGERS:
        try:
            manager.decode(text)
        except (ValueError, RmqError):
            continue
        manager.encode()  # what was accepted can be written back


TARGETS: dict[str, Target] = {
    "decode_messages": decode_messages,
    "decode_properties": decode_properties,
    "decode_columns": decode_columns,
    "gather_runs": gather_runs,
    "remoting_frame": remoting_frame,
    "sql92": sql92,
    "broker_conf": broker_conf,
    "config_json": config_json,
}

CORPUS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
