"""DefaultConsumerIdsChangeListener: what the broker does when a consumer group's membership or subscriptions change
(``br/client/DefaultConsumerIdsChangeListener.java``, ``br/client/net/Broker2Client#notifyConsumerIdsChanged``).

Owns the reactions to ``ConsumerGroupEvent``: CHANGE → oneway NOTIFY_CONSUMER_IDS_CHANGED (40) to every channel when
``notify_consumer_ids_changed_enable``; UNREGISTER → the group's SQL92 filter data marked dead; REGISTER → SQL92
subscriptions (re-)registered, filters on topics no longer subscribed marked dead.
Invariants: a failed send to one channel (closed, broken) is logged and never stops the others; nothing here raises
into the ConsumerManager.
Thread-safety: called on the broker's event loop (heartbeats, channel-close callbacks and the scan task all run
there); ``Connection.send`` must only be called from that loop.
Details: docs/BROKER_DESIGN.md, 'Consumer group events'.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rmq_core.remoting.codes import RequestCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    NotifyConsumerIdsChangedRequestHeader,
    encode_header,
)

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.consumer_filter_manager import ConsumerFilterManager
    from rmq_core.remoting.connection import Connection

log = logging.getLogger(__name__)


def _event_name(event: Any) -> str:
    return str(getattr(event, "name", event))


def _as_connection(channel: Any) -> Connection:
    """The ConsumerManager hands out connections; accept ClientChannelInfo too (its ``conn``)."""
    return getattr(channel, "conn", channel)


def notify_consumer_ids_changed(group: str, channels: Iterable[Any]) -> int:
    """Send NOTIFY_CONSUMER_IDS_CHANGED (oneway) for ``group`` to every channel; returns how many were sent."""
    if group is None:
        log.error("notifyConsumerIdsChanged consumerGroup is null")
        return 0
    ext = encode_header(NotifyConsumerIdsChangedRequestHeader(consumerGroup=group))
    sent = 0
    for channel in channels:
        conn = _as_connection(channel)
        request = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, ext).mark_oneway()
        try:
            conn.send(request)
            sent += 1
        except (ConnectionError, OSError, RuntimeError) as e:
            log.error(
                "notifyConsumerIdsChanged exception. group=%s, channel=%s, error=%s",
                group,
                getattr(conn, "remote_address", "?"),
                e,
            )
    return sent


class DefaultConsumerIdsChangeListener:
    """``DefaultConsumerIdsChangeListener(broker_config, consumer_filter_manager)`` is the ConsumerManager's
    ``on_event(event, group, *args)``."""

    def __init__(self, broker_config: BrokerConfig, consumer_filter_manager: ConsumerFilterManager) -> None:
        self.broker_config = broker_config
        self.consumer_filter_manager = consumer_filter_manager

    def __call__(self, event: Any, group: str, *args: Any) -> None:
        self.handle(event, group, *args)

    def handle(self, event: Any, group: str, *args: Any) -> None:
        if event is None:
            return
        name = _event_name(event)
        try:
            if name == "CHANGE":
                if not args or args[0] is None:
                    return
                if self.broker_config.notify_consumer_ids_changed_enable:
                    notify_consumer_ids_changed(group, list(args[0]))
            elif name == "UNREGISTER":
                self.consumer_filter_manager.unregister(group)
            elif name == "REGISTER":
                if not args or args[0] is None:
                    return
                self._register_filters(group, args[0])
            elif name in ("CLIENT_REGISTER", "CLIENT_UNREGISTER"):  # 5.x events with no broker-side action
                return
            else:
                log.error("unknown consumer group event %r for group %s", event, group)
        except Exception:  # a listener failure must not break the heartbeat or channel-close path
            log.exception("consumer ids change listener failed on %s for group %s", name, group)

    def _register_filters(self, group: str, subscriptions: Iterable[Any]) -> None:
        """Java's ConsumerFilterManager.register(group, subList): each SQL92 subscription is (re-)registered (a bad
        expression is logged; pulls then answer FILTER_DATA_NOT_EXIST) and filters on topics the group no longer
        subscribes are marked dead."""
        self.consumer_filter_manager.register_subscriptions(group, list(subscriptions))
