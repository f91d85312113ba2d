"""InnerPutGuard (broker/inner_put_guard.py), the names rules of ``mix_all`` and the header's long range, without a
broker: a TopicConfigManager on a temporary directory."""

from __future__ import annotations

import pytest

from rmq_core.broker import BrokerConfig
from rmq_core.broker.inner_put_guard import InnerPutGuard
from rmq_core.broker.topic_config_manager import TopicConfigManager
from rmq_core.common import mix_all
from rmq_core.common.perm_name import PERM_READ, PERM_WRITE
from rmq_core.common.topic_config import TopicConfig
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.header import HeaderError, UpdateConsumerOffsetRequestHeader, decode_header


def _guard(tmp_path, **kw) -> InnerPutGuard:
    cfg = BrokerConfig(listen_port=0, store_path_root_dir=str(tmp_path), **kw)
    tcm = TopicConfigManager(cfg, str(tmp_path / "config"))
    tcm.update_topic_config(TopicConfig("Writable", 2, 2))
    tcm.update_topic_config(TopicConfig("ReadOnly", 2, 2, perm=PERM_READ))
    tcm.update_topic_config(TopicConfig("WriteOnly", 1, 1, perm=PERM_WRITE))
    return InnerPutGuard(cfg, tcm)


@pytest.mark.parametrize(
    "topic, queue_id, code, remark",
    [
        ("ReadOnly", 0, ResponseCode.NO_PERMISSION, "the topic[ReadOnly] sending message is forbidden"),
        ("Writable", 2, ResponseCode.SYSTEM_ERROR, "queueId[2] is illegal for topic[Writable]"),
        ("Writable", -1, ResponseCode.SYSTEM_ERROR, "queueId[-1] is illegal for topic[Writable]"),
        ("Bad\n", 0, ResponseCode.SYSTEM_ERROR, None),
        ("x" * 128, 0, ResponseCode.SYSTEM_ERROR, None),
    ]
    + [
        (t, 0, ResponseCode.NO_PERMISSION, f"Sending message to topic[{t}] is forbidden.")
        for t in sorted(mix_all.NOT_ALLOWED_SEND_TOPICS)
    ],
)
def test_refusals(tmp_path, topic, queue_id, code, remark):
    refusal = _guard(tmp_path).refusal(topic, queue_id)
    assert refusal is not None and refusal.code == code
    assert remark is None or refusal.remark == remark


def test_allowed_and_created_as_a_send_would_create(tmp_path):
    g = _guard(tmp_path)
    assert g.refusal("Writable", 1) is None and g.refusal("WriteOnly", 0) is None
    assert g.refusal("%RETRY%G", 0) is None  # a retry topic: created through the send-back method (1 queue, RW)
    assert g.topic_config_manager.select_topic_config("%RETRY%G").perm == PERM_READ | PERM_WRITE
    assert g.refusal("Fresh", 0) is None  # autoCreateTopicEnable: from TBW102
    off = _guard(tmp_path / "off", auto_create_topic_enable=False)
    r = off.refusal("Fresh", 0)
    assert r is not None and r.code == ResponseCode.TOPIC_NOT_EXIST
    assert off.topic_config_manager.select_topic_config("Fresh") is None


def test_names_are_matched_whole_and_fit_a_record():
    for bad in ("T\n", "T\r\n", "\nT", "é", "T T"):
        assert "illegal characters" in (mix_all.validate_topic(bad) or "")
        assert "illegal characters" in (mix_all.validate_group(bad) or "")
    assert mix_all.validate_topic("%RETRY%" + "g" * mix_all.GROUP_MAX_LENGTH) is None  # the longest group's retry topic
    assert "max length: 127" in (mix_all.validate_topic("%DLQ%" + "g" * 123) or "")
    assert "max length: 120" in (mix_all.validate_group("g" * 121) or "")


@pytest.mark.parametrize("value", [str(1 << 63), str(-(1 << 63) - 1), "9" * 40, " " + "9" * 19])
def test_a_header_number_beyond_a_java_long_is_a_bad_header(value):
    ext = {"consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": value}
    with pytest.raises(HeaderError, match="<commitOffset> is out of the range of a long"):
        decode_header(UpdateConsumerOffsetRequestHeader, ext)
    ext["commitOffset"] = str((1 << 63) - 1)
    assert decode_header(UpdateConsumerOffsetRequestHeader, ext).commitOffset == (1 << 63) - 1
    ext["commitOffset"] = "0" * 30 + "7"  # leading zeros: a long, as Long.parseLong reads it
    assert decode_header(UpdateConsumerOffsetRequestHeader, ext).commitOffset == 7


def test_a_java_int_field_is_decoded_within_an_int():
    ext = {"consumerGroup": "G", "topic": "T", "queueId": str((1 << 31) - 1), "commitOffset": "0"}
    assert decode_header(UpdateConsumerOffsetRequestHeader, ext).queueId == (1 << 31) - 1
    for bad in (str(1 << 31), str(-(1 << 31) - 1)):
        ext["queueId"] = bad
        with pytest.raises(HeaderError, match="<queueId> is out of the range of an int"):
            decode_header(UpdateConsumerOffsetRequestHeader, ext)
