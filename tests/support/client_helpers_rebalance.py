"""Helpers for the rebalance / orderly / pull-consumer tests: messages put straight into a broker's store (no
producer needed), and the broker-side view of consumer ids and queue locks.

Uses tests/support/client_helpers_e2e.py's in-process ``cluster`` (name server + brokers). Thread-safety: test thread only;
broker state is read on the broker's own loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

from rmq_core.broker import Broker
from rmq_core.message import Message, MessageQueue


def put(
    broker: Broker, topic: str, queue_id: int, body: bytes, tags: str | None = None, keys: str | None = None
) -> int:
    """Store one message in ``topic``/``queue_id``; returns its queue offset."""
    r = broker.message_store.put_message(Message(topic, body, tags=tags, keys=keys), queue_id)
    assert r.ok, r
    return int(r.queue_offset)


def on_broker_loop(broker: Broker, fn: Any) -> Any:
    async def run() -> Any:
        return fn()

    return asyncio.run_coroutine_threadsafe(run(), broker.controller.loop).result(10)


def broker_lock_owner(broker: Broker, group: str, mq: MessageQueue) -> str | None:
    """The client id holding ``mq`` locked for ``group`` on ``broker`` (None when unlocked or expired)."""
    mgr = broker.controller.rebalance_lock_manager

    def read() -> str | None:
        for cid in _client_ids(broker, group):
            if mgr.is_locked(group, mq, cid):
                return cid
        return None

    return on_broker_loop(broker, read)


def consumer_ids(broker: Broker, group: str) -> list[str]:
    """The client ids the broker lists for ``group`` (GET_CONSUMER_LIST_BY_GROUP's answer)."""
    return on_broker_loop(broker, lambda: _client_ids(broker, group))


def _client_ids(broker: Broker, group: str) -> list[str]:
    info = broker.controller.consumer_manager.get_consumer_group_info(group)
    return list(info.get_all_client_ids()) if info is not None else []
