"""MQClientAPIImpl (4.9 ``org.apache.rocketmq.client.impl.MQClientAPIImpl``): the one RocketMQ RPC layer.

Owns every request a client, the Spark source, the CLI, the pipeline, the benchmarks or a test makes to a name server
or broker: built and its answer decoded here, as ``async def`` methods over one ``RemotingClient``; the blocking face
(``rmq_core.client.blocking_mq_client_api``) runs the same methods on its own loop thread.
Invariants: 1. RocketMQ's request codes, custom headers and JSON bodies; sends as SEND_MESSAGE_V2 (short header
names) or SEND_BATCH_MESSAGE; 2. response codes map as RocketMQ's (SendResult, pull status, TOPIC_NOT_EXIST →
``MQClientException(17)``, else ``MQBrokerException``), every failure a ``RocketMQRpcError``; 3. transport failures
are ``RemotingTimeoutError`` or ``RemotingConnectError``; 4. name server requests follow ``NameServerSelector``;
5. with ``access_key``/``secret_key`` every request (and the fast send) is signed as 4.9's AclClientRPCHook.
Thread-safety: call only on the owner's event loop (the ``RemotingClient`` is loop-bound).
Details (the RPC list, the invariants in full): docs/CLIENT_DESIGN.md, 'RPC layer'.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rmq_core import _backend
from rmq_core.client.client_config import ClientConfig
from rmq_core.client.exceptions import (
    ClientErrorCode,
    MQBrokerException,
    MQClientException,
    RemotingConnectError,
    RemotingTimeoutError,
    suggest_todo,
)
from rmq_core.client.message_batch import MessageBatch
from rmq_core.client.name_server_selector import NameServerSelector
from rmq_core.client.send_result import DEFAULT_TRACE_REGION_ID, SendResult, SendStatus
from rmq_core.common.mix_all import AUTO_CREATE_TOPIC_KEY_TOPIC
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.common.topic_config import TopicConfig
from rmq_core.message import UNIQ_KEY, Message, MessageExt, MessageQueue, decode_messages
from rmq_core.message_encoding import properties_to_string
from rmq_core.remoting.acl_signer import credentials_from
from rmq_core.remoting.body.connection import ConsumerConnection
from rmq_core.remoting.body.heartbeat import CheckClientRequestBody, GetConsumerListByGroupResponseBody, HeartbeatData
from rmq_core.remoting.body.kv_table import KVTable
from rmq_core.remoting.body.lock_batch import LockBatchRequestBody, LockBatchResponseBody, UnlockBatchRequestBody
from rmq_core.remoting.body.queue_offsets import ConsumeStats, ResetOffsetBody, TopicStatsTable
from rmq_core.remoting.body.route import ClusterInfo, TopicList, TopicRouteData
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import DEFAULT_VERSION, MAX_FRAME_LENGTH, RemotingCommand, next_opaque
from rmq_core.remoting.header import (
    SEND_ANSWER_FIELDS,
    UNIQUE_MSG_QUERY_FLAG,
    ConsumerSendMsgBackRequestHeader,
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader,
    EndTransactionRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetConsumeStatsRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicStatsInfoRequestHeader,
    OffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
    decode_header,
    encode_header,
    field_names,
)
from rmq_core.remoting.remoting_client import RemotingClient

if TYPE_CHECKING:
    from rmq_core.client.pull_result import PullResultExt
    from rmq_core.filter.subscription_data import SubscriptionData

log = logging.getLogger(__name__)


SEND_MODES = ("SYNC", "ASYNC", "ONEWAY")
# the send answers that are a SendResult (any other code is an MQBrokerException)
_SEND_STATUS: dict[int, SendStatus] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


def send_message_request(header: SendMessageRequestHeader, body: bytes, batch: bool = False) -> RemotingCommand:
    """SEND_MESSAGE_V2 (SEND_BATCH_MESSAGE for a batch body) with the short header names (invariant 1)."""
    code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
    # what RemotingCommand.request makes of it: encode_header's dict is fresh and holds strings only
    return RemotingCommand(
        code=code, opaque=next_opaque(), ext_fields=encode_header(header, short_names=True), body=body
    )


# SEND_MESSAGE_V2's extFields names in SendMessageRequestHeader's order: the ``values`` of ``encode_send_values``
SEND_HEADER_NAMES = tuple(field_names(SendMessageRequestHeader, short_names=True))


def encode_send_values(
    code: int, language: str, version: int, opaque: int, names: tuple[str, ...], values: Any, body: bytes
) -> bytes:
    """The frame of a send request whose header is ``values`` (``SendMessageRequestHeader``'s fields, in order, under
    ``names``): the bytes ``send_message_request(SendMessageRequestHeader(*values), body).encode()`` writes, where a
    dict value (the message's properties) is written as ``properties_to_string`` writes it (its ValueError too). The
    Python codec of the backend's ``encode_send_request`` (which writes the common shape itself, in one call)."""
    ext = send_fields_text(names, values)
    cmd = RemotingCommand(code=code, language=language, version=version, opaque=opaque, ext_fields=ext, body=body)
    return cmd.encode()


def send_fields_text(names: tuple[str, ...], values: Any) -> dict[str, str]:
    """The ext fields a send header's ``values`` are written as (None left out; a dict, the properties, as
    ``properties_to_string`` writes it, its ValueError too)."""
    ext: dict[str, str] = {}
    for name, v in zip(names, values, strict=True):
        if v is None:
            continue
        if isinstance(v, dict):
            ext[name] = properties_to_string(v)
        else:
            ext[name] = v if v.__class__ is str else ("true" if v else "false") if v.__class__ is bool else str(v)
    return ext


def pull_message_request(header: PullMessageRequestHeader) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, encode_header(header))


class MQClientAPIImpl:
    def __init__(self, remoting_client: RemotingClient, client_config: ClientConfig) -> None:
        self.remoting_client = remoting_client
        self.client_config = client_config
        self.name_server_selector = NameServerSelector()
        # ACL credentials: every request is signed in invoke/invoke_oneway (None: nothing added, nothing spent)
        self.credentials = credentials_from(client_config.access_key, client_config.secret_key)

    # --- plumbing ----------------------------------------------------------------------------------------------
    @property
    def namesrv_addr_list(self) -> list[str]:
        return self.client_config.namesrv_addr_list()

    def update_name_server_address_list(self, addrs: str) -> None:
        self.client_config.namesrv_addr = addrs

    async def invoke(self, addr: str, request: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        """invokeSync: the response, or RemotingTimeoutError / RemotingConnectError."""
        request.language = self.client_config.language
        if self.credentials is not None:
            self.credentials.sign(request)
        timeout = max(timeout_ms, 1) / 1000.0
        try:
            return await self.remoting_client.invoke(addr, request, timeout)
        except OSError as e:  # TimeoutError, ConnectionError and failed connects
            raise self.transport_error(addr, e, timeout_ms) from None

    @staticmethod
    def transport_error(addr: str, error: OSError, timeout_ms: float) -> RemotingTimeoutError | RemotingConnectError:
        """What a request to ``addr`` that failed in the transport with ``error`` raises (invariant 3)."""
        if isinstance(error, TimeoutError):
            return RemotingTimeoutError(addr, timeout_ms)
        if isinstance(error, RemotingConnectError):
            return error
        return RemotingConnectError(addr, error)

    async def invoke_oneway(self, addr: str, request: RemotingCommand, timeout_ms: float) -> None:
        request.language = self.client_config.language
        if self.credentials is not None:
            self.credentials.sign(request)
        timeout = max(timeout_ms, 1) / 1000.0
        try:
            await self.remoting_client.invoke_oneway(addr, request, timeout)
        except TimeoutError:
            raise RemotingTimeoutError(addr, timeout_ms) from None
        except RemotingConnectError:
            raise
        except OSError as e:
            raise RemotingConnectError(addr, e) from None

    @property
    def chosen_namesrv_addr(self) -> str | None:
        """The name server requests go to (None before the first one answered)."""
        return self.name_server_selector.chosen

    async def invoke_name_server(self, request: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        """``request`` to a name server chosen by ``NameServerSelector``'s rule (invariant 4)."""
        addrs = self.namesrv_addr_list
        if not addrs:
            raise MQClientException(
                ClientErrorCode.NO_NAME_SERVER_EXCEPTION, "No name server address, please set it." + suggest_todo()
            )
        selector = self.name_server_selector
        chosen = selector.current(addrs)
        last: RemotingConnectError | None = None
        if chosen is not None:
            try:
                return await self._invoke_name_server_at(chosen, request, timeout_ms)
            except RemotingConnectError as e:
                log.warning("name server %s unreachable: %s", chosen, e)
                selector.forget(chosen)
                last = e
        for addr in selector.rotation(addrs):
            if addr == chosen and last is not None:
                continue  # just failed to connect
            try:
                response = await self._invoke_name_server_at(addr, request, timeout_ms)
            except RemotingConnectError as e:
                log.warning("name server %s unreachable: %s", addr, e)
                last = e
                continue
            except RemotingTimeoutError:
                selector.choose(addr)  # connected: it stays the choice (rule 3)
                raise
            selector.choose(addr)
            return response
        assert last is not None
        raise last

    async def _invoke_name_server_at(self, addr: str, request: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        """``invoke``; an address that is not host:port (``-n 127.0.0.1``) is a connect failure naming it."""
        try:
            return await self.invoke(addr, request, timeout_ms)
        except ValueError:
            _host, sep, port = addr.rpartition(":")
            if sep and port.isdigit():
                raise
            raise RemotingConnectError(addr, ValueError("not host:port, e.g. 127.0.0.1:9876")) from None

    # --- name server -------------------------------------------------------------------------------------------
    async def get_topic_route_info_from_name_server(
        self, topic: str, timeout_ms: float, allow_topic_not_exist: bool = True
    ) -> TopicRouteData:
        request = RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, encode_header(GetRouteInfoRequestHeader(topic=topic))
        )
        response = await self.invoke_name_server(request, timeout_ms)
        if response.code == ResponseCode.SUCCESS and response.body:
            return TopicRouteData.decode(response.body)
        if response.code == ResponseCode.TOPIC_NOT_EXIST and allow_topic_not_exist:
            # a topic not created yet, a group's retry topic before anything was retried: first use (DEBUG; RocketMQ
            # logs it as a warning, on every new group's start)
            log.debug("get Topic [%s] RouteInfoFromNameServer is not exist value", topic)
        raise MQClientException(response.code, response.remark, addr=self.chosen_namesrv_addr)

    async def get_default_topic_route_info_from_name_server(self, topic: str, timeout_ms: float) -> TopicRouteData:
        return await self.get_topic_route_info_from_name_server(topic, timeout_ms, allow_topic_not_exist=False)

    async def get_broker_cluster_info(self, timeout_ms: float) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO: every broker the name server knows, by name and by cluster."""
        response = await self.invoke_name_server(
            RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO), timeout_ms
        )
        if response.code == ResponseCode.SUCCESS:
            return ClusterInfo.decode(response.body or b"{}")
        raise MQBrokerException(response.code, response.remark, self.chosen_namesrv_addr)

    async def get_topic_list_from_name_server(self, timeout_ms: float) -> TopicList:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: every topic the name server routes."""
        request = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        response = await self.invoke_name_server(request, timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            return TopicList.decode(response.body or b"{}")
        raise MQClientException(response.code, response.remark, addr=self.chosen_namesrv_addr)

    # --- send --------------------------------------------------------------------------------------------------
    async def send_message(
        self,
        addr: str,
        broker_name: str,
        msg: Message,
        header: SendMessageRequestHeader,
        timeout_ms: float,
        mode: str = "SYNC",
    ) -> SendResult | None:
        """SYNC and ASYNC wait for the broker's answer (ASYNC differs only in who waits: the caller's future);
        ONEWAY returns None once the frame is written."""
        if mode not in SEND_MODES:
            raise ValueError(f"send mode must be one of {SEND_MODES}, not {mode!r}")
        request = self.send_request(header, msg)
        if mode == "ONEWAY":
            await self.invoke_oneway(addr, request, timeout_ms)
            return None
        response = await self.invoke(addr, request, timeout_ms)
        return self.process_send_response(broker_name, msg, response, addr)

    def send_request(self, header: SendMessageRequestHeader, msg: Message) -> RemotingCommand:
        """The request ``send_message`` sends (language set as ``invoke`` sets it): for a caller that encodes it
        itself and waits without a coroutine (the producer's send fast path). Any thread."""
        request = send_message_request(header, msg.body, isinstance(msg, MessageBatch))
        request.language = self.client_config.language
        return request

    def encode_send(self, values: list[Any], body: bytes, batch: bool) -> tuple[int, bytes]:
        """(opaque, frame) of the request ``send_message`` sends for the header ``SendMessageRequestHeader(*values)``
        (the ``properties`` value may be the message's dict: it is written as ``properties_to_string`` writes it,
        and refused with its ValueError) and ``body``, built and encoded in one call of the backend's
        ``encode_send_request``: the producer's send fast path. Any thread."""
        opaque = next_opaque()
        code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
        names = SEND_HEADER_NAMES
        if self.credentials is not None:  # signed: the fields as text, AccessKey and Signature added
            ext = self.credentials.sign_fields(send_fields_text(names, values), body)
            names, values = tuple(ext), list(ext.values())
        frame = _backend.impl.encode_send_request(
            code,
            self.client_config.language,
            DEFAULT_VERSION,
            opaque,
            names,
            values,
            body,
            encode_send_values,
            MAX_FRAME_LENGTH,
        )
        return opaque, frame

    def process_send_response(
        self,
        broker_name: str,
        msg: Message,
        response: RemotingCommand,
        addr: str,
        mq: MessageQueue | None = None,
    ) -> SendResult:
        """The send's result (invariant 2): ``send_result`` of the response's code, remark and fields."""
        ext = response.ext_fields
        fields = [ext.get(name) for name in SEND_ANSWER_FIELDS]
        return self.send_result(broker_name, msg, response.code, response.remark, fields, addr, mq)

    def send_result(
        self,
        broker_name: str,
        msg: Message,
        code: int,
        remark: str | None,
        fields: Sequence[str | None],
        addr: str,
        mq: MessageQueue | None = None,
    ) -> SendResult:
        """The send's result (invariant 2) from its answer's code, remark and extFields ``SEND_ANSWER_FIELDS``
        (``fields``, None where absent: what a client connection hands a ``SendAnswerWaiter``). The header's fields
        are read as ``decode_header`` reads them (it decodes what it would refuse, for its error), without a header
        object per send. ``mq``: the queue the send went to, the result's queue when the broker stored the message
        there (it always does: one object fewer per send)."""
        status = _SEND_STATUS.get(code)
        if status is None:
            raise MQBrokerException(code, remark, addr)
        msg_id, queue_id, queue_offset, transaction_id, region, trace = fields
        try:
            if msg_id is None or queue_id is None or queue_offset is None:
                raise ValueError
            qid, offset = int(queue_id), int(queue_offset)
        except ValueError:
            ext = {n: v for n, v in zip(SEND_ANSWER_FIELDS, fields, strict=True) if v is not None}
            h = decode_header(SendMessageResponseHeader, ext)
            msg_id, qid, offset = h.msgId, h.queueId, h.queueOffset
        if isinstance(msg, MessageBatch):
            uniq: str | None = ",".join(m.properties.get(UNIQ_KEY, "") for m in msg.messages)
        else:
            uniq = msg.properties.get(UNIQ_KEY)
        topic = msg.topic
        if mq is None or mq.queue_id != qid or mq.topic != topic or mq.broker_name != broker_name:
            mq = MessageQueue(topic, broker_name, qid)
        return SendResult(
            status,
            uniq,
            msg_id,
            mq,
            offset,
            region or DEFAULT_TRACE_REGION_ID,
            trace != "false",
            transaction_id,
        )

    # --- transactions ------------------------------------------------------------------------------------------
    async def end_transaction_oneway(
        self, addr: str, header: EndTransactionRequestHeader, remark: str | None, timeout_ms: float
    ) -> None:
        """END_TRANSACTION (37), oneway: commit, roll back or leave open (UNKNOW) a half message."""
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, encode_header(header))
        request.remark = remark
        await self.invoke_oneway(addr, request, timeout_ms)

    async def end_transaction(
        self, addr: str, header: EndTransactionRequestHeader, remark: str | None, timeout_ms: float
    ) -> None:
        """END_TRANSACTION (37) awaiting the broker's answer (the Spark sink's driver: it must know the end took);
        anything but SUCCESS raises MQBrokerException with the broker's code and remark."""
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, encode_header(header))
        request.remark = remark
        response = await self.invoke(addr, request, timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, addr)

    # --- pull --------------------------------------------------------------------------------------------------
    async def pull_message(self, addr: str, header: PullMessageRequestHeader, timeout_ms: float) -> PullResultExt:
        response = await self.invoke(addr, pull_message_request(header), timeout_ms)
        return self.process_pull_response(response, addr)

    def process_pull_response(self, response: RemotingCommand, addr: str) -> PullResultExt:
        from rmq_core.client.pull_result import PullResultExt, PullStatus  # owned by the pull path

        code = response.code
        if code == ResponseCode.SUCCESS:
            status = PullStatus.FOUND
        elif code == ResponseCode.PULL_NOT_FOUND:
            status = PullStatus.NO_NEW_MSG
        elif code == ResponseCode.PULL_RETRY_IMMEDIATELY:
            status = PullStatus.NO_MATCHED_MSG
        elif code == ResponseCode.PULL_OFFSET_MOVED:
            status = PullStatus.OFFSET_ILLEGAL
        else:
            raise MQBrokerException(code, response.remark, addr)
        h = decode_header(PullMessageResponseHeader, response.ext_fields)
        return PullResultExt(
            pull_status=status,
            next_begin_offset=h.nextBeginOffset,
            min_offset=h.minOffset,
            max_offset=h.maxOffset,
            msg_found_list=None,
            suggest_which_broker_id=h.suggestWhichBrokerId,
            message_binary=response.body,
        )

    # --- heartbeat and registration ----------------------------------------------------------------------------
    async def send_heartbeat(self, addr: str, heartbeat_data: HeartbeatData, timeout_ms: float) -> int:
        request = RemotingCommand.request(RequestCode.HEART_BEAT, body=heartbeat_data.encode())
        response = await self.invoke(addr, request, timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            return response.version
        raise MQBrokerException(response.code, response.remark, addr)

    async def check_client_in_broker(
        self, addr: str, consumer_group: str, client_id: str, subscription_data: SubscriptionData, timeout_ms: float
    ) -> None:
        """CHECK_CLIENT_CONFIG (46): whether the broker takes the subscription's filter (a consumer's start asks for
        each one that is not TAG); anything but SUCCESS raises MQClientException with the broker's code and remark,
        as 4.9's ``checkClientInBroker``."""
        body = CheckClientRequestBody(client_id, consumer_group, subscription_data).encode()
        response = await self.invoke(
            addr, RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, body=body), timeout_ms
        )
        if response.code != ResponseCode.SUCCESS:
            raise MQClientException(response.code, response.remark, addr=addr)

    async def unregister_client(
        self, addr: str, client_id: str, producer_group: str | None, consumer_group: str | None, timeout_ms: float
    ) -> None:
        h = UnregisterClientRequestHeader(
            clientID=client_id, producerGroup=producer_group, consumerGroup=consumer_group
        )
        response = await self.invoke(
            addr, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, encode_header(h)), timeout_ms
        )
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, addr)

    async def get_consumer_id_list_by_group(self, addr: str, consumer_group: str, timeout_ms: float) -> list[str]:
        h = GetConsumerListByGroupRequestHeader(consumerGroup=consumer_group)
        response = await self.invoke(
            addr, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, encode_header(h)), timeout_ms
        )
        if response.code == ResponseCode.SUCCESS and response.body is not None:
            return GetConsumerListByGroupResponseBody.decode(response.body).consumer_id_list
        raise MQBrokerException(response.code, response.remark, addr)

    # --- consumer offsets ----------------------------------------------------------------------------------------
    async def query_consumer_offset(
        self, addr: str, header: QueryConsumerOffsetRequestHeader, timeout_ms: float
    ) -> int:
        response = await self.invoke(
            addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, encode_header(header)), timeout_ms
        )
        if response.code == ResponseCode.SUCCESS:
            return decode_header(OffsetResponseHeader, response.ext_fields).offset
        raise MQBrokerException(response.code, response.remark, addr)

    async def update_consumer_offset(
        self, addr: str, header: UpdateConsumerOffsetRequestHeader, timeout_ms: float
    ) -> None:
        response = await self.invoke(
            addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, encode_header(header)), timeout_ms
        )
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, addr)

    async def update_consumer_offset_oneway(
        self, addr: str, header: UpdateConsumerOffsetRequestHeader, timeout_ms: float | None = None
    ) -> None:
        await self.invoke_oneway(
            addr,
            RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, encode_header(header)),
            timeout_ms if timeout_ms is not None else self.client_config.mq_client_api_timeout,
        )

    # --- send back, locks --------------------------------------------------------------------------------------
    async def consumer_send_message_back(
        self,
        addr: str,
        broker_name: str,
        msg: MessageExt,
        consumer_group: str,
        delay_level: int,
        timeout_ms: float,
        max_consume_retry_times: int,
    ) -> None:
        h = ConsumerSendMsgBackRequestHeader(
            offset=msg.commitlog_offset,
            group=consumer_group,
            delayLevel=delay_level,
            originMsgId=msg.properties.get(UNIQ_KEY) or msg.msg_id,  # MessageClientExt.getMsgId
            originTopic=msg.topic,
            unitMode=None,
            maxReconsumeTimes=max_consume_retry_times,
        )
        response = await self.invoke(
            addr, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, encode_header(h)), timeout_ms
        )
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, addr)

    async def lock_batch_mq(self, addr: str, body: LockBatchRequestBody, timeout_ms: float) -> set[MessageQueue]:
        response = await self.invoke(
            addr, RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, body=body.encode()), timeout_ms
        )
        if response.code == ResponseCode.SUCCESS:
            return LockBatchResponseBody.decode(response.body or b"{}").lock_ok_mq_set
        raise MQBrokerException(response.code, response.remark, addr)

    async def unlock_batch_mq(
        self, addr: str, body: UnlockBatchRequestBody | LockBatchRequestBody, timeout_ms: float, oneway: bool = False
    ) -> None:
        request = RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, body=body.encode())
        if oneway:
            await self.invoke_oneway(addr, request, timeout_ms)
            return
        response = await self.invoke(addr, request, timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, addr)

    # --- queue offsets (admin) ---------------------------------------------------------------------------------
    async def _offset_rpc(self, addr: str, code: int, header: Any, timeout_ms: float) -> int:
        response = await self.invoke(addr, RemotingCommand.request(code, encode_header(header)), timeout_ms)
        if response.code == ResponseCode.SUCCESS:
            return decode_header(OffsetResponseHeader, response.ext_fields).offset
        raise MQBrokerException(response.code, response.remark, addr)

    async def get_max_offset(self, addr: str, topic: str, queue_id: int, timeout_ms: float) -> int:
        return await self._offset_rpc(
            addr, RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic=topic, queueId=queue_id), timeout_ms
        )

    async def get_min_offset(self, addr: str, topic: str, queue_id: int, timeout_ms: float) -> int:
        return await self._offset_rpc(
            addr, RequestCode.GET_MIN_OFFSET, GetMinOffsetRequestHeader(topic=topic, queueId=queue_id), timeout_ms
        )

    async def search_offset(self, addr: str, topic: str, queue_id: int, timestamp: int, timeout_ms: float) -> int:
        return await self._offset_rpc(
            addr,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            SearchOffsetRequestHeader(topic=topic, queueId=queue_id, timestamp=timestamp),
            timeout_ms,
        )

    # --- messages by key / id (MQClientAPIImpl#queryMessage, #viewMessage) --------------------------------------
    async def query_message(
        self, addr: str, header: QueryMessageRequestHeader, timeout_ms: float, is_unique_key: bool = False
    ) -> tuple[int, list[MessageExt]]:
        """QUERY_MESSAGE on one broker: ``(indexLastUpdateTimestamp, messages)``; QUERY_NOT_FOUND → ``(ts, [])``
        (the broker found nothing); any other code → MQBrokerException."""
        ext = encode_header(header)
        ext[UNIQUE_MSG_QUERY_FLAG] = "true" if is_unique_key else "false"
        response = await self.invoke(addr, RemotingCommand.request(RequestCode.QUERY_MESSAGE, ext), timeout_ms)
        if response.code not in (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND):
            raise MQBrokerException(response.code, response.remark, addr)
        rh = decode_header(QueryMessageResponseHeader, response.ext_fields)
        if response.code != ResponseCode.SUCCESS or not response.body:
            return rh.indexLastUpdateTimestamp, []
        return rh.indexLastUpdateTimestamp, decode_messages(response.body)

    async def view_message(self, addr: str, phy_offset: int, timeout_ms: float) -> MessageExt:
        """VIEW_MESSAGE_BY_ID: the record at CommitLog offset ``phy_offset`` of the broker at ``addr``."""
        request = RemotingCommand.request(
            RequestCode.VIEW_MESSAGE_BY_ID, encode_header(ViewMessageRequestHeader(offset=phy_offset))
        )
        response = await self.invoke(addr, request, timeout_ms)
        if response.code != ResponseCode.SUCCESS or not response.body:
            raise MQBrokerException(response.code, response.remark, addr)
        return decode_messages(response.body)[0]

    # --- admin (MQClientAPIImpl#createTopic, #createSubscriptionGroup) -----------------------------------------
    async def create_topic(
        self, addr: str, topic_config: TopicConfig, timeout_ms: float, default_topic: str = AUTO_CREATE_TOPIC_KEY_TOPIC
    ) -> None:
        """UPDATE_AND_CREATE_TOPIC on one broker (the broker then registers the topic with its name servers)."""
        h = CreateTopicRequestHeader(
            topic=topic_config.topic_name,
            defaultTopic=default_topic,
            readQueueNums=topic_config.read_queue_nums,
            writeQueueNums=topic_config.write_queue_nums,
            perm=topic_config.perm,
            topicFilterType=topic_config.topic_filter_type,
            topicSysFlag=topic_config.topic_sys_flag,
            order=topic_config.order,
        )
        response = await self.invoke(
            addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, encode_header(h)), timeout_ms
        )
        if response.code != ResponseCode.SUCCESS:
            raise MQClientException(response.code, response.remark, addr=addr)

    async def create_subscription_group(self, addr: str, config: SubscriptionGroupConfig, timeout_ms: float) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP on one broker."""
        body = json.dumps(config.to_json_dict()).encode()
        response = await self.invoke(
            addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body), timeout_ms
        )
        if response.code != ResponseCode.SUCCESS:
            raise MQClientException(response.code, response.remark, addr=addr)

    async def delete_topic_in_broker(self, addr: str, topic: str, timeout_ms: float) -> None:
        """DELETE_TOPIC_IN_BROKER on one broker: its topic config and the topic's queues."""
        await self._admin_or_client_error(
            addr, RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic), timeout_ms
        )

    async def delete_topic_in_name_server(
        self, addr: str, topic: str, timeout_ms: float, cluster: str | None = None
    ) -> None:
        """DELETE_TOPIC_IN_NAMESRV on the name server at ``addr``: the topic's route (of ``cluster`` only if given)."""
        h = DeleteTopicFromNamesrvRequestHeader(topic=topic, clusterName=cluster)
        await self._admin_or_client_error(addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, h, timeout_ms)

    async def delete_subscription_group(
        self, addr: str, group: str, timeout_ms: float, remove_offset: bool = False
    ) -> None:
        """DELETE_SUBSCRIPTIONGROUP on one broker (``remove_offset``: the group's committed offsets too)."""
        h = DeleteSubscriptionGroupRequestHeader(groupName=group, removeOffset=remove_offset)
        await self._admin_or_client_error(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, h, timeout_ms)

    async def get_broker_config(self, addr: str, timeout_ms: float) -> dict[str, str]:
        """GET_BROKER_CONFIG: the broker's settings (the answer's ``key=value`` lines, as Java's Properties)."""
        response = await self._admin(addr, RequestCode.GET_BROKER_CONFIG, None, timeout_ms)
        text = bytes(response.body or b"").decode("utf-8")
        return dict(line.partition("=")[::2] for line in text.splitlines() if line and line[0] not in "#!")

    async def update_broker_config(self, addr: str, properties: dict[str, str], timeout_ms: float) -> None:
        """UPDATE_BROKER_CONFIG: the settings as ``key=value`` lines (MixAll.properties2String); the broker applies
        all or none."""
        body = "".join(f"{k}={v}\n" for k, v in properties.items()).encode("utf-8")
        request = RemotingCommand.request(RequestCode.UPDATE_BROKER_CONFIG, body=body)
        response = await self.invoke(addr, request, timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, addr)

    async def get_consumer_connection_list(self, addr: str, group: str, timeout_ms: float) -> ConsumerConnection:
        """GET_CONSUMER_CONNECTION_LIST: the group's online clients on one broker and what they subscribe to."""
        h = GetConsumerConnectionListRequestHeader(consumerGroup=group)
        response = await self._admin(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, h, timeout_ms)
        return ConsumerConnection.decode(response.body or b"{}")

    async def _admin_or_client_error(self, addr: str, code: int, header: Any, timeout_ms: float) -> None:
        response = await self.invoke(addr, RemotingCommand.request(code, encode_header(header)), timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise MQClientException(response.code, response.remark, addr=addr)

    # --- introspection (MQClientAPIImpl#getBrokerRuntimeInfo, #getTopicStatsInfo, #getConsumeStats, #viewMessage,
    # #invokeBrokerToResetOffset) -------------------------------------------------------------------------------
    async def _admin(self, addr: str, code: int, header: Any, timeout_ms: float) -> RemotingCommand:
        request = RemotingCommand.request(code, encode_header(header) if header is not None else None)
        response = await self.invoke(addr, request, timeout_ms)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerException(response.code, response.remark, addr)
        return response

    async def get_broker_runtime_info(self, addr: str, timeout_ms: float) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the broker's runtime KVTable (putTps, brokerVersionDesc, bootTimestamp, …)."""
        response = await self._admin(addr, RequestCode.GET_BROKER_RUNTIME_INFO, None, timeout_ms)
        return KVTable.decode(response.body or b"{}").table

    async def get_topic_stats_info(self, addr: str, topic: str, timeout_ms: float) -> TopicStatsTable:
        """GET_TOPIC_STATS_INFO: min/max offset and last update time of each of the topic's queues on one broker."""
        response = await self._admin(
            addr, RequestCode.GET_TOPIC_STATS_INFO, GetTopicStatsInfoRequestHeader(topic=topic), timeout_ms
        )
        return TopicStatsTable.decode(response.body or b"{}")

    async def get_consume_stats(
        self, addr: str, consumer_group: str, topic: str | None, timeout_ms: float
    ) -> ConsumeStats:
        """GET_CONSUME_STATS: broker and consumer offset of each queue the group has offsets for (``topic``: one)."""
        h = GetConsumeStatsRequestHeader(consumerGroup=consumer_group, topic=topic)
        response = await self._admin(addr, RequestCode.GET_CONSUME_STATS, h, timeout_ms)
        return ConsumeStats.decode(response.body or b"{}")

    async def invoke_broker_to_reset_offset(
        self, addr: str, topic: str, group: str, timestamp: int, is_force: bool, timeout_ms: float
    ) -> dict[MessageQueue, int]:
        """INVOKE_BROKER_TO_RESET_OFFSET: the broker computes each queue's offset at ``timestamp`` and tells the
        group's online clients (RESET_CONSUMER_CLIENT_OFFSET); the new offsets. No client online raises
        ``MQBrokerException`` with CONSUMER_NOT_ONLINE (206), as 4.9 answers."""
        h = ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp, isForce=is_force)
        response = await self._admin(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, h, timeout_ms)
        return ResetOffsetBody.decode(response.body).offset_table if response.body else {}

    async def close(self) -> None:
        await self.remoting_client.close()
