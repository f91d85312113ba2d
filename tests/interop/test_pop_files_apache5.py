"""POP state on disk across brokers (Apache RocketMQ 5.3.3 from Maven Central, compat/apache/build.sh 5.3.3): messages
popped on rmq_core's broker (CKs and ACKs in rmq_sys_REVIVE_LOG_DefaultCluster through the timer files, the pop and
revive offsets in consumerOffset.json) and not acked are redelivered once by Apache 5.3.3's broker started on that
store, the acked ones not; and the same the other way (popped on Apache, redelivered by rmq_core on a copy of
Apache's store). Raw POP_MESSAGE / ACK_MESSAGE frames, the same to both brokers.

Run alone with ``-m apache_broker`` (needs java and mvn; RMQ_COMPAT_JAVA=0 skips)."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.broker.pop import extra_info as ei
from rmq_core.message import decode_messages
from rmq_core.message_encoding import properties_to_string
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import AckMessageRequestHeader, PopMessageRequestHeader, encode_header
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.admin_helpers import wait_for_route
from support.apache_rocketmq import ApacheRocketMQ
from support.send_helpers import send_request

pytestmark = pytest.mark.apache_broker

APACHE_5 = "5.3.3"
TIMER_LOG_FILE = 1 << 20
APACHE_CONF = {"mappedFileSizeTimerLog": str(TIMER_LOG_FILE), "timerFlushIntervalMs": "200"}
GROUP = "pop_files_group"


def _rmq_config(root: str) -> BrokerConfig:
    return BrokerConfig(
        listen_port=0,
        broker_name="broker-a",
        store_path_root_dir=root,
        mapped_file_size_commit_log=16 * 1024 * 1024,
        mapped_file_size_consume_queue=6000 * 20,
        mapped_file_size_timer_log=TIMER_LOG_FILE,
        timer_flush_interval_ms=200,
    )


def _pop(client, addr: str, topic: str, invisible: int, poll: int = 0) -> RemotingCommand:
    h = PopMessageRequestHeader(
        consumerGroup=GROUP,
        topic=topic,
        queueId=-1,
        maxMsgNums=32,
        invisibleTime=invisible,
        pollTime=poll,
        bornTime=int(time.time() * 1000),
        initMode=0,
        expType="TAG",
        exp="*",
        order=False,
    )
    return client.invoke_sync(addr, RemotingCommand.request(RequestCode.POP_MESSAGE, encode_header(h)), 5 + poll / 1000)


def _popped(resp: RemotingCommand) -> list[tuple[str, object]]:
    """(handle, message): the handle as Apache's Java client builds it from the answer."""
    msgs = decode_messages(resp.body)
    return list(zip(ei.receipt_handles(resp.ext_fields, msgs, "broker-a"), msgs, strict=True))


def _pop_all(client, addr: str, topic: str, want: int, invisible: int, timeout: float) -> list:
    got: list = []
    deadline = time.time() + timeout
    while len(got) < want and time.time() < deadline:
        r = _pop(client, addr, topic, invisible, poll=1000)
        if r.code == ResponseCode.SUCCESS:
            got.extend(_popped(r))
    return got


def _ack(client, addr: str, handle: str, m) -> None:
    parsed = ei.parse_receipt_handle(handle)
    assert parsed is not None
    topic = parsed.real_topic(m.topic, GROUP)
    h = AckMessageRequestHeader(GROUP, topic, parsed.queue_id, handle, parsed.queue_offset)
    r = client.invoke_sync(addr, RemotingCommand.request(RequestCode.ACK_MESSAGE, encode_header(h)), 5.0)
    assert r.code == ResponseCode.SUCCESS, r.remark


def _send_and_pop(client, addr: str, topic: str, invisible: int) -> tuple[set[bytes], set[bytes]]:
    """Send 4, pop them, ack 2: (acked bodies, unacked bodies)."""
    for i in range(4):
        p = properties_to_string({"TAGS": "T", "UNIQ_KEY": f"U{topic}{i}"})
        r = client.invoke_sync(addr, send_request(topic, b"p%d" % i, queue_id=i % 2, properties=p), timeout=5.0)
        assert r.code == ResponseCode.SUCCESS, r.remark
    popped = _pop_all(client, addr, topic, 4, invisible, timeout=20)
    assert sorted(m.body for _, m in popped) == [b"p0", b"p1", b"p2", b"p3"]
    for h, m in popped[:2]:
        _ack(client, addr, h, m)
    return {m.body for _, m in popped[:2]}, {m.body for _, m in popped[2:]}


def test_apache_5_redelivers_what_rmq_core_popped(tmp_path):
    server = ApacheRocketMQ(str(tmp_path / "apache"), version=APACHE_5, extra_broker_conf=APACHE_CONF)
    root = os.path.join(server.store, "broker")
    topic = "PopFromRmq"
    with Broker(_rmq_config(root)) as b, BlockingRemotingClient() as client:
        acked, unacked = _send_and_pop(client, b.address, topic, invisible=30_000)
        revive_at = time.time() + 30
        time.sleep(1.0)  # the timer files flushed (timerFlushIntervalMs 200)
    with server, BlockingRemotingClient() as client:
        wait_for_route(server.namesrv_addr, "TBW102", timeout=60)
        got: list = []
        deadline = revive_at + 40
        while time.time() < deadline and len(got) < 2:
            r = _pop(client, server.broker_addr, topic, 60_000, poll=2000)
            if r.code == ResponseCode.SUCCESS:
                got.extend(m for _, m in _popped(r))
        time.sleep(3)
        r = _pop(client, server.broker_addr, topic, 60_000, poll=2000)
        if r.code == ResponseCode.SUCCESS:
            got.extend(m for _, m in _popped(r))
        assert sorted(m.body for m in got) == sorted(unacked), (sorted(m.body for m in got), server.tail("broker"))
        assert not acked & {m.body for m in got}
        assert all(m.reconsume_times == 1 for m in got)


def test_rmq_core_redelivers_what_apache_5_popped(tmp_path):
    server = ApacheRocketMQ(str(tmp_path / "apache"), version=APACHE_5, extra_broker_conf=APACHE_CONF)
    topic = "PopFromApache"
    with server, BlockingRemotingClient() as client:
        wait_for_route(server.namesrv_addr, "TBW102", timeout=60)
        acked, unacked = _send_and_pop(client, server.broker_addr, topic, invisible=12_000)
        revive_at = time.time() + 12
        time.sleep(1.5)  # Apache files the CKs/ACKs and flushes its timer files and offsets
    root = str(tmp_path / "copy")
    shutil.copytree(os.path.join(server.store, "broker"), root, ignore=shutil.ignore_patterns("lock"))
    with Broker(_rmq_config(root)) as b, BlockingRemotingClient() as client:
        got: list = []
        deadline = max(revive_at, time.time()) + 20
        while time.time() < deadline and len(got) < 2:
            r = _pop(client, b.address, topic, 60_000, poll=1000)
            if r.code == ResponseCode.SUCCESS:
                got.extend(m for _, m in _popped(r))
        time.sleep(2)
        r = _pop(client, b.address, topic, 60_000, poll=1000)
        if r.code == ResponseCode.SUCCESS:
            got.extend(m for _, m in _popped(r))
    assert sorted(m.body for m in got) == sorted(unacked), sorted(m.body for m in got)
    assert not acked & {m.body for m in got}
    assert all(m.reconsume_times == 1 for m in got)
