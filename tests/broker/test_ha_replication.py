"""Master/slave replication between two rmq_core brokers over loopback (broker/ha/): the slave's CommitLog equals the
master's byte for byte and its ConsumeQueues answer the same pulls; a slave started late catches up, one restarted
resumes from its own end; SYNC_MASTER answers SEND_OK only for what a slave holds, SLAVE_NOT_AVAILABLE without a slave
and FLUSH_SLAVE_TIMEOUT when the slave stops acknowledging; two slaves each get the master's bytes and one is enough for
SYNC_MASTER; garbage and a diverged slave on the HA port affect only
their own connection; a slave copies its master's configs (SlaveSynchronize) and refuses sends."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from rmq_core.broker.ha.ha_protocol import FRAME_HEADER, encode_report
from rmq_core.message import Message
from rmq_core.message_encoding import encode_batch
from rmq_core.namesrv import NameServer
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.ha_helpers import (
    HA_TOPIC,
    brokers,
    commit_log_bytes,
    first_file_start,
    ha_address,
    ok,
    send_n,
    start_broker,
    start_slave,
    sync_configs,
)
from support.helpers import wait_until
from support.pull_helpers import pull
from support.send_helpers import SMALL_FILES, send_request

FILE = SMALL_FILES["mapped_file_size_commit_log"]


@pytest.fixture
def client():
    with BlockingRemotingClient() as c:
        yield c


def caught_up(master, slave) -> bool:
    return slave.message_store.max_physical_offset == master.message_store.max_physical_offset


def same_pulls(client, master, slave, queues: int = 4) -> None:
    for q in range(queues):
        a = pull(client, master.address, HA_TOPIC, q, 0, max_nums=32)
        b = pull(client, slave.address, HA_TOPIC, q, 0, max_nums=32)
        assert a.code == b.code == ResponseCode.SUCCESS
        assert a.body == b.body
        assert a.ext_fields["maxOffset"] == b.ext_fields["maxOffset"]


def test_slave_equals_master_byte_for_byte(tmp_path, client) -> None:
    master = start_broker(str(tmp_path / "m"))
    slave = start_slave(str(tmp_path / "s"), master, slave_read_enable=True)
    with brokers(slave, master):
        rs = send_n(client, master, 4000, size=500)  # ~2.3 MB: three 1 MiB CommitLog files
        assert all(ok(r) for r in rs)
        wait_until(lambda: caught_up(master, slave), "the slave caught up", timeout=30)
        end = master.message_store.max_physical_offset
        assert end > 2 * FILE
        assert commit_log_bytes(str(tmp_path / "s"), end, FILE) == commit_log_bytes(str(tmp_path / "m"), end, FILE)
        wait_until(lambda: master.controller.replication.ha_service.push2_slave_max_offset == end, "the ack")
        # the slave's ConsumeQueues serve the same pulls (slave_read_enable; the topic config copied from the master)
        sync_configs(slave, master)
        same_pulls(client, master, slave)


def test_slave_started_late_catches_up_and_restarts_from_its_own_end(tmp_path, client) -> None:
    master = start_broker(str(tmp_path / "m"), mapped_file_size_commit_log=8 << 20)  # one file: from 0
    with brokers(master):
        assert all(ok(r) for r in send_n(client, master, 500))
        slave = start_slave(str(tmp_path / "s"), master)
        wait_until(lambda: caught_up(master, slave), "the late slave caught up from 0")
        first_end = slave.message_store.max_physical_offset
        slave.shutdown()
        assert all(ok(r) for r in send_n(client, master, 300))
        slave = start_slave(str(tmp_path / "s"), master)
        with brokers(slave):
            conn = wait_until(lambda: master.controller.replication.ha_service.connections, "the slave reconnected")
            wait_until(lambda: conn[0].slave_request_offset >= 0, "its first report")
            assert conn[0].slave_request_offset == first_end  # resumed from its own offset, not 0
            wait_until(lambda: caught_up(master, slave), "the slave caught up again")
            end = master.message_store.max_physical_offset
            assert commit_log_bytes(str(tmp_path / "s"), end, 8 << 20) == commit_log_bytes(
                str(tmp_path / "m"), end, 8 << 20
            )


def test_empty_slave_starts_at_the_masters_last_file(tmp_path, client) -> None:
    """4.9's rule: a slave reporting 0 is streamed from the start of the master's last CommitLog file."""
    master = start_broker(str(tmp_path / "m"))
    with brokers(master):
        assert all(ok(r) for r in send_n(client, master, 3000, size=500))
        last = master.message_store.max_physical_offset // FILE * FILE
        assert last > 0
        slave = start_slave(str(tmp_path / "s"), master)
        with brokers(slave):
            wait_until(lambda: caught_up(master, slave), "caught up")
            assert first_file_start(str(tmp_path / "s")) == last
            end = master.message_store.max_physical_offset
            assert (
                commit_log_bytes(str(tmp_path / "s"), end, FILE)
                == commit_log_bytes(str(tmp_path / "m"), end, FILE)[last:]
            )


def _batch() -> RemotingCommand:
    body = encode_batch([Message(HA_TOPIC, b"b%d" % i) for i in range(3)])
    return send_request(HA_TOPIC, body, code=RequestCode.SEND_BATCH_MESSAGE, queue_id=0, batch=True)


def test_sync_master(tmp_path, client) -> None:
    master = start_broker(str(tmp_path / "m"), broker_role="SYNC_MASTER", sync_flush_timeout=1500)
    with brokers(master):
        # no slave: SLAVE_NOT_AVAILABLE at once (the message is stored on the master), a batch too
        r = send_n(client, master, 1)[0]
        assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE
        assert client.invoke_sync(master.address, _batch(), timeout=5.0).code == ResponseCode.SLAVE_NOT_AVAILABLE
        slave = start_slave(str(tmp_path / "s"), master)
        with brokers(slave):
            wait_until(lambda: caught_up(master, slave), "the slave holds the first message")
            rs = send_n(client, master, 50)
            assert all(ok(r) for r in rs), {r.code for r in rs}
            r = client.invoke_sync(master.address, _batch(), timeout=5.0)
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert slave.message_store.max_physical_offset == master.message_store.max_physical_offset
            # every SEND_OK is on the slave when answered: the last one's end is acknowledged
            assert master.controller.replication.ha_service.push2_slave_max_offset == (
                master.message_store.max_physical_offset
            )
            assert slave.message_store.max_physical_offset == master.message_store.max_physical_offset
        # the slave is gone: SLAVE_NOT_AVAILABLE again once its connection closed
        wait_until(lambda: not master.controller.replication.ha_service.connections, "the connection closed")
        assert send_n(client, master, 1)[0].code == ResponseCode.SLAVE_NOT_AVAILABLE


def test_two_slaves_each_get_the_masters_bytes_and_sync_master_needs_one(tmp_path, client) -> None:
    """4.9's HAService serves each slave on its own HAConnection from that slave's own offset; push2SlaveMaxOffset is
    the furthest any slave acknowledged, so a SYNC_MASTER send is SEND_OK once one slave holds it, and the master
    stays writable while one of two slaves is gone."""
    master = start_broker(str(tmp_path / "m"), broker_role="SYNC_MASTER", sync_flush_timeout=3000)
    with brokers(master):
        s1 = start_slave(str(tmp_path / "s1"), master)
        s2 = start_slave(str(tmp_path / "s2"), master, broker_id=2)
        with brokers(s1, s2):
            ha = master.controller.replication.ha_service
            wait_until(lambda: len(ha.connections) == 2, "both slaves connected")
            wait_until(lambda: all(c.slave_request_offset >= 0 for c in ha.connections), "both slaves reported")
            rs = send_n(client, master, 3000, size=500)  # ~1.7 MB: two 1 MiB CommitLog files
            assert all(ok(r) for r in rs), {r.code for r in rs}
            wait_until(lambda: caught_up(master, s1) and caught_up(master, s2), "both slaves caught up", timeout=30)
            end = master.message_store.max_physical_offset
            assert end > FILE
            expected = commit_log_bytes(str(tmp_path / "m"), end, FILE)
            assert commit_log_bytes(str(tmp_path / "s1"), end, FILE) == expected
            assert commit_log_bytes(str(tmp_path / "s2"), end, FILE) == expected
            s2.shutdown()
            wait_until(lambda: len(ha.connections) == 1, "the second slave's connection closed")
            rs = send_n(client, master, 50)
            assert all(ok(r) for r in rs), {r.code for r in rs}  # the remaining slave acknowledges them
            assert s1.message_store.max_physical_offset == master.message_store.max_physical_offset


def test_sync_master_flush_slave_timeout_when_the_slave_stops_acking(tmp_path, client) -> None:
    master = start_broker(str(tmp_path / "m"), broker_role="SYNC_MASTER", sync_flush_timeout=800)
    with brokers(master):
        send_n(client, master, 3)
        # a "slave" that reports once and then never again (nor reads)
        s = socket.create_connection(("127.0.0.1", int(ha_address(master).rsplit(":", 1)[1])))
        try:
            s.sendall(encode_report(master.message_store.max_physical_offset))
            wait_until(lambda: master.controller.replication.ha_service.connections, "the fake slave connected")
            t = time.monotonic()
            r = send_n(client, master, 1)[0]
            assert r.code == ResponseCode.FLUSH_SLAVE_TIMEOUT
            assert time.monotonic() - t >= 0.7
        finally:
            s.close()


def test_garbage_and_a_diverged_slave_on_the_ha_port(tmp_path, client) -> None:
    master = start_broker(str(tmp_path / "m"))
    slave = start_slave(str(tmp_path / "s"), master)
    with brokers(slave, master):
        send_n(client, master, 20)
        wait_until(lambda: caught_up(master, slave), "caught up")
        svc = master.controller.replication.ha_service
        port = int(ha_address(master).rsplit(":", 1)[1])
        # a negative report, then an offset beyond the master's end (a slave whose log is ahead): both closed
        for bad in (struct.pack(">q", -5), encode_report(master.message_store.max_physical_offset + 10**6)):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(bad)
                assert s.recv(100) == b""  # closed by the master
        # a peer that reports 0 and never reads: the master's frames pile up in its socket only
        stalled = socket.create_connection(("127.0.0.1", port))
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.sendall(encode_report(0))
        try:
            rs = send_n(client, master, 2000, size=1000)
            assert all(ok(r) for r in rs)
            wait_until(lambda: caught_up(master, slave), "the real slave still caught up", timeout=30)
            assert len(svc.connections) == 2  # the real slave and the stalled one
        finally:
            stalled.close()
        end = master.message_store.max_physical_offset
        assert commit_log_bytes(str(tmp_path / "s"), end, FILE) == commit_log_bytes(str(tmp_path / "m"), end, FILE)


def test_slave_refuses_a_frame_at_the_wrong_offset_and_reconnects(tmp_path, client) -> None:
    """A fake master sends a frame at an offset that is not the slave's end: the slave drops the connection and comes
    back reporting its own end."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    master = start_broker(str(tmp_path / "m"))
    with brokers(master):
        send_n(client, master, 5)
        slave = start_broker(
            str(tmp_path / "s"), broker_role="SLAVE", broker_id=1, ha_master_address=f"127.0.0.1:{port}"
        )
        with brokers(slave):
            listener.settimeout(10)
            conn, _ = listener.accept()
            assert conn.recv(8) == encode_report(0)
            data = master.message_store.get_commit_log_data(0, 10_000)
            conn.sendall(FRAME_HEADER.pack(0, len(data)) + data)
            assert struct.unpack(">q", conn.recv(8))[0] == len(data)
            conn.sendall(FRAME_HEADER.pack(len(data) + 100, 10) + b"x" * 10)  # a gap
            conn.settimeout(5)
            assert conn.recv(100) == b""
            conn.close()
            conn2, _ = listener.accept()
            assert conn2.recv(8) == encode_report(len(data))
            conn2.close()
            assert slave.message_store.max_physical_offset == len(data)
    listener.close()


def test_slave_refuses_sends_and_copies_configs(tmp_path, client) -> None:
    with NameServer(listen_port=0) as ns:
        master = start_broker(str(tmp_path / "m"), namesrv_addr=ns.address)
        with brokers(master):
            assert all(ok(r) for r in send_n(client, master, 10))
            slave = start_broker(str(tmp_path / "s"), namesrv_addr=ns.address, broker_role="SLAVE", broker_id=1)
            with brokers(slave):
                # the slave learns its master's HA address from the name server and replicates
                wait_until(lambda: caught_up(master, slave), "replicated through the name server's haServerAddr")
                r = client.invoke_sync(slave.address, send_request(HA_TOPIC, b"x"), timeout=5)
                assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE
                # configs: topics, offsets, groups (SlaveSynchronize)
                c = master.controller
                c.consumer_offset_manager.commit_offset("x", "g1", HA_TOPIC, 2, 7)
                sync = slave.controller.replication.slave_synchronize
                rounds = sync.rounds
                sc = slave.controller
                # a round in flight when the offset was committed may have read the table before it: wait for a
                # completed round that copied the offset itself (a later one, then)
                wait_until(
                    lambda: sync.rounds > rounds and sc.consumer_offset_manager.query_offset("g1", HA_TOPIC, 2) == 7,
                    "a SlaveSynchronize round copying the offset",
                    timeout=20,
                )
                assert HA_TOPIC in sc.topic_config_manager.topic_config_table
                assert sc.consumer_offset_manager.query_offset("g1", HA_TOPIC, 2) == 7
                r = client.invoke_sync(
                    slave.address, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG, {}), timeout=5
                )
                assert HA_TOPIC.encode() in r.body
