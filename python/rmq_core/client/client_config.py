"""ClientConfig (4.9 ``org.apache.rocketmq.client.ClientConfig``): what every producer and consumer shares — name
server address, client IP, instance/unit name, the instance's scheduled-task intervals — and the client id built
from them (``build_mq_client_id`` = ``ip@instanceName[@unitName]``), which keys the shared ``MQClientInstance``.

Invariants: intervals are milliseconds; ``change_instance_name_to_pid`` only rewrites the instance name "DEFAULT".
Thread-safety: a plain value object, set up before ``start()`` and read-only afterwards.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field, fields, replace

DEFAULT_INSTANCE_NAME = "DEFAULT"


def _local_ip() -> str:
    """A non-loopback IPv4 address of this host when there is one (RemotingUtil.getLocalAddress), else 127.0.0.1."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # no packet is sent: this only picks the outgoing interface
            ip = s.getsockname()[0]
            if ip and not ip.startswith("0."):
                return str(ip)
    except OSError:
        pass
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


_LOCAL_IP: str | None = None


def local_ip() -> str:
    global _LOCAL_IP
    if _LOCAL_IP is None:
        _LOCAL_IP = _local_ip()
    return _LOCAL_IP


@dataclass
class ClientConfig:
    namesrv_addr: str | None = field(default_factory=lambda: os.environ.get("NAMESRV_ADDR"))
    client_ip: str = field(default_factory=local_ip)
    instance_name: str = field(default_factory=lambda: os.environ.get("rocketmq.client.name", DEFAULT_INSTANCE_NAME))  # noqa: SIM112  (Java's property name)
    unit_name: str | None = None
    unit_mode: bool = False
    poll_name_server_interval: int = 30000
    heartbeat_broker_interval: int = 30000
    persist_consumer_offset_interval: int = 5000
    mq_client_api_timeout: int = 3000
    rebalance_interval_ms: int = 20000  # 4.9: system property rocketmq.client.rebalance.waitInterval
    language: str = "PYTHON"
    # RocketMQ 4.9's ACL: with both set, every request is signed as AclClientRPCHook signs it (remoting/acl_signer.py)
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)

    def build_mq_client_id(self) -> str:
        cid = f"{self.client_ip}@{self.instance_name}"
        if self.unit_name and self.unit_name.strip():
            cid += f"@{self.unit_name}"
        return cid

    def change_instance_name_to_pid(self) -> None:
        """ClientConfig.changeInstanceNameToPID (4.9.7): "DEFAULT" becomes ``<pid>#<nanoTime>``."""
        if self.instance_name == DEFAULT_INSTANCE_NAME:
            self.instance_name = f"{os.getpid()}#{time.monotonic_ns()}"

    def namesrv_addr_list(self) -> list[str]:
        """The name server addresses (``;``-separated in ``namesrv_addr``), blanks dropped."""
        if not self.namesrv_addr:
            return []
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    def clone(self) -> ClientConfig:
        return replace(self)

    @classmethod
    def setting_names(cls) -> frozenset[str]:
        return frozenset(f.name for f in fields(cls))
