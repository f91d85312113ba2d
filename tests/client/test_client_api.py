"""MQClientAPIImpl and MQClientInstance against a real name server and broker(s): routes (and TOPIC_NOT_EXIST),
heartbeat registration, NOTIFY_CONSUMER_IDS_CHANGED → rebalance_immediately, offsets, consumer ids, locks, pull,
unregister, client id sharing and the loop-thread guard."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from rmq_core.client import MQBrokerException, MQClientException, Producer
from rmq_core.client.client_config import ClientConfig
from rmq_core.client.exceptions import RemotingConnectError, RemotingTimeoutError
from rmq_core.client.mq_client_instance import MQClientInstance
from rmq_core.client.mq_client_manager import MQClientManager
from rmq_core.common.sys_flag import FLAG_SUBSCRIPTION
from rmq_core.message import Message, MessageQueue
from rmq_core.remoting.body.lock_batch import LockBatchRequestBody
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.header import (
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)

from support.client_helpers_core import FAST, RecordingConsumer, cluster, wait_until


def make_instance(ns_addr: str, name: str, **kw: object) -> MQClientInstance:
    cfg = ClientConfig(namesrv_addr=ns_addr, instance_name=name, **kw)  # type: ignore[arg-type]
    return MQClientManager.get_instance().get_or_create_mq_client_instance(cfg)


def stop(instance: MQClientInstance, *groups: str) -> None:
    for g in groups:
        instance.unregister_consumer(g)
    instance.shutdown()


def test_route_fetch_and_topic_not_exist(tmp_path: Path) -> None:
    with cluster(tmp_path) as (ns, [broker]):
        inst = make_instance(ns.address, "route")
        inst.start()
        try:
            api = inst.mq_client_api
            route = inst.run_sync(api.get_topic_route_info_from_name_server("TBW102", 3000), 5)
            assert [bd.broker_name for bd in route.broker_datas] == ["broker-a"]
            assert route.broker_datas[0].broker_addrs[0] == broker.address
            with pytest.raises(MQClientException) as ei:
                inst.run_sync(api.get_topic_route_info_from_name_server("NoSuchTopic", 3000), 5)
            assert ei.value.response_code == ResponseCode.TOPIC_NOT_EXIST
            # the instance-level update: False for an unknown topic, True (tables filled) for a known one
            assert inst.run_sync(inst.update_topic_route_info_from_name_server("NoSuchTopic"), 5) is False
            assert inst.run_sync(inst.update_topic_route_info_from_name_server("TBW102"), 5) is True
            assert inst.find_broker_address_in_publish("broker-a") == broker.address
            found = inst.find_broker_address_in_subscribe("broker-a", 0, True)
            assert found is not None and found.broker_addr == broker.address and not found.slave
            assert inst.find_broker_address_in_subscribe("broker-x", 0, False) is None
            # a slave id that does not exist falls back to the master unless only_this_broker
            assert inst.find_broker_address_in_subscribe("broker-a", 1, True) is None
            fb = inst.find_broker_address_in_subscribe("broker-a", 1, False)
            assert fb is not None and fb.broker_addr == broker.address and fb.slave is False
        finally:
            stop(inst)


def test_no_name_server_reachable_is_a_connect_error(tmp_path: Path) -> None:
    inst = make_instance("127.0.0.1:1", "nonamesrv")
    inst.start()
    try:
        with pytest.raises(RemotingConnectError):
            inst.run_sync(inst.mq_client_api.get_topic_route_info_from_name_server("T", 1000), 5)
    finally:
        stop(inst)


def test_heartbeat_registers_producer_and_consumer_then_unregister(tmp_path: Path) -> None:
    with cluster(tmp_path) as (ns, [broker]):
        producer = Producer("HbProducer", namesrv_addr=ns.address, instance_name="hb")
        producer.start()
        inst = producer.instance
        assert inst is not None
        consumer = RecordingConsumer("HbGroup", ["HbTopic"])
        try:
            producer.send(Message("HbTopic", b"x"))  # creates the topic, learns the broker
            assert inst.register_consumer("HbGroup", consumer)
            assert not inst.register_consumer("HbGroup", consumer)  # one per group
            # the broker registers the new topic with the name server in the background
            wait_until(lambda: inst.run_sync(inst.update_topic_route_info_from_name_server("HbTopic"), 5))
            assert consumer.subscribe_info["HbTopic"] == {MessageQueue("HbTopic", "broker-a", i) for i in range(4)}
            inst.run_sync(inst.send_heartbeat_to_all_broker_with_lock(), 5)
            ctl = broker.controller
            info = ctl.consumer_manager.get_consumer_group_info("HbGroup")
            assert info is not None and info.find_channel(inst.client_id) is not None
            assert info.find_subscription_data("HbTopic") is not None
            assert ctl.producer_manager.find_channel_in_group("HbProducer", inst.client_id) is not None
            ids = inst.run_sync(inst.find_consumer_id_list("HbTopic", "HbGroup"), 5)
            assert ids == [inst.client_id]
            # unregister → UNREGISTER_CLIENT removes the consumer from the broker
            inst.unregister_consumer("HbGroup")
            wait_until(
                lambda: (
                    ctl.consumer_manager.get_consumer_group_info("HbGroup") is None
                    or ctl.consumer_manager.get_consumer_group_info("HbGroup").find_channel(inst.client_id) is None
                )
            )
        finally:
            producer.shutdown()
        assert producer.instance is not None and producer.instance.service_state == "SHUTDOWN_ALREADY"
        wait_until(lambda: ctl.producer_manager.find_channel_in_group("HbProducer", inst.client_id) is None)


def test_notify_consumer_ids_changed_reaches_rebalance_immediately(tmp_path: Path) -> None:
    with cluster(tmp_path) as (ns, [_broker]):
        a = make_instance(ns.address, "notify-a")
        b = make_instance(ns.address, "notify-b")
        calls = {a.client_id: 0, b.client_id: 0}
        lock = threading.Lock()
        for inst in (a, b):
            original = inst.rebalance_immediately

            def counting(inst: MQClientInstance = inst, original=original) -> None:  # type: ignore[no-untyped-def]
                with lock:
                    calls[inst.client_id] += 1
                original()

            inst.rebalance_immediately = counting  # type: ignore[method-assign]
        a.start()
        b.start()
        try:
            for inst in (a, b):
                inst.register_consumer("NotifyGroup", RecordingConsumer("NotifyGroup", ["TBW102"]))
                inst.run_sync(inst.update_topic_route_info_from_name_server("TBW102"), 5)
            a.run_sync(a.send_heartbeat_to_all_broker_with_lock(), 5)
            # b joining the group makes the broker notify every member, a included
            before = calls[a.client_id]
            b.run_sync(b.send_heartbeat_to_all_broker_with_lock(), 5)
            wait_until(lambda: calls[a.client_id] > before)
            wait_until(lambda: calls[b.client_id] >= 1)
        finally:
            stop(a, "NotifyGroup")
            stop(b, "NotifyGroup")


def test_scheduled_heartbeat_route_refresh_and_persist(tmp_path: Path) -> None:
    with cluster(tmp_path) as (ns, [broker]):
        inst = make_instance(ns.address, "sched", persist_consumer_offset_interval=50, **FAST)
        consumer = RecordingConsumer("SchedGroup", ["TBW102"])
        inst.register_consumer("SchedGroup", consumer)
        inst.start()
        try:
            # the route refresh alone finds the broker and the subscribe queues, the heartbeat registers us
            wait_until(lambda: "TBW102" in consumer.subscribe_info)
            wait_until(lambda: broker.controller.consumer_manager.get_consumer_group_info("SchedGroup") is not None)
            n = inst.heartbeat_count
            wait_until(lambda: inst.heartbeat_count > n + 1)
        finally:
            stop(inst, "SchedGroup")


def test_offsets_consumer_ids_locks_and_pull(tmp_path: Path) -> None:
    with cluster(tmp_path) as (ns, [broker]):
        producer = Producer("OffProducer", namesrv_addr=ns.address, instance_name="offsets")
        producer.start()
        inst = producer.instance
        assert inst is not None
        api = inst.mq_client_api
        addr = broker.address
        try:
            mq = producer.send(Message("OffTopic", b"one", tags="A")).message_queue
            producer.send_to_queue(Message("OffTopic", b"two", tags="B"), mq)
            run = inst.run_sync
            assert run(api.get_max_offset(addr, "OffTopic", mq.queue_id, 3000), 5) == 2
            assert run(api.get_min_offset(addr, "OffTopic", mq.queue_id, 3000), 5) == 0
            assert run(api.search_offset(addr, "OffTopic", mq.queue_id, 0, 3000), 5) == 0
            q = QueryConsumerOffsetRequestHeader(consumerGroup="OffGroup", topic="OffTopic", queueId=mq.queue_id)
            # a group that never committed, on a queue still starting at 0 in memory: the broker answers 0
            assert run(api.query_consumer_offset(addr, q, 3000), 5) == 0
            # an answer other than SUCCESS is an MQBrokerException with the broker's code and remark
            with pytest.raises(MQBrokerException) as ei:
                run(api.get_consumer_id_list_by_group(addr, "NobodyGroup", 3000), 5)
            assert ei.value.response_code == ResponseCode.SYSTEM_ERROR and ei.value.broker_addr == addr
            u = UpdateConsumerOffsetRequestHeader(
                consumerGroup="OffGroup", topic="OffTopic", queueId=mq.queue_id, commitOffset=1
            )
            run(api.update_consumer_offset(addr, u, 3000), 5)
            assert run(api.query_consumer_offset(addr, q, 3000), 5) == 1
            u.commitOffset = 2
            run(api.update_consumer_offset_oneway(addr, u), 5)
            wait_until(lambda: run(api.query_consumer_offset(addr, q, 3000), 5) == 2)
            # pull: FOUND with the stored bytes, then NO_NEW_MSG past the end
            from rmq_core.client.pull_result import PullStatus
            from rmq_core.message import decode_messages

            ph = PullMessageRequestHeader(
                consumerGroup="OffGroup",
                topic="OffTopic",
                queueId=mq.queue_id,
                queueOffset=0,
                maxMsgNums=32,
                sysFlag=0,
                commitOffset=0,
                suspendTimeoutMillis=0,
                subscription="*",
                subVersion=0,
            )
            with pytest.raises(MQBrokerException) as ei:  # no heartbeat and no subscription in the request
                run(api.pull_message(addr, ph, 3000), 5)
            assert ei.value.response_code == ResponseCode.SUBSCRIPTION_NOT_EXIST
            ph.sysFlag = FLAG_SUBSCRIPTION
            r = run(api.pull_message(addr, ph, 3000), 5)
            assert r.pull_status == PullStatus.FOUND and r.next_begin_offset == 2
            assert [m.body for m in decode_messages(r.message_binary)] == [b"one", b"two"]
            ph.queueOffset = 2
            assert run(api.pull_message(addr, ph, 3000), 5).pull_status == PullStatus.NO_NEW_MSG
            # consumer ids and broker locks need the group's heartbeat
            inst.register_consumer("OffGroup", RecordingConsumer("OffGroup", ["OffTopic"]))
            run(inst.send_heartbeat_to_all_broker_with_lock(), 5)
            assert run(api.get_consumer_id_list_by_group(addr, "OffGroup", 3000), 5) == [inst.client_id]
            body = LockBatchRequestBody(consumer_group="OffGroup", client_id=inst.client_id, mq_set={mq})
            assert run(api.lock_batch_mq(addr, body, 3000), 5) == {mq}
            other = LockBatchRequestBody(consumer_group="OffGroup", client_id="10.0.0.9@other", mq_set={mq})
            assert run(api.lock_batch_mq(addr, other, 3000), 5) == set()
            run(api.unlock_batch_mq(addr, body, 3000), 5)
            assert run(api.lock_batch_mq(addr, other, 3000), 5) == {mq}
        finally:
            inst.unregister_consumer("OffGroup")
            producer.shutdown()


def test_run_sync_refuses_the_loop_thread_and_shutdown_waits_for_members(tmp_path: Path) -> None:
    inst = make_instance("127.0.0.1:1", "guard")
    inst.start()
    inst.start()  # idempotent
    try:

        async def nested() -> None:
            async def inner() -> int:
                return 1

            inst.run_sync(inner(), 1)

        with pytest.raises(RuntimeError, match="event-loop thread"):
            inst.run_sync(nested(), 5)
        inst.register_consumer("GuardGroup", RecordingConsumer("GuardGroup", ["T"]))
        inst.shutdown()  # a consumer is still registered: nothing happens
        assert inst.service_state == "RUNNING"
        assert inst.run_sync(asyncio.sleep(0, result=7), 5) == 7
    finally:
        stop(inst, "GuardGroup")
    assert inst.service_state == "SHUTDOWN_ALREADY"
    assert MQClientManager.get_instance().get_client_instance(inst.client_id) is None


def test_producer_and_consumer_share_one_instance(tmp_path: Path) -> None:
    with cluster(tmp_path) as (ns, [broker]):
        producer = Producer("SharedProducer", namesrv_addr=ns.address, instance_name="shared")
        producer.start()
        try:
            inst = producer.instance
            assert inst is not None
            same = make_instance(ns.address, "shared")
            assert same is inst and same.client_id == producer.client_id
            inst.register_consumer("SharedGroup", RecordingConsumer("SharedGroup", ["SharedTopic"]))
            producer.send(Message("SharedTopic", b"x"))
            inst.run_sync(inst.send_heartbeat_to_all_broker_with_lock(), 5)
            hb = inst.prepare_heartbeat_data()
            assert {p.group_name for p in hb.producer_data_set} == {"SharedProducer", "CLIENT_INNER_PRODUCER"}
            assert [c.group_name for c in hb.consumer_data_set] == ["SharedGroup"]
            ctl = broker.controller
            assert ctl.consumer_manager.get_consumer_group_info("SharedGroup").find_channel(inst.client_id)
            assert ctl.producer_manager.find_channel_in_group("SharedProducer", inst.client_id) is not None
            producer.shutdown()
            assert inst.service_state == "RUNNING"  # the consumer still uses it
        finally:
            inst.unregister_consumer("SharedGroup")
            inst.shutdown()
        assert inst.service_state == "SHUTDOWN_ALREADY"


def test_producer_and_push_consumer_share_one_client_id(tmp_path: Path) -> None:
    from rmq_core.client import ConsumeConcurrentlyStatus, ConsumeFromWhere, PushConsumer

    with cluster(tmp_path) as (ns, [broker]):
        producer = Producer("MixProducer", namesrv_addr=ns.address, instance_name="mix")
        producer.start()
        got: list[bytes] = []
        lock = threading.Lock()

        def listener(msgs, context):  # type: ignore[no-untyped-def]
            with lock:
                got.extend(m.body for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        producer.send(Message("MixTopic", b"first"))
        consumer = PushConsumer(
            "MixGroup",
            namesrv_addr=ns.address,
            instance_name="mix",
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            rebalance_interval_ms=200,
            **FAST,
        )
        consumer.subscribe("MixTopic", "*")
        consumer.register_message_listener(listener)
        consumer.start()
        try:
            inst = producer.instance
            assert inst is not None and consumer.impl.instance is inst
            assert inst.select_consumer("MixGroup") is not None and inst.select_producer("MixProducer") is producer
            producer.send(Message("MixTopic", b"second"))
            wait_until(lambda: sorted(got) == [b"first", b"second"], timeout=10)
            info = broker.controller.consumer_manager.get_consumer_group_info("MixGroup")
            assert info is not None and info.find_channel(inst.client_id) is not None
        finally:
            consumer.shutdown()
            assert inst.service_state == "RUNNING"  # the producer still uses it
            producer.shutdown()
        assert inst.service_state == "SHUTDOWN_ALREADY"


def test_coroutines_from_threads_start_in_order_with_their_outcomes_and_cancellation() -> None:
    """run_async / run_sync from several threads: each coroutine runs on the loop, submissions of one thread start
    in submission order, results and exceptions reach the caller's future, and cancelling a future cancels its
    coroutine; run_sync's timeout cancels the coroutine too."""
    inst = make_instance("127.0.0.1:1", "handoff")
    inst.start()
    try:
        started: list[tuple[int, int]] = []
        on_loop: list[bool] = []

        async def job(t: int, i: int) -> int:
            started.append((t, i))
            on_loop.append(inst.in_loop_thread())
            return t * 1000 + i

        results: dict[int, list[int]] = {}

        def submitter(t: int) -> None:
            futs = [inst.run_async(job(t, i)) for i in range(300)]
            results[t] = [f.result(10) for f in futs]

        threads = [threading.Thread(target=submitter, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        assert all(results[t] == [t * 1000 + i for i in range(300)] for t in range(4))
        assert all(on_loop) and len(started) == 1200
        for t in range(4):
            assert [i for tt, i in started if tt == t] == list(range(300))

        async def boom() -> None:
            raise ValueError("boom")

        with pytest.raises(ValueError, match="boom"):
            inst.run_async(boom()).result(5)

        cancelled = threading.Event()

        async def forever() -> None:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        fut = inst.run_async(forever())
        time.sleep(0.2)  # started on the loop: its cancellation reaches the coroutine
        assert fut.cancel()
        assert cancelled.wait(5)
        cancelled.clear()
        with pytest.raises(RemotingTimeoutError):
            inst.run_sync(forever(), 0.2)
        assert cancelled.wait(5)
    finally:
        stop(inst)
