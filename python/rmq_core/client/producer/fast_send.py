"""The Producer's fast send: a default send's first attempt built, encoded and written on the caller's thread, as
4.9's sendKernelImpl does, and answered through a waiter (``rmq_core.remoting.response_waiter``) with no task or
coroutine. It must give what the coroutine way (``Producer._send_default_impl``) gives: the same frame, the same
result or error, the same count of attempts (tests/client/test_producer_fast_path.py; docs/FAST_PATHS.md).

The gate, all of it here (``first_attempt``; the Producer asks only for a default send, no selector, SYNC or
ASYNC): not on the client's loop (nor a caller's loop, ``aio``), the topic's route known and usable, the chosen
broker's address known and a connection to it open. Else None: the send goes the coroutine way, whole.

A SYNC send (``send_sync``) writes its frame itself when nothing is queued before it, else queues it; an ASYNC one
(``send_async``) queues it (``begin_invoke_from_thread``). Both judge with the Producer's ``_attempt_done``; a
failed first attempt goes on as the coroutine. Thread-safety: any thread but the client's loop.
Details (where each is judged, queued): docs/CLIENT_DESIGN.md, 'Producer fast send'.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol, cast

from rmq_core.client.exceptions import MQBrokerException, RemotingError, RemotingTooMuchRequestError
from rmq_core.client.message_batch import MessageBatch
from rmq_core.client.producer.send_state import ASYNC, SYNC, SendState, monotonic_ms
from rmq_core.common.light_future import LightFuture
from rmq_core.remoting.response_waiter import (
    BlockingSendAnswerWaiter,
    PendingInvoke,
    SendAnswerWaiter,
    begin_invoke,
    begin_invoke_from_thread,
)

if TYPE_CHECKING:
    from rmq_core.client.exceptions import MQClientException
    from rmq_core.client.mq_client_instance import MQClientInstance
    from rmq_core.client.producer.mq_fault_strategy import MQFaultStrategy
    from rmq_core.client.send_result import SendResult
    from rmq_core.client.topic_publish_info import TopicPublishInfo
    from rmq_core.message import Message, MessageQueue
    from rmq_core.remoting.command import RemotingCommand
    from rmq_core.remoting.connection import Connection

log = logging.getLogger(__name__)


class DefaultSendPath(Protocol):
    """What the fast send takes from the path it must equal (the Producer's sendDefaultImpl / sendKernelImpl): its
    routes and fault strategy, its header, its judge and its coroutine, so that each exists once."""

    topic_publish_info_table: dict[str, TopicPublishInfo]
    mq_fault_strategy: MQFaultStrategy

    def _send_fields(self, msg: Message, mq: MessageQueue) -> tuple[list[Any], Message]: ...

    def _attempt_done(
        self,
        st: SendState,
        mode: str,
        mq: MessageQueue,
        begin: int,
        send_result: SendResult | None,
        error: RemotingError | MQClientException | MQBrokerException | None,
    ) -> bool: ...

    def _send_default_impl(
        self, msg: Message, mode: str, timeout_ms: int, state: SendState | None = None
    ) -> Coroutine[Any, Any, SendResult | None]: ...

    def _sync_wait_s(self, timeout_ms: int) -> float: ...


class FastAttempt(SendState):
    """A default send's first attempt, encoded on the caller's thread (``first_attempt``), and the send's state from
    there on."""

    __slots__ = ("addr", "begin", "conn", "frame", "opaque", "remaining_ms", "wire")

    def __init__(
        self,
        begin_first: int,
        mq: MessageQueue,
        addr: str,
        conn: Connection,
        opaque: int,
        frame: bytes,
        wire: Message,
        begin: int,
        remaining_ms: int,
    ) -> None:
        # SendState's fields after one attempt, set here (no super() call: one of these is made per send)
        self.begin_first, self.times, self.mq, self.brokers_sent = begin_first, 1, mq, [mq.broker_name]
        self.exception, self.send_result, self.call_timeout = None, None, False
        self.addr, self.conn, self.opaque, self.frame = addr, conn, opaque, frame
        self.wire, self.begin, self.remaining_ms = wire, begin, remaining_ms


def first_attempt(
    producer: DefaultSendPath, instance: MQClientInstance, msg: Message, timeout_ms: int
) -> FastAttempt | None:
    """The gate, and the first attempt of a default (no selector) SYNC or ASYNC send, built on the caller's thread as
    sendKernelImpl builds it — when nothing in it needs the loop: the topic's route, the chosen broker's address and
    an open connection to it are known. None otherwise (the send then goes the coroutine way, whole). A ValueError
    when the encoder refuses the message's properties."""
    if instance.on_caller_loop or instance.in_loop_thread():
        return None
    tp_info = producer.topic_publish_info_table.get(msg.topic)
    if tp_info is None or not tp_info.ok():
        return None
    begin_first = monotonic_ms()
    mq = producer.mq_fault_strategy.select_one_message_queue(tp_info, None)
    addr = instance.find_broker_address_in_publish(mq.broker_name)
    if addr is None:
        return None
    conn = instance.remoting_client.open_connection(addr)
    if conn is None:
        return None
    begin = monotonic_ms()
    fields, wire = producer._send_fields(msg, mq)
    opaque, frame = instance.mq_client_api.encode_send(fields, wire.body, isinstance(msg, MessageBatch))
    # sendDefaultImpl's timeout - costTime (the encode takes microseconds: no clock read after it)
    return FastAttempt(begin_first, mq, addr, conn, opaque, frame, wire, begin, timeout_ms - (begin - begin_first))


def _command_outcome(
    instance: MQClientInstance,
    fa: FastAttempt,
    response: RemotingCommand | None,
    error: BaseException | None,
) -> tuple[SendResult | None, RemotingError | MQBrokerException | None]:
    """The fast attempt's answer as ``send_message`` would have returned or raised it."""
    api = instance.mq_client_api
    if error is not None:
        if not isinstance(error, OSError):
            raise error
        return None, api.transport_error(fa.addr, error, fa.remaining_ms)
    assert response is not None
    try:
        mq = cast("MessageQueue", fa.mq)
        return api.process_send_response(mq.broker_name, fa.wire, response, fa.addr, mq), None
    except MQBrokerException as e:
        return None, e


def _fields_outcome(
    instance: MQClientInstance, fa: FastAttempt, item: tuple[Any, ...]
) -> tuple[SendResult | None, MQBrokerException | None]:
    """The fast attempt's answer read as its fields (``SendAnswerWaiter``: ``(waiter, code, remark, *values)``), as
    ``_command_outcome`` judges the command."""
    mq: MessageQueue = fa.mq  # type: ignore[assignment]  # set: an attempt was made (no cast() per answer)
    try:
        return instance.mq_client_api.send_result(
            mq.broker_name, fa.wire, item[1], item[2], item[3:], fa.addr, mq
        ), None
    except MQBrokerException as e:
        return None, e


def send_sync(
    producer: DefaultSendPath, instance: MQClientInstance, msg: Message, fa: FastAttempt, timeout_ms: int
) -> SendResult:
    """A SYNC send whose first attempt is ``fa``: the caller's thread encodes, waits on a lock and judges the answer;
    the loop only writes the frame and hands the answer over (its fields, read without a command, as an async
    send's are; a command only when it comes another way). Retries go the coroutine way."""
    waiter = BlockingSendAnswerWaiter()
    error: BaseException | None = None
    answer: tuple[Any, ...] | RemotingCommand | None = None
    if fa.remaining_ms >= 0:
        conn = fa.conn
        # written on this thread when nothing is queued before it, else queued for the loop's next write
        if not conn.send_frame_from_thread(fa.opaque, fa.frame, waiter) and not conn.queue_frame_from_thread(
            fa.opaque, fa.frame, waiter
        ):
            instance.submit_job(PendingInvoke(conn, fa.opaque, fa.frame, waiter))
        try:
            answer = waiter.wait(max(fa.remaining_ms, 1) / 1000.0)
        except TimeoutError as e:
            instance.call_soon(functools.partial(fa.conn.pending.pop, fa.opaque, None))
            error = e
        except OSError as e:
            error = e
    else:  # over its time before it was sent (sendKernelImpl's check)
        error = RemotingTooMuchRequestError("sendKernelImpl call timeout")
    result: SendResult | None
    err: RemotingError | MQBrokerException | None
    if answer.__class__ is tuple:  # the answer's fields (a SendAnswerWaiter's)
        result, err = _fields_outcome(instance, fa, cast("tuple[Any, ...]", answer))
    elif isinstance(error, RemotingError):
        result, err = None, error
    else:
        result, err = _command_outcome(instance, fa, cast("RemotingCommand | None", answer), error)
    if producer._attempt_done(fa, SYNC, cast("MessageQueue", fa.mq), fa.begin, result, err):
        assert fa.send_result is not None
        return fa.send_result
    coro = producer._send_default_impl(msg, SYNC, timeout_ms, fa)
    result = instance.run_sync(coro, producer._sync_wait_s(timeout_ms))
    assert result is not None
    return result


def send_async(
    producer: DefaultSendPath, instance: MQClientInstance, msg: Message, fa: FastAttempt, timeout_ms: int
) -> LightFuture[SendResult]:
    """An ASYNC send whose first attempt is ``fa``: its frame queued for the loop's next write of the connection
    (a loop job where the connection takes no frames from threads); the future of its outcome."""
    send = _AsyncSend(producer, instance, msg, fa, timeout_ms)
    if not begin_invoke_from_thread(fa.conn, fa.opaque, fa.frame, send, max(fa.remaining_ms, 1) / 1000.0):
        instance.submit_job(send)
    return send.future


class _AsyncSend(SendAnswerWaiter):
    """An ASYNC fast send: the loop job starting its first attempt and that attempt's waiter, judged on the loop
    when the answer comes (its fields, ``on_fields``, as the connection reads them; or the command, or an error,
    ``on_response``); its outcome goes to ``future`` (a retry continues as the sendDefaultImpl coroutine, its
    outcome there too)."""

    __slots__ = ("fa", "future", "instance", "msg", "producer", "timeout_ms")

    def __init__(
        self, producer: DefaultSendPath, instance: MQClientInstance, msg: Message, fa: FastAttempt, timeout_ms: int
    ) -> None:
        self._done, self.deadline = False, None  # CallbackResponseWaiter's, set here (no super() call per send)
        self.producer, self.instance, self.msg, self.fa, self.timeout_ms = producer, instance, msg, fa, timeout_ms
        self.future: LightFuture[SendResult] = LightFuture()

    def run(self) -> None:  # LoopJob
        fa = self.fa
        begin_invoke(fa.conn, fa.opaque, fa.frame, self, max(fa.remaining_ms, 1) / 1000.0)

    def fail(self, error: BaseException) -> None:  # LoopJob
        self.fail_now(error)

    def set_result(self, result: RemotingCommand, /) -> None:
        """The answer, on the loop (``CallbackResponseWaiter.set_result`` with the delivery inlined: once per send)."""
        if not self._done:
            self._done = True
            try:
                self.on_response(result, None)
            except Exception:
                log.exception("a response callback raised")

    def on_fields(self, item: tuple[Any, ...]) -> None:
        try:
            result, err = _fields_outcome(self.instance, self.fa, item)
        except BaseException as e:
            self.future.settle(exception=e)
            return
        self._judge(result, err)

    def on_response(self, response: RemotingCommand | None, error: BaseException | None) -> None:
        try:
            result, err = _command_outcome(self.instance, self.fa, response, error)
        except BaseException as e:
            self.future.settle(exception=e)
            return
        self._judge(result, err)

    def _judge(self, result: SendResult | None, err: RemotingError | MQBrokerException | None) -> None:
        """The first attempt's outcome: the future's result or error, or the retries' coroutine."""
        future, fa, producer = self.future, self.fa, self.producer
        try:
            done = producer._attempt_done(fa, ASYNC, fa.mq, fa.begin, result, err)  # type: ignore[arg-type]
        except BaseException as e:
            future.settle(exception=e)
            return
        if done:
            future.settle(fa.send_result)
            return
        coro = producer._send_default_impl(self.msg, ASYNC, self.timeout_ms, fa)
        self.instance.start_task(cast("Coroutine[Any, Any, SendResult]", coro), future)
