"""TopicConfig (cm/TopicConfig.java) as topics.json and the register-broker body carry it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmq_core.common.perm_name import DEFAULT_PERM

DEFAULT_READ_QUEUE_NUMS = 16
DEFAULT_WRITE_QUEUE_NUMS = 16


@dataclass
class TopicConfig:
    topic_name: str
    read_queue_nums: int = DEFAULT_READ_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_WRITE_QUEUE_NUMS
    perm: int = DEFAULT_PERM
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] | None = None

    def to_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "topicName": self.topic_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicFilterType": self.topic_filter_type,
            "topicSysFlag": self.topic_sys_flag,
            "order": self.order,
        }
        if self.attributes:
            d["attributes"] = dict(self.attributes)
        return d

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> TopicConfig:
        return cls(
            topic_name=str(d["topicName"]),
            read_queue_nums=int(d.get("readQueueNums", DEFAULT_READ_QUEUE_NUMS)),
            write_queue_nums=int(d.get("writeQueueNums", DEFAULT_WRITE_QUEUE_NUMS)),
            perm=int(d.get("perm", DEFAULT_PERM)),
            topic_filter_type=str(d.get("topicFilterType", "SINGLE_TAG")),
            topic_sys_flag=int(d.get("topicSysFlag", 0)),
            order=bool(d.get("order", False)),
            attributes=dict(d["attributes"]) if d.get("attributes") else None,
        )
