"""ConsumerManager and ConsumerGroupInfo (br/client/ConsumerManager.java, ConsumerGroupInfo.java, 4.9 semantics): which
connections belong to which consumer group, and what each group subscribes to, as learnt from heartbeats.

Owns the group table and its events (CHANGE, REGISTER, UNREGISTER to ``on_event(event, group, *args)``) on
register, unregister, a closed connection and the 120 s inactivity scan (which, unlike Java, also emits them), and
5.x's compensation table: the consume type and subscriptions of groups that consume without heartbeats (POP), read
by ``find_subscription_data`` (consume stats) and ``get_consumer_group_info(..., from_compensation_table=True)``.
Invariant: an exception in ``on_event`` is logged and does not undo the table change.
Not thread-safe: owned by the broker's event loop.
Details (the rules): docs/BROKER_DESIGN.md, 'Consumer groups'.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any

from rmq_core.broker.client.client_channel_info import ClientChannelInfo
from rmq_core.common.log_text import clip
from rmq_core.filter.subscription_data import SubscriptionData
from rmq_core.remoting.body.heartbeat import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    parse_enum,
)

log = logging.getLogger(__name__)

CHANNEL_EXPIRED_TIMEOUT_MS = 120_000
SUBSCRIPTION_EXPIRED_TIMEOUT_MS = 600_000  # BrokerConfig.subscriptionExpiredTimeout: a compensated topic's life


class ConsumerGroupEvent(str, Enum):
    CHANGE = "CHANGE"  # some consumers of the group changed; args: (channels,)
    UNREGISTER = "UNREGISTER"  # the group has no consumer left; args: ()
    REGISTER = "REGISTER"  # a heartbeat registered the group; args: (sub_list,)


OnEvent = Callable[..., Any]


class ConsumerGroupInfo:
    def __init__(
        self,
        group_name: str,
        consume_type: ConsumeType | str = ConsumeType.CONSUME_PASSIVELY,
        message_model: MessageModel | str = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere | str = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        last_update_timestamp: int = 0,
    ) -> None:
        self.group_name = group_name
        self.subscription_table: dict[str, SubscriptionData] = {}
        self.channel_info_table: dict[Any, ClientChannelInfo] = {}
        self.consume_type = parse_enum(ConsumeType, consume_type, "consumeType")
        self.message_model = parse_enum(MessageModel, message_model, "messageModel")
        self.consume_from_where = parse_enum(ConsumeFromWhere, consume_from_where, "consumeFromWhere")
        self.last_update_timestamp = last_update_timestamp

    def __repr__(self) -> str:
        return (
            f"ConsumerGroupInfo({self.group_name!r}, {self.consume_type.name}, {self.message_model.name}, "
            f"clients={self.get_all_client_ids()}, topics={sorted(self.subscription_table)})"
        )

    def find_channel(self, client_id: str) -> ClientChannelInfo | None:
        for info in self.channel_info_table.values():
            if info.client_id == client_id:
                return info
        return None

    def get_all_channels(self) -> list[Any]:
        return list(self.channel_info_table)

    def get_all_client_ids(self) -> list[str]:
        return [info.client_id for info in self.channel_info_table.values()]

    def get_subscribe_topics(self) -> set[str]:
        return set(self.subscription_table)

    def find_subscription_data(self, topic: str) -> SubscriptionData | None:
        return self.subscription_table.get(topic)

    def unregister_channel(self, info: ClientChannelInfo) -> bool:
        old = self.channel_info_table.pop(info.conn, None)
        if old is not None:
            log.info("unregister a consumer[%s] from consumerGroupInfo %r", self.group_name, old)
        return old is not None

    def do_channel_close_event(self, conn: Any) -> ClientChannelInfo | None:
        info = self.channel_info_table.pop(conn, None)
        if info is not None:
            log.warning("remove closed channel %r from consumer group %s", info, self.group_name)
        return info

    def update_channel(
        self,
        info_new: ClientChannelInfo,
        consume_type: ConsumeType | str,
        message_model: MessageModel | str,
        consume_from_where: ConsumeFromWhere | str,
    ) -> bool:
        updated = False
        self.consume_type = parse_enum(ConsumeType, consume_type, "consumeType")
        self.message_model = parse_enum(MessageModel, message_model, "messageModel")
        self.consume_from_where = parse_enum(ConsumeFromWhere, consume_from_where, "consumeFromWhere")
        info_old = self.channel_info_table.get(info_new.conn)
        if info_old is None:
            self.channel_info_table[info_new.conn] = info_new
            log.info(
                "new consumer connected, group: %s %s %s channel: %r",
                self.group_name,
                self.consume_type.name,
                self.message_model.name,
                info_new,
            )
            updated = True
            info_old = info_new
        elif info_old.client_id != info_new.client_id:
            log.error(
                "[BUG] consumer channel exists in broker, but clientId differs. GROUP: %s OLD: %r NEW: %r",
                self.group_name,
                info_old,
                info_new,
            )
            self.channel_info_table[info_new.conn] = info_new
        self.last_update_timestamp = info_new.last_update_timestamp
        info_old.last_update_timestamp = info_new.last_update_timestamp
        return updated

    def update_subscription(self, sub_list: Iterable[SubscriptionData], now_ms: int | None = None) -> bool:
        subs = list(sub_list)
        updated = False
        for sub in subs:
            old = self.subscription_table.get(sub.topic)
            if old is None:
                self.subscription_table[sub.topic] = sub
                log.info("subscription changed, add new topic, group: %s %s", self.group_name, clip(sub))
                updated = True
            elif sub.sub_version > old.sub_version:
                if self.consume_type == ConsumeType.CONSUME_PASSIVELY:
                    log.info("subscription changed, group: %s OLD: %s NEW: %s", self.group_name, clip(old), clip(sub))
                self.subscription_table[sub.topic] = sub
        wanted = {s.topic for s in subs}
        for topic in [t for t in self.subscription_table if t not in wanted]:
            log.warning("subscription changed, group: %s remove topic %s", self.group_name, topic)
            del self.subscription_table[topic]
            updated = True
        if now_ms is not None:
            self.last_update_timestamp = now_ms
        return updated


class ConsumerManager:
    def __init__(self, on_event: OnEvent | None = None, expired_ms: int = CHANNEL_EXPIRED_TIMEOUT_MS) -> None:
        self.consumer_table: dict[str, ConsumerGroupInfo] = {}
        self.consumer_compensation_table: dict[str, ConsumerGroupInfo] = {}
        self._on_event = on_event
        self.expired_ms = expired_ms

    def _emit(self, event: ConsumerGroupEvent, group: str, *args: Any) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(event, group, *args)
        except Exception:  # a listener failure must not corrupt the tables
            log.exception("consumer ids change listener failed on %s for group %s", event.name, group)

    def get_consumer_group_info(self, group: str, from_compensation_table: bool = False) -> ConsumerGroupInfo | None:
        info = self.consumer_table.get(group)
        if info is None and from_compensation_table:
            info = self.consumer_compensation_table.get(group)
        return info

    def compensate_basic_consumer_info(
        self, group: str, consume_type: ConsumeType, message_model: MessageModel = MessageModel.CLUSTERING
    ) -> None:
        """A group that consumes without heartbeats (POP): its consume type, as 5.x's ``compensateBasicConsumerInfo``."""
        info = self.consumer_compensation_table.get(group)
        if info is None:
            info = self.consumer_compensation_table[group] = ConsumerGroupInfo(group)
        info.consume_type = consume_type
        info.message_model = message_model

    def compensate_subscribe_data(self, group: str, topic: str, sub: SubscriptionData) -> None:
        """What such a group reads of ``topic``, as 5.x's ``compensateSubscribeData``."""
        info = self.consumer_compensation_table.get(group)
        if info is None:
            info = self.consumer_compensation_table[group] = ConsumerGroupInfo(group)
        info.subscription_table[topic] = sub

    def find_channel(self, group: str, client_id: str) -> ClientChannelInfo | None:
        info = self.consumer_table.get(group)
        return info.find_channel(client_id) if info is not None else None

    def find_subscription_data(
        self, group: str, topic: str, from_compensation_table: bool = True
    ) -> SubscriptionData | None:
        info = self.consumer_table.get(group)
        sub = info.find_subscription_data(topic) if info is not None else None
        if sub is None and from_compensation_table:
            comp = self.consumer_compensation_table.get(group)
            sub = comp.find_subscription_data(topic) if comp is not None else None
        return sub

    def find_subscription_data_count(self, group: str) -> int:
        info = self.consumer_table.get(group)
        return len(info.subscription_table) if info is not None else 0

    def query_topic_consume_by_who(self, topic: str) -> set[str]:
        return {g for g, info in self.consumer_table.items() if topic in info.subscription_table}

    def register_consumer(
        self,
        group: str,
        client_channel_info: ClientChannelInfo,
        consume_type: ConsumeType | str,
        message_model: MessageModel | str,
        consume_from_where: ConsumeFromWhere | str,
        sub_list: Iterable[SubscriptionData],
        is_notify_consumer_ids_changed: bool,
    ) -> bool:
        subs = list(sub_list)
        info = self.consumer_table.get(group)
        if info is None:
            info = ConsumerGroupInfo(
                group, consume_type, message_model, consume_from_where, client_channel_info.last_update_timestamp
            )
            self.consumer_table[group] = info
        r1 = info.update_channel(client_channel_info, consume_type, message_model, consume_from_where)
        r2 = info.update_subscription(subs)
        if (r1 or r2) and is_notify_consumer_ids_changed:
            self._emit(ConsumerGroupEvent.CHANGE, group, info.get_all_channels())
        self._emit(ConsumerGroupEvent.REGISTER, group, subs)
        return r1 or r2

    def unregister_consumer(
        self, group: str, client_channel_info: ClientChannelInfo, is_notify_consumer_ids_changed: bool
    ) -> None:
        info = self.consumer_table.get(group)
        if info is None:
            return
        info.unregister_channel(client_channel_info)
        if not info.channel_info_table and self.consumer_table.pop(group, None) is not None:
            log.info("unregister consumer ok, no any connection, and remove consumer group, %s", group)
            self._emit(ConsumerGroupEvent.UNREGISTER, group)
        if is_notify_consumer_ids_changed:
            self._emit(ConsumerGroupEvent.CHANGE, group, info.get_all_channels())

    def do_channel_close_event(self, conn: Any) -> bool:
        removed = False
        for group, info in list(self.consumer_table.items()):
            if info.do_channel_close_event(conn) is None:
                continue
            removed = True
            if not info.channel_info_table and self.consumer_table.pop(group, None) is not None:
                log.info("unregister consumer ok, no any connection, and remove consumer group, %s", group)
                self._emit(ConsumerGroupEvent.UNREGISTER, group)
            self._emit(ConsumerGroupEvent.CHANGE, group, info.get_all_channels())
        return removed

    def remove_expire_consumer_group_info(self, now_ms: int, expired_ms: int = SUBSCRIPTION_EXPIRED_TIMEOUT_MS) -> None:
        """Forget compensated subscriptions not refreshed (by a pop) for ``expired_ms``, and groups left with none."""
        for group, info in list(self.consumer_compensation_table.items()):
            table = info.subscription_table
            for topic in [t for t, sub in table.items() if now_ms - sub.sub_version > expired_ms]:
                del table[topic]
            if not table:
                del self.consumer_compensation_table[group]

    def scan_not_active_channel(self, now_ms: int, expired_ms: int | None = None) -> list[ClientChannelInfo]:
        """Drop (and close) connections whose last heartbeat is more than ``expired_ms`` before ``now_ms``;
        returns what was removed."""
        limit = self.expired_ms if expired_ms is None else expired_ms
        removed: list[ClientChannelInfo] = []
        for group, info in list(self.consumer_table.items()):
            expired = [ci for ci in info.channel_info_table.values() if now_ms - ci.last_update_timestamp > limit]
            if not expired:
                continue
            for ci in expired:
                log.warning(
                    "SCAN: remove expired channel from ConsumerManager consumerTable. channel=%r, consumerGroup=%s",
                    ci,
                    group,
                )
                del info.channel_info_table[ci.conn]
                _close(ci.conn)
                removed.append(ci)
            if not info.channel_info_table:
                log.warning(
                    "SCAN: remove expired channel from ConsumerManager consumerTable, all clear, consumerGroup=%s",
                    group,
                )
                del self.consumer_table[group]
                self._emit(ConsumerGroupEvent.UNREGISTER, group)
            else:
                self._emit(ConsumerGroupEvent.CHANGE, group, info.get_all_channels())
        return removed


def _close(conn: Any) -> None:
    close = getattr(conn, "close", None)
    if callable(close):
        try:
            close()
        except Exception:
            log.exception("closing expired channel %r failed", conn)
