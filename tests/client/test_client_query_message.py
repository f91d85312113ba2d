"""The client's message lookups over the RPC layer against real brokers (a name server and two brokers on 127.0.0.1):
``Producer.query_message`` (QUERY_MESSAGE by key on every broker of the topic), ``query_message_by_uniq_key``
(``_UNIQUE_KEY_QUERY``) and ``view_message`` (VIEW_MESSAGE_BY_ID by offset msg id; by UNIQ_KEY with a topic), and the
blocking RPC face."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rmq_core.broker import Broker
from rmq_core.client import Producer
from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI
from rmq_core.common.topic_config import TopicConfig
from rmq_core.message import Message
from rmq_core.namesrv import NameServer
from rmq_core.remoting.header import QueryMessageRequestHeader

from support.client_helpers_core import cluster

FAR = 2**62


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[NameServer, list[Broker], Producer]]:
    with cluster(tmp_path, n_brokers=2) as (ns, brokers):
        p = Producer("QueryProducer", namesrv_addr=ns.address)
        p.start()
        try:
            yield ns, brokers, p
        finally:
            p.shutdown()


def test_query_by_key_uniq_key_and_view(two) -> None:  # type: ignore[no-untyped-def]
    ns, brokers, p = two
    # the topic exists on both brokers before the first send: an auto-created topic is routed to a second broker
    # only after that broker registers it, and the client queries the brokers of the route it holds
    with BlockingMQClientAPI(namesrv_addr=ns.address) as api:
        api.create_topic_and_wait([b.address for b in brokers], TopicConfig("QTopic", 4, 4))
    sent = [p.send(Message("QTopic", b"m%d" % i, keys=[f"order-{i % 3}", "every"])) for i in range(12)]
    assert {r.message_queue.broker_name for r in sent} == {"broker-a", "broker-b"}
    got = p.query_message("QTopic", "order-1", 32, 0, FAR)
    assert sorted(m.body for m in got) == [b"m1", b"m10", b"m4", b"m7"]
    assert len(p.query_message("QTopic", "every", 32, 0, FAR)) == 12
    assert p.query_message("QTopic", "nope", 32, 0, FAR) == []
    assert p.query_message("QTopic", "every", 32, 1, 2) == []
    one = p.query_message_by_uniq_key("QTopic", sent[5].msg_id)
    assert one is not None and one.body == b"m5"
    viewed = p.view_message(sent[7].offset_msg_id)
    assert viewed is not None and viewed.body == b"m7"
    assert viewed is not None and viewed.properties["UNIQ_KEY"] == sent[7].msg_id
    # 4.9's viewMessage(topic, msgId): a UNIQ_KEY falls back to the query by unique key
    by_uniq = p.view_message(sent[3].msg_id, topic="QTopic")
    assert by_uniq is not None and by_uniq.body == b"m3"


def test_blocking_face_queries_one_broker(two) -> None:  # type: ignore[no-untyped-def]
    ns, brokers, p = two
    r = p.send(Message("QTopic2", b"x", keys="only"))
    addr = next(b.address for b in brokers if b.controller.broker_config.broker_name == r.message_queue.broker_name)
    with BlockingMQClientAPI(namesrv_addr=ns.address) as api:
        h = QueryMessageRequestHeader(topic="QTopic2", key="only", maxNum=32, beginTimestamp=0, endTimestamp=FAR)
        ts, msgs = api.query_message(addr, h)
        assert [m.body for m in msgs] == [b"x"] and ts > 0
        h.key = "other"
        assert api.query_message(addr, h) == (0, [])  # 4.9 reports the index position only with a hit
        assert api.view_message(addr, msgs[0].commitlog_offset).body == b"x"
