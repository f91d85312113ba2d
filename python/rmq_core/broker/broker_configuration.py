"""BrokerConfiguration (cm/Configuration.java as the broker uses it): the broker's settings as Java properties for
GET_BROKER_CONFIG (26), their live update by UPDATE_BROKER_CONFIG (25), and the file the updates persist in.

Owns ``all_configs_format_string()`` (``key=value\\n`` per setting, secrets masked, capped), ``update(props)`` (only
``remote_config_policy.LIVE_TUNABLE`` keys, range-checked; any other key refuses the whole update) and
``<store>/config/broker.properties`` (the updated keys, applied again by ``load()`` at start).
Invariant: an update that is refused or does not parse changes nothing; one whose persist fails is reverted; a broker
never runs with some parts on a new value and some on the old.
Thread-safety: used on the broker's event loop; persist() is serialised by ConfigManager's file lock.
Details: docs/BROKER_DESIGN.md, 'Broker config over the wire'.
"""

from __future__ import annotations

import dataclasses
import logging
import os

from rmq_core.broker.acl.acl_startup import AUTH_5X_SETTINGS, AUTH_5X_SWITCHES
from rmq_core.broker.broker_config import BrokerConfig, _convert, _snake, parse_properties
from rmq_core.broker.config_manager import ConfigManager
from rmq_core.broker.remote_config_policy import (
    MAX_CONFIG_ANSWER,
    STORE_MIRRORED,
    ConfigRefused,
    check_update,
    masked,
    parse_value,
)
from rmq_core.common.data_version import DataVersion
from rmq_core.common.log_text import clip
from rmq_core.store import StoreConfig

log = logging.getLogger(__name__)

FILE_NAME = "broker.properties"
# what a persisted file may still set although it is not live-tunable: decided before the broker serves (ACL)
ACCESS_CONTROL_KEYS = frozenset({"aclEnable", "aclFile", *AUTH_5X_SWITCHES, *AUTH_5X_SETTINGS})


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
        self.updated: dict[str, str] = {}  # the keys set by UPDATE_BROKER_CONFIG (what is persisted)
        self._ignored_at_load = False
        self.store_config: StoreConfig | None = None  # set once the store is built: STORE_MIRRORED keys go there too

    def all_configs(self) -> dict[str, str]:
        """Every setting as GET_BROKER_CONFIG shows it: secrets masked, overlong values as their length."""
        out: dict[str, str] = {}
        for f in dataclasses.fields(self.broker_config):
            value = getattr(self.broker_config, f.name)
            if f.name == "extra" or (f.name in _NULL_WHEN_EMPTY and not value):
                continue
            out[camel(f.name)] = masked(camel(f.name), java_string(value))
        for key, value in self.broker_config.extra.items():
            out[key] = masked(key, value)
        return out

    def all_configs_format_string(self) -> str:
        """``key=value\\n`` per setting, at most MAX_CONFIG_ANSWER bytes (the rest left out and logged): the answer
        always fits its frame."""
        lines: list[str] = []
        size = 0
        items = self.all_configs().items()
        for i, (k, v) in enumerate(items):
            line = f"{k}={v}\n"
            size += len(line.encode("utf-8"))
            if size > MAX_CONFIG_ANSWER:
                log.warning("GET_BROKER_CONFIG: %d settings left out (the answer is capped)", len(items) - i)
                break
            lines.append(line)
        return "".join(lines)

    def update(self, props: dict[str, str]) -> dict[str, object]:
        """Apply ``props`` to the live BrokerConfig as one change; the previous value of each key that changed (give
        it to ``revert`` to undo). ConfigRefused (``remote_config_policy``), nothing applied, when any key may not
        change over the wire or any value is out of range."""
        parsed = check_update(props)
        cfg = self.broker_config
        previous: dict[str, object] = {}
        for key, value in parsed.items():
            name = _snake(key)
            if getattr(cfg, name) != value:
                previous[key] = getattr(cfg, name)
                self._set(key, value)
        self.updated.update({key: java_string(value) for key, value in parsed.items()})
        self.data_version.next_version()
        log.info("broker config updated: %s (changed: %s)", parsed, sorted(previous))
        return previous

    def revert(self, previous: dict[str, object], keys: dict[str, str]) -> None:
        """Undo an ``update`` whose persist failed: the live values and the persisted keys as they were."""
        for key, value in previous.items():
            self._set(key, value)
        self.updated = keys

    def _set(self, key: str, value: object) -> None:
        setattr(self.broker_config, _snake(key), value)
        if key in STORE_MIRRORED and self.store_config is not None:
            setattr(self.store_config, _snake(key), value)

    # --- ConfigManager ----------------------------------------------------------------------------------------
    def load(self) -> bool:
        """As ConfigManager's; a file with ignored keys is rewritten without them (the old one kept as ``.bak``)."""
        self._ignored_at_load = False
        loaded = super().load()
        if self._ignored_at_load:
            self.persist()
        return loaded

    def encode(self, pretty: bool = False) -> str:
        return "".join(f"{k}={v}\n" for k, v in sorted(self.updated.items()))

    def decode(self, text: str) -> None:
        """The persisted updates, applied over the given config. A key that may not change over the wire (written
        by an older rmq_core, or by hand) is left out with a warning, never applied after the store was built —
        except the access-control keys (``ACCESS_CONTROL_KEYS``): they are applied and kept, because the broker
        decides its access control after this load and before it serves (ignoring one that asks for ACL would serve
        unsigned requests while a configuration asks for them to be refused)."""
        props = parse_properties(text)
        kept: dict[str, str] = {}
        for key, raw in props.items():
            if key in ACCESS_CONTROL_KEYS:
                log.warning(
                    "%s: %s=%s applies (access control; better set in broker.conf)",
                    self.config_file_path,
                    key,
                    masked(key, clip(raw)),  # an initAuthenticationUser's password is not logged
                )
                self._set_access_control(key, raw)
                continue
            try:
                parse_value(key, raw)
            except ConfigRefused as e:
                log.warning("%s: %s; ignored (set it in broker.conf)", self.config_file_path, str(e)[:200])
                self._ignored_at_load = True
                continue
            kept[key] = raw
        if kept:
            log.info("applying the broker config updates persisted in %s: %s", self.config_file_path, kept)
            self.update(kept)

    def _set_access_control(self, key: str, raw: str) -> None:
        cfg = self.broker_config
        name = _snake(key)
        if name in {f.name for f in dataclasses.fields(cfg)} - {"extra"}:
            setattr(cfg, name, _convert(getattr(cfg, name), raw, key))
        else:
            cfg.extra[key] = raw.strip()
        self.updated[key] = raw.strip()  # kept in the file: never dropped by a rewrite
