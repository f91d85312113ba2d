"""HeartbeatData and GetConsumerListByGroupResponseBody: decoding what the Java 4.9 and 5.x clients send (fastjson,
enum names, codeSet ints incl. negative hash codes), round trips, tolerance (ordinals, missing sets), and clear
errors for malformed bodies; SubscriptionData.from_json_dict."""

from __future__ import annotations

import json

import pytest

from rmq_core.filter.subscription_data import SubscriptionData, build_subscription_data
from rmq_core.message import tags_hash
from rmq_core.remoting.body.heartbeat import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumeType,
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    MessageModel,
    ProducerData,
)

# A DefaultMQPushConsumer (4.9.x) subscribed to TopicTest "TagA || TagB", plus its automatic retry subscription and
# the client's inner producer, exactly as fastjson serialises HeartbeatData (fields sorted, enums by name).
JAVA_49_HEARTBEAT = (
    '{"clientID":"192.168.0.5@12345#9187423487","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
    '"consumeType":"CONSUME_PASSIVELY","groupName":"please_rename_unique_group_name_4","messageModel":"CLUSTERING",'
    '"subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*",'
    '"subVersion":1700000000001,"tagsSet":[],"topic":"%RETRY%please_rename_unique_group_name_4"},'
    '{"classFilterMode":false,"codeSet":[2598919,2598920],"expressionType":"TAG","subString":"TagA || TagB",'
    '"subVersion":1700000000000,"tagsSet":["TagA","TagB"],"topic":"TopicTest"}],"unitMode":false}],'
    '"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}]}'
)

# A 5.x push consumer with an SQL92 selector (heartbeat v2 fields present).
JAVA_5_HEARTBEAT = (
    '{"clientID":"10.1.1.1@7#1","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET",'
    '"consumeType":"CONSUME_PASSIVELY","groupName":"sql_group","messageModel":"BROADCASTING",'
    '"subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"SQL92",'
    '"subString":"a between 0 and 3","subVersion":1700000000500,"tagsSet":[],"topic":"TopicSql"}],'
    '"unitMode":false}],"heartbeatFingerprint":-559038737,"producerDataSet":[{"groupName":"pg"},'
    '{"groupName":"CLIENT_INNER_PRODUCER"}],"withoutSub":false}'
)


def test_decode_java_49_heartbeat():
    hb = HeartbeatData.decode(JAVA_49_HEARTBEAT.encode())
    assert hb.client_id == "192.168.0.5@12345#9187423487"
    assert [p.group_name for p in hb.producer_data_set] == ["CLIENT_INNER_PRODUCER"]
    assert hb.heartbeat_fingerprint is None and hb.without_sub is None
    (cd,) = hb.consumer_data_set
    assert cd.group_name == "please_rename_unique_group_name_4"
    assert cd.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert cd.message_model is MessageModel.CLUSTERING
    assert cd.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    assert cd.unit_mode is False
    retry, main = cd.subscription_data_set
    assert retry.topic == "%RETRY%please_rename_unique_group_name_4" and retry.sub_string == "*"
    assert retry.selects_all and retry.is_matched_by_tags_code(12345)
    assert main.topic == "TopicTest" and main.sub_version == 1700000000000 and main.expression_type == "TAG"
    assert main.tags_set == {"TagA", "TagB"} and main.code_set == {2598919, 2598920}
    # the hash codes the Java client computed are the ones the broker matches ConsumeQueue tagsCodes against
    assert main.code_set == {tags_hash("TagA"), tags_hash("TagB")}
    assert main.is_matched_by_tags_code(tags_hash("TagA")) and not main.is_matched_by_tags_code(tags_hash("TagC"))
    # and it is what our own builder makes from the same expression
    built = build_subscription_data("TopicTest", "TagA || TagB")
    assert (built.tags_set, built.code_set, built.sub_string) == (main.tags_set, main.code_set, main.sub_string)


def test_decode_java_5_heartbeat():
    hb = HeartbeatData.decode(JAVA_5_HEARTBEAT)
    assert hb.heartbeat_fingerprint == -559038737 and hb.without_sub is False
    assert [p.group_name for p in hb.producer_data_set] == ["pg", "CLIENT_INNER_PRODUCER"]
    (cd,) = hb.consumer_data_set
    assert cd.message_model is MessageModel.BROADCASTING == "BROADCASTING"
    assert cd.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    (s,) = cd.subscription_data_set
    assert (s.expression_type, s.sub_string, s.tags_set, s.code_set) == ("SQL92", "a between 0 and 3", set(), set())


def test_negative_hash_codes_survive():
    tag = "negative-hash-tag-zzzzzzzzzz"
    code = tags_hash(tag)
    assert code < 0
    d = {
        "topic": "T",
        "subString": tag,
        "tagsSet": [tag],
        "codeSet": [code],
        "subVersion": 1,
        "expressionType": "TAG",
        "classFilterMode": False,
    }
    s = SubscriptionData.from_json_dict(d)
    assert s.code_set == {code}
    assert s.to_json_dict() == d
    # a value written as an unsigned 32-bit number is read back as Java's int
    assert SubscriptionData.from_json_dict({**d, "codeSet": [code & 0xFFFFFFFF]}).code_set == {code}


def test_pull_consumer_and_enum_ordinals():
    body = {
        "clientID": "c",
        "consumerDataSet": [
            {
                "groupName": "g",
                "consumeType": 0,
                "messageModel": 0,
                "consumeFromWhere": 5,
                "subscriptionDataSet": [],
                "unitMode": True,
            }
        ],
    }
    (cd,) = HeartbeatData.decode(json.dumps(body)).consumer_data_set
    assert cd.consume_type is ConsumeType.CONSUME_ACTIVELY
    assert cd.message_model is MessageModel.BROADCASTING
    assert cd.consume_from_where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
    assert cd.unit_mode is True


def test_tolerates_missing_optional_parts():
    hb = HeartbeatData.decode(b'{"clientID":"c"}')
    assert hb.producer_data_set == [] and hb.consumer_data_set == []
    sub = SubscriptionData.from_json_dict(
        {"topic": "T", "subString": "*", "tagsSet": None, "codeSet": None, "expressionType": None}
    )
    assert sub.expression_type == "TAG" and sub.tags_set == set() and sub.code_set == set()
    hb = HeartbeatData.decode('{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":null}]}')
    assert hb.consumer_data_set[0].subscription_data_set == []
    assert hb.consumer_data_set[0].consume_type is ConsumeType.CONSUME_PASSIVELY


def test_round_trip():
    s = build_subscription_data("T", "A || B")
    s.sub_version = 42
    hb = HeartbeatData(
        "1.2.3.4@x",
        [ProducerData("pg")],
        [
            ConsumerData(
                "g",
                ConsumeType.CONSUME_PASSIVELY,
                MessageModel.CLUSTERING,
                ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                [s],
                False,
            )
        ],
    )
    raw = hb.encode()
    d = json.loads(raw)
    assert list(d) == ["clientID", "consumerDataSet", "producerDataSet"]  # fastjson's order; no 5.x fields unset
    assert d["consumerDataSet"][0]["consumeType"] == "CONSUME_PASSIVELY"
    assert HeartbeatData.decode(raw) == hb
    hb5 = HeartbeatData("c", heartbeat_fingerprint=7, without_sub=True)
    assert json.loads(hb5.encode())["withoutSub"] is True
    assert HeartbeatData.decode(hb5.encode()) == hb5


@pytest.mark.parametrize(
    "bad, match",
    [
        (b"\xff\xfe", "not JSON"),
        (b"{not json", "not JSON"),
        (b"[]", "JSON object"),
        (b'{"producerDataSet":[]}', "clientID"),
        (b'{"clientID":"c","consumerDataSet":{}}', "consumerDataSet must be an array"),
        (b'{"clientID":"c","consumerDataSet":[{"consumeType":"CONSUME_PASSIVELY"}]}', "groupName"),
        (b'{"clientID":"c","consumerDataSet":[{"groupName":"g","messageModel":"SOMETIMES"}]}', "messageModel"),
        (b'{"clientID":"c","consumerDataSet":[{"groupName":"g","consumeType":9}]}', "consumeType"),
        (b'{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"subString":"*"}]}]}', "topic"),
        (
            b'{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"T","codeSet":["x"]}]}]}',
            "invalid literal",
        ),
        (
            b'{"clientID":"c","consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"T","codeSet":[null]}]}]}',
            "malformed",
        ),
        (b'{"clientID":"c","producerDataSet":[{"name":"x"}]}', "groupName"),
    ],
)
def test_malformed_heartbeat_raises_value_error(bad, match):
    with pytest.raises(ValueError, match=match):
        HeartbeatData.decode(bad)


def test_consumer_list_body():
    body = GetConsumerListByGroupResponseBody(["c1", "c2"])
    assert json.loads(body.encode()) == {"consumerIdList": ["c1", "c2"]}
    assert GetConsumerListByGroupResponseBody.decode(b'{"consumerIdList":["a@1","b@2"]}').consumer_id_list == [
        "a@1",
        "b@2",
    ]
    assert GetConsumerListByGroupResponseBody.decode(b"{}").consumer_id_list == []
    with pytest.raises(ValueError):
        GetConsumerListByGroupResponseBody.decode(b'{"consumerIdList":"c1"}')
