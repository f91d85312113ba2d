"""ConsumerOffsetManager (br/offset/ConsumerOffsetManager.java): each group's next offset to consume per queue →
``<config_dir>/consumerOffset.json``.

Format: as RocketMQ 4.9 writes it (fastjson PrettyFormat, tab-indented, ``{"offsetTable":{"topic@group":{0:5280}}}``
with unquoted queue-id keys); 5.x's ``dataVersion``/``groupTopicMap`` are accepted and ignored. Keys are
``topic@group``; ``query_offset`` answers −1 when nothing is stored.
Not thread-safe: owned by the broker's event loop (``persist`` may also run at shutdown).
Details: docs/BROKER_DESIGN.md, 'Consumer offsets file'.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from rmq_core.broker.config_manager import ConfigDecodeError, ConfigManager
from rmq_core.common.mix_all import TOPIC_GROUP_SEPARATOR
from rmq_core.remoting import fastjson

log = logging.getLogger(__name__)

CONSUMER_OFFSET_FILE = "consumerOffset.json"


def _split_key(key: str) -> tuple[str, str] | None:
    parts = key.split(TOPIC_GROUP_SEPARATOR)
    return (parts[0], parts[1]) if len(parts) == 2 else None


class ConsumerOffsetManager(ConfigManager):
    def __init__(self, config_dir: str) -> None:
        super().__init__(os.path.join(os.fspath(config_dir), CONSUMER_OFFSET_FILE))
        self.offset_table: dict[str, dict[int, int]] = {}

    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = topic + TOPIC_GROUP_SEPARATOR + group
        table = self.offset_table.setdefault(key, {})
        old = table.get(queue_id)
        table[int(queue_id)] = int(offset)
        if old is not None and offset < old:
            log.warning(
                "[NOTIFYME]update consumer offset less than store. clientHost=%s, key=%s, queueId=%d, "
                "requestOffset=%d, storeOffset=%d",
                client_host,
                key,
                queue_id,
                offset,
                old,
            )

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        table = self.offset_table.get(topic + TOPIC_GROUP_SEPARATOR + group)
        if table is None:
            return -1
        return table.get(queue_id, -1)

    def query_offsets(self, group: str, topic: str) -> dict[int, int] | None:
        return self.offset_table.get(topic + TOPIC_GROUP_SEPARATOR + group)

    def which_topic_by_consumer(self, group: str) -> set[str]:
        out = set()
        for key in self.offset_table:
            tg = _split_key(key)
            if tg is not None and tg[1] == group:
                out.add(tg[0])
        return out

    def which_group_by_topic(self, topic: str) -> set[str]:
        out = set()
        for key in self.offset_table:
            tg = _split_key(key)
            if tg is not None and tg[0] == topic:
                out.add(tg[1])
        return out

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> None:
        src = self.offset_table.get(topic + TOPIC_GROUP_SEPARATOR + src_group)
        if src is not None:
            self.offset_table[topic + TOPIC_GROUP_SEPARATOR + dest_group] = dict(src)

    def remove_offset(self, group: str) -> list[str]:
        """Forget every offset of ``group`` (all topics); returns the removed ``topic@group`` keys."""
        gone = [k for k in self.offset_table if (tg := _split_key(k)) is not None and tg[1] == group]
        for k in gone:
            del self.offset_table[k]
            log.warning("clean group offset %s", k)
        return gone

    def clean_offset_by_topic(self, topic: str) -> list[str]:
        gone = [k for k in self.offset_table if (tg := _split_key(k)) is not None and tg[0] == topic]
        for k in gone:
            del self.offset_table[k]
            log.warning("clean topic offset %s", k)
        return gone

    def encode(self, pretty: bool = False) -> str:
        """fastjson's text byte for byte: in PrettyFormat a String-keyed map puts each entry on its own line, an
        Integer-keyed map does not (``{0:5280,1:5312`` then the closing brace on its own, indented, line)."""
        if not pretty:
            return fastjson.dumps({"offsetTable": self.offset_table}, unquoted_int_keys=True)
        if not self.offset_table:
            return '{\n\t"offsetTable":{}\n}'
        entries = []
        for key, queues in self.offset_table.items():
            inner = ",".join(f"{q}:{o}" for q, o in queues.items())
            entries.append(f"\n\t\t{json.dumps(key, ensure_ascii=False)}:{{{inner}\n\t\t}}")
        return '{\n\t"offsetTable":{' + ",".join(entries) + "\n\t}\n}"

    def decode(self, text: str) -> None:
        doc = fastjson.loads(text, int_keys=False)
        if not isinstance(doc, dict):
            raise ConfigDecodeError(f"{self.config_file_path}: the document must be a JSON object")
        raw = doc.get("offsetTable") or {}
        if not isinstance(raw, dict):
            raise ConfigDecodeError("offsetTable must be an object")
        table: dict[str, dict[int, int]] = {}
        for key, queues in raw.items():
            if not isinstance(queues, dict):
                raise ConfigDecodeError(f"offsetTable[{key!r}] must be an object of queueId: offset")
            parsed: dict[int, int] = {}
            for qid, off in queues.items():
                if isinstance(off, bool) or not isinstance(off, int):
                    raise ConfigDecodeError(f"offsetTable[{key!r}][{qid}]: offset {off!r} is not an integer")
                try:
                    parsed[int(qid)] = off
                except ValueError:
                    raise ConfigDecodeError(f"offsetTable[{key!r}]: queue id {qid!r} is not an integer") from None
            table[str(key)] = parsed
        self.offset_table = table

    def to_json_dict(self) -> dict[str, Any]:
        return {"offsetTable": {k: dict(v) for k, v in self.offset_table.items()}}
