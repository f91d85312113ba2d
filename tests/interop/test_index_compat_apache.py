"""Index files both ways with a real Apache RocketMQ 4.9.7 broker (Maven Central, tests/support/apache_rocketmq.py):

1. a store written by rmq_core's ``MessageStore`` (both engines) is served by Apache's broker, which answers
   QUERY_MESSAGE by key and by UNIQ_KEY from our ``index/`` files;
2. a store written by Apache's broker (messages sent by rmq_core's producer) is queried through ``MessageStore`` from
   Apache's index files, and rebuilding the index from Apache's CommitLog gives Apache's index bytes.

Both use a small index geometry (``maxHashSlotNum``/``maxIndexNum`` in broker.conf and in ``StoreConfig``).
Marked ``apache_broker``: run alone with ``-m apache_broker`` (needs java and mvn).
"""

from __future__ import annotations

import os
import shutil

import pytest

from rmq_core.client import Producer
from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI
from rmq_core.message import Message
from rmq_core.remoting.header import QueryMessageRequestHeader
from rmq_core.store import MessageStore, StoreConfig

from support.apache_rocketmq import ApacheRocketMQ

pytestmark = pytest.mark.apache_broker

SLOTS, ENTRIES = 1024, 4096
APACHE_CONF = {"maxHashSlotNum": str(SLOTS), "maxIndexNum": str(ENTRIES), "messageIndexEnable": "true"}
FAR = 2**62


def store_config() -> StoreConfig:
    # the sizes tests/support/apache_rocketmq.py configures Apache with
    return StoreConfig(
        mapped_file_size_commit_log=16 * 1024 * 1024,
        mapped_file_size_consume_queue=6000 * 20,
        max_hash_slot_num=SLOTS,
        max_index_num=ENTRIES,
        store_host=("127.0.0.1", 10911),
    )


def index_contents(root: str) -> list[bytes]:
    d = os.path.join(root, "index")
    out = []
    for n in sorted(os.listdir(d)):
        with open(os.path.join(d, n), "rb") as f:
            out.append(f.read())
    return out


def query(api: BlockingMQClientAPI, addr: str, topic: str, key: str, unique: bool = False) -> list[bytes]:
    h = QueryMessageRequestHeader(topic=topic, key=key, maxNum=64, beginTimestamp=0, endTimestamp=FAR)
    _ts, msgs = api.query_message(addr, h, is_unique_key=unique)
    return sorted(m.body for m in msgs)


@pytest.mark.parametrize("backend", ["rust", "python"])
def test_apache_broker_answers_from_an_index_written_by_rmq_core(tmp_path, backend):
    server = ApacheRocketMQ(str(tmp_path / "apache"), extra_broker_conf=APACHE_CONF)
    root = os.path.join(server.store, "broker")
    with MessageStore(root, store_config(), backend=backend) as store:
        puts = [store.put_message(Message("IdxT", b"m%d" % i, keys=[f"ik-{i % 5}", "all"]), i % 4) for i in range(30)]
        uniq = store.look_message_by_offset(puts[17].commitlog_offset).properties["UNIQ_KEY"]  # type: ignore[union-attr]
    with server, BlockingMQClientAPI() as api:
        assert query(api, server.broker_addr, "IdxT", "ik-2") == sorted(b"m%d" % i for i in range(2, 30, 5))
        assert len(query(api, server.broker_addr, "IdxT", "all")) == 30
        assert query(api, server.broker_addr, "IdxT", uniq, unique=True) == [b"m17"]
        assert query(api, server.broker_addr, "IdxT", "absent") == []


def test_rmq_core_answers_from_an_index_written_by_apache(tmp_path):
    server = ApacheRocketMQ(str(tmp_path / "apache"), extra_broker_conf=APACHE_CONF)
    with server:
        p = Producer("IdxProducer", namesrv_addr=server.namesrv_addr)
        p.start()
        try:
            sent = []
            for i in range(25):
                msg = Message("ApIdxT", b"a%d" % i, keys=[f"ak-{i % 4}", "every"])
                sent.append(p.send(msg))
        finally:
            p.shutdown()
    apache_root = os.path.join(server.store, "broker")
    apache_index = index_contents(apache_root)
    assert apache_index, "Apache wrote no index file"
    for backend in ("rust", "python"):
        root = str(tmp_path / f"copy-{backend}")
        shutil.copytree(apache_root, root, ignore=shutil.ignore_patterns("lock"))
        with MessageStore(root, store_config(), backend=backend) as store:
            assert store.recovery_report["index_rebuilt"] == 0  # served from Apache's files
            assert sorted(m.body for m in store.query_message("ApIdxT", "ak-1", 64, 0, FAR)) == sorted(
                b"a%d" % i for i in range(1, 25, 4)
            )
            assert len(store.query_message("ApIdxT", "every", 64, 0, FAR)) == 25
            one = store.query_message("ApIdxT", sent[9].msg_id, 64, 0, FAR)
            assert [m.body for m in one] == [b"a9"]
        # the same index from Apache's CommitLog, rebuilt by rmq_core: Apache's bytes
        shutil.rmtree(os.path.join(root, "index"))
        with MessageStore(root, store_config(), backend=backend) as store:
            assert store.recovery_report["index_rebuilt"] > 0
        assert index_contents(root) == apache_index, backend
