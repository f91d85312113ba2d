"""GrpcConsumerService: the consumer RPCs of the gRPC endpoint over the broker's POP (``controller.pop_service``,
broker/pop/), as Apache's proxy answers them in local mode (proxy ``grpc/v2/consumer/*Activity.java``,
``route/RouteActivity.queryAssignment``).

- QueryAssignment: one assignment, this broker, queue id −1 (a receive pops the whole topic), as Apache.
- ReceiveMessage (server streaming): one status frame (OK, MESSAGE_NOT_FOUND for an empty poll, TOO_MANY_REQUESTS,
  or the refusal), then one frame per message (receipt handle = its POP_CK, delivery_attempt = reconsumeTimes + 1).
  Polling time: the request's, else the deadline left − half the client's request timeout, clamped to [5 s, 20 s]
  and to the deadline (less than 5 s left → ILLEGAL_POLLING_TIME). Invisible time: 60 s with auto_renew, else the
  request's, at least 10 s and at most 12 h (ILLEGAL_INVISIBLE_TIME). FIFO when the group consumes orderly. A
  receive before the client's Settings is served from the request and the group's config (Apache fails it).
  Messages past the client's max attempts go to the DLQ and are acked, not delivered (PopMessageResultFilterImpl).
- AckMessage: one status per entry; a malformed, expired (popTime + invisible passed) or foreign handle →
  INVALID_RECEIPT_HANDLE and nothing acked. ChangeInvisibleDuration: the new handle. ForwardMessageToDeadLetterQueue:
  CONSUMER_SEND_MSG_BACK with delay level −1 (→ %DLQ%group), then the ack.
- auto_renew (push consumers): the server renews the invisible time while the client holds a message and maps the
  client's original handle to the latest (``GrpcReceiptHandleManager``).
Without a POP service (a broker built without broker/pop/) these answer NOT_IMPLEMENTED. On the broker's loop only.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from rmq_core.broker.grpc.grpc_message_converter import PROPERTY_POP_CK, GrpcStatusError, to_v2_message
from rmq_core.broker.grpc.grpc_messaging_service import client_id_of, grpc_code, status
from rmq_core.broker.grpc.grpc_receipt_handle_manager import GrpcReceiptHandleManager
from rmq_core.broker.grpc.messaging_v2 import V2, Code, FilterType, Permission
from rmq_core.common.perm_name import is_readable
from rmq_core.message import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, MessageExt, decode_messages
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from rmq_core.broker.grpc.grpc_messaging_service import GrpcMessagingService

log = logging.getLogger(__name__)

MIN_LONG_POLLING_MS = 5_000  # ProxyConfig.grpcClientConsumerMinLongPollingTimeoutMillis
MAX_LONG_POLLING_MS = 20_000  # grpcClientConsumerMaxLongPollingTimeoutMillis
DEFAULT_INVISIBLE_MS = 60_000  # defaultInvisibleTimeMills: a push consumer's (auto_renew) receive
MIN_INVISIBLE_MS_FOR_RECV = 10_000  # minInvisibleTimeMillsForRecv
MAX_INVISIBLE_MS = 12 * 3_600_000  # maxInvisibleTimeMills
MAX_BATCH_SIZE = 32  # a pop's maxMsgNums
DEFAULT_MAX_ATTEMPTS = 17  # retryMaxTimes 16 + 1, when the client's Settings did not say
_POP_REFUSALS: dict[int, int] = {
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
    ResponseCode.NO_PERMISSION: Code.FORBIDDEN,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: Code.ILLEGAL_FILTER_EXPRESSION,
    ResponseCode.INVALID_PARAMETER: Code.BAD_REQUEST,
    ResponseCode.SYSTEM_ERROR: Code.INTERNAL_SERVER_ERROR,
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
}


def _millis(duration: Any) -> int:
    return int(duration.seconds) * 1000 + int(duration.nanos) // 1_000_000


async def _settled(value: Any) -> Any:
    """The PopService's ack / change-invisible are plain functions, its pop a coroutine: either works."""
    return await value if inspect.isawaitable(value) else value


class GrpcConsumerService:
    def __init__(self, messaging: GrpcMessagingService) -> None:
        self.messaging = messaging
        self.controller = messaging.controller
        self.renewal = GrpcReceiptHandleManager(lambda: getattr(self.controller, "pop_service", None), self._now_ms)

    def _pop(self) -> Any:
        pop = getattr(self.controller, "pop_service", None)
        if pop is None:
            raise GrpcStatusError(Code.NOT_IMPLEMENTED, "this broker serves no POP consumption")
        return pop

    def _now_ms(self) -> int:
        return self.controller.now_ms()

    # --- QueryAssignment -----------------------------------------------------------------------------------------
    async def query_assignment(self, request: Any, context: Any) -> Any:
        self._pop()
        topic = request.topic.name
        tc = self.controller.topic_config_manager.select_topic_config(topic)
        if tc is None:
            return V2.QueryAssignmentResponse(status=status(Code.TOPIC_NOT_FOUND, f"topic {topic} not found"))
        cfg = self.controller.broker_config
        response = V2.QueryAssignmentResponse(status=status(Code.OK))
        if is_readable(tc.perm & cfg.broker_permission) and cfg.broker_id == 0:
            q = response.assignments.add().message_queue
            q.topic.CopyFrom(request.topic)
            q.id = -1
            q.permission = Permission.READ_WRITE
            q.broker.name, q.broker.id = cfg.broker_name, 0
            q.broker.endpoints.scheme = 1
            host, port = self.messaging.advertised
            q.broker.endpoints.addresses.add(host=host, port=port)
        return response

    # --- ReceiveMessage ------------------------------------------------------------------------------------------
    def _polling_ms(self, request: Any, context: Any, settings: Any) -> int:
        left_s = context.time_remaining()
        left = None if left_s is None else int(left_s * 1000)
        if request.HasField("long_polling_timeout"):
            polling = _millis(request.long_polling_timeout)
        elif left is not None:
            timeout = _millis(settings.request_timeout) if settings is not None else 3000
            polling = left - timeout // 2
        else:
            polling = MAX_LONG_POLLING_MS
        polling = min(max(polling, MIN_LONG_POLLING_MS), MAX_LONG_POLLING_MS)
        if left is not None and polling > left:
            if left < MIN_LONG_POLLING_MS:
                raise GrpcStatusError(
                    Code.ILLEGAL_POLLING_TIME,
                    "The deadline time remaining is not enough for polling, please check network condition",
                )
            polling = left
        return polling

    async def receive_message(self, request: Any, context: Any) -> AsyncIterator[Any]:
        pop = self._pop()
        channel = self.messaging.client_of(context)
        settings = channel.settings if channel is not None else None
        group, topic = request.group.name, request.message_queue.topic.name
        if not group or not topic:
            raise GrpcStatusError(Code.BAD_REQUEST, "group and topic are required")
        polling = self._polling_ms(request, context, settings)
        if request.auto_renew:
            invisible = DEFAULT_INVISIBLE_MS
        else:
            invisible = _millis(request.invisible_duration)
            if not MIN_INVISIBLE_MS_FOR_RECV <= invisible <= MAX_INVISIBLE_MS:
                raise GrpcStatusError(
                    Code.ILLEGAL_INVISIBLE_TIME,
                    f"the invisible time must be within [{MIN_INVISIBLE_MS_FOR_RECV}, {MAX_INVISIBLE_MS}] ms",
                )
        batch = request.batch_size
        if not 0 < batch <= MAX_BATCH_SIZE:
            raise GrpcStatusError(Code.BAD_REQUEST, f"the batch size must be within [1, {MAX_BATCH_SIZE}]")
        expr = request.filter_expression
        expression_type = "SQL92" if expr.type == FilterType.SQL else "TAG"
        group_cfg = self.controller.subscription_group_manager.find_subscription_group_config(group)
        fifo = bool(group_cfg is not None and group_cfg.consume_message_orderly)
        if settings is not None and settings.backoff_policy.max_attempts > 0:
            max_attempts = settings.backoff_policy.max_attempts
        else:
            max_attempts = group_cfg.retry_max_times + 1 if group_cfg is not None else DEFAULT_MAX_ATTEMPTS
        result = await pop.pop(
            group,
            topic,
            -1,
            batch,
            invisible,
            polling,
            1,  # ConsumeInitMode.MAX
            expression_type,
            expr.expression or "*",
            fifo,
            request.attempt_id if request.HasField("attempt_id") else None,
        )
        frames = await self._frames(group, topic, result, max_attempts)
        client_id = client_id_of(context)
        if request.auto_renew and client_id:  # the server renews the invisible time while the client holds them
            expires = result.pop_time + result.invisible_time
            for frame in frames:
                if frame.WhichOneof("content") == "message":
                    self.renewal.hold(client_id, group, topic, frame.message.system_properties.receipt_handle, expires)
        for frame in frames:
            yield frame
        # last, the transport delivery timestamp (Apache's ReceiveMessageResponseStreamWriter.onComplete): the
        # Python SDK's push consumer computes its receive latency from it and fails the batch without it
        done = V2.ReceiveMessageResponse()
        done.delivery_timestamp.FromMilliseconds(self._now_ms())
        yield done

    async def _frames(self, group: str, topic: str, result: Any, max_attempts: int) -> list[Any]:
        """The status frame, then one frame per message (``ReceiveMessageResponseStreamWriter.writeAndComplete``)."""
        if result.messages:
            deliver = [m for m in result.messages if not await self._past_max_attempts(group, topic, m, max_attempts)]
            if not deliver:
                return [V2.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no match message"))]
            frames = [V2.ReceiveMessageResponse(status=status(Code.OK))]
            for m in deliver:
                frames.append(
                    V2.ReceiveMessageResponse(message=to_v2_message(m, topic, m.properties.get(PROPERTY_POP_CK)))
                )
            return frames
        if result.status.name == "POLLING_FULL":
            return [V2.ReceiveMessageResponse(status=status(Code.TOO_MANY_REQUESTS, "polling full"))]
        if result.code in _POP_REFUSALS:
            return [V2.ReceiveMessageResponse(status=status(_POP_REFUSALS[result.code], result.remark or ""))]
        return [V2.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message"))]

    async def _past_max_attempts(self, group: str, topic: str, msg: MessageExt, max_attempts: int) -> bool:
        """A message delivered ``max_attempts`` times already goes to the DLQ (and is acked) instead."""
        if msg.reconsume_times < max_attempts:
            return False
        handle = msg.properties.get(PROPERTY_POP_CK, "")
        code = await self._send_to_dlq(group, topic, msg, max_attempts)
        if code == ResponseCode.SUCCESS:
            await _settled(self._pop().ack(group, topic, handle))
        return True

    async def _send_to_dlq(self, group: str, topic: str, msg: MessageExt, max_attempts: int) -> int:
        fields = {
            "offset": msg.commitlog_offset,
            "group": group,
            "delayLevel": -1,
            "originMsgId": msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id,
            "originTopic": topic,
            "unitMode": "false",
            "maxReconsumeTimes": max(max_attempts - 1, 0),
        }
        cmd = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, fields)
        channel = self.messaging.anonymous_channel()
        answer = await self.controller.send_message_processor.process_request(channel, cmd)  # type: ignore[arg-type]
        return answer.code if answer is not None else ResponseCode.SYSTEM_ERROR

    # --- AckMessage / ChangeInvisibleDuration / ForwardMessageToDeadLetterQueue ------------------------------------
    def _valid_handle(self, handle: str) -> Any:
        from rmq_core.broker.pop.extra_info import parse_receipt_handle  # type: ignore[import-not-found,unused-ignore]

        parsed = parse_receipt_handle(handle)
        if parsed is None:
            raise GrpcStatusError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is malformed")
        if parsed.broker_name != self.controller.broker_config.broker_name:
            raise GrpcStatusError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is from another broker")
        if parsed.pop_time + parsed.invisible_time < self._now_ms():
            raise GrpcStatusError(Code.INVALID_RECEIPT_HANDLE, "receipt handle has expired")
        return parsed

    async def _ack_one(self, group: str, topic: str, handle: str, client_id: str) -> Any:
        handle = self.renewal.take(client_id, group, handle)
        try:
            self._valid_handle(handle)
        except GrpcStatusError as e:
            return status(e.code, e.message)
        result = await _settled(self._pop().ack(group, topic, handle))
        if result.code == ResponseCode.SUCCESS:
            return status(Code.OK)
        code = Code.INVALID_RECEIPT_HANDLE if result.code == ResponseCode.INVALID_PARAMETER else grpc_code(result.code)
        return status(code, result.remark or "")

    async def ack_message(self, request: Any, context: Any) -> Any:
        self._pop()
        group, topic = request.group.name, request.topic.name
        response = V2.AckMessageResponse()
        codes: set[int] = set()
        for entry in request.entries:
            st = await self._ack_one(group, topic, entry.receipt_handle, client_id_of(context))
            response.entries.add(message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=st)
            codes.add(st.code)
        if not codes:
            response.status.CopyFrom(status(Code.BAD_REQUEST, "no entry to ack"))
        elif len(codes) == 1:
            response.status.CopyFrom(response.entries[0].status)
        else:
            response.status.CopyFrom(status(Code.MULTIPLE_RESULTS))
        return response

    async def change_invisible_duration(self, request: Any, context: Any) -> Any:
        pop = self._pop()
        invisible = _millis(request.invisible_duration)
        if not 0 <= invisible <= MAX_INVISIBLE_MS:
            raise GrpcStatusError(
                Code.ILLEGAL_INVISIBLE_TIME, f"the invisible time must be within [0, {MAX_INVISIBLE_MS}] ms"
            )
        handle = self.renewal.take(client_id_of(context), request.group.name, request.receipt_handle)
        self._valid_handle(handle)
        result = await _settled(pop.change_invisible_time(request.group.name, request.topic.name, handle, invisible))
        if result.code != ResponseCode.SUCCESS:
            code = (
                Code.INVALID_RECEIPT_HANDLE if result.code == ResponseCode.INVALID_PARAMETER else grpc_code(result.code)
            )
            return V2.ChangeInvisibleDurationResponse(status=status(code, result.remark or ""))
        return V2.ChangeInvisibleDurationResponse(status=status(Code.OK), receipt_handle=result.receipt_handle)

    async def forward_message_to_dead_letter_queue(self, request: Any, context: Any) -> Any:
        pop = self._pop()
        group, topic = request.group.name, request.topic.name
        latest = self.renewal.take(client_id_of(context), group, request.receipt_handle)
        handle = self._valid_handle(latest)
        msg = self._message_at(group, handle.real_topic(topic, group), handle.queue_id, handle.queue_offset)
        if msg is None:
            raise GrpcStatusError(Code.MESSAGE_NOT_FOUND, "the message of the receipt handle is not in the store")
        code = await self._send_to_dlq(group, topic, msg, max(request.max_delivery_attempts, 1))
        if code != ResponseCode.SUCCESS:
            return V2.ForwardMessageToDeadLetterQueueResponse(status=status(grpc_code(code)))
        await _settled(pop.ack(group, topic, latest))
        return V2.ForwardMessageToDeadLetterQueueResponse(status=status(Code.OK))

    def _message_at(self, group: str, topic: str, queue_id: int, offset: int) -> MessageExt | None:
        r = self.controller.message_store.get_message(group, topic, queue_id, offset, 1)
        msgs = decode_messages(r.body) if r.body else []
        return msgs[0] if msgs and msgs[0].queue_offset == offset else None
