"""rmq_core's broker with its store's send-path put replaced by a counter: the ceiling of the send path, a diagnostic
for ``bench_vs_apache.py --ceiling`` only (never a way to run a broker).

    python benches/no_store_broker.py broker -c broker.conf      (the arguments of ``rmq-core``)

Everything a send goes through up to the store is kept — the transport's frame splitting, ``SendRequestParser``,
the processor's checks, topic auto-creation, the answers, their encoding and the socket I/O — and
``MessageStore.put_send_requests`` (the plain sends' put, ``store.py``) answers PUT_OK with made-up offsets and
stores nothing: no CommitLog write, no ConsumeQueue or index, so no flush, warm-ahead or index work either. A send
that does not take that path (batches, delayed, transactional) is stored as usual. The gap between this broker and
the real one, on the same workload in the same run, is what the store costs the send path.

Thread-safety: the counter is only touched on the broker's event loop (the send path's thread).
"""

from __future__ import annotations

import sys
from typing import Any

from rmq_core import store
from rmq_core.cli import main

_PUT_OK = 0
_RECORD_BYTES = 1200  # a made-up record size for the offsets (a 1 KiB body and its header)


def _install() -> None:
    position = {"commitlog": 0, "queue": 0}

    def put_send_requests(
        self: store.MessageStore, sends: Any, start: int, end: int, *rest: Any, **options: Any
    ) -> list[tuple[int, int, int, int]]:
        """``MessageStore.put_send_requests``' signature; PUT_OK for sends ``[start, end)``, nothing stored."""
        out = []
        for _ in range(start, end):
            out.append((_PUT_OK, position["commitlog"], position["queue"], _RECORD_BYTES))
            position["commitlog"] += _RECORD_BYTES
            position["queue"] += 1
        return out

    store.MessageStore.put_send_requests = put_send_requests  # type: ignore[method-assign]


if __name__ == "__main__":
    _install()
    sys.exit(main(sys.argv[1:]))
