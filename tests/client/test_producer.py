"""Producer against a real name server and broker(s): what the store holds after sync / selector / async / oneway /
batch sends, compression, delay level, retry on another broker, bad input (nothing stored), send timeout."""

from __future__ import annotations

import concurrent.futures
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from rmq_core.broker import Broker
from rmq_core.client import MQClientException, Producer, SelectMessageQueueByHash, SendStatus
from rmq_core.client.exceptions import ClientErrorCode, RemotingTimeoutError, RemotingTooMuchRequestError
from rmq_core.client.producer.message_queue_selector import java_hash_code
from rmq_core.common.topic_config import TopicConfig
from rmq_core.message import (
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_MASK,
    SYSFLAG_COMPRESSION_ZLIB,
    Message,
    MessageExt,
    decode_offset_msg_id,
)
from rmq_core.namesrv import NameServer
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand

from support.admin_helpers import add_topic_config
from support.client_helpers_core import SilentServer, cluster, fake_broker_registration, wait_until
from support.send_helpers import max_offset, stored


@pytest.fixture
def one(tmp_path: Path) -> Iterator[tuple[NameServer, Broker, Producer]]:
    with cluster(tmp_path) as (ns, [broker]):
        p = Producer("TestProducer", namesrv_addr=ns.address)
        p.start()
        try:
            yield ns, broker, p
        finally:
            p.shutdown()


def by_offset(broker: Broker, offset_msg_id: str) -> MessageExt:
    _host, phy = decode_offset_msg_id(offset_msg_id)
    m = broker.message_store.look_message_by_offset(phy)
    assert m is not None
    return m


def test_sync_send_to_auto_created_topic_stores_everything(one) -> None:  # type: ignore[no-untyped-def]
    _ns, broker, p = one
    msg = Message("AutoTopic", b"hello world", tags="TagA", keys=["k1", "k2"], properties={"color": "blue"})
    r = p.send(msg)
    assert r.send_status == SendStatus.SEND_OK
    assert r.msg_id == msg.uniq_key and r.msg_id and len(r.msg_id) == 32
    assert r.message_queue.topic == "AutoTopic" and r.message_queue.broker_name == "broker-a"
    assert 0 <= r.message_queue.queue_id < 4 and r.queue_offset == 0
    assert r.region_id == "DefaultRegion" and r.trace_on
    # auto-created from TBW102 with the producer's default_topic_queue_nums
    tc = broker.controller.topic_config_manager.select_topic_config("AutoTopic")
    assert tc is not None and tc.write_queue_nums == 4
    [m] = stored(broker, "AutoTopic", r.message_queue.queue_id)
    assert m.body == b"hello world" and m.tags == "TagA" and m.keys == "k1 k2"
    assert m.properties["color"] == "blue" and m.properties["UNIQ_KEY"] == r.msg_id
    assert m.queue_offset == r.queue_offset and m.msg_id == r.offset_msg_id
    assert m.sys_flag & COMPRESSED_FLAG == 0


def test_send_with_selector_orders_by_hash(one) -> None:  # type: ignore[no-untyped-def]
    _ns, broker, p = one
    p.send(Message("OrderTopic", b"prime"))  # topic exists with 4 queues
    wait_until(
        lambda: (
            p.topic_publish_info_table.get("OrderTopic") is not None and p.topic_publish_info_table["OrderTopic"].ok()
        )
    )
    selector = SelectMessageQueueByHash()
    results = {
        key: [p.send(Message("OrderTopic", f"{key}-{i}".encode()), selector, key) for i in range(5)]
        for key in ("order-1", "order-2", "user-42")
    }
    for key, rs in results.items():
        queue_ids = {r.message_queue.queue_id for r in rs}
        assert queue_ids == {abs(java_hash_code(key)) % 4}, key  # as a Java producer picks it
    for qid in {r.message_queue.queue_id for rs in results.values() for r in rs}:
        bodies = [m.body.decode() for m in stored(broker, "OrderTopic", qid) if m.body != b"prime"]
        for key in results:  # each key's messages are stored in send order
            mine = [b for b in bodies if b.startswith(key + "-")]
            assert mine == sorted(mine)
    # a plain function selector works too; one returning None is a clear error
    r = p.send(Message("OrderTopic", b"fn"), lambda mqs, msg, arg: mqs[arg], 3)
    assert r.message_queue.queue_id == 3
    with pytest.raises(MQClientException, match="select message queue return null"):
        p.send(Message("OrderTopic", b"none"), lambda mqs, msg, arg: None)


def test_send_async_and_oneway(one) -> None:  # type: ignore[no-untyped-def]
    _ns, broker, p = one
    futures = [p.send_async(Message("AsyncTopic", f"a{i}".encode())) for i in range(10)]
    results = [f.result(10) for f in futures]
    assert all(r.send_status == SendStatus.SEND_OK for r in results)
    assert len({r.msg_id for r in results}) == 10
    bodies = {m.body for qid in range(4) for m in stored(broker, "AsyncTopic", qid)}
    assert bodies == {f"a{i}".encode() for i in range(10)}
    # a bad message fails the future, not the caller
    bad = p.send_async(Message("AsyncTopic", b""))
    with pytest.raises(MQClientException, match="body length is zero"):
        bad.result(5)
    for i in range(5):
        assert p.send_oneway(Message("AsyncTopic", f"o{i}".encode())) is None
    wait_until(lambda: sum(max_offset(broker, "AsyncTopic", q) for q in range(4)) == 15)


def test_send_batch_consecutive_offsets(one) -> None:  # type: ignore[no-untyped-def]
    _ns, broker, p = one
    msgs = [Message("BatchTopic", f"b{i}".encode(), tags="T", keys=f"key{i}") for i in range(5)]
    r = p.send_batch(msgs)
    assert r.send_status == SendStatus.SEND_OK
    uniq = [m.uniq_key for m in msgs]
    assert all(uniq) and r.msg_id == ",".join(uniq)  # type: ignore[arg-type]
    assert len(r.offset_msg_id.split(",")) == 5  # type: ignore[union-attr]
    got = stored(broker, "BatchTopic", r.message_queue.queue_id)
    assert [m.queue_offset for m in got] == list(range(r.queue_offset, r.queue_offset + 5))
    assert [m.body for m in got] == [f"b{i}".encode() for i in range(5)]
    assert [m.properties["UNIQ_KEY"] for m in got] == uniq
    assert [m.keys for m in got] == [f"key{i}" for i in range(5)]
    # the rules of a batch
    with pytest.raises(MQClientException, match="same"):
        p.send_batch([Message("BatchTopic", b"x"), Message("OtherTopic", b"y")])
    with pytest.raises(MQClientException, match="TimeDelayLevel is not supported"):
        p.send_batch([Message("BatchTopic", b"x", delay_time_level=2)])
    with pytest.raises(MQClientException, match="Retry Group is not supported"):
        p.send_batch([Message("%RETRY%G", b"x")])


def test_compression_over_threshold(one) -> None:  # type: ignore[no-untyped-def]
    _ns, broker, p = one
    big = b"".join(b"line %06d of a compressible body\n" % i for i in range(400))
    assert len(big) > 4096
    r = p.send(Message("ZipTopic", big))
    small = p.send(Message("ZipTopic", b"s" * 4095))
    q = r.message_queue.queue_id
    [raw] = [m for m in stored(broker, "ZipTopic", q, decompress=False) if m.msg_id == r.offset_msg_id]
    assert raw.sys_flag & COMPRESSED_FLAG
    assert raw.sys_flag & COMPRESSION_TYPE_MASK == SYSFLAG_COMPRESSION_ZLIB
    assert len(raw.body) < len(big) and zlib.decompress(raw.body) == big
    [m] = [m for m in stored(broker, "ZipTopic", q) if m.msg_id == r.offset_msg_id]
    assert m.body == big  # the store's decode inflates it
    plain = by_offset(broker, small.offset_msg_id)  # type: ignore[arg-type]
    assert plain.sys_flag & COMPRESSED_FLAG == 0 and plain.body == b"s" * 4095
    # the caller's message keeps its body
    msg = Message("ZipTopic", big)
    p.send(msg)
    assert msg.body == big


def test_delay_level(one) -> None:  # type: ignore[no-untyped-def]
    _ns, broker, p = one
    p.send(Message("DelayTopic", b"now"))
    r = p.send(Message("DelayTopic", b"later", delay_time_level=3))
    assert r.send_status == SendStatus.SEND_OK and r.message_queue.topic == "DelayTopic"
    m = by_offset(broker, r.offset_msg_id)  # type: ignore[arg-type]
    assert m.topic == "SCHEDULE_TOPIC_XXXX" and m.queue_id == 2  # level 3 → queue 2
    assert m.properties["REAL_TOPIC"] == "DelayTopic" and m.properties["DELAY"] == "3"


def test_retry_on_another_broker_when_one_is_down(tmp_path: Path) -> None:
    with cluster(tmp_path, 2) as (ns, [a, b]):
        p = Producer("RetryProducer", namesrv_addr=ns.address)
        p.start()
        inst = p.instance
        assert inst is not None
        try:
            # the first scheduled route refresh (10 ms after start) is over before TwoTopic exists; the next one
            # is 30 s away, so the producer keeps the route listing broker-a after it goes down
            wait_until(lambda: "TBW102" in inst.topic_route_table)
            # the topic on both brokers; the producer's route lists both
            for broker in (a, b):
                add_topic_config(broker, TopicConfig("TwoTopic", 4, 4, 6))
                broker.controller.register_broker_all()
            wait_until(
                lambda: (
                    p.instance.run_sync(  # type: ignore[union-attr]
                        p.instance.update_topic_route_info_from_name_server("TwoTopic"), 5
                    )
                    and {mq.broker_name for mq in p.topic_publish_info_table["TwoTopic"].message_queue_list}
                    == {"broker-a", "broker-b"}
                )
            )
            a.shutdown()
            results = [p.send(Message("TwoTopic", f"m{i}".encode())) for i in range(8)]
            assert {r.message_queue.broker_name for r in results} == {"broker-b"}
            assert all(r.send_status == SendStatus.SEND_OK for r in results)
            # the route still lists broker-a: half of the first attempts went there and were retried
            assert {mq.broker_name for mq in p.topic_publish_info_table["TwoTopic"].message_queue_list} == {
                "broker-a",
                "broker-b",
            }
            assert sum(max_offset(b, "TwoTopic", q) for q in range(4)) == 8
            # without retries a send aimed at the dead broker fails with the connect error code
            p.retry_times_when_send_failed = 0
            errors = []
            for i in range(8):
                try:
                    p.send(Message("TwoTopic", f"n{i}".encode()))
                except MQClientException as e:
                    errors.append(e)
            assert errors and all(e.response_code == ClientErrorCode.CONNECT_BROKER_EXCEPTION for e in errors)
            assert "Send [1] times, still failed" in str(errors[0])
        finally:
            p.shutdown()


def test_bad_messages_are_refused_and_nothing_stored(one) -> None:  # type: ignore[no-untyped-def]
    _ns, broker, p = one
    p.send(Message("BadTopic", b"ok"))
    before = sum(max_offset(broker, "BadTopic", q) for q in range(4))
    with pytest.raises(MQClientException) as ei:
        p.send(Message("BadTopic", b"x" * (4 * 1024 * 1024 + 1)))
    assert ei.value.response_code == ResponseCode.MESSAGE_ILLEGAL
    assert "the message body size over max value, MAX: 4194304" in str(ei.value)
    with pytest.raises(MQClientException, match="body length is zero"):
        p.send(Message("BadTopic", b""))
    with pytest.raises(MQClientException, match="contains illegal characters"):
        p.send(Message("Bad Topic!", b"x"))
    with pytest.raises(MQClientException, match="topic is blank"):
        p.send(Message("", b"x"))
    for forbidden in ("SCHEDULE_TOPIC_XXXX", "SELF_TEST_TOPIC", "rmq_sys_wheel_timer"):  # as the broker refuses them
        with pytest.raises(MQClientException, match=rf"Sending message to topic\[{forbidden}\] is forbidden"):
            p.send(Message(forbidden, b"x"))
    with pytest.raises(MQClientException, match="contains illegal characters"):
        p.send(Message("Topic\n", b"x"))
    with pytest.raises(MQClientException, match="properties are illegal"):
        p.send(Message("BadTopic", b"x", properties={"k": "a\x02b"}))
    assert sum(max_offset(broker, "BadTopic", q) for q in range(4)) == before
    assert broker.controller.topic_config_manager.select_topic_config("Bad Topic!") is None


def test_no_route_and_state_errors(tmp_path: Path) -> None:
    with cluster(tmp_path, auto_create_topic_enable=False) as (ns, [_broker]):
        p = Producer("NoRouteProducer", namesrv_addr=ns.address)
        with pytest.raises(MQClientException, match="state not OK"):
            p.send(Message("T", b"x"))
        p.start()
        try:
            with pytest.raises(MQClientException, match="No route info of this topic: NoRouteTopic") as ei:
                p.send(Message("NoRouteTopic", b"x"))
            assert ei.value.response_code == ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION
            with pytest.raises(MQClientException, match="has been created before"):
                Producer(
                    "NoRouteProducer", namesrv_addr=ns.address, instance_name=p.client_config.instance_name
                ).start()
        finally:
            p.shutdown()
        with pytest.raises(MQClientException, match="state not OK"):
            p.send(Message("T", b"x"))
    with pytest.raises(MQClientException, match="DEFAULT_PRODUCER"):
        Producer().start()


def test_send_timeout_against_a_broker_that_never_answers(tmp_path: Path) -> None:
    with (
        cluster(tmp_path, 0) as (ns, _),
        SilentServer() as silent,
        fake_broker_registration(ns, "silent-broker", silent.address, ["SilentTopic"]),
    ):
        # a short RPC timeout: shutdown's UNREGISTER_CLIENT to the silent broker waits that long too
        p = Producer("TimeoutProducer", namesrv_addr=ns.address, mq_client_api_timeout=300)
        p.start()
        try:
            with pytest.raises((MQClientException, RemotingTooMuchRequestError)) as ei:
                p.send(Message("SilentTopic", b"x"), timeout_ms=300)
            e = ei.value
            if isinstance(e, MQClientException):
                assert e.response_code == ClientErrorCode.ACCESS_BROKER_TIMEOUT
            else:
                assert "call timeout" in str(e)
            assert silent.received > 0  # the request did reach the silent broker
            fut = p.send_async(Message("SilentTopic", b"y"), timeout_ms=200)
            with pytest.raises((MQClientException, RemotingTooMuchRequestError)):
                fut.result(10)
            # an ordered send does not retry: the timeout itself surfaces (RemotingTimeoutException in Java)
            with pytest.raises(RemotingTimeoutError):
                p.send(Message("SilentTopic", b"z"), SelectMessageQueueByHash(), "k", timeout_ms=200)
        finally:
            p.shutdown()
        assert isinstance(fut, concurrent.futures.Future)


def _two_broker_topic(p: Producer, brokers: list[Broker], topic: str) -> None:
    """``topic`` with 4 queues on every broker, and ``p``'s route listing all of them."""
    inst = p.instance
    assert inst is not None
    wait_until(lambda: "TBW102" in inst.topic_route_table)
    for broker in brokers:
        add_topic_config(broker, TopicConfig(topic, 4, 4, 6))
        broker.controller.register_broker_all()
    names = {b.controller.broker_config.broker_name for b in brokers}
    wait_until(
        lambda: (
            inst.run_sync(inst.update_topic_route_info_from_name_server(topic), 5)
            and {mq.broker_name for mq in p.topic_publish_info_table[topic].message_queue_list} == names
        )
    )


@pytest.mark.parametrize("fault_enable", [True, False], ids=["latency-fault", "round-robin"])
def test_send_latency_fault_keeps_away_from_a_failing_broker(tmp_path: Path, fault_enable: bool) -> None:
    """broker-a answers every send SYSTEM_ERROR (a retryable code). With send_latency_fault_enable the failure
    isolates broker-a for 30 s (MQFaultStrategy): after the first refused attempt every send goes straight to
    broker-b. Without it, selection only avoids the last failed broker within one send, so about half of the
    sends try broker-a first again (how many depends on where the round robin starts and how the retries move it:
    4 to 7 of 20 seen; isolation would allow at most 1)."""
    with cluster(tmp_path, 2) as (ns, [a, b]):
        refused: list[int] = []

        async def refuse(conn: object, request: RemotingCommand) -> RemotingCommand:
            refused.append(request.opaque)
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark="refused (test)")

        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2):
            a.controller.remoting_server.register(int(code), refuse)
        p = Producer("FaultProducer", namesrv_addr=ns.address, send_latency_fault_enable=fault_enable)
        p.start()
        try:
            _two_broker_topic(p, [a, b], "FaultTopic")
            results = [p.send(Message("FaultTopic", f"m{i}".encode())) for i in range(20)]
        finally:
            p.shutdown()
        assert all(r.send_status == SendStatus.SEND_OK and r.message_queue.broker_name == "broker-b" for r in results)
        assert sum(max_offset(b, "FaultTopic", q) for q in range(4)) == 20
        if fault_enable:
            assert len(refused) <= 1, f"broker-a tried {len(refused)} times while isolated"
        else:
            assert len(refused) >= 3, f"broker-a tried only {len(refused)} times without the fault strategy"


def test_an_unreachable_name_server_is_skipped(tmp_path: Path) -> None:
    """With ``namesrv_addr = "<dead>;<alive>"`` route lookups fail over to the next name server and stick to it."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    with cluster(tmp_path) as (ns, _brokers):
        p = Producer("FailoverProducer", namesrv_addr=f"{dead};{ns.address}")
        p.start()
        try:
            results = [p.send(Message("FailoverTopic", f"m{i}".encode())) for i in range(3)]
            assert all(r.send_status == SendStatus.SEND_OK for r in results)
            api = p.instance.mq_client_api  # type: ignore[union-attr]
            assert api.chosen_namesrv_addr == ns.address
        finally:
            p.shutdown()


def test_fault_strategy_pauses_by_latency_and_expires() -> None:
    """RocketMQ's tables: latency ≥ 550/1000/2000/3000/15000 ms pauses a broker 30/60/120/180/600 s, below 550 ms
    not at all; an isolated failure counts as 30 s latency (600 s). A paused broker is available again once the
    pause is over; while every broker is paused the least bad one is still picked."""
    from rmq_core.client.producer.mq_fault_strategy import MQFaultStrategy

    now = [1_000_000]
    s = MQFaultStrategy(True, now_ms=lambda: now[0])
    assert [s.compute_not_available_duration(ms) for ms in (0, 549, 550, 1000, 2999, 3000, 15000, 30000)] == [
        0,
        0,
        30_000,
        60_000,
        120_000,
        180_000,
        600_000,
        600_000,
    ]
    lft = s.latency_fault_tolerance
    s.update_fault_item("broker-a", 700, False)
    s.update_fault_item("broker-b", 20, True)  # isolation: 600 s
    assert not lft.is_available("broker-a") and not lft.is_available("broker-b")
    # both paused: FaultItem order (available first, then the lower recorded latency) picks broker-b, whose
    # isolation recorded its real 20 ms latency with the 600 s pause
    assert lft.pick_one_at_least() == "broker-b"
    now[0] += 30_000
    assert lft.is_available("broker-a") and not lft.is_available("broker-b")
    now[0] += 570_000
    assert lft.is_available("broker-b")
    off = MQFaultStrategy(False, now_ms=lambda: now[0])
    off.update_fault_item("broker-a", 20_000, True)
    assert off.latency_fault_tolerance.is_available("broker-a")  # disabled: nothing is recorded
