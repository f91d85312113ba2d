"""The broker's config files: persist/load round trips for topics.json, subscriptionGroup.json, consumerOffset.json
and consumerFilter.json; the tmp/.bak scheme and the fall-back to ``.bak``; corrupt files raising instead of starting
empty; files written by hand in Apache RocketMQ's exact format (4.9 and 5.x) loading; our files being that format."""

from __future__ import annotations

import json
import os
import threading

import pytest

from rmq_core.broker.broker_config import BrokerConfig
from rmq_core.broker.config_manager import ConfigLoadError
from rmq_core.broker.consumer_filter_manager import (
    ConsumerFilterManager,
    FilterParseError,
)
from rmq_core.broker.consumer_offset_manager import ConsumerOffsetManager
from rmq_core.broker.subscription_group_manager import (
    SYSTEM_GROUPS,
    SubscriptionGroupManager,
)
from rmq_core.broker.topic_config_manager import TopicConfigManager
from rmq_core.common.perm_name import PERM_INHERIT, PERM_READ, PERM_WRITE
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.common.topic_config import TopicConfig
from rmq_core.filter.message_selector import MessageSelector
from rmq_core.filter.subscription_data import build_subscription_data


def _bc(**kw) -> BrokerConfig:
    kw.setdefault("broker_name", "broker-a")
    return BrokerConfig(**kw)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


# ---------------------------------------------------------------- Apache-format fixtures (written by hand) ----

# RocketMQ 4.9 broker: fastjson PrettyFormat (tabs), Map<Integer, Long> keys unquoted.
APACHE_49_CONSUMER_OFFSET = """{
\t"offsetTable":{
\t\t"%RETRY%please_rename_unique_group_name_4@please_rename_unique_group_name_4":{0:0
\t\t},
\t\t"TopicTest@please_rename_unique_group_name_4":{0:250,1:250,2:250,3:250
\t\t},
\t\t"12345@67890":{0:7,15:9
\t\t}
\t}
}"""

# RocketMQ 5.x: dataVersion and the derived groupTopicMap are written too.
APACHE_5_CONSUMER_OFFSET = """{
\t"dataVersion":{
\t\t"counter":12,
\t\t"stateVersion":0,
\t\t"timestamp":1700000000123
\t},
\t"groupTopicMap":{
\t\t"group_a":[
\t\t\t"TopicTest"
\t\t]
\t},
\t"offsetTable":{
\t\t"TopicTest@group_a":{0:10,1:20,2:30,3:40
\t\t}
\t}
}"""

APACHE_49_TOPICS = """{
\t"dataVersion":{
\t\t"counter":3,
\t\t"timestamp":1624456790043
\t},
\t"topicConfigTable":{
\t\t"SCHEDULE_TOPIC_XXXX":{
\t\t\t"order":false,
\t\t\t"perm":6,
\t\t\t"readQueueNums":18,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"SCHEDULE_TOPIC_XXXX",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":18
\t\t},
\t\t"TopicTest":{
\t\t\t"order":false,
\t\t\t"perm":6,
\t\t\t"readQueueNums":4,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"TopicTest",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":4
\t\t},
\t\t"%RETRY%please_rename_unique_group_name_4":{
\t\t\t"order":false,
\t\t\t"perm":6,
\t\t\t"readQueueNums":1,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"%RETRY%please_rename_unique_group_name_4",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":1
\t\t},
\t\t"2024":{
\t\t\t"order":true,
\t\t\t"perm":4,
\t\t\t"readQueueNums":2,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"2024",
\t\t\t"topicSysFlag":1,
\t\t\t"writeQueueNums":2
\t\t}
\t}
}"""

# 5.x adds attributes per topic and stateVersion in dataVersion.
APACHE_5_TOPICS = """{
\t"dataVersion":{
\t\t"counter":7,
\t\t"stateVersion":0,
\t\t"timestamp":1700000000000
\t},
\t"topicConfigTable":{
\t\t"FifoTopic":{
\t\t\t"attributes":{
\t\t\t\t"+message.type":"FIFO"
\t\t\t},
\t\t\t"order":false,
\t\t\t"perm":6,
\t\t\t"readQueueNums":8,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"FifoTopic",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":8
\t\t}
\t}
}"""

APACHE_49_SUBSCRIPTION_GROUP = """{
\t"dataVersion":{
\t\t"counter":2,
\t\t"timestamp":1624456790100
\t},
\t"subscriptionGroupTable":{
\t\t"please_rename_unique_group_name_4":{
\t\t\t"brokerId":0,
\t\t\t"consumeBroadcastEnable":true,
\t\t\t"consumeEnable":true,
\t\t\t"consumeFromMinEnable":true,
\t\t\t"consumeMessageOrderly":false,
\t\t\t"groupName":"please_rename_unique_group_name_4",
\t\t\t"notifyConsumerIdsChangedEnable":true,
\t\t\t"retryMaxTimes":16,
\t\t\t"retryQueueNums":1,
\t\t\t"whichBrokerWhenConsumeSlowly":1
\t\t},
\t\t"slow_group":{
\t\t\t"brokerId":0,
\t\t\t"consumeBroadcastEnable":false,
\t\t\t"consumeEnable":false,
\t\t\t"consumeFromMinEnable":true,
\t\t\t"consumeMessageOrderly":true,
\t\t\t"groupName":"slow_group",
\t\t\t"notifyConsumerIdsChangedEnable":false,
\t\t\t"retryMaxTimes":3,
\t\t\t"retryQueueNums":2,
\t\t\t"whichBrokerWhenConsumeSlowly":1
\t\t}
\t}
}"""

# 5.x: forbiddenTable and extra per-group fields (groupRetryPolicy, groupSysFlag, ...) are present.
APACHE_5_SUBSCRIPTION_GROUP = """{
\t"dataVersion":{
\t\t"counter":4,
\t\t"stateVersion":0,
\t\t"timestamp":1700000000000
\t},
\t"forbiddenTable":{},
\t"subscriptionGroupTable":{
\t\t"g5":{
\t\t\t"attributes":{},
\t\t\t"brokerId":0,
\t\t\t"consumeBroadcastEnable":true,
\t\t\t"consumeEnable":true,
\t\t\t"consumeFromMinEnable":true,
\t\t\t"consumeMessageOrderly":false,
\t\t\t"consumeTimeoutMinute":15,
\t\t\t"groupName":"g5",
\t\t\t"groupRetryPolicy":{
\t\t\t\t"type":"CUSTOMIZED"
\t\t\t},
\t\t\t"groupSysFlag":0,
\t\t\t"notifyConsumerIdsChangedEnable":true,
\t\t\t"retryMaxTimes":5,
\t\t\t"retryQueueNums":1,
\t\t\t"subscriptionDataSet":[],
\t\t\t"whichBrokerWhenConsumeSlowly":1
\t\t}
\t}
}"""

APACHE_CONSUMER_FILTER = """{
\t"filterDataByTopic":{
\t\t"TopicSql":{
\t\t\t"groupFilterData":{
\t\t\t\t"sql_group":{
\t\t\t\t\t"bloomFilterData":{
\t\t\t\t\t\t"bitNum":64,
\t\t\t\t\t\t"bitPos":[1,5,9]
\t\t\t\t\t},
\t\t\t\t\t"bornTime":1700000000000,
\t\t\t\t\t"clientVersion":1699999999000,
\t\t\t\t\t"consumerGroup":"sql_group",
\t\t\t\t\t"dead":false,
\t\t\t\t\t"deadTime":0,
\t\t\t\t\t"expression":"a between 0 and 3",
\t\t\t\t\t"expressionType":"SQL92",
\t\t\t\t\t"topic":"TopicSql"
\t\t\t\t}
\t\t\t},
\t\t\t"topic":"TopicSql"
\t\t}
\t}
}"""


# ------------------------------------------------------------------------------------------- ConfigManager ----


def test_persist_keeps_previous_version_as_bak_and_leaves_no_tmp(tmp_path):
    mgr = ConsumerOffsetManager(str(tmp_path / "config"))
    mgr.commit_offset("h", "g", "T", 0, 1)
    assert mgr.persist()
    path = mgr.config_file_path
    assert path == str(tmp_path / "config" / "consumerOffset.json")
    assert not os.path.exists(path + ".bak")
    first = _read(path)
    mgr.commit_offset("h", "g", "T", 0, 2)
    assert mgr.persist()
    assert _read(path + ".bak") == first
    assert "0:2" in _read(path).replace(" ", "").replace("\n", "").replace("\t", "")
    assert not os.path.exists(path + ".tmp")


def test_stale_tmp_from_a_crash_is_ignored_and_replaced(tmp_path):
    mgr = ConsumerOffsetManager(str(tmp_path))
    _write(mgr.config_file_path + ".tmp", "half a docu")
    assert mgr.load() and mgr.offset_table == {}  # the .tmp is never read
    mgr.commit_offset("h", "g", "T", 0, 4)
    assert mgr.persist()
    assert not os.path.exists(mgr.config_file_path + ".tmp")
    again = ConsumerOffsetManager(str(tmp_path))
    assert again.load() and again.query_offset("g", "T", 0) == 4


def test_persist_from_two_threads_never_leaves_a_torn_file(tmp_path):
    mgr = ConsumerOffsetManager(str(tmp_path))
    for q in range(200):
        mgr.commit_offset("h", "g", "T", q, q * 10)
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for _ in range(20):
                assert mgr.persist()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=writer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for name in (mgr.config_file_path, mgr.config_file_path + ".bak"):
        check = ConsumerOffsetManager(str(tmp_path))
        check.decode(_read(name))
        assert check.offset_table == mgr.offset_table


def test_load_without_any_file_is_a_first_boot(tmp_path):
    mgr = ConsumerOffsetManager(str(tmp_path))
    assert mgr.load() is True
    assert mgr.offset_table == {}


def test_load_falls_back_to_bak_when_file_missing_or_empty(tmp_path):
    mgr = ConsumerOffsetManager(str(tmp_path))
    mgr.commit_offset("h", "g", "T", 3, 33)
    mgr.persist()
    os.replace(mgr.config_file_path, mgr.config_file_path + ".bak")  # crash between the two renames
    again = ConsumerOffsetManager(str(tmp_path))
    assert again.load()
    assert again.query_offset("g", "T", 3) == 33
    _write(mgr.config_file_path, "")  # empty file: RocketMQ treats it as missing
    third = ConsumerOffsetManager(str(tmp_path))
    assert third.load()
    assert third.query_offset("g", "T", 3) == 33


def test_corrupt_file_recovers_from_bak_and_is_kept_aside(tmp_path):
    mgr = ConsumerOffsetManager(str(tmp_path))
    mgr.commit_offset("h", "g", "T", 0, 10)
    mgr.persist()
    mgr.commit_offset("h", "g", "T", 0, 11)
    mgr.persist()  # .bak holds 10, file holds 11
    _write(mgr.config_file_path, '{"offsetTable":{"T@g":{0:')  # torn write
    again = ConsumerOffsetManager(str(tmp_path))
    assert again.load()
    assert again.query_offset("g", "T", 0) == 10
    aside = [n for n in os.listdir(tmp_path) if n.startswith("consumerOffset.json.corrupt.")]
    assert len(aside) == 1
    assert _read(str(tmp_path / aside[0])) == '{"offsetTable":{"T@g":{0:'
    # the next persist must not overwrite the good .bak with the corrupt file
    again.persist()
    bak = ConsumerOffsetManager(str(tmp_path))
    bak.decode(_read(mgr.config_file_path + ".bak"))
    assert bak.query_offset("g", "T", 0) == 10


def test_corrupt_file_without_bak_raises_naming_the_file(tmp_path):
    mgr = ConsumerOffsetManager(str(tmp_path))
    _write(mgr.config_file_path, "this is not json")
    with pytest.raises(ConfigLoadError, match=r"consumerOffset\.json"):
        mgr.load()
    assert mgr.offset_table == {}
    assert _read(mgr.config_file_path) == "this is not json"  # nothing deleted


def test_corrupt_file_and_corrupt_bak_raise(tmp_path):
    mgr = TopicConfigManager(_bc(), str(tmp_path))
    _write(mgr.config_file_path, "{broken")
    _write(mgr.config_file_path + ".bak", '{"topicConfigTable": []}')
    with pytest.raises(ConfigLoadError, match=r"topics\.json\.bak"):
        mgr.load()


def test_missing_file_and_corrupt_bak_raise(tmp_path):
    mgr = SubscriptionGroupManager(_bc(), str(tmp_path))
    _write(mgr.config_file_path + ".bak", "garbage")
    with pytest.raises(ConfigLoadError, match="missing or empty"):
        mgr.load()


def test_failed_decode_leaves_state_untouched(tmp_path):
    mgr = ConsumerOffsetManager(str(tmp_path))
    mgr.commit_offset("h", "g", "T", 0, 5)
    with pytest.raises(ValueError):
        mgr.decode('{"offsetTable":{"T@g":{0:5,"x":6}}}')
    with pytest.raises(ValueError):
        mgr.decode('{"offsetTable":{"T@g":{0:"five"}}}')
    with pytest.raises(ValueError):
        mgr.decode("[1,2]")
    assert mgr.offset_table == {"T@g": {0: 5}}


def test_persist_failure_is_reported_and_keeps_state(tmp_path):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    mgr = ConsumerOffsetManager(str(blocker))  # config dir path is a file
    mgr.commit_offset("h", "g", "T", 0, 1)
    assert mgr.persist() is False
    assert mgr.query_offset("g", "T", 0) == 1


# ------------------------------------------------------------------------------------ ConsumerOffsetManager ----


def test_offsets_commit_query_and_groups(tmp_path):
    mgr = ConsumerOffsetManager(str(tmp_path))
    assert mgr.query_offset("g", "T", 0) == -1
    mgr.commit_offset("1.2.3.4:5", "g", "T", 0, 100)
    mgr.commit_offset("1.2.3.4:5", "g", "T", 1, 200)
    mgr.commit_offset("1.2.3.4:5", "g", "U", 0, 7)
    mgr.commit_offset("1.2.3.4:5", "h", "T", 0, 1)
    mgr.commit_offset("1.2.3.4:5", "g", "T", 0, 50)  # a smaller offset is stored too (only logged)
    assert mgr.query_offset("g", "T", 0) == 50
    assert mgr.query_offset("g", "T", 2) == -1
    assert mgr.which_topic_by_consumer("g") == {"T", "U"}
    assert mgr.which_group_by_topic("T") == {"g", "h"}
    assert mgr.remove_offset("g") == ["T@g", "U@g"]
    assert mgr.which_topic_by_consumer("g") == set()
    assert mgr.query_offset("h", "T", 0) == 1
    mgr.clean_offset_by_topic("T")
    assert mgr.offset_table == {}


def test_offsets_written_as_rocketmq_49_writes_them(tmp_path):
    mgr = ConsumerOffsetManager(str(tmp_path))
    mgr.commit_offset("h", "group_a", "TopicTest", 0, 5280)
    mgr.commit_offset("h", "group_a", "TopicTest", 1, 5312)
    mgr.persist()
    mgr.commit_offset("h", "group_a", "%RETRY%group_a", 0, 3)
    mgr.persist()
    text = _read(mgr.config_file_path)
    # fastjson PrettyFormat, byte for byte: tabs, and no line breaks inside an Integer-keyed map
    assert text == (
        '{\n\t"offsetTable":{\n\t\t"TopicTest@group_a":{0:5280,1:5312\n\t\t},'
        '\n\t\t"%RETRY%group_a@group_a":{0:3\n\t\t}\n\t}\n}'
    )
    assert mgr.encode(False) == '{"offsetTable":{"TopicTest@group_a":{0:5280,1:5312},"%RETRY%group_a@group_a":{0:3}}}'
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)  # not standard JSON: the queue ids are bare integers, as in RocketMQ


def test_load_apache_49_consumer_offset_file(tmp_path):
    mgr = ConsumerOffsetManager(str(tmp_path))
    _write(mgr.config_file_path, APACHE_49_CONSUMER_OFFSET)
    assert mgr.load()
    assert mgr.query_offset("please_rename_unique_group_name_4", "TopicTest", 3) == 250
    assert mgr.query_offset("please_rename_unique_group_name_4", "%RETRY%please_rename_unique_group_name_4", 0) == 0
    assert mgr.offset_table["12345@67890"] == {0: 7, 15: 9}  # digit-only names stay strings
    assert mgr.query_offset("67890", "12345", 15) == 9
    assert all(isinstance(k, str) for k in mgr.offset_table)
    # and our rewrite keeps the same document
    mgr.persist()
    assert _read(mgr.config_file_path) == APACHE_49_CONSUMER_OFFSET  # identical bytes


def test_empty_offset_table_as_fastjson_writes_it(tmp_path):
    mgr = ConsumerOffsetManager(str(tmp_path))
    mgr.persist()
    assert _read(mgr.config_file_path) == '{\n\t"offsetTable":{}\n}'
    assert mgr.load() and mgr.offset_table == {}


def test_load_apache_5_consumer_offset_file_ignores_extras(tmp_path):
    mgr = ConsumerOffsetManager(str(tmp_path))
    _write(mgr.config_file_path, APACHE_5_CONSUMER_OFFSET)
    assert mgr.load()
    assert mgr.offset_table == {"TopicTest@group_a": {0: 10, 1: 20, 2: 30, 3: 40}}
    mgr.persist()
    assert "groupTopicMap" not in _read(mgr.config_file_path)


def test_offsets_standard_json_quoted_keys_are_accepted(tmp_path):
    mgr = ConsumerOffsetManager(str(tmp_path))
    mgr.decode('{"offsetTable": {"T@g": {"0": 3, "1": 4}}}')
    assert mgr.offset_table == {"T@g": {0: 3, 1: 4}}


# ------------------------------------------------------------------------------------- TopicConfigManager ----


def test_system_topics_as_apache_creates_them(tmp_path):
    mgr = TopicConfigManager(_bc(broker_cluster_name="C1", default_topic_queue_nums=8), str(tmp_path))
    t = mgr.topic_config_table
    assert t["TBW102"].perm == PERM_INHERIT | PERM_READ | PERM_WRITE == 7
    assert (t["TBW102"].read_queue_nums, t["TBW102"].write_queue_nums) == (8, 8)
    assert t["SELF_TEST_TOPIC"].read_queue_nums == 1 and t["SELF_TEST_TOPIC"].perm == 6
    assert t["BenchmarkTest"].write_queue_nums == 1024
    assert t["C1"].perm == 7 and t["C1"].read_queue_nums == 16
    assert t["broker-a"].perm == 7 and t["broker-a"].write_queue_nums == 1
    assert t["OFFSET_MOVED_EVENT"].read_queue_nums == 1
    assert t["SCHEDULE_TOPIC_XXXX"].read_queue_nums == 18 == t["SCHEDULE_TOPIC_XXXX"].write_queue_nums
    assert t["C1_REPLY_TOPIC"].read_queue_nums == 1
    assert t["RMQ_SYS_TRANS_HALF_TOPIC"].read_queue_nums == 1
    assert t["RMQ_SYS_TRANS_OP_HALF_TOPIC"].read_queue_nums == 1
    assert "RMQ_SYS_TRACE_TOPIC" not in t
    assert all(cfg.topic_name == name for name, cfg in t.items())


def test_system_topics_follow_broker_switches(tmp_path):
    mgr = TopicConfigManager(_bc(auto_create_topic_enable=False, trace_topic_enable=True), str(tmp_path))
    assert "TBW102" not in mgr.topic_config_table
    assert mgr.topic_config_table["RMQ_SYS_TRACE_TOPIC"].read_queue_nums == 1


def test_auto_create_topic_from_tbw102(tmp_path):
    mgr = TopicConfigManager(_bc(default_topic_queue_nums=8), str(tmp_path))
    seen: list[TopicConfig] = []
    mgr.add_change_listener(seen.append)
    v0 = mgr.data_version.counter
    cfg = mgr.create_topic_in_send_message_method("NewTopic", "TBW102", "10.0.0.1:5555", 4, 0)
    assert cfg is not None
    assert (cfg.read_queue_nums, cfg.write_queue_nums) == (4, 4)  # min(client 4, TBW102 8)
    assert cfg.perm == PERM_READ | PERM_WRITE  # INHERIT stripped
    assert seen == [cfg]
    assert mgr.data_version.counter == v0 + 1
    assert "NewTopic" in _read(mgr.config_file_path)
    # asking again returns the same config, no new version, no event
    assert mgr.create_topic_in_send_message_method("NewTopic", "TBW102", "x", 4, 0) is cfg
    assert len(seen) == 1 and mgr.data_version.counter == v0 + 1
    big = mgr.create_topic_in_send_message_method("Big", "TBW102", "x", 64, 1)
    assert big is not None and big.write_queue_nums == 8 and big.topic_sys_flag == 1


def test_auto_create_refused_cases(tmp_path):
    mgr = TopicConfigManager(_bc(), str(tmp_path))
    assert mgr.create_topic_in_send_message_method("T", "NoSuchDefault", "x", 4, 0) is None
    # a default topic without INHERIT cannot be a template
    assert mgr.create_topic_in_send_message_method("T", "SELF_TEST_TOPIC", "x", 4, 0) is None
    assert mgr.create_topic_in_send_message_method("bad topic!", "TBW102", "x", 4, 0) is None
    assert "T" not in mgr.topic_config_table and not os.path.exists(mgr.config_file_path)


def test_auto_create_disabled_strips_inherit_from_a_loaded_tbw102(tmp_path):
    first = TopicConfigManager(_bc(), str(tmp_path))
    first.persist()  # TBW102 (RWX) is now in topics.json
    mgr = TopicConfigManager(_bc(auto_create_topic_enable=False), str(tmp_path))
    mgr.load()
    assert mgr.topic_config_table["TBW102"].perm == 7
    assert mgr.create_topic_in_send_message_method("T", "TBW102", "x", 4, 0) is None
    assert mgr.topic_config_table["TBW102"].perm == PERM_READ | PERM_WRITE


def test_send_message_back_topic_creation(tmp_path):
    mgr = TopicConfigManager(_bc(), str(tmp_path))
    seen: list[str] = []
    mgr.add_change_listener(lambda c: seen.append(c.topic_name))
    cfg = mgr.create_topic_in_send_message_back_method("%RETRY%g1", 1, PERM_READ | PERM_WRITE, 0)
    assert (cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm) == (1, 1, 6)
    assert mgr.create_topic_in_send_message_back_method("%RETRY%g1", 3, 2, 0) is cfg
    assert seen == ["%RETRY%g1"]
    with pytest.raises(ValueError, match="illegal characters"):
        mgr.create_topic_in_send_message_back_method("%RETRY%g 1", 1, 6, 0)


def test_update_and_delete_topic(tmp_path):
    mgr = TopicConfigManager(_bc(), str(tmp_path))
    seen: list[str] = []
    mgr.add_change_listener(lambda c: seen.append(c.topic_name))

    def boom(_cfg):
        raise RuntimeError("listener failure must not undo the change")

    mgr.add_change_listener(boom)
    v = mgr.data_version.counter
    mgr.update_topic_config(TopicConfig("Orders", 2, 2, 6, order=True))
    assert mgr.select_topic_config("Orders").order and mgr.is_order_topic("Orders")
    assert seen == ["Orders"] and mgr.data_version.counter == v + 1
    with pytest.raises(ValueError):
        mgr.update_topic_config(TopicConfig("a" * 128))
    assert mgr.delete_topic_config("Orders") is not None
    assert mgr.select_topic_config("Orders") is None
    assert mgr.delete_topic_config("Orders") is None
    assert mgr.data_version.counter == v + 2


def test_topics_round_trip_and_serialize_wrapper(tmp_path):
    mgr = TopicConfigManager(_bc(), str(tmp_path))
    mgr.update_topic_config(TopicConfig("T1", 3, 5, 4, topic_sys_flag=2, attributes={"+message.type": "NORMAL"}))
    mgr.update_topic_config(TopicConfig("777", 1, 1))
    wrapper = mgr.build_serialize_wrapper()
    assert set(wrapper) == {"topicConfigTable", "dataVersion"}
    assert set(wrapper["dataVersion"]) == {"timestamp", "counter"}
    assert wrapper["topicConfigTable"]["T1"] == {
        "attributes": {"+message.type": "NORMAL"},
        "order": False,
        "perm": 4,
        "readQueueNums": 3,
        "topicFilterType": "SINGLE_TAG",
        "topicName": "T1",
        "topicSysFlag": 2,
        "writeQueueNums": 5,
    }
    text = _read(mgr.config_file_path)
    assert json.loads(text) == wrapper  # topics.json is standard JSON (string keys only)
    again = TopicConfigManager(_bc(), str(tmp_path))
    assert again.load()
    assert again.topic_config_table == mgr.topic_config_table
    assert again.data_version == mgr.data_version
    assert isinstance(next(k for k in again.topic_config_table if k == "777"), str)


def test_load_apache_49_topics_file(tmp_path):
    mgr = TopicConfigManager(_bc(), str(tmp_path))
    _write(mgr.config_file_path, APACHE_49_TOPICS)
    assert mgr.load()
    t = mgr.topic_config_table
    assert (t["TopicTest"].read_queue_nums, t["TopicTest"].perm) == (4, 6)
    assert t["%RETRY%please_rename_unique_group_name_4"].write_queue_nums == 1
    assert t["2024"].order is True and t["2024"].perm == 4 and t["2024"].topic_sys_flag == 1
    assert "TBW102" in t and "SELF_TEST_TOPIC" in t  # system topics stay (putAll semantics)
    assert (mgr.data_version.counter, mgr.data_version.timestamp) == (3, 1624456790043)
    mgr.update_topic_config(TopicConfig("X"))
    assert mgr.data_version.counter == 4


def test_load_apache_5_topics_file_keeps_attributes(tmp_path):
    mgr = TopicConfigManager(_bc(), str(tmp_path))
    _write(mgr.config_file_path, APACHE_5_TOPICS)
    assert mgr.load()
    assert mgr.topic_config_table["FifoTopic"].attributes == {"+message.type": "FIFO"}
    assert mgr.data_version.counter == 7
    mgr.persist()
    assert '"+message.type":"FIFO"' in _read(mgr.config_file_path)


def test_topics_file_with_wrong_types_is_corrupt(tmp_path):
    mgr = TopicConfigManager(_bc(), str(tmp_path))
    _write(mgr.config_file_path, '{"topicConfigTable":{"T":{"topicName":"T","readQueueNums":"many"}}}')
    with pytest.raises(ConfigLoadError, match=r"topics\.json"):
        mgr.load()
    assert "T" not in mgr.topic_config_table


# ------------------------------------------------------------------------------- SubscriptionGroupManager ----


def test_system_groups_present(tmp_path):
    mgr = SubscriptionGroupManager(_bc(), str(tmp_path))
    assert set(SYSTEM_GROUPS) == {
        "TOOLS_CONSUMER",
        "FILTERSRV_CONSUMER",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PULL",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_RMQ_SYS_TRANS",
    }
    assert set(SYSTEM_GROUPS) <= set(mgr.subscription_group_table)


def test_group_auto_create_and_validation(tmp_path):
    mgr = SubscriptionGroupManager(_bc(), str(tmp_path))
    v = mgr.data_version.counter
    cfg = mgr.find_subscription_group_config("cg1")
    assert cfg == SubscriptionGroupConfig("cg1")
    assert mgr.find_subscription_group_config("cg1") is cfg
    assert mgr.data_version.counter == v + 1
    assert "cg1" in _read(mgr.config_file_path)
    assert mgr.find_subscription_group_config("bad group") is None
    assert mgr.find_subscription_group_config("x" * 121) is None
    assert "bad group" not in mgr.subscription_group_table


def test_group_no_auto_create(tmp_path):
    mgr = SubscriptionGroupManager(_bc(auto_create_subscription_group=False), str(tmp_path))
    assert mgr.find_subscription_group_config("cg1") is None
    assert mgr.find_subscription_group_config("CID_RMQ_SYS_OTHER") is not None  # system groups still are
    mgr.update_subscription_group_config(SubscriptionGroupConfig("cg1", retry_max_times=3))
    assert mgr.find_subscription_group_config("cg1").retry_max_times == 3
    with pytest.raises(ValueError):
        mgr.update_subscription_group_config(SubscriptionGroupConfig("a b"))
    assert mgr.delete_subscription_group_config("cg1") is not None
    assert mgr.find_subscription_group_config("cg1") is None


def test_groups_round_trip(tmp_path):
    mgr = SubscriptionGroupManager(_bc(), str(tmp_path))
    mgr.update_subscription_group_config(
        SubscriptionGroupConfig("g", consume_enable=False, retry_queue_nums=3, consume_message_orderly=True)
    )
    mgr.disable_consume("TOOLS_CONSUMER")
    mgr.persist()
    doc = json.loads(_read(mgr.config_file_path))
    assert list(doc) == ["dataVersion", "subscriptionGroupTable"]
    assert list(doc["subscriptionGroupTable"]["g"]) == sorted(doc["subscriptionGroupTable"]["g"])
    again = SubscriptionGroupManager(_bc(), str(tmp_path))
    assert again.load()
    assert again.subscription_group_table == mgr.subscription_group_table
    assert again.data_version == mgr.data_version


def test_load_apache_49_subscription_group_file(tmp_path):
    mgr = SubscriptionGroupManager(_bc(), str(tmp_path))
    _write(mgr.config_file_path, APACHE_49_SUBSCRIPTION_GROUP)
    assert mgr.load()
    slow = mgr.subscription_group_table["slow_group"]
    assert (slow.consume_enable, slow.consume_broadcast_enable, slow.consume_message_orderly) == (False, False, True)
    assert (slow.retry_max_times, slow.retry_queue_nums, slow.notify_consumer_ids_changed_enable) == (3, 2, False)
    assert mgr.subscription_group_table["please_rename_unique_group_name_4"] == SubscriptionGroupConfig(
        "please_rename_unique_group_name_4"
    )
    assert "TOOLS_CONSUMER" in mgr.subscription_group_table
    assert mgr.data_version.counter == 2
    # written back in the same layout
    mgr.persist()
    assert (
        json.loads(_read(mgr.config_file_path))["subscriptionGroupTable"]["slow_group"]
        == json.loads(APACHE_49_SUBSCRIPTION_GROUP)["subscriptionGroupTable"]["slow_group"]
    )


def test_load_apache_5_subscription_group_file(tmp_path):
    mgr = SubscriptionGroupManager(_bc(), str(tmp_path))
    _write(mgr.config_file_path, APACHE_5_SUBSCRIPTION_GROUP)
    assert mgr.load()
    assert mgr.subscription_group_table["g5"].retry_max_times == 5
    assert mgr.data_version.counter == 4


# ---------------------------------------------------------------------------------- ConsumerFilterManager ----


def test_filter_register_versions(tmp_path):
    mgr = ConsumerFilterManager(str(tmp_path))
    assert mgr.register("T", "g", "TagA", "TAG", 1) is False  # tags are not filter data
    assert mgr.register("T", "g", "a > 5", "SQL92", 100, now_ms=1_000) is True
    data = mgr.get("T", "g")
    assert data is not None and data.filter is not None
    assert data.filter({"a": "6"}) and not data.filter({"a": "5"})
    assert (data.expression, data.expression_type, data.client_version, data.born_time) == ("a > 5", "SQL92", 100, 1000)
    # older or equal version: ignored
    assert mgr.register("T", "g", "a > 9", "SQL92", 99, now_ms=2_000) is False
    assert mgr.register("T", "g", "a > 9", "SQL92", 100, now_ms=2_000) is False
    assert mgr.get("T", "g") is data
    # newer version, same expression: version bumped in place
    assert mgr.register("T", "g", "a > 5", "SQL92", 101, now_ms=3_000) is True
    assert mgr.get("T", "g") is data and data.client_version == 101
    # newer version, new expression: replaced
    assert mgr.register("T", "g", "b = 'x'", "SQL92", 102, now_ms=4_000) is True
    new = mgr.get("T", "g")
    assert new is not data and new.expression == "b = 'x'" and new.born_time == 4000
    assert new.filter({"b": "x"})


def test_filter_parse_error_raises(tmp_path):
    mgr = ConsumerFilterManager(str(tmp_path))
    with pytest.raises(FilterParseError):
        ConsumerFilterManager.build("T", "g", "a >", "SQL92", 1)
    assert ConsumerFilterManager.build("T", "g", "*", "TAG", 1) is None
    with pytest.raises(FilterParseError):
        mgr.register("T", "g", "a >>> 5", "SQL92", 1)
    assert mgr.get("T", "g") is None
    mgr.register("T", "g", "a > 5", "SQL92", 1, now_ms=10)
    with pytest.raises(FilterParseError):
        mgr.register("T", "g", "a > ", "SQL92", 2, now_ms=20)
    assert mgr.get("T", "g") is None  # a changed, broken expression drops the old filter (Java)


def test_filter_unregister_revive_and_clean(tmp_path):
    mgr = ConsumerFilterManager(str(tmp_path), clean_time_span_ms=1_000)
    mgr.register("T", "g", "a > 5", "SQL92", 7, now_ms=100)
    mgr.register("U", "g", "a > 6", "SQL92", 7, now_ms=100)
    mgr.unregister("g", now_ms=200)
    assert mgr.get("T", "g").is_dead and mgr.get("U", "g").is_dead
    assert mgr.register("T", "g", "a > 5", "SQL92", 7, now_ms=300) is True  # same version revives
    assert not mgr.get("T", "g").is_dead
    mgr.clean(now_ms=1_199)
    assert mgr.get("U", "g") is not None
    mgr.clean(now_ms=1_200)
    assert mgr.get("U", "g") is None and mgr.get_by_topic("U") == []
    assert mgr.get("T", "g") is not None


def test_filter_register_subscriptions_marks_dropped_topics_dead(tmp_path):
    mgr = ConsumerFilterManager(str(tmp_path))
    s1 = build_subscription_data("T", MessageSelector.by_sql("a > 1"))
    s1.sub_version = 5
    s2 = build_subscription_data("U", MessageSelector.by_sql("a >"))  # broken: logged, not raised
    s3 = build_subscription_data("V", "TagA")
    mgr.register_subscriptions("g", [s1, s2, s3], now_ms=10)
    assert mgr.get("T", "g") is not None and mgr.get("U", "g") is None and mgr.get("V", "g") is None
    mgr.register_subscriptions("g", [], now_ms=20)
    assert mgr.get("T", "g").is_dead and mgr.get("T", "g").dead_time == 20


def test_filters_round_trip_and_loaded_filters_are_dead(tmp_path):
    mgr = ConsumerFilterManager(str(tmp_path))
    mgr.register("T", "g", "a BETWEEN 1 AND 3", "SQL92", 9)
    mgr.persist()
    doc = json.loads(_read(mgr.config_file_path))
    entry = doc["filterDataByTopic"]["T"]["groupFilterData"]["g"]
    assert entry["expression"] == "a BETWEEN 1 AND 3" and entry["dead"] is False and entry["deadTime"] == 0
    assert doc["filterDataByTopic"]["T"]["topic"] == "T"
    again = ConsumerFilterManager(str(tmp_path))
    assert again.load()
    data = again.get("T", "g")
    assert data.client_version == 9 and data.filter({"a": "2"}) and data.is_dead
    assert again.register("T", "g", "a BETWEEN 1 AND 3", "SQL92", 9) is True and not data.is_dead


def test_load_apache_consumer_filter_file(tmp_path):
    mgr = ConsumerFilterManager(str(tmp_path))
    _write(mgr.config_file_path, APACHE_CONSUMER_FILTER)
    assert mgr.load()
    data = mgr.get("TopicSql", "sql_group")
    assert data.expression == "a between 0 and 3" and data.client_version == 1699999999000
    assert data.filter({"a": "3"}) and not data.filter({"a": "4"})


def test_filter_file_entry_that_no_longer_compiles_is_dropped(tmp_path):
    mgr = ConsumerFilterManager(str(tmp_path))
    bad = APACHE_CONSUMER_FILTER.replace("a between 0 and 3", "a between 3 and 0")
    _write(mgr.config_file_path, bad)
    assert mgr.load()
    assert mgr.get("TopicSql", "sql_group") is None
