"""PULL_MESSAGE against a real broker over TCP: every check of RocketMQ 4.9's PullMessageProcessor#processRequest in
its order (codes and remark texts), the GetMessageStatus → response code table with its headers, the body as the
store's records byte for byte, filters (tags, SQL92, retry topics), slave behaviour, the OffsetMovedEvent message,
consume-message hooks, pull statistics and the commit-offset side effect."""

from __future__ import annotations

import json
import os

import pytest

from rmq_core.broker.stats.broker_stats_manager import ConsumeMessageContext, StatsType
from rmq_core.common import sys_flag
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.message import decode_messages
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand

from support.admin_helpers import create_subscription_group, create_topic
from support.pull_helpers import (
    ALL_FLAGS,
    GROUP,
    TOPIC,
    add_topic,
    heartbeat,
    on_loop,
    pull,
    pull_request,
    put,
    running_broker,
    stored_offset,
    subscription_json,
)

FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
SUB = sys_flag.FLAG_SUBSCRIPTION


@pytest.fixture
def broker(tmp_path):
    with running_broker(tmp_path) as b:
        add_topic(b)
        yield b


class Recorder:
    def __init__(self) -> None:
        self.contexts: list[ConsumeMessageContext] = []

    def consume_message_before(self, context: ConsumeMessageContext) -> None:
        self.contexts.append(context)


def offset_moved_events(broker) -> list:
    r = broker.message_store.get_message("t", "OFFSET_MOVED_EVENT", 0, 0, 32)
    return r.decode()


# --- pre-checks, in RocketMQ's order ----------------------------------------------------------------------------
def test_broker_not_readable_is_no_permission(tmp_path, client):
    with running_broker(tmp_path, broker_permission=2) as b:
        add_topic(b)
        r = pull(client, b.address)
    assert r.code == ResponseCode.NO_PERMISSION
    assert r.remark == "the broker[127.0.0.1] pulling message is forbidden"
    assert r.ext_fields == {}


def test_missing_subscription_group(tmp_path, client):
    with running_broker(tmp_path, auto_create_subscription_group=False) as b:
        add_topic(b)
        r = pull(client, b.address, group="nobody")
    assert r.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert r.remark == "subscription group [nobody] does not exist, " + FAQ


def test_group_consume_disabled_is_no_permission(broker, client):
    create_subscription_group(broker.address, SubscriptionGroupConfig(GROUP, consume_enable=False))
    r = pull(client, broker.address)
    assert r.code == ResponseCode.NO_PERMISSION
    assert r.remark == f"subscription group no permission, {GROUP}"


def test_topic_not_exist(broker, client):
    r = pull(client, broker.address, "NoSuchTopic")
    assert r.code == ResponseCode.TOPIC_NOT_EXIST
    assert r.remark == "topic[NoSuchTopic] not exist, apply first please! " + FAQ


def test_topic_not_readable_is_no_permission(broker, client):
    create_topic(broker.address, "WriteOnly", perm=2)
    r = pull(client, broker.address, "WriteOnly")
    assert r.code == ResponseCode.NO_PERMISSION
    assert r.remark == "the topic[WriteOnly] pulling message is forbidden"


@pytest.mark.parametrize("queue_id", [4, 99, -1])
def test_queue_id_out_of_range_is_system_error(broker, client, queue_id):
    r = pull(client, broker.address, queue_id=queue_id)
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert r.remark.startswith(
        f"queueId[{queue_id}] is illegal, topic:[{TOPIC}] topicConfig.readQueueNums:[4] consumer:[/127.0.0.1:"
    )


def test_missing_required_header_field_is_system_error(broker, client):
    req = RemotingCommand.request(RequestCode.PULL_MESSAGE, {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0})
    r = client.invoke_sync(broker.address, req)
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert "queueOffset" in r.remark


# --- the subscription from the request (SUBSCRIPTION flag) ------------------------------------------------------
@pytest.mark.parametrize("expression", ["a >", "", "a = 'x' AND"])
def test_bad_sql92_in_request_is_subscription_parse_failed(broker, client, expression):
    r = pull(client, broker.address, subscription=expression, expression_type="SQL92")
    assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert r.remark == "parse the consumer's subscription failed"


def test_unknown_expression_type_is_subscription_parse_failed(broker, client):
    r = pull(client, broker.address, subscription="a > 1", expression_type="CLASS")
    assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


def test_sql92_without_enable_property_filter_is_system_error(broker, client):
    r = pull(client, broker.address, subscription="a > 1", expression_type="SQL92")
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert r.remark == "The broker does not support consumer to filter message by SQL92"


# --- the subscription from the heartbeat (no SUBSCRIPTION flag) -------------------------------------------------
def test_no_consumer_group_info_is_subscription_not_exist(broker, client):
    r = pull(client, broker.address, flags=0)
    assert r.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    assert r.remark == "the consumer's group info not exist" + FAQ


def test_broadcast_forbidden_is_no_permission(broker, client):
    create_subscription_group(broker.address, SubscriptionGroupConfig(GROUP, consume_broadcast_enable=False))
    heartbeat(client, broker.address, message_model="BROADCASTING")
    r = pull(client, broker.address, flags=0)
    assert r.code == ResponseCode.NO_PERMISSION
    assert r.remark == f"the consumer group[{GROUP}] can not consume by broadcast way"


def test_broadcast_allowed_by_default(broker, client):
    heartbeat(client, broker.address, message_model="BROADCASTING")
    r = pull(client, broker.address, flags=0)
    assert r.code == ResponseCode.PULL_NOT_FOUND


def test_topic_not_subscribed_is_subscription_not_exist(broker, client):
    create_topic(broker.address, "Other")
    heartbeat(client, broker.address, subscriptions=[subscription_json("Other")])
    r = pull(client, broker.address, flags=0)
    assert r.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    assert r.remark == "the consumer's subscription not exist" + FAQ


def test_older_broker_subscription_is_subscription_not_latest(broker, client):
    heartbeat(client, broker.address, subscriptions=[subscription_json(TOPIC, sub_version=1000)])
    r = pull(client, broker.address, flags=0, sub_version=1001)
    assert r.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
    assert r.remark == "the consumer's subscription not latest"
    assert pull(client, broker.address, flags=0, sub_version=1000).code == ResponseCode.PULL_NOT_FOUND


def test_sql92_subscription_without_filter_data_is_filter_data_not_exist(tmp_path, client):
    with running_broker(tmp_path, enable_property_filter=True) as b:
        add_topic(b)
        # an expression that does not compile is kept as the subscription but registers no filter data
        heartbeat(client, b.address, subscriptions=[subscription_json(TOPIC, "a >", "SQL92")])
        r = pull(client, b.address, flags=0)
    assert r.code == ResponseCode.FILTER_DATA_NOT_EXIST
    assert r.remark == "The broker's consumer filter data is not exist!Your expression may be wrong!"


def test_older_filter_data_is_filter_data_not_latest(tmp_path, client):
    with running_broker(tmp_path, enable_property_filter=True) as b:
        add_topic(b)
        heartbeat(client, b.address, subscriptions=[subscription_json(TOPIC, "a > 1", "SQL92", sub_version=2000)])
        data = on_loop(b, b.controller.consumer_filter_manager.get, TOPIC, GROUP)
        assert data is not None and data.client_version == 2000
        assert pull(client, b.address, flags=0, sub_version=2000).code == ResponseCode.PULL_NOT_FOUND

        def lag() -> None:
            data.client_version = 1500

        on_loop(b, lag)
        r = pull(client, b.address, flags=0, sub_version=1600)
    assert r.code == ResponseCode.FILTER_DATA_NOT_LATEST
    assert r.remark == "the consumer's consumer filter data not latest"


def test_sql92_heartbeat_subscription_filters_by_properties(tmp_path, client):
    with running_broker(tmp_path, enable_property_filter=True) as b:
        add_topic(b)
        heartbeat(client, b.address, subscriptions=[subscription_json(TOPIC, "a > 5", "SQL92")])
        for a in (1, 7, 3, 9):
            put(b, body=b"a=%d" % a, properties={"a": str(a)})
        r = pull(client, b.address, flags=0)
    assert r.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_messages(r.body)] == [b"a=7", b"a=9"]
    assert r.ext_fields["nextBeginOffset"] == "4"


def _lite(request: RemotingCommand) -> RemotingCommand:
    request.code = RequestCode.LITE_PULL_MESSAGE
    return request


def test_lite_pull_message_is_a_pull(broker, client):
    """LITE_PULL_MESSAGE (361, 5.x clients' lite pull consumer): the same processing and answer as PULL_MESSAGE."""
    for i in range(3):
        put(broker, body=b"m%d" % i)
    flags = sys_flag.FLAG_SUBSCRIPTION | sys_flag.FLAG_LITE_PULL_MESSAGE
    lite = client.invoke_sync(broker.address, _lite(pull_request(offset=1, flags=flags)), timeout=3.0)
    plain = pull(client, broker.address, offset=1, flags=flags)
    assert lite.code == plain.code == ResponseCode.SUCCESS
    assert lite.body == plain.body and lite.ext_fields == plain.ext_fields
    assert [m.body for m in decode_messages(lite.body)] == [b"m1", b"m2"]


def test_lite_pull_disabled_is_no_permission(tmp_path, client):
    with running_broker(tmp_path, lite_pull_message_enable=False) as b:
        add_topic(b)
        r = client.invoke_sync(b.address, _lite(pull_request()), timeout=3.0)
        assert pull(client, b.address).code == ResponseCode.PULL_NOT_FOUND  # PULL_MESSAGE is not affected
    assert r.code == ResponseCode.NO_PERMISSION
    assert r.remark == "the broker[127.0.0.1] for lite pull consumer is forbidden"


# --- status → response code table -------------------------------------------------------------------------------
def test_found_is_success_with_the_store_records_byte_for_byte(broker, client):
    for i in range(5):
        put(broker, body=b"m%d" % i, tags="TagA" if i % 2 else "TagB", properties={"k": str(i)})
    expected = broker.message_store.get_message(GROUP, TOPIC, 0, 1, 3)
    r = pull(client, broker.address, offset=1, max_nums=3)
    assert r.code == ResponseCode.SUCCESS and r.remark == "FOUND"
    assert r.body == expected.body
    assert [m.body for m in decode_messages(r.body)] == [b"m1", b"m2", b"m3"]
    assert r.ext_fields == {"suggestWhichBrokerId": "0", "nextBeginOffset": "4", "minOffset": "0", "maxOffset": "5"}


def test_tag_subscription_in_request_filters_on_the_consume_queue(broker, client):
    for i, tag in enumerate(["TagA", "TagB", "TagC", "TagA"]):
        put(broker, body=b"m%d" % i, tags=tag)
    r = pull(client, broker.address, subscription="TagA || TagC")
    assert r.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_messages(r.body)] == [b"m0", b"m2", b"m3"]


def test_tag_subscription_from_heartbeat(broker, client):
    heartbeat(client, broker.address, subscriptions=[subscription_json(TOPIC, "TagB")])
    for i, tag in enumerate(["TagA", "TagB", "TagC"]):
        put(broker, body=b"m%d" % i, tags=tag)
    r = pull(client, broker.address, flags=0, subscription=None, expression_type=None)
    assert r.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_messages(r.body)] == [b"m1"]


def test_no_matched_message_is_pull_retry_immediately(broker, client):
    put(broker, tags="TagA")
    put(broker, tags="TagA")
    r = pull(client, broker.address, subscription="TagZ")
    assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY and r.remark == "NO_MATCHED_MESSAGE"
    assert r.ext_fields["nextBeginOffset"] == "2" and r.body is None


# rmq_core's store answers NO_MATCHED_LOGIC_QUEUE for a queue never written (RocketMQ's findConsumeQueue creates it
# and answers NO_MESSAGE_IN_QUEUE); the processor maps both statuses alike.
def test_empty_queue_at_offset_zero_is_pull_not_found(broker, client):
    r = pull(client, broker.address)
    assert r.code == ResponseCode.PULL_NOT_FOUND and r.remark in ("NO_MATCHED_LOGIC_QUEUE", "NO_MESSAGE_IN_QUEUE")
    assert r.ext_fields == {"suggestWhichBrokerId": "0", "nextBeginOffset": "0", "minOffset": "0", "maxOffset": "0"}


def test_empty_queue_at_nonzero_offset_is_offset_moved_with_an_event(broker, client):
    r = pull(client, broker.address, queue_id=2, offset=7)
    assert r.code == ResponseCode.PULL_OFFSET_MOVED and r.remark in ("NO_MATCHED_LOGIC_QUEUE", "NO_MESSAGE_IN_QUEUE")
    assert r.ext_fields["nextBeginOffset"] == "0"
    [event] = offset_moved_events(broker)
    assert event.topic == "OFFSET_MOVED_EVENT" and event.queue_id == 0
    assert event.tags == GROUP and event.keys == GROUP and event.properties["DELAY"] == "0"
    assert json.loads(event.body) == {
        "consumerGroup": GROUP,
        "messageQueue": {"brokerName": "broker-a", "queueId": 2, "topic": TOPIC},
        "offsetNew": 0,
        "offsetRequest": 7,
    }
    # fastjson's field order
    assert event.body.startswith(b'{"consumerGroup":"pull_group","messageQueue":{"brokerName":"broker-a"')


def test_offset_overflow_one_is_pull_not_found(broker, client):
    put(broker)
    put(broker)
    r = pull(client, broker.address, offset=2)
    assert r.code == ResponseCode.PULL_NOT_FOUND and r.remark == "OFFSET_OVERFLOW_ONE"
    assert r.ext_fields["nextBeginOffset"] == "2" and r.ext_fields["maxOffset"] == "2"
    assert offset_moved_events(broker) == []


def test_offset_overflow_badly_is_offset_moved(broker, client):
    put(broker)
    r = pull(client, broker.address, offset=10)
    assert r.code == ResponseCode.PULL_OFFSET_MOVED and r.remark == "OFFSET_OVERFLOW_BADLY"
    assert r.ext_fields["nextBeginOffset"] == "0"  # 4.9: min offset 0 → corrected to the min, else to the max
    [event] = offset_moved_events(broker)
    assert json.loads(event.body)["offsetRequest"] == 10 and json.loads(event.body)["offsetNew"] == 0


def test_offset_too_small_is_offset_moved(broker, client):
    put(broker)
    r = pull(client, broker.address, offset=-3)
    assert r.code == ResponseCode.PULL_OFFSET_MOVED and r.remark == "OFFSET_TOO_SMALL"
    assert r.ext_fields["nextBeginOffset"] == "0"
    assert len(offset_moved_events(broker)) == 1


def _removed_head(tmp_path):
    """A broker with 4 KiB CommitLog files whose first two files were deleted (the ConsumeQueue still points there)."""
    ctx = running_broker(tmp_path, mapped_file_size_commit_log=4096, mapped_file_size_consume_queue=80)
    b = ctx.__enter__()
    add_topic(b)
    for _ in range(40):
        put(b, body=b"x" * 200)
    assert b.message_store.delete_commit_log_files_before(8192) == 2
    return ctx, b


def test_message_was_removing_is_pull_retry_immediately(tmp_path, client):
    ctx, b = _removed_head(tmp_path)
    try:
        r = pull(client, b.address, offset=0)
    finally:
        ctx.__exit__(None, None, None)
    assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY and r.remark == "MESSAGE_WAS_REMOVING"
    assert int(r.ext_fields["nextBeginOffset"]) > 0 and r.body is None


def test_offset_below_a_corrected_min_is_offset_too_small(tmp_path, client):
    ctx, b = _removed_head(tmp_path)
    try:
        b.message_store.correct_min_offsets()
        min_offset = b.message_store.get_min_offset_in_queue(TOPIC, 0)
        assert min_offset > 0
        r = pull(client, b.address, offset=1)
        [event] = offset_moved_events(b)
    finally:
        ctx.__exit__(None, None, None)
    assert r.code == ResponseCode.PULL_OFFSET_MOVED and r.remark == "OFFSET_TOO_SMALL"
    assert r.ext_fields["nextBeginOffset"] == str(min_offset) == r.ext_fields["minOffset"]
    assert json.loads(event.body)["offsetNew"] == min_offset


def test_offset_found_null_is_pull_not_found_with_the_next_file_as_next_begin_offset(tmp_path, client):
    """A ConsumeQueue file missing between two present ones (the store answers OFFSET_FOUND_NULL with
    ``rollNextFile``): 4.9 maps it to PULL_NOT_FOUND, no offset-moved event, and the client resumes at the next
    file's first unit, where the messages are."""
    cfg = {"mapped_file_size_consume_queue": 20 * 100}  # 100 units per ConsumeQueue file
    with running_broker(tmp_path, **cfg) as b:
        add_topic(b, queues=1)
        for i in range(250):
            put(b, body=b"m%d" % i)
    os.remove(os.path.join(str(tmp_path / "broker"), "consumequeue", TOPIC, "0", f"{2000:020d}"))  # units 100..199
    with running_broker(tmp_path, **cfg) as b:
        r = pull(client, b.address, offset=150)
        assert r.code == ResponseCode.PULL_NOT_FOUND and r.remark == "OFFSET_FOUND_NULL", (r.code, r.remark)
        assert r.ext_fields["nextBeginOffset"] == "200" and r.body is None
        assert offset_moved_events(b) == []
        r = pull(client, b.address, offset=200)
        assert r.code == ResponseCode.SUCCESS
        assert [m.body for m in decode_messages(r.body)] == [b"m%d" % i for i in range(200, 232)]


# --- filters on retry topics ------------------------------------------------------------------------------------
def _retry_setup(client, b):
    retry = f"%RETRY%{GROUP}"
    add_topic(b, retry, queues=1)
    heartbeat(client, b.address, subscriptions=[subscription_json(TOPIC, "a > 5", "SQL92"), subscription_json(retry)])
    for a in (1, 7):
        put(b, retry, body=b"a=%d" % a, properties={"a": str(a), "RETRY_TOPIC": TOPIC})
    return retry


def test_filter_support_retry_applies_the_real_topic_filter(tmp_path, client):
    with running_broker(tmp_path, enable_property_filter=True, filter_support_retry=True) as b:
        add_topic(b)
        retry = _retry_setup(client, b)
        r = pull(client, b.address, retry, flags=0)
    assert r.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_messages(r.body)] == [b"a=7"]


def test_without_filter_support_retry_the_retry_topic_is_not_filtered(tmp_path, client):
    with running_broker(tmp_path, enable_property_filter=True) as b:
        add_topic(b)
        retry = _retry_setup(client, b)
        r = pull(client, b.address, retry, flags=0)
    assert r.code == ResponseCode.SUCCESS
    assert [m.body for m in decode_messages(r.body)] == [b"a=1", b"a=7"]


# --- suggestWhichBrokerId and slaves ----------------------------------------------------------------------------
def test_slave_read_enable_suggests_the_group_broker_id(tmp_path, client):
    with running_broker(tmp_path, slave_read_enable=True) as b:
        add_topic(b)
        create_subscription_group(b.address, SubscriptionGroupConfig(GROUP, broker_id=3))
        put(b)
        r = pull(client, b.address)
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["suggestWhichBrokerId"] == "3"


def test_slave_without_slave_read_answers_by_status_and_suggests_master(tmp_path, client):
    """4.9 sets PULL_RETRY_IMMEDIATELY for such a slave, then its status table overwrites the code."""
    with running_broker(tmp_path, broker_role="SLAVE") as b:
        add_topic(b)
        put(b)
        r = pull(client, b.address, flags=SUB | sys_flag.FLAG_COMMIT_OFFSET, commit_offset=1)
        not_found = pull(client, b.address, offset=1)
        assert stored_offset(b) == -1  # a slave never stores the client's offset
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["suggestWhichBrokerId"] == "0"
    assert not_found.code == ResponseCode.PULL_NOT_FOUND


def test_offset_moved_on_slave_is_retry_immediately_with_group_broker_id(tmp_path, client):
    with running_broker(tmp_path, broker_role="SLAVE") as b:
        add_topic(b)
        on_loop(
            b,
            b.controller.subscription_group_manager.update_subscription_group_config,
            SubscriptionGroupConfig(GROUP, broker_id=2),
        )
        put(b)
        r = pull(client, b.address, offset=10)
        events = offset_moved_events(b)
    assert r.code == ResponseCode.PULL_RETRY_IMMEDIATELY and r.remark == "OFFSET_OVERFLOW_BADLY"
    assert r.ext_fields["suggestWhichBrokerId"] == "2"
    assert events == []


def test_offset_moved_on_slave_with_offset_check_in_slave(tmp_path, client):
    with running_broker(tmp_path, broker_role="SLAVE", offset_check_in_slave=True) as b:
        add_topic(b)
        put(b)
        r = pull(client, b.address, offset=10)
        events = offset_moved_events(b)
    assert r.code == ResponseCode.PULL_OFFSET_MOVED
    assert len(events) == 1


# --- hooks and statistics ---------------------------------------------------------------------------------------
def test_consume_message_hook_context_per_response_code(broker, client):
    rec = Recorder()
    on_loop(broker, broker.controller.pull_message_processor.register_consume_message_hook, rec)
    put(broker, body=b"x" * 100, tags="TagA")
    put(broker, body=b"y" * 70000, tags="TagA")
    owner = {"Owner": "alice"}
    assert pull(client, broker.address, ext=owner).code == ResponseCode.SUCCESS
    assert pull(client, broker.address, offset=2, ext=owner).code == ResponseCode.PULL_NOT_FOUND
    assert pull(client, broker.address, subscription="TagZ", ext=owner).code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert pull(client, broker.address, offset=9, ext=owner).code == ResponseCode.PULL_OFFSET_MOVED
    assert pull(client, broker.address, "NoSuchTopic").code == ResponseCode.TOPIC_NOT_EXIST  # no hook before get
    success, not_found, retry, moved = rec.contexts
    for c in rec.contexts:
        assert (c.consumer_group, c.topic, c.queue_id) == (GROUP, TOPIC, 0)
    assert success.commercial_rcv_stats == StatsType.RCV_SUCCESS
    assert success.commercial_rcv_times == 1 + 2  # ceil(size / 64 KiB) per message
    assert success.commercial_rcv_size > 70100 and success.commercial_owner == "alice"
    # first pass PULL_NOT_FOUND: nothing commercial is recorded
    assert not_found.commercial_rcv_stats is None and not_found.commercial_owner is None
    for c in (retry, moved):
        assert c.commercial_rcv_stats == StatsType.RCV_EPOLLS and c.commercial_rcv_times == 1
        assert c.commercial_owner == "alice"


def test_a_failing_hook_does_not_fail_the_pull(broker, client):
    class Bad:
        def consume_message_before(self, context):
            raise RuntimeError("hook exploded")

    on_loop(broker, broker.controller.broker_stats_manager.register_consume_message_hook, Bad())
    put(broker)
    assert pull(client, broker.address).code == ResponseCode.SUCCESS


def test_pull_statistics_count_successful_pulls_only(broker, client):
    for _ in range(3):
        put(broker, body=b"0123456789")
    r = pull(client, broker.address, max_nums=2)
    r2 = pull(client, broker.address, offset=2)
    pull(client, broker.address, offset=3)  # PULL_NOT_FOUND: not counted
    size = len(r.body) + len(r2.body)
    snap = on_loop(broker, broker.controller.broker_stats_manager.snapshot)
    key = f"{TOPIC}@{GROUP}"
    assert snap["GROUP_GET_NUMS"][key] == {"value": 3, "times": 2}
    assert snap["GROUP_GET_SIZE"][key] == {"value": size, "times": 2}
    assert snap["BROKER_GET_NUMS"]["DefaultCluster"]["value"] == 3
    assert snap["GROUP_GET_LATENCY"][f"0@{TOPIC}@{GROUP}"]["times"] == 2
    assert f"0@{TOPIC}@{GROUP}" in snap["GROUP_GET_FALL_TIME"]


# --- commit offset ----------------------------------------------------------------------------------------------
def test_commit_offset_flag_stores_the_client_offset(broker, client):
    put(broker)
    pull(client, broker.address, flags=ALL_FLAGS & ~sys_flag.FLAG_SUSPEND, commit_offset=42)
    assert stored_offset(broker) == 42


def test_without_commit_offset_flag_nothing_is_stored(broker, client):
    put(broker)
    pull(client, broker.address, flags=SUB, commit_offset=42)
    assert stored_offset(broker) == -1


def test_commit_offset_is_stored_even_when_the_pull_fails_after_the_subscription(broker, client):
    """As in 4.9, the commit happens after the status table whatever the code (here PULL_OFFSET_MOVED)."""
    pull(client, broker.address, offset=5, flags=SUB | sys_flag.FLAG_COMMIT_OFFSET, commit_offset=3)
    assert stored_offset(broker) == 3


def test_commit_offset_not_stored_when_an_early_check_fails(broker, client):
    pull(client, broker.address, "NoSuchTopic", flags=SUB | sys_flag.FLAG_COMMIT_OFFSET, commit_offset=3)
    assert stored_offset(broker, topic="NoSuchTopic") == -1


# --- branches of the seeds' PullMessageProcessor / DefaultMessageStore#getMessage not covered above ------------------
def test_store_not_readable_is_system_error_store_get_message_return_null(broker, client):
    """4.9 getMessage returns null while the store's running flags say NOT_READABLE; the processor answers
    SYSTEM_ERROR "store getMessage return null" with no header, and still commits the client's offset (the commit
    follows the status handling whatever the answer)."""
    put(broker)
    flags = broker.message_store.running_flags
    assert flags.get_and_make_not_readable() is True
    try:
        r = pull(client, broker.address, flags=SUB | sys_flag.FLAG_COMMIT_OFFSET, commit_offset=7)
    finally:
        assert flags.get_and_make_readable() is False
    assert r.code == ResponseCode.SYSTEM_ERROR and r.remark == "store getMessage return null"
    assert "nextBeginOffset" not in r.ext_fields and r.body is None
    assert stored_offset(broker) == 7
    assert pull(client, broker.address).code == ResponseCode.SUCCESS  # readable again: served


def _slow_group(b) -> None:
    config = SubscriptionGroupConfig(GROUP, broker_id=3, which_broker_when_consume_slowly=5)
    on_loop(b, b.controller.subscription_group_manager.update_subscription_group_config, config)


def test_consuming_slowly_with_slave_read_enable_suggests_which_broker_when_consume_slowly(tmp_path, client):
    """suggestPullingFromSlave (the unread CommitLog behind the pulled unit exceeds the in-memory share; with
    access_message_in_memory_max_ratio=0 any byte does) + slaveReadEnable → whichBrokerWhenConsumeSlowly, not the
    group's brokerId."""
    with running_broker(tmp_path, slave_read_enable=True, access_message_in_memory_max_ratio=0) as b:
        add_topic(b)
        _slow_group(b)
        put(b)
        put(b)
        behind = pull(client, b.address, max_nums=1)
        with_slow = b.message_store.get_message(GROUP, TOPIC, 0, 0, 1)
    assert with_slow.suggest_pulling_from_slave is True
    assert behind.code == ResponseCode.SUCCESS and behind.ext_fields["suggestWhichBrokerId"] == "5"


def test_consuming_slowly_without_slave_read_enable_suggests_the_master(tmp_path, client):
    """Without slaveReadEnable 4.9 overwrites the consume-slowly suggestion with MASTER_ID."""
    with running_broker(tmp_path, access_message_in_memory_max_ratio=0) as b:
        add_topic(b)
        _slow_group(b)
        put(b)
        put(b)
        r = pull(client, b.address, max_nums=1)
        assert b.message_store.get_message(GROUP, TOPIC, 0, 0, 1).suggest_pulling_from_slave is True
    assert r.code == ResponseCode.SUCCESS and r.ext_fields["suggestWhichBrokerId"] == "0"


def test_consume_message_hook_on_the_wake_pass_of_a_parked_pull_counts_an_epoll(broker, client):
    """PULL_NOT_FOUND: the first pass (brokerAllowSuspend) records nothing commercial and parks the pull; the pass
    run when it expires (brokerAllowSuspend=false) records RCV_EPOLLS × 1 with the request's owner."""
    rec = Recorder()
    on_loop(broker, broker.controller.pull_message_processor.register_consume_message_hook, rec)
    r = pull(client, broker.address, flags=SUB | sys_flag.FLAG_SUSPEND, suspend_ms=300, ext={"Owner": "bob"})
    assert r.code == ResponseCode.PULL_NOT_FOUND
    first, wake = rec.contexts
    assert first.commercial_rcv_stats is None and first.commercial_owner is None
    assert wake.commercial_rcv_stats == StatsType.RCV_EPOLLS and wake.commercial_rcv_times == 1
    assert wake.commercial_owner == "bob"
