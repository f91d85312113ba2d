"""The client side of the admin tools' introspection, end to end through a real rmq_core name server and broker in
this process: the broker forwards INVOKE_BROKER_TO_GET_CONSUMER_STATUS (→ GET_CONSUMER_STATUS_FROM_CLIENT),
GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY and INVOKE_BROKER_TO_RESET_OFFSET (→ RESET_CONSUMER_CLIENT_OFFSET)
to a live rmq_core PushConsumer (concurrent and orderly, and rmq_core.aio's AsyncPushConsumer), which answers as
4.9's Java client does. The same requests from Apache's mqadmin, and against Apache's broker:
tests/interop/test_mqadmin_rmq_consumer.py.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from rmq_core.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    Producer,
    PushConsumer,
)
from rmq_core.message import Message
from rmq_core.remoting import fastjson
from rmq_core.remoting.body.consumer_running_info import (
    PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_NAMESERVER_ADDR,
    PROP_THREADPOOL_CORE_SIZE,
    CMResult,
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
)
from rmq_core.remoting.body.lock_batch import mq_from_json_dict
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.client_helpers_e2e import FAST_CLIENT, Cluster, Deliveries, cluster, wait_until

TOPIC = "IntroTopic"
GROUP = "IntroGroup"
COUNT = 12


def _send(cl: Cluster, n: int) -> list[Any]:
    p = Producer("intro_producer", namesrv_addr=cl.namesrv_addr, instance_name="intro-producer")
    p.start()
    try:
        results = [p.send(Message(TOPIC, f"m-{i}".encode(), keys=f"k-{i}")) for i in range(n)]
    finally:
        p.shutdown()
    assert all(r.send_status.name == "SEND_OK" for r in results)
    return results


@contextlib.contextmanager
def _consumer(cl: Cluster, orderly: bool, deliveries: Deliveries) -> Iterator[PushConsumer]:
    c = PushConsumer(
        GROUP,
        namesrv_addr=cl.namesrv_addr,
        instance_name="intro-consumer",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **FAST_CLIENT,
    )
    c.subscribe(TOPIC, "*")

    def listener(msgs: list[Any], context: Any) -> Any:
        deliveries.add("c", msgs)
        return ConsumeOrderlyStatus.SUCCESS if orderly else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    if orderly:
        c.register_message_listener_orderly(listener)
    else:
        c.register_message_listener(listener)
    c.start()
    try:
        yield c
    finally:
        c.shutdown()


def _call(addr: str, code: int, ext: dict[str, str]) -> RemotingCommand:
    with BlockingRemotingClient() as rc:
        return rc.invoke_sync(addr, RemotingCommand.request(code, ext), timeout=15.0)


def _client_offsets(cl: Cluster, client_id: str) -> dict[int, int]:
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS: the client's offsets (queue id → offset) of TOPIC as it answered."""
    r = _call(cl.broker.address, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, {"topic": TOPIC, "group": GROUP})
    assert r.code == ResponseCode.SUCCESS, r.remark
    raw = fastjson.raw_field(bytes(r.body), "consumerTable")
    assert raw is not None
    mine = fastjson.raw_field(raw, client_id)
    assert mine is not None, raw
    return {mq_from_json_dict(k).queue_id: int(v) for k, v in fastjson.map_items(mine)}


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrently", "orderly"])
def test_introspection_of_a_push_consumer_through_the_broker(tmp_path: Any, orderly: bool) -> None:
    with cluster(tmp_path) as cl:
        cl.create_topic(TOPIC, queues=2)
        sent = _send(cl, COUNT)
        deliveries = Deliveries()
        with _consumer(cl, orderly, deliveries) as consumer:
            wait_until(lambda: len(deliveries) >= COUNT, "every message delivered", 30)
            client_id = consumer.client_id
            assert client_id
            per_queue = {q: sum(1 for r in sent if r.message_queue.queue_id == q) for q in (0, 1)}
            wait_until(lambda: _client_offsets(cl, client_id) == per_queue, "the client's offsets", 10)
            committed = lambda: [cl.committed_offset(GROUP, TOPIC, q) for q in (0, 1)] == [per_queue[0], per_queue[1]]  # noqa: E731
            wait_until(committed, "the offsets committed", 10)

            # GET_CONSUMER_RUNNING_INFO
            r = _call(
                cl.broker.address,
                RequestCode.GET_CONSUMER_RUNNING_INFO,
                {"consumerGroup": GROUP, "clientId": client_id, "jstackEnable": "true"},
            )
            assert r.code == ResponseCode.SUCCESS, r.remark
            info = ConsumerRunningInfo.decode(bytes(r.body))
            assert info.properties[PROP_CONSUME_TYPE] == "CONSUME_PASSIVELY"
            assert info.properties[PROP_CONSUME_ORDERLY] == ("true" if orderly else "false")
            assert int(info.properties[PROP_THREADPOOL_CORE_SIZE]) > 0
            assert int(info.properties[PROP_CONSUMER_START_TIMESTAMP]) > 1_600_000_000_000
            assert info.properties[PROP_NAMESERVER_ADDR] == cl.namesrv_addr + ";"
            assert info.properties["consumerGroup"] == GROUP and info.properties["pullBatchSize"] == "32"
            assert {s.topic for s in info.subscription_set} >= {TOPIC}
            topic_mqs = {mq.queue_id: pq for mq, pq in info.mq_table.items() if mq.topic == TOPIC}
            assert {q: pq.commit_offset for q, pq in topic_mqs.items()} == per_queue
            assert all(not pq.dropped for pq in topic_mqs.values())
            if orderly:
                assert all(pq.locked for pq in topic_mqs.values())
            assert info.status_table[TOPIC].consume_ok_tps > 0 and info.status_table[TOPIC].consume_failed_msgs == 0
            assert info.jstack and "Thread:" in info.jstack
            wrong = _call(
                cl.broker.address, RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "x", "clientId": client_id}
            )
            assert wrong.code != ResponseCode.SUCCESS

            # CONSUME_MESSAGE_DIRECTLY: the listener runs once more on that message
            before = len(deliveries)
            r = _call(
                cl.broker.address,
                RequestCode.CONSUME_MESSAGE_DIRECTLY,
                {"consumerGroup": GROUP, "clientId": client_id, "msgId": sent[3].offset_msg_id},
            )
            assert r.code == ResponseCode.SUCCESS, r.remark
            result = ConsumeMessageDirectlyResult.decode(bytes(r.body))
            assert result.consume_result == CMResult.CR_SUCCESS and result.order == orderly and result.auto_commit
            wait_until(lambda: len(deliveries) == before + 1, "the direct delivery", 5)
            assert deliveries.keys()[-1] == "k-3"
            # no message attached (no msgId): a clear error, nothing delivered
            r = _call(
                cl.broker.address, RequestCode.CONSUME_MESSAGE_DIRECTLY, {"consumerGroup": GROUP, "clientId": client_id}
            )
            assert r.code == ResponseCode.SYSTEM_ERROR and "carries 0 messages" in (r.remark or ""), r.remark
            assert len(deliveries) == before + 1

            # INVOKE_BROKER_TO_RESET_OFFSET to before the first message: the consumer consumes everything again
            before = len(deliveries)
            r = _call(
                cl.broker.address,
                RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                {"topic": TOPIC, "group": GROUP, "timestamp": "1000000000000", "isForce": "true"},
            )
            assert r.code == ResponseCode.SUCCESS, r.remark
            wait_until(lambda: len(deliveries) >= before + COUNT, "every message delivered again", 30)
            again = sorted(deliveries.keys()[before:])
            assert again == sorted(f"k-{i}" for i in range(COUNT))
            wait_until(lambda: _client_offsets(cl, client_id) == per_queue, "the offsets back at the end", 10)
            wait_until(committed, "the offsets committed again", 10)


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrently", "orderly"])
def test_aio_push_consumer_answers_too(tmp_path: Any, orderly: bool) -> None:
    from rmq_core.aio import AsyncPushConsumer

    with cluster(tmp_path) as cl:
        cl.create_topic(TOPIC, queues=2)
        sent = _send(cl, 4)
        seen: list[str] = []

        async def main() -> tuple[ConsumerRunningInfo, ConsumeMessageDirectlyResult]:
            c = AsyncPushConsumer(
                GROUP,
                namesrv_addr=cl.namesrv_addr,
                instance_name="intro-aio",
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                **FAST_CLIENT,
            )
            c.subscribe(TOPIC, "*")

            async def listener(msgs: Any, context: Any) -> Any:
                seen.extend(m.keys for m in msgs)
                return ConsumeOrderlyStatus.SUCCESS if orderly else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

            if orderly:
                c.register_message_listener_orderly(listener)
            else:
                c.register_message_listener(listener)
            await c.start()
            try:
                for _ in range(300):
                    if len(seen) >= 4:
                        break
                    await asyncio.sleep(0.1)
                client_id = c.client_id
                r = await asyncio.to_thread(
                    _call,
                    cl.broker.address,
                    RequestCode.GET_CONSUMER_RUNNING_INFO,
                    {"consumerGroup": GROUP, "clientId": client_id},
                )
                assert r.code == ResponseCode.SUCCESS, r.remark
                d = await asyncio.to_thread(
                    _call,
                    cl.broker.address,
                    RequestCode.CONSUME_MESSAGE_DIRECTLY,
                    {"consumerGroup": GROUP, "clientId": client_id, "msgId": sent[0].offset_msg_id},
                )
                assert d.code == ResponseCode.SUCCESS, d.remark
                for _ in range(300):  # the reset needs the group's committed offsets on the broker
                    offsets = [await asyncio.to_thread(cl.committed_offset, GROUP, TOPIC, q) for q in (0, 1)]
                    if sum(offsets) == 4:
                        break
                    await asyncio.sleep(0.1)
                before = len(seen)
                reset = await asyncio.to_thread(
                    _call,
                    cl.broker.address,
                    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                    {"topic": TOPIC, "group": GROUP, "timestamp": "1000000000000", "isForce": "true"},
                )
                assert reset.code == ResponseCode.SUCCESS, reset.remark
                for _ in range(300):
                    if len(seen) >= before + 4:
                        break
                    await asyncio.sleep(0.1)
                assert sorted(seen[before:]) == ["k-0", "k-1", "k-2", "k-3"]
                return ConsumerRunningInfo.decode(bytes(r.body)), ConsumeMessageDirectlyResult.decode(bytes(d.body))
            finally:
                await c.shutdown()

        info, result = asyncio.run(main())
        assert len(seen) == 9 and seen[4] == "k-0"
        assert info.properties[PROP_CONSUME_TYPE] == "CONSUME_PASSIVELY"
        assert info.properties[PROP_CONSUME_ORDERLY] == ("true" if orderly else "false")
        assert {mq.queue_id for mq in info.mq_table if mq.topic == TOPIC} == {0, 1}
        assert result.consume_result == CMResult.CR_SUCCESS and result.order == orderly
