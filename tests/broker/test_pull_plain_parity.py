"""The plain pulls' fast path (``PlainPullFastPath``, docs/FAST_PATHS.md P2) answers what the general path
(``PullMessageProcessor._process_request``) answers, byte for byte, with the same side effects: the stats it counts,
the offsets it commits, the pulls it parks and the offset-moved events it stores. One real broker, its processor
called on its loop with a real server-side connection: each run of pulls is served with the fast path off, then on,
from the same state (a fresh stats manager and an empty offset table each side; a fixed clock). The corpus has found
pulls (the subscription from the request or the heartbeat, ``*``, tags, no expression type, LITE_PULL), no new
message (answered and parked), offsets moved (an empty queue, overflow), commit offsets, a stale and an absent
subscription, a broadcast group, a write-only and an unknown topic, bad queue ids, bad headers and SQL92; runs of one
pull each and the whole corpus in one run, in two orders."""

from __future__ import annotations

import copy

import pytest

from rmq_core.broker.processor.pull_plain_fast_path import NotPlain
from rmq_core.broker.stats.broker_stats_manager import BrokerStatsManager
from rmq_core.common import sys_flag
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.remoting.codes import RequestCode
from rmq_core.remoting.command import RemotingCommand

from support.admin_helpers import create_subscription_group
from support.pull_helpers import (
    GROUP,
    TOPIC,
    add_topic,
    heartbeat,
    on_loop,
    pull_request,
    put,
    running_broker,
    subscription_json,
)

SUB, COMMIT, SUSPEND = sys_flag.FLAG_SUBSCRIPTION, sys_flag.FLAG_COMMIT_OFFSET, sys_flag.FLAG_SUSPEND
NOW = 1_800_000_000_000


def _lite(r: RemotingCommand) -> RemotingCommand:
    r.code = int(RequestCode.LITE_PULL_MESSAGE)
    return r


def _corpus() -> list[tuple[bool, RemotingCommand]]:
    """(plain: whether the fast path answers it itself, the request)."""
    hb = {"flags": 0, "subscription": None, "expression_type": None, "sub_version": 1000}
    plain = [
        pull_request(),
        pull_request(offset=5, max_nums=8),
        pull_request(queue_id=1),
        pull_request(offset=3, flags=SUB | COMMIT, commit_offset=3),
        pull_request(offset=1, expression_type=None),
        pull_request(**{**hb, "offset": 7}),
        pull_request(**{**hb, "flags": COMMIT | SUSPEND, "commit_offset": 9, "suspend_ms": 30000}),
        _lite(pull_request(offset=16, max_nums=8)),
        pull_request(offset=40),  # no new message: answered
        pull_request(offset=40, flags=SUB | SUSPEND | COMMIT, suspend_ms=30000, commit_offset=40),  # parked
        pull_request(queue_id=2, offset=5, flags=SUB | COMMIT, commit_offset=5),  # an empty queue: offset moved
        pull_request(offset=1000),  # overflow badly
        pull_request(queue_id=3),  # an empty queue at 0
        pull_request(**{**hb, "sub_version": 999}),
        pull_request(ext={"sysFlag": " 4"}),  # read as the general decoder reads it: int() skips the spaces
    ]
    general = [
        pull_request(subscription="t0 || t1"),
        pull_request(group="tag_group", **hb),
        pull_request(**{**hb, "sub_version": 2000}),  # the broker's subscription is stale
        pull_request(group="gone_group", **hb),  # no subscription
        pull_request(group="bcast_group", **hb),
        pull_request("WriteOnly"),
        pull_request("NoSuchTopic"),
        pull_request(queue_id=9),
        pull_request(queue_id=-1, flags=SUB | COMMIT, commit_offset=4),
        pull_request(subscription="a > 1", expression_type="SQL92"),
        pull_request(ext={"queueOffset": "x"}),
        pull_request(ext={"maxMsgBytes": "many"}),
        pull_request(ext={"queueOffset": "99999999999999999999"}),
        pull_request(),
    ]
    del general[-1].ext_fields["commitOffset"]  # missing: the general path's HeaderError
    return [(True, r) for r in plain] + [(False, r) for r in general]


def _parked_view(p) -> tuple:
    """What a parked pull holds (its subscription's version, when built from the request, is the clock's)."""
    sub, f = p.subscription_data, p.message_filter
    return (
        p.request_command.opaque,
        p.pull_from_this_offset,
        p.timeout_millis,
        p.suspend_timestamp,
        (sub.topic, sub.sub_string, sorted(sub.tags_set), sub.expression_type, sub.class_filter_mode),
        (type(f).__name__, f.store_message_filter, f.store_property_filter, f.consumer_filter_data),
    )


def _side(broker, conn, requests: list[RemotingCommand], fast: bool) -> tuple:
    """One run with the fast path ``fast`` (on or off): its answers' bytes and its side effects."""
    controller = broker.controller
    processor = controller.pull_message_processor
    store = broker.message_store

    def run() -> tuple:
        saved = processor.plain_pull_fast_path
        processor.broker_stats_manager = stats = BrokerStatsManager(processor.broker_stats_manager.cluster_name)
        offsets = controller.consumer_offset_manager.offset_table
        offsets.clear()
        parked_before = len(controller.pull_request_hold_service.parked())
        events_before = store.get_max_offset_in_queue("OFFSET_MOVED_EVENT", 0)
        if not fast:
            processor.plain_pull_fast_path = None
        try:
            answers = processor.process_batch(conn, requests)
        finally:
            processor.plain_pull_fast_path = saved
        return (
            [None if a is None else a.encode() for a in answers],
            stats.snapshot(),
            copy.deepcopy(offsets),
            [_parked_view(p) for p in controller.pull_request_hold_service.parked()[parked_before:]],
            store.get_max_offset_in_queue("OFFSET_MOVED_EVENT", 0) - events_before,
        )

    return on_loop(broker, run)


@pytest.mark.parametrize(
    "config", [{}, {"slave_read_enable": True, "transfer_msg_by_heap": False}], ids=["default", "slave_read"]
)
def test_the_plain_path_answers_what_the_general_path_does(tmp_path, client, config):
    with running_broker(tmp_path, **config) as broker:
        add_topic(broker)
        add_topic(broker, "WriteOnly", perm=2)
        for i in range(40):
            put(broker, body=bytes([48 + i % 10]) * (100 + i), tags=f"t{i % 3}")
        for i in range(3):
            put(broker, queue_id=1, body=b"short %d" % i)
        addr = broker.address
        create_subscription_group(addr, SubscriptionGroupConfig(GROUP, broker_id=2))  # what slave reads suggest
        heartbeat(client, addr)
        heartbeat(client, addr, "tag_group", [subscription_json(TOPIC, "t0 || t1")])
        heartbeat(client, addr, "bcast_group", message_model="BROADCASTING")
        on_loop(broker, setattr, broker.controller.pull_message_processor, "now_ms", lambda: NOW)
        (conn,) = broker.controller.remoting_server.connections
        corpus = _corpus()
        requests = [r for _plain, r in corpus]
        runs = [[r] for r in requests] + [requests, requests[::-1]]
        found = parked = moved = 0
        for run in runs:
            general = _side(broker, conn, run, fast=False)
            fast = _side(broker, conn, run, fast=True)
            assert fast == general, [r.ext_fields for r in run]
            found += sum(1 for a in general[0] if a is not None and RemotingCommand.decode_frame(a[4:]).code == 0)
            parked += len(general[3])
            moved += general[4]
        assert found >= 16 and parked >= 3 and moved >= 3

        def plain_ones() -> list[bool]:  # the corpus's plain pulls are answered on the fast path itself
            fast_path = broker.controller.pull_message_processor.plain_pull_fast_path
            return [not isinstance(fast_path.answer(conn, r, {}), NotPlain) for _plain, r in _corpus()]

        assert on_loop(broker, plain_ones) == [plain for plain, _r in corpus]
