"""The pure-Python twin of the Rust store engine (``rmq_core._core``): same contract (docs/CORE_API.md), same bytes on
disk, same results. One module per file of ``rust/rmq-store/src`` (config, mapped_file_queue, commit_log,
consume_queue, flush, checkpoint, recovery, get_message, message_store, store_reader, remoting_frames, send_requests).

Format: the byte layouts are the format layer's, ``rmq_core.format`` (format/*.rs); the names it gives the backend
API (``decode_columns``, ``split_batch``, ``tags_hash``...) are re-exported here.
Invariants: only ``rmq_core._backend`` and tests import this package (the ``twin-behind-backend`` contract in
``.importlinter``); it never imports ``rmq_core._core``.
Thread-safety: per module (the engine's lock serialises the store's files).
Details (what each module owns): docs/CORE_API.md, 'The Python twin'.
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from rmq_core.format.batch import encode_batch_messages, split_batch
    from rmq_core.format.columns import decode_columns
    from rmq_core.format.gather import gather_runs
    from rmq_core.format.message import (
        assign_uniq_keys,
        create_offset_msg_id,
        decode_messages,
        decode_properties,
        encode_properties,
        java_hash_map_order,
        last_store_timestamp,
        tags_hash,
    )

    from .message_store import StoreEngine
    from .remoting_frames import encode_frames, encode_send_request, split_client_frames, split_frames
    from .send_requests import SendAnswerSpec, SendRequestColumns, SendRequestParser
    from .store_reader import StoreReader, mapped_file_size

_T = TypeVar("_T")

# Loaded on first use (PEP 562): ``rmq_core._backend`` imports this package while ``rmq_core.message`` is still
# loading; no engine module is loaded before one of its names is used.
_WHERE = {
    "decode_columns": "rmq_core.format.columns",
    "split_batch": "rmq_core.format.batch",
    "encode_batch_messages": "rmq_core.format.batch",
    "gather_runs": "rmq_core.format.gather",
    "assign_uniq_keys": "rmq_core.format.message",
    "create_offset_msg_id": "rmq_core.format.message",
    "decode_messages": "rmq_core.format.message",
    "decode_properties": "rmq_core.format.message",
    "encode_properties": "rmq_core.format.message",
    "java_hash_map_order": "rmq_core.format.message",
    "last_store_timestamp": "rmq_core.format.message",
    "tags_hash": "rmq_core.format.message",
    "StoreEngine": ".message_store",
    "encode_frames": ".remoting_frames",
    "encode_send_request": ".remoting_frames",
    "split_client_frames": ".remoting_frames",
    "split_frames": ".remoting_frames",
    "SendAnswerSpec": ".send_requests",
    "SendRequestParser": ".send_requests",
    "SendRequestColumns": ".send_requests",
    "StoreReader": ".store_reader",
    "mapped_file_size": ".store_reader",
}


def untrack_message(msg: object) -> None:
    """The Rust engine takes a ``Message`` out of the cyclic GC's tracking (``rust/rmq-py/src/codec/message_fields.rs``);
    pure Python cannot, and nothing a caller sees depends on it: this twin does nothing."""


def message_class(cls: _T, python_init: Callable[..., None]) -> _T:
    """The Rust engine returns a native copy of the ``Message`` class that is not a garbage-collected type, its
    ``__init__`` native for the common call and ``python_init`` for every other (``rust/rmq-py/src/cpython/message_type.rs``);
    pure Python cannot make one, and nothing a caller sees depends on it: the twin is ``cls`` itself."""
    return cls


def uniq_counter(start: int) -> Iterator[int]:
    """The default UNIQ_KEY generator's counter: ``start``, ``start + 1``, … The Rust engine's is a native iterator
    (``rust/rmq-py/src/uniq_counter.rs``) its UNIQ_KEY pass reads without a Python ``int`` per id; the same values."""
    return itertools.count(start)


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "SendAnswerSpec",
    "SendRequestColumns",
    "SendRequestParser",
    "StoreEngine",
    "StoreReader",
    "assign_uniq_keys",
    "create_offset_msg_id",
    "decode_columns",
    "decode_messages",
    "decode_properties",
    "encode_batch_messages",
    "encode_frames",
    "encode_properties",
    "encode_send_request",
    "gather_runs",
    "java_hash_map_order",
    "last_store_timestamp",
    "mapped_file_size",
    "message_class",
    "split_batch",
    "split_client_frames",
    "split_frames",
    "tags_hash",
    "uniq_counter",
    "untrack_message",
]
