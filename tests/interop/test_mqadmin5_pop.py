"""Apache's ``mqadmin`` 5.3.3 (rocketmq-tools 5.3.3, compat/apache/build.sh 5.3.3) on a POP consumer group, through
rmq_core's broker and through Apache RocketMQ 5.3.3's broker (the control) in the same run: topicStatus and
consumerProgress (both ask GET_TOPIC_CONFIG, 351, first), consumerConnection, topicRoute and the all-groups
consumerProgress; last resetOffsetByTime, after which the group pops everything again. The group: a consumer heartbeat (its connection held open; the heartbeat creates %RETRY%group,
which 5.x mqadmin routes), 4 messages popped with raw POP_MESSAGE frames, 2 acked.

Departure shown on purpose (docs/POP_DESIGN.md): rmq_core answers the ack frontier as the consumer offset, so the
popped-not-acked messages count in ``#Diff`` and ``#Inflight``; Apache answers the pop offset (in flight 0).

Marked ``apache_broker``: needs Java, Maven and the 5.3.3 jars. One JVM per mqadmin command, run side by side.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from rmq_core.broker import Broker
from rmq_core.namesrv import NameServer
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.admin_helpers import wait_for_route
from support.apache5_store import APACHE_5, apache5, rmq_config
from support.mqadmin import parse_table, run_mqadmin
from support.pop_frames import pop_all, send_and_pop
from support.pull_helpers import heartbeat, subscription_json

pytestmark = pytest.mark.apache_broker

TOPIC = "Admin5PopTopic"
GROUP = "admin5_pop_group"
COMMANDS = {
    "topicStatus": ("topicStatus", "-t", TOPIC),
    "topicRoute": ("topicRoute", "-t", TOPIC),
    "progress": ("consumerProgress", "-g", GROUP),
    "progressAll": ("consumerProgress",),
    "connection": ("consumerConnection", "-g", GROUP),
}


@dataclass
class Outputs:
    rmq_core: dict[str, str]
    apache: dict[str, str]
    # per side: (name server, broker, the group's client: its heartbeat keeps the group online)
    live: dict[str, tuple[str, str, BlockingRemotingClient]]


def _group(client: BlockingRemotingClient, addr: str) -> set[bytes]:
    heartbeat(client, addr, GROUP, [subscription_json(TOPIC)])
    _acked, unacked = send_and_pop(client, addr, TOPIC, GROUP, invisible=300_000)
    return unacked


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outputs]:
    tmp = tmp_path_factory.mktemp("mqadmin5")
    server = apache5(str(tmp / "apache"), APACHE_5)
    cfg = rmq_config(str(tmp / "rmq"))
    with NameServer(listen_port=0) as ns, BlockingRemotingClient() as rc, BlockingRemotingClient() as ac:
        cfg.namesrv_addr = ns.address
        with Broker(cfg) as b, server:
            wait_for_route(ns.address, "TBW102", timeout=30)
            wait_for_route(server.namesrv_addr, "TBW102", timeout=60)
            _group(rc, b.address)
            _group(ac, server.broker_addr)
            wait_for_route(ns.address, f"%RETRY%{GROUP}", timeout=30)
            wait_for_route(server.namesrv_addr, f"%RETRY%{GROUP}", timeout=60)
            sides = (("rmq_core", ns.address), ("apache", server.namesrv_addr))
            with ThreadPoolExecutor(max_workers=min(len(COMMANDS) * 2, os.cpu_count() or 2)) as pool:
                futures = {
                    (side, key): pool.submit(run_mqadmin, addr, *cmd, version=APACHE_5)
                    for side, addr in sides
                    for key, cmd in COMMANDS.items()
                }
                res = {k: f.result() for k, f in futures.items()}
            yield Outputs(
                rmq_core={k: v for (s, k), v in res.items() if s == "rmq_core"},
                apache={k: v for (s, k), v in res.items() if s == "apache"},
                live={"rmq_core": (ns.address, b.address, rc), "apache": (server.namesrv_addr, server.broker_addr, ac)},
            )


def _by_queue(text: str, first: str) -> dict[str, dict[str, str]]:
    return {r["#QID"]: r for r in parse_table(text, first)}


def test_topic_status(outputs: Outputs) -> None:
    ours, theirs = (_by_queue(o["topicStatus"], "#Broker Name") for o in (outputs.rmq_core, outputs.apache))
    assert sorted(ours) == sorted(theirs) == ["0", "1", "2", "3"]
    for q in ours:
        assert (ours[q]["#Min Offset"], ours[q]["#Max Offset"]) == (theirs[q]["#Min Offset"], theirs[q]["#Max Offset"])
    assert [ours[q]["#Max Offset"] for q in "0123"] == ["2", "2", "0", "0"]


def test_topic_route(outputs: Outputs) -> None:
    for text in (outputs.rmq_core["topicRoute"], outputs.apache["topicRoute"]):
        assert '"readQueueNums":4' in text and '"writeQueueNums":4' in text and '"brokerName":"broker-a"' in text


def test_consumer_progress_of_the_pop_group(outputs: Outputs) -> None:
    ours, theirs = (_by_queue(o["progress"], "#Topic") for o in (outputs.rmq_core, outputs.apache))
    assert sorted(ours) == sorted(theirs) == ["0", "1", "2", "3"]
    for q in ours:
        assert ours[q]["#Broker Offset"] == theirs[q]["#Broker Offset"]
        assert theirs[q]["#Consumer Offset"] == theirs[q]["#Broker Offset"]  # Apache: the pop offset
    # rmq_core: the 2 popped and not acked are lag and in flight (the ack frontier as consumer offset)
    assert sum(int(r["#Diff"]) for r in ours.values()) == 2
    assert sum(int(r["#Inflight"]) for r in ours.values()) == 2
    assert "Consume Inflight Total: 2" in outputs.rmq_core["progress"]
    assert "Consume Inflight Total: 0" in outputs.apache["progress"]


def test_consumer_progress_of_all_groups(outputs: Outputs) -> None:
    for name, o in (("rmq_core", outputs.rmq_core), ("apache", outputs.apache)):
        rows = {r["#Group"]: r for r in parse_table(o["progressAll"], "#Group")}
        assert GROUP in rows, (name, o["progressAll"])
        assert (rows[GROUP]["#Count"], rows[GROUP]["#Type"], rows[GROUP]["#Model"]) == ("1", "PUSH", "CLUSTERING")
    assert {r["#Group"]: r for r in parse_table(outputs.rmq_core["progressAll"], "#Group")}[GROUP]["#Diff Total"] == "2"


def test_consumer_connection(outputs: Outputs) -> None:
    for o in (outputs.rmq_core, outputs.apache):
        text = o["connection"]
        rows = parse_table(text, "#ClientId")
        assert [r["#ClientId"] for r in rows] == ["127.0.0.1@test"], text
        assert "ConsumeType: CONSUME_PASSIVELY" in text and "MessageModel: CLUSTERING" in text
        sub = parse_table(text, "#Topic")
        assert [(r["#Topic"], r["#SubExpression"]) for r in sub] == [(TOPIC, "*")]


def test_reset_offset_by_time_pops_everything_again(outputs: Outputs) -> None:
    """mqadmin 5.x resetOffsetByTime -s 0 on the POP group (runs last: it moves the group's offsets): the next pops
    get all 4 messages again on both brokers (Apache 5.3: server-side reset applied at the next pop)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = {
            side: pool.submit(run_mqadmin, ns, "resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", 0, version=APACHE_5)
            for side, (ns, _b, _c) in outputs.live.items()
        }
        for side, f in runs.items():
            assert len(parse_table(f.result(), "#brokerName")) == 4, (side, f.result())
    for side, (_ns, broker, client) in outputs.live.items():
        got = pop_all(client, broker, TOPIC, GROUP, 4, invisible=300_000, timeout=20)
        assert sorted(m.body for _, m in got) == [b"p0", b"p1", b"p2", b"p3"], side
