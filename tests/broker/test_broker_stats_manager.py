"""BrokerStatsManager: RocketMQ's stat names and keys, cumulative counters, deletion by topic and group, hooks."""

from __future__ import annotations

import pytest

from rmq_core.broker.stats.broker_stats_manager import (
    BrokerStatsManager,
    ConsumeMessageContext,
)


def test_keys_and_counters_as_rocketmq_builds_them():
    s = BrokerStatsManager("ClusterX")
    s.inc_topic_put_nums("T", 3, 1)
    s.inc_topic_put_size("T", 100)
    s.inc_queue_put_nums("T", 2, 1, 1)
    s.inc_broker_put_nums(3)
    s.inc_group_get_nums("g", "T", 2)
    s.inc_group_get_nums("g", "T", 5)
    s.inc_group_get_latency("g", "T", 1, 7)
    s.inc_send_back_nums("g", "T")
    snap = s.snapshot()
    assert snap["TOPIC_PUT_NUMS"]["T"] == {"value": 3, "times": 1}
    assert snap["TOPIC_PUT_SIZE"]["T"] == {"value": 100, "times": 1}
    assert snap["QUEUE_PUT_NUMS"]["T@2"] == {"value": 1, "times": 1}
    assert snap["BROKER_PUT_NUMS"]["ClusterX"]["value"] == 3
    assert snap["GROUP_GET_NUMS"]["T@g"] == {"value": 7, "times": 2}
    assert snap["GROUP_GET_LATENCY"]["1@T@g"] == {"value": 7, "times": 1}
    assert snap["SNDBCK_PUT_NUMS"]["T@g"]["value"] == 1
    snap["GROUP_GET_NUMS"]["T@g"]["value"] = 0  # a copy
    assert s.get_stats_item("GROUP_GET_NUMS", "T@g").value == 7


def test_inc_put_of_many_sends_counts_as_one_call_per_send():
    one_by_one, at_once = BrokerStatsManager("C"), BrokerStatsManager("C")
    for size in (100, 200, 300):
        one_by_one.inc_put("T", 1, size)
    at_once.inc_put("T", 3, 600, times=3)
    assert one_by_one.snapshot() == at_once.snapshot()
    assert at_once.snapshot()["TOPIC_PUT_SIZE"]["T"] == {"value": 600, "times": 3}


@pytest.mark.parametrize("queue_stats", [True, False])
def test_inc_get_of_a_found_pull_counts_what_the_calls_one_by_one_count(queue_stats):
    one_by_one, at_once = BrokerStatsManager("C", queue_stats), BrokerStatsManager("C", queue_stats)
    for queue_id, num, size, fall_behind, latency in ((1, 32, 3200, 5, 2), (1, 3, 300, None, None), (2, 1, 9, 0, 7)):
        one_by_one.inc_group_get_nums("g", "T", num)
        one_by_one.inc_group_get_size("g", "T", size)
        one_by_one.inc_broker_get_nums(num)
        if fall_behind is not None:
            one_by_one.record_disk_fall_behind_time("g", "T", queue_id, fall_behind)
        if latency is not None:
            one_by_one.inc_group_get_latency("g", "T", queue_id, latency)
        at_once.inc_get("g", "T", queue_id, num, size, fall_behind, latency)
    assert at_once.snapshot() == one_by_one.snapshot()
    snap = at_once.snapshot()
    assert snap["GROUP_GET_NUMS"]["T@g"] == {"value": 36, "times": 3}
    assert snap["BROKER_GET_NUMS"]["C"] == {"value": 36, "times": 3}
    assert snap["GROUP_GET_FALL_TIME"] == {"1@T@g": 5, "2@T@g": 0}
    if queue_stats:
        assert snap["GROUP_GET_LATENCY"] == {"1@T@g": {"value": 2, "times": 1}, "2@T@g": {"value": 7, "times": 1}}
    else:
        assert snap["GROUP_GET_LATENCY"] == {"T@g": {"value": 9, "times": 2}}


@pytest.mark.parametrize("delete", ["topic", "group"])
def test_inc_get_after_a_deletion_counts_from_zero_in_the_table(delete):
    s = BrokerStatsManager("C")
    s.inc_get("g", "T", 0, 5, 50, 1, 1)
    s.on_topic_deleted("T") if delete == "topic" else s.on_group_deleted("g")
    assert "T@g" not in s.snapshot()["GROUP_GET_NUMS"]
    s.inc_get("g", "T", 0, 2, 20, None, None)
    assert s.snapshot()["GROUP_GET_NUMS"]["T@g"] == {"value": 2, "times": 1}
    assert s.snapshot()["GROUP_GET_SIZE"]["T@g"] == {"value": 20, "times": 1}


def test_without_queue_stats_latency_is_keyed_topic_at_group():
    s = BrokerStatsManager(enable_queue_stat=False)
    s.inc_queue_put_nums("T", 0)
    s.inc_group_get_latency("g", "T", 1, 7)
    snap = s.snapshot()
    assert "QUEUE_PUT_NUMS" not in snap
    assert snap["GROUP_GET_LATENCY"] == {"T@g": {"value": 7, "times": 1}}


def test_topic_and_group_deletion_drop_their_keys():
    s = BrokerStatsManager()
    for topic in ("T", "U"):
        s.inc_topic_put_nums(topic)
        for group in ("g", "h"):
            s.inc_group_get_nums(group, topic, 1)
            s.inc_group_get_latency(group, topic, 0, 1)
            s.record_disk_fall_behind_time(group, topic, 0, 5)
    s.on_topic_deleted("T")
    snap = s.snapshot()
    assert set(snap["TOPIC_PUT_NUMS"]) == {"U"}
    assert set(snap["GROUP_GET_NUMS"]) == {"U@g", "U@h"}
    assert set(snap["GROUP_GET_LATENCY"]) == {"0@U@g", "0@U@h"}
    assert set(snap["GROUP_GET_FALL_TIME"]) == {"0@U@g", "0@U@h"}
    s.on_group_deleted("g")
    snap = s.snapshot()
    assert set(snap["GROUP_GET_NUMS"]) == {"U@h"}
    assert set(snap["GROUP_GET_LATENCY"]) == {"0@U@h"}
    assert set(snap["GROUP_GET_FALL_TIME"]) == {"0@U@h"}


def test_hooks_run_in_order_and_a_failing_one_is_skipped():
    s = BrokerStatsManager()
    seen = []

    class Bad:
        def consume_message_before(self, context):
            raise RuntimeError("boom")

    class Good:
        def consume_message_before(self, context):
            seen.append(context.topic)

    assert not s.has_consume_message_hook()
    s.register_consume_message_hook(Bad())
    s.register_consume_message_hook(Good())
    s.execute_consume_message_hook_before(ConsumeMessageContext(topic="T"))
    assert seen == ["T"]
    with pytest.raises(TypeError):
        s.register_consume_message_hook(object())  # type: ignore[arg-type]
