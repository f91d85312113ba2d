"""Rows of the ``rocketmq`` data source as Arrow record batches, built in the executors from raw CommitLog records
(a pull body or a store read) without a Python object per message.

Owns: ``SCHEMA``, ``SPARK_SCHEMA_DDL`` and ``records_to_record_batch``. Invariants:
1. ``SCHEMA`` equals ``pyspark.sql.pandas.types.to_arrow_schema(<SPARK_SCHEMA_DDL>, timezone="UTC")`` (PySpark checks
   every yielded batch's schema against it): every field nullable, ``timestamp[us, tz=UTC]``, a nullable map value.
2. Rows equal ``rmq_core.message.decode_messages`` on the same bytes, plus ``broker_name`` (given, the same for every
   row).
3. The decode runs in ``rmq_core._backend.impl.decode_columns`` (Rust with the GIL released, or the Python twin);
   this module only wraps its buffers with ``pyarrow.Array.from_buffers`` (zero-copy over the returned bytes).
Thread-safety: pure functions.
Details: docs/SPARK_DESIGN.md, 'Arrow rows'.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from rmq_core import _backend

if TYPE_CHECKING:
    from typing_extensions import Buffer

SPARK_SCHEMA_DDL = (
    "topic string, broker_name string, queue_id int, queue_offset long, commitlog_offset long, msg_id string, "
    "tags string, keys string, body binary, properties map<string,string>, born_timestamp timestamp, "
    "store_timestamp timestamp, reconsume_times int"
)

TIMESTAMP = pa.timestamp("us", tz="UTC")
_TIMESTAMP_MS = pa.timestamp("ms", tz="UTC")
PROPERTIES = pa.map_(pa.string(), pa.string())

SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("broker_name", pa.string()),
        pa.field("queue_id", pa.int32()),
        pa.field("queue_offset", pa.int64()),
        pa.field("commitlog_offset", pa.int64()),
        pa.field("msg_id", pa.string()),
        pa.field("tags", pa.string()),
        pa.field("keys", pa.string()),
        pa.field("body", pa.binary()),
        pa.field("properties", PROPERTIES),
        pa.field("born_timestamp", TIMESTAMP),
        pa.field("store_timestamp", TIMESTAMP),
        pa.field("reconsume_times", pa.int32()),
    ]
)


def _buf(b: bytes | None) -> pa.Buffer | None:
    return None if b is None else pa.py_buffer(b)


def _var(typ: pa.DataType, n: int, parts: tuple[bytes | None, bytes, bytes]) -> pa.Array:
    validity, offsets, data = parts
    return pa.Array.from_buffers(typ, n, [_buf(validity), pa.py_buffer(offsets), pa.py_buffer(data)])


def _fixed(typ: pa.DataType, n: int, data: bytes) -> pa.Array:
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(data)])


def _timestamps(n: int, data: bytes) -> pa.Array:
    # exact ms → us (safe cast: an out-of-range value raises instead of wrapping)
    return _fixed(_TIMESTAMP_MS, n, data).cast(TIMESTAMP)


def _properties(n: int, parts: tuple[bytes, bytes, bytes, bytes, bytes]) -> pa.Array:
    offsets, key_offsets, key_data, value_offsets, value_data = parts
    entries = len(key_offsets) // 4 - 1
    keys = pa.Array.from_buffers(pa.string(), entries, [None, pa.py_buffer(key_offsets), pa.py_buffer(key_data)])
    values = pa.Array.from_buffers(pa.string(), entries, [None, pa.py_buffer(value_offsets), pa.py_buffer(value_data)])
    structs = pa.StructArray.from_arrays([keys, values], fields=[PROPERTIES.key_field, PROPERTIES.item_field])
    return pa.Array.from_buffers(PROPERTIES, n, [None, pa.py_buffer(offsets)], children=[structs])


def columns_to_record_batch(cols: dict[str, Any], broker_name: str) -> pa.RecordBatch:
    """A RecordBatch in ``SCHEMA`` from the dict ``decode_columns`` returns."""
    n = cols["num_rows"]
    arrays = [
        _var(pa.string(), n, cols["topic"]),
        pa.repeat(pa.scalar(broker_name, pa.string()), n),
        _fixed(pa.int32(), n, cols["queue_id"]),
        _fixed(pa.int64(), n, cols["queue_offset"]),
        _fixed(pa.int64(), n, cols["commitlog_offset"]),
        _var(pa.string(), n, cols["msg_id"]),
        _var(pa.string(), n, cols["tags"]),
        _var(pa.string(), n, cols["keys"]),
        _var(pa.binary(), n, cols["body"]),
        _properties(n, cols["properties"]),
        _timestamps(n, cols["born_timestamp"]),
        _timestamps(n, cols["store_timestamp"]),
        _fixed(pa.int32(), n, cols["reconsume_times"]),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


def records_to_record_batch(
    buf: Buffer,
    broker_name: str,
    tag_filter: Iterable[str] | None = None,
    min_queue_offset: int | None = None,
) -> pa.RecordBatch:
    """Concatenated CommitLog records → one RecordBatch in ``SCHEMA``.

    ``tag_filter``: keep rows whose TAGS is one of these exact strings (rows without TAGS are dropped; pass None, not
    ``["*"]``, to keep everything). ``min_queue_offset``: drop rows below it. A corrupt record raises
    ``CorruptRecordError`` (``offset`` = its index in ``buf``); an unsupported compression type raises ValueError.
    """
    if not isinstance(broker_name, str):
        raise TypeError(f"broker_name must be str, got {type(broker_name).__name__}")
    tags = None if tag_filter is None else [tag_filter] if isinstance(tag_filter, str) else list(tag_filter)
    cols = _backend.impl.decode_columns(buf, tags, min_queue_offset)
    return columns_to_record_batch(cols, broker_name)


__all__ = ["SCHEMA", "SPARK_SCHEMA_DDL", "TIMESTAMP", "columns_to_record_batch", "records_to_record_batch"]
