"""POP state on disk across brokers (Apache RocketMQ 5.3.3 and 5.5.0 from Maven Central, compat/apache/build.sh
VERSION; each test runs once per version): messages
popped on rmq_core's broker (CKs and ACKs in rmq_sys_REVIVE_LOG_DefaultCluster through the timer files, the pop and
revive offsets in consumerOffset.json) and not acked are redelivered once by Apache 5.x's broker started on that
store, the acked ones not; and the same the other way (popped on Apache, redelivered by rmq_core on a copy of
Apache's store). Raw POP_MESSAGE / ACK_MESSAGE frames (support/pop_frames.py), the same to both brokers.

Run alone with ``-m apache_broker`` (needs java and mvn; RMQ_COMPAT_JAVA=0 skips)."""

from __future__ import annotations

import time

import pytest

from rmq_core.broker import Broker
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.admin_helpers import wait_for_route
from support.apache5_store import APACHE_5, APACHE_5_5, apache5, copy_apache_store, rmq_config, store_root
from support.pop_frames import pop, popped, send_and_pop

pytestmark = pytest.mark.apache_broker

GROUP = "pop_files_group"
VERSIONS = [APACHE_5, APACHE_5_5]


def _redelivered(client: BlockingRemotingClient, addr: str, topic: str, deadline: float, poll: int) -> list:
    """What a 60 s pop gets until 2 arrived or ``deadline``, plus one more pop a little later (nothing else comes)."""
    got: list = []
    while time.time() < deadline and len(got) < 2:
        r = pop(client, addr, topic, GROUP, 60_000, poll=poll)
        if r.code == ResponseCode.SUCCESS:
            got.extend(m for _, m in popped(r))
    time.sleep(poll / 1000 + 1)
    r = pop(client, addr, topic, GROUP, 60_000, poll=poll)
    if r.code == ResponseCode.SUCCESS:
        got.extend(m for _, m in popped(r))
    return got


@pytest.mark.parametrize("version", VERSIONS)
def test_apache_5_redelivers_what_rmq_core_popped(tmp_path, version):
    server = apache5(str(tmp_path / "apache"), version)
    topic = "PopFromRmq"
    with Broker(rmq_config(store_root(server))) as b, BlockingRemotingClient() as client:
        acked, unacked = send_and_pop(client, b.address, topic, GROUP, invisible=30_000)
        revive_at = time.time() + 30
        time.sleep(1.0)  # the timer files flushed (timerFlushIntervalMs 200)
    with server, BlockingRemotingClient() as client:
        wait_for_route(server.namesrv_addr, "TBW102", timeout=60)
        got = _redelivered(client, server.broker_addr, topic, revive_at + 40, poll=2000)
        assert sorted(m.body for m in got) == sorted(unacked), (sorted(m.body for m in got), server.tail("broker"))
        assert not acked & {m.body for m in got}
        assert all(m.reconsume_times == 1 for m in got)


@pytest.mark.parametrize("version", VERSIONS)
def test_rmq_core_redelivers_what_apache_5_popped(tmp_path, version):
    server = apache5(str(tmp_path / "apache"), version)
    topic = "PopFromApache"
    with server, BlockingRemotingClient() as client:
        wait_for_route(server.namesrv_addr, "TBW102", timeout=60)
        acked, unacked = send_and_pop(client, server.broker_addr, topic, GROUP, invisible=12_000)
        revive_at = time.time() + 12
        time.sleep(1.5)  # Apache files the CKs/ACKs and flushes its timer files and offsets
    root = copy_apache_store(server, str(tmp_path / "copy"))
    with Broker(rmq_config(root)) as b, BlockingRemotingClient() as client:
        got = _redelivered(client, b.address, topic, max(revive_at, time.time()) + 20, poll=1000)
    assert sorted(m.body for m in got) == sorted(unacked), sorted(m.body for m in got)
    assert not acked & {m.body for m in got}
    assert all(m.reconsume_times == 1 for m in got)
