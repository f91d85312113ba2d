"""``StoreReader``: read-only access to a store directory — ours or a live broker's — without opening a
``MessageStore`` (no lock, no recovery, no writes), and ``mapped_file_size`` (a directory's mapped file size from
its files).

Owns: the public name only; the reader is ``rust/rmq-store/src/store_reader.rs`` (``RMQ_CORE_BACKEND=python``: its
twin ``rmq_core._reference.store_reader``), whose header has the rules: records are served whole or not at all, a
read beside a writer that appends and rolls files stops at the first unit or record not written yet.

API: ``StoreReader(root, commit_log_file_size=None, consume_queue_file_size=None)`` (sizes not given are taken from
the files on disk) with ``topics()``, ``queues()``, ``min_offset(topic, queue_id)``, ``max_offset(topic,
queue_id)``, ``read_records(topic, queue_id, start, end, tag_codes=None) -> (records, count, next_offset)``,
``record_at(phy_offset)``, ``min_physical_offset``, ``close()``; a context manager.

Thread-safety: the Rust reader may be shared between threads (calls take turns); the Python twin's may not.
"""

from __future__ import annotations

from rmq_core import _backend

StoreReader = _backend.impl.StoreReader
mapped_file_size = _backend.impl.mapped_file_size

__all__ = ["StoreReader", "mapped_file_size"]
