"""Helpers for the client-core tests (MQClientAPIImpl, MQClientInstance, Producer): a name server with one or more
real brokers, a minimal registered consumer (the MQConsumerInner interface the instance talks to), a silent TCP
server that accepts connections and never answers (for send timeouts), and registering a broker address with the
name server by hand."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.common.topic_config import TopicConfig
from rmq_core.filter.subscription_data import SubscriptionData, build_subscription_data
from rmq_core.message import MessageQueue
from rmq_core.namesrv import NameServer
from rmq_core.remoting.body.heartbeat import ConsumeFromWhere, ConsumeType, MessageModel
from rmq_core.remoting.body.route import RegisterBrokerBody
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import RegisterBrokerRequestHeader, encode_header
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.admin_helpers import wait_for_route
from support.helpers import wait_until  # noqa: F401 (re-exported to the tests)

FAST = {"poll_name_server_interval": 200, "heartbeat_broker_interval": 200}


def start_broker(ns: NameServer, root: Path, name: str, **kw: Any) -> Broker:
    cfg = BrokerConfig(
        listen_port=0, namesrv_addr=ns.address, store_path_root_dir=str(root / name), broker_name=name, **kw
    )
    return Broker(cfg).start()


@contextlib.contextmanager
def cluster(root: Path, n_brokers: int = 1, **broker_kw: Any) -> Iterator[tuple[NameServer, list[Broker]]]:
    """A name server and ``n_brokers`` masters named broker-a, broker-b, ... registered with it."""
    ns = NameServer(listen_port=0).start()
    brokers: list[Broker] = []
    try:
        for i in range(n_brokers):
            brokers.append(start_broker(ns, root, f"broker-{chr(ord('a') + i)}", **broker_kw))
        wait_registered(ns, [b.controller.broker_config.broker_name for b in brokers])
        yield ns, brokers
    finally:
        for b in brokers:
            with contextlib.suppress(Exception):
                b.shutdown()
        ns.shutdown()


def wait_registered(ns: NameServer, broker_names: list[str], timeout: float = 10.0) -> None:
    """Wait until the name server routes each broker's own topic (a broker registers in the background after its
    start returns; a client asking earlier would rightly get TOPIC_NOT_EXIST)."""
    for name in broker_names:
        wait_for_route(ns.address, name, timeout=timeout)


class RecordingConsumer:
    """A registered consumer as the instance sees one (MQConsumerInner): records what the instance calls."""

    def __init__(self, group: str, topics: list[str], expression: str = "*") -> None:
        self.group_name = group
        self.message_model = MessageModel.CLUSTERING
        self.consume_type = ConsumeType.CONSUME_PASSIVELY
        self.consume_from_where = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
        self._subs = [build_subscription_data(t, expression) for t in topics]
        self.subscribe_info: dict[str, set[MessageQueue]] = {}
        self.rebalances = 0
        self.persists = 0
        self._lock = threading.Lock()

    def subscriptions(self) -> list[SubscriptionData]:
        return list(self._subs)

    async def do_rebalance(self) -> None:
        with self._lock:
            self.rebalances += 1

    def persist_consumer_offset(self) -> None:
        with self._lock:
            self.persists += 1

    def update_topic_subscribe_info(self, topic: str, mqs: set[MessageQueue]) -> None:
        if any(s.topic == topic for s in self._subs):
            self.subscribe_info[topic] = set(mqs)

    def is_subscribe_topic_need_update(self, topic: str) -> bool:
        return any(s.topic == topic for s in self._subs) and topic not in self.subscribe_info

    def is_unit_mode(self) -> bool:
        return False


class SilentServer:
    """Accepts TCP connections on 127.0.0.1 and reads, but never answers (a broker that hangs)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.received = 0
        self._conns: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="silent-server", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                c, _ = self.sock.accept()
            except (TimeoutError, OSError):
                pass
            else:
                c.settimeout(0.05)
                self._conns.append(c)
            for c in list(self._conns):
                try:
                    data = c.recv(65536)
                    self.received += len(data)
                except (TimeoutError, OSError):
                    pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for c in self._conns:
            c.close()
        self.sock.close()

    def __enter__(self) -> SilentServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def fake_broker_registration(
    ns: NameServer, broker_name: str, addr: str, topics: list[str], queues: int = 2
) -> Iterator[None]:
    """REGISTER_BROKER with the name server for a broker at ``addr`` owning ``topics`` (perm RW). The registering
    connection stays open inside the ``with`` (the name server drops a broker whose channel closes)."""
    body = RegisterBrokerBody.from_wrapper(
        {
            "topicConfigTable": {t: TopicConfig(t, queues, queues, 6) for t in topics},
            "dataVersion": {"timestamp": int(time.time() * 1000), "counter": 1},
        }
    ).encode()
    header = RegisterBrokerRequestHeader(
        brokerName=broker_name,
        brokerAddr=addr,
        clusterName="FakeCluster",
        haServerAddr=addr,
        brokerId=0,
        compressed=False,
        bodyCrc32=zlib.crc32(body) & 0x7FFFFFFF,
    )
    with BlockingRemotingClient() as c:
        r = c.invoke_sync(
            ns.address, RemotingCommand.request(RequestCode.REGISTER_BROKER, encode_header(header), body), 5.0
        )
        assert r.code == ResponseCode.SUCCESS, r.remark
        yield
