"""TopicConfigManager (br/topic/TopicConfigManager.java): the broker's topics → ``<config_dir>/topics.json``.

Format: fastjson, pretty, fields sorted: ``{"dataVersion":{...},"topicConfigTable":{T:{TopicConfig},...}}``.
On construction it holds the system topics Apache's constructor creates; ``load()`` merges the file over them (loaded
configs win). Every change bumps ``data_version``, persists and calls the change listeners (the controller
re-registers with the name servers).
Invariant: names are checked with ``validate_topic`` (``create_topic_in_send_message_method`` answers None for an
invalid name, the other creating methods raise ``ValueError``).
Not thread-safe: owned by the broker's event loop (``persist`` may also run at shutdown).
Details (the file, the system topics): docs/BROKER_DESIGN.md, 'Topic configs'.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from rmq_core.broker.config_manager import ConfigDecodeError, ConfigManager
from rmq_core.common import mix_all
from rmq_core.common.data_version import DataVersion
from rmq_core.common.perm_name import PERM_INHERIT, PERM_READ, PERM_WRITE, is_inherited
from rmq_core.common.topic_config import TopicConfig
from rmq_core.remoting import fastjson

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig

log = logging.getLogger(__name__)

TOPICS_FILE = "topics.json"
SCHEDULE_TOPIC_QUEUE_NUM = 18
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"


def topic_config_json(cfg: TopicConfig) -> dict[str, Any]:
    """TopicConfig's JSON with fastjson's (alphabetical) field order."""
    return dict(sorted(cfg.to_json_dict().items()))


def parse_topic_config_table(table: Any) -> dict[str, TopicConfig]:
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise ConfigDecodeError(f"topicConfigTable must be an object, not {type(table).__name__}")
    out: dict[str, TopicConfig] = {}
    for name, d in table.items():
        if not isinstance(d, dict):
            raise ConfigDecodeError(f"topic {name!r}: config must be an object")
        if "topicName" not in d or d["topicName"] is None:
            d = {**d, "topicName": name}
        try:
            out[str(name)] = TopicConfig.from_json_dict(d)
        except (TypeError, ValueError) as e:
            raise ConfigDecodeError(f"topic {name!r}: {e}") from None
    return out


class TopicConfigManager(ConfigManager):
    def __init__(self, broker_config: BrokerConfig, config_dir: str) -> None:
        super().__init__(os.path.join(os.fspath(config_dir), TOPICS_FILE))
        self.broker_config = broker_config
        self.topic_config_table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self.system_topics: set[str] = set()
        self._listeners: list[Callable[[TopicConfig], Any]] = []
        self._init_system_topics()

    # -- system topics -------------------------------------------------------------------------------------------

    def _put_system(self, name: str, queues: int | None = None, perm: int | None = None) -> None:
        cfg = TopicConfig(name)
        if queues is not None:
            cfg.read_queue_nums = cfg.write_queue_nums = queues
        if perm is not None:
            cfg.perm = perm
        self.system_topics.add(name)
        self.topic_config_table[name] = cfg

    def _init_system_topics(self) -> None:
        bc = self.broker_config
        cluster = bc.broker_cluster_name
        broker_name = bc.broker_name
        rw = PERM_READ | PERM_WRITE
        self._put_system(mix_all.RMQ_SYS_SELF_TEST_TOPIC, 1)
        if bc.auto_create_topic_enable:
            self._put_system(mix_all.AUTO_CREATE_TOPIC_KEY_TOPIC, bc.default_topic_queue_nums, PERM_INHERIT | rw)
        self._put_system(mix_all.RMQ_SYS_BENCHMARK_TOPIC, 1024)
        self._put_system(cluster, None, PERM_INHERIT | (rw if bc.cluster_topic_enable else 0))
        self._put_system(broker_name, 1, PERM_INHERIT | (rw if bc.broker_topic_enable else 0))
        self._put_system(mix_all.RMQ_SYS_OFFSET_MOVED_EVENT, 1)
        self._put_system(mix_all.RMQ_SYS_SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUM)
        if bc.trace_topic_enable:
            self._put_system(bc.msg_trace_topic_name, 1)
        self._put_system(f"{cluster}_{REPLY_TOPIC_POSTFIX}", 1)
        self._put_system(mix_all.RMQ_SYS_TRANS_HALF_TOPIC, 1)
        self._put_system(mix_all.RMQ_SYS_TRANS_OP_HALF_TOPIC, 1)
        self._put_system(mix_all.REVIVE_TOPIC_PREFIX + cluster, mix_all.REVIVE_QUEUE_NUM)  # 5.x POP's revive log

    # -- queries -------------------------------------------------------------------------------------------------

    def select_topic_config(self, topic: str) -> TopicConfig | None:
        return self.topic_config_table.get(topic)

    def contains_topic(self, topic: str) -> bool:
        return topic in self.topic_config_table

    def is_order_topic(self, topic: str) -> bool:
        cfg = self.topic_config_table.get(topic)
        return cfg is not None and cfg.order

    def is_system_topic(self, topic: str) -> bool:
        return topic in self.system_topics or mix_all.is_system_topic(topic)

    # -- listeners -----------------------------------------------------------------------------------------------

    def add_change_listener(self, fn: Callable[[TopicConfig], Any]) -> None:
        self._listeners.append(fn)

    def _changed(self, cfg: TopicConfig) -> None:
        for fn in list(self._listeners):
            try:
                fn(cfg)
            except Exception:  # a listener failure must not undo the change
                log.exception("topic change listener failed for %s", cfg.topic_name)

    def _commit(self, cfg: TopicConfig | None) -> None:
        self.data_version.next_version()
        self.persist()
        if cfg is not None:
            self._changed(cfg)

    # -- changes -------------------------------------------------------------------------------------------------

    def create_topic_in_send_message_method(
        self,
        topic: str,
        default_topic: str,
        remote_address: str,
        client_default_topic_queue_nums: int,
        topic_sys_flag: int,
    ) -> TopicConfig | None:
        existing = self.topic_config_table.get(topic)
        if existing is not None:
            return existing
        reason = mix_all.validate_topic(topic)
        if reason is not None:
            log.warning("Create new topic failed: %s producer:[%s]", reason, remote_address)
            return None
        default_cfg = self.topic_config_table.get(default_topic)
        if default_cfg is None:
            log.warning(
                "Create new topic failed, because the default topic[%s] not exist. producer:[%s]",
                default_topic,
                remote_address,
            )
            return None
        if default_topic == mix_all.AUTO_CREATE_TOPIC_KEY_TOPIC and not self.broker_config.auto_create_topic_enable:
            default_cfg.perm = PERM_READ | PERM_WRITE
        if not is_inherited(default_cfg.perm):
            log.warning(
                "Create new topic failed, because the default topic[%s] has no perm [%d] producer:[%s]",
                default_topic,
                default_cfg.perm,
                remote_address,
            )
            return None
        queue_nums = max(0, min(int(client_default_topic_queue_nums), default_cfg.write_queue_nums))
        cfg = TopicConfig(
            topic,
            read_queue_nums=queue_nums,
            write_queue_nums=queue_nums,
            perm=default_cfg.perm & ~PERM_INHERIT,
            topic_filter_type=default_cfg.topic_filter_type,
            topic_sys_flag=int(topic_sys_flag),
        )
        log.info("Create new topic by default topic:[%s] config:[%s] producer:[%s]", default_topic, cfg, remote_address)
        self.topic_config_table[topic] = cfg
        self._commit(cfg)
        return cfg

    def create_topic_in_send_message_back_method(
        self, topic: str, client_default_topic_queue_nums: int, perm: int, topic_sys_flag: int
    ) -> TopicConfig:
        existing = self.topic_config_table.get(topic)
        if existing is not None:
            return existing
        reason = mix_all.validate_topic(topic)
        if reason is not None:
            raise ValueError(reason)
        cfg = TopicConfig(
            topic,
            read_queue_nums=int(client_default_topic_queue_nums),
            write_queue_nums=int(client_default_topic_queue_nums),
            perm=int(perm),
            topic_sys_flag=int(topic_sys_flag),
        )
        log.info("create new topic %s", cfg)
        self.topic_config_table[topic] = cfg
        self._commit(cfg)
        return cfg

    def adopt_store_topics(self, queues: Iterable[tuple[str, int]]) -> list[TopicConfig]:
        """Give a config to every topic that has ConsumeQueues in the store but none in topics.json (a directory
        written through ``MessageStore``, or copied without its ``config/``), so that the broker routes and serves it:
        read/write queue count = highest queue id + 1, perm RW. ``queues`` is the store's (topic, queue_id) list.
        Topics with a config keep it; names RocketMQ's validator refuses are logged and skipped. Persisted once."""
        highest: dict[str, int] = {}
        for topic, queue_id in queues:
            if topic not in self.topic_config_table:
                highest[topic] = max(highest.get(topic, -1), int(queue_id))
        adopted: list[TopicConfig] = []
        for topic in sorted(highest):
            reason = mix_all.validate_topic(topic)
            if reason is not None:
                log.warning("store topic %r has ConsumeQueues but is not adopted: %s", topic, reason)
                continue
            n = highest[topic] + 1
            cfg = TopicConfig(topic, read_queue_nums=n, write_queue_nums=n, perm=PERM_READ | PERM_WRITE)
            self.topic_config_table[topic] = cfg
            adopted.append(cfg)
            log.info("adopted topic %s from the store's ConsumeQueues (%d queues): it had no config", topic, n)
        if adopted:
            self.data_version.next_version()
            self.persist()
        return adopted

    def create_topic_if_absent(self, cfg: TopicConfig) -> TopicConfig:
        existing = self.topic_config_table.get(cfg.topic_name)
        if existing is not None:
            return existing
        reason = mix_all.validate_topic(cfg.topic_name)
        if reason is not None:
            raise ValueError(reason)
        self.topic_config_table[cfg.topic_name] = cfg
        self._commit(cfg)
        return cfg

    def update_topic_config(self, cfg: TopicConfig) -> None:
        reason = mix_all.validate_topic(cfg.topic_name)
        if reason is not None:
            raise ValueError(reason)
        old = self.topic_config_table.get(cfg.topic_name)
        self.topic_config_table[cfg.topic_name] = cfg
        if old is not None:
            log.info("update topic config, old:[%s] new:[%s]", old, cfg)
        else:
            log.info("create new topic [%s]", cfg)
        self._commit(cfg)

    def delete_topic_config(self, topic: str) -> TopicConfig | None:
        old = self.topic_config_table.pop(topic, None)
        if old is None:
            log.warning("delete topic config failed, topic: %s not exists", topic)
            return None
        log.info("delete topic config OK, topic: %s", old)
        self._commit(None)
        return old

    # -- wire / file ---------------------------------------------------------------------------------------------

    def build_serialize_wrapper(self) -> dict[str, Any]:
        """TopicConfigSerializeWrapper as REGISTER_BROKER carries it: ``{"topicConfigTable", "dataVersion"}``."""
        return {
            "dataVersion": self.data_version.to_json_dict(),
            "topicConfigTable": {name: topic_config_json(cfg) for name, cfg in self.topic_config_table.items()},
        }

    def encode(self, pretty: bool = False) -> str:
        return fastjson.dumps(self.build_serialize_wrapper(), pretty=pretty)

    def decode(self, text: str) -> None:
        doc = fastjson.loads(text, int_keys=False)
        if not isinstance(doc, dict):
            raise ConfigDecodeError(f"{self.config_file_path}: the document must be a JSON object")
        table = parse_topic_config_table(doc.get("topicConfigTable"))
        version = DataVersion.from_json_dict(doc.get("dataVersion")) if doc.get("dataVersion") is not None else None
        self.topic_config_table.update(table)
        if version is not None:
            self.data_version.assign_new_one(version)
        for cfg in table.values():
            log.info("load exist local topic, %s", cfg)
