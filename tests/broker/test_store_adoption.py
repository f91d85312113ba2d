"""A store directory written through ``MessageStore`` (no ``config/``) served by a broker: the broker adopts the
topics that have ConsumeQueues but no config (queue count from the directories, perm RW), persists them to
topics.json, registers their routes, and consumers read every message; configured topics keep their config."""

from __future__ import annotations

import json

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.broker.topic_config_manager import TopicConfigManager
from rmq_core.client.consumer.pull_consumer import PullConsumer
from rmq_core.client.pull_result import PullStatus
from rmq_core.common.topic_config import TopicConfig
from rmq_core.message import Message, MessageQueue
from rmq_core.namesrv import NameServer
from rmq_core.store import MessageStore, StoreConfig

from support.admin_helpers import wait_for_route


def _write_store(root: str) -> None:
    cfg = StoreConfig(mapped_file_size_commit_log=1 << 20, mapped_file_size_consume_queue=20 * 1000)
    with MessageStore(root, cfg) as store:
        for i in range(6):
            assert store.put_message(Message("Adopted", f"m{i}".encode(), tags="T"), queue_id=i % 3).ok


def test_adopt_store_topics_counts_queues_and_keeps_configured_topics(tmp_path):
    mgr = TopicConfigManager(BrokerConfig(), str(tmp_path))
    mgr.update_topic_config(TopicConfig("Known", read_queue_nums=8, write_queue_nums=8))
    adopted = mgr.adopt_store_topics([("Known", 0), ("New", 0), ("New", 4), ("%RETRY%g", 0), ("bad topic!", 0)])
    assert [(c.topic_name, c.read_queue_nums, c.write_queue_nums, c.perm) for c in adopted] == [
        ("%RETRY%g", 1, 1, 6),
        ("New", 5, 5, 6),
    ]
    assert mgr.select_topic_config("Known").read_queue_nums == 8  # unchanged
    assert mgr.select_topic_config("bad topic!") is None
    on_disk = json.loads((tmp_path / "topics.json").read_text())["topicConfigTable"]
    assert on_disk["New"]["readQueueNums"] == 5
    assert mgr.adopt_store_topics([("New", 7)]) == []  # adopted once; a config is never widened


def test_broker_serves_a_store_written_by_message_store(tmp_path):
    root = str(tmp_path / "store")
    _write_store(root)
    with (
        NameServer(listen_port=0) as ns,
        Broker(BrokerConfig(listen_port=0, namesrv_addr=ns.address, store_path_root_dir=root, broker_name="broker-0")),
    ):
        topics = json.loads((tmp_path / "store" / "config" / "topics.json").read_text())["topicConfigTable"]
        assert topics["Adopted"]["readQueueNums"] == 3
        wait_for_route(ns.address, "Adopted")  # the broker registers the adopted topic with the name server
        pc = PullConsumer("adoption_cg", namesrv_addr=ns.address)
        pc.start()
        try:
            assert pc.fetch_subscribe_message_queues("Adopted") == {
                MessageQueue("Adopted", "broker-0", q) for q in range(3)
            }
            bodies = []
            for q in range(3):
                r = pc.pull(MessageQueue("Adopted", "broker-0", q), "*", 0, 32)
                assert r.pull_status == PullStatus.FOUND
                bodies += [m.body for m in r.msg_found_list]
            assert sorted(bodies) == [f"m{i}".encode() for i in range(6)]
        finally:
            pc.shutdown()
