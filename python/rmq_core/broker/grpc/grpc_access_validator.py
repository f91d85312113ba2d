"""GrpcAccessValidator: the broker's plain ACL (``aclEnable``, plain_acl.yml: broker/acl/) applied to gRPC requests,
as Apache 5.x's proxy applies it (``PlainAccessResource.parse(GeneratedMessageV3, AuthenticationHeader)``).

Signature: metadata ``authorization: MQv2-HMAC-SHA1 Credential=<AK>[/…], SignedHeaders=x-mq-date-time,
Signature=<hex>`` where the signature is HMAC-SHA1(secret key, the ``x-mq-date-time`` header's value)
(``AuthorizationHeader``; compared as base64, its ``hexToBase64``). Resources per request (group = ``%RETRY%group``):
SendMessage the topic PUB (all messages one topic); Receive / Ack / ChangeInvisibleDuration / ForwardToDLQ /
QueryAssignment the group and the topic SUB; EndTransaction the topic PUB; QueryRoute the topic ANY; a consumer's
Heartbeat its group SUB; NotifyClientTermination its group SUB if named; Telemetry Settings each publishing topic PUB,
the subscription's group and topics SUB. Then the same rules as remoting (global / account white address, admin,
default perms). A refusal is a ``GrpcStatusError`` with Code UNAUTHORIZED (Apache 5.3's ``ResponseBuilder`` answers
authentication and authorization failures so). Stateless; the broker's loop.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any

from rmq_core.broker.acl.plain_permission_manager import ANY, PUB, SUB, AccessRequest, AclError
from rmq_core.broker.grpc.grpc_message_converter import GrpcStatusError
from rmq_core.broker.grpc.messaging_v2 import ClientType, Code
from rmq_core.common.mix_all import get_retry_topic

if TYPE_CHECKING:
    from rmq_core.broker.acl.plain_access_validator import PlainAccessValidator

AUTHORIZATION_HEADER = "authorization"
DATE_TIME_HEADER = "x-mq-date-time"
_NO_CODE = -1  # no gRPC request maps to an admin request code


def _authorization(header: str) -> tuple[str | None, str | None]:
    """(access key, signature as base64) of an ``authorization`` value (``AuthorizationHeader``)."""
    parts = header.split(" ", 1)
    if len(parts) != 2:
        raise AclError("authorization header is incorrect", "AuthorizationHeader")
    access_key = signature = None
    for item in parts[1].split(","):
        kv = item.strip().split("=", 1)
        if len(kv) != 2:
            raise AclError(f"authorization keyValues length is incorrect, actual length={len(kv)}", "")
        if kv[0] == "Credential":
            access_key = kv[1].split("/")[0]
        elif kv[0] == "Signature":
            try:
                signature = base64.b64encode(bytes.fromhex(kv[1])).decode("ascii")
            except ValueError:
                raise AclError("the signature is not hex", "") from None
    return access_key, signature


def _topic(res: dict[str, int], resource: Any, perm: int) -> None:
    if resource.name:
        res[resource.name] = perm


def _group(res: dict[str, int], resource: Any, perm: int) -> None:
    if resource.name:
        res[get_retry_topic(resource.name)] = perm


def grpc_resources(request: Any) -> dict[str, int]:
    """What ``request`` (a v2 request message, or a TelemetryCommand) needs, resource → permission."""
    name = request.DESCRIPTOR.name
    res: dict[str, int] = {}
    if name == "SendMessageRequest":
        if not request.messages:
            raise AclError("SendMessageRequest, messageCount is zero", "")
        topic = request.messages[0].topic
        if any(m.topic != topic for m in request.messages):
            raise AclError("SendMessageRequest, messages' topic is not consistent", "")
        _topic(res, topic, PUB)
    elif name == "ReceiveMessageRequest":
        _group(res, request.group, SUB)
        _topic(res, request.message_queue.topic, SUB)
    elif name in (
        "AckMessageRequest",
        "ForwardMessageToDeadLetterQueueRequest",
        "ChangeInvisibleDurationRequest",
        "QueryAssignmentRequest",
    ):
        _group(res, request.group, SUB)
        _topic(res, request.topic, SUB)
    elif name == "EndTransactionRequest":
        _topic(res, request.topic, PUB)
    elif name == "QueryRouteRequest":
        _topic(res, request.topic, ANY)
    elif name == "HeartbeatRequest":
        if request.client_type in (ClientType.PUSH_CONSUMER, ClientType.SIMPLE_CONSUMER):
            if not request.HasField("group"):
                raise AclError("Consumer heartbeat doesn't have group", "")
            _group(res, request.group, SUB)
    elif name == "NotifyClientTerminationRequest":
        _group(res, request.group, SUB)
    elif name == "TelemetryCommand" and request.WhichOneof("command") == "settings":
        settings = request.settings
        if not settings.HasField("publishing") and not settings.HasField("subscription"):
            raise AclError("settings command doesn't have publishing or subscription", "")
        for topic in settings.publishing.topics:
            _topic(res, topic, PUB)
        if settings.HasField("subscription"):
            _group(res, settings.subscription.group, SUB)
            for entry in settings.subscription.subscriptions:
                _topic(res, entry.topic, SUB)
    return res


def check_grpc_access(validator: PlainAccessValidator, request: Any, context: Any, remote_ip: str) -> None:
    """Raise ``GrpcStatusError(UNAUTHORIZED)`` when the plain ACL refuses ``request`` from this caller."""
    headers = dict(context.invocation_metadata() or ())
    manager = validator.manager
    manager.maybe_reload()
    try:
        access_key, signature = None, None
        if AUTHORIZATION_HEADER in headers:
            access_key, signature = _authorization(str(headers[AUTHORIZATION_HEADER]))
        req = AccessRequest(remote_ip, _NO_CODE, access_key, signature)
        req.signed_content = str(headers.get(DATE_TIME_HEADER, "")).encode("utf-8")
        req.find_resources = lambda: grpc_resources(request)
        manager.validate(req)
    except AclError as e:
        raise GrpcStatusError(Code.UNAUTHORIZED, e.message) from None
    except (binascii.Error, AttributeError, ValueError) as e:
        raise GrpcStatusError(Code.UNAUTHORIZED, f"the request cannot be checked: {e}") from None
