"""The cluster a test talks to: an in-process name server and broker, or an external cluster by its name server.

Owns: ``RocketMQCluster`` (``namesrv_addr``, ``broker_addr``/``broker_addrs``, ``create_topic``, ``close``),
``start_cluster`` (a name server and one broker in this process, on free ports of 127.0.0.1, over a store
directory) and ``connect_cluster`` (an external name server; nothing is started or stopped).

Invariants: ``start_cluster`` returns once the name server knows the broker, so a topic can be created at once.
The broker's CommitLog files are ``SMALL_COMMIT_LOG_FILE_SIZE`` and its ConsumeQueue files
``SMALL_CONSUME_QUEUE_FILE_SIZE`` unless the broker.conf sets other sizes (RocketMQ's 1 GiB CommitLog file is allocated
up front). ``close()`` shuts the broker down before the name server and is idempotent; an external cluster's
``close()`` does nothing. Importing this module imports no broker, name server or client code (the pytest plugin
loads it in every session of a project that installed rmq_core); they are imported when a cluster starts.
Thread-safety: start and close from one thread; the addresses may be read from any thread.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from rmq_core.testing.topic_admin import brokers_of, create_topic

if TYPE_CHECKING:
    from rmq_core.broker import Broker
    from rmq_core.namesrv import NameServer
    from rmq_core.node import Node

SMALL_COMMIT_LOG_FILE_SIZE = 4 << 20  # 4 MiB: a test session's messages fit; a larger message still fits one file
SMALL_CONSUME_QUEUE_FILE_SIZE = 20 * 10_000  # 10,000 units of 20 bytes
BROKER_REGISTER_TIMEOUT_S = 10.0


@dataclass
class RocketMQCluster:
    """A name server and its brokers as a test sees them. ``external`` clusters were started by someone else."""

    namesrv_addr: str
    broker_addrs: dict[str, str]  # broker name -> master address
    store_dir: str | None = None
    external: bool = False
    # ACL credentials (--rocketmq-access-key/--rocketmq-secret-key): topics created and the helpers' clients signed
    credentials: dict[str, Any] = field(default_factory=lambda: {"access_key": None, "secret_key": None})
    _namesrv: NameServer | None = field(default=None, repr=False)
    _broker: Broker | None = field(default=None, repr=False)
    _node: Node | None = field(default=None, repr=False)
    _out: IO[str] | None = field(default=None, repr=False)

    @property
    def broker_addr(self) -> str:
        """The address of the (first, by name) master broker."""
        return next(iter(self.broker_addrs.values()))

    def create_topic(self, topic: str | None = None, queues: int = 4) -> str:
        """Create ``topic`` (default: a fresh unique name) on every master; returns its name once routable."""
        name = topic or f"rocketmq-test-{uuid.uuid4().hex[:12]}"
        create_topic(self.namesrv_addr, name, queues, **self.credentials)
        return name

    def close(self) -> None:
        broker, namesrv, node, out = self._broker, self._namesrv, self._node, self._out
        self._broker = self._namesrv = self._node = self._out = None
        try:
            if node is not None:
                node.shutdown()
            if broker is not None:
                broker.shutdown()
        finally:
            if namesrv is not None:
                namesrv.shutdown()
            if out is not None:
                out.close()

    def __enter__(self) -> RocketMQCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _broker_config(store_dir: str, broker_conf: str | None, namesrv_addr: str) -> Any:
    from rmq_core.broker import BrokerConfig
    from rmq_core.broker.broker_config import parse_properties

    if broker_conf is None:
        cfg = BrokerConfig(broker_name="rocketmq-test-broker")
        cfg.listen_port = 0
        cfg.store_path_root_dir = store_dir
        set_keys: set[str] = set()
    else:
        with open(broker_conf, encoding="utf-8") as f:
            props = parse_properties(f.read())
        cfg = BrokerConfig.from_properties(props)
        if not cfg.acl_file:  # aclEnable: plain_acl.yml beside the broker.conf, as from_properties_file has it
            cfg.acl_file = os.path.join(os.path.dirname(os.path.abspath(broker_conf)), "plain_acl.yml")
        set_keys = {k.lower() for k in props}
        if "listenport" not in set_keys:
            cfg.listen_port = 0
        if "storepathrootdir" not in set_keys:
            cfg.store_path_root_dir = store_dir
    defaults = BrokerConfig()
    if cfg.mapped_file_size_commit_log == defaults.mapped_file_size_commit_log:
        cfg.mapped_file_size_commit_log = SMALL_COMMIT_LOG_FILE_SIZE
    if cfg.mapped_file_size_consume_queue == defaults.mapped_file_size_consume_queue:
        cfg.mapped_file_size_consume_queue = SMALL_CONSUME_QUEUE_FILE_SIZE
    cfg.namesrv_addr = namesrv_addr
    return cfg


def start_cluster(
    store_dir: str | os.PathLike[str], broker_conf: str | os.PathLike[str] | None = None, brokers: int = 1
) -> RocketMQCluster:
    """Start a name server and a broker in this process on free ports, the broker's store under ``store_dir``
    (or the broker.conf's ``storePathRootDir``); settings from ``broker_conf`` (a RocketMQ broker.conf) if given.
    ``brokers`` > 1: a node (``rmq_core.node.Node``) of that many broker processes, stores under ``store_dir``."""
    if brokers > 1:
        return _start_node_cluster(
            os.fspath(store_dir), None if broker_conf is None else os.fspath(broker_conf), brokers
        )
    from rmq_core.broker import Broker
    from rmq_core.namesrv import NameServer

    namesrv = NameServer(listen_port=0).start()
    try:
        cfg = _broker_config(
            os.fspath(store_dir), None if broker_conf is None else os.fspath(broker_conf), namesrv.address
        )
        broker = Broker(cfg).start()
    except BaseException:
        namesrv.shutdown()
        raise
    cluster = RocketMQCluster(namesrv.address, {}, store_dir=cfg.store_path_root_dir, _namesrv=namesrv, _broker=broker)
    try:
        known = brokers_of(namesrv.address, wait_s=BROKER_REGISTER_TIMEOUT_S)
        if broker.address not in known.values():
            raise RuntimeError(f"broker {broker.address} did not register with {namesrv.address} (knows {known})")
        cluster.broker_addrs = known
    except BaseException:
        cluster.close()
        raise
    return cluster


def _start_node_cluster(store_dir: str, broker_conf: str | None, brokers: int) -> RocketMQCluster:
    """A node of ``brokers`` processes on free ports; their lines go to ``<store_dir>/node.log``."""
    from rmq_core.broker.broker_config import parse_properties
    from rmq_core.node import Node

    props: dict[str, str] = {}
    if broker_conf is not None:
        with open(broker_conf, encoding="utf-8") as f:
            props = parse_properties(f.read())
    if broker_conf is not None and "aclFile" not in props:  # plain_acl.yml beside the given broker.conf
        props["aclFile"] = os.path.join(os.path.dirname(os.path.abspath(broker_conf)), "plain_acl.yml")
    props.setdefault("mappedFileSizeCommitLog", str(SMALL_COMMIT_LOG_FILE_SIZE))
    props.setdefault("mappedFileSizeConsumeQueue", str(SMALL_CONSUME_QUEUE_FILE_SIZE))
    os.makedirs(store_dir, exist_ok=True)
    conf = os.path.join(store_dir, "node-broker.conf")
    with open(conf, "w", encoding="utf-8") as f:
        f.writelines(f"{k}={v}\n" for k, v in props.items())
    out = open(os.path.join(store_dir, "node.log"), "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
    node = Node(
        brokers, store_path_root_dir=store_dir, namesrv_port=0, base_port=0, name="rocketmq-test-broker",
        broker_conf=conf, out=out,
    )  # fmt: skip
    try:
        node.start()
    except BaseException:
        out.close()
        raise
    return RocketMQCluster(node.namesrv_addr, node.broker_addrs, store_dir=store_dir, _node=node, _out=out)


def connect_cluster(namesrv_addr: str) -> RocketMQCluster:
    """An external cluster by its name server: its masters are looked up (at least one must be registered)."""
    brokers = brokers_of(namesrv_addr, wait_s=BROKER_REGISTER_TIMEOUT_S)
    if not brokers:
        raise RuntimeError(f"name server {namesrv_addr} knows no broker")
    return RocketMQCluster(namesrv_addr, brokers, external=True)
