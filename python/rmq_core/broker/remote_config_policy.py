"""Which broker settings a remote UPDATE_BROKER_CONFIG (25) may change, their ranges, and what GET_BROKER_CONFIG (26)
may show.

- ``LIVE_TUNABLE``: the allow-list. Only settings the broker reads per request or per cycle (so a change applies at
  once and whole) are here, each with its type and range. Everything else — Apache's black list (``configBlackList``,
  ``brokerConfigPath``, ``rocketmqHome``: CVE-2023-33246's fix), every path, address, port, identity, role, size and
  start-only key, and every key rmq_core does not know — is refused (``check_update`` raises ``ConfigRefused``
  naming the keys), and the request then changes nothing. Apache ignores unknown keys; rmq_core refuses them too, so
  a typo is an error rather than a silent no-op, and nothing unknown is ever kept.
- ``STORE_MIRRORED``: the retention settings the store's clean service reads from the store's own ``StoreConfig``.
- ``masked(key, value)``: the value GET_BROKER_CONFIG shows — secrets (passwords, secret/access keys, credentials,
  tokens) as ``******``, a value over ``MAX_SHOWN_VALUE`` chars as a note of its length.

Thread-safety: constants and pure functions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_UPDATE_BODY = 64 * 1024  # an UPDATE_BROKER_CONFIG body: a few dozen short key=value lines at most
MAX_SHOWN_VALUE = 4096  # GET_BROKER_CONFIG: a longer value (a hand-edited broker.conf) is shown as its length
MAX_CONFIG_ANSWER = 1 << 20  # GET_BROKER_CONFIG's body: keys past this are left out (logged), so it fits its frame
MASK = "******"
_SECRET_KEY = re.compile(r"password|secret|credential|token|accesskey|authenticationuser", re.IGNORECASE)
_HOURS = re.compile(r"(?:[01]\d|2[0-3])(?:;(?:[01]\d|2[0-3]))*")  # deleteWhen: "04", "04;16"
_INT32_MAX = (1 << 31) - 1


class ConfigRefused(ValueError):
    """An update that may not be applied over the wire (answered NO_PERMISSION; nothing changed)."""


@dataclass(frozen=True)
class Tunable:
    kind: type  # bool, int or str
    low: int = 0
    high: int = _INT32_MAX
    pattern: re.Pattern[str] | None = None


def _flag() -> Tunable:
    return Tunable(bool)


def _int(low: int, high: int) -> Tunable:
    return Tunable(int, low, high)


# key (as RocketMQ spells it) -> type and range. Ranges are Apache's clamps where it has them (diskMaxUsedSpaceRatio
# 10..95, the 5.x disk ratios), else what the setting can mean.
LIVE_TUNABLE: dict[str, Tunable] = {
    "brokerPermission": _int(0, 7),  # PermName bits: 4 read, 2 write, 1 inherit
    "autoCreateTopicEnable": _flag(),
    "autoCreateSubscriptionGroup": _flag(),
    "defaultTopicQueueNums": _int(1, 1024),
    "longPollingEnable": _flag(),
    "litePullMessageEnable": _flag(),
    "shortPollingTimeMills": _int(1, 60_000),
    "enablePropertyFilter": _flag(),
    "filterSupportRetry": _flag(),
    "slaveReadEnable": _flag(),
    "offsetCheckInSlave": _flag(),
    "transferMsgByHeap": _flag(),
    "notifyConsumerIdsChangedEnable": _flag(),
    "commercialBaseCount": _int(1, 10_000),
    "traceOn": _flag(),
    "rejectTransactionMessage": _flag(),
    "transactionTimeOut": _int(1, 86_400_000),
    "transactionCheckMax": _int(1, 1_000),
    "transactionCheckInterval": _int(1_000, 86_400_000),
    "timerMaxDelaySec": _int(1, _INT32_MAX),
    "fileReservedTime": _int(1, 87_600),  # hours
    "cleanResourceInterval": _int(1_000, 86_400_000),
    "deleteWhen": Tunable(str, pattern=_HOURS),
    "diskMaxUsedSpaceRatio": _int(10, 95),
    "deleteCommitLogFilesInterval": _int(0, 60_000),
    "cleanFileForciblyEnable": _flag(),
    "diskSpaceWarningLevelRatio": _int(35, 90),
    "diskSpaceCleanForciblyRatio": _int(30, 85),
    "deleteFileBatchMax": _int(1, 1_000),
}

STORE_MIRRORED = frozenset(
    {
        "fileReservedTime",
        "cleanResourceInterval",
        "deleteWhen",
        "diskMaxUsedSpaceRatio",
        "deleteCommitLogFilesInterval",
        "cleanFileForciblyEnable",
        "diskSpaceWarningLevelRatio",
        "diskSpaceCleanForciblyRatio",
        "deleteFileBatchMax",
    }
)


def parse_value(key: str, raw: str) -> bool | int | str:
    """``raw`` as ``key``'s value; ConfigRefused when the key is not live-tunable or the value is out of range."""
    spec = LIVE_TUNABLE.get(key)
    if spec is None:
        raise ConfigRefused(f"{key} may not be changed over the wire (not a live-tunable setting)")
    value = raw.strip()
    if spec.kind is bool:
        if value.lower() not in ("true", "false"):
            raise ConfigRefused(f"{key}={value[:64]!r} is not true or false")
        return value.lower() == "true"
    if spec.kind is int:
        if not re.fullmatch(r"[+-]?\d{1,19}", value):
            raise ConfigRefused(f"{key}={value[:64]!r} is not an integer")
        number = int(value)
        if not spec.low <= number <= spec.high:
            raise ConfigRefused(f"{key}={number} is out of range [{spec.low}, {spec.high}]")
        return number
    if spec.pattern is not None and not spec.pattern.fullmatch(value):
        raise ConfigRefused(f"{key}={value[:64]!r} is not valid")
    return value


def check_update(props: dict[str, str]) -> dict[str, bool | int | str]:
    """Every key of ``props`` parsed, or ConfigRefused naming every key refused (then nothing may be applied)."""
    parsed: dict[str, bool | int | str] = {}
    refused: list[str] = []
    for key, raw in props.items():
        try:
            parsed[key] = parse_value(key, raw)
        except ConfigRefused as e:
            refused.append(str(e))
    if refused:
        more = f" (and {len(refused) - 5} more)" if len(refused) > 5 else ""
        raise ConfigRefused("; ".join(refused[:5]) + more)
    return parsed


def masked(key: str, value: str) -> str:
    if value and _SECRET_KEY.search(key):
        return MASK
    if len(value) > MAX_SHOWN_VALUE:
        return f"<{len(value)} characters, not shown>"
    return value
