"""SendMessageProcessor: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and
CONSUMER_SEND_MSG_BACK (36), as Apache RocketMQ 4.9's ``br/processor/SendMessageProcessor.java`` and
``AbstractSendMessageProcessor.java`` answer them.

Owns the send checks (4.9's ``msgCheck``: permission, topic name and auto-creation, queue id, forbidden topics),
the stored message (properties byte for byte as 4.9.7 writes them), the retry → DLQ, delay, half-message and timer
rewrites, the PutMessageStatus → response code map, batch sends (one ``put_batch``) and the send-back to
``%RETRY%``/``%DLQ%``. Plain single sends of a chunk take ``send_plain_fast_path.py`` (same records and answers).
Invariants: nothing is stored for a request that fails a check; every send response carries ``MSG_REGION`` and
``TRACE_ON``, errors included; a put that one send fails appends nothing (the run is put again send by send).
Thread-safety: the broker's loop; the put runs inline; ``process_batch`` answers at once (a list) when nothing has
to wait, else returns an awaitable (SYNC_FLUSH sends share one group-commit flush).
Details (each step, batch, send-back, deviations from 4.9): docs/BROKER_DESIGN.md, 'Sends'.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from rmq_core.broker.group_commit_service import GroupCommitService
from rmq_core.broker.inner_put_guard import InnerPutGuard
from rmq_core.broker.processor.send_outcome import (
    ANSWER_KEYS,
    REFUSED_BY_VALIDATION,
    SEND_OK,
    SendRefused,
    parse_address,
)
from rmq_core.broker.processor.send_plain_fast_path import PlainSendFastPath
from rmq_core.broker.schedule.schedule_message_service import (
    delay_level_of,
    redirect_to_schedule_topic,
)
from rmq_core.broker.timer.timer_message_hook import (
    TIMER_PROPERTIES,
    TimerMessageRefused,
    transform_timer_message,
)
from rmq_core.broker.transaction.transactional_message_bridge import parse_half_message_inner
from rmq_core.common import mix_all
from rmq_core.common.clock import now_ms
from rmq_core.common.perm_name import (
    PERM_READ,
    PERM_WRITE,
    is_writeable,
    perm_to_string,
)
from rmq_core.common.sys_flag import build_topic_sys_flag
from rmq_core.common.topic_config import TopicConfig
from rmq_core.message import (
    COMPRESSED_FLAG,
    MULTI_TAGS_FLAG,
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    Message,
    MessageExt,
    decode_messages,
)
from rmq_core.message_encoding import (
    BatchDecodeError,
    decode_batch,
    java_hash_map_order,
    properties_to_string,
    string_to_properties,
)
from rmq_core.remoting.codes import VERSION_V3_4_9, RequestCode, ResponseCode
from rmq_core.remoting.command import RPC_TYPE_RESPONSE, RemotingCommand
from rmq_core.remoting.header import (
    PROPERTY_MSG_REGION,
    PROPERTY_TRACE_SWITCH,
    ConsumerSendMsgBackRequestHeader,
    HeaderError,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    decode_header,
    encode_header,
)
from rmq_core.store import NO_BLOCK_IN_BATCH, BatchPutResult
from rmq_core.store_status import PutMessageStatus

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.ha.replication import Replication
    from rmq_core.broker.schedule.schedule_message_service import ScheduleMessageService
    from rmq_core.broker.stats.broker_stats_manager import BrokerStatsManager
    from rmq_core.broker.subscription_group_manager import SubscriptionGroupManager
    from rmq_core.broker.topic_config_manager import TopicConfigManager
    from rmq_core.remoting.connection import Connection
    from rmq_core.store import MessageStore, PutMessageResult, StoreConfig

log = logging.getLogger(__name__)

DLQ_NUMS_PER_GROUP = 1
TRANSACTION_TYPE_MASK = 0xC
FAQ_URL = "http://rocketmq.apache.org/docs/faq/"
_SEND_CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)


def _stored(results: Iterable[PutMessageResult]) -> list[tuple[int, int, int]]:
    """``(status, commitlog_offset, wrote_bytes)`` of each result: what the flush and replica waits read."""
    return [(r.status, r.commitlog_offset, r.wrote_bytes) for r in results]


def _malformed_remark(reason: str) -> str:
    """The remark of a batch send whose body was refused (``format/batch``'s reason)."""
    return reason if reason == NO_BLOCK_IN_BATCH else f"the batch body is malformed: {reason}"


def suggest_todo(url: str) -> str:
    """FAQUrl.suggestTodo."""
    return f"\nSee {url} for further details."


def topic_config_to_string(cfg: TopicConfig) -> str:
    """TopicConfig.toString (4.9), as it appears in RocketMQ's remarks."""
    return (
        f"TopicConfig [topicName={cfg.topic_name}, readQueueNums={cfg.read_queue_nums}, "
        f"writeQueueNums={cfg.write_queue_nums}, perm={perm_to_string(cfg.perm)}, "
        f"topicFilterType={cfg.topic_filter_type}, topicSysFlag={cfg.topic_sys_flag}, "
        f"order={str(cfg.order).lower()}]"
    )


class _PreparedSend(NamedTuple):
    """A single send that passed its checks: the message and the record fields to store it with."""

    msg: Message
    queue_id: int
    born_host: tuple[str, int]
    born_timestamp: int
    sys_flag: int
    reconsume_times: int
    wait_store_msg_ok: bool
    answer_queue_id: int = -1  # the queue the sender meant (a delay level or timer stores elsewhere); -1: queue_id


class SendMessageProcessor:
    """``SendMessageProcessor(...collaborators)``; ``await process_request(conn, request)``; ``process_batch(conn,
    requests)``: the answers, or an awaitable of them."""

    request_codes = (
        RequestCode.SEND_MESSAGE,
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.CONSUMER_SEND_MSG_BACK,
    )
    batch_codes = _SEND_CODES  # what ``process_batch`` takes: the sends read from one chunk

    def __init__(
        self,
        broker_config: BrokerConfig,
        message_store: MessageStore,
        store_config: StoreConfig,
        topic_config_manager: TopicConfigManager,
        subscription_group_manager: SubscriptionGroupManager,
        broker_stats_manager: BrokerStatsManager,
        schedule_message_service: ScheduleMessageService,
        rng: random.Random | None = None,
        group_commit_service: GroupCommitService | None = None,
        replication: Replication | None = None,
        inner_put_guard: InnerPutGuard | None = None,
    ) -> None:
        self.broker_config = broker_config
        self.inner_put_guard = inner_put_guard or InnerPutGuard(broker_config, topic_config_manager)
        self.message_store = message_store
        self.store_config = store_config
        self.topic_config_manager = topic_config_manager
        self.subscription_group_manager = subscription_group_manager
        self.broker_stats_manager = broker_stats_manager
        self.schedule_message_service = schedule_message_service
        self._random = rng or random.Random()
        self.group_commit_service = group_commit_service or GroupCommitService(message_store)
        self.replication = replication
        self._sync_master = replication is not None and replication.is_sync_master
        # the plain single sends of a chunk: stored and answered by the fast path beside this one (its gate there)
        self._plain_fast_path = PlainSendFastPath(self)

    async def process_request(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        code = request.code
        if code == RequestCode.CONSUMER_SEND_MSG_BACK:
            return await self.consumer_send_msg_back(conn, request)
        if code not in _SEND_CODES:
            return RemotingCommand.response_to(
                request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {code} not supported"
            )
        try:
            header = self.parse_request_header(request)
            if header.batch or code == RequestCode.SEND_BATCH_MESSAGE:
                return await self._send_batch_message(conn, request, header)
            return await self._send_message(conn, request, header)
        except SendRefused as e:
            return self._send_response(request, e.code, e.remark)
        except HeaderError as e:
            return self._send_response(request, ResponseCode.SYSTEM_ERROR, str(e))

    @staticmethod
    def parse_request_header(request: RemotingCommand) -> SendMessageRequestHeader:
        """V2 short names (a..n) for 310 and 320, V1 names for 10 (``parseRequestHeader``)."""
        short = request.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)
        return decode_header(SendMessageRequestHeader, request.ext_fields, short_names=short)

    # --- shared pieces ---------------------------------------------------------------------------------------
    def _send_response(
        self,
        request: RemotingCommand,
        code: int,
        remark: str | None = None,
        header: SendMessageResponseHeader | None = None,
    ) -> RemotingCommand:
        cfg = self.broker_config
        trace_on = cfg.trace_on
        ext: dict[str, Any] = {
            PROPERTY_MSG_REGION: cfg.region_id,
            PROPERTY_TRACE_SWITCH: "true" if trace_on else "false",
        }
        if header is not None:
            ext.update(encode_header(header))
        return RemotingCommand.response_to(request, code, remark=remark, ext_fields=ext)

    def _broker_forbidden(self) -> SendRefused:
        return SendRefused(
            ResponseCode.NO_PERMISSION,
            f"the broker[{self.broker_config.broker_ip1}] sending message is forbidden",
        )

    def _create_back_topic(self, topic: str, queue_nums: int, perm: int, topic_sys_flag: int) -> TopicConfig | None:
        """``createTopicInSendMessageBackMethod``; None when the manager refuses the name."""
        try:
            return self.topic_config_manager.create_topic_in_send_message_back_method(
                topic, queue_nums, perm, topic_sys_flag
            )
        except ValueError as e:
            log.warning("cannot create topic %s: %s", topic, e)
            return None

    def _random_queue(self, queue_nums: int, topic: str) -> int:
        if queue_nums <= 0:
            raise SendRefused(ResponseCode.SYSTEM_ERROR, f"topic[{topic}] has no writable queue")
        return self._random.randrange(99999999) % queue_nums

    def _must_wait_flush(self, wait_store_msg_ok: bool = True) -> bool:
        """SYNC_FLUSH and the sender waits for the store (4.9: ``isWaitStoreMsgOK``, true unless WAIT=false)."""
        return wait_store_msg_ok and self.store_config.flush_disk_type == "SYNC_FLUSH"

    async def _flushed(self, stored: Iterable[tuple[int, int, int]]) -> bool:
        """Awaits the group commit covering the records a put appended (with ``wait_flush=False``), given as
        ``(status, commitlog_offset, wrote_bytes)`` (``_stored``): False when the flush timed out or failed, so
        their PUT_OK becomes FLUSH_DISK_TIMEOUT."""
        ends = [offset + wrote for status, offset, wrote in stored if status == PutMessageStatus.PUT_OK]
        if not ends:
            return True
        return await self.group_commit_service.wait(max(ends))

    async def _replica_status(self, stored: Iterable[tuple[int, int, int]]) -> PutMessageStatus | None:
        """SYNC_MASTER (4.9 ``submitReplicaRequest``, broker/ha/replication.py): None when the records appended
        (``(status, commitlog_offset, wrote_bytes)``, ``_stored``) are on a slave (or the broker is no SYNC_MASTER),
        else FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE."""
        if not self._sync_master or self.replication is None:
            return None
        ends = [offset + wrote for status, offset, wrote in stored if status in SEND_OK and wrote > 0]
        if not ends:
            return None
        status = await self.replication.wait_for_slave(max(ends))
        return None if status == PutMessageStatus.PUT_OK else status

    async def _replicated(self, results: Sequence[PutMessageResult], wait_store_msg_ok: bool = True) -> None:
        """``_replica_status`` applied: the replica's status overrides the flush's, as 4.9's ``thenCombine``."""
        if not wait_store_msg_ok or not self._sync_master:
            return
        status = await self._replica_status(_stored(results))
        if status is not None:
            for r in results:
                if r.status in SEND_OK:
                    r.status = status

    # --- msgCheck --------------------------------------------------------------------------------------------
    def msg_check(self, conn: Connection, header: SendMessageRequestHeader) -> TopicConfig:
        """``AbstractSendMessageProcessor.msgCheck``: the topic's config (created if need be) or ``SendRefused``."""
        return self._check_topic(
            conn, header.topic, header.queueId, header.unitMode, header.defaultTopic, header.defaultTopicQueueNums
        )

    def _check_topic(
        self,
        conn: Connection,
        topic: str,
        queue_id: int,
        unit_mode: bool | None,
        default_topic: str,
        default_topic_queue_nums: int,
    ) -> TopicConfig:
        """``msg_check`` of the header fields it reads."""
        if not is_writeable(self.broker_config.broker_permission):
            raise self._broker_forbidden()
        reason = mix_all.validate_topic(topic)
        if reason is not None:
            raise SendRefused(ResponseCode.SYSTEM_ERROR, reason)
        if topic in mix_all.NOT_ALLOWED_SEND_TOPICS:
            raise SendRefused(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
        tcm = self.topic_config_manager
        topic_config = tcm.select_topic_config(topic)
        if topic_config is None:
            topic_sys_flag = 0
            if unit_mode:
                topic_sys_flag = (
                    build_topic_sys_flag(False, True)
                    if mix_all.is_retry_topic(topic)
                    else build_topic_sys_flag(True, False)
                )
            log.warning("the topic %s not exist, producer: %s", topic, conn.remote_address)
            topic_config = tcm.create_topic_in_send_message_method(
                topic, default_topic, conn.remote_address, default_topic_queue_nums, topic_sys_flag
            )
            if topic_config is None and mix_all.is_retry_topic(topic):
                topic_config = self._create_back_topic(topic, 1, PERM_WRITE | PERM_READ, topic_sys_flag)
            if topic_config is None:
                raise SendRefused(
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic[{topic}] not exist, apply first please!{suggest_todo(FAQ_URL)}",
                )
        valid = max(topic_config.write_queue_nums, topic_config.read_queue_nums)
        if queue_id >= valid:
            info = (
                f"request queueId[{queue_id}] is illegal, {topic_config_to_string(topic_config)} "
                f"Producer: {conn.remote_address}"
            )
            log.warning(info)
            raise SendRefused(ResponseCode.SYSTEM_ERROR, info)
        if not is_writeable(topic_config.perm):
            raise SendRefused(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        return topic_config

    def _pre_send(self, conn: Connection, header: SendMessageRequestHeader) -> tuple[TopicConfig, int]:
        topic_config = self.msg_check(conn, header)
        queue_id = header.queueId
        if queue_id < 0:
            queue_id = self._random_queue(topic_config.write_queue_nums, header.topic)
        return topic_config, queue_id

    # --- SEND_MESSAGE / SEND_MESSAGE_V2 ----------------------------------------------------------------------
    async def _send_message(
        self, conn: Connection, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> RemotingCommand:
        send = self._prepare_send(conn, request, header)
        result = self.message_store.put_message(
            send.msg,
            send.queue_id,
            send.born_host,
            born_timestamp=send.born_timestamp,
            sys_flag=send.sys_flag,
            reconsume_times=send.reconsume_times,
            wait_flush=False,
            trailing_separator=False,
        )
        if self._must_wait_flush(send.wait_store_msg_ok) and not await self._flushed(_stored((result,))):
            result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        await self._replicated((result,), send.wait_store_msg_ok)
        return self._send_answer(request, send, result)

    def _prepare_send(
        self, conn: Connection, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> _PreparedSend:
        """The checks of a single send and the message to store (``SendRefused`` when a check fails)."""
        topic_config, queue_id = self._pre_send(conn, header)
        topic = header.topic
        reconsume_times = header.reconsumeTimes or 0
        properties = string_to_properties(header.properties)
        prepared = properties.get(PROPERTY_TRANSACTION_PREPARED, "").lower() == "true"
        if prepared and self.broker_config.reject_transaction_message:
            raise SendRefused(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.broker_config.broker_ip1}] sending transaction message is forbidden",
            )

        topic, queue_id = self._handle_retry_and_dlq(request, header, topic, queue_id, reconsume_times, properties)
        sys_flag = header.sysFlag
        if topic_config.topic_filter_type == "MULTI_TAG":
            sys_flag |= MULTI_TAGS_FLAG
        properties[PROPERTY_CLUSTER] = self.broker_config.broker_cluster_name
        # 4.9.7 removes WAIT before writing the send's string and puts it back (last) after: a rewrite below (a delay,
        # a half message) writes the map again, WAIT included
        wait = properties.pop(PROPERTY_WAIT_STORE_MSG_OK, None)
        wait_store_msg_ok = wait != "false"
        if wait is not None:
            properties[PROPERTY_WAIT_STORE_MSG_OK] = wait

        msg = Message(topic, request.body or b"", flag=header.flag)
        msg.properties = properties
        real_queue_id = queue_id
        if prepared:  # a transaction's half message (its DELAY, if any, applies once committed)
            queue_id, sys_flag = parse_half_message_inner(msg, queue_id, sys_flag)
        else:
            queue_id = self._redirect_delay(msg, queue_id, sys_flag)
        # stored as 4.9.7's messageProperties2String writes the map (HashMap order; the table sized with WAIT in it)
        msg.properties = java_hash_map_order(msg.properties)
        if msg.topic == topic:  # not rewritten: the send's own string, without WAIT
            msg.properties.pop(PROPERTY_WAIT_STORE_MSG_OK, None)
        born_host = parse_address(conn.remote_address)
        if self.broker_config.is_slave:
            raise SendRefused(
                ResponseCode.SERVICE_NOT_AVAILABLE, "service not available now, messages are put to the slave"
            )
        return _PreparedSend(
            msg, queue_id, born_host, header.bornTimestamp, sys_flag, reconsume_times, wait_store_msg_ok, real_queue_id
        )

    def _send_answer(
        self, request: RemotingCommand, send: _PreparedSend, result: PutMessageResult, *, count: bool = True
    ) -> RemotingCommand:
        """The response to a single send once stored: the status's code, or SUCCESS with msgId, queueId and
        queueOffset (the stats counted, unless ``count`` is False: the caller counts a chunk's at once)."""
        code, remark = self._status_to_code(result.status)
        if code not in SEND_OK.values():
            return self._send_response(request, code, remark)
        queue_id = send.queue_id
        if count:
            self._count_puts(((send, result),))
        # SendMessageResponseHeader (msgId, queueId, queueOffset) written straight into extFields: the hot path
        cfg = self.broker_config
        region, trace, msg_id, answer_queue_id, queue_offset = ANSWER_KEYS
        ext = {
            region: cfg.region_id,
            trace: "true" if cfg.trace_on else "false",
            msg_id: result.msg_id or "",  # set: the record was written
            answer_queue_id: str(queue_id if send.answer_queue_id < 0 else send.answer_queue_id),  # 4.9/5.x: queueIdInt
            queue_offset: str(result.queue_offset),
        }
        return RemotingCommand(
            code=code,
            language="JAVA",
            version=request.version,
            opaque=request.opaque,
            flag=RPC_TYPE_RESPONSE,
            ext_fields=ext,
            serialize_type=request.serialize_type,
        )

    def _count_puts(self, stored: Iterable[tuple[_PreparedSend, PutMessageResult]]) -> None:
        """The put stats of single sends answered with a SUCCESS-like code (4.9 counts them in
        ``handlePutMessageResult``): per topic, one ``inc_put`` for all its sends; a delayed message's schedule
        queue counted too."""
        per_topic: dict[str, list[int]] = {}
        stats = self.broker_stats_manager
        for send, result in stored:
            if result.status not in SEND_OK:
                continue
            topic = send.msg.topic
            if topic == mix_all.RMQ_SYS_SCHEDULE_TOPIC:
                stats.inc_queue_put_nums(topic, send.queue_id, 1, 1)
                stats.inc_queue_put_size(topic, send.queue_id, result.wrote_bytes)
            counts = per_topic.get(topic)
            if counts is None:
                per_topic[topic] = [1, result.wrote_bytes]
            else:
                counts[0] += 1
                counts[1] += result.wrote_bytes
        for topic, (n, size) in per_topic.items():
            stats.inc_put(topic, n, size, times=n)

    # --- the sends of one received chunk ---------------------------------------------------------------------
    def process_batch(
        self, conn: Connection, requests: list[RemotingCommand]
    ) -> list[RemotingCommand | bytes | None] | Awaitable[list[RemotingCommand | bytes | None]]:
        """The send requests read from one chunk of a connection, answered in order (an answer may come as its
        encoded frame). A chunk with plain single sends takes the plain-send fast path (``send_plain_fast_path.py``:
        its gate, and the same records, answers and stats as this path gives each send), which hands every other
        request back to ``_process_general`` in its turn; a chunk without one takes the general path whole.

        The answers come at once (a list) when nothing has to wait (``_waits_for_nothing``: plain and refused sends,
        or batch sends only); else an awaitable of them. Either way the work is done once, in order."""
        sends = self._plain_fast_path.read(requests)
        if sends.keys:  # at least one plain send
            return self._plain_fast_path.process(conn, requests, sends)
        if self._waits_for_nothing() and all(r.code == RequestCode.SEND_BATCH_MESSAGE for r in requests):
            return [self._send_batch_now(conn, r) for r in requests]  # batch sends only: answered at once
        return self._process_general_batch(conn, requests)

    def _waits_for_nothing(self) -> bool:
        """A stored send is answered without awaiting anything: neither a flush (SYNC_FLUSH) nor a slave
        (SYNC_MASTER with replication)."""
        return not self._must_wait_flush() and not (self._sync_master and self.replication is not None)

    async def _process_general_batch(
        self, conn: Connection, requests: list[RemotingCommand]
    ) -> list[RemotingCommand | bytes | None]:
        responses: list[RemotingCommand | bytes | None] = [None] * len(requests)
        await self._process_general(conn, requests, range(len(requests)), responses)
        return responses

    async def _process_general(
        self,
        conn: Connection,
        requests: list[RemotingCommand],
        indexes: Iterable[int],
        responses: list[RemotingCommand | bytes | None],
    ) -> None:
        """The requests at ``indexes``, answered in order: consecutive single sends (SEND_MESSAGE /
        SEND_MESSAGE_V2 that pass their checks) are stored with one ``put_messages`` call, each record with its own
        born timestamp, sys flag and reconsume times, exactly as one by one; a send refused by a check stores nothing
        and gets its own answer; batch sends and send-backs go through ``process_request`` in their turn (the single
        sends before them stored first, so the store keeps the arrival order)."""
        run: list[tuple[int, _PreparedSend]] = []
        for i in indexes:
            request = requests[i]
            code = request.code
            if code == RequestCode.SEND_MESSAGE or code == RequestCode.SEND_MESSAGE_V2:
                try:
                    header = self.parse_request_header(request)
                    if not header.batch:
                        run.append((i, self._prepare_send(conn, request, header)))
                        continue
                except SendRefused as e:
                    responses[i] = self._send_response(request, e.code, e.remark)
                    continue
                except HeaderError as e:
                    responses[i] = self._send_response(request, ResponseCode.SYSTEM_ERROR, str(e))
                    continue
                except Exception as e:  # as RemotingServer answers a processor's failure: this request only
                    log.exception("send %d failed", request.opaque)
                    responses[i] = RemotingCommand.response_to(
                        request, ResponseCode.SYSTEM_ERROR, remark=f"{type(e).__name__}: {e}"
                    )
                    continue
            if run:
                await self._put_run(requests, run, responses)
                run = []
            responses[i] = await self.process_request(conn, request)
        if run:
            await self._put_run(requests, run, responses)

    async def _put_run(
        self,
        requests: list[RemotingCommand],
        run: list[tuple[int, _PreparedSend]],
        responses: list[RemotingCommand | bytes | None],
    ) -> None:
        """Stores a run of checked single sends (one connection: one born host) in one call and answers each."""
        sends = [send for _, send in run]

        def put(sends: list[_PreparedSend]) -> list[PutMessageResult]:
            return list(
                self.message_store.put_messages(
                    [(send.msg, send.queue_id) for send in sends],
                    sends[0].born_host,
                    wait_flush=False,
                    own_fields=[(send.born_timestamp, send.sys_flag, send.reconsume_times) for send in sends],
                    trailing_separator=False,
                )
            )

        try:
            stored = put(sends)
            if len(sends) > 1 and stored[0].status in REFUSED_BY_VALIDATION:  # one send's verdict, not the run's
                stored = [r for send in sends for r in put([send])]
        except Exception as e:  # refused before anything was appended: every send of the run gets the error
            log.exception("storing %d sends failed", len(run))
            for i, _ in run:
                responses[i] = RemotingCommand.response_to(
                    requests[i], ResponseCode.SYSTEM_ERROR, remark=f"{type(e).__name__}: {e}"
                )
            return
        waiting = [r for send, r in zip(sends, stored) if self._must_wait_flush(send.wait_store_msg_ok)]
        if waiting and not await self._flushed(_stored(waiting)):
            for r in waiting:
                if r.status == PutMessageStatus.PUT_OK:
                    r.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        if self._sync_master:
            await self._replicated([r for send, r in zip(sends, stored) if send.wait_store_msg_ok])
        for (i, send), result in zip(run, stored):
            responses[i] = self._send_answer(requests[i], send, result, count=False)
        self._count_puts(zip(sends, stored))

    def _handle_retry_and_dlq(
        self,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        topic: str,
        queue_id: int,
        reconsume_times: int,
        properties: dict[str, str],
    ) -> tuple[str, int]:
        """``handleRetryAndDLQ``: a message for ``%RETRY%<group>`` that has been retried enough goes to the DLQ."""
        if not mix_all.is_retry_topic(topic):
            return topic, queue_id
        group = topic[len(mix_all.RETRY_GROUP_TOPIC_PREFIX) :]
        group_config = self.subscription_group_manager.find_subscription_group_config(group)
        if group_config is None:
            raise SendRefused(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {group} {suggest_todo(FAQ_URL)}",
            )
        max_reconsume_times = group_config.retry_max_times
        if request.version >= VERSION_V3_4_9 and header.maxReconsumeTimes is not None:
            max_reconsume_times = header.maxReconsumeTimes
        if reconsume_times < max_reconsume_times:
            return topic, queue_id
        dlq = mix_all.get_dlq_topic(group)
        dlq_config = self._create_back_topic(dlq, DLQ_NUMS_PER_GROUP, PERM_WRITE | PERM_READ, 0)
        if dlq_config is None:
            raise SendRefused(ResponseCode.SYSTEM_ERROR, f"topic[{dlq}] not exist")
        properties.pop(PROPERTY_DELAY_TIME_LEVEL, None)
        return dlq, self._random.randrange(99999999) % DLQ_NUMS_PER_GROUP

    def _redirect_delay(self, msg: Message, queue_id: int, sys_flag: int) -> int:
        """4.9 ``CommitLog.putMessage``: non-transactional (or commit) messages with DELAY > 0 go to the schedule
        topic."""
        if (sys_flag & TRANSACTION_TYPE_MASK) not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            return queue_id
        props = msg.properties
        if PROPERTY_DELAY_TIME_LEVEL not in props and props.keys().isdisjoint(TIMER_PROPERTIES):
            return queue_id  # neither delayed nor a timer message (most sends): both steps below would keep it
        try:
            queue_id = self._transform_timer(msg, queue_id)  # 5.x: timer first, a delay level wins over it
            return redirect_to_schedule_topic(msg, queue_id, self.schedule_message_service.max_delay_level)
        except ValueError as e:
            raise SendRefused(ResponseCode.MESSAGE_ILLEGAL, str(e)) from None

    def _transform_timer(self, msg: Message, queue_id: int) -> int:
        """RocketMQ 5's timer messages (``broker/timer/timer_message_hook.py``): to ``rmq_sys_wheel_timer``."""
        cfg = self.broker_config
        try:
            return transform_timer_message(
                msg,
                queue_id,
                delay_level_of(msg.properties),
                timer_wheel_enable=cfg.timer_wheel_enable,
                timer_max_delay_sec=cfg.timer_max_delay_sec,
                timer_precision_ms=cfg.timer_precision_ms,
                now_ms=now_ms(),
            )
        except TimerMessageRefused as e:
            raise SendRefused(e.code, e.remark) from None

    def _status_to_code(self, status: PutMessageStatus) -> tuple[int, str | None]:
        """``handlePutMessageResult``: PutMessageStatus → (response code, remark)."""
        ok = SEND_OK.get(status)
        if ok is not None:
            return ok, None
        if status == PutMessageStatus.CREATE_MAPPED_FILE_FAILED:
            return ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."
        if status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED):
            return ResponseCode.MESSAGE_ILLEGAL, self._illegal_remark()
        if status == PutMessageStatus.SERVICE_NOT_AVAILABLE:
            disk_util = self.message_store.clean_service.clean_commit_log_service.disk_util()
            return ResponseCode.SERVICE_NOT_AVAILABLE, (
                "service not available now. It may be caused by one of the following reasons: the broker's disk is "
                f"full [{disk_util}], messages are put to the slave, message store has been shut down, etc."
            )
        if status == PutMessageStatus.OS_PAGECACHE_BUSY:
            return ResponseCode.SYSTEM_BUSY, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
        if status == PutMessageStatus.UNKNOWN_ERROR:
            return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"
        return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"

    def _illegal_remark(self) -> str:
        return (
            "the message is illegal, maybe msg body or properties length not matched. msg body length limit "
            f"{self.store_config.max_message_size}B, msg properties length limit 32KB."
        )

    # --- SEND_BATCH_MESSAGE ----------------------------------------------------------------------------------
    async def _send_batch_message(
        self, conn: Connection, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> RemotingCommand:
        queue_id, result = self._store_batch(conn, request, header)
        status = result.status
        if status == PutMessageStatus.PUT_OK:
            # (status, offset, wrote) whose sum is where the last record ends: what the flush and replica waits read
            stored = ((status, result.end_offset - result.wrote_bytes, result.wrote_bytes),)
            if self._must_wait_flush() and not await self._flushed(stored):
                status = PutMessageStatus.FLUSH_DISK_TIMEOUT
            replica = await self._replica_status(stored)
            if replica is not None:
                status = replica
        return self._batch_answer(request, header.topic, queue_id, result, status)

    def _send_batch_now(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """``process_request`` of a SEND_BATCH_MESSAGE when nothing has to be awaited (``_waits_for_nothing``)."""
        try:
            header = self.parse_request_header(request)
            queue_id, result = self._store_batch(conn, request, header)
        except SendRefused as e:
            return self._send_response(request, e.code, e.remark)
        except HeaderError as e:
            return self._send_response(request, ResponseCode.SYSTEM_ERROR, str(e))
        return self._batch_answer(request, header.topic, queue_id, result, result.status)

    def _store_batch(
        self, conn: Connection, request: RemotingCommand, header: SendMessageRequestHeader
    ) -> tuple[int, BatchPutResult]:
        """The checks of a batch send, then its put (the flush and the slave not awaited): the queue id stored to
        and the store's result, or ``SendRefused`` (nothing stored). The store's engine reads the body's blocks
        (``MessageStore.put_batch``): each record's properties are the block's followed by the batch-level ones."""
        topic_config, queue_id = self._pre_send(conn, header)
        topic = header.topic  # at most TOPIC_MAX_LENGTH long: msg_check's validate_topic
        if mix_all.is_retry_topic(topic):
            raise SendRefused(ResponseCode.MESSAGE_ILLEGAL, f"batch request does not support retry group {topic}")
        sys_flag = header.sysFlag
        if topic_config.topic_filter_type == "MULTI_TAG":
            sys_flag |= MULTI_TAGS_FLAG
        if sys_flag & TRANSACTION_TYPE_MASK != TRANSACTION_NOT_TYPE:
            raise SendRefused(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot be transactional")
        batch_props = string_to_properties(header.properties)
        batch_props[PROPERTY_CLUSTER] = self.broker_config.broker_cluster_name
        try:
            if delay_level_of(batch_props) > 0:
                raise SendRefused(ResponseCode.MESSAGE_ILLEGAL, "batch messages cannot be delayed (DELAY property)")
        except ValueError as e:
            raise SendRefused(ResponseCode.MESSAGE_ILLEGAL, str(e)) from None
        body = request.body or b""
        limit = self.store_config.max_message_size
        if len(body) > limit:
            raise SendRefused(
                ResponseCode.MESSAGE_ILLEGAL,
                f"message body size exceeded, msg body size: {len(body)}, maxMessageSize: {limit}",
            )
        if self.broker_config.is_slave:
            try:  # a malformed body is refused as such first, as on a master
                blocks = decode_batch(body)
            except BatchDecodeError as e:
                raise SendRefused(ResponseCode.MESSAGE_ILLEGAL, _malformed_remark(str(e))) from None
            if blocks:
                raise SendRefused(
                    ResponseCode.SERVICE_NOT_AVAILABLE, "service not available now, messages are put to the slave"
                )
            raise SendRefused(ResponseCode.MESSAGE_ILLEGAL, NO_BLOCK_IN_BATCH)
        result = self.message_store.put_batch(
            topic,
            queue_id,
            body,
            # as 4.9.7's messageProperties2String writes its HashMap: in its order, no separator after the last
            properties_to_string(java_hash_map_order(batch_props), trailing_separator=False),
            parse_address(conn.remote_address),
            born_timestamp=header.bornTimestamp,
            sys_flag=sys_flag,
            reconsume_times=header.reconsumeTimes or 0,
            wait_flush=False,
        )
        if result.malformed is not None:
            raise SendRefused(ResponseCode.MESSAGE_ILLEGAL, _malformed_remark(result.malformed))
        return queue_id, result

    def _batch_answer(
        self, request: RemotingCommand, topic: str, queue_id: int, result: BatchPutResult, status: PutMessageStatus
    ) -> RemotingCommand:
        """The answer of a stored batch send whose final status (the flush's and the slave's applied) is ``status``:
        its error, or msgId (the records' offset ids joined with ','), queueId and the first queueOffset, the put
        stats counted."""
        code, remark = self._status_to_code(status)
        if status not in SEND_OK:
            return self._send_response(request, code, remark)
        stats = self.broker_stats_manager
        stats.inc_topic_put_nums(topic, result.stored, 1)
        stats.inc_topic_put_size(topic, result.wrote_bytes)
        stats.inc_broker_put_nums(result.stored)
        resp_header = SendMessageResponseHeader(msgId=result.msg_ids, queueId=queue_id, queueOffset=result.queue_offset)
        return self._send_response(request, code, None, resp_header)

    # --- CONSUMER_SEND_MSG_BACK ------------------------------------------------------------------------------
    async def consumer_send_msg_back(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = decode_header(ConsumerSendMsgBackRequestHeader, request.ext_fields)

        def answer(code: int, remark: str | None = None) -> RemotingCommand:
            return RemotingCommand.response_to(request, code, remark=remark)

        group_config = self.subscription_group_manager.find_subscription_group_config(header.group)
        if group_config is None:
            return answer(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {header.group} {suggest_todo(FAQ_URL)}",
            )
        if not is_writeable(self.broker_config.broker_permission):
            return answer(
                ResponseCode.NO_PERMISSION, f"the broker[{self.broker_config.broker_ip1}] sending message is forbidden"
            )
        if group_config.retry_queue_nums <= 0:
            return answer(ResponseCode.SUCCESS)

        new_topic = mix_all.get_retry_topic(header.group)
        queue_id = self._random.randrange(99999999) % group_config.retry_queue_nums
        topic_sys_flag = build_topic_sys_flag(False, True) if header.unitMode else 0
        topic_config = self._create_back_topic(
            new_topic, group_config.retry_queue_nums, PERM_WRITE | PERM_READ, topic_sys_flag
        )
        if topic_config is None:
            return answer(ResponseCode.SYSTEM_ERROR, f"topic[{new_topic}] not exist")
        if not is_writeable(topic_config.perm):
            return answer(ResponseCode.NO_PERMISSION, f"the topic[{new_topic}] sending message is forbidden")

        msg_ext = self._look_message_by_offset(header.offset)
        if msg_ext is None:
            return answer(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {header.offset}")

        properties = dict(msg_ext.properties)
        if PROPERTY_RETRY_TOPIC not in properties:
            properties[PROPERTY_RETRY_TOPIC] = msg_ext.topic

        delay_level = header.delayLevel
        max_reconsume_times = group_config.retry_max_times
        if request.version >= VERSION_V3_4_9 and header.maxReconsumeTimes is not None:
            max_reconsume_times = header.maxReconsumeTimes

        if msg_ext.reconsume_times >= max_reconsume_times or delay_level < 0:
            new_topic = mix_all.get_dlq_topic(header.group)
            queue_id = self._random.randrange(99999999) % DLQ_NUMS_PER_GROUP
            # 4.9.0–4.9.3 created the DLQ write-only; 4.9.4+ and 5.x make it readable too (it can be queried)
            dlq_config = self._create_back_topic(new_topic, DLQ_NUMS_PER_GROUP, PERM_WRITE | PERM_READ, 0)
            if dlq_config is None:
                return answer(ResponseCode.SYSTEM_ERROR, f"topic[{new_topic}] not exist")
            properties.pop(PROPERTY_DELAY_TIME_LEVEL, None)
        else:
            if delay_level == 0:
                delay_level = 3 + msg_ext.reconsume_times
            properties[PROPERTY_DELAY_TIME_LEVEL] = str(delay_level)

        origin_msg_id = properties.get(PROPERTY_ORIGIN_MESSAGE_ID)
        properties[PROPERTY_ORIGIN_MESSAGE_ID] = (
            origin_msg_id if origin_msg_id and origin_msg_id.strip() else msg_ext.msg_id
        )

        refusal = self.inner_put_guard.refusal(new_topic, queue_id)
        if refusal is not None:
            return answer(refusal.code, refusal.remark)
        msg = Message(new_topic, msg_ext.body, flag=msg_ext.flag)
        msg.properties = properties
        try:
            queue_id = self._redirect_delay(msg, queue_id, msg_ext.sys_flag)
        except SendRefused as e:
            return answer(e.code, e.remark)
        if self.broker_config.is_slave:
            return answer(ResponseCode.SYSTEM_ERROR, PutMessageStatus.SERVICE_NOT_AVAILABLE.name)
        result = self.message_store.put_message(
            msg,
            queue_id,
            msg_ext.born_host,
            born_timestamp=msg_ext.born_timestamp,
            sys_flag=msg_ext.sys_flag,
            reconsume_times=msg_ext.reconsume_times + 1,
            wait_flush=False,
        )
        if self._must_wait_flush() and not await self._flushed(_stored((result,))):
            result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        await self._replicated((result,))
        if result.status != PutMessageStatus.PUT_OK:
            return answer(ResponseCode.SYSTEM_ERROR, result.status.name)
        back_topic = properties.get(PROPERTY_RETRY_TOPIC) or msg_ext.topic
        if msg.topic == mix_all.RMQ_SYS_SCHEDULE_TOPIC:
            self.broker_stats_manager.inc_topic_put_nums(msg.topic, 1, 1)
            self.broker_stats_manager.inc_topic_put_size(msg.topic, result.wrote_bytes)
            self.broker_stats_manager.inc_queue_put_nums(msg.topic, queue_id, 1, 1)
            self.broker_stats_manager.inc_queue_put_size(msg.topic, queue_id, result.wrote_bytes)
        self.broker_stats_manager.inc_send_back_nums(header.group, back_topic)
        return answer(ResponseCode.SUCCESS)

    def _look_message_by_offset(self, offset: int) -> MessageExt | None:
        """The record at a commitlog offset with its body as stored (still compressed when its sys flag says so,
        as 4.9's lookMessageByOffset leaves it), or None when there is no record there."""
        store = self.message_store
        try:
            msg_ext = store.look_message_by_offset(offset)
            if msg_ext is None or not (msg_ext.sys_flag & COMPRESSED_FLAG):
                return msg_ext
            raw = store.read_commit_log(offset, msg_ext.store_size)
            if raw is None:
                return None
            return decode_messages(raw, decompress=False)[0]
        except Exception as e:  # a bad offset (not a record start, negative, past the end) is the client's error
            log.warning("look message by offset %d failed: %s", offset, e)
            return None
