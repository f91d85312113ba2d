"""BrokerConfig: RocketMQ's BrokerConfig and the MessageStoreConfig settings a broker.conf carries, in snake_case.

``BrokerConfig.from_properties_file(path)`` reads a RocketMQ ``broker.conf`` (Java properties, camelCase keys such as
``brokerName``, ``listenPort``, ``storePathRootDir``, ``flushDiskType``); unknown keys are kept in ``extra`` and logged,
values are parsed by the field's type. ``to_store_config()`` gives the StoreConfig for the broker's MessageStore.
Defaults are RocketMQ's (cm/BrokerConfig.java, st/config/MessageStoreConfig.java), except ``store_path_root_dir``
(``./rmq-store``, the embedded default) .
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import socket
from dataclasses import dataclass, field
from typing import Any

from rmq_core.common.perm_name import DEFAULT_PERM
from rmq_core.remoting.remoting_server import FRAME_DEADLINE_S, SERVER_CHANNEL_MAX_IDLE_TIME_S, SERVER_MAX_CONNECTIONS
from rmq_core.store import StoreConfig

log = logging.getLogger(__name__)

DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


def _local_ip() -> str:
    return "127.0.0.1"


@dataclass
class BrokerConfig:
    broker_name: str = field(default_factory=lambda: socket.gethostname().split(".")[0] or "broker-a")
    broker_cluster_name: str = "DefaultCluster"
    broker_id: int = 0
    broker_ip1: str = field(default_factory=_local_ip)
    listen_port: int = 10911
    # the remoting server's bounds (remoting invariant 7; read at start): 4.9 NettyServerConfig's
    # serverChannelMaxIdleTimeSeconds (a connection neither reading nor writing this long is closed), and rmq_core's
    # cap on open connections and seconds a begun frame may take to arrive (0: no limit)
    server_channel_max_idle_time_seconds: int = SERVER_CHANNEL_MAX_IDLE_TIME_S
    server_max_connections: int = SERVER_MAX_CONNECTIONS
    server_frame_deadline_seconds: int = FRAME_DEADLINE_S
    namesrv_addr: str | None = None
    store_path_root_dir: str = "./rmq-store"
    broker_role: str = "ASYNC_MASTER"  # ASYNC_MASTER | SYNC_MASTER | SLAVE
    flush_disk_type: str = "ASYNC_FLUSH"
    # MessageStoreConfig's flushIntervalCommitLog / flushCommitLogTimed (4.9.7: 500 ms, true: under ASYNC_FLUSH the
    # CommitLog is flushed on that period, sends do not wake the flush thread); read at start
    flush_interval_commit_log: int = 500
    flush_commit_log_timed: bool = True
    broker_permission: int = DEFAULT_PERM
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 8
    long_polling_enable: bool = True
    lite_pull_message_enable: bool = True  # 5.x's litePullMessageEnable: LITE_PULL_MESSAGE (361) answered
    short_polling_time_mills: int = 1000
    enable_property_filter: bool = False
    filter_support_retry: bool = False
    slave_read_enable: bool = False
    offset_check_in_slave: bool = False
    transfer_msg_by_heap: bool = True
    flush_consumer_offset_interval: int = 5000
    register_name_server_period: int = 30000
    register_broker_timeout_mills: int = 6000
    channel_expired_timeout: int = 120000
    notify_consumer_ids_changed_enable: bool = True
    max_message_size: int = 4 * 1024 * 1024
    message_delay_level: str = DEFAULT_MESSAGE_DELAY_LEVEL
    trace_topic_enable: bool = False
    msg_trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"
    cluster_topic_enable: bool = True  # the cluster-name topic is writable (RW) / not (0)
    broker_topic_enable: bool = True  # the broker-name topic is writable (RW) / not (0)
    commercial_base_count: int = 1
    trace_on: bool = True  # sent as TRACE_ON on send responses; a Java client with tracing on skips traces on "false"
    region_id: str = "DefaultRegion"
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * 20
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    max_transfer_bytes_on_message_in_disk: int = 64 * 1024
    max_transfer_count_on_message_in_disk: int = 8
    access_message_in_memory_max_ratio: int = 40
    # index files (messageIndexEnable / maxHashSlotNum / maxIndexNum / maxMsgsNumBatch)
    message_index_enable: bool = True
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    max_msgs_num_batch: int = 64
    # master/slave replication (4.9 MessageStoreConfig; broker/ha/). haListenPort -1: listenPort + 1 (4.9.7 always
    # uses listenPort + 1; rmq_core honours an explicit value, 0 = a free port); haMasterAddress: the master's HA
    # "ip:port" for a slave (else learned from the name server's REGISTER_BROKER answer)
    ha_listen_port: int = -1
    ha_master_address: str = ""
    ha_transfer_batch_size: int = 32 * 1024
    ha_send_heartbeat_interval: int = 5000
    ha_housekeeping_interval: int = 20000
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024
    sync_flush_timeout: int = 5000  # also SYNC_MASTER's wait for a slave (4.9's GroupCommitRequest deadline)
    # RocketMQ 5's name: the Prometheus endpoint's port (-1 off, 0 a free port); needs rmq_core[metrics]
    metrics_prom_exporter_port: int = -1
    # transactions (BrokerConfig: rejectTransactionMessage, transactionTimeOut, transactionCheckMax,
    # transactionCheckInterval; MessageStoreConfig: fileReservedTime, hours, the age past which a half message is
    # dropped unchecked)
    reject_transaction_message: bool = False
    transaction_timeout: int = 6000
    transaction_check_max: int = 15
    transaction_check_interval: int = 60000
    file_reserved_time: int = 72
    # retention (MessageStoreConfig; the store's CleanCommitLogService, store_clean_service.py; fileReservedTime above)
    clean_resource_interval: int = 10_000
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    delete_commit_log_files_interval: int = 100
    delete_consume_queue_files_interval: int = 100
    clean_file_forcibly_enable: bool = True
    disk_space_warning_level_ratio: int = 90  # RocketMQ 5's names (4.9: system properties, 0.90 / 0.85)
    disk_space_clean_forcibly_ratio: int = 85
    delete_file_batch_max: int = 10
    # warmMapedFileEnable (MessageStoreConfig, Apache's spelling): the store's warm-ahead thread pre-faults the pages
    # the writer reaches next (4.9: off, and it writes and mlocks each new file; rmq_core's faults only, on by default)
    warm_mapped_file_enable: bool = True
    # RocketMQ 5's timer messages (MessageStoreConfig 5.x names and defaults; broker/timer/)
    timer_wheel_enable: bool = True
    timer_precision_ms: int = 1000
    timer_max_delay_sec: int = 3600 * 24 * 3
    timer_roll_window_slot: int = 3600 * 24 * 2
    timer_flush_interval_ms: int = 1000
    mapped_file_size_timer_log: int = 100 * 1024 * 1024
    # RocketMQ 4.9's plain ACL (broker/acl/): aclEnable; aclFile is rmq_core's key for plain_acl.yml (4.9.7 reads
    # ${rocketmqHome}/conf/plain_acl.yml); blank: beside the broker.conf read, else $ROCKETMQ_HOME/conf/
    acl_enable: bool = False
    acl_file: str = ""
    # RocketMQ 5's gRPC MessagingService beside the remoting port (broker/grpc/, the rmq_core[grpc] extra; rmq_core's
    # key, Apache serves it from a proxy): -1 off, 0 a free port
    grpc_port: int = -1
    # TLS beside plaintext on the gRPC port (grpc_tls_front.py): a PEM certificate + key, or a self-signed one made
    # at start (openssl) under the store's config directory; neither: plaintext only
    grpc_tls_cert_file: str = ""
    grpc_tls_key_file: str = ""
    grpc_tls_self_signed: bool = False
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def is_slave(self) -> bool:
        return self.broker_role == "SLAVE"

    def to_store_config(self) -> StoreConfig:
        return StoreConfig(
            flush_disk_type=self.flush_disk_type,
            flush_interval_commit_log=self.flush_interval_commit_log,
            flush_commit_log_timed=self.flush_commit_log_timed,
            sync_flush_timeout=self.sync_flush_timeout,
            max_message_size=self.max_message_size,
            mapped_file_size_commit_log=self.mapped_file_size_commit_log,
            mapped_file_size_consume_queue=self.mapped_file_size_consume_queue,
            store_host=(self.broker_ip1, self.listen_port),
            max_transfer_bytes_on_message_in_memory=self.max_transfer_bytes_on_message_in_memory,
            max_transfer_count_on_message_in_memory=self.max_transfer_count_on_message_in_memory,
            max_transfer_bytes_on_message_in_disk=self.max_transfer_bytes_on_message_in_disk,
            max_transfer_count_on_message_in_disk=self.max_transfer_count_on_message_in_disk,
            access_message_in_memory_max_ratio=self.access_message_in_memory_max_ratio,
            message_index_enable=self.message_index_enable,
            max_hash_slot_num=self.max_hash_slot_num,
            max_index_num=self.max_index_num,
            max_msgs_num_batch=self.max_msgs_num_batch,
            clean_resource_interval=self.clean_resource_interval,
            delete_when=self.delete_when,
            file_reserved_time=self.file_reserved_time,
            disk_max_used_space_ratio=self.disk_max_used_space_ratio,
            delete_commit_log_files_interval=self.delete_commit_log_files_interval,
            delete_consume_queue_files_interval=self.delete_consume_queue_files_interval,
            clean_file_forcibly_enable=self.clean_file_forcibly_enable,
            disk_space_warning_level_ratio=self.disk_space_warning_level_ratio,
            disk_space_clean_forcibly_ratio=self.disk_space_clean_forcibly_ratio,
            delete_file_batch_max=self.delete_file_batch_max,
            warm_mapped_file_enable=self.warm_mapped_file_enable,
        )

    @property
    def store_config_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "config")

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> BrokerConfig:
        cfg = cls()
        types = {f.name: f for f in dataclasses.fields(cls)}
        for key, raw in props.items():
            name = _snake(key)
            f = types.get(name)
            if f is None or name == "extra":
                cfg.extra[key] = raw
                log.info("broker.conf key %s is not used by rmq_core; kept in extra", key)
                continue
            setattr(cfg, name, _convert(getattr(cfg, name), raw, key))
        return cfg

    @classmethod
    def from_properties_file(cls, path: str | os.PathLike[str]) -> BrokerConfig:
        with open(path, encoding="utf-8") as f:
            cfg = cls.from_properties(parse_properties(f.read()))
        if not cfg.acl_file:  # plain_acl.yml beside the broker's config
            cfg.acl_file = os.path.join(os.path.dirname(os.path.abspath(path)), "plain_acl.yml")
        return cfg


# broker.conf keys whose snake_case is not the field's name
_KEY_ALIASES = {"transaction_time_out": "transaction_timeout", "warm_maped_file_enable": "warm_mapped_file_enable"}


def _snake(key: str) -> str:
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower()
    return _KEY_ALIASES.get(name, name)


def _convert(current: Any, raw: str, key: str) -> Any:
    raw = raw.strip()
    if isinstance(current, bool):
        return raw.lower() == "true"
    if isinstance(current, int):
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"broker.conf: {key}={raw!r} is not an integer") from None
    return raw


def parse_properties(text: str) -> dict[str, str]:
    """Java ``Properties.load`` for the lines broker.conf uses: ``key=value`` / ``key: value`` / ``key value``,
    ``#``/``!`` comments, backslash line continuations."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip()
        i += 1
        if not line or line[0] in "#!":
            continue
        while line.endswith("\\") and i < len(lines):
            line = line[:-1] + lines[i].lstrip()
            i += 1
        m = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if m:
            out[m.group(1)] = m.group(2).rstrip()
        else:
            out[line.strip()] = ""
    return out
