"""HEART_BEAT, CHECK_CLIENT_CONFIG and GET_CONSUMER_LIST_BY_GROUP bodies (rp/heartbeat/*.java,
rp/body/CheckClientRequestBody, rp/body/GetConsumerListByGroupResponseBody).

Format: fastjson, fields sorted, as a Java client sends them (``HeartbeatData``: ``clientID``, ``consumerDataSet``,
``producerDataSet``, 5.x's ``heartbeatFingerprint``/``withoutSub``); enums travel as names (ordinals accepted too)
and are ``str`` enums, equal to their names.
Invariant: ``decode`` accepts bytes or str, fastjson or standard JSON, and raises ``ValueError`` on a malformed body.
Plain data; no shared state.
Details (the JSON): docs/BROKER_DESIGN.md, 'Heartbeat bodies'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

from rmq_core.filter.subscription_data import SubscriptionData
from rmq_core.remoting import fastjson
from rmq_core.remoting.body.route import BodyDecodeError
from rmq_core.remoting.request_limits import FASTJSON_FALLBACK_MAX


class ConsumeType(str, Enum):
    CONSUME_ACTIVELY = "CONSUME_ACTIVELY"  # pull
    CONSUME_PASSIVELY = "CONSUME_PASSIVELY"  # push
    CONSUME_POP = "CONSUME_POP"  # 5.x


class MessageModel(str, Enum):
    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeFromWhere(str, Enum):
    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST"
    CONSUME_FROM_MIN_OFFSET = "CONSUME_FROM_MIN_OFFSET"
    CONSUME_FROM_MAX_OFFSET = "CONSUME_FROM_MAX_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


E = TypeVar("E", bound=Enum)


def parse_enum(enum_cls: type[E], value: Any, what: str) -> E:
    """An enum from its name (as fastjson writes it) or its Java ordinal (fastjson reads both)."""
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, bool):
        raise BodyDecodeError(f"{what}: {value!r} is not a {enum_cls.__name__}")
    if isinstance(value, int):
        members = list(enum_cls)
        if 0 <= value < len(members):
            return members[value]
    elif isinstance(value, str):
        try:
            return enum_cls[value]
        except KeyError:
            pass
    raise BodyDecodeError(f"{what}: {value!r} is not a {enum_cls.__name__} ({', '.join(m.name for m in enum_cls)})")


def _loads_object(data: bytes | str, what: str) -> dict[str, Any]:
    try:
        obj = fastjson.loads(data, int_keys=False, fallback_max=FASTJSON_FALLBACK_MAX)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise BodyDecodeError(f"{what}: body is not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise BodyDecodeError(f"{what}: body must be a JSON object, not {type(obj).__name__}")
    return obj


def _array(d: dict[str, Any], key: str, what: str) -> list[Any]:
    v = d.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise BodyDecodeError(f"{what}: {key} must be an array, not {type(v).__name__}")
    return v


def _dumps(d: dict[str, Any], standard_json: bool) -> bytes:
    return fastjson.dumps(d, unquoted_int_keys=not standard_json).encode("utf-8")


@dataclass
class ProducerData:
    group_name: str

    def to_json_dict(self) -> dict[str, Any]:
        return {"groupName": self.group_name}

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> ProducerData:
        if not isinstance(d, dict) or not isinstance(d.get("groupName"), str):
            raise BodyDecodeError(f"ProducerData needs a groupName: {d!r}")
        return cls(d["groupName"])


@dataclass
class ConsumerData:
    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    subscription_data_set: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "consumeFromWhere": self.consume_from_where.value,
            "consumeType": self.consume_type.value,
            "groupName": self.group_name,
            "messageModel": self.message_model.value,
            "subscriptionDataSet": [s.to_json_dict() for s in self.subscription_data_set],
            "unitMode": self.unit_mode,
        }

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> ConsumerData:
        if not isinstance(d, dict) or not isinstance(d.get("groupName"), str):
            raise BodyDecodeError(f"ConsumerData needs a groupName: {d!r}")
        what = f"ConsumerData {d['groupName']}"
        return cls(
            group_name=d["groupName"],
            consume_type=parse_enum(ConsumeType, d.get("consumeType", "CONSUME_PASSIVELY"), what + " consumeType"),
            message_model=parse_enum(MessageModel, d.get("messageModel", "CLUSTERING"), what + " messageModel"),
            consume_from_where=parse_enum(
                ConsumeFromWhere, d.get("consumeFromWhere", "CONSUME_FROM_LAST_OFFSET"), what + " consumeFromWhere"
            ),
            subscription_data_set=[SubscriptionData.from_json_dict(s) for s in _array(d, "subscriptionDataSet", what)],
            unit_mode=bool(d.get("unitMode", False)),
        )


@dataclass
class HeartbeatData:
    client_id: str
    producer_data_set: list[ProducerData] = field(default_factory=list)
    consumer_data_set: list[ConsumerData] = field(default_factory=list)
    heartbeat_fingerprint: int | None = None  # 5.x
    without_sub: bool | None = None  # 5.x

    def to_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "clientID": self.client_id,
            "consumerDataSet": [c.to_json_dict() for c in self.consumer_data_set],
        }
        if self.heartbeat_fingerprint is not None:
            d["heartbeatFingerprint"] = self.heartbeat_fingerprint
        d["producerDataSet"] = [p.to_json_dict() for p in self.producer_data_set]
        if self.without_sub is not None:
            d["withoutSub"] = self.without_sub
        return d

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> HeartbeatData:
        client_id = d.get("clientID")
        if not isinstance(client_id, str) or not client_id:
            raise BodyDecodeError("HeartbeatData: clientID is missing")
        fp = d.get("heartbeatFingerprint")
        ws = d.get("withoutSub", d.get("isWithoutSub"))
        return cls(
            client_id=client_id,
            producer_data_set=[ProducerData.from_json_dict(p) for p in _array(d, "producerDataSet", "HeartbeatData")],
            consumer_data_set=[ConsumerData.from_json_dict(c) for c in _array(d, "consumerDataSet", "HeartbeatData")],
            heartbeat_fingerprint=int(fp) if fp is not None else None,
            without_sub=bool(ws) if ws is not None else None,
        )

    def encode(self, standard_json: bool = True) -> bytes:
        return _dumps(self.to_json_dict(), standard_json)

    @classmethod
    def decode(cls, data: bytes | str) -> HeartbeatData:
        try:
            return cls.from_json_dict(_loads_object(data, "HeartbeatData"))
        except (TypeError, AttributeError) as e:
            raise BodyDecodeError(f"HeartbeatData: malformed body: {e}") from None


@dataclass
class CheckClientRequestBody:
    client_id: str
    group: str
    subscription_data: SubscriptionData

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "clientId": self.client_id,
            "group": self.group,
            "subscriptionData": self.subscription_data.to_json_dict(),
        }

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> CheckClientRequestBody:
        sub = d.get("subscriptionData")
        if not isinstance(sub, dict):
            raise BodyDecodeError("CheckClientRequestBody: subscriptionData is missing")
        try:
            subscription = SubscriptionData.from_json_dict(sub)
        except (TypeError, ValueError) as e:
            raise BodyDecodeError(f"CheckClientRequestBody: {e}") from None
        return cls(str(d.get("clientId") or ""), str(d.get("group") or ""), subscription)

    def encode(self, standard_json: bool = True) -> bytes:
        return _dumps(self.to_json_dict(), standard_json)

    @classmethod
    def decode(cls, data: bytes | str) -> CheckClientRequestBody:
        return cls.from_json_dict(_loads_object(data, "CheckClientRequestBody"))


@dataclass
class GetConsumerListByGroupResponseBody:
    consumer_id_list: list[str] = field(default_factory=list)

    def to_json_dict(self) -> dict[str, Any]:
        return {"consumerIdList": list(self.consumer_id_list)}

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> GetConsumerListByGroupResponseBody:
        return cls([str(x) for x in _array(d, "consumerIdList", "GetConsumerListByGroupResponseBody")])

    def encode(self, standard_json: bool = True) -> bytes:
        return _dumps(self.to_json_dict(), standard_json)

    @classmethod
    def decode(cls, data: bytes | str) -> GetConsumerListByGroupResponseBody:
        return cls.from_json_dict(_loads_object(data, "GetConsumerListByGroupResponseBody"))
