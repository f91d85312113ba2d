"""The ``apache.rocketmq.v2`` protocol (RocketMQ 5's gRPC MessagingService), written from its published field facts.

No .proto file is copied or compiled: the messages below are rocketmq-apis' ``apache/rocketmq/v2/definition.proto`` and
``service.proto`` (read at 3e60073) restated as a table of (field, number, type), built into protobuf descriptors in a
private descriptor pool at import (so a process that also imports a client's generated stubs sees no clash), and the
message classes made from them. Only the messages of the RPCs rmq_core serves are here; a field missing from the table
is skipped on decode as protobuf skips any unknown field. Field numbers, types and ``optional`` (presence) are the
wire contract: tests/grpc checks them against the real client (rocketmq-python-client).

``V2.<Message>`` are the classes; enum values are plain ints in the ``Code``/``MessageType``/... classes below.
Needs the ``protobuf`` package (the ``rmq_core[grpc]`` extra). Immutable after import; thread-safe.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, duration_pb2, message_factory, timestamp_pb2

PACKAGE = "apache.rocketmq.v2"
SERVICE = f"{PACKAGE}.MessagingService"

# (name, number, type, flags): type is a scalar name, ".Message" (this package), "google.X" (well-known), "E.Enum"
# or "map" (map<string, string>); flags: "r" repeated, "o" proto3 optional, "1:<oneof>" a member of a oneof
_Field = tuple[str, int, str, str]

_ENUMS: dict[str, list[tuple[str, int]]] = {
    "TransactionResolution": [("TRANSACTION_RESOLUTION_UNSPECIFIED", 0), ("COMMIT", 1), ("ROLLBACK", 2)],
    "TransactionSource": [("SOURCE_UNSPECIFIED", 0), ("SOURCE_CLIENT", 1), ("SOURCE_SERVER_CHECK", 2)],
    "Permission": [("PERMISSION_UNSPECIFIED", 0), ("NONE", 1), ("READ", 2), ("WRITE", 3), ("READ_WRITE", 4)],
    "FilterType": [("FILTER_TYPE_UNSPECIFIED", 0), ("TAG", 1), ("SQL", 2)],
    "AddressScheme": [("ADDRESS_SCHEME_UNSPECIFIED", 0), ("IPv4", 1), ("IPv6", 2), ("DOMAIN_NAME", 3)],
    "MessageType": [
        ("MESSAGE_TYPE_UNSPECIFIED", 0),
        ("NORMAL", 1),
        ("FIFO", 2),
        ("DELAY", 3),
        ("TRANSACTION", 4),
        ("LITE", 5),
        ("PRIORITY", 6),
    ],
    "DigestType": [("DIGEST_TYPE_UNSPECIFIED", 0), ("CRC32", 1), ("MD5", 2), ("SHA1", 3)],
    "ClientType": [
        ("CLIENT_TYPE_UNSPECIFIED", 0),
        ("PRODUCER", 1),
        ("PUSH_CONSUMER", 2),
        ("SIMPLE_CONSUMER", 3),
        ("PULL_CONSUMER", 4),
        ("LITE_PUSH_CONSUMER", 5),
        ("LITE_SIMPLE_CONSUMER", 6),
    ],
    "Encoding": [("ENCODING_UNSPECIFIED", 0), ("IDENTITY", 1), ("GZIP", 2)],
    "Language": [
        ("LANGUAGE_UNSPECIFIED", 0),
        ("JAVA", 1),
        ("CPP", 2),
        ("DOT_NET", 3),
        ("GOLANG", 4),
        ("RUST", 5),
        ("PYTHON", 6),
        ("PHP", 7),
        ("NODE_JS", 8),
        ("RUBY", 9),
        ("OBJECTIVE_C", 10),
        ("DART", 11),
        ("KOTLIN", 12),
    ],
    # Code: the values rmq_core answers with (an unknown enum value still decodes, as an int)
    "Code": [
        ("CODE_UNSPECIFIED", 0),
        ("OK", 20000),
        ("MULTIPLE_RESULTS", 30000),
        ("BAD_REQUEST", 40000),
        ("ILLEGAL_ACCESS_POINT", 40001),
        ("ILLEGAL_TOPIC", 40002),
        ("ILLEGAL_CONSUMER_GROUP", 40003),
        ("ILLEGAL_MESSAGE_TAG", 40004),
        ("ILLEGAL_MESSAGE_KEY", 40005),
        ("ILLEGAL_MESSAGE_GROUP", 40006),
        ("ILLEGAL_MESSAGE_PROPERTY_KEY", 40007),
        ("INVALID_TRANSACTION_ID", 40008),
        ("ILLEGAL_MESSAGE_ID", 40009),
        ("ILLEGAL_FILTER_EXPRESSION", 40010),
        ("ILLEGAL_INVISIBLE_TIME", 40011),
        ("ILLEGAL_DELIVERY_TIME", 40012),
        ("INVALID_RECEIPT_HANDLE", 40013),
        ("MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", 40014),
        ("UNRECOGNIZED_CLIENT_TYPE", 40015),
        ("MESSAGE_CORRUPTED", 40016),
        ("CLIENT_ID_REQUIRED", 40017),
        ("ILLEGAL_POLLING_TIME", 40018),
        ("ILLEGAL_OFFSET", 40019),
        ("UNAUTHORIZED", 40100),
        ("FORBIDDEN", 40300),
        ("NOT_FOUND", 40400),
        ("MESSAGE_NOT_FOUND", 40401),
        ("TOPIC_NOT_FOUND", 40402),
        ("CONSUMER_GROUP_NOT_FOUND", 40403),
        ("OFFSET_NOT_FOUND", 40404),
        ("REQUEST_TIMEOUT", 40800),
        ("PAYLOAD_TOO_LARGE", 41300),
        ("MESSAGE_BODY_TOO_LARGE", 41301),
        ("MESSAGE_BODY_EMPTY", 41302),
        ("PRECONDITION_FAILED", 42800),
        ("TOO_MANY_REQUESTS", 42900),
        ("REQUEST_HEADER_FIELDS_TOO_LARGE", 43100),
        ("MESSAGE_PROPERTIES_TOO_LARGE", 43101),
        ("INTERNAL_ERROR", 50000),
        ("INTERNAL_SERVER_ERROR", 50001),
        ("HA_NOT_AVAILABLE", 50002),
        ("NOT_IMPLEMENTED", 50100),
        ("PROXY_TIMEOUT", 50400),
        ("MASTER_PERSISTENCE_TIMEOUT", 50401),
        ("SLAVE_PERSISTENCE_TIMEOUT", 50402),
        ("UNSUPPORTED", 50500),
        ("VERSION_UNSUPPORTED", 50501),
        ("VERIFY_FIFO_MESSAGE_UNSUPPORTED", 50502),
        ("FAILED_TO_CONSUME_MESSAGE", 60000),
    ],
}

_MESSAGES: dict[str, list[_Field]] = {
    # definition.proto
    "FilterExpression": [("type", 1, "E.FilterType", ""), ("expression", 2, "string", "")],
    "RetryPolicy": [
        ("max_attempts", 1, "int32", ""),
        ("exponential_backoff", 2, ".ExponentialBackoff", "1:strategy"),
        ("customized_backoff", 3, ".CustomizedBackoff", "1:strategy"),
    ],
    "ExponentialBackoff": [
        ("initial", 1, "google.Duration", ""),
        ("max", 2, "google.Duration", ""),
        ("multiplier", 3, "float", ""),
    ],
    "CustomizedBackoff": [("next", 1, "google.Duration", "r")],
    "Resource": [("resource_namespace", 1, "string", ""), ("name", 2, "string", "")],
    "SubscriptionEntry": [("topic", 1, ".Resource", ""), ("expression", 2, ".FilterExpression", "")],
    "Address": [("host", 1, "string", ""), ("port", 2, "int32", "")],
    "Endpoints": [("scheme", 1, "E.AddressScheme", ""), ("addresses", 2, ".Address", "r")],
    "Broker": [("name", 1, "string", ""), ("id", 2, "int32", ""), ("endpoints", 3, ".Endpoints", "")],
    "MessageQueue": [
        ("topic", 1, ".Resource", ""),
        ("id", 2, "int32", ""),
        ("permission", 3, "E.Permission", ""),
        ("broker", 4, ".Broker", ""),
        ("accept_message_types", 5, "E.MessageType", "r"),
    ],
    "Digest": [("type", 1, "E.DigestType", ""), ("checksum", 2, "string", "")],
    "SystemProperties": [
        ("tag", 1, "string", "o"),
        ("keys", 2, "string", "r"),
        ("message_id", 3, "string", ""),
        ("body_digest", 4, ".Digest", ""),
        ("body_encoding", 5, "E.Encoding", ""),
        ("message_type", 6, "E.MessageType", ""),
        ("born_timestamp", 7, "google.Timestamp", ""),
        ("born_host", 8, "string", ""),
        ("store_timestamp", 9, "google.Timestamp", "o"),
        ("store_host", 10, "string", ""),
        ("delivery_timestamp", 11, "google.Timestamp", "o"),
        ("receipt_handle", 12, "string", "o"),
        ("queue_id", 13, "int32", ""),
        ("queue_offset", 14, "int64", "o"),
        ("invisible_duration", 15, "google.Duration", "o"),
        ("delivery_attempt", 16, "int32", "o"),
        ("message_group", 17, "string", "o"),
        ("trace_context", 18, "string", "o"),
        ("orphaned_transaction_recovery_duration", 19, "google.Duration", "o"),
        ("dead_letter_queue", 20, ".DeadLetterQueue", "o"),
    ],
    "DeadLetterQueue": [("topic", 1, "string", ""), ("message_id", 2, "string", "")],
    "Message": [
        ("topic", 1, ".Resource", ""),
        ("user_properties", 2, "map", ""),
        ("system_properties", 3, ".SystemProperties", ""),
        ("body", 4, "bytes", ""),
    ],
    "Assignment": [("message_queue", 1, ".MessageQueue", "")],
    "Status": [("code", 1, "E.Code", ""), ("message", 2, "string", "")],
    "UA": [
        ("language", 1, "E.Language", ""),
        ("version", 2, "string", ""),
        ("platform", 3, "string", ""),
        ("hostname", 4, "string", ""),
    ],
    "Settings": [
        ("client_type", 1, "E.ClientType", "o"),
        ("access_point", 2, ".Endpoints", "o"),
        ("backoff_policy", 3, ".RetryPolicy", "o"),
        ("request_timeout", 4, "google.Duration", "o"),
        ("publishing", 5, ".Publishing", "1:pub_sub"),
        ("subscription", 6, ".Subscription", "1:pub_sub"),
        ("user_agent", 7, ".UA", ""),
        ("metric", 8, ".Metric", ""),
        ("client_properties", 9, "map", ""),
    ],
    "Publishing": [
        ("topics", 1, ".Resource", "r"),
        ("max_body_size", 2, "int32", ""),
        ("validate_message_type", 3, "bool", ""),
    ],
    "Subscription": [
        ("group", 1, ".Resource", "o"),
        ("subscriptions", 2, ".SubscriptionEntry", "r"),
        ("fifo", 3, "bool", "o"),
        ("receive_batch_size", 4, "int32", "o"),
        ("long_polling_timeout", 5, "google.Duration", "o"),
    ],
    "Metric": [("on", 1, "bool", ""), ("endpoints", 2, ".Endpoints", "o")],
    # service.proto
    "QueryRouteRequest": [("topic", 1, ".Resource", ""), ("endpoints", 2, ".Endpoints", "")],
    "QueryRouteResponse": [("status", 1, ".Status", ""), ("message_queues", 2, ".MessageQueue", "r")],
    "SendMessageRequest": [("messages", 1, ".Message", "r")],
    "SendResultEntry": [
        ("status", 1, ".Status", ""),
        ("message_id", 2, "string", ""),
        ("transaction_id", 3, "string", ""),
        ("offset", 4, "int64", ""),
        ("recall_handle", 5, "string", ""),
    ],
    "SendMessageResponse": [("status", 1, ".Status", ""), ("entries", 2, ".SendResultEntry", "r")],
    "QueryAssignmentRequest": [
        ("topic", 1, ".Resource", ""),
        ("group", 2, ".Resource", ""),
        ("endpoints", 3, ".Endpoints", ""),
    ],
    "QueryAssignmentResponse": [("status", 1, ".Status", ""), ("assignments", 2, ".Assignment", "r")],
    "ReceiveMessageRequest": [
        ("group", 1, ".Resource", ""),
        ("message_queue", 2, ".MessageQueue", ""),
        ("filter_expression", 3, ".FilterExpression", ""),
        ("batch_size", 4, "int32", ""),
        ("invisible_duration", 5, "google.Duration", "o"),
        ("auto_renew", 6, "bool", ""),
        ("long_polling_timeout", 7, "google.Duration", "o"),
        ("attempt_id", 8, "string", "o"),
    ],
    "ReceiveMessageResponse": [
        ("status", 1, ".Status", "1:content"),
        ("message", 2, ".Message", "1:content"),
        ("delivery_timestamp", 3, "google.Timestamp", "1:content"),
    ],
    "AckMessageEntry": [("message_id", 1, "string", ""), ("receipt_handle", 2, "string", "")],
    "AckMessageRequest": [
        ("group", 1, ".Resource", ""),
        ("topic", 2, ".Resource", ""),
        ("entries", 3, ".AckMessageEntry", "r"),
    ],
    "AckMessageResultEntry": [
        ("message_id", 1, "string", ""),
        ("receipt_handle", 2, "string", ""),
        ("status", 3, ".Status", ""),
    ],
    "AckMessageResponse": [("status", 1, ".Status", ""), ("entries", 2, ".AckMessageResultEntry", "r")],
    "ForwardMessageToDeadLetterQueueRequest": [
        ("group", 1, ".Resource", ""),
        ("topic", 2, ".Resource", ""),
        ("receipt_handle", 3, "string", ""),
        ("message_id", 4, "string", ""),
        ("delivery_attempt", 5, "int32", ""),
        ("max_delivery_attempts", 6, "int32", ""),
    ],
    "ForwardMessageToDeadLetterQueueResponse": [("status", 1, ".Status", "")],
    "HeartbeatRequest": [("group", 1, ".Resource", "o"), ("client_type", 2, "E.ClientType", "")],
    "HeartbeatResponse": [("status", 1, ".Status", "")],
    "EndTransactionRequest": [
        ("topic", 1, ".Resource", ""),
        ("message_id", 2, "string", ""),
        ("transaction_id", 3, "string", ""),
        ("resolution", 4, "E.TransactionResolution", ""),
        ("source", 5, "E.TransactionSource", ""),
        ("trace_context", 6, "string", ""),
    ],
    "EndTransactionResponse": [("status", 1, ".Status", "")],
    "PrintThreadStackTraceCommand": [("nonce", 1, "string", "")],
    "ReconnectEndpointsCommand": [("nonce", 1, "string", "")],
    "ThreadStackTrace": [("nonce", 1, "string", ""), ("thread_stack_trace", 2, "string", "o")],
    "VerifyMessageCommand": [("nonce", 1, "string", ""), ("message", 2, ".Message", "")],
    "VerifyMessageResult": [("nonce", 1, "string", "")],
    "RecoverOrphanedTransactionCommand": [("message", 1, ".Message", ""), ("transaction_id", 2, "string", "")],
    "TelemetryCommand": [
        ("status", 1, ".Status", "o"),
        ("settings", 2, ".Settings", "1:command"),
        ("thread_stack_trace", 3, ".ThreadStackTrace", "1:command"),
        ("verify_message_result", 4, ".VerifyMessageResult", "1:command"),
        ("recover_orphaned_transaction_command", 5, ".RecoverOrphanedTransactionCommand", "1:command"),
        ("print_thread_stack_trace_command", 6, ".PrintThreadStackTraceCommand", "1:command"),
        ("verify_message_command", 7, ".VerifyMessageCommand", "1:command"),
        ("reconnect_endpoints_command", 8, ".ReconnectEndpointsCommand", "1:command"),
    ],
    "NotifyClientTerminationRequest": [("group", 1, ".Resource", "o")],
    "NotifyClientTerminationResponse": [("status", 1, ".Status", "")],
    "ChangeInvisibleDurationRequest": [
        ("group", 1, ".Resource", ""),
        ("topic", 2, ".Resource", ""),
        ("receipt_handle", 3, "string", ""),
        ("invisible_duration", 4, "google.Duration", ""),
        ("message_id", 5, "string", ""),
    ],
    "ChangeInvisibleDurationResponse": [("status", 1, ".Status", ""), ("receipt_handle", 2, "string", "")],
}

# (rpc, request, response, client streaming, server streaming)
RPCS: list[tuple[str, str, str, bool, bool]] = [
    ("QueryRoute", "QueryRouteRequest", "QueryRouteResponse", False, False),
    ("Heartbeat", "HeartbeatRequest", "HeartbeatResponse", False, False),
    ("SendMessage", "SendMessageRequest", "SendMessageResponse", False, False),
    ("QueryAssignment", "QueryAssignmentRequest", "QueryAssignmentResponse", False, False),
    ("ReceiveMessage", "ReceiveMessageRequest", "ReceiveMessageResponse", False, True),
    ("AckMessage", "AckMessageRequest", "AckMessageResponse", False, False),
    (
        "ForwardMessageToDeadLetterQueue",
        "ForwardMessageToDeadLetterQueueRequest",
        "ForwardMessageToDeadLetterQueueResponse",
        False,
        False,
    ),
    ("EndTransaction", "EndTransactionRequest", "EndTransactionResponse", False, False),
    ("Telemetry", "TelemetryCommand", "TelemetryCommand", True, True),
    ("NotifyClientTermination", "NotifyClientTerminationRequest", "NotifyClientTerminationResponse", False, False),
    ("ChangeInvisibleDuration", "ChangeInvisibleDurationRequest", "ChangeInvisibleDurationResponse", False, False),
]

_FDP = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "string": _FDP.TYPE_STRING,
    "bytes": _FDP.TYPE_BYTES,
    "int32": _FDP.TYPE_INT32,
    "int64": _FDP.TYPE_INT64,
    "bool": _FDP.TYPE_BOOL,
    "float": _FDP.TYPE_FLOAT,
}
_WELL_KNOWN = {"google.Duration": ".google.protobuf.Duration", "google.Timestamp": ".google.protobuf.Timestamp"}


def _field(msg: descriptor_pb2.DescriptorProto, spec: _Field, oneofs: dict[str, int]) -> None:
    name, number, kind, flags = spec
    f = msg.field.add(name=name, number=number, json_name=_camel(name))
    f.label = _FDP.LABEL_REPEATED if flags == "r" or kind == "map" else _FDP.LABEL_OPTIONAL
    if kind in _SCALARS:
        f.type = _SCALARS[kind]
    elif kind.startswith("E."):
        f.type, f.type_name = _FDP.TYPE_ENUM, f".{PACKAGE}.{kind[2:]}"
    elif kind == "map":
        entry_name = "".join(p.capitalize() for p in name.split("_")) + "Entry"
        entry = msg.nested_type.add(name=entry_name)
        entry.options.map_entry = True
        for i, key in enumerate(("key", "value"), 1):
            entry.field.add(name=key, number=i, json_name=key, label=_FDP.LABEL_OPTIONAL, type=_FDP.TYPE_STRING)
        f.type, f.type_name = _FDP.TYPE_MESSAGE, f".{PACKAGE}.{msg.name}.{entry_name}"
    else:
        f.type = _FDP.TYPE_MESSAGE
        f.type_name = _WELL_KNOWN.get(kind) or f".{PACKAGE}.{kind[1:]}"
    if flags.startswith("1:"):
        f.oneof_index = oneofs[flags[2:]]
    elif flags == "o":  # proto3 optional: presence through a synthetic oneof, declared after the real ones
        f.proto3_optional = True
        oneofs[f"_{name}"] = len(oneofs)
        f.oneof_index = oneofs[f"_{name}"]


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(
        name="rmq_core/apache/rocketmq/v2/messaging.proto",  # not rocketmq-apis' file names: no clash with stubs
        package=PACKAGE,
        syntax="proto3",
        dependency=["google/protobuf/duration.proto", "google/protobuf/timestamp.proto"],
    )
    for enum_name, values in _ENUMS.items():
        enum = fd.enum_type.add(name=enum_name)
        for value_name, number in values:
            enum.value.add(name=value_name, number=number)
    for msg_name, fields in _MESSAGES.items():
        msg = fd.message_type.add(name=msg_name)
        real = sorted({flags[2:] for _, _, _, flags in fields if flags.startswith("1:")}, key=str)
        oneofs = {o: i for i, o in enumerate(real)}
        for spec in fields:
            if spec[3] != "o":
                _field(msg, spec, oneofs)
        for spec in fields:
            if spec[3] == "o":
                _field(msg, spec, oneofs)
        for oneof in oneofs:
            msg.oneof_decl.add(name=oneof)
    return fd


def _build() -> dict[str, Any]:
    pool = descriptor_pool.DescriptorPool()
    for dep in (duration_pb2, timestamp_pb2):
        pool.AddSerializedFile(dep.DESCRIPTOR.serialized_pb)
    pool.Add(_file())
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}")) for name in _MESSAGES
    }


class _Classes:
    def __init__(self, classes: dict[str, Any]) -> None:
        self.__dict__.update(classes)

    def __getattr__(self, name: str) -> Any:  # for the type checker: every message class is Any
        raise AttributeError(name)


V2: Any = _Classes(_build())


def _enum_class(name: str) -> type:
    return type(name, (), dict(_ENUMS[name]))


Code: Any = _enum_class("Code")
MessageType: Any = _enum_class("MessageType")
ClientType: Any = _enum_class("ClientType")
Permission: Any = _enum_class("Permission")
TransactionResolution: Any = _enum_class("TransactionResolution")
TransactionSource: Any = _enum_class("TransactionSource")
FilterType: Any = _enum_class("FilterType")
AddressScheme: Any = _enum_class("AddressScheme")
