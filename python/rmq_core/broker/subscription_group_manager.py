"""SubscriptionGroupManager (br/subscription/SubscriptionGroupManager.java): consumer groups' settings →
``<config_dir>/subscriptionGroup.json``.

Format: fastjson, pretty, fields sorted: ``{"dataVersion":{...},"subscriptionGroupTable":{g:{...}}}`` (5.x's extra
fields accepted and ignored). Holds Apache's system groups from construction; ``find_subscription_group_config``
auto-creates a missing group with a valid name when ``auto_create_subscription_group`` (or a ``CID_RMQ_SYS_`` group),
else answers None. Every change bumps ``data_version`` and persists; ``load()`` merges the file over the system groups.
Not thread-safe: owned by the broker's event loop (``persist`` may also run at shutdown).
Details: docs/BROKER_DESIGN.md, 'Subscription groups'.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from rmq_core.broker.config_manager import ConfigDecodeError, ConfigManager
from rmq_core.common import mix_all
from rmq_core.common.data_version import DataVersion
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.remoting import fastjson

if TYPE_CHECKING:
    from rmq_core.broker.broker_config import BrokerConfig

log = logging.getLogger(__name__)

SUBSCRIPTION_GROUP_FILE = "subscriptionGroup.json"
FILTERSRV_CONSUMER_GROUP = "FILTERSRV_CONSUMER"
ONS_HTTP_PROXY_GROUP = "CID_ONS-HTTP-PROXY"
CID_ONSAPI_PULL_GROUP = "CID_ONSAPI_PULL"
CID_ONSAPI_PERMISSION_GROUP = "CID_ONSAPI_PERMISSION"
CID_ONSAPI_OWNER_GROUP = "CID_ONSAPI_OWNER"
CID_RMQ_SYS_PREFIX = "CID_RMQ_SYS_"
CID_SYS_RMQ_TRANS = "CID_RMQ_SYS_TRANS"

SYSTEM_GROUPS = (
    mix_all.TOOLS_CONSUMER_GROUP,
    FILTERSRV_CONSUMER_GROUP,
    mix_all.SELF_TEST_CONSUMER_GROUP,
    ONS_HTTP_PROXY_GROUP,
    CID_ONSAPI_PULL_GROUP,
    CID_ONSAPI_PERMISSION_GROUP,
    CID_ONSAPI_OWNER_GROUP,
    CID_SYS_RMQ_TRANS,
)


def is_sys_consumer_group(group: str) -> bool:
    return group.startswith(CID_RMQ_SYS_PREFIX)


def subscription_group_json(cfg: SubscriptionGroupConfig) -> dict[str, Any]:
    return dict(sorted(cfg.to_json_dict().items()))


class SubscriptionGroupManager(ConfigManager):
    def __init__(self, broker_config: BrokerConfig, config_dir: str) -> None:
        super().__init__(os.path.join(os.fspath(config_dir), SUBSCRIPTION_GROUP_FILE))
        self.broker_config = broker_config
        self.subscription_group_table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion()
        for group in SYSTEM_GROUPS:
            self.subscription_group_table[group] = SubscriptionGroupConfig(group)

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        cfg = self.subscription_group_table.get(group)
        if cfg is not None:
            return cfg
        if not (self.broker_config.auto_create_subscription_group or is_sys_consumer_group(group)):
            return None
        reason = mix_all.validate_group(group)
        if reason is not None:
            log.warning("not auto-creating subscription group: %s", reason)
            return None
        cfg = SubscriptionGroupConfig(group)
        self.subscription_group_table[group] = cfg
        log.info("auto create a subscription group, %s", cfg)
        self.data_version.next_version()
        self.persist()
        return cfg

    def contains_subscription_group(self, group: str) -> bool:
        return group in self.subscription_group_table

    def update_subscription_group_config(self, cfg: SubscriptionGroupConfig) -> None:
        reason = mix_all.validate_group(cfg.group_name)
        if reason is not None:
            raise ValueError(reason)
        old = self.subscription_group_table.get(cfg.group_name)
        self.subscription_group_table[cfg.group_name] = cfg
        if old is not None:
            log.info("update subscription group config, old: %s new: %s", old, cfg)
        else:
            log.info("create new subscription group, %s", cfg)
        self.data_version.next_version()
        self.persist()

    def disable_consume(self, group: str) -> None:
        cfg = self.subscription_group_table.get(group)
        if cfg is not None:
            cfg.consume_enable = False
            self.data_version.next_version()

    def delete_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        old = self.subscription_group_table.pop(group, None)
        if old is None:
            log.warning("delete subscription group failed, subscription groupName: %s not exist", group)
            return None
        log.info("delete subscription group OK, subscription group:%s", old)
        self.data_version.next_version()
        self.persist()
        return old

    def encode(self, pretty: bool = False) -> str:
        doc = {
            "dataVersion": self.data_version.to_json_dict(),
            "subscriptionGroupTable": {g: subscription_group_json(c) for g, c in self.subscription_group_table.items()},
        }
        return fastjson.dumps(doc, pretty=pretty)

    def decode(self, text: str) -> None:
        doc = fastjson.loads(text, int_keys=False)
        if not isinstance(doc, dict):
            raise ConfigDecodeError(f"{self.config_file_path}: the document must be a JSON object")
        raw = doc.get("subscriptionGroupTable") or {}
        if not isinstance(raw, dict):
            raise ConfigDecodeError("subscriptionGroupTable must be an object")
        table: dict[str, SubscriptionGroupConfig] = {}
        for name, d in raw.items():
            if not isinstance(d, dict):
                raise ConfigDecodeError(f"subscription group {name!r}: config must be an object")
            if d.get("groupName") is None:
                d = {**d, "groupName": name}
            try:
                table[str(name)] = SubscriptionGroupConfig.from_json_dict(d)
            except (TypeError, ValueError) as e:
                raise ConfigDecodeError(f"subscription group {name!r}: {e}") from None
        version = DataVersion.from_json_dict(doc["dataVersion"]) if doc.get("dataVersion") is not None else None
        self.subscription_group_table.update(table)
        if version is not None:
            self.data_version.assign_new_one(version)
