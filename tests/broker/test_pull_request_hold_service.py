"""Long polling against a real broker over TCP: parked pulls woken by arrivals (tag and SQL92 filters), expiry on
each pull's own deadline, short polling, the periodic sweep (with an injected clock), apache/rocketmq#7358 (a
message stored between the pull's store read and its parking), several pulls parked on one queue, the commit-offset
side effect on the first pass only, clients that disconnect while parked, and shutdown answering parked pulls.

Timing: assertions about time are lower bounds (a pull is not answered before its deadline) or "answered within the
client's timeout", which the 5 s sweep could not meet; none measures speed.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from rmq_core.broker.stats.broker_stats_manager import ConsumeMessageContext
from rmq_core.message import Message, decode_messages
from rmq_core.message_encoding import properties_to_string
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import SendMessageRequestHeader, encode_header
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.pull_helpers import (
    ALL_FLAGS,
    TOPIC,
    add_topic,
    on_loop,
    parked,
    pull,
    pull_request,
    put,
    running_broker,
    stored_offset,
    update_offset,
    wait_until,
)

LONG = 20_000  # a suspend no test waits for: a pull answered within the client timeout was woken, not expired


@pytest.fixture
def broker(tmp_path):
    with running_broker(tmp_path) as b:
        add_topic(b)
        yield b


def park(client, broker, *, timeout: float = 5.0, expect_parked: int = 1, **kwargs):
    """Send a suspending pull and wait until it is parked; returns the response future."""
    kwargs.setdefault("flags", ALL_FLAGS)
    kwargs.setdefault("suspend_ms", LONG)
    fut = client.invoke_async(broker.address, pull_request(**kwargs), timeout=timeout)
    wait_until(lambda: len(parked(broker)) >= expect_parked or fut.done(), what="the pull to be parked")
    assert not fut.done(), fut.result()
    return fut


def barrier(broker) -> None:
    """Everything queued on the broker loop before now (e.g. an arrival hopped over from this thread) has run."""
    on_loop(broker, lambda: None)


def bodies(r: RemotingCommand) -> list[bytes]:
    return [m.body for m in decode_messages(r.body)]


# --- waking on arrival ------------------------------------------------------------------------------------------
def test_matching_arrival_wakes_the_parked_pull(broker, client):
    fut = park(client, broker, subscription="TagA")
    [pr] = parked(broker, TOPIC, 0)
    assert (pr.pull_from_this_offset, pr.timeout_millis) == (0, LONG)
    put(broker, body=b"a", tags="TagA")  # from this thread: the store's listener hops to the broker loop
    r = fut.result(6)
    assert r.code == ResponseCode.SUCCESS and r.remark == "FOUND"
    assert bodies(r) == [b"a"] and r.ext_fields["nextBeginOffset"] == "1"
    assert parked(broker) == []


def test_non_matching_arrival_does_not_wake_and_the_pull_expires(broker, client):
    start = time.monotonic()
    fut = park(client, broker, subscription="TagA", suspend_ms=600)
    put(broker, body=b"b", tags="TagB")
    barrier(broker)
    assert len(parked(broker)) == 1 and not fut.done()
    r = fut.result(5)
    assert time.monotonic() - start >= 0.6
    # the expired pull is re-run: the store now scans past the TagB message (as RocketMQ answers it)
    assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY and r.remark == "NO_MATCHED_MESSAGE"
    assert r.ext_fields["nextBeginOffset"] == "1"


def test_send_over_the_wire_wakes_the_parked_pull(broker, client):
    """SEND_MESSAGE_V2 stores on the broker loop itself: the arrival is notified on the loop, the wake-up deferred."""
    fut = park(client, broker, subscription="TagA")
    header = SendMessageRequestHeader(
        producerGroup="p",
        topic=TOPIC,
        defaultTopic="TBW102",
        defaultTopicQueueNums=4,
        queueId=0,
        sysFlag=0,
        bornTimestamp=int(time.time() * 1000),
        flag=0,
        properties=properties_to_string({"TAGS": "TagA"}),
        reconsumeTimes=0,
    )
    sent = client.invoke_sync(
        broker.address,
        RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, encode_header(header, short_names=True), body=b"sent"),
    )
    assert sent.code == ResponseCode.SUCCESS, sent.remark
    r = fut.result(6)
    assert r.code == ResponseCode.SUCCESS and bodies(r) == [b"sent"]


def test_sql92_arrival_is_matched_by_properties(tmp_path, client):
    with running_broker(tmp_path, enable_property_filter=True) as b:
        add_topic(b)
        fut = park(client, b, subscription="a > 5", expression_type="SQL92")
        put(b, body=b"a=1", properties={"a": "1"})
        barrier(b)
        assert len(parked(b)) == 1 and not fut.done()
        put(b, body=b"a=7", properties={"a": "7"})
        r = fut.result(6)
    assert r.code == ResponseCode.SUCCESS and bodies(r) == [b"a=7"]


def test_stale_max_offset_is_re_read_from_the_store(broker, client):
    hold = broker.controller.pull_request_hold_service
    fut = park(client, broker, subscription="TagA")
    put(broker, tags="TagB")
    barrier(broker)
    assert len(parked(broker)) == 1
    # an arrival notice carrying an old max offset (0 <= request offset): the service reads the store's (1)
    on_loop(broker, hold.notify_message_arriving, TOPIC, 0, 0, tags_code=None)
    r = fut.result(5)
    assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY and r.ext_fields["nextBeginOffset"] == "1"


def test_several_pulls_parked_on_one_queue(broker, client):
    with BlockingRemotingClient() as other:
        fa = park(client, broker, subscription="TagA")
        fall = park(other, broker, subscription="*", expect_parked=2)
        fb = park(client, broker, subscription="TagB", expect_parked=3)
        assert len(parked(broker, TOPIC, 0)) == 3
        put(broker, body=b"a", tags="TagA")
        ra, rall = fa.result(6), fall.result(6)
        assert ra.code == rall.code == ResponseCode.SUCCESS
        assert bodies(ra) == bodies(rall) == [b"a"]
        barrier(broker)
        [left] = parked(broker, TOPIC, 0)
        assert left.subscription_data.sub_string == "TagB" and not fb.done()
        put(broker, body=b"b", tags="TagB")
        rb = fb.result(6)
    assert rb.code == ResponseCode.SUCCESS and bodies(rb) == [b"b"]


def test_other_queues_are_not_woken(broker, client):
    fut = park(client, broker, queue_id=1)
    put(broker, queue_id=0)
    barrier(broker)
    assert len(parked(broker, TOPIC, 1)) == 1 and not fut.done()
    put(broker, body=b"q1", queue_id=1)
    assert bodies(fut.result(6)) == [b"q1"]


# --- expiry -----------------------------------------------------------------------------------------------------
def test_short_suspend_expires_on_its_own_deadline(broker, client):
    start = time.monotonic()
    r = pull(client, broker.address, flags=ALL_FLAGS, suspend_ms=500, timeout=3.0)  # the 5 s sweep would be late
    assert time.monotonic() - start >= 0.5
    assert r.code == ResponseCode.PULL_NOT_FOUND
    assert r.ext_fields["nextBeginOffset"] == "0"


def test_short_polling_holds_for_short_polling_time(tmp_path, client):
    with running_broker(tmp_path, long_polling_enable=False, short_polling_time_mills=300) as b:
        add_topic(b)
        assert b.controller.pull_request_hold_service.check_interval_ms() == 300
        start = time.monotonic()
        fut = park(client, b, timeout=3.0)
        [pr] = parked(b)
        assert pr.timeout_millis == 300  # not the request's 20 s
        r = fut.result(4)
    assert time.monotonic() - start >= 0.3
    assert r.code == ResponseCode.PULL_NOT_FOUND


def test_sweep_with_injected_clock_answers_expired_pulls(broker, client):
    hold = broker.controller.pull_request_hold_service
    fut = park(client, broker, suspend_ms=120_000)
    [pr] = parked(broker)
    on_loop(broker, hold.check_hold_request, pr.deadline_ms - 1)
    barrier(broker)
    assert len(parked(broker)) == 1 and not fut.done()
    on_loop(broker, hold.check_hold_request, pr.deadline_ms)
    r = fut.result(5)
    assert r.code == ResponseCode.PULL_NOT_FOUND
    assert parked(broker) == []


def test_sweep_wakes_on_any_new_message(broker, client):
    """checkHoldRequest knows no tag code, so RocketMQ wakes every pull whose queue grew."""
    hold = broker.controller.pull_request_hold_service
    fut = park(client, broker, subscription="TagA")
    put(broker, tags="TagB")
    barrier(broker)
    assert not fut.done()
    on_loop(broker, hold.check_hold_request)
    r = fut.result(5)
    assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY and r.ext_fields["nextBeginOffset"] == "1"


# --- apache/rocketmq#7358 ---------------------------------------------------------------------------------------
class PutBetweenReadAndPark:
    """The seam: consume-message hooks run after the store read and before the pull is parked. On a first-pass
    PULL_NOT_FOUND (no commercial stats) this hook stores a message, as a producer on another connection could at
    that moment."""

    def __init__(self, broker, tags: str) -> None:
        self.broker, self.tags, self.fired = broker, tags, 0

    def consume_message_before(self, context: ConsumeMessageContext) -> None:
        if context.topic == TOPIC and context.commercial_rcv_stats is None and not self.fired:
            self.fired += 1
            self.broker.message_store.put_message(Message(TOPIC, b"raced", tags=self.tags), 0)


def test_message_stored_between_read_and_parking_wakes_at_once(broker, client):
    hook = PutBetweenReadAndPark(broker, "TagA")
    on_loop(broker, broker.controller.broker_stats_manager.register_consume_message_hook, hook)
    r = pull(client, broker.address, flags=ALL_FLAGS, suspend_ms=60_000, subscription="TagA", timeout=3.0)
    assert hook.fired == 1
    assert r.code == ResponseCode.SUCCESS and bodies(r) == [b"raced"]
    assert parked(broker) == []


def test_non_matching_message_stored_between_read_and_parking_keeps_it_parked(broker, client):
    hook = PutBetweenReadAndPark(broker, "TagB")
    on_loop(broker, broker.controller.broker_stats_manager.register_consume_message_hook, hook)
    fut = client.invoke_async(broker.address, pull_request(flags=ALL_FLAGS, suspend_ms=LONG, subscription="TagA"))
    wait_until(lambda: hook.fired == 1 and len(parked(broker)) == 1, what="the raced pull to be parked")
    barrier(broker)
    assert not fut.done()
    put(broker, body=b"a", tags="TagA")
    r = fut.result(5)
    assert r.code == ResponseCode.SUCCESS and bodies(r) == [b"a"]


# --- side effects, disconnects, shutdown ------------------------------------------------------------------------
def test_commit_offset_only_on_the_first_pass(broker, client):
    fut = park(client, broker, commit_offset=5)
    assert stored_offset(broker) == 5  # the first pass commits, although it parks
    update_offset(client, broker.address, 9)
    put(broker)
    r = fut.result(6)
    assert r.code == ResponseCode.SUCCESS
    assert stored_offset(broker) == 9  # the wake-up pass did not commit 5 again


def _raw_pull(address: str, **kwargs) -> socket.socket:
    host, _, port = address.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    sock.sendall(pull_request(**kwargs).encode())
    return sock


def test_parked_pull_of_a_disconnected_client_is_dropped(broker, client):
    sock = _raw_pull(broker.address, flags=ALL_FLAGS, suspend_ms=LONG)
    try:
        wait_until(lambda: len(parked(broker)) == 1, what="the raw pull to be parked")
    finally:
        sock.close()
    wait_until(lambda: parked(broker) == [], what="the closed connection's pull to be dropped")
    put(broker, body=b"after")
    barrier(broker)
    r = pull(client, broker.address)
    assert r.code == ResponseCode.SUCCESS and bodies(r) == [b"after"]


def test_wake_after_disconnect_drops_the_answer(broker, client):
    """If the connection is gone when the pull wakes (close not yet seen), the answer is dropped, nothing raised."""
    sock = _raw_pull(broker.address, flags=ALL_FLAGS, suspend_ms=LONG)
    wait_until(lambda: len(parked(broker)) == 1, what="the raw pull to be parked")
    [pr] = parked(broker)
    processor = broker.controller.pull_message_processor

    def close_then_wake() -> None:
        pr.conn.close()
        processor.run_request_when_wakeup(pr.conn, pr.request_command)

    on_loop(broker, close_then_wake)
    sock.close()
    wait_until(lambda: parked(broker) == [], what="the pull to be dropped")
    assert pull(client, broker.address).code == ResponseCode.PULL_NOT_FOUND


def test_shutdown_answers_parked_pulls(tmp_path, client):
    with running_broker(tmp_path) as b:
        add_topic(b)
        fut = park(client, b)
    r = fut.result(5)
    assert r.code == ResponseCode.PULL_NOT_FOUND


def test_response_frame_of_a_woken_pull_echoes_the_request_opaque(broker):
    req = pull_request(flags=ALL_FLAGS, suspend_ms=LONG)
    host, _, port = broker.address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(req.encode())
        wait_until(lambda: len(parked(broker)) == 1, what="the raw pull to be parked")
        put(broker, body=b"z")
        (length,) = struct.unpack(">i", _recv_exact(sock, 4))
        resp = RemotingCommand.decode_frame(_recv_exact(sock, length))
    assert resp.is_response and resp.opaque == req.opaque
    assert resp.code == ResponseCode.SUCCESS and bodies(resp) == [b"z"]


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return buf
