"""gRPC v2 messages ↔ RocketMQ messages, as Apache's proxy converts them (``SendMessageActivity.buildMessage`` one way,
``GrpcConverter.buildMessage`` the other).

To the store: user properties as they are (a name RocketMQ reserves → ILLEGAL_MESSAGE_PROPERTY_KEY), ``TAGS`` = tag,
``KEYS`` = the keys joined by a space, ``UNIQ_KEY`` = the client's message id (required), ``TRAN_MSG`` (+
``CHECK_IMMUNITY_TIME_IN_SECONDS``) for a transactional one, ``TIMER_DELIVER_MS`` = the delivery timestamp (the 5.x
timer), ``__SHARDINGKEY`` = the message group, ``PGROUP`` = the producer group (the topic, as Apache), ``BORN_HOST``,
``TRACE_CONTEXT``. From the store: the same properties back into system properties, the rest as user properties.

Transaction ids are self-describing (``<commitLogOffset>-<tranStateTableOffset>`` of the half message, hex): an
END_TRANSACTION needs both, and so nothing is kept per transaction (a restart loses no id). Pure functions.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from rmq_core.broker.grpc.messaging_v2 import V2, Code, MessageType
from rmq_core.message import (
    KEY_SEPARATOR,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_KEYS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageExt,
)

PROPERTY_SHARDING_KEY = "__SHARDINGKEY"  # MessageConst.PROPERTY_SHARDING_KEY
PROPERTY_BORN_HOST = "__BORNHOST"  # MessageConst.PROPERTY_BORN_HOST
PROPERTY_TRACE_CONTEXT = "TRACE_CONTEXT"  # MessageConst.PROPERTY_TRACE_CONTEXT
PROPERTY_POP_CK = "POP_CK"  # MessageConst.PROPERTY_POP_CK: a popped message's receipt handle
# the names a message's user properties may not use (MessageConst.STRING_HASH_SET, the ones a client could set)
RESERVED_PROPERTIES = frozenset(
    {
        "TRACE_ON", "MSG_REGION", "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID",
        "TRAN_MSG", "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG",
        "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME", "UNIQ_KEY", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME",
        "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET", "DUP_INFO", "EXTEND_UNIQ_INFO",
        "INSTANCE_ID", "CORRELATION_ID", "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "CLUSTER",
        "MSG_TYPE", "INNER_MULTI_QUEUE_OFFSET", "_CATALOG_ROUTE_KEY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC",
        "TIMER_DELAY_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_OUT_MS",
        "TIMER_DEL_UNIQKEY", "__SHARDINGKEY", "__BORNHOST", "BORN_TIMESTAMP", "TRACE_CONTEXT",
        "CHECK_IMMUNITY_TIME_IN_SECONDS",
    }
)  # fmt: skip
DIGEST_MD5 = 2  # DigestType.MD5
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class GrpcStatusError(Exception):
    """A request refused with a gRPC v2 status ``code`` (``Code``) and ``message``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def to_store_properties(msg: Any, producer_group: str, remote_address: str) -> dict[str, str]:
    """The RocketMQ properties of the v2 ``msg`` (``buildMessageProperty``); GrpcStatusError when refused."""
    props: dict[str, str] = {}
    for key, value in msg.user_properties.items():
        if key in RESERVED_PROPERTIES:
            raise GrpcStatusError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
        if _CONTROL.search(key) or _CONTROL.search(value):
            raise GrpcStatusError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "property cannot contain control character")
        props[key] = value
    sp = msg.system_properties
    if sp.HasField("tag"):
        tag = sp.tag
        if not tag.strip() or "|" in tag or _CONTROL.search(tag):
            raise GrpcStatusError(Code.ILLEGAL_MESSAGE_TAG, f"tag is illegal: {tag!r}")
        props[PROPERTY_TAGS] = tag
    for key in sp.keys:
        if not key.strip() or _CONTROL.search(key):
            raise GrpcStatusError(Code.ILLEGAL_MESSAGE_KEY, f"key is illegal: {key!r}")
    if sp.keys:
        props[PROPERTY_KEYS] = KEY_SEPARATOR.join(sp.keys)
    if not sp.message_id.strip():
        raise GrpcStatusError(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = sp.message_id
    if sp.message_type == MessageType.TRANSACTION:
        props[PROPERTY_TRANSACTION_PREPARED] = "true"
        if sp.HasField("orphaned_transaction_recovery_duration"):
            props[PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS] = str(sp.orphaned_transaction_recovery_duration.seconds)
    if sp.HasField("delivery_timestamp"):
        props[PROPERTY_TIMER_DELIVER_MS] = str(sp.delivery_timestamp.ToMilliseconds())
    props[PROPERTY_PRODUCER_GROUP] = producer_group
    if sp.HasField("message_group"):
        group = sp.message_group
        if not group.strip() or _CONTROL.search(group):
            raise GrpcStatusError(Code.ILLEGAL_MESSAGE_GROUP, f"message group is illegal: {group!r}")
        props[PROPERTY_SHARDING_KEY] = group
    if sp.HasField("trace_context") and sp.trace_context:
        props[PROPERTY_TRACE_CONTEXT] = sp.trace_context
    props[PROPERTY_BORN_HOST] = sp.born_host or remote_address
    return props


def message_type_of(props: dict[str, str]) -> int:
    """The v2 MessageType of a stored message (``GrpcConverter.buildMessageType``)."""
    if props.get(PROPERTY_TRANSACTION_PREPARED, "").lower() == "true":
        return MessageType.TRANSACTION
    if PROPERTY_TIMER_DELIVER_MS in props or props.get("DELAY", "0") not in ("", "0"):
        return MessageType.DELAY
    if PROPERTY_SHARDING_KEY in props:
        return MessageType.FIFO
    return MessageType.NORMAL


def _host_port(host: tuple[str, int]) -> str:
    return f"{host[0]}:{host[1]}"


def to_v2_message(msg: MessageExt, topic: str | None = None, receipt_handle: str | None = None) -> Any:
    """A stored message as the v2 Message a consumer (or a transaction check) reads (``GrpcConverter``)."""
    props = dict(msg.properties)
    out = V2.Message()
    out.topic.name = topic or msg.topic
    sp = out.system_properties
    if PROPERTY_TAGS in props:
        sp.tag = props[PROPERTY_TAGS]
    if props.get(PROPERTY_KEYS):
        sp.keys.extend(k for k in props[PROPERTY_KEYS].split(KEY_SEPARATOR) if k)
    sp.message_id = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id
    sp.body_digest.type = DIGEST_MD5  # as Apache's GrpcConverter: MD5, upper-case hex (the SDKs verify it)
    sp.body_digest.checksum = hashlib.md5(msg.body).hexdigest().upper()
    sp.body_encoding = 1  # IDENTITY: the store hands the body decompressed
    sp.message_type = message_type_of(props)
    sp.born_timestamp.FromMilliseconds(msg.born_timestamp)
    sp.born_host = props.get(PROPERTY_BORN_HOST) or _host_port(msg.born_host)
    sp.store_timestamp.FromMilliseconds(msg.store_timestamp)
    sp.store_host = _host_port(msg.store_host)
    deliver = props.get(PROPERTY_TIMER_DELIVER_MS)
    if deliver and deliver.isdigit():
        sp.delivery_timestamp.FromMilliseconds(int(deliver))
    if receipt_handle is not None:
        sp.receipt_handle = receipt_handle
    sp.queue_id = msg.queue_id
    sp.queue_offset = msg.queue_offset
    sp.delivery_attempt = msg.reconsume_times + 1
    if PROPERTY_SHARDING_KEY in props:
        sp.message_group = props[PROPERTY_SHARDING_KEY]
    if PROPERTY_TRACE_CONTEXT in props:
        sp.trace_context = props[PROPERTY_TRACE_CONTEXT]
    for key, value in props.items():
        if key not in RESERVED_PROPERTIES:
            out.user_properties[key] = value
    out.body = msg.body
    return out


def transaction_id(commit_log_offset: int, tran_state_table_offset: int) -> str:
    return f"{commit_log_offset:016X}-{tran_state_table_offset:016X}"


def parse_transaction_id(value: str) -> tuple[int, int]:
    """(commitLogOffset, tranStateTableOffset) of ``transaction_id``'s value; GrpcStatusError when it is none."""
    try:
        clo, tso = value.split("-")
        return int(clo, 16), int(tso, 16)
    except ValueError:
        raise GrpcStatusError(Code.INVALID_TRANSACTION_ID, f"transaction id is invalid: {value!r}") from None
