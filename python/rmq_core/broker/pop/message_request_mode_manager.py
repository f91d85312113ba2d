"""MessageRequestModeManager (5.x ``broker/loadbalance/MessageRequestModeManager.java``): how a group consumes a topic
when its clients let the broker balance (``setClientRebalance(false)``): PULL or POP → ``config/messageRequestMode.json``.

File: ``{"messageRequestModeMap":{"topic":{"group":{"consumerGroup","mode","popShareQueueNum","topic"}}}}`` (fastjson).
Set by SET_MESSAGE_REQUEST_MODE (``mqadmin setConsumeMode``); a pair not set gets PULL (5.x
``defaultMessageRequestMode``) with popShareQueueNum -1 (``defaultPopShareQueueNum``), a retry topic always PULL.
Not thread-safe: owned by the broker's event loop.
"""

from __future__ import annotations

import os
from typing import Any

from rmq_core.broker.config_manager import ConfigManager
from rmq_core.remoting import fastjson

MESSAGE_REQUEST_MODE_FILE = "messageRequestMode.json"
MODE_PULL, MODE_POP = "PULL", "POP"
DEFAULT_POP_SHARE_QUEUE_NUM = -1


class MessageRequestModeManager(ConfigManager):
    """``MessageRequestModeManager(config_dir)``: ``get(topic, group)`` → the stored body or None; ``set(body)``."""

    def __init__(self, config_dir: str) -> None:
        super().__init__(os.path.join(os.fspath(config_dir), MESSAGE_REQUEST_MODE_FILE))
        self.table: dict[str, dict[str, dict[str, Any]]] = {}

    def get(self, topic: str, group: str) -> dict[str, Any] | None:
        return self.table.get(topic, {}).get(group)

    def set(self, topic: str, group: str, mode: str, pop_share_queue_num: int) -> None:
        self.table.setdefault(topic, {})[group] = {
            "consumerGroup": group,
            "mode": mode,
            "popShareQueueNum": pop_share_queue_num,
            "topic": topic,
        }

    def encode(self, pretty: bool = False) -> str:
        return fastjson.dumps({"messageRequestModeMap": self.table}, pretty=pretty)

    def decode(self, text: str) -> None:
        doc = fastjson.loads(text, int_keys=False)
        table = doc.get("messageRequestModeMap") or {}
        if not isinstance(table, dict):
            raise ValueError("messageRequestModeMap is not a map")
        self.table = {str(t): {str(g): dict(b) for g, b in (gs or {}).items()} for t, gs in table.items()}
