"""GrpcValidator: the names a v2 request carries checked before it is served, as Apache 5.3's proxy does
(``GrpcValidator.validateTopic/validateConsumerGroup``, called by each activity): a blank, too long or illegal
(outside ``[%|a-zA-Z0-9_-]``) topic, or a system topic (TBW102, ``rmq_sys_*``…) → ILLEGAL_TOPIC; such a group, or a
system group (``CID_RMQ_SYS_*``) → ILLEGAL_CONSUMER_GROUP. Which fields per request: SendMessage / EndTransaction /
QueryRoute the topic; Receive / Ack / ChangeInvisibleDuration / ForwardToDLQ / QueryAssignment both; Heartbeat and
NotifyClientTermination the group they name; a Settings its publishing topics and subscription group. An unknown
(legal) name is the handler's (TOPIC_NOT_FOUND / CONSUMER_GROUP_NOT_FOUND). Stateless.
"""

from __future__ import annotations

from typing import Any

from rmq_core.broker.grpc.grpc_message_converter import GrpcStatusError
from rmq_core.broker.grpc.messaging_v2 import Code
from rmq_core.broker.subscription_group_manager import is_sys_consumer_group
from rmq_core.common.mix_all import is_system_topic, validate_group, validate_topic

_TOPIC_AND_GROUP = (
    "AckMessageRequest",
    "ChangeInvisibleDurationRequest",
    "ForwardMessageToDeadLetterQueueRequest",
    "QueryAssignmentRequest",
)


def check_topic(name: str) -> None:
    reason = validate_topic(name)
    if reason is not None:
        raise GrpcStatusError(Code.ILLEGAL_TOPIC, reason)
    if is_system_topic(name):
        raise GrpcStatusError(Code.ILLEGAL_TOPIC, "cannot access system topic")


def check_group(name: str) -> None:
    reason = validate_group(name)
    if reason is not None:
        raise GrpcStatusError(Code.ILLEGAL_CONSUMER_GROUP, reason)
    if is_sys_consumer_group(name):
        raise GrpcStatusError(Code.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")


def check_names(request: Any) -> None:
    """Raise ``GrpcStatusError`` when ``request`` (a v2 request, or a TelemetryCommand) names an illegal topic/group."""
    name = request.DESCRIPTOR.name
    if name == "SendMessageRequest":
        for m in request.messages[:1]:  # one topic per request (checked by the send itself)
            check_topic(m.topic.name)
    elif name in ("EndTransactionRequest", "QueryRouteRequest"):
        check_topic(request.topic.name)
    elif name == "ReceiveMessageRequest":
        check_topic(request.message_queue.topic.name)
        check_group(request.group.name)
    elif name in _TOPIC_AND_GROUP:
        check_topic(request.topic.name)
        check_group(request.group.name)
    elif name in ("HeartbeatRequest", "NotifyClientTerminationRequest"):
        if request.group.name:  # a consumer's (a producer's names none)
            check_group(request.group.name)
    elif name == "TelemetryCommand" and request.WhichOneof("command") == "settings":
        settings = request.settings
        for topic in settings.publishing.topics:
            check_topic(topic.name)
        if settings.HasField("subscription"):
            check_group(settings.subscription.group.name)
