"""KVConfigManager (namesrv/kvconfig/KVConfigManager.java): the name server's namespaced key/value settings
(PUT_KV_CONFIG, GET_KV_CONFIG, DELETE_KV_CONFIG, GET_KVLIST_BY_NAMESPACE; ``ORDER_TOPIC_CONFIG`` is the namespace of
the global order-topic settings brokers receive when they register).

File (``kv_config_path``; None keeps the table in memory only): ``{"configTable":{"ns":{"k":"v"}}}`` as fastjson
writes KVConfigSerializeWrapper, rewritten after every put or delete (4.9 persists on each change).

Invariants: a namespace with no key left is kept empty (as 4.9); values are strings.
Thread-safety: none; runs on the name server's event loop.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from rmq_core.broker.config_manager import ConfigDecodeError, ConfigManager
from rmq_core.common.log_text import clip
from rmq_core.remoting import fastjson

log = logging.getLogger(__name__)

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # NamesrvUtil


class KVConfigManager(ConfigManager):
    """``KVConfigManager(kv_config_path=None)``: ``put``/``get``/``delete``/``get_kv_list_by_namespace``."""

    def __init__(self, kv_config_path: str | None = None) -> None:
        super().__init__(kv_config_path or os.devnull)
        self.in_memory = kv_config_path is None
        self.config_table: dict[str, dict[str, str]] = {}

    def put(self, namespace: str, key: str, value: str) -> None:
        table = self.config_table.setdefault(namespace, {})
        old = table.get(key)
        table[key] = value
        if old is None:
            log.info(
                "putKVConfig create new config item, Namespace: %s Key: %s Value: %s",
                clip(namespace),
                clip(key),
                clip(value),
            )
        else:
            log.info(
                "putKVConfig update config item, Namespace: %s Key: %s Value: %s",
                clip(namespace),
                clip(key),
                clip(value),
            )
        self.persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self.config_table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        table = self.config_table.get(namespace)
        if table is not None and table.pop(key, None) is not None:
            log.info("deleteKVConfig delete a config item, Namespace: %s Key: %s", clip(namespace), clip(key))
        self.persist()

    def get_kv_list_by_namespace(self, namespace: str) -> dict[str, str] | None:
        table = self.config_table.get(namespace)
        return dict(table) if table is not None else None

    # --- ConfigManager ----------------------------------------------------------------------------------------
    def persist(self) -> bool:
        return True if self.in_memory else super().persist()

    def load(self) -> bool:
        return True if self.in_memory else super().load()

    def encode(self, pretty: bool = False) -> str:
        return fastjson.dumps({"configTable": self.config_table}, pretty=pretty)

    def decode(self, text: str) -> None:
        doc: Any = fastjson.loads(text, int_keys=False)
        table = doc.get("configTable") if isinstance(doc, dict) else None
        if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
            raise ConfigDecodeError(f"{self.config_file_path}: configTable must map namespaces to objects")
        self.config_table = {str(ns): {str(k): str(v) for k, v in kv.items()} for ns, kv in table.items()}
