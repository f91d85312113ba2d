"""CONSUMER_SEND_MSG_BACK (36) against a real broker over TCP: the retry path through the delay levels (reconsume
times growing, RETRY_TOPIC, ORIGIN_MESSAGE_ID, UNIQ_KEY and body kept), the DLQ after the maximum or with
delayLevel < 0, maxReconsumeTimes from the header only for clients ≥ V3_4_9, and the refusals (unknown group, bad
offset, retryQueueNums 0)."""

from __future__ import annotations

import zlib

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.message import decode_offset_msg_id
from rmq_core.message_encoding import properties_to_string
from rmq_core.remoting.codes import ResponseCode

from support.send_helpers import (
    SMALL_FILES,
    invoke,
    max_offset,
    on_loop,
    send_back_request,
    send_request,
    stored,
    wait_until,
)

SCHEDULE = "SCHEDULE_TOPIC_XXXX"


def _broker(tmp_path, **kw) -> Broker:
    kw.setdefault("message_delay_level", "1s 2s 3s")
    kw.update(SMALL_FILES)
    return Broker(BrokerConfig(listen_port=0, store_path_root_dir=str(tmp_path / "store"), **kw))


@pytest.fixture
def broker(tmp_path):
    with _broker(tmp_path) as b:
        yield b


def _send(client, broker, topic="OrigTopic", body=b"payload", **kw) -> int:
    """Send one message; its commitlog offset."""
    props = properties_to_string({"TAGS": "TagX", "KEYS": "key1", "UNIQ_KEY": "UNIQ0001"})
    resp = invoke(client, broker, send_request(topic, body, properties=props, born_timestamp=4242, flag=9, **kw))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return decode_offset_msg_id(resp.ext_fields["msgId"])[1]


def test_retry_through_the_delay_levels_with_reconsume_times_growing(broker, client):
    phy = _send(client, broker)
    [orig] = stored(broker, "OrigTopic")
    resp = invoke(
        client, broker, send_back_request(phy, "G1", delay_level=1, origin_msg_id="UNIQ0001", origin_topic="OrigTopic")
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert resp.remark is None
    [sched] = stored(broker, SCHEDULE, 0)  # level 1 → queue 0
    assert sched.properties["REAL_TOPIC"] == "%RETRY%G1"
    assert sched.reconsume_times == 1
    retry_cfg = broker.controller.topic_config_manager.select_topic_config("%RETRY%G1")
    assert (retry_cfg.read_queue_nums, retry_cfg.perm) == (1, 6)

    [r1] = wait_until(lambda: stored(broker, "%RETRY%G1"))
    assert (r1.body, r1.flag, r1.born_timestamp, r1.born_host, r1.reconsume_times) == (
        b"payload",
        9,
        4242,
        orig.born_host,
        1,
    )
    assert r1.properties["RETRY_TOPIC"] == "OrigTopic"
    assert r1.properties["ORIGIN_MESSAGE_ID"] == orig.msg_id  # the original's offset msg id
    assert r1.properties["UNIQ_KEY"] == "UNIQ0001"
    assert (r1.tags, r1.keys) == ("TagX", "key1")
    assert "DELAY" not in r1.properties

    # the retry message fails again: reconsume 2, origin and retry topic unchanged
    resp = invoke(client, broker, send_back_request(r1.commitlog_offset, "G1", delay_level=1))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    r2 = wait_until(lambda: stored(broker, "%RETRY%G1", 0, 1))[0]
    assert r2.reconsume_times == 2
    assert r2.properties["RETRY_TOPIC"] == "OrigTopic"
    assert r2.properties["ORIGIN_MESSAGE_ID"] == orig.msg_id
    assert r2.properties["UNIQ_KEY"] == "UNIQ0001"


def test_delay_level_zero_means_three_plus_reconsume_times(broker, client):
    phy = _send(client, broker)
    assert invoke(client, broker, send_back_request(phy, "G0", delay_level=0)).code == ResponseCode.SUCCESS
    [s] = stored(broker, SCHEDULE, 2)  # level 3 + 0 → queue 2
    assert s.properties["DELAY"] == "3"
    # sending back the scheduled copy (reconsume 1): level 3 + 1 = 4, clamped to the highest level (3 of "1s 2s 3s")
    assert invoke(client, broker, send_back_request(s.commitlog_offset, "G0", delay_level=0)).code == 0
    s2 = stored(broker, SCHEDULE, 2)[1]
    assert (s2.properties["DELAY"], s2.reconsume_times) == ("3", 2)


def test_dlq_after_max_reconsume_times(broker, client):
    phy = _send(client, broker)
    resp = invoke(client, broker, send_back_request(phy, "G2", delay_level=1, max_reconsume_times=1))
    assert resp.code == ResponseCode.SUCCESS
    [sched] = stored(broker, SCHEDULE, 0)
    # reconsume_times of the scheduled copy is 1 ≥ max 1 → straight to the DLQ, no delay
    resp = invoke(client, broker, send_back_request(sched.commitlog_offset, "G2", delay_level=1, max_reconsume_times=1))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    [d] = stored(broker, "%DLQ%G2")
    assert (d.body, d.reconsume_times, d.queue_id) == (b"payload", 2, 0)
    assert d.properties["RETRY_TOPIC"] == "OrigTopic"
    assert "DELAY" not in d.properties
    dlq = broker.controller.topic_config_manager.select_topic_config("%DLQ%G2")
    assert (dlq.read_queue_nums, dlq.write_queue_nums, dlq.perm) == (1, 1, 6)
    assert len(stored(broker, SCHEDULE, 0)) == 1


def test_header_max_reconsume_times_ignored_before_v3_4_9(broker, client):
    phy = _send(client, broker)
    resp = invoke(client, broker, send_back_request(phy, "G3", delay_level=2, max_reconsume_times=0, version=100))
    assert resp.code == ResponseCode.SUCCESS
    assert max_offset(broker, "%DLQ%G3") == 0  # the group's retryMaxTimes (16) applies
    assert len(stored(broker, SCHEDULE, 1)) == 1
    resp = invoke(client, broker, send_back_request(phy, "G3", delay_level=2, max_reconsume_times=0))
    assert resp.code == ResponseCode.SUCCESS
    assert len(stored(broker, "%DLQ%G3")) == 1


def test_group_retry_max_times_applies_without_header(broker, client):
    on_loop(
        broker,
        lambda: broker.controller.subscription_group_manager.update_subscription_group_config(
            SubscriptionGroupConfig("G4", retry_max_times=0)
        ),
    )
    phy = _send(client, broker)
    assert invoke(client, broker, send_back_request(phy, "G4", delay_level=1)).code == ResponseCode.SUCCESS
    assert len(stored(broker, "%DLQ%G4")) == 1


def test_negative_delay_level_goes_to_dlq(broker, client):
    phy = _send(client, broker)
    resp = invoke(client, broker, send_back_request(phy, "G5", delay_level=-1))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    [d] = stored(broker, "%DLQ%G5")
    assert d.reconsume_times == 1
    assert d.properties["ORIGIN_MESSAGE_ID"] == stored(broker, "OrigTopic")[0].msg_id
    assert max_offset(broker, SCHEDULE, 0) == 0


@pytest.mark.parametrize("offset", [10**12, 5, -1])
def test_bad_offset(broker, client, offset):
    _send(client, broker)
    resp = invoke(client, broker, send_back_request(offset, "G6", delay_level=1))
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == f"look message by offset failed, {offset}"
    assert all(max_offset(broker, SCHEDULE, q) == 0 for q in range(3))


def test_unknown_group_when_auto_create_is_off(tmp_path, client):
    with _broker(tmp_path, auto_create_subscription_group=False) as b:
        phy = _send(client, b)
        resp = invoke(client, b, send_back_request(phy, "NoGroup", delay_level=1))
        assert resp.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        assert resp.remark.startswith("subscription group not exist, NoGroup")
        assert max_offset(b, SCHEDULE, 0) == 0


def test_retry_queue_nums_zero_succeeds_doing_nothing(broker, client):
    on_loop(
        broker,
        lambda: broker.controller.subscription_group_manager.update_subscription_group_config(
            SubscriptionGroupConfig("G7", retry_queue_nums=0)
        ),
    )
    phy = _send(client, broker)
    resp = invoke(client, broker, send_back_request(phy, "G7", delay_level=-1))
    assert resp.code == ResponseCode.SUCCESS
    assert max_offset(broker, "%DLQ%G7") == 0
    assert broker.controller.topic_config_manager.select_topic_config("%RETRY%G7") is None


def test_compressed_body_is_sent_back_byte_for_byte(broker, client):
    raw = zlib.compress(b"compress me " * 50)
    phy = _send(client, broker, body=raw, sys_flag=0x1)
    resp = invoke(client, broker, send_back_request(phy, "G8", delay_level=-1))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    [d] = stored(broker, "%DLQ%G8", decompress=False)
    assert d.body == raw and d.sys_flag & 0x1
    [d2] = stored(broker, "%DLQ%G8")
    assert d2.body == b"compress me " * 50


def test_missing_header_field(broker, client):
    req = send_back_request(0, "G9")
    del req.ext_fields["group"]
    resp = invoke(client, broker, req)
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "<group>" in resp.remark
