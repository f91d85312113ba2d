"""Helpers for the slave-read tests (tests/client/test_consume_from_slave.py, tests/interop/test_slave_read_*.py): an
rmq_core master broker run as a child process (`rmq-core broker -c broker.conf`, so a test can SIGKILL it and start it
again on the same ports and store), rmq_core master/slave configs (the slave learns the master's HA address from the
name server), reads of what a broker has committed for a consumer group over QUERY_CONSUMER_OFFSET, a push consumer
with quick client intervals and a thread streaming sync sends.

Invariants: the master child is killed (SIGKILL, its process group) by ``stop()``/the context manager whatever the
test did; its output goes to ``<root>/master.log`` (shown when it fails to start). Thread-safety: test thread only,
except ``SyncSender`` (its own thread; its tables read under its lock).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.client import ConsumeFromWhere, Producer, PushConsumer, SendStatus
from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI
from rmq_core.message import Message
from rmq_core.remoting.header import QueryConsumerOffsetRequestHeader

from support.apache_rocketmq import free_port
from support.client_helpers_e2e import FAST_CLIENT

BROKER_NAME = "broker-sr"
CLUSTER = "SlaveReadCluster"
FILE_SIZE = 8 << 20  # master and slave must use the same CommitLog file size (4.9's HA has no field for it)


def rmq_core_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("rmq-core")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "rmq_core.cli"]


class MasterProcess:
    """A master broker in a child process: ``start()`` returns once it listens, ``kill9()`` SIGKILLs it."""

    def __init__(self, root: Path, namesrv_addr: str, **conf: Any) -> None:
        self.root = root
        self.port = free_port()
        self.ha_port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        settings: dict[str, Any] = {
            "brokerClusterName": CLUSTER,
            "brokerName": BROKER_NAME,
            "brokerId": 0,
            "brokerRole": "SYNC_MASTER",
            "brokerIP1": "127.0.0.1",
            "listenPort": self.port,
            "haListenPort": self.ha_port,
            "namesrvAddr": namesrv_addr,
            "storePathRootDir": str(root / "store"),
            "mappedFileSizeCommitLog": FILE_SIZE,
            "mappedFileSizeConsumeQueue": 60000,
            "flushConsumerOffsetInterval": 500,
            "slaveReadEnable": "true",
            "autoCreateTopicEnable": "false",
            **conf,
        }
        root.mkdir(parents=True, exist_ok=True)
        self.conf = root / "broker.conf"
        self.conf.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        self.log = root / "master.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> MasterProcess:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [*rmq_core_cmd(), "broker", "-c", str(self.conf)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the master exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return self
            time.sleep(0.05)
        raise AssertionError(f"the master does not listen after {timeout} s:\n{self.log.read_text()[-3000:]}")

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    stop = kill9

    def __enter__(self) -> MasterProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill9()


def _config(root: Path, namesrv_addr: str, **config: Any) -> BrokerConfig:
    settings: dict[str, Any] = {
        "listen_port": 0,
        "broker_ip1": "127.0.0.1",
        "namesrv_addr": namesrv_addr,
        "broker_cluster_name": CLUSTER,
        "broker_name": BROKER_NAME,
        "store_path_root_dir": str(root),
        "mapped_file_size_commit_log": FILE_SIZE,
        "mapped_file_size_consume_queue": 60000,
        "slave_read_enable": True,
        "flush_consumer_offset_interval": 500,
    }
    return BrokerConfig(**{**settings, **config})


def master_config(root: Path, namesrv_addr: str, **config: Any) -> BrokerConfig:
    """An rmq_core master's config (brokerId 0, ASYNC_MASTER unless told, slaveReadEnable) named BROKER_NAME."""
    return _config(root, namesrv_addr, **{"broker_id": 0, "broker_role": "ASYNC_MASTER", **config})


def slave_config(root: Path, namesrv_addr: str, **config: Any) -> BrokerConfig:
    """An rmq_core slave's config (brokerId 1, slaveReadEnable) of the master named BROKER_NAME; its HA master
    address comes from the name server's answer to its registration."""
    return _config(root, namesrv_addr, broker_id=1, broker_role="SLAVE", **config)


def start_slave(root: Path, namesrv_addr: str, **config: Any) -> Broker:
    return Broker(slave_config(root, namesrv_addr, **config)).start()


def committed_offsets(addr: str, group: str, topic: str, queues: int) -> dict[int, int]:
    """QUERY_CONSUMER_OFFSET of each queue at the broker ``addr`` (-1 where it has none: QUERY_NOT_FOUND)."""
    out: dict[int, int] = {}
    with BlockingMQClientAPI(None, 3000) as api:
        for q in range(queues):
            header = QueryConsumerOffsetRequestHeader(consumerGroup=group, topic=topic, queueId=q)
            try:
                out[q] = int(api.query_consumer_offset(addr, header))
            except Exception:
                out[q] = -1
    return out


def push_consumer(namesrv: str, group: str, topic: str, listener: Any, **settings: Any) -> PushConsumer:
    """A started clustering push consumer of ``topic`` from its first offset, with the tests' quick client intervals."""
    c = PushConsumer(
        group,
        namesrv_addr=namesrv,
        instance_name=f"{group}-inst",
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **{**FAST_CLIENT, **settings},
    )
    c.subscribe(topic, "*")
    c.register_message_listener(listener)
    c.start()
    return c


class SyncSender:
    """Sync sends of keys k-0, k-1, ... to ``topic`` on a thread until stopped; records the keys answered SEND_OK
    with their (queue id, queue offset), the other answers, and the sends that raised (the master gone)."""

    def __init__(self, producer: Producer, topic: str) -> None:
        self.producer = producer
        self.topic = topic
        self.send_ok: dict[str, tuple[int, int]] = {}
        self.other: list[str] = []  # answered but not SEND_OK (SLAVE_NOT_AVAILABLE ...)
        self.failed = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._t = threading.Thread(target=self._run, daemon=True)

    def start(self) -> SyncSender:
        self._t.start()
        return self

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            key = f"k-{i}"
            i += 1
            try:
                r = self.producer.send(Message(self.topic, key.encode() * 20, keys=key))
            except Exception:
                with self._lock:
                    self.failed += 1
                time.sleep(0.02)
                continue
            with self._lock:
                if r.send_status is SendStatus.SEND_OK:
                    self.send_ok[key] = (r.message_queue.queue_id, r.queue_offset)
                else:
                    self.other.append(f"{key}:{r.send_status.name}")

    def ok_count(self) -> int:
        with self._lock:
            return len(self.send_ok)

    def stop(self) -> None:
        self._stop.set()
        self._t.join(30)


def send_ok_once(producer: Producer, topic: str) -> bool:
    """One sync send of a warm-up message: True when answered SEND_OK (a SYNC_MASTER's slave holds it); False when
    answered otherwise or when it raised (a SYNC_MASTER waits for its slave: the client may time out first)."""
    try:
        return producer.send(Message(topic, b"warm-up", keys="warm-up")).send_status is SendStatus.SEND_OK
    except Exception:
        return False
