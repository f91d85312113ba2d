"""The broker's config files and heartbeat/lock bodies against a real Apache RocketMQ 4.9.7 broker (Maven Central):
Apache loads the topics.json / subscriptionGroup.json / consumerOffset.json our managers write, accepts our
HeartbeatData (SQL92 subscription) and LockBatchRequestBody, answers bodies we decode, and on shutdown writes files
our managers load (consumerOffset.json byte for byte as we encode it).

Run alone with ``-m apache_broker`` (needs java and mvn; RMQ_COMPAT_JAVA=0 skips)."""

from __future__ import annotations

import json
import os

import pytest

from rmq_core.broker.broker_config import BrokerConfig
from rmq_core.broker.consumer_filter_manager import ConsumerFilterManager
from rmq_core.broker.consumer_offset_manager import ConsumerOffsetManager
from rmq_core.broker.subscription_group_manager import SubscriptionGroupManager
from rmq_core.broker.topic_config_manager import (
    TopicConfigManager,
    parse_topic_config_table,
)
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.common.topic_config import TopicConfig
from rmq_core.filter.message_selector import MessageSelector
from rmq_core.filter.subscription_data import build_subscription_data
from rmq_core.message import MessageQueue
from rmq_core.remoting import fastjson
from rmq_core.remoting.body.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    MessageModel,
    ProducerData,
)
from rmq_core.remoting.body.lock_batch import (
    LockBatchRequestBody,
    LockBatchResponseBody,
)
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    CreateTopicRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    encode_header,
)
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.apache_rocketmq import ApacheRocketMQ

pytestmark = pytest.mark.apache_broker

CLIENT_ID = "127.0.0.1@interop"


def _ok(
    client: BlockingRemotingClient, addr: str, code: int, ext: dict | None = None, body: bytes | None = None
) -> RemotingCommand:
    resp = client.invoke_sync(addr, RemotingCommand.request(code, ext, body), 15.0)
    assert resp.code == ResponseCode.SUCCESS, (code, resp.code, resp.remark)
    return resp


def test_config_files_and_bodies_with_apache_broker(tmp_path):
    server = ApacheRocketMQ(str(tmp_path / "apache"), extra_broker_conf={"enablePropertyFilter": "true"})
    config_dir = os.path.join(server.store, "broker", "config")
    bc = BrokerConfig(broker_name="broker-a", broker_cluster_name="DefaultCluster")

    # --- our files, written before Apache starts -------------------------------------------------------------
    topics = TopicConfigManager(bc, config_dir)
    topics.update_topic_config(TopicConfig("OursT", 2, 6, 6))
    groups = SubscriptionGroupManager(bc, config_dir)
    groups.update_subscription_group_config(SubscriptionGroupConfig("ours_g", consume_enable=False, retry_max_times=2))
    offsets = ConsumerOffsetManager(config_dir)
    offsets.commit_offset("h", "ours_g", "OursT", 0, 42)
    offsets.commit_offset("h", "ours_g", "OursT", 1, 43)
    assert topics.persist() and groups.persist() and offsets.persist()
    our_counter = topics.data_version.counter

    server.start()
    try:
        addr = server.broker_addr
        with BlockingRemotingClient() as client:
            # Apache loaded our files
            r = _ok(
                client,
                addr,
                RequestCode.QUERY_CONSUMER_OFFSET,
                encode_header(QueryConsumerOffsetRequestHeader("ours_g", "OursT", 1)),
            )
            assert r.ext_fields["offset"] == "43"
            r = _ok(client, addr, RequestCode.GET_ALL_TOPIC_CONFIG)
            wrapper = fastjson.loads(r.body, int_keys=False)
            ours = parse_topic_config_table(wrapper["topicConfigTable"])["OursT"]
            assert (ours.read_queue_nums, ours.write_queue_nums, ours.perm) == (2, 6, 6)
            assert wrapper["dataVersion"]["counter"] >= our_counter
            r = _ok(client, addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            g = fastjson.loads(r.body, int_keys=False)["subscriptionGroupTable"]["ours_g"]
            assert (g["consumeEnable"], g["retryMaxTimes"]) == (False, 2)

            # Apache writes: a topic, a group, offsets; accepts our heartbeat and lock bodies
            _ok(
                client,
                addr,
                RequestCode.UPDATE_AND_CREATE_TOPIC,
                encode_header(
                    CreateTopicRequestHeader(
                        topic="InteropT",
                        defaultTopic="TBW102",
                        readQueueNums=3,
                        writeQueueNums=5,
                        perm=6,
                        topicFilterType="SINGLE_TAG",
                        topicSysFlag=0,
                        order=False,
                    )
                ),
            )
            body = json.dumps(
                SubscriptionGroupConfig("interop_g", consume_broadcast_enable=False, retry_max_times=3).to_json_dict()
            ).encode()
            _ok(client, addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
            for q, off in ((0, 5280), (1, 5312), (2, 7)):
                _ok(
                    client,
                    addr,
                    RequestCode.UPDATE_CONSUMER_OFFSET,
                    encode_header(UpdateConsumerOffsetRequestHeader("interop_g", "InteropT", q, off)),
                )
            sql = build_subscription_data("InteropT", MessageSelector.by_sql("a > 5"))
            tag = build_subscription_data("InteropT", "TagA || TagB")
            hb = HeartbeatData(
                CLIENT_ID,
                [ProducerData("interop_pg")],
                [
                    ConsumerData(
                        "interop_sql",
                        ConsumeType.CONSUME_PASSIVELY,
                        MessageModel.CLUSTERING,
                        ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                        [sql],
                    ),
                    ConsumerData(
                        "interop_tag",
                        ConsumeType.CONSUME_ACTIVELY,
                        MessageModel.BROADCASTING,
                        ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                        [tag],
                    ),
                ],
            )
            _ok(client, addr, RequestCode.HEART_BEAT, body=hb.encode())
            r = _ok(client, addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "interop_sql"})
            assert GetConsumerListByGroupResponseBody.decode(r.body).consumer_id_list == [CLIENT_ID]
            mqs = {MessageQueue("InteropT", "broker-a", 0), MessageQueue("InteropT", "broker-a", 1)}
            r = _ok(
                client,
                addr,
                RequestCode.LOCK_BATCH_MQ,
                body=LockBatchRequestBody("interop_sql", CLIENT_ID, mqs).encode(),
            )
            assert LockBatchResponseBody.decode(r.body).lock_ok_mq_set == mqs
            r = _ok(
                client,
                addr,
                RequestCode.LOCK_BATCH_MQ,
                body=LockBatchRequestBody("interop_sql", "someone@else", mqs).encode(),
            )
            assert LockBatchResponseBody.decode(r.body).lock_ok_mq_set == set()
    finally:
        server.stop()

    # --- Apache's files (persisted at shutdown), read by our managers ----------------------------------------
    topics2 = TopicConfigManager(bc, config_dir)
    assert topics2.load()
    t = topics2.topic_config_table
    assert (t["InteropT"].read_queue_nums, t["InteropT"].write_queue_nums, t["InteropT"].perm) == (3, 5, 6)
    assert t["OursT"].write_queue_nums == 6
    assert "%RETRY%interop_sql" in t  # created by Apache's heartbeat handling
    assert topics2.data_version.counter > our_counter

    groups2 = SubscriptionGroupManager(bc, config_dir)
    assert groups2.load()
    ig = groups2.subscription_group_table["interop_g"]
    assert (ig.consume_broadcast_enable, ig.retry_max_times) == (False, 3)
    assert groups2.subscription_group_table["ours_g"].consume_enable is False
    assert "interop_sql" in groups2.subscription_group_table  # auto-created by the heartbeat

    offsets2 = ConsumerOffsetManager(config_dir)
    assert offsets2.load()
    assert offsets2.query_offset("interop_g", "InteropT", 1) == 5312
    assert offsets2.query_offset("ours_g", "OursT", 0) == 42
    with open(offsets2.config_file_path, encoding="utf-8") as f:
        apache_text = f.read()
    assert offsets2.encode(True) == apache_text  # fastjson's PrettyFormat, byte for byte

    filters = ConsumerFilterManager(config_dir)
    assert filters.load()
    data = filters.get("InteropT", "interop_sql")
    assert data is not None and data.expression == "a > 5" and data.expression_type == "SQL92"
    assert data.client_version == sql.sub_version
    assert data.filter is not None and data.filter({"a": "6"})
    assert filters.get("InteropT", "interop_tag") is None
