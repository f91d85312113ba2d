"""The bodies a consumer answers the broker's introspection requests with (rp/body/ConsumerRunningInfo.java,
ProcessQueueInfo.java, ConsumeStatus.java, ConsumeMessageDirectlyResult.java, CMResult.java):

- GET_CONSUMER_RUNNING_INFO (307) → ConsumerRunningInfo ``{"jstack"?,"mqTable":{MQ:ProcessQueueInfo},
  "properties":{str:str},"statusTable":{topic:ConsumeStatus},"subscriptionSet":[SubscriptionData]}``
- CONSUME_MESSAGE_DIRECTLY (309) → ConsumeMessageDirectlyResult ``{"autoCommit","consumeResult":"CR_SUCCESS"|…,
  "order","remark"?,"spentTimeMills"}``

``MQ`` is a MessageQueue JSON object used as a map key (``fastjson.RawKey``), as fastjson writes
``Map<MessageQueue, …>``. Field names are fastjson's (from the Java getters: ProcessQueueInfo's ``droped`` is
RocketMQ's spelling), in alphabetical order as fastjson writes them; null fields are left out. Both are read back
(``decode``) for tests and tools; a body not of that shape raises ``BodyDecodeError``.

Plain data; no shared state.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from rmq_core.filter.subscription_data import SubscriptionData
from rmq_core.message import MessageQueue
from rmq_core.remoting import fastjson
from rmq_core.remoting.body.lock_batch import mq_from_json_dict
from rmq_core.remoting.body.queue_offsets import mq_key
from rmq_core.remoting.body.route import BodyDecodeError

PROP_NAMESERVER_ADDR = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION = "PROP_CLIENT_VERSION"
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"


@dataclass
class ProcessQueueInfo:
    commit_offset: int = 0
    cached_msg_min_offset: int = 0
    cached_msg_max_offset: int = 0
    cached_msg_count: int = 0
    cached_msg_size_in_mib: int = 0
    transaction_msg_min_offset: int = 0
    transaction_msg_max_offset: int = 0
    transaction_msg_count: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_timestamp: int = 0
    dropped: bool = False
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0

    _FIELDS = (
        ("cachedMsgCount", "cached_msg_count"),
        ("cachedMsgMaxOffset", "cached_msg_max_offset"),
        ("cachedMsgMinOffset", "cached_msg_min_offset"),
        ("cachedMsgSizeInMiB", "cached_msg_size_in_mib"),
        ("commitOffset", "commit_offset"),
        ("droped", "dropped"),
        ("lastConsumeTimestamp", "last_consume_timestamp"),
        ("lastLockTimestamp", "last_lock_timestamp"),
        ("lastPullTimestamp", "last_pull_timestamp"),
        ("locked", "locked"),
        ("transactionMsgCount", "transaction_msg_count"),
        ("transactionMsgMaxOffset", "transaction_msg_max_offset"),
        ("transactionMsgMinOffset", "transaction_msg_min_offset"),
        ("tryUnlockTimes", "try_unlock_times"),
    )

    def to_json_dict(self) -> dict[str, Any]:
        return {json_name: getattr(self, attr) for json_name, attr in self._FIELDS}

    @classmethod
    def from_json_dict(cls, d: Any) -> ProcessQueueInfo:
        if not isinstance(d, dict):
            raise BodyDecodeError(f"a ProcessQueueInfo must be a JSON object, not {d!r}")
        info = cls()
        for json_name, attr in cls._FIELDS:
            if json_name in d:
                setattr(info, attr, bool(d[json_name]) if attr in ("locked", "dropped") else int(d[json_name]))
        return info


@dataclass
class ConsumeStatus:
    pull_rt: float = 0.0
    pull_tps: float = 0.0
    consume_rt: float = 0.0
    consume_ok_tps: float = 0.0
    consume_failed_tps: float = 0.0
    consume_failed_msgs: int = 0

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "consumeFailedMsgs": int(self.consume_failed_msgs),
            "consumeFailedTPS": float(self.consume_failed_tps),
            "consumeOKTPS": float(self.consume_ok_tps),
            "consumeRT": float(self.consume_rt),
            "pullRT": float(self.pull_rt),
            "pullTPS": float(self.pull_tps),
        }

    @classmethod
    def from_json_dict(cls, d: Any) -> ConsumeStatus:
        if not isinstance(d, dict):
            raise BodyDecodeError(f"a ConsumeStatus must be a JSON object, not {d!r}")
        return cls(
            float(d.get("pullRT", 0)),
            float(d.get("pullTPS", 0)),
            float(d.get("consumeRT", 0)),
            float(d.get("consumeOKTPS", 0)),
            float(d.get("consumeFailedTPS", 0)),
            int(d.get("consumeFailedMsgs", 0)),
        )


@dataclass
class ConsumerRunningInfo:
    properties: dict[str, str] = field(default_factory=dict)
    subscription_set: list[SubscriptionData] = field(default_factory=list)
    mq_table: dict[MessageQueue, ProcessQueueInfo] = field(default_factory=dict)
    status_table: dict[str, ConsumeStatus] = field(default_factory=dict)
    jstack: str | None = None

    def encode(self) -> bytes:
        doc: dict[str, Any] = {}
        if self.jstack is not None:
            doc["jstack"] = self.jstack
        doc["mqTable"] = {mq_key(mq): info.to_json_dict() for mq, info in sorted(self.mq_table.items())}
        doc["properties"] = {str(k): str(v) for k, v in sorted(self.properties.items())}
        doc["statusTable"] = {topic: s.to_json_dict() for topic, s in sorted(self.status_table.items())}
        subs = sorted(self.subscription_set, key=lambda s: (s.topic, s.sub_string))
        doc["subscriptionSet"] = [dict(sorted(s.to_json_dict().items())) for s in subs]
        return fastjson.dumps(doc).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes | str) -> ConsumerRunningInfo:
        text = bytes(data).decode("utf-8") if not isinstance(data, str) else data
        try:
            raw_mq = fastjson.raw_field(text, "mqTable")
            mq_table = {
                mq_from_json_dict(k): ProcessQueueInfo.from_json_dict(v)
                for k, v in (fastjson.map_items(raw_mq) if raw_mq else [])
            }
            props = fastjson.loads(fastjson.raw_field(text, "properties") or "{}", int_keys=False)
            status = fastjson.loads(fastjson.raw_field(text, "statusTable") or "{}", int_keys=False)
            subs = fastjson.loads(fastjson.raw_field(text, "subscriptionSet") or "[]")
            jstack = fastjson.raw_field(text, "jstack")
            return cls(
                {str(k): str(v) for k, v in props.items()},
                [SubscriptionData.from_json_dict(s) for s in subs],
                mq_table,
                {str(t): ConsumeStatus.from_json_dict(s) for t, s in status.items()},
                fastjson.loads(jstack) if jstack is not None else None,
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise BodyDecodeError(f"ConsumerRunningInfo: {e}") from None


class CMResult(str, enum.Enum):
    """How a message consumed directly came out (cm/protocol/body/CMResult.java)."""

    CR_SUCCESS = "CR_SUCCESS"
    CR_LATER = "CR_LATER"
    CR_ROLLBACK = "CR_ROLLBACK"
    CR_COMMIT = "CR_COMMIT"
    CR_THROW_EXCEPTION = "CR_THROW_EXCEPTION"
    CR_RETURN_NULL = "CR_RETURN_NULL"


@dataclass
class ConsumeMessageDirectlyResult:
    order: bool = False
    auto_commit: bool = True
    consume_result: CMResult | None = None
    remark: str | None = None
    spent_time_mills: int = 0

    def encode(self) -> bytes:
        doc: dict[str, Any] = {"autoCommit": self.auto_commit}
        if self.consume_result is not None:
            doc["consumeResult"] = self.consume_result.value
        doc["order"] = self.order
        if self.remark is not None:
            doc["remark"] = self.remark
        doc["spentTimeMills"] = int(self.spent_time_mills)
        return fastjson.dumps(doc).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes | str) -> ConsumeMessageDirectlyResult:
        try:
            d = fastjson.loads(data)
            if not isinstance(d, dict):
                raise TypeError("not a JSON object")
            cr = d.get("consumeResult")
            return cls(
                bool(d.get("order", False)),
                bool(d.get("autoCommit", True)),
                CMResult(cr) if cr is not None else None,
                d.get("remark"),
                int(d.get("spentTimeMills", 0)),
            )
        except (ValueError, TypeError) as e:
            raise BodyDecodeError(f"ConsumeMessageDirectlyResult: {e}") from None
