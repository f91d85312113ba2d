"""Command custom headers: the typed request/response headers RocketMQ carries in a RemotingCommand's ``extFields``
(``rp/header/*.java``, ``RemotingCommand#decodeCommandCustomHeader``).

Each header is a dataclass; a field's metadata says whether it is required (``@CFNotNull``) and, for send, its V2
short name. ``decode_header`` parses by declared type as Java does (``Integer.parseInt``, ``Long.parseLong``,
``Boolean.parseBoolean``), ignores unknown keys, and raises ``HeaderError`` naming a missing required field or a
number outside its Java type's range — ``Long.parseLong``'s, or ``Integer.parseInt``'s for a field marked
``java_int`` (Java's ``Integer``/``int``) — so no such value is ever stored (a consumer offset or queue id in
consumerOffset.json, a queue count in topics.json, that Java tools could not read; Java leaves the field null). The
remoting server turns the error into SYSTEM_ERROR with the text as remark. ``encode_header`` writes every non-None field as
its Java ``toString`` (booleans "true"/"false").

Invariants: field names are RocketMQ's exactly (they are on the wire); values in extFields are strings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, get_type_hints

from rmq_core.remoting.command import RemotingCommandError

T = TypeVar("T")


class HeaderError(RemotingCommandError):
    """A custom header field that is missing or does not parse as its declared type."""


def required(default: Any = None, *, java_int: bool = False) -> Any:
    """A ``@CFNotNull`` field: decoding fails naming it when absent. (The default only eases construction.)
    ``java_int``: an int field Java declares ``Integer``/``int`` (decoded within ``Integer.parseInt``'s range; any
    other int field is a Java ``Long``)."""
    return field(default=default, metadata={"required": True, "java_int": java_int})


def optional(default: Any = None, short: str | None = None, *, java_int: bool = False) -> Any:
    return field(default=default, metadata={"required": False, "short": short, "java_int": java_int})


def required_short(short: str, *, java_int: bool = False) -> Any:
    return field(default=None, metadata={"required": True, "short": short, "java_int": java_int})


_TYPE_CACHE: dict[type, list[tuple[str, str, bool, str | None]]] = {}


def _fields(cls: type) -> list[tuple[str, str, bool, str | None]]:
    """(name, kind, required, short) per field; kind is 'int' (a Java long) | 'int32' | 'str' | 'bool' | 'float'."""
    out = _TYPE_CACHE.get(cls)
    if out is None:
        hints = get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            t = str(hints[f.name])
            kind = "bool" if "bool" in t else "int" if "int" in t else "float" if "float" in t else "str"
            if kind == "int" and f.metadata.get("java_int"):
                kind = "int32"
            out.append((f.name, kind, bool(f.metadata.get("required")), f.metadata.get("short")))
        _TYPE_CACHE[cls] = out
    return out


# per integer kind: (min, max, the number of characters below which any number is within them, Java's type)
FIELD_RANGES = {
    "int": (-(1 << 63), (1 << 63) - 1, 19, "a long"),
    "int32": (-(1 << 31), (1 << 31) - 1, 10, "an int"),
}
_ECHOED = 40  # characters of a bad value quoted in the error


def _parse(kind: str, name: str, value: Any) -> Any:
    if kind == "str":
        return value
    if kind == "bool":
        return value.lower() == "true"  # Boolean.parseBoolean
    limits = FIELD_RANGES.get(kind)
    try:
        number = int(value.strip() if isinstance(value, str) else value) if limits else float(value)
    except (ValueError, TypeError):
        raise HeaderError(f"the custom field <{name}> is not a number: {str(value)[:_ECHOED]!r}") from None
    if limits is not None and not limits[0] <= number <= limits[1]:
        raise HeaderError(f"the custom field <{name}> is out of the range of {limits[3]}: {str(value)[:_ECHOED]!r}")
    return number


def field_names(cls: type, *, short_names: bool = False) -> list[str]:
    """The extFields names of a header class's fields, in declaration order (the V2 short names with
    ``short_names``, where a field has one)."""
    return [short if short_names and short else name for name, _kind, _req, short in _fields(cls)]


_DECODERS: dict[tuple[type, bool], Callable[[Mapping[str, str]], Any]] = {}


def _make_decoder(cls: type, short_names: bool) -> Callable[[Mapping[str, str]], Any]:
    """One straight-line function per header class (as ``dataclasses`` builds ``__init__``): a get per field, the
    null check of a required one, the parse of a non-str one, the declared default of an absent optional one.
    Decoding a send header is on every send's path; the loop over a field plan it replaces cost twice as much."""
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    lines = ["def decode(ext):", "    get = ext.get"]
    args = []
    for i, (name, kind, req, short) in enumerate(_fields(cls)):
        key = short if short_names and short else name
        v = f"v{i}"
        lines.append(f"    {v} = get({key!r})")
        if req:
            lines.append(f"    if {v} is None: raise HeaderError({f'the custom field <{name}> is null'!r})")
        else:
            if defaults[name] is dataclasses.MISSING:
                raise TypeError(f"{cls.__name__}.{name}: an optional header field needs a default")
            lines.append(f"    if {v} is None: {v} = _defaults[{name!r}]")
        if kind in FIELD_RANGES:  # inlined: int() skips surrounding whitespace as _parse's strip() does; a long text
            # (maybe beyond the Java type's range) goes to _parse's range check
            parse = [
                "try:",
                f"    {v} = int({v}) if len({v}) < {FIELD_RANGES[kind][2]} else _parse({kind!r}, {name!r}, {v})",
                "except (ValueError, TypeError):",
                f"    {v} = _parse({kind!r}, {name!r}, {v})",
            ]
        elif kind != "str":
            parse = [f"{v} = _parse({kind!r}, {name!r}, {v})"]
        else:
            parse = []
        if parse:  # a present value (an absent optional one keeps its default as is)
            lines += [f"    {x}" for x in parse] if req else ["    else:", *(f"        {x}" for x in parse)]
        args.append(f"{name}={v}")
    lines.append(f"    return cls({', '.join(args)})")
    namespace: dict[str, Any] = {"cls": cls, "HeaderError": HeaderError, "_parse": _parse, "_defaults": defaults}
    exec("\n".join(lines), namespace)
    fn: Callable[[Mapping[str, str]], Any] = namespace["decode"]
    return fn


def decode_header(cls: type[T], ext_fields: Mapping[str, str], *, short_names: bool = False) -> T:
    """Build ``cls`` from extFields. With ``short_names`` the V2 one-letter keys are read (SEND_MESSAGE_V2)."""
    decoder = _DECODERS.get((cls, short_names))
    if decoder is None:
        decoder = _DECODERS[(cls, short_names)] = _make_decoder(cls, short_names)
    header: T = decoder(ext_fields)
    return header


_ENCODERS: dict[tuple[type, bool], Callable[[Any], dict[str, str]]] = {}


def _make_encoder(cls: type, short_names: bool) -> Callable[[Any], dict[str, str]]:
    """One straight-line function per header class, as ``_make_decoder``: per field in declaration order, skip None,
    write booleans as "true"/"false", strings as they are and anything else as ``str(v)``. A send header is encoded on
    every send; the loop over the field plan it replaces cost about twice as much."""
    lines = ["def encode(obj):", "    out = {}"]
    for name, _kind, _req, short in _fields(cls):
        key = short if short_names and short else name
        lines += [
            f"    v = obj.{name}",
            "    if v is not None:",
            f"        out[{key!r}] = v if v.__class__ is str else ('true' if v else 'false') if v.__class__ is bool "
            "else str(v)",
        ]
    lines.append("    return out")
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), namespace)
    fn: Callable[[Any], dict[str, str]] = namespace["encode"]
    return fn


def encode_header(obj: Any, *, short_names: bool = False) -> dict[str, str]:
    """extFields of a header: every non-None field as its Java ``toString`` (booleans "true"/"false"), under its V2
    short name with ``short_names``."""
    encoder = _ENCODERS.get((type(obj), short_names))
    if encoder is None:
        encoder = _ENCODERS[(type(obj), short_names)] = _make_encoder(type(obj), short_names)
    return encoder(obj)


# --- send ------------------------------------------------------------------------------------------------------
@dataclass
class SendMessageRequestHeader:
    producerGroup: str = required_short("a")
    topic: str = required_short("b")
    defaultTopic: str = required_short("c")
    defaultTopicQueueNums: int = required_short("d", java_int=True)
    queueId: int = required_short("e", java_int=True)
    sysFlag: int = required_short("f", java_int=True)
    bornTimestamp: int = required_short("g")
    flag: int = required_short("h", java_int=True)
    properties: str | None = optional(short="i")
    reconsumeTimes: int | None = optional(short="j", java_int=True)
    unitMode: bool | None = optional(short="k")
    maxReconsumeTimes: int | None = optional(short="l", java_int=True)
    batch: bool | None = optional(short="m")
    brokerName: str | None = optional(short="n")


@dataclass
class SendMessageResponseHeader:
    msgId: str = required()
    queueId: int = required(java_int=True)
    queueOffset: int = required()
    transactionId: str | None = optional()
    batchUniqId: str | None = optional()


PROPERTY_MSG_REGION = "MSG_REGION"  # a send answer's extFields beside its header: the broker's region
PROPERTY_TRACE_SWITCH = "TRACE_ON"  # and whether it traces ("false": not)
# the extFields of a send's answer a producer reads, in this order (``response_waiter.SendAnswerWaiter``)
SEND_ANSWER_FIELDS = ("msgId", "queueId", "queueOffset", "transactionId", PROPERTY_MSG_REGION, PROPERTY_TRACE_SWITCH)


# --- transactions (END_TRANSACTION 37, CHECK_TRANSACTION_STATE 39) ----------------------------------------------
@dataclass
class EndTransactionRequestHeader:
    producerGroup: str = required()
    tranStateTableOffset: int = required()
    commitLogOffset: int = required()
    commitOrRollback: int = (
        required()
    )  # the sys flag's transaction value: NOT (0, UNKNOW), COMMIT (8), ROLLBACK (12, java_int=True)
    fromTransactionCheck: bool | None = optional(False)
    msgId: str = required()
    transactionId: str | None = optional()


@dataclass
class CheckTransactionStateRequestHeader:
    tranStateTableOffset: int = required()
    commitLogOffset: int = required()
    msgId: str | None = optional()
    transactionId: str | None = optional()
    offsetMsgId: str | None = optional()


@dataclass
class ConsumerSendMsgBackRequestHeader:
    offset: int = required()
    group: str = required()
    delayLevel: int = required(java_int=True)
    originMsgId: str | None = optional()
    originTopic: str | None = optional()
    unitMode: bool | None = optional(False)
    maxReconsumeTimes: int | None = optional(java_int=True)


# --- pull ------------------------------------------------------------------------------------------------------
@dataclass
class PullMessageRequestHeader:
    consumerGroup: str = required()
    topic: str = required()
    queueId: int = required(java_int=True)
    queueOffset: int = required()
    maxMsgNums: int = required(java_int=True)
    sysFlag: int = required(java_int=True)
    commitOffset: int = required()
    suspendTimeoutMillis: int = required()
    subscription: str | None = optional()
    subVersion: int = required()
    expressionType: str | None = optional()
    maxMsgBytes: int | None = optional(java_int=True)


@dataclass
class PullMessageResponseHeader:
    suggestWhichBrokerId: int = required()
    nextBeginOffset: int = required()
    minOffset: int = required()
    maxOffset: int = required()


# --- POP (RocketMQ 5) -----------------------------------------------------------------------------------------
@dataclass
class PopMessageRequestHeader:
    consumerGroup: str = required()
    topic: str = required()
    queueId: int = required(java_int=True)
    maxMsgNums: int = required(java_int=True)
    invisibleTime: int = required()
    pollTime: int = required()
    bornTime: int = required()
    initMode: int = required(java_int=True)
    expType: str | None = optional()
    exp: str | None = optional()
    order: bool | None = optional(False)
    attemptId: str | None = optional()


@dataclass
class PopMessageResponseHeader:
    popTime: int = required()
    invisibleTime: int = required()
    reviveQid: int = required(java_int=True)
    restNum: int = required()
    startOffsetInfo: str | None = optional()
    msgOffsetInfo: str | None = optional()
    orderCountInfo: str | None = optional()


@dataclass
class PeekMessageRequestHeader:
    consumerGroup: str = required()
    topic: str = required()
    queueId: int = required(java_int=True)
    maxMsgNums: int = required(java_int=True)


@dataclass
class NotificationRequestHeader:
    consumerGroup: str = required()
    topic: str = required()
    queueId: int = required(java_int=True)
    pollTime: int = required()
    bornTime: int = required()
    order: bool | None = optional(False)
    attemptId: str | None = optional()


@dataclass
class NotificationResponseHeader:
    hasMsg: bool = required(False)


@dataclass
class AckMessageRequestHeader:
    consumerGroup: str = required()
    topic: str = required()
    queueId: int = required(java_int=True)
    extraInfo: str = required()
    offset: int = required()


@dataclass
class ChangeInvisibleTimeRequestHeader:
    consumerGroup: str = required()
    topic: str = required()
    queueId: int = required(java_int=True)
    extraInfo: str = required()
    offset: int = required()
    invisibleTime: int = required()


@dataclass
class ChangeInvisibleTimeResponseHeader:
    popTime: int = required()
    invisibleTime: int = required()
    reviveQid: int = required(java_int=True)


# --- offsets and queries ---------------------------------------------------------------------------------------
@dataclass
class QueryConsumerOffsetRequestHeader:
    consumerGroup: str = required()
    topic: str = required()
    queueId: int = required(java_int=True)
    setZeroIfNotFound: bool | None = optional()


@dataclass
class UpdateConsumerOffsetRequestHeader:
    consumerGroup: str = required()
    topic: str = required()
    queueId: int = required(java_int=True)
    commitOffset: int = required()


@dataclass
class OffsetResponseHeader:
    """QueryConsumerOffset / GetMaxOffset / GetMinOffset / SearchOffset responses: one ``offset``."""

    offset: int = required()


@dataclass
class GetMaxOffsetRequestHeader:
    topic: str = required()
    queueId: int = required(java_int=True)
    committed: bool | None = optional()


@dataclass
class GetTopicConfigRequestHeader:
    topic: str = required()
    lo: bool | None = optional()  # 5.x static topics: ask for the logic-queue mapping too (rmq_core has none)


@dataclass
class GetMinOffsetRequestHeader:
    topic: str = required()
    queueId: int = required(java_int=True)


@dataclass
class SearchOffsetRequestHeader:
    topic: str = required()
    queueId: int = required(java_int=True)
    timestamp: int = required()


@dataclass
class GetEarliestMsgStoretimeRequestHeader:
    topic: str = required()
    queueId: int = required(java_int=True)


@dataclass
class GetEarliestMsgStoretimeResponseHeader:
    timestamp: int = required()


@dataclass
class ViewMessageRequestHeader:
    offset: int = required()
    topic: str | None = optional()


@dataclass
class GetConsumerListByGroupRequestHeader:
    consumerGroup: str = required()


@dataclass
class UnregisterClientRequestHeader:
    clientID: str = required()
    producerGroup: str | None = optional()
    consumerGroup: str | None = optional()


@dataclass
class NotifyConsumerIdsChangedRequestHeader:
    consumerGroup: str = required()


@dataclass
class QueryMessageRequestHeader:
    topic: str = required()
    key: str = required()
    maxNum: int = required(java_int=True)
    beginTimestamp: int = required()
    endTimestamp: int = required()


# MixAll.UNIQUE_MSG_QUERY_FLAG: an ext field of QUERY_MESSAGE; "true" makes the broker query by UNIQ_KEY with its
# defaultQueryMaxNum instead of the request's maxNum
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"


@dataclass
class QueryMessageResponseHeader:
    indexLastUpdateTimestamp: int = required()
    indexLastUpdatePhyoffset: int = required()


# --- admin -----------------------------------------------------------------------------------------------------
@dataclass
class CreateTopicRequestHeader:
    topic: str = required()
    defaultTopic: str = required()
    readQueueNums: int = required(java_int=True)
    writeQueueNums: int = required(java_int=True)
    perm: int = required(java_int=True)
    topicFilterType: str = required()
    topicSysFlag: int | None = optional(java_int=True)
    order: bool = required(False)
    attributes: str | None = optional()
    force: bool | None = optional()


# --- name server -----------------------------------------------------------------------------------------------
@dataclass
class RegisterBrokerRequestHeader:
    brokerName: str = required()
    brokerAddr: str = required()
    clusterName: str = required()
    haServerAddr: str = required()
    brokerId: int = required()
    compressed: bool | None = optional(False)
    bodyCrc32: int | None = optional(0)
    heartbeatTimeoutMillis: int | None = optional()
    enableActingMaster: bool | None = optional()


@dataclass
class RegisterBrokerResponseHeader:
    haServerAddr: str | None = optional()
    masterAddr: str | None = optional()


@dataclass
class UnRegisterBrokerRequestHeader:
    brokerName: str = required()
    brokerAddr: str = required()
    clusterName: str = required()
    brokerId: int = required()


@dataclass
class GetRouteInfoRequestHeader:
    topic: str = required()
    acceptStandardJsonOnly: bool | None = optional()


# --- admin and introspection requests (AdminBrokerProcessor, name server KV config) ----------------------
@dataclass
class DeleteTopicRequestHeader:
    topic: str = required()


@dataclass
class GetTopicStatsInfoRequestHeader:
    topic: str = required()


@dataclass
class GetConsumeStatsRequestHeader:
    consumerGroup: str = required()
    topic: str | None = optional()


@dataclass
class GetConsumerConnectionListRequestHeader:
    consumerGroup: str = required()


@dataclass
class GetProducerConnectionListRequestHeader:
    producerGroup: str = required()


@dataclass
class QueryTopicConsumeByWhoRequestHeader:
    topic: str = required()


@dataclass
class DeleteSubscriptionGroupRequestHeader:
    groupName: str = required()
    removeOffset: bool = optional(False)


@dataclass
class GetBrokerConfigResponseHeader:
    version: str = required()


@dataclass
class GetTopicsByClusterRequestHeader:
    cluster: str = required()


@dataclass
class PutKVConfigRequestHeader:
    namespace: str = required()
    key: str = required()
    value: str = required()


@dataclass
class GetKVConfigRequestHeader:
    namespace: str = required()
    key: str = required()


@dataclass
class GetKVConfigResponseHeader:
    value: str | None = optional()


@dataclass
class DeleteKVConfigRequestHeader:
    namespace: str = required()
    key: str = required()


@dataclass
class GetKVListByNamespaceRequestHeader:
    namespace: str = required()


@dataclass
class ResetOffsetRequestHeader:
    topic: str = required()
    group: str = required()
    timestamp: int = required()
    isForce: bool = required()


@dataclass
class GetConsumerStatusRequestHeader:
    topic: str = required()
    group: str = required()
    clientAddr: str | None = optional()


@dataclass
class GetConsumerRunningInfoRequestHeader:
    consumerGroup: str = required()
    clientId: str = required()
    jstackEnable: bool | None = optional()


@dataclass
class ConsumeMessageDirectlyResultRequestHeader:
    consumerGroup: str = required()
    clientId: str | None = optional()
    msgId: str | None = optional()
    brokerName: str | None = optional()


@dataclass
class QueryConsumeTimeSpanRequestHeader:
    topic: str = required()
    group: str = required()


@dataclass
class DeleteTopicFromNamesrvRequestHeader:
    topic: str = required()
    clusterName: str | None = optional()
