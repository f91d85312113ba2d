"""The broker's pull-path message filters: ExpressionMessageFilter and ExpressionForRetryMessageFilter
(broker/filter/*.java, 4.9), and how they are handed to ``MessageStore.get_message``.

Owns ``is_matched_by_consume_queue(tags_code)`` (TAG by hash code; SQL92 always matches there: no bloom-filter bit
maps), ``is_matched_by_commit_log(properties)`` (SQL92 evaluated; retry records too with
``filter_support_retry``), and ``store_message_filter`` / ``store_property_filter`` (the ``get_message`` arguments).
Invariants: a filter is immutable after construction; it never raises on a record (an evaluation error is "no match").
Thread-safety: safe to share; it only reads the ConsumerFilterManager (from the broker loop).
Details: docs/BROKER_DESIGN.md, 'Pull filters'.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from rmq_core.common.mix_all import RETRY_GROUP_TOPIC_PREFIX
from rmq_core.filter.message_selector import SUB_ALL, ExpressionType, MessageSelector
from rmq_core.filter.subscription_data import SubscriptionData
from rmq_core.format.cq_unit import to_int32
from rmq_core.message import PROPERTY_RETRY_TOPIC

log = logging.getLogger(__name__)

PropertyFilter = Callable[[Mapping[str, str]], bool]


def _evaluate(filter_data: Any, properties: Mapping[str, str] | None) -> bool:
    compiled = getattr(filter_data, "filter", None)
    if compiled is None:
        return True
    try:
        return compiled(properties if properties is not None else {}) is True
    except Exception:  # an evaluation error is "no match", as RocketMQ logs and returns false
        log.exception("message filter error, %r, %r", filter_data, properties)
        return False


class ExpressionMessageFilter:
    """``ExpressionMessageFilter(subscription_data, consumer_filter_data, consumer_filter_manager)``."""

    def __init__(
        self, subscription_data: SubscriptionData | None, consumer_filter_data: Any, consumer_filter_manager: Any
    ) -> None:
        self.subscription_data = subscription_data
        self.consumer_filter_data = consumer_filter_data
        self.consumer_filter_manager = consumer_filter_manager

    # --- the MessageFilter questions ---------------------------------------------------------------------------
    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        sub = self.subscription_data
        if sub is None or sub.class_filter_mode:
            return True
        if ExpressionType.is_tag_type(sub.expression_type):
            if tags_code is None or sub.sub_string == SUB_ALL:
                return True
            return to_int32(tags_code) in sub.code_set
        return True  # SQL92: no bloom-filter bit map in rmq_core's ConsumeQueue → RocketMQ's "match"

    def is_matched_by_commit_log(self, properties: Mapping[str, str] | None) -> bool:
        sub = self.subscription_data
        if sub is None or sub.class_filter_mode or ExpressionType.is_tag_type(sub.expression_type):
            return True
        data = self.consumer_filter_data
        if data is None or getattr(data, "expression", None) is None or getattr(data, "filter", None) is None:
            return True
        return _evaluate(data, properties)

    # --- what the store's get_message takes --------------------------------------------------------------------
    @property
    def store_message_filter(self) -> MessageSelector | None:
        """The tag selector for the ConsumeQueue scan (None: every unit passes the ConsumeQueue test)."""
        sub = self.subscription_data
        if sub is None or sub.class_filter_mode or not ExpressionType.is_tag_type(sub.expression_type):
            return None
        if sub.sub_string == SUB_ALL or not sub.tags_set:
            return None
        return MessageSelector(ExpressionType.TAG, " || ".join(sorted(sub.tags_set)))

    @property
    def store_property_filter(self) -> PropertyFilter | None:
        """The record predicate (None: every record that passed the ConsumeQueue test is taken)."""
        if self._needs_commit_log():
            return self.is_matched_by_commit_log
        return None

    def _needs_commit_log(self) -> bool:
        sub = self.subscription_data
        if sub is None or sub.class_filter_mode or ExpressionType.is_tag_type(sub.expression_type):
            return False
        data = self.consumer_filter_data
        return data is not None and getattr(data, "filter", None) is not None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.subscription_data!r}, {self.consumer_filter_data!r})"


class ExpressionForRetryMessageFilter(ExpressionMessageFilter):
    """Also filters retry topics: a ``%RETRY%<group>`` record is evaluated with the SQL92 filter data registered for
    (its ``RETRY_TOPIC`` property, ``<group>``)."""

    def _is_retry_topic(self) -> bool:
        sub = self.subscription_data
        return sub is not None and sub.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)

    def is_matched_by_commit_log(self, properties: Mapping[str, str] | None) -> bool:
        sub = self.subscription_data
        if sub is None or sub.class_filter_mode:
            return True
        is_retry = self._is_retry_topic()
        if not is_retry and ExpressionType.is_tag_type(sub.expression_type):
            return True
        data = self.consumer_filter_data
        if is_retry:
            props = properties or {}
            real_topic = props.get(PROPERTY_RETRY_TOPIC)
            group = sub.topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
            data = (
                self.consumer_filter_manager.get(real_topic, group)
                if real_topic is not None and self.consumer_filter_manager is not None
                else None
            )
        if data is None or getattr(data, "expression", None) is None or getattr(data, "filter", None) is None:
            return True
        return _evaluate(data, properties)

    def _needs_commit_log(self) -> bool:
        return self._is_retry_topic() or super()._needs_commit_log()
