"""GrpcMessagingService: the RPCs of ``apache.rocketmq.v2.MessagingService`` a broker answers itself, as Apache's proxy
in local mode answers them (proxy ``grpc/v2/{route,client,producer,transaction}/*Activity.java``), over the broker's
own processors: a send is a SEND_MESSAGE handed to ``SendMessageProcessor``, an end of transaction an END_TRANSACTION
handed to ``EndTransactionProcessor``, as the proxy hands its RemotingCommands to the broker in-process.

- QueryRoute: this broker's queues of the topic (``genMessageQueueFromQueueData``: read-only, write-only, then
  read-write ids), the broker's gRPC host:port as endpoints, accept_message_types from the topic's ``message.type``
  attribute (none: NORMAL); an unknown topic → TOPIC_NOT_FOUND. Each broker advertises itself only (Apache's local
  mode routes to its own broker too).
- Telemetry: each Settings the client writes is answered with the settings it needs (``settings_for``); a
  RecoverOrphanedTransactionCommand goes down the same stream (``GrpcClientChannel``).
- Heartbeat: a producer's topics (its producer groups, as Apache) registered/refreshed in the ProducerManager, a
  consumer's group and subscriptions in the ConsumerManager (``ClientActivity.registerConsumer``: SimpleConsumer
  CONSUME_ACTIVELY, PushConsumer CONSUME_PASSIVELY, CLUSTERING; language and version from ``x-mq-language`` /
  ``x-mq-client-version``), so admin's consumer connection and progress see gRPC consumers; each Settings the
  client writes updates the subscriptions. Before any Settings → UNRECOGNIZED_CLIENT_TYPE as Apache.
  NotifyClientTermination (or the 120 s sweep) unregisters.
- SendMessage: an unknown topic → TOPIC_NOT_FOUND, never created from TBW102 (the proxy looks the route up first);
  all messages of a request to one queue (FIFO: ``consistentHash(hash(group), writable queues)``
  as Guava; else round-robin), one SEND_MESSAGE each, one result entry each.
- EndTransaction: the transaction id names the half message (``grpc_message_converter.transaction_id``).
Metadata: ``x-mq-client-id`` keys the client; with ``aclEnable`` every request (and each Settings on the Telemetry
stream) is checked first (``check_access``, grpc_access_validator.py); then, always, its topic and group names
(``grpc_validator``: ILLEGAL_TOPIC / ILLEGAL_CONSUMER_GROUP as Apache). Everything runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from rmq_core.broker.client.client_channel_info import ClientChannelInfo
from rmq_core.broker.client.producer_manager import CHANNEL_EXPIRED_TIMEOUT_MS
from rmq_core.broker.grpc.grpc_access_validator import check_grpc_access
from rmq_core.broker.grpc.grpc_client_channel import OUTBOX_LIMIT, GrpcClientChannel
from rmq_core.broker.grpc.grpc_message_converter import (
    GrpcStatusError,
    parse_transaction_id,
    to_store_properties,
    transaction_id,
)
from rmq_core.broker.grpc.grpc_validator import check_names
from rmq_core.broker.grpc.messaging_v2 import (
    V2,
    ClientType,
    Code,
    FilterType,
    MessageType,
    Permission,
    TransactionResolution,
)
from rmq_core.broker.schedule.schedule_message_service import parse_delay_levels
from rmq_core.common.mix_all import AUTO_CREATE_TOPIC_KEY_TOPIC, get_retry_topic
from rmq_core.common.mq_version import version_ordinal
from rmq_core.common.perm_name import PERM_READ, PERM_WRITE, is_readable, is_writeable
from rmq_core.filter import MessageSelector
from rmq_core.filter.subscription_data import build_subscription_data
from rmq_core.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    decode_offset_msg_id,
    tags_hash,
)
from rmq_core.message_encoding import properties_to_string
from rmq_core.remoting.body.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import DEFAULT_VERSION, RemotingCommand

if TYPE_CHECKING:
    from rmq_core.broker.grpc.grpc_broker import GrpcBroker

log = logging.getLogger(__name__)

CLIENT_ID_HEADER = "x-mq-client-id"
LANGUAGE_HEADER = "x-mq-language"
CLIENT_VERSION_HEADER = "x-mq-client-version"
TOPIC_MESSAGE_TYPE_ATTRIBUTE = "message.type"  # TopicAttributes.TOPIC_MESSAGE_TYPE_ATTRIBUTE
DEFAULT_TOPIC_QUEUE_NUMS = 4  # the SEND_MESSAGE header's defaultTopicQueueNums, as the proxy's producer sends it
PRODUCER_BACKOFF_ATTEMPTS = 3  # ProxyConfig: the producer's retry policy (3 attempts, 10 ms → 1 s, ×2)
PRODUCER_BACKOFF_INITIAL_MS = 10
PRODUCER_BACKOFF_MAX_MS = 1000
PRODUCER_BACKOFF_MULTIPLIER = 2.0
CONSUMER_RECEIVE_BATCH_SIZE = 32  # ProxyConfig: a push consumer's receive batch and long-polling timeout
CONSUMER_LONG_POLLING_TIMEOUT_MS = 20_000
_TYPES_BY_ATTRIBUTE = {
    "NORMAL": [MessageType.NORMAL],
    "FIFO": [MessageType.FIFO],
    "DELAY": [MessageType.DELAY],
    "TRANSACTION": [MessageType.TRANSACTION],
    "MIXED": [MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION],
}
# ResponseBuilder.RESPONSE_CODE_MAPPING plus the SendStatus and broker-exception cases of the proxy's activities
_REMOTING_TO_GRPC: dict[int, int] = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
    ResponseCode.NO_PERMISSION: Code.FORBIDDEN,
    ResponseCode.MESSAGE_ILLEGAL: Code.BAD_REQUEST,
    ResponseCode.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
}
_CONSUME_TYPES = {  # ClientActivity.buildConsumeType
    ClientType.SIMPLE_CONSUMER: ConsumeType.CONSUME_ACTIVELY,
    ClientType.PUSH_CONSUMER: ConsumeType.CONSUME_PASSIVELY,
}
_CODE_NAMES = {v: k for k, v in vars(Code).items() if isinstance(v, int)}


def status(code: int, message: str | None = None) -> Any:
    return V2.Status(code=code, message=message if message is not None else _CODE_NAMES.get(code, str(code)))


def grpc_code(remoting_code: int) -> int:
    return _REMOTING_TO_GRPC.get(remoting_code, Code.INTERNAL_SERVER_ERROR)


def consistent_hash(value: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(long, int)`` (the proxy's FIFO queue choice), ``value`` a Java int."""
    state = value & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        top = state >> 33  # (int) (state >>> 33): 31 bits, never negative
        nxt = int((candidate + 1) / ((top + 1) / 2**31))
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


def header_of(context: Any, name: str) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == name:
            return str(value)
    return ""


def client_id_of(context: Any) -> str:
    return header_of(context, CLIENT_ID_HEADER)


def client_version_of(context: Any) -> int:
    """``x-mq-client-version`` as a version ordinal (the proxy's ``parseClientVersion``: ``5.1.2`` → V5_1_2's);
    unparsable or absent → the remoting default."""
    text = header_of(context, CLIENT_VERSION_HEADER).strip().upper().replace(".", "_")
    if text:
        try:
            return version_ordinal(text if text.startswith("V") else "V" + text)
        except (ValueError, TypeError):
            pass
    return DEFAULT_VERSION


def peer_address(context: Any) -> str:
    """``ipv4:1.2.3.4:5`` / ``ipv6:[::1]:5`` → ``1.2.3.4:5`` / ``[::1]:5``."""
    peer = str(context.peer() or "")
    return peer.split(":", 1)[1] if ":" in peer else peer


class GrpcMessagingService:
    def __init__(self, controller: GrpcBroker) -> None:
        self.controller = controller
        self.clients: dict[str, GrpcClientChannel] = {}
        self.advertised: tuple[str, int] = (controller.broker_config.broker_ip1, 0)  # set once the port is bound
        self._round_robin = itertools.count()
        self.on_client_gone: Callable[[str], None] | None = None  # the consumer side's clean-up (held handles)
        self.client_address: Callable[[str], str] | None = None  # with TLS: the front's relayed peer → real client

    def peer(self, context: Any) -> str:
        """The caller's ``host:port``: grpc's peer, through the TLS front's map when the front relays it."""
        address = peer_address(context)
        return self.client_address(address) if self.client_address is not None else address

    # --- clients -----------------------------------------------------------------------------------------------
    def _client(self, context: Any) -> GrpcClientChannel:
        client_id = client_id_of(context)
        if not client_id:
            raise GrpcStatusError(Code.CLIENT_ID_REQUIRED, "x-mq-client-id is required")
        channel = self.clients.get(client_id)
        if channel is None or channel.closed:
            channel = self.clients[client_id] = GrpcClientChannel(client_id, self.peer(context))
        channel.last_seen_ms = self.controller.now_ms()
        if not channel.language:
            channel.language = header_of(context, LANGUAGE_HEADER).upper() or "JAVA"
            channel.version = client_version_of(context)
        return channel

    def sweep(self, now_ms: int, expired_ms: int = CHANNEL_EXPIRED_TIMEOUT_MS) -> int:
        """Forget the clients with no open Telemetry stream silent for ``expired_ms`` (a crashed client sends no
        NotifyClientTermination); returns how many."""
        gone = [c for c in self.clients.values() if c.outbox is None and now_ms - c.last_seen_ms > expired_ms]
        for channel in gone:
            self.forget_client(channel)
        return len(gone)

    def check_request(self, request: Any, context: Any) -> None:
        """Before serving ``request``: the ACL, then its topic/group names (``grpc_validator``)."""
        self.check_access(request, context)
        check_names(request)

    def check_access(self, request: Any, context: Any) -> None:
        """With aclEnable: raise ``GrpcStatusError`` (UNAUTHORIZED) if the plain ACL refuses ``request``."""
        validator = self.controller.access_validator
        if validator is not None:
            host = self.peer(context).rpartition(":")[0]
            check_grpc_access(validator, request, context, host.strip("[]"))

    def client_of(self, context: Any) -> GrpcClientChannel | None:
        """The caller's channel if it is known (no new one)."""
        return self.clients.get(client_id_of(context))

    def anonymous_channel(self, context: Any | None = None) -> GrpcClientChannel:
        """A channel for handing one request to a processor (only its ``remote_address`` is read)."""
        known = self.client_of(context) if context is not None else None
        if known is not None:
            return known
        return GrpcClientChannel("", self.peer(context) if context is not None else self._advertised_address())

    def _advertised_address(self) -> str:
        return f"{self.advertised[0]}:{self.advertised[1]}"

    def _register_producer(self, channel: GrpcClientChannel) -> None:
        settings = channel.settings
        if settings is None or channel.client_type != ClientType.PRODUCER:
            return
        manager = self.controller.producer_manager
        now = self.controller.now_ms()
        for topic in settings.publishing.topics:
            group = topic.name
            info = manager.find_channel_in_group(group, channel.client_id)
            if info is not None and info.conn is channel:
                info.last_update_timestamp = now
            else:
                info = ClientChannelInfo(channel, channel.client_id, channel.language, channel.version, now)
                manager.register_producer(group, info)
            channel.groups.add(group)

    def _register_consumer(self, channel: GrpcClientChannel, group: str, update_subscription: bool) -> None:
        """A consumer's group and subscriptions in the ConsumerManager (``ClientActivity.registerConsumer``)."""
        kind = channel.client_type
        settings = channel.settings
        if settings is None or kind not in _CONSUME_TYPES or not group:
            return
        subs = [
            build_subscription_data(
                e.topic.name,
                MessageSelector.by_sql(e.expression.expression)
                if e.expression.type == FilterType.SQL
                else e.expression.expression,
            )
            for e in settings.subscription.subscriptions
        ]
        group_config = self.controller.subscription_group_manager.find_subscription_group_config(group)
        if group_config is not None:  # as a heartbeat through Apache's proxy: the group's %RETRY% topic exists
            self.controller.topic_config_manager.create_topic_in_send_message_back_method(
                get_retry_topic(group), group_config.retry_queue_nums, PERM_READ | PERM_WRITE, 0
            )
        manager = self.controller.consumer_manager
        now = self.controller.now_ms()
        info = ClientChannelInfo(channel, channel.client_id, channel.language, channel.version, now)
        args = (_CONSUME_TYPES[kind], MessageModel.CLUSTERING, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET)
        known = manager.get_consumer_group_info(group)
        if update_subscription or known is None or known.find_channel(channel.client_id) is None:
            manager.register_consumer(group, info, *args, subs, True)
        else:  # a heartbeat: the channel refreshed, the subscriptions its last Settings gave kept
            known.update_channel(info, *args)
        channel.consumer_groups.add(group)

    def forget_client(self, channel: GrpcClientChannel) -> None:
        """The client is gone (NotifyClientTermination, the server's shutdown)."""
        if channel.closed:
            return
        channel.close()
        if self.on_client_gone is not None:
            self.on_client_gone(channel.client_id)
        self.controller.producer_manager.do_channel_close_event(channel)
        self.controller.consumer_manager.do_channel_close_event(channel)
        if self.clients.get(channel.client_id) is channel:
            del self.clients[channel.client_id]

    def settings_for(self, client: Any) -> Any:
        """The Settings answer to the client's ``client`` Settings (``GrpcClientSettingsManager``)."""
        cfg = self.controller.broker_config
        out = V2.Settings()
        out.CopyFrom(client)
        out.metric.on = False  # no metrics endpoint (Python drops a Settings without ``metric``)
        out.access_point.scheme = 1
        del out.access_point.addresses[:]
        out.access_point.addresses.add(host=self.advertised[0], port=self.advertised[1])
        kind = client.client_type
        if kind == ClientType.PRODUCER:
            out.backoff_policy.max_attempts = PRODUCER_BACKOFF_ATTEMPTS
            exp = out.backoff_policy.exponential_backoff
            exp.initial.FromMilliseconds(PRODUCER_BACKOFF_INITIAL_MS)
            exp.max.FromMilliseconds(PRODUCER_BACKOFF_MAX_MS)
            exp.multiplier = PRODUCER_BACKOFF_MULTIPLIER
            out.publishing.max_body_size = cfg.max_message_size
            out.publishing.validate_message_type = True
        elif kind in (ClientType.PUSH_CONSUMER, ClientType.SIMPLE_CONSUMER):
            sub = out.subscription
            group = self.controller.subscription_group_manager.find_subscription_group_config(sub.group.name)
            sub.fifo = bool(getattr(group, "consume_message_orderly", False))
            sub.receive_batch_size = CONSUMER_RECEIVE_BATCH_SIZE
            sub.long_polling_timeout.FromMilliseconds(CONSUMER_LONG_POLLING_TIMEOUT_MS)
            retry_max = group.retry_max_times if group is not None else 16
            out.backoff_policy.max_attempts = retry_max + 1
            custom = out.backoff_policy.customized_backoff
            for delay_ms in parse_delay_levels(cfg.message_delay_level).values():
                custom.next.add().FromMilliseconds(delay_ms)
        return out

    # --- RPCs ----------------------------------------------------------------------------------------------------
    async def query_route(self, request: Any, context: Any) -> Any:
        topic = request.topic.name
        cfg = self.controller.broker_config
        tc = self.controller.topic_config_manager.select_topic_config(topic)
        if tc is None:
            return V2.QueryRouteResponse(status=status(Code.TOPIC_NOT_FOUND, f"topic {topic} not found"))
        perm = tc.perm & cfg.broker_permission
        broker = V2.Broker(name=cfg.broker_name, id=cfg.broker_id)
        broker.endpoints.scheme = 1
        broker.endpoints.addresses.add(host=self.advertised[0], port=self.advertised[1])
        readable, writeable = is_readable(perm), is_writeable(perm)
        if readable and writeable:
            rw = min(tc.write_queue_nums, tc.read_queue_nums)
            r, w = tc.read_queue_nums - rw, tc.write_queue_nums - rw
        else:
            rw, r, w = 0, tc.read_queue_nums if readable else 0, tc.write_queue_nums if writeable else 0
        types = self.accept_message_types(tc.attributes)
        response = V2.QueryRouteResponse(status=status(Code.OK))
        queue_id = 0
        for count, permission in ((r, Permission.READ), (w, Permission.WRITE), (rw, Permission.READ_WRITE)):
            for _ in range(count):
                q = response.message_queues.add(id=queue_id, permission=permission)
                q.topic.CopyFrom(request.topic)
                q.broker.CopyFrom(broker)
                q.accept_message_types.extend(types)
                queue_id += 1
        return response

    @staticmethod
    def accept_message_types(attributes: dict[str, str] | None) -> list[int]:
        value = (attributes or {}).get(TOPIC_MESSAGE_TYPE_ATTRIBUTE) or "NORMAL"
        return _TYPES_BY_ATTRIBUTE.get(value.upper(), [MessageType.MESSAGE_TYPE_UNSPECIFIED])

    async def heartbeat(self, request: Any, context: Any) -> Any:
        channel = self._client(context)
        if channel.settings is None:
            return V2.HeartbeatResponse(status=status(Code.UNRECOGNIZED_CLIENT_TYPE, "client settings not found"))
        self._register_producer(channel)
        self._register_consumer(channel, request.group.name or channel.settings.subscription.group.name, False)
        return V2.HeartbeatResponse(status=status(Code.OK))

    async def notify_client_termination(self, request: Any, context: Any) -> Any:
        channel = self.clients.get(client_id_of(context))
        if channel is not None:
            self.forget_client(channel)
        return V2.NotifyClientTerminationResponse(status=status(Code.OK))

    async def telemetry(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        channel = self._client(context)
        outbox: asyncio.Queue[Any] = asyncio.Queue(OUTBOX_LIMIT)
        channel.outbox = outbox

        async def read() -> None:
            try:
                async for command in requests:
                    if command.WhichOneof("command") == "settings":
                        self.check_request(command, context)
                        channel.settings = command.settings
                        self._register_producer(channel)
                        self._register_consumer(channel, command.settings.subscription.group.name, True)
                        answer = V2.TelemetryCommand(
                            status=status(Code.OK), settings=self.settings_for(command.settings)
                        )
                        if channel.outbox is outbox and not channel.closed:
                            await outbox.put(answer)
                            await outbox.join()  # written: a client that reads nothing is read no more
            except GrpcStatusError as e:  # refused (ACL): answered, then the stream ends
                channel.write(V2.TelemetryCommand(status=status(e.code, e.message)))
            except Exception as e:  # the client went away mid-stream
                log.debug("gRPC telemetry of %s ended: %r", channel.client_id, e)
            finally:
                if channel.outbox is outbox:
                    outbox.put_nowait(None) if not outbox.full() else None

        reader = asyncio.ensure_future(read())
        try:
            while True:
                command = await outbox.get()
                if command is None:
                    return
                yield command
                outbox.task_done()
        finally:
            reader.cancel()
            if channel.outbox is outbox:
                channel.outbox = None
                if self.on_client_gone is not None:  # its stream ended (shutdown or crash): held messages released;
                    self.on_client_gone(channel.client_id)  # its Settings stay for a reconnect

    async def send_message(self, request: Any, context: Any) -> Any:
        messages = request.messages
        if not messages:
            raise GrpcStatusError(Code.BAD_REQUEST, "no message to send")
        topic = messages[0].topic.name
        if any(m.topic.name != topic for m in messages):
            raise GrpcStatusError(Code.BAD_REQUEST, "all messages of a request must be of one topic")
        max_body = self.controller.broker_config.max_message_size
        for m in messages:
            if len(m.body) > max_body:
                raise GrpcStatusError(Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed {max_body} bytes")
            if not m.body:
                raise GrpcStatusError(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
        if self.controller.topic_config_manager.select_topic_config(topic) is None:  # the proxy's route lookup
            raise GrpcStatusError(Code.TOPIC_NOT_FOUND, f"No topic route info in name server for the topic: {topic}")
        remote = self.peer(context)
        props = [to_store_properties(m, topic, remote) for m in messages]
        queue_id = self._select_queue(topic, messages)
        channel = self.anonymous_channel(context)
        processor = self.controller.send_message_processor
        response = V2.SendMessageResponse()
        codes: set[int] = set()
        for m, p in zip(messages, props):
            sp = m.system_properties
            transactional = sp.message_type == MessageType.TRANSACTION
            born = sp.born_timestamp.ToMilliseconds() if sp.HasField("born_timestamp") else self.controller.now_ms()
            fields = {
                "producerGroup": topic,
                "topic": topic,
                "defaultTopic": AUTO_CREATE_TOPIC_KEY_TOPIC,
                "defaultTopicQueueNums": DEFAULT_TOPIC_QUEUE_NUMS,
                "queueId": queue_id,
                "sysFlag": TRANSACTION_PREPARED_TYPE if transactional else 0,
                "bornTimestamp": born,
                "flag": 0,
                "properties": properties_to_string(p),
                "reconsumeTimes": 0,
            }
            cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE, fields, bytes(m.body))
            answer = await processor.process_request(channel, cmd)  # type: ignore[arg-type]
            entry = response.entries.add()
            code = grpc_code(answer.code) if answer is not None else Code.INTERNAL_SERVER_ERROR
            entry.status.CopyFrom(status(code, None if code == Code.OK else (answer.remark if answer else None)))
            if code == Code.OK and answer is not None:
                ext = answer.ext_fields
                entry.message_id = sp.message_id
                entry.offset = int(ext.get("queueOffset", 0))
                if transactional:
                    _, commit_log_offset = decode_offset_msg_id(ext["msgId"])
                    entry.transaction_id = transaction_id(commit_log_offset, entry.offset)
            codes.add(code)
        if len(codes) > 1:
            response.status.CopyFrom(status(Code.MULTIPLE_RESULTS))
        else:
            response.status.CopyFrom(response.entries[0].status)
        return response

    def _select_queue(self, topic: str, messages: Any) -> int:
        """SendMessageQueueSelector: a single message with a group → consistentHash over the writable queues."""
        tc = self.controller.topic_config_manager.select_topic_config(topic)
        if tc is None:
            return -1  # the processor creates the topic from TBW102, or answers TOPIC_NOT_EXIST
        writable = max(tc.write_queue_nums, 1)
        if len(messages) == 1 and messages[0].system_properties.message_group:
            return consistent_hash(tags_hash(messages[0].system_properties.message_group), writable)
        return next(self._round_robin) % writable

    async def end_transaction(self, request: Any, context: Any) -> Any:
        commit_log_offset, tran_offset = parse_transaction_id(request.transaction_id)
        resolution = {
            TransactionResolution.COMMIT: TRANSACTION_COMMIT_TYPE,
            TransactionResolution.ROLLBACK: TRANSACTION_ROLLBACK_TYPE,
        }.get(request.resolution, TRANSACTION_NOT_TYPE)
        fields = {
            "producerGroup": request.topic.name,
            "tranStateTableOffset": tran_offset,
            "commitLogOffset": commit_log_offset,
            "commitOrRollback": resolution,
            "fromTransactionCheck": "true" if request.source == 2 else "false",
            "msgId": request.message_id,
            "transactionId": request.transaction_id,
        }
        cmd = RemotingCommand.request(RequestCode.END_TRANSACTION, fields)
        channel = self.anonymous_channel(context)
        answer = await self.controller.end_transaction_processor.process_request(channel, cmd)  # type: ignore[arg-type]
        if answer is None:  # UNKNOWN: nothing done, the check will ask
            return V2.EndTransactionResponse(status=status(Code.OK))
        code = grpc_code(answer.code)
        return V2.EndTransactionResponse(status=status(code, None if code == Code.OK else answer.remark))
