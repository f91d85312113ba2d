"""Producer (4.9 ``DefaultMQProducer`` + ``DefaultMQProducerImpl``): sync, async, oneway, ordered (selector) and batch
sends through the shared ``MQClientInstance``.

Invariants (sendDefaultImpl / sendKernelImpl / sendSelectImpl): 1. a message is checked before anything is sent
(a bad one raises ``MQClientException(13, ...)``, nothing stored); 2. each message gets a UNIQ_KEY; a large body goes
zlib-compressed, the caller's ``msg.body`` untouched; 3. SYNC sends retry ``retry_times_when_send_failed`` times
avoiding the last failed broker, within ``timeout_ms``; ordered and oneway sends never retry; 4. a topic unknown to
the name server is sent with TBW102's route, so a broker auto-creates it.
Fast send: a default SYNC or ASYNC send's first attempt runs on the caller's thread (``fast_send.py``, its gate).
Thread-safety: public methods from any thread except the client's loop thread (they block on it); ``send_async``
returns a ``concurrent.futures.Future`` (a ``LightFuture``); queue selection, the fault table and the encoding are
safe on any thread.
Details (the invariants and the threading in full): docs/CLIENT_DESIGN.md, 'Producer'.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import time
import zlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from rmq_core import _backend
from rmq_core.client import mq_admin_impl
from rmq_core.client.client_config import ClientConfig
from rmq_core.client.exceptions import (
    ClientErrorCode,
    MQBrokerException,
    MQClientException,
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
    suggest_todo,
)
from rmq_core.client.message_batch import MessageBatch
from rmq_core.client.producer import fast_send
from rmq_core.client.producer.message_queue_selector import MessageQueueSelector
from rmq_core.client.producer.mq_fault_strategy import MQFaultStrategy
from rmq_core.client.producer.send_state import ASYNC as ASYNC  # the send modes, importable from here too
from rmq_core.client.producer.send_state import ONEWAY as ONEWAY
from rmq_core.client.producer.send_state import SYNC as SYNC
from rmq_core.client.producer.send_state import SendState, monotonic_ms
from rmq_core.client.send_result import SendResult
from rmq_core.client.topic_publish_info import PublishInfoTable, TopicPublishInfo
from rmq_core.common import mix_all
from rmq_core.message import (
    COMPRESSED_FLAG,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_TRANSACTION_PREPARED,
    SYSFLAG_COMPRESSION_ZLIB,
    TRANSACTION_PREPARED_TYPE,
    UNIQ_KEY,
    Message,
    MessageExt,
    MessageQueue,
    create_uniq_id,
)
from rmq_core.message_encoding import properties_to_string
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.header import SendMessageRequestHeader

if TYPE_CHECKING:
    from rmq_core.client.mq_client_instance import MQClientInstance

log = logging.getLogger(__name__)

COMPRESS_LEVEL = 5
SEND_MSG_FAILED_URL = "http://rocketmq.apache.org/docs/faq/"
# MQBrokerException codes after which sendDefaultImpl tries another queue (DefaultMQProducer.retryResponseCodes)
RETRY_RESPONSE_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
        204,
        205,  # NO_BUYER_ID, NOT_IN_CURRENT_UNIT
    }
)
CREATE_JUST, RUNNING, SHUTDOWN_ALREADY, START_FAILED = "CREATE_JUST", "RUNNING", "SHUTDOWN_ALREADY", "START_FAILED"
Selector = MessageQueueSelector | Callable[[list[MessageQueue], Message, Any], MessageQueue]
_PROPERTIES = [f.name for f in dataclasses.fields(SendMessageRequestHeader)].index("properties")


def _wire_copy(msg: Message, body: bytes) -> Message:
    """A shallow copy of ``msg`` with another body (the compressed one), sharing its properties; ``msg`` itself when
    the body is its own (nothing to copy: one object fewer per send in flight)."""
    if body is msg.body or isinstance(msg, MessageBatch):
        return msg
    m = Message.__new__(Message)
    m.topic, m.body, m.flag, m.properties = msg.topic, body, msg.flag, msg.properties
    return m


class Producer(PublishInfoTable):
    def __init__(
        self,
        group: str = mix_all.DEFAULT_PRODUCER_GROUP,
        namesrv_addr: str | None = None,
        *,
        send_msg_timeout: int = 3000,
        retry_times_when_send_failed: int = 2,
        retry_times_when_send_async_failed: int = 2,
        retry_another_broker_when_not_store_ok: bool = False,
        default_topic_queue_nums: int = 4,
        compress_msg_body_over_howmuch: int = 4096,
        max_message_size: int = 4 * 1024 * 1024,
        instance_name: str = "DEFAULT",
        send_latency_fault_enable: bool = False,
        create_topic_key: str = mix_all.AUTO_CREATE_TOPIC_KEY_TOPIC,
        **settings: Any,
    ) -> None:
        unknown = set(settings) - ClientConfig.setting_names()
        if unknown:
            raise TypeError(f"Producer got unknown settings: {', '.join(sorted(unknown))}")
        self.producer_group = group
        self.client_config = ClientConfig(instance_name=instance_name, **settings)
        if namesrv_addr is not None:
            self.client_config.namesrv_addr = namesrv_addr
        self.send_msg_timeout = send_msg_timeout
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_times_when_send_async_failed = retry_times_when_send_async_failed
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        self.default_topic_queue_nums = default_topic_queue_nums
        self.compress_msg_body_over_howmuch = compress_msg_body_over_howmuch
        self.max_message_size = max_message_size
        self.create_topic_key = create_topic_key
        self.mq_fault_strategy = MQFaultStrategy(send_latency_fault_enable)
        self.topic_publish_info_table: dict[str, TopicPublishInfo] = {}
        self.service_state = CREATE_JUST
        self.instance: MQClientInstance | None = None

    # --- MQProducerInner ---------------------------------------------------------------------------------------
    @property
    def group(self) -> str:
        return self.producer_group

    def is_unit_mode(self) -> bool:
        return self.client_config.unit_mode

    # --- lifecycle ---------------------------------------------------------------------------------------------
    @property
    def client_id(self) -> str | None:
        return self.instance.client_id if self.instance is not None else None

    def start(self) -> None:
        from rmq_core.client.mq_client_manager import MQClientManager

        self.prepare_start()
        instance = MQClientManager.get_instance().get_or_create_mq_client_instance(self.client_config)
        self.register_with(instance)
        try:
            instance.start()
        except BaseException:
            instance.unregister_producer(self.producer_group)
            raise
        self.service_state = RUNNING
        try:
            instance.send_heartbeat_to_all_broker_sync()
        except Exception as e:
            log.warning("heartbeat after producer start failed: %s", e)

    def prepare_start(self) -> None:
        """The first steps of start (check the state and config, instance name → pid): shared with AsyncProducer."""
        if self.service_state != CREATE_JUST:
            raise MQClientException.of(
                f"The producer service state not OK, maybe started once, {self.service_state}" + suggest_todo()
            )
        self._check_config()
        if self.producer_group != mix_all.CLIENT_INNER_PRODUCER_GROUP:
            self.client_config.change_instance_name_to_pid()
        self.service_state = START_FAILED

    def register_with(self, instance: MQClientInstance) -> None:
        """Register with ``instance`` (not started here); MQClientException when the group is taken there."""
        if not instance.register_producer(self.producer_group, self):
            self.service_state = CREATE_JUST
            raise MQClientException.of(
                f"The producer group[{self.producer_group}] has been created before, specify "
                f"another name please." + suggest_todo()
            )
        self.instance = instance
        self.topic_publish_info_table[self.create_topic_key] = TopicPublishInfo()

    def start_with_instance(self, instance: MQClientInstance) -> None:
        """Start on an already running instance without starting it (startFactory=false): the inner producer."""
        if not instance.register_producer(self.producer_group, self):
            raise MQClientException.of(
                f"The producer group[{self.producer_group}] has been created before, specify "
                f"another name please." + suggest_todo()
            )
        self.instance = instance
        self.topic_publish_info_table[self.create_topic_key] = TopicPublishInfo()
        self.service_state = RUNNING

    def shutdown(self) -> None:
        if self.service_state != RUNNING or self.instance is None:
            return
        self.instance.unregister_producer(self.producer_group)
        self.service_state = SHUTDOWN_ALREADY
        self.instance.shutdown()

    def shutdown_with_instance(self) -> None:
        if self.service_state == RUNNING and self.instance is not None:
            self.instance.unregister_producer(self.producer_group)
        self.service_state = SHUTDOWN_ALREADY

    def __enter__(self) -> Producer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _check_config(self) -> None:
        err = mix_all.validate_group(self.producer_group)
        if err is not None:
            raise MQClientException.of(err)
        if self.producer_group == mix_all.DEFAULT_PRODUCER_GROUP:
            raise MQClientException.of(
                f"producerGroup can not equal {mix_all.DEFAULT_PRODUCER_GROUP}, please "
                f"specify another one." + suggest_todo()
            )

    def _make_sure_state_ok(self) -> MQClientInstance:
        if self.service_state != RUNNING or self.instance is None:
            raise MQClientException.of(f"The producer service state not OK, {self.service_state}" + suggest_todo())
        return self.instance

    # --- validation --------------------------------------------------------------------------------------------
    def check_message(self, msg: Message, *, properties: bool = True) -> None:
        """Validators.checkMessage (+ the properties must encode): MQClientException(MESSAGE_ILLEGAL) otherwise.
        ``properties=False`` leaves the properties to the send's encoder (the fast path: it writes them once)."""
        illegal = ResponseCode.MESSAGE_ILLEGAL
        if msg is None:
            raise MQClientException(illegal, "the message is null")
        if not isinstance(msg, Message):
            raise MQClientException(illegal, f"the message is not a Message: {type(msg).__name__}")
        err = mix_all.validate_topic(msg.topic)
        if err is not None:
            raise MQClientException(-1, err)
        if msg.topic in mix_all.NOT_ALLOWED_SEND_TOPICS:
            raise MQClientException(-1, f"Sending message to topic[{msg.topic}] is forbidden.")
        if msg.body is None:
            raise MQClientException(illegal, "the message body is null")
        if len(msg.body) == 0:
            raise MQClientException(illegal, "the message body length is zero")
        if len(msg.body) > self.max_message_size:
            raise MQClientException(illegal, f"the message body size over max value, MAX: {self.max_message_size}")
        if properties:
            self._check_properties(msg)

    @staticmethod
    def _check_properties(msg: Message) -> None:
        """The message's properties encode (``properties_to_string``): MQClientException(MESSAGE_ILLEGAL) otherwise."""
        try:
            properties_to_string(msg.properties)
        except ValueError as e:
            raise MQClientException(ResponseCode.MESSAGE_ILLEGAL, f"the message properties are illegal: {e}") from None

    def _prepare(self, msg: Message, *, properties: bool = True) -> None:
        """check_message (the properties too unless ``properties=False``) and the UNIQ_KEY."""
        self.check_message(msg, properties=properties)
        if not isinstance(msg, MessageBatch) and UNIQ_KEY not in msg.properties:
            msg.properties[UNIQ_KEY] = create_uniq_id()

    def _sync_wait_s(self, timeout_ms: int) -> float:
        return timeout_ms / 1000 + 2 * self.client_config.mq_client_api_timeout / 1000 + 2

    # --- public sends ------------------------------------------------------------------------------------------
    def send(
        self, msg: Message, selector: Selector | None = None, arg: Any = None, timeout_ms: int | None = None
    ) -> SendResult:
        """Synchronous send; with ``selector`` the queue is ``selector.select(mqs, msg, arg)`` and there is no retry."""
        instance = self._make_sure_state_ok()
        timeout = self.send_msg_timeout if timeout_ms is None else timeout_ms
        self._prepare(msg, properties=selector is not None)
        if selector is not None:
            coro = self._send_select_impl(msg, selector, arg, SYNC, timeout)
        else:
            try:
                fa = fast_send.first_attempt(self, instance, msg, timeout)  # the fast send's gate (fast_send.py)
            except ValueError:  # the encoder refused the properties: _check_properties names why
                fa = None
            if fa is not None:
                return fast_send.send_sync(self, instance, msg, fa, timeout)
            self._check_properties(msg)
            coro = self._send_default_impl(msg, SYNC, timeout)
        result = instance.run_sync(coro, self._sync_wait_s(timeout))
        assert result is not None
        return result

    def send_to_queue(self, msg: Message, mq: MessageQueue, timeout_ms: int | None = None) -> SendResult:
        """send(msg, mq): to this queue, no retry."""
        return self.send(msg, lambda _mqs, _m, q: q, mq, timeout_ms)

    def send_async(
        self, msg: Message, selector: Selector | None = None, arg: Any = None, timeout_ms: int | None = None
    ) -> concurrent.futures.Future[SendResult]:
        """Asynchronous send; every failure (including a bad message) is the future's exception."""
        instance = self._make_sure_state_ok()
        timeout = self.send_msg_timeout if timeout_ms is None else timeout_ms
        if selector is None:
            try:
                self._prepare(msg, properties=False)  # the properties: checked as first_attempt encodes them
                fa = fast_send.first_attempt(self, instance, msg, timeout)  # the fast send's gate (fast_send.py)
            except Exception:  # the coroutine way checks again (the properties too) and fails the future with it
                fa = None
            if fa is not None:
                return fast_send.send_async(self, instance, msg, fa, timeout)
        # an ASYNC send_on_loop always returns a SendResult (None is ONEWAY's)
        return cast(
            "concurrent.futures.Future[SendResult]",
            instance.run_async(self.send_on_loop(msg, selector, arg, ASYNC, timeout)),
        )

    async def send_on_loop(
        self, msg: Message, selector: Selector | None, arg: Any, mode: str, timeout_ms: int | None = None
    ) -> SendResult | None:
        """A send of any mode (SYNC, ASYNC, ONEWAY; None for ONEWAY), awaited on the instance's loop: the coroutine
        behind ``send_async`` and ``rmq_core.aio.AsyncProducer``. Checks the message first."""
        self._make_sure_state_ok()
        timeout = self.send_msg_timeout if timeout_ms is None else timeout_ms
        self._prepare(msg)
        if selector is not None:
            return await self._send_select_impl(msg, selector, arg, mode, timeout)
        return await self._send_default_impl(msg, mode, timeout)

    def send_oneway(self, msg: Message, selector: Selector | None = None, arg: Any = None) -> None:
        instance = self._make_sure_state_ok()
        self._prepare(msg)
        timeout = self.send_msg_timeout
        if selector is not None:
            coro = self._send_select_impl(msg, selector, arg, ONEWAY, timeout)
        else:
            coro = self._send_default_impl(msg, ONEWAY, timeout)
        instance.run_sync(coro, self._sync_wait_s(timeout))

    def send_batch(self, msgs: Iterable[Message], timeout_ms: int | None = None) -> SendResult:
        """One SEND_BATCH_MESSAGE: same topic, no delay level, no retry topic; msg_id = the comma-joined UNIQ_KEYs."""
        return self.send(self.batch(msgs), timeout_ms=timeout_ms)

    def batch(self, msgs: Iterable[Message]) -> MessageBatch:
        """``DefaultMQProducer.batch``: the messages checked (``check_message``), each given a UNIQ_KEY, and encoded
        as one body. The body is the backend's ``encode_batch_messages`` (one call for the whole batch, after the
        batch's topic is checked: one for all of them); where it declines (a message its checks refuse, a shape it
        does not write), each message is checked, given its id and encoded here, which names the error."""
        try:
            batch = MessageBatch.generate_from_list(msgs)
        except ValueError as e:
            raise MQClientException(-1, f"Failed to initiate the MessageBatch: {e}") from None
        messages = batch.messages
        self.check_message(messages[0], properties=False)  # the topic (every message's: generate_from_list)
        prefix, counter = create_uniq_id.batch_prefix()
        body = _backend.impl.encode_batch_messages(messages, UNIQ_KEY, prefix, counter, self.max_message_size)
        if body is None:
            for m in messages:
                self.check_message(m)
                if UNIQ_KEY not in m.properties:
                    m.properties[UNIQ_KEY] = create_uniq_id()
            body = batch.encode()
        batch.body = body
        return batch

    # --- messages by key / id (MQAdminImpl) ---------------------------------------------------------------------
    def query_message(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[MessageExt]:
        """The messages of ``topic`` whose KEYS hold ``key``, stored in ``[begin_ms, end_ms]``, from every broker of
        the topic (QUERY_MESSAGE; at most ``max_num`` per broker, capped by the broker's maxMsgsNumBatch)."""
        instance = self._make_sure_state_ok()
        coro = mq_admin_impl.query_message(instance, topic, key, max_num, begin_ms, end_ms)
        return instance.run_sync(coro, self._sync_wait_s(3 * self.client_config.mq_client_api_timeout)).messages

    def query_message_by_uniq_key(self, topic: str, uniq_key: str) -> MessageExt | None:
        """The message whose UNIQ_KEY (the client msg id a send returns) is ``uniq_key``: the earliest stored one."""
        instance = self._make_sure_state_ok()
        coro = mq_admin_impl.query_message(instance, topic, uniq_key, 32, 0, 2**63 - 1, is_unique_key=True)
        found = instance.run_sync(coro, self._sync_wait_s(3 * self.client_config.mq_client_api_timeout)).messages
        return found[0] if found else None

    def view_message(self, msg_id: str, topic: str | None = None) -> MessageExt | None:
        """The message an offset msg id names (VIEW_MESSAGE_BY_ID). With ``topic``, 4.9's ``viewMessage(topic, msgId)``:
        when that fails (not an offset msg id, no broker there, no record) ``msg_id`` is taken as a UNIQ_KEY."""
        instance = self._make_sure_state_ok()
        timeout_s = self._sync_wait_s(self.client_config.mq_client_api_timeout)
        if topic is None:
            return instance.run_sync(mq_admin_impl.view_message(instance, msg_id), timeout_s)
        try:
            return instance.run_sync(mq_admin_impl.view_message(instance, msg_id), timeout_s)
        except Exception:
            return self.query_message_by_uniq_key(topic, msg_id)

    # --- send implementations (on the loop) --------------------------------------------------------------------
    async def try_to_find_topic_publish_info(self, topic: str) -> TopicPublishInfo | None:
        instance = self._make_sure_state_ok()
        info = self.topic_publish_info_table.get(topic)
        if info is None or not info.ok():
            self.topic_publish_info_table.setdefault(topic, TopicPublishInfo())
            await instance.update_topic_route_info_from_name_server(topic)
            info = self.topic_publish_info_table.get(topic)
        if info is not None and (info.have_topic_router_info or info.ok()):
            return info
        await instance.update_topic_route_info_from_name_server(topic, True, self)
        return self.topic_publish_info_table.get(topic)

    def _validate_name_server_setting(self) -> None:
        if not self.client_config.namesrv_addr_list():
            raise MQClientException(
                ClientErrorCode.NO_NAME_SERVER_EXCEPTION, "No name server address, please set it." + suggest_todo()
            )

    def _no_route(self, topic: str) -> MQClientException:
        self._validate_name_server_setting()
        return MQClientException(
            ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION,
            f"No route info of this topic: {topic}{self._namesrv_failure()}" + suggest_todo(),
        )

    def _namesrv_failure(self) -> str:
        """ ", because <name server failure>" when the last route lookup got no answer from the name server."""
        error = self.instance.namesrv_error if self.instance is not None else None
        return f", because {error}" if error else ""

    async def _send_default_impl(
        self, msg: Message, mode: str, timeout_ms: int, state: SendState | None = None
    ) -> SendResult | None:
        """sendDefaultImpl: up to ``1 + retry times`` attempts, each on a queue avoiding the broker of the last one;
        ``state`` carries the attempts made already (the fast path's first one)."""
        st = state if state is not None else SendState(monotonic_ms())
        tp_info = self.topic_publish_info_table.get(msg.topic)
        if tp_info is None or not tp_info.ok():  # a known route is what try_to_find_topic_publish_info returns
            tp_info = await self.try_to_find_topic_publish_info(msg.topic)
        if tp_info is None or not tp_info.ok():
            raise self._no_route(msg.topic)
        times_total = {
            SYNC: 1 + self.retry_times_when_send_failed,
            ASYNC: 1 + self.retry_times_when_send_async_failed,
        }.get(mode, 1)
        while st.times < times_total:
            last_broker = st.mq.broker_name if st.mq is not None else None
            mq = st.mq = self.mq_fault_strategy.select_one_message_queue(tp_info, last_broker)
            st.brokers_sent.append(mq.broker_name)
            begin = monotonic_ms()
            cost = begin - st.begin_first
            if timeout_ms < cost:
                st.call_timeout = True
                break
            st.times += 1
            try:
                send_result = await self._send_kernel_impl(msg, mq, mode, timeout_ms - cost)
            except (RemotingError, MQClientException, MQBrokerException) as e:
                if self._attempt_done(st, mode, mq, begin, None, e):
                    return st.send_result
                continue
            if self._attempt_done(st, mode, mq, begin, send_result, None):
                return st.send_result
        return self._send_failed(msg, st)

    def _attempt_done(
        self,
        st: SendState,
        mode: str,
        mq: MessageQueue,
        begin: int,
        send_result: SendResult | None,
        error: RemotingError | MQClientException | MQBrokerException | None,
    ) -> bool:
        """An attempt's outcome: True when the send is over with ``st.send_result``, False to try another queue;
        raises ``error`` when the send is over with it. Any thread (the fast path judges its attempt on the
        caller's)."""
        if error is None:
            strategy = self.mq_fault_strategy
            if strategy.send_latency_fault_enable:  # (update_fault_item does nothing otherwise: no clock read)
                strategy.update_fault_item(mq.broker_name, monotonic_ms() - begin, False)
            st.send_result = send_result
            if mode != SYNC:
                return True
            assert send_result is not None
            return send_result.send_status.value == "SEND_OK" or not self.retry_another_broker_when_not_store_ok
        self.mq_fault_strategy.update_fault_item(mq.broker_name, monotonic_ms() - begin, True)
        st.exception = error
        if not isinstance(error, MQBrokerException):
            log.warning("send to %s failed, retry another broker: %s", mq, error)
            return False
        log.warning("send to %s failed: %s", mq, error)
        if mode == SYNC and error.response_code in RETRY_RESPONSE_CODES:
            return False
        if st.send_result is not None:
            return True
        raise error

    def _send_failed(self, msg: Message, st: SendState) -> SendResult:
        """The end of sendDefaultImpl when no attempt settled it: the last result, or the error of every attempt."""
        if st.send_result is not None:
            return st.send_result
        if st.call_timeout:
            raise RemotingTooMuchRequestError("sendDefaultImpl call timeout")
        info = (
            f"Send [{st.times}] times, still failed, cost [{monotonic_ms() - st.begin_first}]ms, Topic: {msg.topic}, "
            f"BrokersSent: {st.brokers_sent}" + suggest_todo(SEND_MSG_FAILED_URL)
        )
        exception = st.exception
        if isinstance(exception, MQBrokerException):
            code = exception.response_code
        elif isinstance(exception, RemotingConnectError):
            code = ClientErrorCode.CONNECT_BROKER_EXCEPTION
        elif isinstance(exception, RemotingTimeoutError):
            code = ClientErrorCode.ACCESS_BROKER_TIMEOUT
        elif isinstance(exception, MQClientException):
            code = ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION
        else:
            code = -1
        raise MQClientException(code, info, exception)

    async def _send_select_impl(
        self, msg: Message, selector: Selector, arg: Any, mode: str, timeout_ms: int
    ) -> SendResult | None:
        begin = monotonic_ms()
        tp_info = await self.try_to_find_topic_publish_info(msg.topic)
        if tp_info is None or not tp_info.ok():
            self._validate_name_server_setting()
            raise MQClientException(
                -1, f"No route info for this topic, {msg.topic}{self._namesrv_failure()}" + suggest_todo()
            )
        mqs = list(tp_info.message_queue_list)
        try:
            if isinstance(selector, MessageQueueSelector):
                mq = selector.select(mqs, msg, arg)
            else:
                mq = selector(mqs, msg, arg)
        except Exception as e:
            raise MQClientException(-1, "select message queue threw exception.", e) from e
        cost = monotonic_ms() - begin
        if timeout_ms < cost:
            raise RemotingTooMuchRequestError("sendSelectImpl call timeout")
        if mq is None:
            raise MQClientException(-1, "select message queue return null.")
        return await self._send_kernel_impl(msg, mq, mode, timeout_ms - cost)

    async def _send_kernel_impl(self, msg: Message, mq: MessageQueue, mode: str, timeout_ms: int) -> SendResult | None:
        instance = self._make_sure_state_ok()
        begin = monotonic_ms()
        broker_addr = instance.find_broker_address_in_publish(mq.broker_name)
        if broker_addr is None:
            await self.try_to_find_topic_publish_info(mq.topic)
            broker_addr = instance.find_broker_address_in_publish(mq.broker_name)
        if broker_addr is None:
            raise MQClientException(-1, f"The broker[{mq.broker_name}] not exist" + suggest_todo())
        header, wire = self._send_header(msg, mq)
        cost = monotonic_ms() - begin
        if timeout_ms < cost:
            raise RemotingTooMuchRequestError("sendKernelImpl call timeout")
        return await instance.mq_client_api.send_message(
            broker_addr, mq.broker_name, wire, header, timeout_ms - cost, mode
        )

    def _send_header(self, msg: Message, mq: MessageQueue) -> tuple[SendMessageRequestHeader, Message]:
        """sendKernelImpl's request header and the message as sent (``_send_fields``)."""
        fields, wire = self._send_fields(msg, mq)
        if isinstance(fields[_PROPERTIES], dict):
            fields[_PROPERTIES] = properties_to_string(fields[_PROPERTIES])
        return SendMessageRequestHeader(*fields), wire

    def _send_fields(self, msg: Message, mq: MessageQueue) -> tuple[list[Any], Message]:
        """sendKernelImpl's request header as ``SendMessageRequestHeader``'s field values in order (the properties
        as the message's dict, which the encoder writes: ``MQClientAPIImpl.encode_send``), and the message as sent
        (its body compressed past the threshold). Takes a retry topic's RECONSUME_TIME / MAX_RECONSUME_TIMES out
        of ``msg.properties`` into the header (the properties sent are written before: they still hold them)."""
        body = msg.body
        sys_flag = 0
        batch = isinstance(msg, MessageBatch)
        if not batch and len(body) >= self.compress_msg_body_over_howmuch:
            body = zlib.compress(body, COMPRESS_LEVEL)
            sys_flag |= COMPRESSED_FLAG | SYSFLAG_COMPRESSION_ZLIB
        properties: dict[str, str] | str = msg.properties
        if msg.properties.get(PROPERTY_TRANSACTION_PREPARED) == "true":
            sys_flag |= TRANSACTION_PREPARED_TYPE
        reconsume_times, max_reconsume_times = 0, None
        if mix_all.is_retry_topic(msg.topic):
            properties = properties_to_string(msg.properties)
            reconsume = msg.properties.pop(PROPERTY_RECONSUME_TIME, None)
            if reconsume is not None:
                reconsume_times = int(reconsume)
            max_times = msg.properties.pop(PROPERTY_MAX_RECONSUME_TIMES, None)
            if max_times is not None:
                max_reconsume_times = int(max_times)
        fields = [
            self.producer_group,  # producerGroup
            msg.topic,  # topic
            self.create_topic_key,  # defaultTopic
            self.default_topic_queue_nums,  # defaultTopicQueueNums
            mq.queue_id,  # queueId
            sys_flag,  # sysFlag
            int(time.time() * 1000),  # bornTimestamp
            msg.flag,  # flag
            properties,  # properties
            reconsume_times,  # reconsumeTimes
            self.client_config.unit_mode,  # unitMode
            max_reconsume_times,  # maxReconsumeTimes
            batch,  # batch
            None,  # brokerName
        ]
        return fields, _wire_copy(msg, body)

    def __repr__(self) -> str:
        return f"Producer({self.producer_group}, {self.service_state}, client_id={self.client_id})"
