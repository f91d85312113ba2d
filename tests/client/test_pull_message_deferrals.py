"""4.9 ``DefaultMQPushConsumerImpl#pullMessage``'s two "try again in 3 s" branches the seeds show (seeds 000, 001, 004:
``pullMessage``): the consumer's state not OK (``makeSureStateOK`` throws) and no SubscriptionData for the queue's
topic — each defers the pull request by ``PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION`` (3,000 ms) through the pull
service and makes no pull. Probed on a started consumer (real name server, broker, instance and pull service): a
probe pull request is run through ``pull_message`` on the instance's loop, its deferral goes to the real pull service,
and the probe comes back to ``pull_message`` no sooner than 3 s later (then dropped, so it ends there)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rmq_core.client.consumer.listener import ConsumeConcurrentlyStatus, ConsumeFromWhere
from rmq_core.client.consumer.process_queue import ProcessQueue
from rmq_core.client.consumer.pull_request import PullRequest
from rmq_core.client.consumer.push_consumer import PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION, PushConsumer, ServiceState
from rmq_core.message import MessageQueue

from support.client_helpers_push import FAST, PushCluster, push_cluster, wait_until


@pytest.fixture
def started(tmp_path: Path) -> Iterator[tuple[PushCluster, PushConsumer]]:
    with push_cluster(tmp_path) as c:
        c.create_topic("DeferT", 1)
        c.create_topic("NotSubscribedT", 1)
        pc = PushConsumer(
            "GDefer",
            c.namesrv_addr,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            **FAST,
        )
        pc.subscribe("DeferT", "*")
        pc.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
        pc.start()
        try:
            wait_until(lambda: pc.impl.rebalance_impl.process_queue_table, "the consumer's process queue")
            yield c, pc
        finally:
            pc.shutdown()


class Probe:
    """Spies on ``execute_pull_request_later`` and ``pull_message`` (delegating to the real ones) and on
    ``_pull_and_process`` (the pull task ``pull_message`` starts), recording what concerns the probe pull request:
    the deferrals asked, the times it entered ``pull_message``, the pulls started for it (recorded, not made: the
    probe is not a second consumer of the queue)."""

    def __init__(self, pc: PushConsumer, mq: MessageQueue) -> None:
        impl = pc.impl
        self.impl = impl
        self.request = PullRequest("GDefer", mq, ProcessQueue(), 0)
        self.deferrals: list[int] = []
        self.entered: list[float] = []
        self.pulls = 0
        later, pull_message, pull_and_process = (
            impl.execute_pull_request_later,
            impl.pull_message,
            impl._pull_and_process,
        )

        def execute_pull_request_later(pull_request: PullRequest, delay_ms: int) -> None:
            if pull_request is self.request:
                self.deferrals.append(delay_ms)
            later(pull_request, delay_ms)

        async def spied_pull_message(pull_request: PullRequest) -> None:
            if pull_request is self.request:
                self.entered.append(time.monotonic())
            await pull_message(pull_request)

        async def spied_pull_and_process(pull_request: PullRequest, *args: Any) -> None:
            if pull_request is self.request:
                self.pulls += 1
                return
            await pull_and_process(pull_request, *args)

        impl.execute_pull_request_later = execute_pull_request_later  # type: ignore[method-assign, assignment]
        impl.pull_message = spied_pull_message  # type: ignore[method-assign]
        impl._pull_and_process = spied_pull_and_process  # type: ignore[method-assign, assignment]

    def run(self, state: str) -> None:
        """``pull_message(probe)`` on the instance's loop with the consumer's state ``state`` for that call only
        (both branches return before the method's first await: no other callback sees the state)."""

        async def once() -> None:
            impl = self.impl
            saved = impl.service_state
            impl.service_state = state
            try:
                await impl.pull_message(self.request)
            finally:
                impl.service_state = saved

        self.impl.instance.run_async(once()).result(10)

    def comes_back_after(self) -> float:
        """Seconds from the probe's first pull_message to its return through the pull service (then dropped)."""
        self.request.process_queue.dropped = True  # the rescheduled run ends at the dropped check
        wait_until(lambda: len(self.entered) >= 2, "the deferred probe back in pull_message", timeout=10)
        return self.entered[1] - self.entered[0]


def test_a_consumer_state_not_ok_defers_the_pull_by_3_s(started: tuple[PushCluster, PushConsumer]) -> None:
    _c, pc = started
    probe = Probe(pc, MessageQueue("DeferT", "broker-a", 0))
    probe.run(ServiceState.START_FAILED)
    assert probe.deferrals == [PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION] == [3000]
    assert probe.pulls == 0 and probe.request.next_offset == 0
    assert probe.request.process_queue.last_pull_timestamp > 0  # set before the check, as 4.9's
    assert probe.comes_back_after() >= 2.9
    assert probe.deferrals == [3000]  # the dropped probe is not deferred again


def test_no_subscription_for_the_topic_defers_the_pull_by_3_s(started: tuple[PushCluster, PushConsumer]) -> None:
    _c, pc = started
    assert "NotSubscribedT" not in pc.impl.rebalance_impl.subscription_inner
    probe = Probe(pc, MessageQueue("NotSubscribedT", "broker-a", 0))
    probe.run(ServiceState.RUNNING)
    assert probe.deferrals == [3000]
    assert probe.pulls == 0 and probe.request.next_offset == 0
    assert probe.comes_back_after() >= 2.9


def test_the_same_probe_on_a_subscribed_topic_pulls_at_once(started: tuple[PushCluster, PushConsumer]) -> None:
    """The control: with the state RUNNING and the topic subscribed the probe is not deferred but pulled."""
    _c, pc = started
    probe = Probe(pc, MessageQueue("DeferT", "broker-a", 0))
    probe.run(ServiceState.RUNNING)
    wait_until(lambda: probe.pulls == 1, "the probe's pull task")
    assert probe.deferrals == []
