"""SubscriptionGroupConfig (rp/subscription/SubscriptionGroupConfig.java) as subscriptionGroup.json carries it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmq_core.common.mix_all import MASTER_ID


@dataclass
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = MASTER_ID
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    _JSON = (
        ("groupName", "group_name"),
        ("consumeEnable", "consume_enable"),
        ("consumeFromMinEnable", "consume_from_min_enable"),
        ("consumeBroadcastEnable", "consume_broadcast_enable"),
        ("consumeMessageOrderly", "consume_message_orderly"),
        ("retryQueueNums", "retry_queue_nums"),
        ("retryMaxTimes", "retry_max_times"),
        ("brokerId", "broker_id"),
        ("whichBrokerWhenConsumeSlowly", "which_broker_when_consume_slowly"),
        ("notifyConsumerIdsChangedEnable", "notify_consumer_ids_changed_enable"),
    )

    def to_json_dict(self) -> dict[str, Any]:
        return {k: getattr(self, a) for k, a in self._JSON}

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> SubscriptionGroupConfig:
        cfg = cls(group_name=str(d["groupName"]))
        for k, a in cls._JSON[1:]:
            if k in d and d[k] is not None:
                default = getattr(cfg, a)
                setattr(cfg, a, bool(d[k]) if isinstance(default, bool) else int(d[k]))
        return cfg
