"""The Producer's send fast path (a default send's first attempt built on the caller's thread, answered through a
waiter, no task or coroutine) against a real broker and against fake brokers on real TCP: it is taken once the
route and the connection are known; it sends the request the coroutine way sends; its failures end as the
coroutine way's do (a retry continues the same count of attempts; a broker error of an ASYNC send is not retried;
a timeout leaves nothing pending)."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rmq_core.client import MQClientException, Producer, SendResult, SendStatus
from rmq_core.client.exceptions import ClientErrorCode, MQBrokerException, RemotingTooMuchRequestError
from rmq_core.client.producer.producer import ASYNC, SYNC
from rmq_core.message import Message
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.connection import Connection
from rmq_core.remoting.header import SendMessageResponseHeader, encode_header
from rmq_core.remoting.remoting_server import RemotingServer

from support.client_helpers_core import SilentServer, cluster, fake_broker_registration, wait_until
from support.remoting_link import count_queued_flushes
from support.send_helpers import stored


class CountingSlowPath:
    """Wraps ``producer._send_default_impl`` (the coroutine way) and counts its calls."""

    def __init__(self, p: Producer) -> None:
        self.calls = 0
        inner = p._send_default_impl

        def wrapped(*args: Any, **kw: Any) -> Any:
            self.calls += 1
            return inner(*args, **kw)

        p._send_default_impl = wrapped  # type: ignore[method-assign]


class FakeBroker:
    """A RemotingServer answering SEND_MESSAGE_V2 like a broker (SUCCESS, or ``code`` when set) and recording the
    requests; a body of b"close" makes it close the connection instead of answering."""

    def __init__(self) -> None:
        self.server = RemotingServer("127.0.0.1", 0)
        self.requests: list[RemotingCommand] = []
        self.code = ResponseCode.SUCCESS
        self.server.register(int(RequestCode.SEND_MESSAGE_V2), self._send)
        self.server.start_in_thread("fake-broker")
        self.address = self.server.address

    async def _send(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        self.requests.append(cmd)
        if cmd.body == b"close":
            conn.close()
            return None
        if self.code != ResponseCode.SUCCESS:
            return RemotingCommand.response_to(cmd, self.code, remark="refused (test)")
        header = SendMessageResponseHeader(msgId="7F00000100002A9F0000000000000000", queueId=0, queueOffset=0)
        return RemotingCommand.response_to(cmd, ResponseCode.SUCCESS, ext_fields=encode_header(header))

    def close(self) -> None:
        self.server.stop_thread()


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[tuple[FakeBroker, Producer]]:
    with cluster(tmp_path, 0) as (ns, _):
        broker = FakeBroker()
        try:
            with fake_broker_registration(ns, "fake-broker", broker.address, ["FastTopic"], queues=1):
                p = Producer("FastPathProducer", namesrv_addr=ns.address, mq_client_api_timeout=500)
                p.start()
                try:
                    yield broker, p
                finally:
                    p.shutdown()
        finally:
            broker.close()


def test_sends_after_the_first_take_the_fast_path_and_are_stored(tmp_path: Path) -> None:
    with cluster(tmp_path) as (ns, [broker]):
        p = Producer("FastStoredProducer", namesrv_addr=ns.address)
        p.start()
        try:
            first = p.send(Message("FastStored", b"first"))  # route and connection: the coroutine way
            slow = CountingSlowPath(p)
            results = [p.send(Message("FastStored", f"s{i}".encode(), tags="T")) for i in range(10)]
            futures = [p.send_async(Message("FastStored", f"a{i}".encode())) for i in range(10)]
            results += [f.result(10) for f in futures]
            assert slow.calls == 0
        finally:
            p.shutdown()
        bodies = {m.body: m for q in range(4) for m in stored(broker, "FastStored", q)}
    assert first.send_status == SendStatus.SEND_OK
    assert all(r.send_status == SendStatus.SEND_OK for r in results)
    assert set(bodies) == {b"first"} | {f"s{i}".encode() for i in range(10)} | {f"a{i}".encode() for i in range(10)}
    for r in results:
        [m] = [m for m in bodies.values() if m.msg_id == r.offset_msg_id]
        assert m.properties["UNIQ_KEY"] == r.msg_id and m.queue_offset == r.queue_offset
        assert m.queue_id == r.message_queue.queue_id


def test_a_fast_sync_send_writes_on_the_callers_thread(fake) -> None:  # type: ignore[no-untyped-def]
    """Once connected, a SYNC send hands the loop nothing (its frame is written on the caller's thread; only the
    response crosses threads); an ASYNC send hands it no job either: its frame is queued for the loop's next write
    of the connection (one wake-up and one write for a burst), its deadline watched from there."""
    broker, p = fake
    p.send(Message("FastTopic", b"first"))
    instance = p.instance
    assert instance is not None
    jobs: list[object] = []
    inner = instance.submit_job

    def counting(job: Any) -> None:
        jobs.append(job)
        inner(job)

    instance.submit_job = counting  # type: ignore[method-assign]
    n = len(broker.requests)
    results = [p.send(Message("FastTopic", f"s{i}".encode())) for i in range(20)]
    assert all(r.send_status == SendStatus.SEND_OK for r in results) and not jobs
    assert [c.body for c in broker.requests[n:]] == [f"s{i}".encode() for i in range(20)]
    conn = instance.remoting_client.open_connection(broker.address)
    assert conn is not None
    flushes = count_queued_flushes(conn)
    futures = [p.send_async(Message("FastTopic", f"a{i}".encode())) for i in range(5)]
    assert all(f.result(10).send_status == SendStatus.SEND_OK for f in futures)
    assert not jobs and 1 <= flushes[0] <= 5
    assert sorted(c.body for c in broker.requests[n + 20 :]) == sorted(f"a{i}".encode() for i in range(5))


def test_the_fast_path_sends_what_the_coroutine_way_sends(fake) -> None:  # type: ignore[no-untyped-def]
    broker, p = fake

    def msg() -> Message:
        return Message("FastTopic", b"same body", tags="TagA", keys=["k"], properties={"UNIQ_KEY": "U1", "a": "b"})

    slow = CountingSlowPath(p)
    p.send(msg())  # no connection yet: the coroutine way
    assert slow.calls == 1
    p.send(msg())
    p.send_async(msg()).result(10)
    assert slow.calls == 1
    assert len(broker.requests) == 3

    def comparable(cmd: RemotingCommand) -> tuple[Any, ...]:
        fields = {k: v for k, v in cmd.ext_fields.items() if k != "g"}  # bornTimestamp (short name)
        return (cmd.code, cmd.language, cmd.version, cmd.flag, cmd.remark, cmd.body, fields, cmd.serialize_type)

    first, *others = broker.requests
    for o in others:
        assert comparable(o) == comparable(first)
    assert len({c.opaque for c in broker.requests}) == 3


def test_a_fast_sync_timeout_leaves_nothing_pending(tmp_path: Path) -> None:
    with (
        cluster(tmp_path, 0) as (ns, _),
        SilentServer() as silent,
        fake_broker_registration(ns, "silent-broker", silent.address, ["SilentTopic"]),
    ):
        p = Producer("FastTimeoutProducer", namesrv_addr=ns.address, mq_client_api_timeout=300)
        p.start()
        try:
            with pytest.raises((MQClientException, RemotingTooMuchRequestError)):
                p.send(Message("SilentTopic", b"x"), timeout_ms=200)  # connects: the coroutine way
            inst = p.instance
            assert inst is not None
            conn = inst.remoting_client.open_connection(silent.address)
            assert conn is not None
            slow = CountingSlowPath(p)
            with pytest.raises((MQClientException, RemotingTooMuchRequestError)) as ei:
                p.send(Message("SilentTopic", b"y"), timeout_ms=300)
            e = ei.value
            if isinstance(e, MQClientException):
                assert e.response_code == ClientErrorCode.ACCESS_BROKER_TIMEOUT
            else:
                assert "call timeout" in str(e)
            assert slow.calls == 1  # the first attempt on the fast path, the rest of the budget the coroutine way
            fut = p.send_async(Message("SilentTopic", b"z"), timeout_ms=200)
            with pytest.raises((MQClientException, RemotingTooMuchRequestError)):
                fut.result(10)
            wait_until(lambda: not conn.pending, "the timed-out requests leave pending")
        finally:
            p.shutdown()


def test_an_async_broker_error_is_not_retried_either_way(fake) -> None:  # type: ignore[no-untyped-def]
    broker, p = fake
    p.send(Message("FastTopic", b"warm"))
    broker.code = ResponseCode.SYSTEM_ERROR
    n = len(broker.requests)
    slow = CountingSlowPath(p)
    fast = p.send_async(Message("FastTopic", b"x"))
    with pytest.raises(MQBrokerException) as e_fast:
        fast.result(10)
    assert slow.calls == 0 and len(broker.requests) == n + 1
    inst = p.instance
    assert inst is not None
    coro_way = inst.run_async(p.send_on_loop(Message("FastTopic", b"x"), None, None, ASYNC))
    with pytest.raises(MQBrokerException) as e_coro:
        coro_way.result(10)
    assert len(broker.requests) == n + 2
    assert (
        (e_fast.value.response_code, e_fast.value.error_message)
        == (
            e_coro.value.response_code,
            e_coro.value.error_message,
        )
        == (ResponseCode.SYSTEM_ERROR, "refused (test)")
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_closed_connection_is_retried_within_the_same_count(fake, mode: str) -> None:  # type: ignore[no-untyped-def]
    """The broker closes the connection on every attempt: 1 fast attempt + 2 retries the coroutine way, reported as
    3 attempts; the next send reconnects."""
    broker, p = fake
    p.send(Message("FastTopic", b"warm"))
    n = len(broker.requests)
    slow = CountingSlowPath(p)
    with pytest.raises(MQClientException) as ei:
        if mode == "sync":
            p.send(Message("FastTopic", b"close"))
        else:
            p.send_async(Message("FastTopic", b"close")).result(10)
    assert ei.value.response_code == ClientErrorCode.CONNECT_BROKER_EXCEPTION
    assert "Send [3] times, still failed" in str(ei.value)
    assert slow.calls == 1
    wait_until(lambda: len(broker.requests) >= n + 1)
    assert all(r.body == b"close" for r in broker.requests[n:])
    assert p.send(Message("FastTopic", b"after")).send_status == SendStatus.SEND_OK


def test_a_bad_message_fails_the_async_future(fake) -> None:  # type: ignore[no-untyped-def]
    _broker, p = fake
    p.send(Message("FastTopic", b"warm"))
    fut = p.send_async(Message("FastTopic", b""))
    assert isinstance(fut, concurrent.futures.Future)
    with pytest.raises(MQClientException, match="body length is zero"):
        fut.result(10)


def test_a_send_from_the_loop_thread_is_still_refused(fake) -> None:  # type: ignore[no-untyped-def]
    _broker, p = fake
    p.send(Message("FastTopic", b"warm"))
    inst = p.instance
    assert inst is not None

    async def on_loop() -> None:
        p.send(Message("FastTopic", b"x"))

    with pytest.raises(RuntimeError, match="event-loop thread"):
        asyncio.run_coroutine_threadsafe(on_loop(), inst.loop).result(10)


def assert_judged_as_the_coroutine_way(p: Producer, fast: list[SendResult], mode: str) -> None:
    """The fast path's results carry what the coroutine way's result of the same answer carries."""
    inst = p.instance
    assert inst is not None
    coro = inst.run_async(p.send_on_loop(Message("FastTopic", b"c"), None, None, mode)).result(10)
    for r in fast:
        assert (r.send_status, r.offset_msg_id, r.region_id, r.trace_on, r.transaction_id) == (
            coro.send_status,
            coro.offset_msg_id,
            coro.region_id,
            coro.trace_on,
            coro.transaction_id,
        )
        assert r.message_queue.topic == "FastTopic" and r.queue_offset >= 0 and r.msg_id


def test_an_async_answer_is_read_as_its_fields_and_judged_as_the_command_would_be(fake) -> None:  # type: ignore[no-untyped-def]
    """A fast ASYNC send's answer reaches its waiter as the few fields it reads (``on_fields``: no command built),
    and gives the result the coroutine way gives for the same answer."""
    from rmq_core.client.producer.fast_send import _AsyncSend

    _broker, p = fake
    p.send(Message("FastTopic", b"warm"))
    seen: list[str] = []
    on_fields, on_response = _AsyncSend.on_fields, _AsyncSend.on_response

    def fields(self: Any, item: Any) -> None:
        seen.append("fields")
        on_fields(self, item)

    def command(self: Any, response: Any, error: Any) -> None:
        seen.append("command")
        on_response(self, response, error)

    _AsyncSend.on_fields, _AsyncSend.on_response = fields, command  # type: ignore[method-assign]
    try:
        fast = [p.send_async(Message("FastTopic", f"a{i}".encode())).result(10) for i in range(5)]
    finally:
        _AsyncSend.on_fields, _AsyncSend.on_response = on_fields, on_response  # type: ignore[method-assign]
    assert seen == ["fields"] * 5
    assert_judged_as_the_coroutine_way(p, fast, ASYNC)


def test_a_sync_answer_is_read_as_its_fields_and_judged_as_the_command_would_be(fake) -> None:  # type: ignore[no-untyped-def]
    """A fast SYNC send's answer reaches its caller as the few fields it reads (``BlockingSendAnswerWaiter``: no
    command built on the loop), with the result the coroutine way gives for the same answer; a refusal read that
    way raises the broker's code and remark as the command would."""
    from rmq_core.remoting.response_waiter import BlockingSendAnswerWaiter

    broker, p = fake
    p.send(Message("FastTopic", b"warm"))
    seen: list[str] = []
    set_fields, set_result = BlockingSendAnswerWaiter.set_fields, BlockingSendAnswerWaiter.set_result

    def fields(self: Any, item: Any) -> None:
        seen.append("fields")
        set_fields(self, item)

    def command(self: Any, response: Any) -> None:
        seen.append("command")
        set_result(self, response)

    BlockingSendAnswerWaiter.set_fields, BlockingSendAnswerWaiter.set_result = fields, command  # type: ignore[method-assign]
    try:
        fast = [p.send(Message("FastTopic", f"s{i}".encode())) for i in range(5)]
        broker.code = ResponseCode.SYSTEM_BUSY
        with pytest.raises(MQBrokerException) as refused:
            p.send(Message("FastTopic", b"refused"))
    finally:
        BlockingSendAnswerWaiter.set_fields, BlockingSendAnswerWaiter.set_result = set_fields, set_result  # type: ignore[method-assign]
        broker.code = ResponseCode.SUCCESS
    assert seen[:5] == ["fields"] * 5 and set(seen) == {"fields"}
    assert refused.value.response_code == ResponseCode.SYSTEM_BUSY and "refused (test)" in str(refused.value)
    assert_judged_as_the_coroutine_way(p, fast, SYNC)


def test_bad_properties_fail_either_send_and_send_nothing(fake) -> None:  # type: ignore[no-untyped-def]
    """The fast path checks the properties as it writes them: the same MQClientException as the check before any
    send, for SYNC (raised) and ASYNC (the future's), and no request reaches the broker."""
    broker, p = fake
    p.send(Message("FastTopic", b"warm"))
    n = len(broker.requests)
    for props in ({"k": "a\x02b"}, {"": "v"}, {"k": ""}):
        with pytest.raises(MQClientException, match="properties are illegal") as sync_e:
            p.send(Message("FastTopic", b"x", properties=dict(props)))
        with pytest.raises(MQClientException, match="properties are illegal") as async_e:
            p.send_async(Message("FastTopic", b"x", properties=dict(props))).result(10)
        assert str(sync_e.value) == str(async_e.value)
        assert sync_e.value.response_code == ResponseCode.MESSAGE_ILLEGAL
    assert len(broker.requests) == n


def test_sync_senders_and_async_sends_share_a_connection(tmp_path: Path) -> None:
    """4 threads sending SYNC (their frames written from their own threads, answered as commands) while the main
    thread keeps 64 ASYNC sends in flight (answered as fields, their waiters taken out of the same ``pending``):
    every send answered once with its own message's result, every message stored once."""
    import threading

    with cluster(tmp_path) as (ns, [broker]):
        p = Producer("MixedProducer", namesrv_addr=ns.address)
        p.start()
        try:
            p.send(Message("Mixed", b"first"))
            sync_results: dict[bytes, Any] = {}
            errors: list[BaseException] = []

            def sync_sender(t: int) -> None:
                try:
                    for i in range(150):
                        body = f"s{t}-{i}".encode()
                        sync_results[body] = p.send(Message("Mixed", body))
                except BaseException as e:  # pragma: no cover - reported below
                    errors.append(e)

            threads = [threading.Thread(target=sync_sender, args=(t,)) for t in range(4)]
            for th in threads:
                th.start()
            window = threading.Semaphore(64)
            futures = {}
            for i in range(600):
                window.acquire()
                body = f"a{i}".encode()
                futures[body] = p.send_async(Message("Mixed", body))
                futures[body].add_done_callback(lambda _f: window.release())
            async_results = {b: f.result(30) for b, f in futures.items()}
            for th in threads:
                th.join(60)
            assert not errors
        finally:
            p.shutdown()
        stored_by_id = {m.msg_id: m for q in range(4) for m in stored(broker, "Mixed", q)}
    results = {**sync_results, **async_results}
    assert len(results) == 1200 and len(stored_by_id) == 1201
    for body, r in results.items():
        assert r.send_status == SendStatus.SEND_OK
        m = stored_by_id[r.offset_msg_id]
        assert m.body == body and m.properties["UNIQ_KEY"] == r.msg_id
        assert (m.queue_id, m.queue_offset) == (r.message_queue.queue_id, r.queue_offset)


def test_a_signed_producer_signs_on_the_fast_path_too(tmp_path: Path) -> None:
    """With ACL credentials the fast path's frame carries AccessKey and a Signature over exactly the fields and body
    it sends (what the broker verifies), as the coroutine way's does."""
    from rmq_core.remoting.acl_signer import cal_signature, combine_request_content

    with cluster(tmp_path, 0) as (ns, _):
        broker = FakeBroker()
        try:
            with fake_broker_registration(ns, "fake-broker", broker.address, ["FastTopic"], queues=1):
                p = Producer("FastPathProducer", ns.address, access_key="fast-key-1", secret_key="fast-secret-1")
                p.start()
                try:
                    slow = CountingSlowPath(p)
                    for _ in range(2):
                        p.send(Message("FastTopic", b"signed body", properties={"a": "b"}))
                    p.send_async(Message("FastTopic", b"signed body", properties={"a": "b"})).result(10)
                    assert slow.calls == 1  # the first (no connection yet) only
                finally:
                    p.shutdown()
        finally:
            broker.close()
    assert len(broker.requests) == 3
    for cmd in broker.requests:
        assert cmd.ext_fields["AccessKey"] == "fast-key-1"
        content = combine_request_content(cmd.ext_fields, cmd.body)
        assert cmd.ext_fields["Signature"] == cal_signature(content, "fast-secret-1")
    shapes = [{k for k in c.ext_fields} for c in broker.requests]
    assert shapes[0] == shapes[1] == shapes[2]
