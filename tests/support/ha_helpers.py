"""Helpers for the replication tests: an rmq_core master and slave started in this process over loopback, the send
of N messages through SEND_MESSAGE_V2, and the byte-for-byte comparison of two CommitLogs up to an offset."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.send_helpers import SMALL_FILES, send_request

HA_TOPIC = "HaTopic"


def start_broker(root: str, **config: Any) -> Broker:
    cfg = BrokerConfig(
        listen_port=0,
        store_path_root_dir=root,
        broker_name="broker-ha",
        **{"namesrv_addr": None, **SMALL_FILES, **config},
    )
    return Broker(cfg).start()


def ha_address(master: Broker) -> str:
    svc = master.controller.replication.ha_service
    assert svc is not None
    return f"127.0.0.1:{svc.port}"


def start_slave(root: str, master: Broker, **config: Any) -> Broker:
    return start_broker(
        root, **{"broker_role": "SLAVE", "broker_id": 1, "ha_master_address": ha_address(master), **config}
    )


@contextlib.contextmanager
def brokers(*items: Broker) -> Iterator[None]:
    try:
        yield
    finally:
        for b in items:
            b.shutdown()


def send_n(client: BlockingRemotingClient, broker: Broker, n: int, topic: str = HA_TOPIC, size: int = 300) -> list[Any]:
    out = []
    for i in range(n):
        r = client.invoke_sync(
            broker.address,
            send_request(topic, bytes([i % 256]) * (size + i % 17), queue_id=i % 4, properties=f"TAGS\x01t{i % 3}\x02"),
            timeout=10.0,
        )
        out.append(r)
    return out


def commit_log_bytes(root: str, upto: int, file_size: int) -> bytes:
    """The CommitLog of the store at ``root`` from its first file up to ``upto``, read from the files."""
    d = os.path.join(root, "commitlog")
    names = sorted(os.listdir(d))
    out = bytearray()
    for n in names:
        start = int(n)
        if start >= upto:
            break
        with open(os.path.join(d, n), "rb") as f:
            out += f.read(min(file_size, upto - start))
    return bytes(out)


def first_file_start(root: str) -> int:
    return int(sorted(os.listdir(os.path.join(root, "commitlog")))[0])


def ok(r: Any) -> bool:
    return r.code == ResponseCode.SUCCESS


def sync_configs(slave: Broker, master: Broker) -> None:
    """Point the slave's SlaveSynchronize at the master (a name server would tell it) and run one round now."""
    import asyncio

    c = slave.controller
    c.master_addr = master.address
    sync = c.replication.slave_synchronize
    assert sync is not None
    asyncio.run_coroutine_threadsafe(sync.sync_all(), c.loop).result(10)
