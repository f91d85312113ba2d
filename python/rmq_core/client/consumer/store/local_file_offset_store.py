"""LocalFileOffsetStore (cl/consumer/store/LocalFileOffsetStore.java): broadcasting consumers keep their offsets in
``<store_dir>/<clientId>/<group>/offsets.json`` (store_dir defaults to ``~/.rocketmq_offsets``).

File format (OffsetSerializeWrapper, fastjson, non-standard JSON: MessageQueue objects as map keys)::

    {"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:42,...}}

Written as RocketMQ's MixAll.string2File does: ``offsets.json.tmp`` first, the previous file kept as
``offsets.json.bak``, then the tmp renamed over the file. Loading falls back to ``.bak`` when the file is missing or
empty; a file that cannot be parsed raises ``ValueError`` naming it (nothing is overwritten).

Thread-safety: the table is guarded by a lock; file writes are serialised by a second lock.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from rmq_core.client.consumer.store.offset_store import OffsetTable, ReadOffsetType
from rmq_core.message import MessageQueue

log = logging.getLogger(__name__)

DEFAULT_STORE_DIR = os.path.join(os.path.expanduser("~"), ".rocketmq_offsets")
_DECODER = json.JSONDecoder()


def encode_offset_table(table: dict[MessageQueue, int]) -> str:
    """OffsetSerializeWrapper JSON (fastjson layout: object keys, sorted fields)."""
    parts = []
    for mq, off in sorted(table.items()):
        key = json.dumps(
            {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic},
            separators=(",", ":"),
            ensure_ascii=False,
        )
        parts.append(f"{key}:{int(off)}")
    return '{"offsetTable":{' + ",".join(parts) + "}}"


def decode_offset_table(text: str) -> dict[MessageQueue, int]:
    """Parse OffsetSerializeWrapper JSON (object keys); raises ValueError on anything else."""
    s = text
    n = len(s)

    def ws(i: int) -> int:
        while i < n and s[i] in " \t\r\n":
            i += 1
        return i

    i = ws(0)
    if i >= n or s[i] != "{":
        raise ValueError("offsets file: expected '{'")
    i = ws(i + 1)
    table: dict[MessageQueue, int] = {}
    if i < n and s[i] == "}":
        return table
    name, i = _DECODER.raw_decode(s, i)
    if name != "offsetTable":
        raise ValueError(f"offsets file: unexpected field {name!r}")
    i = ws(i)
    if i >= n or s[i] != ":":
        raise ValueError("offsets file: expected ':' after offsetTable")
    i = ws(i + 1)
    if s.startswith("null", i):
        return table
    if i >= n or s[i] != "{":
        raise ValueError("offsets file: offsetTable is not an object")
    i = ws(i + 1)
    while i < n and s[i] != "}":
        key, i = _DECODER.raw_decode(s, i)
        if not isinstance(key, dict):
            raise ValueError(f"offsets file: key is not a MessageQueue object: {key!r}")
        i = ws(i)
        if i >= n or s[i] != ":":
            raise ValueError("offsets file: expected ':' after a MessageQueue key")
        val, i = _DECODER.raw_decode(s, ws(i + 1))
        if not isinstance(val, int) or isinstance(val, bool):
            raise ValueError(f"offsets file: offset is not an integer: {val!r}")
        try:
            mq = MessageQueue(str(key["topic"]), str(key["brokerName"]), int(key["queueId"]))
        except KeyError as e:
            raise ValueError(f"offsets file: MessageQueue key without {e}") from None
        table[mq] = val
        i = ws(i)
        if i < n and s[i] == ",":
            i = ws(i + 1)
    if i >= n:
        raise ValueError("offsets file: unterminated offsetTable")
    return table


class LocalFileOffsetStore(OffsetTable):
    def __init__(self, instance: Any, group_name: str, store_dir: str | os.PathLike[str] | None = None) -> None:
        super().__init__()
        self.instance = instance
        self.group_name = group_name
        root = Path(store_dir) if store_dir is not None else Path(DEFAULT_STORE_DIR)
        self.store_path = root / str(instance.client_id) / group_name / "offsets.json"
        self._file_lock = threading.Lock()

    def load(self) -> None:
        table = self._read_local_offset()
        if table:
            with self._lock:
                self.offset_table.update(table)
            for mq, off in table.items():
                log.info("load consumer's offset, %s %s %d", self.group_name, mq, off)

    def _read_local_offset(self) -> dict[MessageQueue, int] | None:
        for path in (self.store_path, self.store_path.with_name(self.store_path.name + ".bak")):
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                continue
            if not text.strip():
                continue
            try:
                return decode_offset_table(text)
            except ValueError as e:
                raise ValueError(f"cannot parse the local offset store file {path}: {e}") from e
        return None

    def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int:
        off = self._read_from_memory(mq, read_type)
        if off is not None:
            return off
        try:
            table = self._read_local_offset()
        except ValueError as e:
            log.warning("%s", e)
            return -1
        if not table or mq not in table:
            return -1
        self.update_offset(mq, table[mq], False)
        return table[mq]

    async def read_offset_async(self, mq: MessageQueue, read_type: ReadOffsetType) -> int:
        return self.read_offset(mq, read_type)

    def persist_all(self, mqs: set[MessageQueue]) -> None:
        if not mqs:
            return
        with self._lock:
            table = {mq: off for mq, off in self.offset_table.items() if mq in mqs}
        text = encode_offset_table(table)
        with self._file_lock:
            self.store_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.store_path.with_name(self.store_path.name + ".tmp")
            bak = self.store_path.with_name(self.store_path.name + ".bak")
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            if self.store_path.exists():
                os.replace(self.store_path, bak)
            os.replace(tmp, self.store_path)

    async def persist_all_async(self, mqs: set[MessageQueue]) -> None:
        self.persist_all(mqs)

    def persist(self, mq: MessageQueue) -> None:
        pass  # RocketMQ's LocalFileOffsetStore persists everything in persist_all only

    async def persist_async(self, mq: MessageQueue) -> None:
        pass

    def remove_offset(self, mq: MessageQueue) -> None:
        pass  # as RocketMQ: broadcasting consumers keep every queue's offset

    def update_consume_offset_to_broker(self, mq: MessageQueue, offset: int, is_oneway: bool = True) -> None:
        pass
