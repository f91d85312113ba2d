"""``rmq-core admin`` as a process against rmq_core and Apache RocketMQ 4.9.7 in the same run: the same messages and
offsets on both sides, the same figures in the tables (cluster-list, topic-status, consumer-progress with lag and
totals, query-by-id, reset-offset-by-time through mqadmin's old way when no consumer is online and through the broker
when one is); plus the table layout and the timestamp forms without a broker.

Run with ``-m apache_broker`` (needs java and mvn; RMQ_COMPAT_JAVA=0 skips)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rmq_core.admin_cli import parse_timestamp, render_table
from rmq_core.broker import Broker, BrokerConfig
from rmq_core.client import Producer
from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI
from rmq_core.message import Message, MessageQueue
from rmq_core.namesrv import NameServer
from rmq_core.remoting import fastjson
from rmq_core.remoting.body.queue_offsets import (
    ConsumeStats,
    OffsetWrapper,
    ResetOffsetBody,
    TopicOffset,
    TopicStatsTable,
)
from rmq_core.remoting.body.route import BodyDecodeError
from rmq_core.remoting.header import UpdateConsumerOffsetRequestHeader

from support.admin_helpers import wait_for_route
from support.helpers import subprocess_env, wait_until

CLI = [sys.executable, "-m", "rmq_core.cli", "admin"]
TOPIC = "AdminCliT"
GROUP = "admin_cli_g"
COUNT = 40


def admin(namesrv: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args, "-n", namesrv], capture_output=True, text=True, env=subprocess_env(), timeout=60
    )


def table(out: str) -> tuple[list[dict[str, str]], dict[str, str] | None]:
    """The rows (header → cell) of the first table in ``out`` and its footer (None without one)."""
    lines = out.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("---"))
    rule = lines[i]
    spans = [(m.start(), m.end()) for m in re.finditer(r"-+", rule)]

    def cells(ln: str) -> list[str]:
        # a cell is the text under its rule segment (right-aligned numbers may start left of it)
        out_cells = []
        for n, (a, b) in enumerate(spans):
            start = spans[n - 1][1] if n else 0
            end = b if n + 1 < len(spans) else len(ln)
            out_cells.append(ln[start:end].strip() if a >= 0 else "")
        return out_cells

    headers = cells(lines[i - 1])
    rows, footer = [], None
    for k in range(i + 1, len(lines)):
        ln = lines[k]
        if ln.startswith("---"):
            footer = dict(zip(headers, cells(lines[k + 1]), strict=True))
            break
        if not ln.strip() or not ln.startswith(
            tuple(" ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789%")
        ):
            break
        rows.append(dict(zip(headers, cells(ln), strict=True)))
    return rows, footer


def num(cell: str) -> int:
    return int(cell.replace(",", ""))


# --- without a broker --------------------------------------------------------------------------------------------
def test_render_table_aligns_numbers_right_and_text_left() -> None:
    out = render_table(["Name", "Count"], [["a", "1,234"], ["long name", "5"]], ["total", "1,239"])
    assert out.splitlines() == [
        "Name       Count",
        "---------  -----",
        "a          1,234",
        "long name      5",
        "---------  -----",
        "total      1,239",
    ]


def test_parse_timestamp_forms() -> None:
    assert parse_timestamp("1700000000000") == 1_700_000_000_000
    local = int(time.mktime((2026, 11, 24, 14, 0, 0, 0, 0, -1)) * 1000)
    assert parse_timestamp("2026-11-24T14:00:00") == local
    assert parse_timestamp("2026-11-24#14:00:00:250") == local + 250
    assert parse_timestamp("2026-11-24T14:00:00+00:00") == 1_795_528_800_000
    assert abs(parse_timestamp("now") - time.time() * 1000) < 5000
    r = subprocess.run(
        [*CLI, "reset-offset-by-time", "-g", "g", "-t", "t", "-s", "yesterday"],
        capture_output=True,
        text=True,
        env=subprocess_env(),
    )
    assert r.returncode == 2 and "is not a timestamp" in r.stderr


def test_message_queue_keyed_bodies_read_back() -> None:
    """The admin bodies fastjson writes with MessageQueue keys decode to what was encoded; a bad body is an error."""
    a, b = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)
    cs = ConsumeStats({a: OffsetWrapper(10, 4, 1_700_000_000_000), b: OffsetWrapper(3, 3, 0)}, 2.5)
    assert ConsumeStats.decode(cs.encode()) == cs
    ts = TopicStatsTable({a: TopicOffset(1, 9, 5)})
    assert TopicStatsTable.decode(ts.encode()) == ts
    assert ResetOffsetBody.decode(ResetOffsetBody({b: 7}).encode()) == ResetOffsetBody({b: 7})
    assert fastjson.map_items('{ {"k":[1,"}"]} : {"v":"a,b"} , 3:4 }') == [({"k": [1, "}"]}, {"v": "a,b"}), (3, 4)]
    assert fastjson.map_items("{}") == []
    with pytest.raises(BodyDecodeError):
        ConsumeStats.decode(b'{"offsetTable":{{"topic":"T"} 1}}')


# --- against both brokers ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    from support.apache_rocketmq import ApacheRocketMQ

    root = tmp_path_factory.mktemp("admin-cli")
    ns = NameServer(listen_port=0).start()
    cfg = BrokerConfig(
        broker_ip1="127.0.0.1",
        listen_port=0,
        namesrv_addr=ns.address,
        broker_name="broker-a",
        store_path_root_dir=str(root / "ours"),
        mapped_file_size_commit_log=16 * 1024 * 1024,
        mapped_file_size_consume_queue=6000 * 20,
    )
    broker = Broker(cfg).start()
    apache = ApacheRocketMQ(str(root / "apache"))
    try:
        apache.start()
        wait_for_route(ns.address, "TBW102")
        out = {}
        for name, namesrv in (("rmq_core", ns.address), ("apache", apache.namesrv_addr)):
            out[name] = {"namesrv": namesrv, "sends": _populate(namesrv)}
        yield out
    finally:
        apache.stop()
        broker.shutdown()
        ns.shutdown()


def _populate(namesrv: str) -> list[Any]:
    """COUNT messages over the topic's 4 queues, and the group's offsets committed at 2 on every queue."""
    p = Producer("admin_cli_producer", namesrv_addr=namesrv, instance_name=f"admin-cli-{namesrv}")
    p.start()
    try:
        sends = [p.send(Message(TOPIC, f"body-{i}".encode(), tags="TagA", keys=f"key-{i}")) for i in range(COUNT)]
    finally:
        p.shutdown()
    assert all(s.send_status.name == "SEND_OK" for s in sends)
    with BlockingMQClientAPI(namesrv) as api:
        route = api.get_topic_route_info_from_name_server(TOPIC)
        addr = route.broker_datas[0].broker_addrs[0]
        for q in range(route.queue_datas[0].read_queue_nums):
            api.update_consumer_offset(
                addr, UpdateConsumerOffsetRequestHeader(consumerGroup=GROUP, topic=TOPIC, queueId=q, commitOffset=2)
            )
    return sends


@pytest.mark.apache_broker
def test_cluster_list(sides) -> None:
    for name, side in sides.items():
        # Apache 4.9.7 answers GET_BROKER_RUNTIME_INFO with a NoSuchElementException (LinkedList.getLast on its
        # empty stats snapshots) until its stats sampler has run once after start: ask again for up to 60 s
        deadline = time.monotonic() + 60
        r = admin(side["namesrv"], "cluster-list")
        while r.returncode != 0 and "LinkedList.getLast" in r.stdout and time.monotonic() < deadline:
            time.sleep(2)
            r = admin(side["namesrv"], "cluster-list")
        assert r.returncode == 0, (name, r.stdout, r.stderr)
        rows, _ = table(r.stdout)
        assert len(rows) == 1, (name, r.stdout)
        row = rows[0]
        assert row["Cluster"] == "DefaultCluster" and row["Broker"] == "broker-a" and row["BID"] == "0"
        assert re.fullmatch(r"V4_9_\d+", row["Version"]), (name, row)
        assert num(row["In today"]) >= COUNT, (name, row)
        assert re.fullmatch(r"\d+(\.\d)?%", row["Disk used"]) and row["Uptime"] != "-", (name, row)


@pytest.mark.apache_broker
def test_topic_status(sides) -> None:
    figures = {}
    for name, side in sides.items():
        r = admin(side["namesrv"], "topic-status", "-t", TOPIC)
        assert r.returncode == 0, (name, r.stdout, r.stderr)
        rows, footer = table(r.stdout)
        assert footer is not None and num(footer["Messages"]) == COUNT, (name, r.stdout)
        per_queue = {int(row["Queue"]): (num(row["Min offset"]), num(row["Max offset"])) for row in rows}
        sent = {q: sum(1 for s in side["sends"] if s.message_queue.queue_id == q) for q in per_queue}
        assert per_queue == {q: (0, n) for q, n in sent.items()}, (name, r.stdout)
        assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", row["Last updated"]) for row in rows)
        figures[name] = (len(per_queue), num(footer["Messages"]))
    # which queue each send went to is the producer's round robin from a random start: compare queues and totals
    assert figures["rmq_core"] == figures["apache"] == (4, COUNT)


def _progress(namesrv: str) -> tuple[list[dict[str, str]], dict[str, str] | None, str]:
    r = admin(namesrv, "consumer-progress", "-g", GROUP)
    assert r.returncode == 0, (r.stdout, r.stderr)
    rows, footer = table(r.stdout)
    return rows, footer, r.stdout


@pytest.mark.apache_broker
def test_consumer_progress_and_reset_offset_by_time(sides) -> None:
    for name, side in sides.items():
        rows, footer, out = _progress(side["namesrv"])
        assert len(rows) == 4 and all(row["Topic"] == TOPIC for row in rows), (name, out)
        for row in rows:
            assert num(row["Consumer offset"]) == 2, (name, out)
            assert num(row["Lag"]) == num(row["Broker offset"]) - 2
        assert footer is not None and num(footer["Lag"]) == COUNT - 8, (name, out)
        assert f"total lag {COUNT - 8:,}" in out

        # nobody online: CONSUMER_NOT_ONLINE, then mqadmin's old way (search by time, commit)
        r = admin(side["namesrv"], "reset-offset-by-time", "-g", GROUP, "-t", TOPIC, "-s", "0")
        assert r.returncode == 0, (name, r.stdout, r.stderr)
        reset, _ = table(r.stdout)
        assert [(num(x["Old offset"]), num(x["New offset"]), x["How"]) for x in reset] == [(2, 0, "committed")] * 4
        _rows, footer, out = _progress(side["namesrv"])
        assert footer is not None and num(footer["Lag"]) == COUNT, (name, out)


def _reset_with_consumer_online(name: str, namesrv: str, log_dir: str) -> None:
    """Apache's Java push consumer (4.9.7, compat/java), which takes RESET_CONSUMER_CLIENT_OFFSET: it reads the
    topic, the reset goes through the broker to it, and it reads everything again."""
    from support.java_compat import JavaProgram

    group = f"admin_cli_online_{name}"
    args = ["--namesrv", namesrv, "--group", group, "--topic", TOPIC, "--expect", 2 * COUNT, "--timeout-ms", 90000]
    consumer = JavaProgram("PushConsume", args, log_dir)
    try:
        for _ in range(COUNT):
            consumer.next_event("msg", timeout=60)
        wait_until(
            lambda: "total lag 0" in admin(namesrv, "consumer-progress", "-g", group).stdout,
            f"{name}: the consumer to commit",
            timeout=30,
        )
        r = admin(namesrv, "reset-offset-by-time", "-g", group, "-t", TOPIC, "-s", "0")
        assert r.returncode == 0, (name, r.stdout, r.stderr)
        reset, _ = table(r.stdout)
        assert len(reset) == 4 and all(x["How"] == "clients reset by the broker" for x in reset), r.stdout
        assert all(num(x["New offset"]) == 0 for x in reset), r.stdout
        again = sorted(consumer.next_event("msg", timeout=60)["body"] for _ in range(COUNT))
        assert again == sorted(f"body-{i}" for i in range(COUNT)), (name, again)
        consumer.wait(timeout=60)
    finally:
        consumer.kill()


@pytest.mark.apache_broker
def test_reset_offset_by_time_with_a_consumer_online(sides, tmp_path) -> None:
    for name, side in sides.items():
        _reset_with_consumer_online(name, side["namesrv"], str(tmp_path / name))


@pytest.mark.apache_broker
def test_query_by_id(sides) -> None:
    for name, side in sides.items():
        s = side["sends"][7]
        r = admin(side["namesrv"], "query-by-id", s.offset_msg_id)
        assert r.returncode == 0, (name, r.stdout, r.stderr)
        fields = dict(re.split(r"\s{2,}", ln.strip(), maxsplit=1) for ln in r.stdout.splitlines() if "  " in ln)
        assert fields["Topic"] == TOPIC and fields["Keys"] == "key-7" and fields["Tags"] == "TagA"
        assert fields["Message id"] == s.msg_id and fields["Offset message id"] == s.offset_msg_id
        assert fields["Queue"] == f"{s.message_queue.queue_id} at offset {s.queue_offset:,}"
        assert "'body-7'" in fields["Body"]
        bad = admin(side["namesrv"], "query-by-id", "NOT-AN-ID")
        assert bad.returncode == 2 and "needs -t TOPIC" in bad.stderr


@pytest.mark.apache_broker
def test_query_by_key_and_by_unique_id(sides) -> None:
    """query-by-key finds the one message with that key (QUERY_MESSAGE, the index files) on both brokers; query-by-id
    with a client message id (UNIQ_KEY) and -t finds it by unique key; an unknown key says so."""
    for name, side in sides.items():
        s = side["sends"][5]
        r = admin(side["namesrv"], "query-by-key", "-t", TOPIC, "-k", "key-5")
        assert r.returncode == 0, (name, r.stdout, r.stderr)
        rows = [ln for ln in r.stdout.splitlines() if s.msg_id in ln]
        assert len(rows) == 1 and "key-5" in rows[0], (name, r.stdout)
        r = admin(side["namesrv"], "query-by-id", s.msg_id, "-t", TOPIC)
        assert r.returncode == 0, (name, r.stdout, r.stderr)
        assert "'body-5'" in r.stdout, (name, r.stdout)
        none = admin(side["namesrv"], "query-by-key", "-t", TOPIC, "-k", "no-such-key")
        assert none.returncode == 1 and "no message with key no-such-key" in none.stdout, (name, none.stdout)
