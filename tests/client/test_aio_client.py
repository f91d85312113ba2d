"""rmq_core.aio against a real in-process name server and broker: AsyncProducer (send, batch, oneway, ordered),
AsyncPushConsumer (async listener, retry on RECONSUME_LATER / exception, flow control, rebalance), AsyncPullConsumer
(async for + explicit commit, offsets across a consumer restart and a broker restart, rebalance), and asyncio
behaviour: cancellation, asyncio.timeout, clean shutdown, the caller's loop only."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import threading
from collections import defaultdict
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pytest

from rmq_core.aio import (
    AsyncProducer,
    AsyncPullConsumer,
    AsyncPushConsumer,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyStatus,
)
from rmq_core.broker import Broker, BrokerConfig
from rmq_core.client import Producer
from rmq_core.client.producer.message_queue_selector import SelectMessageQueueByHash
from rmq_core.client.send_result import SendStatus
from rmq_core.message import Message, MessageExt, MessageQueue

from support.client_helpers_core import SilentServer, fake_broker_registration
from support.client_helpers_push import PushCluster, push_cluster
from support.client_helpers_rebalance import on_broker_loop

T = TypeVar("T")

FAST: dict[str, Any] = {
    "rebalance_interval_ms": 200,
    "heartbeat_broker_interval": 300,
    "poll_name_server_interval": 300,
    "persist_consumer_offset_interval": 100,
}
FIRST = "CONSUME_FROM_FIRST_OFFSET"


def run(coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
    """Run ``coro`` on a fresh loop in debug mode (un-awaited coroutines and slow callbacks are reported), bounded."""

    async def bounded() -> T:
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded(), debug=True)


async def wait_for(cond: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not cond():
            await asyncio.sleep(0.02)
    assert cond(), what


@pytest.fixture
def cluster(tmp_path: Any) -> Iterator[PushCluster]:
    with push_cluster(tmp_path) as c:
        yield c


def topic_name(request: pytest.FixtureRequest) -> str:
    return "Aio" + "".join(ch for ch in request.node.name if ch.isalnum())[:60]


async def drain(consumer: AsyncPullConsumer, topic: str, n: int, expression: str = "*") -> list[MessageExt]:
    out: list[MessageExt] = []
    async for m in consumer.messages(topic, expression):
        out.append(m)
        if len(out) == n:
            break
    return out


# --- producer ----------------------------------------------------------------------------------------------------
def test_send_and_receive_round_trip(cluster: PushCluster, request: pytest.FixtureRequest) -> None:
    topic = topic_name(request)
    cluster.create_topic(topic, 4)

    async def main() -> None:
        sent = {}
        async with AsyncProducer("aio_pg_rt", cluster.namesrv_addr) as p:
            for i in range(40):
                r = await p.send(Message(topic, f"body-{i}".encode(), tags=f"Tag{i % 2}", keys=[f"k{i}"]))
                assert r.send_status is SendStatus.SEND_OK
                assert r.message_queue.topic == topic and r.queue_offset >= 0
                sent[r.msg_id] = i
        assert len({q for q in sent}) == 40
        async with AsyncPullConsumer("aio_cg_rt", cluster.namesrv_addr, consume_from_where=FIRST, **FAST) as c:
            got = await drain(c, topic, 40)
        assert sorted(m.body for m in got) == sorted(f"body-{i}".encode() for i in range(40))
        for m in got:
            i = sent[m.properties["UNIQ_KEY"]]
            assert m.tags == f"Tag{i % 2}" and m.keys == f"k{i}"
        # tags filter: only Tag1, every queue in order
        async with AsyncPullConsumer("aio_cg_rt2", cluster.namesrv_addr, consume_from_where=FIRST, **FAST) as c:
            odd = await drain(c, topic, 20, "Tag1")
        assert sorted(m.body for m in odd) == sorted(f"body-{i}".encode() for i in range(1, 40, 2))
        per_queue: dict[int, list[int]] = defaultdict(list)
        for m in odd:
            per_queue[m.queue_id].append(m.queue_offset)
        assert all(offs == sorted(offs) for offs in per_queue.values())

    run(main())


def test_send_batch(cluster: PushCluster, request: pytest.FixtureRequest) -> None:
    topic = topic_name(request)
    cluster.create_topic(topic, 2)

    async def main() -> None:
        async with AsyncProducer("aio_pg_batch", cluster.namesrv_addr) as p:
            r = await p.send_batch([Message(topic, f"b{i}".encode()) for i in range(5)])
        assert r.send_status is SendStatus.SEND_OK
        assert len(r.msg_id.split(",")) == 5
        async with AsyncPullConsumer("aio_cg_batch", cluster.namesrv_addr, consume_from_where=FIRST, **FAST) as c:
            got = await drain(c, topic, 5)
        assert [m.body for m in got] == [f"b{i}".encode() for i in range(5)]
        assert {m.queue_id for m in got} == {r.message_queue.queue_id}
        assert [m.queue_offset for m in got] == list(range(r.queue_offset, r.queue_offset + 5))

    run(main())


def test_send_oneway(cluster: PushCluster, request: pytest.FixtureRequest) -> None:
    topic = topic_name(request)
    cluster.create_topic(topic, 2)

    async def main() -> None:
        async with AsyncProducer("aio_pg_oneway", cluster.namesrv_addr) as p:
            for i in range(10):
                assert await p.send_oneway(Message(topic, f"o{i}".encode())) is None
        async with AsyncPullConsumer("aio_cg_oneway", cluster.namesrv_addr, consume_from_where=FIRST, **FAST) as c:
            got = await drain(c, topic, 10)
        assert sorted(m.body for m in got) == sorted(f"o{i}".encode() for i in range(10))

    run(main())


def test_ordered_send_with_selector(cluster: PushCluster, request: pytest.FixtureRequest) -> None:
    topic = topic_name(request)
    cluster.create_topic(topic, 4)

    async def main() -> None:
        queue_of: dict[int, set[int]] = defaultdict(set)
        async with AsyncProducer("aio_pg_order", cluster.namesrv_addr) as p:
            for step in range(5):
                for order in range(8):
                    body = f"{order}:{step}".encode()
                    r = await p.send(Message(topic, body), SelectMessageQueueByHash(), order)
                    queue_of[order].add(r.message_queue.queue_id)
                    # a plain function works as a selector too
                    r2 = await p.send(Message(topic, b"x"), lambda mqs, _m, arg: mqs[arg % len(mqs)], order)
                    assert r2.message_queue.queue_id == order % 4
        assert all(len(qs) == 1 for qs in queue_of.values())
        async with AsyncPullConsumer("aio_cg_order", cluster.namesrv_addr, consume_from_where=FIRST, **FAST) as c:
            got = await drain(c, topic, 80)
        steps: dict[int, list[int]] = defaultdict(list)
        for m in got:
            if m.body != b"x":
                order, step = map(int, m.body.decode().split(":"))
                steps[order].append(step)
                assert {m.queue_id} == queue_of[order]
        assert all(s == list(range(5)) for s in steps.values()) and len(steps) == 8

    run(main())


def test_sync_and_async_producers_side_by_side(cluster: PushCluster, request: pytest.FixtureRequest) -> None:
    """The aio instance is separate from the blocking client's loop-thread instance: both work in one process,
    the same group even, and the sync API is unchanged."""
    topic = topic_name(request)
    cluster.create_topic(topic, 2)
    sync = Producer("aio_pg_side", cluster.namesrv_addr)
    sync.start()
    try:

        async def main() -> None:
            async with AsyncProducer("aio_pg_side", cluster.namesrv_addr) as p:
                r = await p.send(Message(topic, b"async"))
                assert r.send_status is SendStatus.SEND_OK
                assert p.producer.instance is not sync.instance
                assert p.producer.instance is not None and p.producer.instance.on_caller_loop
                # the blocking API refuses to run on the caller's loop instance rather than deadlock
                with pytest.raises(RuntimeError):
                    p.producer.send(Message(topic, b"blocking on the loop"))

        run(main())
        assert sync.send(Message(topic, b"sync")).send_status is SendStatus.SEND_OK
    finally:
        sync.shutdown()


# --- push consumer -----------------------------------------------------------------------------------------------
def test_push_consumer_async_listener_with_retry(cluster: PushCluster, request: pytest.FixtureRequest) -> None:
    topic = topic_name(request)
    cluster.create_topic(topic, 2)

    async def main() -> None:
        attempts: dict[bytes, list[int]] = defaultdict(list)
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        on_loop: list[bool] = []

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
            on_loop.append(asyncio.get_running_loop() is loop and threading.current_thread() is threading.main_thread())
            await asyncio.sleep(0)  # a real await inside the listener
            for m in msgs:
                attempts[m.body].append(m.reconsume_times)
                n = len(attempts[m.body])
                if m.body == b"m3" and n == 1:
                    ctx.delay_level_when_next_consume = 1  # 1 s
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER
                if m.body == b"m7" and n == 1:
                    raise ValueError("a failing listener counts as RECONSUME_LATER")
            if all(attempts.get(f"m{i}".encode()) for i in range(10)) and len(attempts[b"m3"]) >= 2:
                if len(attempts[b"m7"]) >= 2:
                    done.set()
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        c = AsyncPushConsumer("aio_cg_push", cluster.namesrv_addr, consume_from_where=FIRST, **FAST)
        c.subscribe(topic, "*")
        c.register_message_listener(listener)
        async with AsyncProducer("aio_pg_push", cluster.namesrv_addr) as p, c:
            for i in range(10):
                await p.send(Message(topic, f"m{i}".encode()))
            async with asyncio.timeout(40):
                await done.wait()
            # the group's offsets reach the end of both queues once all is acknowledged
            await wait_for(
                lambda: sum(cluster.committed_offset("aio_cg_push", topic, q) for q in range(2)) == 10,
                "offsets committed",
            )
        assert all(on_loop) and on_loop
        assert attempts[b"m3"][:2] == [0, 1]  # redelivered through the retry topic, reconsume_times counted
        assert attempts[b"m7"][:2] == [0, 1]
        assert all(len(v) == 1 for k, v in attempts.items() if k not in (b"m3", b"m7"))

    run(main())


def test_push_consumer_orderly_async_listener(cluster: PushCluster, request: pytest.FixtureRequest) -> None:
    """Orderly: per queue one listener call at a time, in queue order, only while the broker lock is held; a
    SUSPEND_CURRENT_QUEUE_A_MOMENT (or an exception) gives the same message again before anything after it."""
    topic = topic_name(request)
    cluster.create_topic(topic, 2)

    async def main() -> None:
        seen: dict[int, list[int]] = defaultdict(list)
        busy: dict[int, int] = defaultdict(int)
        overlap: list[int] = []
        unlocked: list[int] = []
        failed: set[tuple[int, int]] = set()
        consumer: AsyncPushConsumer | None = None

        async def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeOrderlyStatus:
            m = msgs[0]
            busy[m.queue_id] += 1
            if busy[m.queue_id] > 1:
                overlap.append(m.queue_id)
            assert consumer is not None
            pq = consumer.impl.rebalance_impl.process_queue_table.get(ctx.message_queue)
            if pq is None or not pq.locked:
                unlocked.append(m.queue_id)
            await asyncio.sleep(0.001)  # give another call the chance to overlap, if the service allowed it
            busy[m.queue_id] -= 1
            order, step = map(int, m.body.decode().split(":"))
            seen[order].append(step)
            if step == 3 and (order, step) not in failed:
                failed.add((order, step))
                ctx.suspend_current_queue_time_millis = 50
                if order % 2:
                    raise ValueError("an exception suspends the queue too")
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            return ConsumeOrderlyStatus.SUCCESS

        consumer = AsyncPushConsumer("aio_cg_orderly", cluster.namesrv_addr, consume_from_where=FIRST, **FAST)
        consumer.subscribe(topic, "*")
        consumer.register_message_listener_orderly(listener)
        async with AsyncProducer("aio_pg_orderly", cluster.namesrv_addr) as p, consumer:
            for step in range(6):
                for order in range(6):
                    await p.send(
                        Message(topic, f"{order}:{step}".encode()), lambda mqs, _m, a: mqs[a % len(mqs)], order
                    )
            await wait_for(lambda: sum(len(v) for v in seen.values()) >= 36 + 6, "all consumed, 6 twice")
            await wait_for(
                lambda: sum(cluster.committed_offset("aio_cg_orderly", topic, q) for q in range(2)) == 36,
                "offsets committed",
            )
        for order in range(6):
            assert seen[order] == [0, 1, 2, 3, 3, 4, 5], (order, seen[order])
        assert overlap == [] and unlocked == []

    run(main())


def test_sql92_the_broker_cannot_filter_is_refused_at_start_or_iteration(
    cluster: PushCluster, request: pytest.FixtureRequest
) -> None:
    """checkClientInBroker, as the sync consumer's: the fixture's broker has no enablePropertyFilter, so a SQL92
    subscription fails the push consumer's start, and a pull consumer's iteration before any pull, with the
    broker's code and remark."""
    from rmq_core.client import MQClientException
    from rmq_core.filter.message_selector import MessageSelector

    topic = topic_name(request)
    cluster.create_topic(topic, 1)

    async def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def main() -> None:
        c = AsyncPushConsumer("aio_cg_sqlcheck", cluster.namesrv_addr, consume_from_where=FIRST, **FAST)
        c.subscribe(topic, MessageSelector.by_sql("a > 1"))
        c.register_message_listener(listener)
        with pytest.raises(MQClientException, match="does not support consumer to filter message by SQL92") as e:
            await c.start()
        assert e.value.response_code == 1  # SYSTEM_ERROR

    run(main())

    async def pull() -> None:
        async with AsyncPullConsumer("aio_cg_sqlcheck_pull", cluster.namesrv_addr, consume_from_where=FIRST) as pc:
            with pytest.raises(MQClientException, match="does not support consumer to filter message by SQL92"):
                async for _m in pc.messages(topic, MessageSelector.by_sql("a > 1")):
                    pass
            assert pc.assignment(topic) == set()

    run(pull())


def test_push_consumer_refuses_a_sync_listener(cluster: PushCluster) -> None:
    c = AsyncPushConsumer("aio_cg_refuse", cluster.namesrv_addr)
    with pytest.raises(TypeError):
        c.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)  # type: ignore[arg-type,return-value]


def test_push_consumer_consume_timeout(cluster: PushCluster, request: pytest.FixtureRequest) -> None:
    """A listener call running past the consume timeout is cancelled and its message redelivered (RECONSUME_LATER);
    the worker goes on consuming."""
    topic = topic_name(request)
    cluster.create_topic(topic, 1)

    async def main() -> None:
        calls: list[tuple[bytes, int]] = []
        cancelled: list[bytes] = []
        done = asyncio.Event()

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
            m = msgs[0]
            calls.append((m.body, m.reconsume_times))
            if m.body == b"slow" and m.reconsume_times == 0:
                ctx.delay_level_when_next_consume = 1
                try:
                    await asyncio.Event().wait()  # hangs: the consume timeout must end it
                except asyncio.CancelledError:
                    cancelled.append(m.body)
                    raise
            if m.body == b"slow":
                done.set()
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        c = AsyncPushConsumer(
            "aio_cg_ctimeout", cluster.namesrv_addr, consume_from_where=FIRST, consume_thread_min=1, **FAST
        )
        c.subscribe(topic, "*")
        c.register_message_listener(listener)
        async with AsyncProducer("aio_pg_ctimeout", cluster.namesrv_addr) as p, c:
            svc = c.impl.consume_message_service
            svc.WATCHDOG_PERIOD_S = 0.05
            svc.consume_timeout_ms = 500  # the setting is in minutes (at least 1); shortened for the test
            await p.send(Message(topic, b"slow"))
            await p.send(Message(topic, b"next"))
            async with asyncio.timeout(30):
                await done.wait()
        assert cancelled == [b"slow"]
        assert calls[0] == (b"slow", 0) and (b"next", 0) in calls and calls[-1] == (b"slow", 1)

    run(main())


def test_push_consumer_flow_control(cluster: PushCluster, request: pytest.FixtureRequest) -> None:
    """A listener that does not finish keeps messages in the ProcessQueue: past pull_threshold_for_queue the
    consumer stops pulling (flow control), and resumes when the listener lets go."""
    topic = topic_name(request)
    cluster.create_topic(topic, 1)

    async def main() -> None:
        gate = asyncio.Event()
        consumed: list[bytes] = []
        entered: list[int] = []

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
            entered.append(len(msgs))
            await gate.wait()
            consumed.extend(m.body for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        async with AsyncProducer("aio_pg_flow", cluster.namesrv_addr) as p:
            for i in range(0, 300, 10):
                await p.send_batch([Message(topic, f"f{j}".encode()) for j in range(i, i + 10)])
        c = AsyncPushConsumer(
            "aio_cg_flow",
            cluster.namesrv_addr,
            consume_from_where=FIRST,
            pull_threshold_for_queue=20,
            pull_batch_size=10,
            consume_thread_min=4,
            consume_thread_max=4,
            **FAST,
        )
        c.subscribe(topic, "*")
        c.register_message_listener(listener)
        async with c:
            impl = c.impl
            await wait_for(lambda: impl.queue_flow_control_times >= 3, "flow control")
            pqs = [pq for mq, pq in impl.rebalance_impl.process_queue_table.items() if mq.topic == topic]
            assert len(pqs) == 1
            cached = pqs[0].msg_count
            # stopped pulling: at most the threshold plus one batch cached, far fewer than the 300 stored
            assert 20 < cached <= 30, cached
            assert len(entered) == 4  # consume_thread_min listener calls at once
            await asyncio.sleep(0.3)
            assert pqs[0].msg_count == cached  # still stopped
            gate.set()
            await wait_for(lambda: len(consumed) == 300, "all consumed after the gate opens")
        assert sorted(consumed) == sorted(f"f{j}".encode() for j in range(300))

    run(main())


def test_two_async_push_consumers_share_the_queues(cluster: PushCluster, request: pytest.FixtureRequest) -> None:
    topic = topic_name(request)
    cluster.create_topic(topic, 4)

    async def main() -> None:
        got: dict[str, list[bytes]] = {"a": [], "b": []}

        def listener_for(name: str) -> Callable[..., Awaitable[ConsumeConcurrentlyStatus]]:
            async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
                got[name].extend(m.body for m in msgs)
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

            return listener

        consumers = {}
        for name in ("a", "b"):
            c = AsyncPushConsumer(
                "aio_cg_two", cluster.namesrv_addr, consume_from_where=FIRST, instance_name=f"aio-{name}", **FAST
            )
            c.subscribe(topic, "*")
            c.register_message_listener(listener_for(name))
            consumers[name] = c
        await consumers["a"].start()
        await consumers["b"].start()
        try:

            def mine(name: str) -> set[MessageQueue]:
                return {mq for mq in consumers[name].impl.rebalance_impl.process_queue_table if mq.topic == topic}

            await wait_for(lambda: len(mine("a")) == 2 and len(mine("b")) == 2, "2 + 2 queues")
            assert not (mine("a") & mine("b"))
            assert {mq.queue_id for mq in mine("a") | mine("b")} == {0, 1, 2, 3}
            async with AsyncProducer("aio_pg_two", cluster.namesrv_addr) as p:
                for i in range(40):
                    await p.send(Message(topic, f"t{i}".encode()))
            await wait_for(lambda: len(got["a"]) + len(got["b"]) >= 40, "40 consumed")
            await asyncio.sleep(0.3)
            assert sorted(got["a"] + got["b"]) == sorted(f"t{i}".encode() for i in range(40))  # each once
            assert got["a"] and got["b"]
        finally:
            await consumers["a"].shutdown()
            await consumers["b"].shutdown()

    run(main())


# --- pull consumer -----------------------------------------------------------------------------------------------
def test_pull_commit_survives_consumer_restart(cluster: PushCluster, request: pytest.FixtureRequest) -> None:
    topic = topic_name(request)
    cluster.create_topic(topic, 2)

    async def main() -> None:
        async with AsyncProducer("aio_pg_restart", cluster.namesrv_addr) as p:
            for i in range(20):
                await p.send(Message(topic, f"r{i}".encode()), lambda mqs, _m, arg: mqs[arg % 2], i)
        async with AsyncPullConsumer("aio_cg_restart", cluster.namesrv_addr, consume_from_where=FIRST, **FAST) as c:
            first = await drain(c, topic, 6)
            last_of_q0 = max((m for m in first if m.queue_id == 0), key=lambda m: m.queue_offset)
            await c.commit(last_of_q0)  # only queue 0, up to this message
            mq0 = MessageQueue(topic, "broker-a", 0)
            mq1 = MessageQueue(topic, "broker-a", 1)
            assert await c.committed(mq0) == last_of_q0.queue_offset + 1
            assert cluster.committed_offset("aio_cg_restart", topic, 1) == -1  # nothing committed implicitly
            assert cluster.committed_offset("aio_cg_restart", topic, 0) == last_of_q0.queue_offset + 1
            await c.commit(mq1, 4)
        async with AsyncPullConsumer("aio_cg_restart", cluster.namesrv_addr, consume_from_where=FIRST, **FAST) as c:
            rest = await drain(c, topic, 20 - (last_of_q0.queue_offset + 1) - 4)
            await c.commit()
        q0 = sorted(m.queue_offset for m in rest if m.queue_id == 0)
        q1 = sorted(m.queue_offset for m in rest if m.queue_id == 1)
        assert q0 == list(range(last_of_q0.queue_offset + 1, 10))
        assert q1 == list(range(4, 10))
        assert cluster.committed_offset("aio_cg_restart", topic, 0) == 10
        assert cluster.committed_offset("aio_cg_restart", topic, 1) == 10

    run(main())


def test_pull_iteration_again_after_break(cluster: PushCluster, request: pytest.FixtureRequest) -> None:
    """Leaving ``async for`` with ``break`` and iterating again at once: the new iteration takes over and starts at
    the committed offset (what was handed out and not committed comes again: at-least-once)."""
    topic = topic_name(request)
    cluster.create_topic(topic, 1)

    async def main() -> None:
        async with AsyncProducer("aio_pg_again", cluster.namesrv_addr) as p:
            for i in range(8):
                await p.send(Message(topic, f"a{i}".encode()))
        async with AsyncPullConsumer("aio_cg_again", cluster.namesrv_addr, consume_from_where=FIRST, **FAST) as c:
            first = await drain(c, topic, 3)
            await c.commit(first[1])  # up to a1
            again = await drain(c, topic, 6)
            await c.commit()
        assert [m.body for m in first] == [b"a0", b"a1", b"a2"]
        assert [m.body for m in again] == [f"a{i}".encode() for i in range(2, 8)]
        assert cluster.committed_offset("aio_cg_again", topic, 0) == 8

    run(main())


def test_pull_commit_survives_broker_restart(tmp_path: Any, request: pytest.FixtureRequest) -> None:
    topic = topic_name(request)
    with push_cluster(tmp_path) as c:
        c.create_topic(topic, 1)
        ns_addr = c.namesrv_addr

        async def first() -> None:
            async with AsyncProducer("aio_pg_brestart", ns_addr) as p:
                for i in range(10):
                    await p.send(Message(topic, f"s{i}".encode()))
            async with AsyncPullConsumer("aio_cg_brestart", ns_addr, consume_from_where=FIRST, **FAST) as pc:
                got = await drain(pc, topic, 4)
                assert [m.body for m in got] == [b"s0", b"s1", b"s2", b"s3"]
                await pc.commit()

        run(first())
        c.broker.shutdown()
        cfg = BrokerConfig(
            listen_port=0,
            namesrv_addr=ns_addr,
            broker_name="broker-a",
            store_path_root_dir=os.path.join(str(tmp_path), "broker-a"),
        )
        broker = Broker(cfg)
        broker.start()
        c.broker = broker  # the cluster's exit shuts this one down

        async def second() -> list[bytes]:
            async with AsyncPullConsumer("aio_cg_brestart", ns_addr, consume_from_where=FIRST, **FAST) as pc:
                got = await drain(pc, topic, 6)
                await pc.commit()
                return [m.body for m in got]

        assert run(second()) == [f"s{i}".encode() for i in range(4, 10)]
        assert c.committed_offset("aio_cg_brestart", topic, 0) == 10


def test_two_async_pull_consumers_rebalance(cluster: PushCluster, request: pytest.FixtureRequest) -> None:
    topic = topic_name(request)
    cluster.create_topic(topic, 4)

    async def main() -> None:
        a = AsyncPullConsumer(
            "aio_cg_pull2", cluster.namesrv_addr, consume_from_where=FIRST, instance_name="pa", **FAST
        )
        b = AsyncPullConsumer(
            "aio_cg_pull2", cluster.namesrv_addr, consume_from_where=FIRST, instance_name="pb", **FAST
        )
        got: dict[str, list[MessageExt]] = {"a": [], "b": []}
        async with a, b:

            async def read(name: str, c: AsyncPullConsumer) -> None:
                async for m in c.messages(topic, "*"):
                    got[name].append(m)

            tasks = [asyncio.create_task(read("a", a)), asyncio.create_task(read("b", b))]
            await wait_for(lambda: len(a.assignment(topic)) == 2 and len(b.assignment(topic)) == 2, "2 + 2")
            assert not (a.assignment(topic) & b.assignment(topic))
            async with AsyncProducer("aio_pg_pull2", cluster.namesrv_addr) as p:
                for i in range(40):
                    await p.send(Message(topic, f"p{i}".encode()))
            await wait_for(lambda: len(got["a"]) + len(got["b"]) >= 40, "40 read")
            for name, c in (("a", a), ("b", b)):
                assert {MessageQueue(topic, m.broker_name or "", m.queue_id) for m in got[name]} <= c.assignment(topic)
            assert sorted(m.body for m in got["a"] + got["b"]) == sorted(f"p{i}".encode() for i in range(40))
            await a.commit()
            await b.commit()
            assert [cluster.committed_offset("aio_cg_pull2", topic, q) for q in range(4)] == [10, 10, 10, 10]
            # b leaves: a takes all four queues
            tasks[1].cancel()
            await asyncio.gather(tasks[1], return_exceptions=True)
            await b.shutdown()
            await wait_for(lambda: len(a.assignment(topic)) == 4, "a owns all 4 queues")
            await asyncio.sleep(0.3)
            assert len(got["a"]) + len(got["b"]) == 40  # b's queues continue from b's commits: nothing again
            await a.commit()
            assert [cluster.committed_offset("aio_cg_pull2", topic, q) for q in range(4)] == [10, 10, 10, 10]
            await a.shutdown()  # ends a's iteration
            await asyncio.wait_for(tasks[0], 5)

    run(main())


# --- asyncio behaviour -------------------------------------------------------------------------------------------
def test_cancelled_send_and_asyncio_timeout_leave_the_connection_usable(cluster: PushCluster) -> None:
    """A broker that never answers: cancelling the awaiting send, or asyncio.timeout around it, ends the wait at
    once; the request is forgotten, the connection stays open, and the client keeps working."""
    cluster.create_topic("AioRealTopic", 2)
    with (
        SilentServer() as silent,
        fake_broker_registration(cluster.namesrv, "silent-broker", silent.address, ["AioSilent"]),
    ):

        async def main() -> None:
            async with AsyncProducer("aio_pg_cancel", cluster.namesrv_addr, send_msg_timeout=10000) as p:
                instance = p.producer.instance
                assert instance is not None
                conns = instance.remoting_client._conns

                def pending_to_silent() -> set[int]:
                    c = conns.get(silent.address)
                    return set(c.pending) if c is not None else set()

                before = pending_to_silent()  # e.g. a heartbeat in flight
                send = asyncio.create_task(p.send(Message("AioSilent", b"never answered")))
                await wait_for(lambda: bool(pending_to_silent() - before), "the send is waiting for its answer")
                ours = pending_to_silent() - before
                conn = conns[silent.address]
                send.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await send
                assert not (ours & set(conn.pending)) and not conn.closed and conns[silent.address] is conn
                loop = asyncio.get_running_loop()
                t0 = loop.time()
                before = set(conn.pending)
                with pytest.raises(TimeoutError):
                    async with asyncio.timeout(0.3):
                        await p.send(Message("AioSilent", b"timed out by the caller"))
                assert loop.time() - t0 < 2.0  # the caller's timeout, not the 10 s send timeout
                assert set(conn.pending) <= before and not conn.closed and conns[silent.address] is conn
                assert silent.received > 0
                # the client goes on: a real broker answers on its own connection
                r = await p.send(Message("AioRealTopic", b"after"))
                assert r.send_status is SendStatus.SEND_OK

        run(main())


def test_cancelled_long_poll_keeps_the_broker_connection(cluster: PushCluster, request: pytest.FixtureRequest) -> None:
    """Leaving ``async for`` under asyncio.timeout while the broker holds the pull (long polling) cancels the fetch;
    the broker's late answer to the abandoned pull is dropped and the same connection serves what follows."""
    topic = topic_name(request)
    cluster.create_topic(topic, 1)

    async def main() -> None:
        async with (
            AsyncProducer("aio_pg_lp", cluster.namesrv_addr) as p,
            AsyncPullConsumer("aio_cg_lp", cluster.namesrv_addr, consume_from_where=FIRST, **FAST) as c,
        ):
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(1.0):
                    async for _m in c.messages(topic, "*"):
                        raise AssertionError("the topic is empty")
            instance = c.pull_consumer.instance
            conn = instance.remoting_client._conns[cluster.broker.address]
            # the abandoned pull is forgotten (a parked pull would stay pending for the broker's 20 s suspend;
            # heartbeats and the like come and go)
            await wait_for(lambda: conn.pending == {}, "no request left pending", timeout=2.0)
            assert not conn.closed
            assert c.assignment(topic) == set()  # the fetch tasks are gone
            await p.send(Message(topic, b"wakes the parked pull"))  # the broker answers the abandoned pull now
            got = await drain(c, topic, 1)
            assert [m.body for m in got] == [b"wakes the parked pull"]
            assert instance.remoting_client._conns[cluster.broker.address] is conn and not conn.closed

    run(main())


def test_shutdown_leaves_no_task_behind(cluster: PushCluster, request: pytest.FixtureRequest, caplog: Any) -> None:
    topic = topic_name(request)
    cluster.create_topic(topic, 2)
    leftovers: list[asyncio.Task[Any]] = []

    async def main() -> None:
        blocked = asyncio.Event()

        async def listener(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
            blocked.set()
            await asyncio.Event().wait()  # never returns: shutdown must cancel it
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        p = AsyncProducer("aio_pg_clean", cluster.namesrv_addr)
        push = AsyncPushConsumer("aio_cg_clean_push", cluster.namesrv_addr, consume_from_where=FIRST, **FAST)
        push.subscribe(topic, "*")
        push.register_message_listener(listener)
        pull = AsyncPullConsumer("aio_cg_clean_pull", cluster.namesrv_addr, consume_from_where=FIRST, **FAST)
        await p.start()
        await push.start()
        await pull.start()
        for i in range(5):
            await p.send(Message(topic, f"c{i}".encode()))
        iterating = asyncio.create_task(drain(pull, topic, 100))  # stays inside async for
        async with asyncio.timeout(20):
            await blocked.wait()
        await asyncio.sleep(0.2)
        await push.shutdown()
        await pull.shutdown()
        assert len(await asyncio.wait_for(iterating, 5)) == 5  # shutdown ended the iteration
        await p.shutdown()
        leftovers.extend(t for t in asyncio.all_tasks() if t is not asyncio.current_task())

    with caplog.at_level(logging.WARNING, logger="asyncio"):
        run(main())
        gc.collect()
    assert leftovers == []
    assert not [r for r in caplog.records if "destroyed but it is pending" in r.getMessage()]
    assert not [r for r in caplog.records if "never awaited" in r.getMessage()]


def test_methods_refuse_another_loop(cluster: PushCluster) -> None:
    holder: dict[str, AsyncProducer] = {}

    async def start() -> None:
        p = AsyncProducer("aio_pg_loops", cluster.namesrv_addr)
        await p.start()
        holder["p"] = p

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(start())

        async def elsewhere() -> None:
            instance = holder["p"].producer.instance
            assert instance is not None
            with pytest.raises(RuntimeError, match="another event loop"):
                await instance.shutdown_async()

        asyncio.run(elsewhere())
        loop.run_until_complete(holder["p"].shutdown())
    finally:
        loop.close()


def test_consume_from_timestamp_starts_at_the_first_message_stored_after_it(
    cluster: PushCluster, request: pytest.FixtureRequest
) -> None:
    """CONSUME_FROM_TIMESTAMP for a group with no offset: the async pull and push consumers both start at the first
    message stored at or after ``consume_timestamp`` (yyyyMMddHHmmss, local time, as 4.9's client sends it)."""
    from datetime import datetime

    topic = topic_name(request)
    cluster.create_topic(topic, 1)

    def hot_head_off() -> None:  # 4.9 answers offset 0 for a new group while the queue's head is in memory
        cluster.broker.controller.message_store_config.access_message_in_memory_max_ratio = 0

    on_broker_loop(cluster.broker, hot_head_off)

    async def main() -> None:
        async with AsyncProducer("aio_pg_ts", cluster.namesrv_addr) as p:
            for i in range(3):
                await p.send(Message(topic, f"old{i}".encode()))
            await asyncio.sleep(1.1)  # the consume timestamp has seconds, store timestamps ms
            middle = datetime.now().strftime("%Y%m%d%H%M%S")
            await asyncio.sleep(1.1)
            for i in range(4):
                await p.send(Message(topic, f"new{i}".encode()))
        settings = {**FAST, "consume_from_where": "CONSUME_FROM_TIMESTAMP", "consume_timestamp": middle}
        async with AsyncPullConsumer("aio_cg_ts_pull", cluster.namesrv_addr, **settings) as c:
            got = await drain(c, topic, 4)
        assert [m.body for m in got] == [f"new{i}".encode() for i in range(4)]
        pushed: list[bytes] = []

        async def listener(msgs: list[MessageExt], _ctx: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
            pushed.extend(m.body for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        push = AsyncPushConsumer("aio_cg_ts_push", cluster.namesrv_addr, **settings)
        push.subscribe(topic, "*")
        push.register_message_listener(listener)
        async with push:
            await wait_for(lambda: len(pushed) >= 4, "pushed")
            await asyncio.sleep(0.3)  # nothing older follows
        assert sorted(pushed) == [f"new{i}".encode() for i in range(4)]

    run(main())
