"""The pure-Python twin of the Rust store engine (``rmq_core._core``): same contract (docs/CORE_API.md), same bytes on
disk, same results. One module per file of ``rust/rmq-store/src``:

  config.py             StoreConfig (constructor keys, defaults, validation)
  format/message.py     CommitLog record layout, encode/decode, properties, tags hash, offset msg id
  format/columns.py     records → Arrow-layout column buffers (decode_columns)
  format/gather.py      byte runs of a mapped file → one buffer (gather_runs)
  format/cq_unit.py     the 20-byte ConsumeQueue unit
  format/file_name.py   20-digit mapped file names
  mapped_file.py        one mmap'ed, posix_fallocate'd store file
  mapped_file_queue.py  an ordered run of mapped files in a directory
  commit_log.py         appends with BLANK roll-over, raw reads, old-file deletion
  consume_queue.py      one (topic, queue id) index, pre-blank filling, its own recovery
  flush.py              the flush thread (async periodic flush, sync group commit)
  checkpoint.py         <root>/checkpoint
  recovery.py           normal/abnormal CommitLog recovery, dirty-unit truncation, re-dispatch
  get_message.py        the RocketMQ 4.9 pull scan and isTheBatchFull
  message_store.py      StoreEngine
  store_reader.py       StoreReader: a read-only view of a store directory (no lock, no recovery, no writes)
  remoting_frames.py    the remoting frame codec's fast path (split_frames, split_client_frames, encode_frames,
                        encode_send_request; rmq-py/src/remoting.rs)
  send_requests.py      a chunk's plain sends as columns, stored in one put, answered as frames (rmq-py/src/send_request.rs)
  format/send_request.py  a plain send's header fields and stored properties
  format/batch.py       a SEND_BATCH_MESSAGE body's blocks and the properties their records store

This package never imports ``rmq_core._core``.
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from .format.batch import encode_batch_messages, split_batch
    from .format.columns import decode_columns
    from .format.gather import gather_runs
    from .format.message import (
        assign_uniq_keys,
        create_offset_msg_id,
        decode_messages,
        decode_properties,
        encode_properties,
        java_hash_map_order,
        tags_hash,
    )
    from .message_store import StoreEngine
    from .remoting_frames import encode_frames, encode_send_request, split_client_frames, split_frames
    from .send_requests import SendAnswerSpec, SendRequestColumns, SendRequestParser
    from .store_reader import StoreReader, mapped_file_size

_T = TypeVar("_T")

# Loaded on first use (PEP 562): importing a format module (``rmq_core.message`` imports format.message) must not
# load the whole twin engine.
_WHERE = {
    "decode_columns": ".format.columns",
    "split_batch": ".format.batch",
    "encode_batch_messages": ".format.batch",
    "gather_runs": ".format.gather",
    "assign_uniq_keys": ".format.message",
    "create_offset_msg_id": ".format.message",
    "decode_messages": ".format.message",
    "decode_properties": ".format.message",
    "encode_properties": ".format.message",
    "java_hash_map_order": ".format.message",
    "tags_hash": ".format.message",
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
    ``__init__`` native for the common call and ``python_init`` for every other (``rust/rmq-py/src/message_class.rs``);
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
    "mapped_file_size",
    "message_class",
    "split_batch",
    "split_client_frames",
    "split_frames",
    "tags_hash",
    "uniq_counter",
    "untrack_message",
]
