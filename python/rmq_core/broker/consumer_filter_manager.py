"""ConsumerFilterManager and ConsumerFilterData (br/filter/ConsumerFilterManager.java, ConsumerFilterData.java): the
SQL92 filter each consumer group uses on each topic → ``<config_dir>/consumerFilter.json``.

Format: fastjson, pretty, ``{"filterDataByTopic":{T:{"groupFilterData":{g:{...}},"topic":T}}}`` without Java's
``bloomFilterData``. Rules (RocketMQ's): only SQL92 is registered; a newer ``client_version`` with a new expression
builds new data; ``unregister(group)`` marks data dead, dead for 24 h it is dropped; on load every entry is dead until
its consumers heartbeat again.
Invariant: ``build`` raises ``FilterParseError`` on an invalid expression (Java answers null); entries on disk that no
longer compile are dropped with a log.
Not thread-safe: owned by the broker's event loop.
Details: docs/BROKER_DESIGN.md, 'SQL92 filter data'.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rmq_core.broker.config_manager import ConfigDecodeError, ConfigManager
from rmq_core.common.log_text import clip
from rmq_core.filter.message_selector import ExpressionType
from rmq_core.filter.sql92 import FilterParseError, Sql92Filter
from rmq_core.filter.subscription_data import SubscriptionData
from rmq_core.remoting import fastjson

log = logging.getLogger(__name__)

CONSUMER_FILTER_FILE = "consumerFilter.json"
MS_24_HOUR = 24 * 3600 * 1000

__all__ = ["ConsumerFilterData", "ConsumerFilterManager", "FilterParseError"]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(eq=False)
class ConsumerFilterData:
    consumer_group: str
    topic: str
    expression: str
    expression_type: str
    born_time: int
    dead_time: int = 0
    client_version: int = 0
    filter: Sql92Filter | None = field(default=None, repr=False)

    @property
    def is_dead(self) -> bool:
        return self.dead_time >= self.born_time

    def how_long_after_death(self, now_ms: int | None = None) -> int:
        if self.is_dead:
            return (_now_ms() if now_ms is None else now_ms) - self.dead_time
        return -1

    def is_msg_in_live(self, msg_store_time: int) -> bool:
        return msg_store_time > self.born_time

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "bornTime": self.born_time,
            "clientVersion": self.client_version,
            "consumerGroup": self.consumer_group,
            "dead": self.is_dead,
            "deadTime": self.dead_time,
            "expression": self.expression,
            "expressionType": self.expression_type,
            "topic": self.topic,
        }

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> ConsumerFilterData:
        """Parse (and compile) one persisted entry; raises ValueError / FilterParseError."""
        if not isinstance(d, dict):
            raise ConfigDecodeError("filter data must be an object")
        for k in ("consumerGroup", "topic", "expression", "expressionType"):
            if not isinstance(d.get(k), str):
                raise ConfigDecodeError(f"filter data needs a string {k}: {d!r}")
        data = cls(
            consumer_group=d["consumerGroup"],
            topic=d["topic"],
            expression=d["expression"],
            expression_type=d["expressionType"],
            born_time=int(d.get("bornTime", 0)),
            dead_time=int(d.get("deadTime", 0)),
            client_version=int(d.get("clientVersion", 0)),
        )
        data.filter = _compile(data.expression_type, data.expression)
        return data


def _compile(expression_type: str, expression: str) -> Sql92Filter:
    if expression_type != ExpressionType.SQL92:
        raise FilterParseError(f"unsupported filter expression type {expression_type!r}")
    return Sql92Filter(expression)


class ConsumerFilterManager(ConfigManager):
    def __init__(self, config_dir: str, clean_time_span_ms: int = MS_24_HOUR) -> None:
        super().__init__(os.path.join(os.fspath(config_dir), CONSUMER_FILTER_FILE))
        # topic -> group -> data
        self.filter_data_by_topic: dict[str, dict[str, ConsumerFilterData]] = {}
        self.clean_time_span_ms = clean_time_span_ms

    @staticmethod
    def build(
        topic: str,
        consumer_group: str,
        expression: str,
        expression_type: str,
        client_version: int,
        now_ms: int | None = None,
    ) -> ConsumerFilterData | None:
        """New filter data (compiled); None for a TAG type; raises ``FilterParseError`` for a bad expression."""
        if ExpressionType.is_tag_type(expression_type):
            return None
        data = ConsumerFilterData(
            consumer_group=consumer_group,
            topic=topic,
            expression=expression,
            expression_type=expression_type,
            born_time=_now_ms() if now_ms is None else now_ms,
            dead_time=0,
            client_version=int(client_version),
        )
        data.filter = _compile(expression_type, expression)
        return data

    def register(
        self,
        topic: str,
        consumer_group: str,
        expression: str,
        expression_type: str,
        client_version: int,
        now_ms: int | None = None,
    ) -> bool:
        if ExpressionType.is_tag_type(expression_type) or not expression:
            return False
        groups = self.filter_data_by_topic.setdefault(topic, {})
        old = groups.get(consumer_group)
        if old is None:
            data = self.build(topic, consumer_group, expression, expression_type, client_version, now_ms)
            assert data is not None
            groups[consumer_group] = data
            log.info("New consumer filter registered: %s", clip(data))
            return True
        if client_version <= old.client_version:
            if expression_type != old.expression_type or expression != old.expression:
                log.info(
                    "Ignore consumer(%s:%s) filter, because of version %d <= %d, but maybe info changed! "
                    "old=%s:%s, ignored=%s:%s",
                    consumer_group,
                    topic,
                    client_version,
                    old.client_version,
                    old.expression_type,
                    old.expression,
                    expression_type,
                    expression,
                )
            if client_version == old.client_version and old.is_dead:
                self._re_alive(old)
                return True
            return False
        if old.expression != expression or old.expression_type != expression_type:
            try:
                data = self.build(topic, consumer_group, expression, expression_type, client_version, now_ms)
            except FilterParseError:
                del groups[consumer_group]  # new expression does not compile: drop the old, let the client see it
                raise
            assert data is not None
            groups[consumer_group] = data
            log.info("Consumer filter info change, old: %s, new: %s", old, data)
            return True
        old.client_version = int(client_version)
        if old.is_dead:
            self._re_alive(old)
        return True

    def register_subscriptions(
        self, consumer_group: str, sub_list: Iterable[SubscriptionData], now_ms: int | None = None
    ) -> None:
        """Java's register(group, subList): register each SQL92 subscription (parse errors are logged) and mark
        the group's filters on topics it no longer subscribes dead."""
        subs = list(sub_list)
        for sub in subs:
            try:
                self.register(sub.topic, consumer_group, sub.sub_string, sub.expression_type, sub.sub_version, now_ms)
            except FilterParseError as e:
                log.error(
                    "parse error: expr=%s, topic=%s, group=%s, error=%s", sub.sub_string, sub.topic, consumer_group, e
                )
        topics = {s.topic for s in subs}
        now = _now_ms() if now_ms is None else now_ms
        for data in self.get_by_group(consumer_group):
            if data.topic not in topics and not data.is_dead:
                data.dead_time = now
                log.info("Consumer filter changed: %s, make illegal topic dead:%s", consumer_group, data)

    @staticmethod
    def _re_alive(data: ConsumerFilterData) -> None:
        log.info("Re alive consumer filter: %s, oldDeadTime: %d", data, data.dead_time)
        data.dead_time = 0

    def unregister(self, consumer_group: str, now_ms: int | None = None) -> None:
        now = _now_ms() if now_ms is None else now_ms
        for groups in self.filter_data_by_topic.values():
            data = groups.get(consumer_group)
            if data is not None and not data.is_dead:
                log.info("Unregister consumer filter: %s, deadTime: %d", data, now)
                data.dead_time = now

    def get(self, topic: str, consumer_group: str) -> ConsumerFilterData | None:
        return self.filter_data_by_topic.get(topic, {}).get(consumer_group)

    def get_by_topic(self, topic: str) -> list[ConsumerFilterData]:
        return list(self.filter_data_by_topic.get(topic, {}).values())

    def get_by_group(self, consumer_group: str) -> list[ConsumerFilterData]:
        return [d for groups in self.filter_data_by_topic.values() for g, d in groups.items() if g == consumer_group]

    def clean(self, now_ms: int | None = None) -> None:
        now = _now_ms() if now_ms is None else now_ms
        for topic in list(self.filter_data_by_topic):
            groups = self.filter_data_by_topic[topic]
            for group in [g for g, d in groups.items() if d.how_long_after_death(now) >= self.clean_time_span_ms]:
                log.info("Remove filter consumer %s, died too long!", groups[group])
                del groups[group]
            if not groups:
                log.info("Topic has no consumer, remove it! %s", topic)
                del self.filter_data_by_topic[topic]

    def encode(self, pretty: bool = False) -> str:
        self.clean()
        doc = {
            "filterDataByTopic": {
                topic: {"groupFilterData": {g: d.to_json_dict() for g, d in groups.items()}, "topic": topic}
                for topic, groups in self.filter_data_by_topic.items()
            }
        }
        return fastjson.dumps(doc, pretty=pretty)

    def decode(self, text: str, now_ms: int | None = None) -> None:
        doc = fastjson.loads(text, int_keys=False)
        if not isinstance(doc, dict):
            raise ConfigDecodeError(f"{self.config_file_path}: the document must be a JSON object")
        raw = doc.get("filterDataByTopic") or {}
        if not isinstance(raw, dict):
            raise ConfigDecodeError("filterDataByTopic must be an object")
        now = _now_ms() if now_ms is None else now_ms
        table: dict[str, dict[str, ConsumerFilterData]] = {}
        for topic, by_topic in raw.items():
            if by_topic is None:
                continue
            if not isinstance(by_topic, dict) or not isinstance(by_topic.get("groupFilterData") or {}, dict):
                raise ConfigDecodeError(f"filterDataByTopic[{topic!r}] must be an object with groupFilterData")
            groups: dict[str, ConsumerFilterData] = {}
            for group, d in (by_topic.get("groupFilterData") or {}).items():
                if d is None:
                    continue
                try:
                    data = ConsumerFilterData.from_json_dict(d)
                except FilterParseError as e:
                    log.error("load filter data error, dropping %s@%s: %s", topic, group, e)
                    continue
                if data.dead_time == 0:  # all consumers are considered dead when loaded
                    data.dead_time = max(now - 30_000, data.born_time)
                groups[str(group)] = data
            if groups:
                table[str(topic)] = groups
        self.filter_data_by_topic = table
