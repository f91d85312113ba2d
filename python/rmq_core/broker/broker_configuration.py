"""BrokerConfiguration (cm/Configuration.java as the broker uses it): the broker's settings as Java properties for
GET_BROKER_CONFIG (26), their live update by UPDATE_BROKER_CONFIG (25), and the file the updates persist in.

- ``all_configs_format_string()``: ``key=value\\n`` per setting (MixAll#properties2String), camelCase keys as
  RocketMQ spells them, booleans ``true``/``false``; the BrokerConfig fields plus the broker.conf keys rmq_core keeps
  unused (``extra``). ``data_version`` is bumped on every update (the response header's ``version``).
- ``update(props)``: each known key is parsed by its field's type and set on the live BrokerConfig — the processors
  read it per request, so a change applies at once where 4.9 reads the setting per request too (brokerPermission,
  autoCreateTopicEnable, longPollingEnable, …); settings only read at start (listenPort, storePathRootDir,
  mapped file sizes) are stored and apply at the next start, as in 4.9. Unknown keys go to ``extra``.
- Persistence: the updated keys (merged with earlier updates) are written to ``<store>/config/broker.properties``
  (4.9 writes its configuration to the broker's config path); ``load()`` at start applies that file over the
  configuration the broker was given, so updates survive a restart.

Invariant: a value that does not parse as its field's type fails the whole update (nothing is changed).
Thread-safety: used on the broker's event loop; persist() is serialised by ConfigManager's file lock.
"""

from __future__ import annotations

import dataclasses
import logging
import os

from rmq_core.broker.broker_config import BrokerConfig, _convert, _snake, parse_properties
from rmq_core.broker.config_manager import ConfigManager
from rmq_core.common.data_version import DataVersion

log = logging.getLogger(__name__)

FILE_NAME = "broker.properties"


_JAVA_NAMES = {
    "broker_ip1": "brokerIP1",
    "broker_ip2": "brokerIP2",
    "transaction_timeout": "transactionTimeOut",
    "warm_mapped_file_enable": "warmMapedFileEnable",
}  # not plain camelCase in BrokerConfig.java / MessageStoreConfig.java


# null by default in 4.9 (MixAll.properties2String leaves a null field out of getBrokerConfig): listed once set
_NULL_WHEN_EMPTY = frozenset({"ha_master_address"})


def camel(name: str) -> str:
    if name in _JAVA_NAMES:
        return _JAVA_NAMES[name]
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def java_string(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


class BrokerConfiguration(ConfigManager):
    """``BrokerConfiguration(broker_config)``: see the module docstring."""

    def __init__(self, broker_config: BrokerConfig) -> None:
        super().__init__(os.path.join(broker_config.store_config_dir, FILE_NAME))
        self.broker_config = broker_config
        self.data_version = DataVersion()
        self.updated: dict[str, str] = {}  # the keys set by UPDATE_BROKER_CONFIG, as given (what is persisted)

    def all_configs(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for f in dataclasses.fields(self.broker_config):
            value = getattr(self.broker_config, f.name)
            if f.name == "extra" or (f.name in _NULL_WHEN_EMPTY and not value):
                continue
            out[camel(f.name)] = java_string(value)
        out.update(self.broker_config.extra)
        return out

    def all_configs_format_string(self) -> str:
        return "".join(f"{k}={v}\n" for k, v in self.all_configs().items())

    def update(self, props: dict[str, str]) -> list[str]:
        """Apply ``props`` to the live BrokerConfig; the keys that changed. ValueError (nothing applied) when a value
        does not parse."""
        cfg = self.broker_config
        fields = {f.name for f in dataclasses.fields(cfg)} - {"extra"}
        staged: dict[str, object] = {}
        for key, raw in props.items():
            name = _snake(key)
            staged[key] = _convert(getattr(cfg, name), raw, key) if name in fields else raw.strip()
        changed = []
        for key, value in staged.items():
            name = _snake(key)
            if name in fields:
                if getattr(cfg, name) != value:
                    setattr(cfg, name, value)
                    changed.append(key)
            elif cfg.extra.get(key) != value:
                cfg.extra[key] = str(value)
                changed.append(key)
            self.updated[key] = props[key].strip()
        self.data_version.next_version()
        log.info("broker config updated: %s (changed: %s)", props, changed)
        return changed

    # --- ConfigManager ----------------------------------------------------------------------------------------
    def encode(self, pretty: bool = False) -> str:
        return "".join(f"{k}={v}\n" for k, v in sorted(self.updated.items()))

    def decode(self, text: str) -> None:
        props = parse_properties(text)
        if props:
            log.info("applying the broker config updates persisted in %s: %s", self.config_file_path, props)
            self.update(props)
