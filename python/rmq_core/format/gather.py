"""Gathering byte runs (twin of rust/rmq-store/src/format/gather.rs): ``src[starts[i]:ends[i]]`` for every i,
concatenated: ``bytes`` equal to the ``ColumnBuffer`` ``rmq_core._core.gather_runs`` returns.

Decisions (shared with the Rust side): ``src`` is any byte buffer (a read-only ``mmap``), ``starts``/``ends`` int64
sequences (numpy arrays); ValueError, with nothing copied, when the counts differ or a run is not within ``src``
(0 ≤ start ≤ end ≤ len), with the Rust side's message.

Thread-safety: pure function.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def gather_runs(src: Any, starts: Sequence[int], ends: Sequence[int]) -> bytes:
    view = memoryview(src).cast("B")
    a, b = [int(x) for x in starts], [int(x) for x in ends]
    if len(a) != len(b):
        raise ValueError(f"{len(a)} run starts but {len(b)} run ends")
    n = len(view)
    for i, (s, e) in enumerate(zip(a, b)):
        if s < 0 or e < s or e > n:
            raise ValueError(f"run {i} [{s}, {e}) is outside the {n}-byte source")
    return b"".join([view[s:e] for s, e in zip(a, b)])
