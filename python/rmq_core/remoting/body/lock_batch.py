"""LOCK_BATCH_MQ / UNLOCK_BATCH_MQ bodies (rp/body/LockBatchRequestBody, UnlockBatchRequestBody, LockBatchResponseBody).

Request: ``{"clientId","consumerGroup","mqSet":[{"brokerName","queueId","topic"}],"onlyThisBroker"}``
(``onlyThisBroker`` is 5.x; absent → false). Lock response: ``{"lockOKMQSet":[MessageQueue]}``.
Queues are ``rmq_core.message.MessageQueue`` (a set; duplicates collapse as in Java's HashSet).
``decode`` accepts bytes or str (fastjson or standard JSON) and raises ``ValueError`` on a malformed body.

Plain data; no shared state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from rmq_core.message import MessageQueue
from rmq_core.remoting import fastjson
from rmq_core.remoting.body.route import BodyDecodeError
from rmq_core.remoting.request_limits import FASTJSON_FALLBACK_MAX


def mq_to_json_dict(mq: MessageQueue) -> dict[str, Any]:
    return {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}


def mq_from_json_dict(d: Any) -> MessageQueue:
    if not isinstance(d, dict):
        raise BodyDecodeError(f"a MessageQueue must be a JSON object, not {d!r}")
    topic, broker, qid = d.get("topic"), d.get("brokerName"), d.get("queueId")
    if not isinstance(topic, str) or not isinstance(broker, str) or qid is None or isinstance(qid, bool):
        raise BodyDecodeError(f"a MessageQueue needs topic, brokerName and queueId: {d!r}")
    try:
        return MessageQueue(topic, broker, int(qid))
    except (TypeError, ValueError):
        raise BodyDecodeError(f"MessageQueue queueId is not an integer: {d!r}") from None


def _mq_list(mqs: set[MessageQueue]) -> list[dict[str, Any]]:
    return [mq_to_json_dict(mq) for mq in sorted(mqs)]


def _mq_set(d: dict[str, Any], key: str, what: str) -> set[MessageQueue]:
    v = d.get(key)
    if v is None:
        return set()
    if not isinstance(v, list):
        raise BodyDecodeError(f"{what}: {key} must be an array")
    return {mq_from_json_dict(x) for x in v}


def _loads_object(data: bytes | str, what: str) -> dict[str, Any]:
    try:
        obj = fastjson.loads(data, int_keys=False, fallback_max=FASTJSON_FALLBACK_MAX)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise BodyDecodeError(f"{what}: body is not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise BodyDecodeError(f"{what}: body must be a JSON object")
    return obj


def _opt_str(d: dict[str, Any], key: str, what: str) -> str | None:
    v = d.get(key)
    if v is not None and not isinstance(v, str):
        raise BodyDecodeError(f"{what}: {key} must be a string")
    return v


@dataclass
class LockBatchRequestBody:
    consumer_group: str | None = None
    client_id: str | None = None
    mq_set: set[MessageQueue] = field(default_factory=set)
    only_this_broker: bool = False

    _WHAT = "LockBatchRequestBody"

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "clientId": self.client_id,
            "consumerGroup": self.consumer_group,
            "mqSet": _mq_list(self.mq_set),
            "onlyThisBroker": self.only_this_broker,
        }

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> Self:
        what = cls._WHAT
        return cls(
            consumer_group=_opt_str(d, "consumerGroup", what),
            client_id=_opt_str(d, "clientId", what),
            mq_set=_mq_set(d, "mqSet", what),
            only_this_broker=bool(d.get("onlyThisBroker", False)),
        )

    def encode(self, standard_json: bool = True) -> bytes:
        return fastjson.dumps(self.to_json_dict(), unquoted_int_keys=not standard_json).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes | str) -> Self:
        return cls.from_json_dict(_loads_object(data, cls._WHAT))


@dataclass
class UnlockBatchRequestBody(LockBatchRequestBody):
    _WHAT = "UnlockBatchRequestBody"


@dataclass
class LockBatchResponseBody:
    lock_ok_mq_set: set[MessageQueue] = field(default_factory=set)

    def to_json_dict(self) -> dict[str, Any]:
        return {"lockOKMQSet": _mq_list(self.lock_ok_mq_set)}

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> LockBatchResponseBody:
        return cls(_mq_set(d, "lockOKMQSet", "LockBatchResponseBody"))

    def encode(self, standard_json: bool = True) -> bytes:
        return fastjson.dumps(self.to_json_dict(), unquoted_int_keys=not standard_json).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes | str) -> LockBatchResponseBody:
        return cls.from_json_dict(_loads_object(data, "LockBatchResponseBody"))
