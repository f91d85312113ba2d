"""SubscriptionData as FilterAPI.buildSubscriptionData builds it: the tag set and the hash-code set the broker
matches ConsumeQueue units against, and the client re-filters by.

Invariants: ``"*"``/empty → ``sub_string == "*"`` and empty sets (match all); otherwise the expression is split on
``"||"``, each part trimmed, empties dropped; ``code_set`` holds Java ``String.hashCode`` of each tag (int32).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rmq_core.filter.message_selector import SUB_ALL, ExpressionType, MessageSelector
from rmq_core.format.cq_unit import to_int32
from rmq_core.message import tags_hash


@dataclass
class SubscriptionData:
    topic: str
    sub_string: str = SUB_ALL
    tags_set: set[str] = field(default_factory=set)
    code_set: set[int] = field(default_factory=set)
    sub_version: int = field(default_factory=lambda: time.time_ns() // 1_000_000)
    expression_type: str = ExpressionType.TAG
    class_filter_mode: bool = False

    @property
    def selects_all(self) -> bool:
        return self.expression_type == ExpressionType.TAG and (self.sub_string == SUB_ALL or not self.code_set)

    def is_matched_by_tags_code(self, tags_code: int | None) -> bool:
        """ExpressionMessageFilter.isMatchedByConsumeQueue for TAG subscriptions."""
        if tags_code is None or self.selects_all:
            return True
        return to_int32(tags_code) in self.code_set

    def is_matched_by_tag(self, tags: str | None) -> bool:
        """The client-side re-filter (PullAPIWrapper.processPullResult): exact tag string; no tag never matches."""
        if not self.tags_set:
            return True
        return tags is not None and tags in self.tags_set

    def to_json_dict(self) -> dict[str, object]:
        return {
            "classFilterMode": self.class_filter_mode,
            "topic": self.topic,
            "subString": self.sub_string,
            "tagsSet": sorted(self.tags_set),
            "codeSet": sorted(self.code_set),
            "subVersion": self.sub_version,
            "expressionType": self.expression_type,
        }

    @classmethod
    def from_json_dict(cls, d: dict[str, object]) -> SubscriptionData:
        """SubscriptionData as a client's heartbeat carries it (fastjson field names); tolerant of missing/null
        sets, ``expressionType`` (→ TAG) and ``subVersion`` (→ now). ``topic`` is required."""
        if not isinstance(d, dict):
            raise TypeError(f"a subscription must be a JSON object, not {type(d).__name__}")
        topic = d.get("topic")
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"subscription without a topic: {d!r}")
        sub = cls(topic)
        sub_string = d.get("subString")
        if sub_string is not None:
            sub.sub_string = str(sub_string)
        tags = d.get("tagsSet") or []
        codes = d.get("codeSet") or []
        if not isinstance(tags, (list, tuple)) or not isinstance(codes, (list, tuple)):
            raise TypeError(f"tagsSet and codeSet must be arrays in {d!r}")
        sub.tags_set = {str(t) for t in tags}
        sub.code_set = {to_int32(int(c)) for c in codes}
        if d.get("subVersion") is not None:
            sub.sub_version = int(d["subVersion"])  # type: ignore[call-overload]
        if d.get("expressionType"):
            sub.expression_type = str(d["expressionType"])
        sub.class_filter_mode = bool(d.get("classFilterMode", False))
        return sub


def build_subscription_data(topic: str, expression: str | MessageSelector | None) -> SubscriptionData:
    if isinstance(expression, MessageSelector):
        if expression.expression_type == ExpressionType.SQL92:
            return SubscriptionData(topic, sub_string=expression.expression, expression_type=ExpressionType.SQL92)
        expression = expression.expression
    if expression is None or not expression.strip() or expression.strip() == SUB_ALL:
        return SubscriptionData(topic)
    tags = [t.strip() for t in expression.split("||")]
    tags = [t for t in tags if t]
    if not tags:
        return SubscriptionData(topic)
    return SubscriptionData(topic, sub_string=expression, tags_set=set(tags), code_set={tags_hash(t) for t in tags})
