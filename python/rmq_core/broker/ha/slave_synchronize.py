"""SlaveSynchronize: a slave copies its master's configs (4.9 ``SlaveSynchronize``), at start and every 10 s.

- topics (GET_ALL_TOPIC_CONFIG): when the master's dataVersion differs, the table is replaced by the master's and
  the version taken, then persisted (and the name servers get the new topics at the next registration, asked now);
- consumer offsets (GET_ALL_CONSUMER_OFFSET): the master's entries overwrite the slave's (4.9 ``putAll``), persisted;
- delay offsets (GET_ALL_DELAY_OFFSET): the master's table written to delayOffset.json (a slave delivers nothing, its
  ScheduleMessageService does not run);
- subscription groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG): as topics.

Invariants: a failure of one copy (the master down, a body that does not decode) is logged and leaves that config as
it was; the others still run. Nothing here runs on a master.

Thread-safety: the broker's loop only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from rmq_core.common.data_version import DataVersion
from rmq_core.remoting import fastjson
from rmq_core.remoting.codes import RequestCode

if TYPE_CHECKING:
    from rmq_core.broker.broker_outer_api import BrokerOuterAPI
    from rmq_core.broker.consumer_offset_manager import ConsumerOffsetManager
    from rmq_core.broker.schedule.schedule_message_service import ScheduleMessageService
    from rmq_core.broker.subscription_group_manager import SubscriptionGroupManager
    from rmq_core.broker.topic_config_manager import TopicConfigManager

log = logging.getLogger(__name__)

SYNC_INTERVAL_S = 10.0


def _replace_table(table: dict[str, Any], decode: Callable[[str], object], text: str) -> None:
    """4.9's clear + putAll of the master's table; the old entries come back if ``text`` does not decode."""
    old = dict(table)
    table.clear()
    try:
        decode(text)
    except Exception:
        table.clear()
        table.update(old)
        raise


class _OffsetTable(Protocol):
    offset_table: Any

    def decode(self, text: str) -> object: ...


def _decode_offsets(holder: _OffsetTable, text: str) -> Any:
    """``holder.decode(text)`` (it replaces ``holder.offset_table``); the table it had comes back if ``text`` does not
    decode. Returns that table."""
    mine = holder.offset_table
    try:
        holder.decode(text)
    except Exception:
        holder.offset_table = mine
        raise
    return mine


def _data_version(text: str) -> DataVersion | None:
    doc = fastjson.loads(text, int_keys=False)
    raw = doc.get("dataVersion") if isinstance(doc, dict) else None
    return DataVersion.from_json_dict(raw) if isinstance(raw, dict) else None


class SlaveSynchronize:
    def __init__(
        self,
        outer_api: BrokerOuterAPI,
        topic_config_manager: TopicConfigManager,
        consumer_offset_manager: ConsumerOffsetManager,
        schedule_message_service: ScheduleMessageService,
        subscription_group_manager: SubscriptionGroupManager,
        master_addr: Callable[[], str | None],
        on_topics_changed: Callable[[], None] = lambda: None,
    ) -> None:
        self.outer_api = outer_api
        self.topic_config_manager = topic_config_manager
        self.consumer_offset_manager = consumer_offset_manager
        self.schedule_message_service = schedule_message_service
        self.subscription_group_manager = subscription_group_manager
        self.master_addr = master_addr
        self.on_topics_changed = on_topics_changed
        self.rounds = 0  # completed syncAll rounds (tests wait on it)

    async def sync_all(self) -> None:
        addr = self.master_addr()
        if not addr:
            return
        for what, fn in (
            ("topic config", self.sync_topic_config),
            ("consumer offset", self.sync_consumer_offset),
            ("delay offset", self.sync_delay_offset),
            ("subscription group config", self.sync_subscription_group_config),
        ):
            try:
                await fn(addr)
            except Exception as e:
                log.warning("SyncSlave: copying the %s from master %s failed: %s", what, addr, e)
        self.rounds += 1

    async def sync_topic_config(self, addr: str) -> None:
        text = await self.outer_api.get_master_config_text(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        mgr = self.topic_config_manager
        version = _data_version(text)
        if version is not None and version == mgr.data_version:
            return
        _replace_table(mgr.topic_config_table, mgr.decode, text)
        mgr.persist()
        log.info("Update slave topic config from master, %s", addr)
        self.on_topics_changed()

    async def sync_consumer_offset(self, addr: str) -> None:
        text = await self.outer_api.get_master_config_text(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        mgr = self.consumer_offset_manager
        mine = _decode_offsets(mgr, text)
        merged = dict(mine)
        merged.update(mgr.offset_table)
        mgr.offset_table = merged
        mgr.persist()

    async def sync_delay_offset(self, addr: str) -> None:
        text = await self.outer_api.get_master_config_text(addr, RequestCode.GET_ALL_DELAY_OFFSET)
        svc = self.schedule_message_service
        _decode_offsets(svc, text)
        svc.persist()

    async def sync_subscription_group_config(self, addr: str) -> None:
        text = await self.outer_api.get_master_config_text(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        mgr = self.subscription_group_manager
        version = _data_version(text)
        if version is not None and version == mgr.data_version:
            return
        _replace_table(mgr.subscription_group_table, mgr.decode, text)
        mgr.persist()
        log.info("Update slave Subscription Group from master, %s", addr)
