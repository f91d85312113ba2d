"""The admin requests mqadmin sends, at the wire level on a real broker and name server (no Java): their bodies'
JSON shapes as 4.9.7 writes them (MessageQueue-keyed maps included), the broker config's live update, persistence and
reload, deletion, the name server's KV config, and the Prometheus endpoint scraped during a run."""

from __future__ import annotations

import json
import re
import time
import urllib.request

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.broker.stats.broker_runtime_stats import GET, PUT, BrokerRuntimeStats, java_double
from rmq_core.broker.stats.broker_stats_manager import BrokerStatsManager
from rmq_core.common.mq_version import version_desc, version_ordinal
from rmq_core.namesrv import NameServer
from rmq_core.remoting import fastjson
from rmq_core.remoting.body.kv_table import KVTable
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    DeleteTopicRequestHeader,
    GetConsumeStatsRequestHeader,
    GetKVConfigRequestHeader,
    GetKVListByNamespaceRequestHeader,
    GetTopicConfigRequestHeader,
    GetTopicStatsInfoRequestHeader,
    PutKVConfigRequestHeader,
    encode_header,
)
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.pull_helpers import GROUP, SMALL_FILES, TOPIC, add_topic, heartbeat, pull, running_broker, update_offset
from support.send_helpers import send_request


def _call(client: BlockingRemotingClient, addr: str, code: int, header: object = None, body: bytes | None = None):  # type: ignore[no-untyped-def]
    return client.invoke_sync(addr, RemotingCommand.request(code, encode_header(header) if header else {}, body))


def test_get_topic_config_answers_one_topics_config_as_5x_does(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """5.x GET_TOPIC_CONFIG (351, mqadmin 5.x topicStatus/consumerProgress ask it first): TopicConfigAndQueueMapping
    JSON (no mappingDetail: no static topics), TOPIC_NOT_EXIST for an unknown topic, a missing header field refused."""
    with running_broker(tmp_path) as broker, BlockingRemotingClient() as client:
        add_topic(broker, TOPIC, queues=3, perm=4)
        r = _call(
            client, broker.address, RequestCode.GET_TOPIC_CONFIG, GetTopicConfigRequestHeader(topic=TOPIC, lo=True)
        )
        assert r.code == ResponseCode.SUCCESS, r.remark
        doc = fastjson.loads(bytes(r.body))
        assert doc == {
            "order": False,
            "perm": 4,
            "readQueueNums": 3,
            "topicFilterType": "SINGLE_TAG",
            "topicName": TOPIC,
            "topicSysFlag": 0,
            "writeQueueNums": 3,
        }
        r = _call(client, broker.address, RequestCode.GET_TOPIC_CONFIG, GetTopicConfigRequestHeader(topic="NoSuch"))
        assert (r.code, r.remark) == (ResponseCode.TOPIC_NOT_EXIST, "No topic in this broker. topic: NoSuch")
        r = _call(client, broker.address, RequestCode.GET_TOPIC_CONFIG)
        assert r.code == ResponseCode.SYSTEM_ERROR and "topic" in (r.remark or "")


def test_version_names_follow_mqversion() -> None:
    assert version_desc(407) == "V4_9_7" and version_desc(401) == "V4_9_4" and version_desc(408) == "V4_9_8_SNAPSHOT"
    assert version_desc(611) == "V5_9_9" and version_desc(700) == "HIGHER_VERSION"
    assert all(version_ordinal(version_desc(n)) == n for n in range(212, 612))


def test_tps_is_the_rate_between_samples() -> None:
    stats = BrokerStatsManager("C")
    rt = BrokerRuntimeStats(stats, boot_ms=0)
    for second in range(12):
        stats.inc_put("T", 5, 500)
        stats.inc_broker_get_nums(2)
        rt.sample(1_000_000 + second * 1000)
    assert rt.tps(PUT, 10) == "5.0" and rt.tps(GET, 10) == "2.0"
    assert rt.tps(PUT, 60) == "" and rt.tps_triple(PUT) == "5.0  "
    assert java_double(0.5) == "0.5" and java_double(3.0) == "3.0"


def test_topic_and_consume_stats_bodies_and_runtime_info(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with running_broker(tmp_path) as broker, BlockingRemotingClient() as client:
        add_topic(broker, TOPIC, queues=2)
        for i in range(6):
            r = client.invoke_sync(broker.address, send_request(TOPIC, b"x" * 10, queue_id=i % 2))
            assert r.code == 0, r.remark
        heartbeat(client, broker.address)
        assert pull(client, broker.address, TOPIC, 0, 0).code == 0
        update_offset(client, broker.address, 2, queue_id=0)

        r = _call(client, broker.address, RequestCode.GET_TOPIC_STATS_INFO, GetTopicStatsInfoRequestHeader(topic=TOPIC))
        text = bytes(r.body).decode()
        assert r.code == 0 and text.startswith(
            f'{{"offsetTable":{{{{"brokerName":"broker-a","queueId":0,"topic":"{TOPIC}"}}:'
        )
        assert '"maxOffset":3,"minOffset":0}' in text

        r = _call(
            client, broker.address, RequestCode.GET_CONSUME_STATS, GetConsumeStatsRequestHeader(consumerGroup=GROUP)
        )
        text = bytes(r.body).decode()
        assert r.code == 0 and text.startswith('{"consumeTps":')
        assert (
            f'{{"brokerName":"broker-a","queueId":0,"topic":"{TOPIC}"}}:{{"brokerOffset":3,"consumerOffset":2,' in text
        )

        r = _call(client, broker.address, RequestCode.GET_BROKER_RUNTIME_INFO)
        info = KVTable.decode(bytes(r.body)).table
        assert info["msgPutTotalTodayNow"] == "6" and info["msgGetTotalTodayNow"] == "3"
        assert info["putMessageTimesTotal"] == "6" and int(info["commitLogMaxOffset"]) > 0
        assert re.fullmatch(r"V4_9_\d+", info["brokerVersionDesc"]) and int(info["earliestMessageTimeStamp"]) > 0

        r = _call(
            client,
            broker.address,
            RequestCode.GET_CONSUMER_CONNECTION_LIST,
            GetConsumeStatsRequestHeader(consumerGroup=GROUP),
        )
        conn = json.loads(bytes(r.body))
        assert [c["clientId"] for c in conn["connectionSet"]] == ["127.0.0.1@test"]
        assert conn["consumeType"] == "CONSUME_PASSIVELY" and TOPIC in conn["subscriptionTable"]


def test_broker_config_update_applies_persists_and_survives_a_restart(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with running_broker(tmp_path) as broker, BlockingRemotingClient() as client:
        r = _call(client, broker.address, RequestCode.GET_BROKER_CONFIG)
        assert r.code == 0 and "brokerName=broker-a\n" in bytes(r.body).decode()
        assert json.loads(r.ext_fields["version"])["counter"] == 0
        body = b"autoCreateTopicEnable=false\nslaveReadEnable=true\n"
        assert _call(client, broker.address, RequestCode.UPDATE_BROKER_CONFIG, body=body).code == 0
        assert broker.config.auto_create_topic_enable is False and broker.config.slave_read_enable is True
        r = _call(client, broker.address, RequestCode.UPDATE_BROKER_CONFIG, body=b"shortPollingTimeMills=notanumber\n")
        assert r.code == ResponseCode.NO_PERMISSION and "not an integer" in (r.remark or "")
    with running_broker(tmp_path) as broker:  # same store: the persisted updates apply again
        assert broker.config.auto_create_topic_enable is False and broker.config.slave_read_enable is True


def test_delete_topic_in_broker(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with running_broker(tmp_path) as broker, BlockingRemotingClient() as client:
        add_topic(broker, "Doomed")
        r = _call(client, broker.address, RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic="Doomed"))
        assert r.code == 0 and broker.controller.topic_config_manager.select_topic_config("Doomed") is None
        r = _call(client, broker.address, RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic="TBW102"))
        assert r.code == ResponseCode.SYSTEM_ERROR and "system topic" in (r.remark or "")


def test_name_server_kv_config(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "kvConfig.json")
    with NameServer(listen_port=0, kv_config_path=path) as ns, BlockingRemotingClient() as client:
        put = PutKVConfigRequestHeader(namespace="NS", key="k", value="v")
        assert _call(client, ns.address, RequestCode.PUT_KV_CONFIG, put).code == 0
        r = _call(client, ns.address, RequestCode.GET_KV_CONFIG, GetKVConfigRequestHeader(namespace="NS", key="k"))
        assert r.code == 0 and r.ext_fields["value"] == "v"
        r = _call(
            client, ns.address, RequestCode.GET_KVLIST_BY_NAMESPACE, GetKVListByNamespaceRequestHeader(namespace="NS")
        )
        assert KVTable.decode(bytes(r.body)).table == {"k": "v"}
        with open(path, encoding="utf-8") as f:
            assert fastjson.loads(f.read()) == {"configTable": {"NS": {"k": "v"}}}
    with NameServer(listen_port=0, kv_config_path=path) as ns, BlockingRemotingClient() as client:
        r = _call(client, ns.address, RequestCode.GET_KV_CONFIG, GetKVConfigRequestHeader(namespace="NS", key="k"))
        assert r.ext_fields["value"] == "v"
        assert (
            _call(
                client, ns.address, RequestCode.DELETE_KV_CONFIG, GetKVConfigRequestHeader(namespace="NS", key="k")
            ).code
            == 0
        )
        r = _call(client, ns.address, RequestCode.GET_KV_CONFIG, GetKVConfigRequestHeader(namespace="NS", key="k"))
        assert r.code == ResponseCode.QUERY_NOT_FOUND and r.remark == "No config item, Namespace: NS Key: k"
        r = _call(client, ns.address, RequestCode.WIPE_WRITE_PERM_OF_BROKER)
        assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "not supported" in (r.remark or "")


def _scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """``{(metric name, {label: value}): value}`` from the Prometheus text format."""
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.fullmatch(r"(\w+)(?:\{(.*)\})? (\S+)", line)
        if m and not line.startswith("#"):
            labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


NODE = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}


def _metric(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return samples[(name, frozenset({**NODE, **labels}.items()))]


def test_metrics_endpoint_scraped_during_a_run(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with running_broker(tmp_path, metrics_prom_exporter_port=0) as broker, BlockingRemotingClient() as client:
        url = f"http://{broker.controller.metrics_address}/metrics"
        add_topic(broker, TOPIC, queues=1)
        for _ in range(5):
            assert client.invoke_sync(broker.address, send_request(TOPIC, b"y" * 100)).code == 0
        heartbeat(client, broker.address)
        first = _scrape(url)
        assert _metric(first, "rocketmq_messages_in_total", topic=TOPIC) == 5
        assert _metric(first, "rocketmq_throughput_in_total", topic=TOPIC) > 500
        assert _metric(first, "rocketmq_consumer_connections") == 1
        assert _metric(first, "rocketmq_storage_size") > 0
        assert pull(client, broker.address, TOPIC, 0, 0, max_nums=2).code == 0
        update_offset(client, broker.address, 2)
        for _ in range(3):
            assert client.invoke_sync(broker.address, send_request(TOPIC, b"y" * 100)).code == 0
        second = _scrape(url)
        assert _metric(second, "rocketmq_messages_in_total", topic=TOPIC) == 8
        assert _metric(second, "rocketmq_messages_out_total", topic=TOPIC, consumer_group=GROUP) == 2
        assert _metric(second, "rocketmq_consumer_lag_messages", topic=TOPIC, consumer_group=GROUP) == 6


def test_topics_by_cluster_and_delete_topic_in_namesrv(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from rmq_core.remoting.body.route import TopicList
    from rmq_core.remoting.header import DeleteTopicFromNamesrvRequestHeader, GetTopicsByClusterRequestHeader

    with (
        NameServer(listen_port=0) as ns,
        BlockingRemotingClient() as client,
        Broker(
            BrokerConfig(
                listen_port=0,
                store_path_root_dir=str(tmp_path / "broker"),
                namesrv_addr=ns.address,
                broker_name="broker-a",
                **SMALL_FILES,
            )
        ) as broker,
    ):
        add_topic(broker, "ClusterTopic")

        def topics(cluster: str) -> set[str]:
            r = _call(client, ns.address, RequestCode.GET_TOPICS_BY_CLUSTER, GetTopicsByClusterRequestHeader(cluster))
            assert r.code == 0, r.remark
            return TopicList.decode(bytes(r.body)).topic_list

        deadline = time.monotonic() + 10
        while "ClusterTopic" not in topics("DefaultCluster"):
            assert time.monotonic() < deadline, "the broker never registered the topic"
            time.sleep(0.05)
        assert topics("OtherCluster") == set()
        h = DeleteTopicFromNamesrvRequestHeader(topic="ClusterTopic", clusterName="DefaultCluster")
        assert _call(client, ns.address, RequestCode.DELETE_TOPIC_IN_NAMESRV, h).code == 0
        assert "ClusterTopic" not in topics("DefaultCluster")
        r = _call(client, broker.address, RequestCode.VIEW_BROKER_STATS_DATA)
        assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "statsAll" in (r.remark or "")


def test_broker_forwards_reset_offset_and_consumer_status_to_the_group_clients(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) reach a consumer's own
    connection as RESET_CONSUMER_CLIENT_OFFSET (oneway) and GET_CONSUMER_STATUS_FROM_CLIENT; what the client answers
    comes back to the admin, its MessageQueue-keyed table unchanged."""
    from rmq_core.remoting.header import GetConsumerStatusRequestHeader, ResetOffsetRequestHeader

    seen: list[RemotingCommand] = []
    client_table = f'{{{{"brokerName":"broker-a","queueId":0,"topic":"{TOPIC}"}}:5}}'

    async def on_request(conn, request: RemotingCommand):  # type: ignore[no-untyped-def]
        seen.append(request)
        if request.code == RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT:
            body = f'{{"consumerTable":{{}},"messageQueueTable":{client_table}}}'.encode()
            return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)
        return None

    with (
        running_broker(tmp_path) as broker,
        BlockingRemotingClient(request_handler=on_request) as consumer,
        BlockingRemotingClient() as admin,
    ):
        add_topic(broker, TOPIC, queues=1)
        for _ in range(4):
            assert admin.invoke_sync(broker.address, send_request(TOPIC, b"z")).code == 0
        heartbeat(consumer, broker.address)
        update_offset(consumer, broker.address, 3)
        h = GetConsumerStatusRequestHeader(topic=TOPIC, group=GROUP)
        r = _call(admin, broker.address, RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, h)
        assert r.code == 0, r.remark
        assert (
            bytes(r.body).decode()
            == f'{{"consumerTable":{{"127.0.0.1@test":{client_table}}},"messageQueueTable":{{}}}}'
        )
        reset = ResetOffsetRequestHeader(topic=TOPIC, group=GROUP, timestamp=-1, isForce=False)
        r = _call(admin, broker.address, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset)
        expected = f'{{"offsetTable":{{{{"brokerName":"broker-a","queueId":0,"topic":"{TOPIC}"}}:3}}}}'
        assert r.code == 0 and bytes(r.body).decode() == expected  # not forced: the committed 3 is before max 4
        deadline = time.monotonic() + 5
        while not any(c.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET for c in seen):
            assert time.monotonic() < deadline, "the client never got RESET_CONSUMER_CLIENT_OFFSET"
            time.sleep(0.02)
        got = next(c for c in seen if c.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET)
        assert got.ext_fields["group"] == GROUP and bytes(got.body).decode() == expected
        r = _call(
            admin,
            broker.address,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
            ResetOffsetRequestHeader(topic=TOPIC, group="nobody", timestamp=-1, isForce=True),
        )
        assert r.code == ResponseCode.SYSTEM_ERROR and r.remark == "THe consumer group <nobody> not exist"


def test_producer_connection_list_of_a_live_producer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from rmq_core.remoting.header import GetProducerConnectionListRequestHeader

    with running_broker(tmp_path) as broker, BlockingRemotingClient() as client:
        body = {"clientID": "127.0.0.1@producer", "producerDataSet": [{"groupName": "PG1"}], "consumerDataSet": []}
        r = client.invoke_sync(
            broker.address, RemotingCommand.request(RequestCode.HEART_BEAT, body=json.dumps(body).encode())
        )
        assert r.code == 0, r.remark
        h = GetProducerConnectionListRequestHeader(producerGroup="PG1")
        r = _call(client, broker.address, RequestCode.GET_PRODUCER_CONNECTION_LIST, h)
        conns = json.loads(bytes(r.body))["connectionSet"]
        assert r.code == 0 and [(c["clientId"], c["version"] > 0) for c in conns] == [("127.0.0.1@producer", True)]
        assert re.fullmatch(r"127\.0\.0\.1:\d+", conns[0]["clientAddr"])
        r = _call(
            client,
            broker.address,
            RequestCode.GET_PRODUCER_CONNECTION_LIST,
            GetProducerConnectionListRequestHeader(producerGroup="nobody"),
        )
        assert r.code == ResponseCode.SYSTEM_ERROR and r.remark == "the producer group[nobody] not exist"


def test_broker_permission_update_reaches_the_routes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """UPDATE_BROKER_CONFIG brokerPermission=4 (read only) re-registers at once with every topic's perm replaced by
    the broker's, as 4.9's registerBrokerAll does; 6 again restores the topics' own perm."""
    from rmq_core.remoting.body.route import TopicRouteData
    from rmq_core.remoting.header import GetRouteInfoRequestHeader

    with (
        NameServer(listen_port=0) as ns,
        BlockingRemotingClient() as client,
        Broker(
            BrokerConfig(
                listen_port=0,
                store_path_root_dir=str(tmp_path / "broker"),
                namesrv_addr=ns.address,
                broker_name="broker-a",
                **SMALL_FILES,
            )
        ) as broker,
    ):
        add_topic(broker, "PermTopic")

        def perm() -> int | None:
            r = _call(
                client, ns.address, RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic="PermTopic")
            )
            return TopicRouteData.decode(r.body).queue_datas[0].perm if r.code == 0 else None

        def wait_perm(expected: int) -> None:
            deadline = time.monotonic() + 10
            while perm() != expected:
                assert time.monotonic() < deadline, f"route perm never became {expected} (is {perm()})"
                time.sleep(0.05)

        wait_perm(6)
        assert _call(client, broker.address, RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4").code == 0
        wait_perm(4)
        assert _call(client, broker.address, RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=6").code == 0
        wait_perm(6)


def test_all_subscription_groups_and_topic_consumed_by_who(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from rmq_core.remoting.header import QueryTopicConsumeByWhoRequestHeader

    with running_broker(tmp_path) as broker, BlockingRemotingClient() as client:
        add_topic(broker, TOPIC)
        heartbeat(client, broker.address)
        r = _call(client, broker.address, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        doc = fastjson.loads(bytes(r.body), int_keys=False)
        assert r.code == 0 and set(doc) == {"subscriptionGroupTable", "dataVersion"}
        assert doc["subscriptionGroupTable"][GROUP]["groupName"] == GROUP
        update_offset(client, broker.address, 1, group="OffsetOnlyGroup")
        h = QueryTopicConsumeByWhoRequestHeader(topic=TOPIC)
        r = _call(client, broker.address, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, h)
        assert json.loads(bytes(r.body)) == {"groupList": sorted([GROUP, "OffsetOnlyGroup"])}
