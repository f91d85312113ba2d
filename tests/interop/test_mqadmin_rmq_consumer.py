"""Apache's ``mqadmin`` (rocketmq-tools 4.9.7) on an rmq_core PushConsumer, through rmq_core's broker and through
Apache RocketMQ 4.9.7's broker in the same run: the consumer answers what the broker forwards to it as 4.9's Java
client does — ``consumerStatus`` (GET_CONSUMER_RUNNING_INFO), INVOKE_BROKER_TO_GET_CONSUMER_STATUS
(→ GET_CONSUMER_STATUS_FROM_CLIENT; no mqadmin command sends it), ``queryMsgById -g -d`` (CONSUME_MESSAGE_DIRECTLY)
and ``resetOffsetByTime`` (INVOKE_BROKER_TO_RESET_OFFSET → RESET_CONSUMER_CLIENT_OFFSET: the consumer consumes
everything again and commits the offsets anew); ``consumerProgress`` still shows it.

Marked ``apache_broker``: needs Java, Maven and the jars compat/apache/build.sh fetches.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.client import ConsumeConcurrentlyStatus, ConsumeFromWhere, Producer, PushConsumer
from rmq_core.message import Message
from rmq_core.namesrv import NameServer
from rmq_core.remoting import fastjson
from rmq_core.remoting.body.lock_batch import mq_from_json_dict
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.apache_rocketmq import ApacheRocketMQ
from support.client_helpers_e2e import FAST_CLIENT, wait_until
from support.mqadmin import parse_table, run_mqadmin

pytestmark = pytest.mark.apache_broker

TOPIC = "RmqConsumerAdminTopic"
GROUP = "RmqConsumerAdminGroup"
CLUSTER = "DefaultCluster"
COUNT = 16


@dataclass
class Side:
    name: str
    namesrv: str
    broker_addr: str
    consumer: PushConsumer
    sends: list[Any]
    seen: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def client_id(self) -> str:
        cid = self.consumer.client_id
        assert cid
        return cid

    def count(self) -> int:
        with self.lock:
            return len(self.seen)

    def keys_from(self, start: int) -> list[str]:
        with self.lock:
            return list(self.seen[start:])


def _side(name: str, namesrv: str, broker_addr: str) -> Side:
    run_mqadmin(namesrv, "updateTopic", "-c", CLUSTER, "-t", TOPIC, "-r", 4, "-w", 4)
    wait_until(lambda: TOPIC in run_mqadmin(namesrv, "topicList"), "the topic on the name server", 30)
    p = Producer(f"rmq_admin_producer_{name}", namesrv_addr=namesrv, instance_name=f"rmq-admin-p-{name}")
    p.start()
    try:
        sends = [p.send(Message(TOPIC, f"m-{i}".encode(), keys=f"k-{i}")) for i in range(COUNT)]
    finally:
        p.shutdown()
    assert all(s.send_status.name == "SEND_OK" for s in sends)
    consumer = PushConsumer(
        GROUP,
        namesrv_addr=namesrv,
        instance_name=f"rmq-admin-c-{name}",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **FAST_CLIENT,
    )
    side = Side(name, namesrv, broker_addr, consumer, sends)

    def listener(msgs: list[Any], context: Any) -> Any:
        with side.lock:
            side.seen.extend(m.keys for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.subscribe(TOPIC, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    wait_until(lambda: side.count() >= COUNT, "every message consumed", 60)
    return side


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Side]]:
    root = tmp_path_factory.mktemp("mqadmin-rmq-consumer")
    apache = ApacheRocketMQ(str(root / "apache"))
    out: dict[str, Side] = {}
    with NameServer(listen_port=0) as ns:
        config = BrokerConfig(
            broker_name="broker-a",
            broker_cluster_name=CLUSTER,
            listen_port=0,
            namesrv_addr=ns.address,
            store_path_root_dir=str(root / "rmq-store"),
        )
        with Broker(config) as broker:
            apache.start()
            try:
                out["rmq_core"] = _side("rmq_core", ns.address, broker.address)
                out["apache"] = _side("apache", apache.namesrv_addr, apache.broker_addr)
                yield out
            finally:
                for s in out.values():
                    s.consumer.shutdown()
                apache.stop()


def _progress(side: Side) -> dict[int, tuple[int, int]]:
    """consumerProgress -g: queue id → (broker offset, consumer offset)."""
    rows = parse_table(run_mqadmin(side.namesrv, "consumerProgress", "-g", GROUP), "#Topic")
    return {
        int(r["#QID"]): (int(r["#Broker Offset"]), int(r["#Consumer Offset"])) for r in rows if r["#Topic"] == TOPIC
    }


def test_consumer_status_prints_the_running_info(sides: dict[str, Side]) -> None:
    for name, side in sides.items():
        text = run_mqadmin(side.namesrv, "consumerStatus", "-g", GROUP, "-i", side.client_id)
        assert "#Consumer Properties#" in text, (name, text)
        assert "PROP_CONSUME_TYPE" in text and "CONSUME_PASSIVELY" in text, (name, text)
        assert "PROP_CONSUMER_START_TIMESTAMP" in text and "PROP_CLIENT_VERSION" in text, (name, text)
        assert "#Consumer Subscription#" in text and TOPIC in text, (name, text)
        assert "#Consumer Offset#" in text, (name, text)
        assert "#Consumer MQ Detail#" in text and "ProcessQueueInfo [commitOffset=" in text, (name, text)
        assert "#Consumer RT&TPS#" in text, (name, text)
        summary = run_mqadmin(side.namesrv, "consumerStatus", "-g", GROUP)
        assert side.client_id in summary, (name, summary)
        assert "Same subscription in the same group of consumer" in summary, (name, summary)


def test_get_consumer_status_from_the_client(sides: dict[str, Side]) -> None:
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (mqadmin 4.9.7 registers no command for it: sent here as
    DefaultMQAdminExt#getConsumeStatus sends it) → the broker asks the client, the client answers its offsets."""
    for name, side in sides.items():
        wait_until(lambda s=side: _progress(s) and all(b == c for b, c in _progress(s).values()), "caught up", 15)
        request = RemotingCommand.request(
            RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, {"topic": TOPIC, "group": GROUP}
        )
        with BlockingRemotingClient() as rc:
            response = rc.invoke_sync(side.broker_addr, request, timeout=15.0)
        assert response.code == ResponseCode.SUCCESS, (name, response.remark)
        table = fastjson.raw_field(bytes(response.body), "consumerTable")
        assert table is not None, (name, response.body)
        mine = fastjson.raw_field(table, side.client_id)
        assert mine is not None, (name, table)
        offsets = {mq_from_json_dict(k).queue_id: int(v) for k, v in fastjson.map_items(mine)}
        assert offsets == {q: c for q, (_b, c) in _progress(side).items()} and sum(offsets.values()) == COUNT, name


def test_query_msg_by_id_consumed_directly_by_the_rmq_core_consumer(sides: dict[str, Side]) -> None:
    for name, side in sides.items():
        before = side.count()
        text = run_mqadmin(
            side.namesrv, "queryMsgById", "-i", side.sends[2].offset_msg_id, "-g", GROUP, "-d", side.client_id
        )
        assert "ConsumeMessageDirectlyResult" in text and "consumeResult=CR_SUCCESS" in text, (name, text)
        assert "order=false" in text and "autoCommit=true" in text, (name, text)
        wait_until(lambda s=side, b=before: s.count() == b + 1, "the direct delivery", 5)
        assert side.keys_from(before) == ["k-2"]


def test_reset_offset_by_time_makes_the_rmq_core_consumer_consume_again(sides: dict[str, Side]) -> None:
    before = {name: side.count() for name, side in sides.items()}
    res = {
        name: run_mqadmin(side.namesrv, "resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", 1_000_000_000_000)
        for name, side in sides.items()
    }
    rows = {name: parse_table(text, "#brokerName") for name, text in res.items()}
    assert rows["rmq_core"] == rows["apache"]
    assert sorted(r["#offset"] for r in rows["rmq_core"]) == ["0"] * 4
    for name, side in sides.items():
        wait_until(lambda s=side, b=before[name]: s.count() >= b + COUNT, f"{name}: everything consumed again", 60)
        assert sorted(side.keys_from(before[name])) == sorted(f"k-{i}" for i in range(COUNT)), name
        wait_until(
            lambda s=side: sum(c for _b, c in _progress(s).values()) == COUNT, f"{name}: offsets committed again", 20
        )
    time.sleep(1)
    for name, side in sides.items():
        assert len(side.keys_from(before[name])) == COUNT, (name, "delivered more than once after the reset")
