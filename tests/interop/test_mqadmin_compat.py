"""Apache's own ``mqadmin`` (rocketmq-tools 4.9.7) against rmq_core and against Apache RocketMQ 4.9.7 in the same run:
the same scenario on both (a topic created with ``updateTopic``, 20 messages sent by Apache's Java client 4.9.7 with
keys, a live Java push consumer in group ``G`` that received them all), then every admin command of the table below
on both, comparing the fields of what each prints — never timestamps, addresses or ports, which differ by nature.

Both servers run for the whole module (the Apache pair through tests/support/apache_rocketmq.py; rmq_core's NameServer and
Broker in this process). Marked ``apache_broker``: they need Java, Maven and the jars compat/apache/build.sh fetches.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.namesrv import NameServer

from support.apache_rocketmq import ApacheRocketMQ
from support.java_compat import JavaProgram, run_java
from support.mqadmin import parse_kv, parse_table, run_mqadmin

pytestmark = pytest.mark.apache_broker

TOPIC = "AdminTopic"
GROUP = "AdminGroup"
CLUSTER = "DefaultCluster"
BROKER_NAME = "broker-a"
COUNT = 20


@dataclass
class Side:
    """One server pair under test and what the scenario did on it."""

    name: str
    namesrv: str
    broker_addr: str
    sends: list[dict[str, object]]


def _scenario(namesrv: str, broker_addr: str, log_dir: str) -> tuple[list[dict[str, object]], JavaProgram]:
    run_mqadmin(namesrv, "updateTopic", "-c", CLUSTER, "-t", TOPIC, "-r", 4, "-w", 4)
    deadline = time.monotonic() + 30
    while "AdminTopic" not in run_mqadmin(namesrv, "topicList"):
        assert time.monotonic() < deadline, "the topic never reached the name server"
        time.sleep(0.5)
    sends = [
        line
        for line in run_java(
            "Produce",
            ["--namesrv", namesrv, "--topic", TOPIC, "--count", COUNT, "--group", "AdminProducer"],
            os.path.join(log_dir, "produce"),
        )
        if line["event"] == "send"
    ]
    assert len(sends) == COUNT and all(s["status"] == "SEND_OK" for s in sends)
    consumer = JavaProgram(
        "PushConsume",
        ["--namesrv", namesrv, "--group", GROUP, "--topic", TOPIC, "--expect", 1000, "--timeout-ms", 600_000],
        os.path.join(log_dir, "consume"),
    )
    for _ in range(COUNT):
        consumer.next_event("msg", timeout=60)
    return sends, consumer


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Side]]:
    root = tmp_path_factory.mktemp("mqadmin")
    apache = ApacheRocketMQ(str(root / "apache"))
    consumers: list[JavaProgram] = []
    with NameServer(listen_port=0) as ns:
        config = BrokerConfig(
            broker_name=BROKER_NAME,
            broker_cluster_name=CLUSTER,
            listen_port=0,
            namesrv_addr=ns.address,
            store_path_root_dir=str(root / "rmq-store"),
            mapped_file_size_commit_log=16 * 1024 * 1024,
            mapped_file_size_consume_queue=6000 * 20,
        )
        with Broker(config) as broker:
            apache.start()
            try:
                out: dict[str, Side] = {}
                for name, namesrv, addr in (
                    ("rmq_core", ns.address, broker.address),
                    ("apache", apache.namesrv_addr, apache.broker_addr),
                ):
                    sends, consumer = _scenario(namesrv, addr, str(root / f"{name}-java"))
                    consumers.append(consumer)
                    out[name] = Side(name, namesrv, addr, sends)
                time.sleep(6)  # the consumers persist their offsets every 5 s
                yield out
            finally:
                for c in consumers:
                    c.kill()
                apache.stop()


def both(sides: dict[str, Side], command: str, *args: object, **kw: object) -> dict[str, str]:
    """Run one mqadmin command on both sides; ``{side: stdout}``. ``{broker}`` in an argument is the side's broker
    address."""
    out = {}
    for name, side in sides.items():
        real = [str(a).replace("{broker}", side.broker_addr) for a in args]
        out[name] = run_mqadmin(side.namesrv, command, *real, **kw)  # type: ignore[arg-type]
    return out


def _config_lines(text: str) -> dict[str, str]:
    """getBrokerConfig's ``%-50s=  %s`` lines."""
    out = {}
    for ln in text.splitlines():
        m = re.match(r"^(\S+)\s*=  (.*)$", ln)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def test_cluster_list(sides: dict[str, Side]) -> None:
    res = both(sides, "clusterList")
    for name, text in res.items():
        lines = [ln for ln in text.splitlines()[1:] if ln.strip()]
        assert len(lines) == 1, (name, text)
        header = ["#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)", "#OutTPS(LOAD)"]
        header += ["#PCWait(ms)", "#Hour", "#SPACE"]
        row = dict(zip(header, lines[0].split(), strict=True))
        assert (row["#Cluster Name"], row["#Broker Name"], row["#BID"]) == (CLUSTER, BROKER_NAME, "0"), name
        assert re.fullmatch(r"V4_9_\d+", row["#Version"]), (name, row)
        for col in ("#InTPS(LOAD)", "#OutTPS(LOAD)"):
            assert re.fullmatch(r"\d+\.\d\d\(0,0ms\)", row[col]), (name, col, row[col])
        assert row["#PCWait(ms)"] == "0", name
        assert 0.0 < float(row["#SPACE"]) < 1.0, name


def test_broker_status(sides: dict[str, Side]) -> None:
    res = both(sides, "brokerStatus", "-b", "{broker}")
    kv = {name: parse_kv(text) for name, text in res.items()}
    ours, theirs = kv["rmq_core"], kv["apache"]
    # every key rmq_core reports is one 4.9.7 reports (the per-path disk ratio key names a different directory)
    strip = {k.split("_/")[0] for k in ours} - {k.split("_/")[0] for k in theirs}
    assert not strip, strip
    for key in ("msgPutTotalTodayNow", "msgGetTotalTodayNow", "putMessageTimesTotal", "commitLogMinOffset"):
        assert ours[key] == theirs[key], (key, ours[key], theirs[key])
    assert ours["msgPutTotalTodayNow"] == str(COUNT)
    for key in ("putTps", "getTransferedTps", "getTotalTps"):
        assert re.fullmatch(r"[\d.]+( [\d.]*){0,2}\s*", ours[key]), (key, ours[key])
    assert int(ours["commitLogMaxOffset"]) > 0 and 0 < float(ours["commitLogDiskRatio"]) < 1
    assert re.fullmatch(r"V4_9_\d+", ours["brokerVersionDesc"]) and ours["runtime"].startswith("[ 0 days")
    assert int(ours["bootTimestamp"]) > 1_600_000_000_000
    missing = sorted({k.split("_/")[0] for k in theirs} - {k.split("_/")[0] for k in ours})
    print("brokerStatus keys Apache reports and rmq_core does not:", missing)


def test_topic_status(sides: dict[str, Side]) -> None:
    res = both(sides, "topicStatus", "-t", TOPIC)
    rows = {name: parse_table(text) for name, text in res.items()}
    for table in rows.values():
        for row in table:
            assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}", row.pop("#Last Updated")), row
    assert rows["rmq_core"] == rows["apache"]
    assert sum(int(r["#Max Offset"]) for r in rows["rmq_core"]) == COUNT


def test_consumer_progress_of_a_group(sides: dict[str, Side]) -> None:
    res = both(sides, "consumerProgress", "-g", GROUP)
    rows = {name: parse_table(text) for name, text in res.items()}
    for table in rows.values():
        for row in table:
            last = row.pop("#LastTime")
            assert last == "N/A" if row["#Consumer Offset"] == "0" else re.fullmatch(r"\d{4}-.*", last), row
    assert rows["rmq_core"] == rows["apache"]
    assert [r["#Topic"] for r in rows["rmq_core"]] == [f"%RETRY%{GROUP}"] + [TOPIC] * 4
    for name, text in res.items():
        assert "Diff Total: 0" in text and re.search(r"Consume TPS: \d+\.\d\d", text), (name, text)


def test_consumer_progress_of_all_groups(sides: dict[str, Side]) -> None:
    res = both(sides, "consumerProgress")
    rows = {name: parse_table(text) for name, text in res.items()}
    assert rows["rmq_core"] == rows["apache"]
    row = next(r for r in rows["rmq_core"] if r["#Group"] == GROUP)
    assert (row["#Count"], row["#Version"], row["#Type"], row["#Model"]) == ("1", "V4_9_7", "PUSH", "CLUSTERING")


def test_consumer_connection(sides: dict[str, Side]) -> None:
    res = both(sides, "consumerConnection", "-g", GROUP)
    for name, text in res.items():
        conns = parse_table(text)
        assert [(c["#Language"], c["#Version"]) for c in conns] == [("JAVA", "V4_9_7")], (name, text)
        assert re.fullmatch(r"\S+@\S+", conns[0]["#ClientId"]) and ":" in conns[0]["#ClientAddr"]
    subs = {name: parse_table(text, "#Topic") for name, text in res.items()}
    assert subs["rmq_core"] == subs["apache"]
    tails = {
        name: [ln for ln in text.splitlines() if re.match(r"^(ConsumeType|MessageModel|ConsumeFromWhere):", ln)]
        for name, text in res.items()
    }
    assert tails["rmq_core"] == tails["apache"] and len(tails["apache"]) == 3


def test_producer_connection_of_a_gone_producer(sides: dict[str, Side]) -> None:
    """The Java producer has shut down: both brokers answer that the group does not exist, with the same remark."""
    res = both(sides, "producerConnection", "-g", "AdminProducer", "-t", TOPIC, check=False)
    for name, text in res.items():
        assert "DESC: the producer group[AdminProducer] not exist" in text, (name, text)


def test_query_msg_by_offset_with_its_track(sides: dict[str, Side]) -> None:
    res = both(sides, "queryMsgByOffset", "-t", TOPIC, "-b", BROKER_NAME, "-i", 0, "-o", 0)
    for name, text in res.items():
        fields = {ln[:20].strip().rstrip(":"): ln[20:].strip() for ln in text.splitlines() if len(ln) > 20}
        assert fields["Topic"] == TOPIC and fields["Queue ID"] == "0" and fields["Queue Offset"] == "0", name
        assert f"MessageTrack [consumerGroup={GROUP}, trackType=CONSUMED, exceptionDesc=null]" in text, (name, text)


def test_topic_list_by_cluster(sides: dict[str, Side]) -> None:
    res = both(sides, "topicList", "-c")
    rows = {name: {r["#Topic"]: r for r in parse_table(text)} for name, text in res.items()}
    assert rows["rmq_core"][TOPIC] == rows["apache"][TOPIC]
    assert rows["rmq_core"][TOPIC]["#Consumer Group"] == GROUP
    extra = set(rows["rmq_core"]) - set(rows["apache"])
    missing = set(rows["apache"]) - set(rows["rmq_core"])
    assert not missing, missing
    print("topicList -c: topics only rmq_core lists:", sorted(extra))


# the settings both brokers were given the same way (tests/support/apache_rocketmq.py's broker.conf and the fixture above)
# 4.9 hard-codes the 120 s client channel expiry; metricsPromExporterPort is RocketMQ 5's name (4.9 has no metrics)
RMQ_CORE_ONLY_SETTINGS = {
    "channelExpiredTimeout",
    "metricsPromExporterPort",
    "litePullMessageEnable",
    # RocketMQ 5's timer messages (MessageStoreConfig 5.x, broker/timer/)
    "timerWheelEnable",
    "timerPrecisionMs",
    "timerMaxDelaySec",
    "timerRollWindowSlot",
    "timerFlushIntervalMs",
    "mappedFileSizeTimerLog",
    # RocketMQ 5's retention settings (4.9 reads the two ratios from system properties; store_clean_service.py)
    "diskSpaceWarningLevelRatio",
    "diskSpaceCleanForciblyRatio",
    "deleteFileBatchMax",
    # rmq_core's: plain_acl.yml's path (4.9.7 reads ${rocketmqHome}/conf), the server's connection cap and frame deadline
    "aclFile",
    "serverMaxConnections",
    "serverFrameDeadlineSeconds",
    # rmq_core's gRPC endpoint for RocketMQ 5 clients (Apache serves it from its proxy): broker/grpc/
    "grpcPort",
    "grpcTlsCertFile",
    "grpcTlsKeyFile",
    "grpcTlsSelfSigned",
}  # litePullMessageEnable, the timer and the 5.x retention settings: 5.x's
SAME_SETTINGS = (
    "brokerClusterName",
    "brokerName",
    "brokerId",
    "brokerRole",
    "flushDiskType",
    "brokerIP1",
    "mappedFileSizeCommitLog",
    "mappedFileSizeConsumeQueue",
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
    "brokerPermission",
    "defaultTopicQueueNums",
    "messageDelayLevel",
    # retention (MessageStoreConfig; diskMaxUsedSpaceRatio differs: the Apache side sets 95)
    "deleteWhen",
    "fileReservedTime",
    "cleanResourceInterval",
    "deleteCommitLogFilesInterval",
    "deleteConsumeQueueFilesInterval",
    "cleanFileForciblyEnable",
)


def test_get_broker_config(sides: dict[str, Side]) -> None:
    res = both(sides, "getBrokerConfig", "-b", "{broker}")
    conf = {name: _config_lines(text) for name, text in res.items()}
    ours, theirs = conf["rmq_core"], conf["apache"]
    assert len(ours) > 30
    unknown = sorted(set(ours) - set(theirs) - RMQ_CORE_ONLY_SETTINGS)
    assert not unknown, f"keys 4.9.7 does not have: {unknown}"
    for key in SAME_SETTINGS:
        assert ours[key] == theirs[key], (key, ours[key], theirs[key])
    cluster = both(sides, "getBrokerConfig", "-c", CLUSTER)
    for name, text in cluster.items():
        assert _config_lines(text)["brokerName"] == BROKER_NAME, (name, text)


def test_update_broker_config_applies(sides: dict[str, Side]) -> None:
    both(sides, "updateBrokerConfig", "-b", "{broker}", "-k", "filterSupportRetry", "-v", "true")
    res = both(sides, "getBrokerConfig", "-b", "{broker}")
    for name, text in res.items():
        assert _config_lines(text)["filterSupportRetry"] == "true", name
    both(sides, "updateBrokerConfig", "-b", "{broker}", "-k", "filterSupportRetry", "-v", "false")


def test_delete_expired_commit_log(sides: dict[str, Side]) -> None:
    """DELETE_EXPIRED_COMMITLOG (329): both brokers arm their manual deletion and answer SUCCESS (mqadmin prints
    ``success``); by broker address and by cluster."""
    by_addr = both(sides, "deleteExpiredCommitLog", "-b", "{broker}")
    assert by_addr["rmq_core"] == by_addr["apache"] == "success", by_addr
    by_cluster = both(sides, "deleteExpiredCommitLog", "-c", CLUSTER)
    assert by_cluster["rmq_core"] == by_cluster["apache"] == "success", by_cluster


def test_order_conf_kv_config_on_the_name_server(sides: dict[str, Side]) -> None:
    put = both(sides, "updateOrderConf", "-t", TOPIC, "-m", "put", "-v", f"{BROKER_NAME}:4")
    got = both(sides, "updateOrderConf", "-t", TOPIC, "-m", "get")
    gone = both(sides, "updateOrderConf", "-t", TOPIC, "-m", "delete")
    after = both(sides, "updateOrderConf", "-t", TOPIC, "-m", "get", check=False)
    assert put["rmq_core"] == put["apache"] and "update orderConf success" in put["apache"]
    assert got["rmq_core"] == got["apache"] == f"get orderConf success. topic=[{TOPIC}], orderConf=[{BROKER_NAME}:4] "
    assert gone["rmq_core"] == gone["apache"]
    for name, text in after.items():
        assert "No config item, Namespace: ORDER_TOPIC_CONFIG Key: AdminTopic" in text, (name, text)


def _client_id(side: Side) -> str:
    return parse_table(run_mqadmin(side.namesrv, "consumerConnection", "-g", GROUP))[0]["#ClientId"]


def test_consumer_status_running_info_from_the_client(sides: dict[str, Side]) -> None:
    """GET_CONSUMER_RUNNING_INFO (307) forwarded by the broker to the live Java consumer."""
    res = {
        name: run_mqadmin(side.namesrv, "consumerStatus", "-g", GROUP, "-i", _client_id(side))
        for name, side in sides.items()
    }
    for name, text in res.items():
        assert "#Consumer Properties#" in text and f"{TOPIC}" in text, (name, text)
        assert "#Consumer MQ Detail#" in text, (name, text)


def test_query_msg_by_id_consumed_directly_by_the_client(sides: dict[str, Side]) -> None:
    """CONSUME_MESSAGE_DIRECTLY (309): the broker attaches the message and forwards it to the named client."""
    res = {}
    for name, side in sides.items():
        msg_id = str(side.sends[0]["offsetMsgId"])
        res[name] = run_mqadmin(side.namesrv, "queryMsgById", "-i", msg_id, "-g", GROUP, "-d", _client_id(side))
    for name, text in res.items():
        assert "ConsumeMessageDirectlyResult" in text and "consumeResult=CR_SUCCESS" in text, (name, text)


def test_reset_offset_by_time(sides: dict[str, Side]) -> None:
    """INVOKE_BROKER_TO_RESET_OFFSET (222): rewind the live consumer to before the first message; both brokers answer
    the same table and the consumers commit the rewound offsets (then consume everything again)."""
    res = both(sides, "resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", 1_000_000_000_000, "-f", "true")
    rows = {name: parse_table(text, "#brokerName") for name, text in res.items()}
    assert rows["rmq_core"] == rows["apache"]
    assert sorted(r["#offset"] for r in rows["rmq_core"]) == ["0"] * 4


def test_delete_topic_and_subscription_group(sides: dict[str, Side]) -> None:
    doomed, group = "AdminDoomedTopic", "AdminDoomedGroup"
    for side in sides.values():
        run_mqadmin(side.namesrv, "updateTopic", "-c", CLUSTER, "-t", doomed, "-r", 2, "-w", 2)
        run_mqadmin(side.namesrv, "updateSubGroup", "-c", CLUSTER, "-g", group)
    deadline = time.monotonic() + 30
    while not all(doomed in run_mqadmin(s.namesrv, "topicList") for s in sides.values()):
        assert time.monotonic() < deadline
        time.sleep(0.5)
    deleted = both(sides, "deleteTopic", "-t", doomed, "-c", CLUSTER)
    for name, text in deleted.items():
        assert f"delete topic [{doomed}] from cluster [{CLUSTER}] success." in text, (name, text)
        assert f"delete topic [{doomed}] from NameServer success." in text, (name, text)
        assert doomed not in run_mqadmin(sides[name].namesrv, "topicList")
    groups = both(sides, "deleteSubGroup", "-c", CLUSTER, "-g", group, "-r", "true")
    assert groups["rmq_core"].replace(sides["rmq_core"].broker_addr, "B") == groups["apache"].replace(
        sides["apache"].broker_addr, "B"
    )


def _msg_rows(text: str) -> list[list[str]]:
    """queryMsgByKey's ``%-50s %4d %40d`` rows (a 56-char IPv6 msg id overflows the first column, so split)."""
    return [p for p in (ln.split() for ln in text.splitlines()) if len(p) == 3 and p[1].isdigit() and p[2].isdigit()]


def test_query_msg_by_key(sides: dict[str, Side]) -> None:
    """queryMsgByKey (QUERY_MESSAGE over the index files): the row of message 7 by its key, on both sides; a key no
    message has prints no row on both."""
    rows = {}
    for name, side in sides.items():
        send = side.sends[7]
        text = run_mqadmin(side.namesrv, "queryMsgByKey", "-t", TOPIC, "-k", send["keys"])
        assert text.startswith("#Message ID"), (name, text)
        rows[name] = _msg_rows(text)
        assert rows[name] == [[send["msgId"], str(send["queueId"]), str(send["queueOffset"])]], (name, text)
    res = both(sides, "queryMsgByKey", "-t", TOPIC, "-k", "no-such-key", check=False)
    for name, text in res.items():
        assert _msg_rows(text) == [], (name, text)


def test_query_msg_by_unique_key(sides: dict[str, Side]) -> None:
    """queryMsgByUniqueKey (QUERY_MESSAGE with _UNIQUE_KEY_QUERY): the same fields of message 11 on both sides."""
    fields = {}
    for name, side in sides.items():
        send = side.sends[11]
        text = run_mqadmin(side.namesrv, "queryMsgByUniqueKey", "-t", TOPIC, "-i", send["msgId"])
        f = {ln[:20].strip().rstrip(":"): ln[20:].strip() for ln in text.splitlines() if len(ln) > 20}
        assert f["Topic"] == TOPIC and f["Keys"] == f"[{send['keys']}]", (name, text)
        assert f["Queue ID"] == str(send["queueId"]) and f["Queue Offset"] == str(send["queueOffset"]), (name, text)
        # queue id and offset depend on each side's producer's queue choice: each checked against its send above
        fields[name] = {k: f[k] for k in ("Topic", "Tags", "Keys", "System Flag")}
    assert fields["rmq_core"] == fields["apache"]
