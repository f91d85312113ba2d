"""The transactional sink's journal: what the driver decided to commit, kept so that a driver that dies mid-commit, or
a streaming query restarted from its checkpoint, ends every half message exactly as decided the first time.

Owns, per batch of one sink, the committed task attempts and their handles (recorded BEFORE the first
END_TRANSACTION, marked ended once every END was answered): ``decide`` (COMMIT / ROLLBACK / UNKNOW for a check-back),
``pending()`` (re-committed at restart), and no second commit of a re-run batch.
Format: a directory: ``sink.id`` and one ``batch-<id>.json`` per batch (``{"batch","tasks","handles","ended"}``),
each written to a temporary file, fsynced and renamed over (never torn); ``directory=None`` keeps them in memory.
Thread-safety: one lock around the records; the check-back (a client thread) and the commit (the driver) share it.
Details: docs/SPARK_DESIGN.md, 'The sink's transaction journal'.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from dataclasses import dataclass
from typing import Any

PROPERTY_SINK_TXN = "RMQ_SPARK_SINK_TXN"
KEEP_ENDED = 100
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"
UNKNOW = "UNKNOW"  # RocketMQ's spelling of the state


@dataclass(frozen=True)
class JournalRecord:
    batch: str
    tasks: frozenset[str]
    handles: tuple[tuple[str, int, int, str], ...]
    ended: bool


def sink_transaction_tag(sink_id: str, batch: str, task: str) -> str:
    for part in (sink_id, batch, task):
        if "|" in part:
            raise ValueError(f"a sink transaction tag part may not hold '|': {part!r}")
    return f"{sink_id}|{batch}|{task}"


def parse_sink_transaction_tag(tag: str | None) -> tuple[str, str, str] | None:
    parts = (tag or "").split("|")
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 and all(parts) else None


class SinkTransactionJournal:
    def __init__(self, directory: str | None, sink_id: str | None = None) -> None:
        """``sink_id``: for a journal in memory (``directory=None``) the id to use (a new one when None)."""
        self.directory = directory
        self._lock = threading.Lock()
        self._records: dict[str, JournalRecord] = {}
        if directory is None:
            self.sink_id = sink_id or uuid.uuid4().hex
            return
        os.makedirs(directory, exist_ok=True)
        id_file = os.path.join(directory, "sink.id")
        if not os.path.exists(id_file):
            self._write_atomically(id_file, uuid.uuid4().hex.encode())
        with open(id_file, encoding="ascii") as f:
            self.sink_id = f.read().strip()
        if not self.sink_id:
            raise ValueError(f"the sink journal's id file {id_file} is empty")
        paths = [
            os.path.join(directory, n) for n in os.listdir(directory) if n.startswith("batch-") and n.endswith(".json")
        ]
        for path in sorted(paths, key=os.path.getmtime):  # oldest first, as they were written
            rec = self._load(path)
            self._records[rec.batch] = rec

    # --- reading -----------------------------------------------------------------------------------------------
    def get(self, batch: str) -> JournalRecord | None:
        with self._lock:
            return self._records.get(batch)

    def pending(self) -> list[JournalRecord]:
        with self._lock:
            return [r for r in self._records.values() if not r.ended]

    def decide(self, tag: str | None) -> str:
        """The check-back's answer for a half message carrying ``tag`` (``PROPERTY_SINK_TXN``)."""
        parsed = parse_sink_transaction_tag(tag)
        if parsed is None or parsed[0] != self.sink_id:
            return UNKNOW  # not this sink's: another member of the group may know
        _sink, batch, task = parsed
        rec = self.get(batch)
        if rec is None:
            return UNKNOW
        return COMMIT if task in rec.tasks else ROLLBACK

    # --- writing -----------------------------------------------------------------------------------------------
    def record(
        self, batch: str, tasks: frozenset[str], handles: tuple[tuple[str, int, int, str], ...]
    ) -> JournalRecord:
        """Record the decision to commit ``tasks`` of ``batch`` (durable before it returns)."""
        rec = JournalRecord(batch, tasks, handles, ended=False)
        self._store(rec)
        return rec

    def mark_ended(self, batch: str) -> None:
        with self._lock:
            rec = self._records[batch]
        self._store(JournalRecord(rec.batch, rec.tasks, rec.handles, ended=True))
        self._prune()

    def _prune(self) -> None:
        with self._lock:
            ended = [b for b, r in self._records.items() if r.ended]
            for batch in ended[: max(0, len(ended) - KEEP_ENDED)]:
                del self._records[batch]
                if self.directory is not None:
                    try:
                        os.unlink(os.path.join(self.directory, f"batch-{_file_safe(batch)}.json"))
                    except FileNotFoundError:
                        pass

    def _store(self, rec: JournalRecord) -> None:
        with self._lock:
            if self.directory is not None:
                body = {
                    "batch": rec.batch,
                    "tasks": sorted(rec.tasks),
                    "handles": [list(h) for h in rec.handles],
                    "ended": rec.ended,
                }
                path = os.path.join(self.directory, f"batch-{_file_safe(rec.batch)}.json")
                self._write_atomically(path, json.dumps(body).encode())
            self._records.pop(rec.batch, None)  # re-inserted last: the dict keeps the order of writes
            self._records[rec.batch] = rec

    @staticmethod
    def _write_atomically(path: str, data: bytes) -> None:
        tmp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    @staticmethod
    def _load(path: str) -> JournalRecord:
        try:
            with open(path, encoding="utf-8") as f:
                d: Any = json.load(f)
            return JournalRecord(
                str(d["batch"]),
                frozenset(str(t) for t in d["tasks"]),
                tuple((str(a), int(o), int(q), str(m)) for a, o, q, m in d["handles"]),
                bool(d["ended"]),
            )
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"the sink journal record {path} is unreadable: {e}") from e


def _file_safe(batch: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in batch)
