"""Re-dispatch after a crash must not trust a record's topic to name a path: a CRC-valid record whose topic is
illegal ("../escape") is never dispatched, so no directory is created outside consumequeue/ (CORE_API §7)."""

from __future__ import annotations

import os

from rmq_core.message import Message
from rmq_core.store import GetMessageStatus

from support.helpers import CL_SIZE, cl_dir, put_ok
from support.spec_parser import build_record, file_name


def test_redispatch_skips_records_naming_illegal_topics(backend, tmp_path):
    root = str(tmp_path / "store")
    store = backend.open(root)
    for i in range(5):
        put_ok(store, Message("Good", b"g%d" % i, tags="A"), 0)
    end = store.max_physical_offset
    store.close()

    evil = build_record(topic="../../escape", body=b"evil", queue_id=0, physical_offset=end, store_timestamp=1)
    with open(os.path.join(cl_dir(root), file_name(end - end % CL_SIZE)), "r+b") as f:
        f.seek(end % CL_SIZE)
        f.write(evil)
    open(os.path.join(root, "abort"), "w").close()  # an unclean stop
    os.remove(os.path.join(root, "checkpoint"))  # and no checkpoint: re-dispatch from the start

    store = backend.open(root)
    assert not os.path.exists(os.path.join(tmp_path, "escape"))
    assert not os.path.exists(os.path.join(root, "escape"))
    assert all(t == "Good" for t, _ in store.topics())
    r = store.get_message("g", "Good", 0, 0, 32)
    assert r.status == GetMessageStatus.FOUND and [m.body for m in r.decode()] == [b"g%d" % i for i in range(5)]
