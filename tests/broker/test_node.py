"""``rmq_core.node.Node`` and ``rmq-core serve --brokers N``: a name server and N supervised broker processes as one
cluster, over real processes, ports and stores: a topic spread over the node, a broker killed with SIGKILL restarted
over its own store with nothing acknowledged lost, a crash loop that stops the node, ports and store roots in use
refused with nothing half-started, and a clean SIGTERM of the whole node."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from rmq_core.namesrv import NameServer
from rmq_core.node import PORT_STEP, Node, NodeError
from rmq_core.testing.messaging import TestConsumer, TestProducer
from rmq_core.testing.topic_admin import create_topic

from support.helpers import subprocess_env

pytestmark = pytest.mark.slow


def _wait(predicate, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _node(tmp_path: Path, brokers: int = 2, **kw: object) -> Node:
    return Node(brokers, store_path_root_dir=str(tmp_path / "node"), namesrv_port=0, base_port=0, name="nb", **kw)  # type: ignore[arg-type]


def test_a_node_spreads_a_topic_and_restarts_a_killed_broker_losing_nothing(tmp_path: Path) -> None:
    with _node(tmp_path) as node:
        assert sorted(node.broker_addrs) == ["nb-0", "nb-1"]
        assert create_topic(node.namesrv_addr, "NodeTopic", queues=4) == ["nb-0", "nb-1"]
        producer = TestProducer(node.namesrv_addr)
        try:
            results = producer.produce("NodeTopic", 200)
        finally:
            producer.close()
        per_broker = Counter(r.message_queue.broker_name for r in results)
        assert set(per_broker) == {"nb-0", "nb-1"} and sum(per_broker.values()) == 200

        victim = node.brokers[0]
        assert victim.process is not None
        old_pid = victim.process.pid
        os.kill(old_pid, signal.SIGKILL)
        _wait(lambda: victim.process is not None and victim.process.pid != old_pid and victim.ready.is_set())
        assert node.failure is None

        consumer = TestConsumer(node.namesrv_addr)
        try:
            got = consumer.consume("NodeTopic", 200, timeout=30)
        finally:
            consumer.close()
        assert sorted(m.body for m in got) == sorted(f"message-{i}".encode() for i in range(200))
    assert node.ok and all(b.process is None or b.process.returncode == 0 for b in node.brokers)
    assert os.path.isdir(tmp_path / "node" / "nb-0" / "commitlog") and os.path.isdir(tmp_path / "node" / "nb-1")


def test_a_broker_that_keeps_dying_stops_the_node_with_the_cause(tmp_path: Path) -> None:
    node = _node(tmp_path, brokers=1, max_restarts=1, restart_backoff_s=(0.1, 0.2)).start()
    try:
        b = node.brokers[0]
        for _ in range(2):
            assert b.process is not None
            killed = b.process.pid
            os.kill(killed, signal.SIGKILL)
            _wait(lambda killed=killed: node.failure is not None or (b.process is not None and b.process.pid != killed))
        node.wait()
        assert node.failure is not None and "nb-0 was killed by signal 9: 2 exits within 60 s" in node.failure
    finally:
        node.shutdown()
    assert not node.ok


def test_a_broker_that_cannot_start_fails_the_start_and_leaves_nothing(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerRole=SLAVE\nbrokerId=0\n")  # rmq-core broker exits 3: a slave's brokerId must be > 0
    node = _node(tmp_path, brokers=2, broker_conf=str(conf))
    with pytest.raises(NodeError, match="exited with 3 while starting"):
        node.start()
    assert all(b.process is None or b.process.poll() is not None for b in node.brokers)
    _node(tmp_path, brokers=1).start().shutdown()  # the store root's lock was released


def _busy_port_with_free_neighbours() -> socket.socket:
    """A listening socket on a port whose PORT_STEP neighbours each side are free now (a random port's may not be:
    the node checks them in order and would name another one)."""
    for _ in range(50):
        busy = socket.socket()
        busy.bind(("127.0.0.1", 0))
        port = busy.getsockname()[1]
        others = [p for p in range(port - PORT_STEP, port + PORT_STEP) if p != port]
        if all(0 < p < 65536 and _free(p) for p in others):
            busy.listen()
            return busy
        busy.close()
    raise AssertionError("no port with free neighbours found")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_a_port_in_use_is_named_and_nothing_starts(tmp_path: Path) -> None:
    with _busy_port_with_free_neighbours() as busy:
        port = busy.getsockname()[1]
        node = Node(2, store_path_root_dir=str(tmp_path / "n"), namesrv_port=0, base_port=port - PORT_STEP, name="p")
        with pytest.raises(NodeError, match=f"port {port} \\(p-1's port\\) on 127.0.0.1 is in use"):
            node.start()
        assert node.namesrv is None and all(b.process is None for b in node.brokers)


def test_a_store_root_one_node_uses_is_refused(tmp_path: Path) -> None:
    with _node(tmp_path, brokers=1), pytest.raises(NodeError, match="is in use by another node"):
        _node(tmp_path, brokers=1).start()


def test_serve_brokers_starts_a_node_and_sigterm_stops_every_broker(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        ns_port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "rmq_core.cli", "serve", "--brokers", "2", "--dir", str(tmp_path / "s")]
    cmd += ["--port", "0", "--namesrv-port", str(ns_port), "--name", "cli"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=subprocess_env(), text=True)
    lines: list[str] = []
    assert proc.stdout is not None
    watchdog = threading.Timer(60, proc.kill)  # a start that never says so fails the test, never hangs it
    watchdog.start()
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("  cli-1@"):
                break
    finally:
        watchdog.cancel()
    assert any(f"name server 127.0.0.1:{ns_port}, cluster DefaultCluster, 2 brokers" in x for x in lines), lines
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "[cli-0] " in out and "broker cli-0 shut down" in out and "broker cli-1 shut down" in out


def test_bench_scale_runs_a_node_under_load() -> None:
    """benches/bench_scale.py (./dev bench) end to end on a node of 2 with little data: the senders' frames are all
    answered and the pullers reach every queue's end (a wrong target would time out), the table is printed."""
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "benches", "bench_scale.py")
    cmd = [sys.executable, bench, "--quick", "--sides", "node", "--brokers", "2", "--messages", "2000"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=subprocess_env())
    out = run.stdout + run.stderr
    assert "round 0 node      pull k=2:" in out and "failed" not in out and "Traceback" not in out, out
    assert "idle RSS per broker, node:" in out


def test_a_slave_node_replicates_each_broker_and_consumers_read_on_when_the_master_node_dies(tmp_path: Path) -> None:
    """Two nodes of two brokers on one name server, the second --slave-of the first: each SYNC_MASTER broker has its
    own slave (a send is SEND_OK once that slave has it); with the master node gone, a consumer reads every message
    from the slaves."""
    sizes = "mappedFileSizeCommitLog=4194304\nmappedFileSizeConsumeQueue=200000\n"
    master_conf, slave_conf = tmp_path / "master.conf", tmp_path / "slave.conf"
    master_conf.write_text(f"brokerRole=SYNC_MASTER\nslaveReadEnable=true\n{sizes}")
    slave_conf.write_text(f"slaveReadEnable=true\n{sizes}")
    with NameServer(listen_port=0) as ns:
        kw: dict[str, Any] = {"base_port": 0, "name": "ha", "out": open(os.devnull, "w")}  # noqa: SIM115
        master = Node(
            2, store_path_root_dir=str(tmp_path / "m"), broker_conf=str(master_conf), namesrv_addr=ns.address, **kw
        )
        slave = Node(2, store_path_root_dir=str(tmp_path / "s"), broker_conf=str(slave_conf), slave_of=ns.address, **kw)
        try:
            master.start()
            assert create_topic(ns.address, "HaNodeTopic", 2) == ["ha-0", "ha-1"]
            slave.start()  # each slave copies its master's topics at start
            producer = TestProducer(ns.address)
            try:
                sent = producer.produce("HaNodeTopic", 60)
            finally:
                producer.close()
            assert {r.send_status.name for r in sent} == {"SEND_OK"}  # SYNC_MASTER: on the slave too
            assert {r.message_queue.broker_name for r in sent} == {"ha-0", "ha-1"}
            master.shutdown()
            assert master.ok
            consumer = TestConsumer(ns.address)
            try:
                got = consumer.consume("HaNodeTopic", 60, timeout=30)
            finally:
                consumer.close()
            assert sorted(m.body for m in got) == sorted(f"message-{i}".encode() for i in range(60))
            assert {m.store_host[1] for m in got} <= {b.port for b in master.brokers}  # the records the masters wrote
        finally:
            slave.shutdown()
            master.shutdown()
            kw["out"].close()
