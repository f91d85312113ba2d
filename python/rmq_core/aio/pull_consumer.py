"""AsyncPullConsumer: ``async for msg in consumer.messages(topic, "TagA || TagB")`` with explicit offset commits, on
the caller's event loop.

Owns the stream over the blocking client's ``PullConsumer`` parts: ``messages(topic, expression)`` joins the
group's rebalance and runs one long-polling fetch task per assigned queue into a bounded ``asyncio.Queue`` (a slow
reader stops the fetching), and the commits (``await commit()``, ``commit(msg)``, ``commit(mq, offset)``: nothing
implicit; acknowledged by the broker or written to the offset file before returning).
Invariants: a queue taken away by a rebalance has its fetch task cancelled and its buffered messages are not handed
out any more (its next owner starts at the committed offset: at-least-once); ``shutdown`` (and leaving
``async for``) cancels and awaits every fetch task, and ends a running iteration.
Thread-safety: none; the caller's loop only.
Details (start offsets, buffering bound, commits): docs/CLIENT_DESIGN.md, 'Async pull consumer'.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from rmq_core.aio.lifecycle import AsyncClient, caller_loop_instance, release_instance, start_instance
from rmq_core.client.consumer.pull_consumer import PullConsumer
from rmq_core.client.consumer.rebalance_impl import compute_pull_from_where
from rmq_core.client.pull_result import PullStatus
from rmq_core.common.tasks import cancel_and_wait
from rmq_core.filter.message_selector import MessageSelector
from rmq_core.filter.subscription_data import SubscriptionData, build_subscription_data
from rmq_core.message import MessageExt, MessageQueue
from rmq_core.remoting.body.heartbeat import ConsumeFromWhere, MessageModel

log = logging.getLogger(__name__)

PULL_DELAY_S_WHEN_EXCEPTION = 1.0
_END = object()


@dataclass
class _Stream:
    """One ``messages()`` iteration: its subscription, buffer and fetch tasks."""

    topic: str
    subscription: SubscriptionData
    buffer: asyncio.Queue[Any]
    fetchers: dict[MessageQueue, asyncio.Task[None]] = field(default_factory=dict)


class AsyncPullConsumer(AsyncClient):
    """``AsyncPullConsumer(group, namesrv_addr=..., message_model=..., allocate_strategy=...,
    consume_from_where=CONSUME_FROM_LAST_OFFSET, consume_timestamp=None, pull_batch_size=32,
    max_buffered_messages=1024, **settings)`` with ``rmq_core.client.PullConsumer``'s other settings."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        allocate_strategy: Any = None,
        *,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: str | None = None,
        pull_batch_size: int = 32,
        max_buffered_messages: int = 1024,
        **settings: Any,
    ) -> None:
        if pull_batch_size <= 0 or max_buffered_messages <= 0:
            raise ValueError("pull_batch_size and max_buffered_messages must be positive")
        self.pull_consumer = PullConsumer(group, namesrv_addr, message_model, allocate_strategy, **settings)
        self.pull_consumer.message_queue_listener = self._on_queues_changed
        self.consume_from_where = ConsumeFromWhere(consume_from_where)
        self.consume_timestamp = consume_timestamp
        self.pull_batch_size = pull_batch_size
        self.max_buffered_messages = max_buffered_messages
        self._streams: dict[str, _Stream] = {}
        self._delivered: dict[MessageQueue, int] = {}  # per queue: the offset after the last message handed out

    @property
    def consumer_group(self) -> str:
        return self.pull_consumer.consumer_group

    @property
    def client_id(self) -> str | None:
        inst = self.pull_consumer.instance
        return None if inst is None else str(inst.client_id)

    # --- lifecycle ---------------------------------------------------------------------------------------------
    async def start(self) -> None:
        pc = self.pull_consumer
        if pc.service_state != "CREATE_JUST":
            raise RuntimeError(f"The AsyncPullConsumer service state not OK, maybe started once, {pc.service_state}")
        pc.service_state = "START_FAILED"
        pc.prepare_start()
        instance = caller_loop_instance(pc.client_config)
        pc.set_up(instance)
        await start_instance(instance, lambda: instance.unregister_consumer_async(pc.consumer_group))
        pc.service_state = "RUNNING"

    async def shutdown(self) -> None:
        pc = self.pull_consumer
        if pc.service_state != "RUNNING":
            return
        for stream in list(self._streams.values()):
            await self._end_stream(stream)
        await pc.persist_consumer_offset()
        pc.service_state = "SHUTDOWN_ALREADY"
        instance = pc.instance
        await release_instance(instance, lambda: instance.unregister_consumer_async(pc.consumer_group))

    # --- the stream --------------------------------------------------------------------------------------------
    async def messages(self, topic: str, expression: str | MessageSelector | None = "*") -> AsyncIterator[MessageExt]:
        """The messages of ``topic`` matching ``expression`` on the queues the rebalance gives this consumer, in
        queue order per queue, for as long as the caller iterates. One iteration per topic at a time: a new one ends
        the previous one."""
        pc = self.pull_consumer
        if pc.service_state != "RUNNING":
            raise RuntimeError("start the AsyncPullConsumer before iterating its messages")
        old = self._streams.get(topic)
        if old is not None:
            # an iteration left with ``break`` is closed only when its generator is collected: a new one takes over
            await self._end_stream(old)
        stream = _Stream(topic, build_subscription_data(topic, expression), asyncio.Queue(self.max_buffered_messages))
        self._streams[topic] = stream
        try:
            pc.register_message_queue_listener(topic, None)  # the topic joins the heartbeat and the rebalance
            instance = pc.instance
            await instance.update_topic_route_info_from_name_server(topic)
            # a SQL92 expression the broker cannot filter by fails here, not in every pull (as a lite pull
            # consumer's start does, 4.9 checkClientInBroker)
            await instance.check_subscription_in_broker(pc.consumer_group, stream.subscription)
            await instance.send_heartbeat_to_all_broker_with_lock()
            await pc.do_rebalance()  # now; later rounds come from the instance's rebalance service
            self._reconcile(stream)
            while True:
                item = await stream.buffer.get()
                if item is _END:
                    return
                mq, msg = item
                if mq in stream.fetchers:
                    self._delivered[mq] = msg.queue_offset + 1
                    yield msg
        finally:
            await self._close_stream(stream)
            if topic not in self._streams:  # not taken over by a newer iteration
                pc.unsubscribe(topic)
                with pc._topics_lock:
                    pc.register_topics.discard(topic)

    async def _end_stream(self, stream: _Stream) -> None:
        """Stop fetching for ``stream`` and end an iteration waiting on it."""
        await self._close_stream(stream)
        while not stream.buffer.empty():
            stream.buffer.get_nowait()
        stream.buffer.put_nowait(_END)

    async def _close_stream(self, stream: _Stream) -> None:
        if self._streams.get(stream.topic) is stream:
            del self._streams[stream.topic]
        tasks = list(stream.fetchers.values())
        stream.fetchers.clear()
        await cancel_and_wait(tasks)

    def _on_queues_changed(self, topic: str, mq_all: set[MessageQueue], mq_divided: set[MessageQueue]) -> None:
        """RebalancePullImpl's MessageQueueListener (on the loop): start or stop fetch tasks."""
        stream = self._streams.get(topic)
        if stream is not None:
            self._reconcile(stream)

    def _reconcile(self, stream: _Stream) -> None:
        assigned = self.pull_consumer.fetch_message_queues_in_balance(stream.topic)
        for mq in list(stream.fetchers):
            if mq not in assigned:
                stream.fetchers.pop(mq).cancel()
                self._delivered.pop(mq, None)  # its next owner commits it now
                log.info("%s: %s is no longer assigned to %s", self.consumer_group, mq, self.client_id)
        loop = asyncio.get_running_loop()
        for mq in sorted(assigned - set(stream.fetchers)):
            stream.fetchers[mq] = loop.create_task(self._fetch(stream, mq), name=f"fetch-{mq}")

    def assignment(self, topic: str) -> set[MessageQueue]:
        """The queues of ``topic`` this consumer is fetching now."""
        stream = self._streams.get(topic)
        return set(stream.fetchers) if stream is not None else set()

    async def _start_offset(self, mq: MessageQueue) -> int:
        pc = self.pull_consumer
        return await compute_pull_from_where(
            pc.instance, pc.offset_store, mq, self.consume_from_where, self.consume_timestamp
        )

    async def _fetch(self, stream: _Stream, mq: MessageQueue) -> None:
        pc = self.pull_consumer
        offset = -1
        while True:
            try:
                if offset < 0:
                    offset = await self._start_offset(mq)
                    if offset < 0:
                        raise RuntimeError(f"no start offset for {mq}")
                result = await pc._pull_async(
                    mq,
                    stream.subscription,
                    offset,
                    self.pull_batch_size,
                    True,
                    pc.consumer_timeout_millis_when_suspend,
                )
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("pull %s at %d failed: %s", mq, offset, e)
                await asyncio.sleep(PULL_DELAY_S_WHEN_EXCEPTION)
                continue
            if result.pull_status is PullStatus.FOUND:
                for msg in result.msg_found_list:
                    await stream.buffer.put((mq, msg))
            elif result.pull_status is PullStatus.OFFSET_ILLEGAL:
                log.warning("the pull offset %d of %s is illegal, next %d", offset, mq, result.next_begin_offset)
            offset = result.next_begin_offset

    # --- offsets -----------------------------------------------------------------------------------------------
    async def commit(self, what: MessageExt | MessageQueue | None = None, offset: int | None = None) -> None:
        """Commit consumed offsets: for every queue still assigned, the offset after the last message handed out (no
        argument); up to and including a message; or ``offset`` (the next to consume) for a queue. Returns once the broker (or the offset file) has them."""
        pc = self.pull_consumer
        if pc.service_state != "RUNNING":
            raise RuntimeError("the AsyncPullConsumer is not running")
        if what is None:
            assigned = {mq for stream in self._streams.values() for mq in stream.fetchers}
            targets = {mq: off for mq, off in self._delivered.items() if mq in assigned}
        elif isinstance(what, MessageQueue):
            if offset is None or offset < 0:
                raise ValueError("commit(mq, offset) needs the next offset to consume (>= 0)")
            targets = {what: offset}
        else:
            if what.broker_name is None:
                raise ValueError("commit(msg) needs a message this consumer handed out (its broker_name is unset)")
            targets = {MessageQueue(what.topic, what.broker_name, what.queue_id): what.queue_offset + 1}
        store = pc.offset_store
        for mq, off in targets.items():
            store.update_offset(mq, off, False)
            to_broker = getattr(store, "update_consume_offset_to_broker_async", None)
            if to_broker is not None:
                await to_broker(mq, off, False)
            else:
                await store.persist_async(mq)

    async def committed(self, mq: MessageQueue) -> int:
        """The group's committed offset of ``mq`` as the broker (or offset file) has it; -1 when none."""
        from rmq_core.client.consumer.store.offset_store import ReadOffsetType

        return int(await self.pull_consumer.offset_store.read_offset_async(mq, ReadOffsetType.READ_FROM_STORE))

    async def fetch_subscribe_message_queues(self, topic: str) -> set[MessageQueue]:
        pc = self.pull_consumer
        known = pc.rebalance_impl.topic_subscribe_info_table.get(topic)
        if known:
            return set(known)
        return set(await pc._fetch_subscribe_message_queues(topic))

    def __repr__(self) -> str:
        return f"AsyncPullConsumer({self.consumer_group}, {self.pull_consumer.service_state})"
