"""Master/slave replication with Apache RocketMQ 4.9.7 both ways (Maven Central jars, tests/support/apache_rocketmq.py):

1. an rmq_core slave of an Apache master: it learns the master's HA address from Apache's name server, replicates, and
   its CommitLog equals Apache's byte for byte up to Apache's max offset; its ConsumeQueues answer the same pulls;
2. an Apache slave of an rmq_core master (rmq_core's name server): Apache's slave replicates from rmq_core's HA service
   and its CommitLog equals ours byte for byte.

Both sides use the same mapped file sizes (a slave's files must match its master's). Marked ``apache_broker``.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.namesrv import NameServer
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.apache_rocketmq import ApacheRocketMQ, free_broker_port
from support.ha_helpers import HA_TOPIC, commit_log_bytes, send_n
from support.helpers import wait_until
from support.pull_helpers import pull

pytestmark = pytest.mark.apache_broker

CL_FILE = 16 * 1024 * 1024  # what apache_rocketmq.py gives Apache
CQ_FILE = 6000 * 20


def runtime_info(client: BlockingRemotingClient, addr: str) -> dict[str, str]:
    """Apache's GET_BROKER_RUNTIME_INFO; asked again (up to 5 s) while 4.9.7 answers SYSTEM_ERROR
    NoSuchElementException: its StoreStatsService's getPutTps reads ``putTimesList.getLast()``, empty until the
    sampling thread's first sample, a second after start (the sends before it can take less): a transient error of
    the control broker, not of what the test checks."""
    deadline = time.monotonic() + 5
    while True:
        r = client.invoke_sync(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {}), timeout=5)
        if r.code == ResponseCode.SUCCESS or "NoSuchElementException" not in (r.remark or ""):
            break
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return json.loads(r.body)["table"]


def apache_max_offset(client: BlockingRemotingClient, addr: str) -> int:
    return int(runtime_info(client, addr)["commitLogMaxOffset"])


@pytest.fixture
def client():
    with BlockingRemotingClient() as c:
        yield c


def test_rmq_core_slave_of_an_apache_master(tmp_path, client) -> None:
    apache = ApacheRocketMQ(str(tmp_path / "apache"), extra_broker_conf={"brokerIP2": "127.0.0.1"})
    apache.start()
    try:
        rs = send_n(client, _Addr(apache.broker_addr), 1500, size=400)
        assert all(r.code == ResponseCode.SUCCESS for r in rs), {r.remark for r in rs}
        cfg = BrokerConfig(
            listen_port=0,
            store_path_root_dir=str(tmp_path / "slave"),
            namesrv_addr=apache.namesrv_addr,
            broker_name=apache.broker_name,
            broker_role="SLAVE",
            broker_id=1,
            slave_read_enable=True,
            mapped_file_size_commit_log=CL_FILE,
            mapped_file_size_consume_queue=CQ_FILE,
        )
        slave = Broker(cfg).start()
        try:
            end = apache_max_offset(client, apache.broker_addr)
            wait_until(lambda: slave.message_store.max_physical_offset == end, "the rmq_core slave caught up", 60)
            rs = send_n(client, _Addr(apache.broker_addr), 500, size=700)  # while connected
            assert all(r.code == ResponseCode.SUCCESS for r in rs)
            end = apache_max_offset(client, apache.broker_addr)
            wait_until(lambda: slave.message_store.max_physical_offset == end, "the rmq_core slave caught up", 60)
            ours = commit_log_bytes(str(tmp_path / "slave"), end, CL_FILE)
            theirs = commit_log_bytes(os.path.dirname(apache.commit_log_dir), end, CL_FILE)
            assert len(ours) == end and ours == theirs
            # the slave copied Apache's topic config and serves the same pulls from its own ConsumeQueues
            wait_until(
                lambda: HA_TOPIC in slave.controller.topic_config_manager.topic_config_table, "topics synced", 30
            )
            for q in range(4):
                a = pull(client, apache.broker_addr, HA_TOPIC, q, 0, max_nums=32)
                b = pull(client, slave.address, HA_TOPIC, q, 0, max_nums=32)
                assert a.code == b.code == ResponseCode.SUCCESS
                assert a.body == b.body
        finally:
            slave.shutdown()
    finally:
        apache.stop()


def test_apache_slave_of_an_rmq_core_master(tmp_path, client) -> None:
    with NameServer(listen_port=0) as ns:
        cfg = BrokerConfig(
            listen_port=free_broker_port(),  # HA on listenPort + 1, as Apache's slave will be told
            store_path_root_dir=str(tmp_path / "master"),
            namesrv_addr=ns.address,
            broker_name="broker-ha",
            mapped_file_size_commit_log=CL_FILE,
            mapped_file_size_consume_queue=CQ_FILE,
        )
        master = Broker(cfg).start()
        try:
            rs = send_n(client, master, 1500, size=400)
            assert all(r.code == ResponseCode.SUCCESS for r in rs)
            apache = ApacheRocketMQ(
                str(tmp_path / "apache-slave"),
                broker_name="broker-ha",
                extra_broker_conf={"brokerRole": "SLAVE", "brokerId": "1", "brokerIP2": "127.0.0.1"},
            )
            apache.start_broker_only(ns.address)
            try:
                apache_root = os.path.dirname(apache.commit_log_dir)
                mine = str(tmp_path / "master")

                def same_bytes() -> bool:  # (Apache's GET_BROKER_RUNTIME_INFO fails on a fresh slave: read the files)
                    end = master.message_store.max_physical_offset
                    return commit_log_bytes(apache_root, end, CL_FILE) == commit_log_bytes(mine, end, CL_FILE)

                wait_until(same_bytes, "Apache's slave caught up", 60)
                rs = send_n(client, master, 500, size=700)
                assert all(r.code == ResponseCode.SUCCESS for r in rs)
                wait_until(same_bytes, "Apache's slave caught up again", 60)
                end = master.message_store.max_physical_offset
                svc = master.controller.replication.ha_service
                wait_until(lambda: svc.push2_slave_max_offset == end, "Apache's slave acknowledged", 20)
                assert len(commit_log_bytes(apache_root, end, CL_FILE)) == end
            finally:
                apache.stop()
        finally:
            master.shutdown()


class _Addr:
    """What ``send_n`` needs of a broker: its address."""

    def __init__(self, address: str) -> None:
        self.address = address
