"""The client's behaviour end to end over real sockets, against a real rmq_core name server and broker(s) in this
process: at-least-once across a consumer SIGKILLed mid-batch (the consumer runs in a subprocess,
tests/support/client_kill_consumer.py) and across a rebalance (a consumer joins, another leaves), per-queue order under
orderly consumption with two consumers, retries after RECONSUME_LATER with reconsume times growing and the DLQ after
the maximum, flow control by cached count and by cached size with a slow listener, broadcasting (with the local
offset store resuming), and tag and SQL92 subscriptions.

Uses the public API of rmq_core.client (docs/CLIENT_DESIGN.md). Client intervals (rebalance, heartbeat, offset
persistence) are shortened through the consumers' settings; the broker's delay levels are all one second.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from rmq_core.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    MessageModel,
    Producer,
    PushConsumer,
)
from rmq_core.filter import MessageSelector
from rmq_core.message import Message

from support.client_helpers_e2e import (
    FAST_CLIENT,
    FAST_DELAY_LEVELS,
    Cluster,
    Deliveries,
    OrderlyRecorder,
    cached_count,
    cached_size,
    cluster,
    process_queue_table,
    wait_until,
)

HERE = os.path.dirname(os.path.abspath(__file__))


class ByArg:
    """A queue selector: the queue at index ``arg`` (modulo the queue count)."""

    def select(self, mqs: list[Any], msg: Message, arg: Any) -> Any:
        return mqs[int(arg) % len(mqs)]

    def __call__(self, mqs: list[Any], msg: Message, arg: Any) -> Any:
        return self.select(mqs, msg, arg)


@contextlib.contextmanager
def producer(cl: Cluster, group: str = "e2e_producer") -> Iterator[Producer]:
    p = Producer(group, namesrv_addr=cl.namesrv_addr, instance_name=f"{group}-inst")
    p.start()
    try:
        yield p
    finally:
        p.shutdown()


def send_keys(p: Producer, topic: str, n: int, start: int = 0, **kw: Any) -> dict[str, tuple[int, int]]:
    """Send messages keyed "k-<i>" (body the same); key → (queue id, queue offset) from each SendResult."""
    where = {}
    for i in range(start, start + n):
        key = f"k-{i}"
        r = p.send(Message(topic, key.encode(), tags=kw.get("tags"), keys=key))
        assert r.send_status.name == "SEND_OK", r
        where[key] = (r.message_queue.queue_id, r.queue_offset)
    return where


def push_consumer(cl: Cluster, group: str, instance: str, **settings: Any) -> PushConsumer:
    kw: dict[str, Any] = {**FAST_CLIENT, "consume_from_where": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET}
    kw.update(settings)
    return PushConsumer(group, namesrv_addr=cl.namesrv_addr, instance_name=instance, **kw)


def recording(deliveries: Deliveries, name: str, status: Any = ConsumeConcurrentlyStatus.CONSUME_SUCCESS) -> Any:
    def listener(msgs: list[Any], context: Any) -> Any:
        deliveries.add(name, msgs)
        return status

    return listener


# --------------------------------------------------------------------------------------------- consumer killed
class _Subprocess:
    """tests/support/client_kill_consumer.py running; its JSON lines collected by a reader thread."""

    def __init__(self, args: list[str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "..", "support", "client_kill_consumer.py"), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.events: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self._t = threading.Thread(target=self._read, daemon=True)
        self._e = threading.Thread(target=self._read_err, daemon=True)
        self._t.start()
        self._e.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for ln in self.proc.stdout:
            if ln.strip():
                self.lines.put(json.loads(ln))

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for ln in self.proc.stderr:
            self.stderr.append(ln)

    def drain(self) -> list[dict[str, Any]]:
        while True:
            try:
                self.events.append(self.lines.get_nowait())
            except queue.Empty:
                return self.events

    def alive_or_fail(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"consumer process exited {self.proc.returncode}:\n{''.join(self.stderr)[-4000:]}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._t.join(10)
        self._e.join(10)
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()
        self.drain()


@pytest.mark.slow
def test_at_least_once_across_a_consumer_killed_mid_batch(tmp_path):
    topic, group, n, block_from = "KillTopic", "kill_group", 120, 60
    with cluster(tmp_path) as cl:
        cl.create_topic(topic, 4)
        with producer(cl) as p:
            where = send_keys(p, topic, n)
        sub = _Subprocess(
            [
                "--namesrv",
                cl.namesrv_addr,
                "--group",
                group,
                "--topic",
                topic,
                "--block-from",
                str(block_from),
                "--batch",
                "4",
                "--threads",
                "4",
            ]
        )
        try:

            def settled() -> bool:
                sub.alive_or_fail()
                ev = list(sub.drain())
                if not any(e["event"] == "blocked" for e in ev):
                    return False
                time.sleep(0.5)  # acks still running on the other consume threads finish
                return len(sub.drain()) == len(ev)

            wait_until(settled, "the killed consumer's listener to block mid-batch", timeout=15)
            acked = {k for e in sub.events if e["event"] == "acked" for k in e["keys"]}
            blocked = {k for e in sub.events if e["event"] == "blocked" for k in e["keys"]}
            assert acked and blocked and not acked & blocked
            # the smallest unfinished offset of every queue: what RemoteBrokerOffsetStore must commit, never more
            expected = {}
            for q in range(4):
                offsets = [off for qq, off in where.values() if qq == q]
                todo = [off for k, (qq, off) in where.items() if qq == q and k not in acked]
                expected[q] = min(todo) if todo else max(offsets) + 1

            def committed() -> dict[int, int]:
                return {q: max(cl.committed_offset(group, topic, q), 0) for q in range(4)}

            for q, c in committed().items():
                assert c <= expected[q], f"queue {q}: committed {c} is ahead of the unfinished offset {expected[q]}"
            wait_until(
                lambda: committed() == expected,
                f"the broker to hold the smallest unfinished offsets {expected} (has {committed()})",
                timeout=12,
            )
        finally:
            sub.kill()
        at_kill = {q: max(cl.committed_offset(group, topic, q), 0) for q in range(4)}
        assert at_kill == expected
        in_flight = {k for k, (q, off) in where.items() if off >= at_kill[q]}
        assert blocked <= in_flight

        got = Deliveries()
        c2 = push_consumer(cl, group, "survivor")
        c2.subscribe(topic, "*")
        c2.register_message_listener(recording(got, "survivor"))
        c2.start()
        try:
            wait_until(lambda: set(got.keys()) | acked >= set(where), "the survivor to consume the rest", timeout=15)
            time.sleep(0.5)
        finally:
            c2.shutdown()
        second = set(got.keys())
        assert second | acked == set(where), "every message consumed at least once"
        dups = second & acked
        assert dups <= in_flight, f"re-delivered although committed: {sorted(dups - in_flight)}"
        assert second == in_flight, "the survivor starts exactly at each queue's committed offset"
        assert blocked <= second


# --------------------------------------------------------------------------------------------- rebalance
@pytest.mark.slow
def test_at_least_once_across_a_rebalance_join_and_leave(tmp_path):
    topic, group, n, queues = "RebalanceTopic", "rebalance_group", 600, 8
    got = Deliveries()
    with cluster(tmp_path) as cl:
        cl.create_topic(topic, queues)
        a = push_consumer(cl, group, "a")
        a.subscribe(topic, "*")
        a.register_message_listener(recording(got, "a"))
        a.start()
        b = push_consumer(cl, group, "b")
        b.subscribe(topic, "*")
        b.register_message_listener(recording(got, "b"))
        a_stopped = False
        try:
            wait_until(lambda: len(process_queue_table(a, topic)) == queues, "consumer a to own every queue")
            sent: list[str] = []
            with producer(cl) as p:
                for i in range(n):
                    sent.extend(send_keys(p, topic, 1, start=i))
                    time.sleep(0.004)
                    if i == n // 3:
                        b.start()
                    if i == 2 * n // 3:
                        assert {d.consumer for d in got.snapshot()} == {"a", "b"}, "b got queues after joining"
                        a.shutdown()
                        a_stopped = True
            wait_until(lambda: set(got.keys()) >= set(sent), "every message consumed", timeout=15)
            wait_until(
                lambda: len(process_queue_table(b, topic)) == queues, "consumer b to own every queue after a left"
            )
        finally:
            if not a_stopped:
                a.shutdown()
            b.shutdown()
    counts = Counter(got.keys())
    dups = {k: c for k, c in counts.items() if c > 1}
    assert set(counts) == set(sent)
    # only messages in flight on a queue that changed owner may come twice: at most a pull batch per moved queue
    # per ownership change (two changes here)
    assert sum(c - 1 for c in dups.values()) <= 2 * queues * 32, dups
    # a message comes twice only from a queue that changed owner: delivered to both consumers
    owners = defaultdict(set)
    for d in got.snapshot():
        owners[d.key].add(d.consumer)
    assert all(owners[k] == {"a", "b"} for k in dups), {k: owners[k] for k in dups if owners[k] != {"a", "b"}}


# --------------------------------------------------------------------------------------------- orderly
def test_per_queue_order_with_two_orderly_consumers(tmp_path):
    topic, group, queues, n = "OrderTopic", "order_group", 4, 400
    rec = OrderlyRecorder()
    with cluster(tmp_path) as cl:
        cl.create_topic(topic, queues, order=True)
        consumers = []
        try:
            for name in ("o1", "o2"):
                c = push_consumer(cl, group, name, consume_message_batch_max_size=3)
                c.subscribe(topic, "*")
                c.register_message_listener_orderly(rec.listener(name))
                c.start()
                consumers.append(c)
            wait_until(
                lambda: [len(process_queue_table(c, topic)) for c in consumers] == [2, 2],
                "the two consumers to own two queues each",
            )
            with producer(cl) as p:
                for i in range(n):
                    r = p.send(Message(topic, f"{i}".encode(), keys=f"k-{i}"), ByArg(), i)
                    assert r.message_queue.queue_id == i % queues
            wait_until(lambda: rec.consumed() >= n, "every message consumed", timeout=15)
        finally:
            for c in consumers:
                c.shutdown()
    rec.check_per_queue_order(queues, n // queues)


# --------------------------------------------------------------------------------------------- retry and DLQ
def test_reconsume_later_retries_with_growing_reconsume_times_then_dlq(tmp_path):
    topic, group, max_times = "RetryTopic", "retry_group", 2
    got = Deliveries()

    def listener(msgs: list[Any], context: Any) -> ConsumeConcurrentlyStatus:
        got.add("c", msgs)
        if msgs[0].keys.startswith("fail"):
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    with cluster(tmp_path, message_delay_level=FAST_DELAY_LEVELS) as cl:
        cl.create_topic(topic, 1)
        c = push_consumer(cl, group, "retry", max_reconsume_times=max_times)
        c.subscribe(topic, "*")
        c.register_message_listener(listener)
        c.start()
        try:
            with producer(cl) as p:
                for key in ("ok-0", "fail-1", "ok-2"):
                    p.send(Message(topic, key.encode(), tags="T", keys=key))
            dlq = f"%DLQ%{group}"
            wait_until(
                lambda: cl.broker.message_store.get_max_offset_in_queue(dlq, 0) > 0,
                "the failing message to reach the DLQ",
                timeout=15,
            )
            time.sleep(1.5)  # a further retry would be back within a delay level (1 s)
        finally:
            c.shutdown()
        [dead] = cl.stored(dlq)
    fails = [d for d in got.snapshot() if d.key == "fail-1"]
    assert [d.reconsume_times for d in fails] == list(range(max_times + 1))
    assert all(d.topic == topic for d in got.snapshot()), "retried messages are delivered under the original topic"
    assert Counter(d.key for d in got.snapshot() if d.key.startswith("ok")) == {"ok-0": 1, "ok-2": 1}
    assert dead.keys == "fail-1" and dead.body == b"fail-1"
    assert dead.reconsume_times == max_times + 1
    assert dead.properties.get("RETRY_TOPIC") == topic


# --------------------------------------------------------------------------------------------- flow control
def _gated_listener() -> tuple[threading.Event, Deliveries, Any]:
    """A listener that records each call and then blocks until ``gate`` is set (at most 20 s): a slow consumer."""
    gate = threading.Event()
    got = Deliveries()

    def listener(msgs: list[Any], context: Any) -> ConsumeConcurrentlyStatus:
        got.add("c", msgs)
        gate.wait(20)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    return gate, got, listener


def test_flow_control_by_cached_count_with_a_slow_listener(tmp_path):
    topic, group, n, threshold, pull_batch = "FlowTopic", "flow_group", 600, 50, 16
    gate, got, listener = _gated_listener()

    with cluster(tmp_path) as cl:
        cl.create_topic(topic, 1)
        with producer(cl) as p:
            for i in range(0, n, 50):
                p.send_batch([Message(topic, b"x" * 100, keys=f"k-{j}") for j in range(i, i + 50)])
        c = push_consumer(
            cl,
            group,
            "flow",
            pull_threshold_for_queue=threshold,
            pull_batch_size=pull_batch,
            consume_thread_min=1,
            consume_thread_max=1,
        )
        c.subscribe(topic, "*")
        c.register_message_listener(listener)
        c.start()
        try:
            wait_until(lambda: len(got) == 1, "the listener to be called")
            samples = []
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                samples.extend(cached_count(pq) for pq in process_queue_table(c, topic).values())
                time.sleep(0.01)
            assert len(got) == 1, "the listener is still blocked"
            assert max(samples) >= threshold, f"pulled up to the threshold: {max(samples)}"
            assert max(samples) <= threshold + pull_batch, f"cached {max(samples)} > threshold + one pull batch"
            gate.set()
            wait_until(lambda: len(set(got.keys())) == n, "the backlog to drain once the listener is fast", timeout=15)
        finally:
            gate.set()
            c.shutdown()


def test_flow_control_by_cached_size_with_a_slow_listener(tmp_path):
    topic, group, n, size, pull_batch = "FlowSizeTopic", "flow_size_group", 400, 20 * 1024, 16
    gate, got, listener = _gated_listener()

    with cluster(tmp_path) as cl:
        cl.create_topic(topic, 1)
        with producer(cl) as p:
            for i in range(n):
                p.send(Message(topic, os.urandom(size), keys=f"k-{i}"))
        c = push_consumer(
            cl,
            group,
            "flow",
            pull_threshold_size_for_queue=1,
            pull_batch_size=pull_batch,
            consume_thread_min=1,
            consume_thread_max=1,
        )
        c.subscribe(topic, "*")
        c.register_message_listener(listener)
        c.start()
        try:
            wait_until(lambda: len(got) == 1, "the listener to be called")
            samples = []
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                samples.extend(cached_size(pq) for pq in process_queue_table(c, topic).values())
                time.sleep(0.01)
            mib = 1 << 20
            assert max(samples) >= mib, f"pulled up to the threshold: {max(samples)}"
            # RocketMQ compares whole MiB (msgSize / 1 MiB > threshold): up to threshold + 1 MiB, plus one pull
            assert max(samples) <= 2 * mib + pull_batch * size, f"cached {max(samples)} B"
            assert max(samples) < n * size // 2, "the backlog was not pulled whole"
            gate.set()
            wait_until(lambda: len(set(got.keys())) == n, "the backlog to drain once the listener is fast", timeout=15)
        finally:
            gate.set()
            c.shutdown()


# --------------------------------------------------------------------------------------------- broadcasting
def test_broadcasting_every_consumer_gets_every_message_and_resumes_from_its_local_offsets(tmp_path):
    topic, group, n = "BroadcastTopic", "broadcast_group", 40
    got = Deliveries()
    offsets_dir = str(tmp_path / "offsets")
    with cluster(tmp_path) as cl:
        cl.create_topic(topic, 4)
        with producer(cl) as p:
            first = send_keys(p, topic, n)
            consumers = []
            try:
                for name in ("b1", "b2"):
                    c = push_consumer(
                        cl, group, name, message_model=MessageModel.BROADCASTING, offset_store_dir=offsets_dir
                    )
                    c.subscribe(topic, "*")
                    c.register_message_listener(recording(got, name))
                    c.start()
                    consumers.append(c)
                for name in ("b1", "b2"):
                    wait_until(lambda name=name: set(got.keys(name)) >= set(first), f"{name} to get every message")
                time.sleep(0.3)
            finally:
                for c in consumers:
                    c.shutdown()
            for name in ("b1", "b2"):
                assert Counter(got.keys(name)) == Counter(list(first)), f"{name}: each message exactly once"
            assert all(cl.committed_offset(group, topic, q) == -1 for q in range(4)), "no offset on the broker"
            files = [os.path.join(d, f) for d, _, fs in os.walk(offsets_dir) for f in fs]
            assert any(group in f for f in files), f"local offset files: {files}"

            second = send_keys(p, topic, 10, start=n)
        again = Deliveries()
        c = push_consumer(cl, group, "b1", message_model=MessageModel.BROADCASTING, offset_store_dir=offsets_dir)
        c.subscribe(topic, "*")
        c.register_message_listener(recording(again, "b1"))
        c.start()
        try:
            wait_until(lambda: set(again.keys()) >= set(second), "b1 to get the new messages after a restart")
            time.sleep(0.3)
        finally:
            c.shutdown()
        assert set(again.keys()) == set(second), "resumed from the local offset store, not from the first offset"


# --------------------------------------------------------------------------------------------- filters
def test_tag_and_sql92_subscriptions(tmp_path):
    topic, n = "FilterTopic", 30
    tags = ["TagA", "TagB", "TagC"]
    got = Deliveries()
    with cluster(tmp_path, enable_property_filter=True) as cl:
        cl.create_topic(topic, 2)
        subs: list[tuple[str, Any]] = [
            ("tag_group", "TagA || TagC"),
            ("sql_group", MessageSelector.by_sql("a >= 10 AND a < 20")),
            ("sql_tag_group", MessageSelector.by_sql("TAGS = 'TagB' AND a > 20")),
        ]
        consumers = []
        try:
            for group, expr in subs:
                c = push_consumer(cl, group, group)
                c.subscribe(topic, expr)
                c.register_message_listener(recording(got, group))
                c.start()
                consumers.append(c)
            with producer(cl) as p:
                for i in range(n):
                    p.send(Message(topic, f"k-{i}".encode(), tags=tags[i % 3], keys=f"k-{i}", properties={"a": str(i)}))
            want = {
                "tag_group": {f"k-{i}" for i in range(n) if tags[i % 3] in ("TagA", "TagC")},
                "sql_group": {f"k-{i}" for i in range(10, 20)},
                "sql_tag_group": {f"k-{i}" for i in range(21, n) if i % 3 == 1},
            }
            for group, keys in want.items():
                wait_until(lambda g=group, k=keys: set(got.keys(g)) >= k, f"{group} to get its messages")
            time.sleep(0.5)
        finally:
            for c in consumers:
                c.shutdown()
    for group, keys in want.items():
        assert Counter(got.keys(group)) == Counter(keys), group
