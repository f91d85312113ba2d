"""Producer and consumer helpers for tests: ``produce(topic, n)`` and ``consume(topic, n, timeout)``.

Owns: ``TestProducer`` (one rmq_core ``Producer``, started on first use) and ``TestConsumer`` (one ``PullConsumer``
reading every queue of a topic from its first offset, remembering where it stopped per queue).

Format: ``produce`` sends bodies ``f"{body_prefix}{i}"`` (UTF-8) for i in ``range(n)`` unless ``bodies`` are given.
Invariants: ``consume`` returns exactly ``n`` messages or raises ``TimeoutError`` saying how many it got; messages
it returned are not returned again by the same helper (the next call continues from the offsets it reached);
messages past the ``n``-th that one pull brought are kept for the next call. Offsets are the helper's own: nothing
is committed to the broker. ``close()`` shuts the client down and is idempotent.
Thread-safety: one helper per test thread.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rmq_core.client.consumer.pull_consumer import PullConsumer
    from rmq_core.client.producer.producer import Producer
    from rmq_core.client.send_result import SendResult
    from rmq_core.message import MessageExt, MessageQueue

PULL_BATCH = 32
POLL_INTERVAL_S = 0.02


class TestProducer:
    """``produce(topic, n)`` through rmq_core's ``Producer`` against ``namesrv_addr``."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        namesrv_addr: str,
        group: str | None = None,
        *,
        access_key: str | None = None,
        secret_key: str | None = None,
    ) -> None:
        self.namesrv_addr = namesrv_addr
        self.credentials: dict[str, Any] = {"access_key": access_key, "secret_key": secret_key}  # ACL: signed
        self.group = group or f"rocketmq-test-producer-{uuid.uuid4().hex[:8]}"
        self._producer: Producer | None = None

    @property
    def producer(self) -> Producer:
        """The started rmq_core ``Producer`` (for sends the helper does not cover)."""
        if self._producer is None:
            from rmq_core.client.producer.producer import Producer

            p = Producer(self.group, namesrv_addr=self.namesrv_addr, **self.credentials)
            p.start()
            self._producer = p
        return self._producer

    def produce(
        self,
        topic: str,
        n: int,
        *,
        body_prefix: str = "message-",
        bodies: Iterable[bytes] | None = None,
        tags: str | None = None,
        keys: str | None = None,
    ) -> list[SendResult]:
        """Send ``n`` messages synchronously (or ``bodies``); every send must be SEND_OK. Their SendResults."""
        from rmq_core.message import Message

        payloads = list(bodies) if bodies is not None else [f"{body_prefix}{i}".encode() for i in range(n)]
        results = []
        for body in payloads:
            r = self.producer.send(Message(topic, body, tags=tags, keys=keys))
            if r.send_status.name != "SEND_OK":
                raise AssertionError(f"sending to {topic}: {r.send_status.name} ({r})")
            results.append(r)
        return results

    def close(self) -> None:
        p, self._producer = self._producer, None
        if p is not None:
            p.shutdown()


class TestConsumer:
    """``consume(topic, n, timeout)`` through rmq_core's ``PullConsumer``: every queue, from the first offset."""

    __test__ = False

    def __init__(
        self,
        namesrv_addr: str,
        group: str | None = None,
        *,
        access_key: str | None = None,
        secret_key: str | None = None,
    ) -> None:
        self.namesrv_addr = namesrv_addr
        self.credentials: dict[str, Any] = {"access_key": access_key, "secret_key": secret_key}  # ACL: signed
        self.group = group or f"rocketmq-test-consumer-{uuid.uuid4().hex[:8]}"
        self._consumer: PullConsumer | None = None
        self._next: dict[MessageQueue, int] = {}
        self._pending: dict[str, list[MessageExt]] = {}

    @property
    def consumer(self) -> PullConsumer:
        if self._consumer is None:
            from rmq_core.client.consumer.pull_consumer import PullConsumer

            c = PullConsumer(self.group, namesrv_addr=self.namesrv_addr, **self.credentials)
            c.start()
            self._consumer = c
        return self._consumer

    def consume(self, topic: str, n: int, timeout: float = 10.0, *, expression: str = "*") -> list[MessageExt]:
        """The next ``n`` messages of ``topic`` (matching ``expression``), in queue order then offset order within
        each pull round; waits up to ``timeout`` seconds for them."""
        from rmq_core.client.pull_result import PullStatus

        deadline = time.monotonic() + timeout
        got = self._pending.pop(topic, [])
        while len(got) < n:
            queues = sorted(
                self.consumer.fetch_subscribe_message_queues(topic), key=lambda q: (q.broker_name, q.queue_id)
            )
            found = False
            for mq in queues:
                r = self.consumer.pull(mq, expression, self._next.get(mq, 0), PULL_BATCH)
                if r.pull_status == PullStatus.FOUND:
                    got += r.msg_found_list
                    found = True
                if r.pull_status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG, PullStatus.OFFSET_ILLEGAL):
                    self._next[mq] = r.next_begin_offset
            if len(got) >= n:
                break
            if time.monotonic() >= deadline:
                self._pending[topic] = got
                raise TimeoutError(f"consumed {len(got)} of {n} messages from {topic} in {timeout} s")
            if not found:
                time.sleep(POLL_INTERVAL_S)
        if len(got) > n:
            self._pending[topic] = got[n:]
        return got[:n]

    def close(self) -> None:
        c, self._consumer = self._consumer, None
        if c is not None:
            c.shutdown()
