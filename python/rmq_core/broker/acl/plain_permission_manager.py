"""plain_acl.yml and the rules of 4.9.7's ``PlainPermissionManager`` / ``Permission``: the accounts, the global white
addresses, and ``validate`` — whether a parsed request (``AccessRequest``) may be served.

Format: YAML, ``globalWhiteRemoteAddresses`` and ``accounts`` (accessKey, secretKey, whiteRemoteAddress, admin,
default and per-resource perms ``PUB``/``SUB``/``PUB|SUB``/``DENY``; groups keyed ``%RETRY%group``).
Owns ``validate`` in Apache's order (refusals raise ``AclError`` with Apache's message) and ``maybe_reload()`` (the
file re-read when its mtime/size changed, at most every ``RELOAD_CHECK_S``).
Invariant: a file that no longer parses is logged and the rules in force are kept.
Thread-safety: the broker's loop only.
Details: docs/BROKER_DESIGN.md, 'plain_acl.yml and validate'.
"""

from __future__ import annotations

import hmac
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rmq_core.broker.acl.remote_address_strategy import AclConfigError, AddressMatcher, remote_address_strategy
from rmq_core.common.mix_all import RETRY_GROUP_TOPIC_PREFIX, get_retry_topic
from rmq_core.errors import RmqError
from rmq_core.remoting.acl_signer import cal_signature, request_signature
from rmq_core.remoting.codes import RequestCode

log = logging.getLogger(__name__)

# Permission (4.9.7 org.apache.rocketmq.acl.common.Permission)
DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3
_PERMS = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}
ADMIN_CODES = frozenset(
    int(c)
    for c in (
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
    )
)
KEY_MIN_LENGTH = 6  # AclConstants.ACCESS_KEY_MIN_LENGTH / SECRET_KEY_MIN_LENGTH: keys must be longer
RELOAD_CHECK_S = 1.0  # how often the file's mtime is looked at (Apache's AclFileWatchService: every 5 s)
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"  # TopicValidator.RMQ_SYS_TRACE_TOPIC: its PUB skips the permission check


class AclError(RmqError):
    """A request the ACL refuses: ``message`` is Apache's AclException message, ``frame`` the top stack frame
    4.9.7's broker names after it in the remark (``RemotingHelper.exceptionSimpleDesc``), so that a refusal reads
    byte for byte as Apache's does."""

    def __init__(self, message: str, frame: str) -> None:
        super().__init__(message)
        self.message = message
        self.frame = frame

    @property
    def remark(self) -> str:
        return f"org.apache.rocketmq.acl.common.AclException: {self.message}, {self.frame}"


# the frames of 4.9.7's PlainPermissionManager that throw each refusal
_VALIDATE = "org.apache.rocketmq.acl.plain.PlainPermissionManager.validate(PlainPermissionManager.java:{})"
_CHECK_PERM = "org.apache.rocketmq.acl.plain.PlainPermissionManager.checkPerm(PlainPermissionManager.java:{})"


def parse_perm(text: Any) -> int:
    return DENY if text is None else _PERMS.get(str(text).strip(), DENY)


def check_permission(needed: int, owned: int) -> bool:
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def _text(value: Any) -> str | None:
    """A scalar of the YAML as fastjson hands it to PlainAccessConfig's String setters."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass
class AccessRequest:
    """What PlainAccessValidator.parse makes of a request (PlainAccessResource): who, from where, what.
    ``resources`` (resource → needed perm) is worked out by ``find_resources`` when first asked: only for a request
    whose signature verified, so nobody without a key makes the broker decode a body (a HEART_BEAT's) for the ACL."""

    remote_ip: str
    code: int
    access_key: str | None = None
    signature: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)  # what was signed, with the body
    body: bytes | None = None
    find_resources: Callable[[], dict[str, int]] | None = None
    signed_content: bytes | None = None  # gRPC: what the signature covers (x-mq-date-time), else the ext fields + body
    _resources: dict[str, int] | None = field(default=None, repr=False)

    @property
    def resources(self) -> dict[str, int]:
        if self._resources is None:
            self._resources = self.find_resources() if self.find_resources is not None else {}
        return self._resources


@dataclass
class Account:
    access_key: str
    secret_key: str
    white: AddressMatcher
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    perms: dict[str, int] | None  # resource (topic, or %RETRY%group) → perm; None when the file gives none


def _resource_perms(entries: Any, is_topic: bool, into: dict[str, int]) -> None:
    if not entries:
        return
    if not isinstance(entries, list):
        raise AclConfigError(f"{'topicPerms' if is_topic else 'groupPerms'} must be a list of 'name=PERM'")
    for entry in entries:
        items = [x for x in str(entry).split("=") if x]
        if len(items) != 2:
            raise AclConfigError(f"Parse resource permission failed for {'topic' if is_topic else 'group'}:{entry}")
        name = items[0].strip()
        into[name if is_topic else get_retry_topic(name)] = parse_perm(items[1])


def _account(raw: Any) -> Account:
    if not isinstance(raw, dict):
        raise AclConfigError(f"an account must be a mapping, not {raw!r}")
    ak, sk = _text(raw.get("accessKey")), _text(raw.get("secretKey"))
    if ak is None or sk is None or len(ak) <= KEY_MIN_LENGTH or len(sk) <= KEY_MIN_LENGTH:
        raise AclConfigError(
            f"The accessKey={ak} and secretKey={'***' if sk else sk} cannot be null and length should longer than 6"
        )
    perms: dict[str, int] = {}
    _resource_perms(raw.get("groupPerms"), False, perms)
    _resource_perms(raw.get("topicPerms"), True, perms)
    admin = raw.get("admin")
    return Account(
        access_key=ak,
        secret_key=sk,
        white=remote_address_strategy(_text(raw.get("whiteRemoteAddress"))),
        admin=admin is True or (isinstance(admin, str) and admin.strip().lower() == "true"),
        default_topic_perm=parse_perm(raw.get("defaultTopicPerm")),
        default_group_perm=parse_perm(raw.get("defaultGroupPerm")),
        perms=perms or None,
    )


def _load_yaml(path: str) -> Any:
    try:
        import yaml  # type: ignore[import-untyped]  # (the rmq_core[acl] extra; no stubs needed)
    except ImportError:
        raise AclConfigError("aclEnable=true needs PyYAML to read plain_acl.yml: pip install 'rmq_core[acl]'") from None
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f)
    except OSError as e:
        raise AclConfigError(f"aclEnable=true but the ACL file {path} cannot be read: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise AclConfigError(f"the ACL file {path} is not valid YAML: {e}") from None


@dataclass
class PlainAclRules:
    """One load of plain_acl.yml."""

    global_white: list[AddressMatcher]
    accounts: dict[str, Account]

    @classmethod
    def load(cls, path: str) -> PlainAclRules:
        data = _load_yaml(path)
        if data is None:
            data = {}  # an empty file: no account, no white address (every request refused)
        if not isinstance(data, dict):
            raise AclConfigError(f"the ACL file {path} must be a mapping (globalWhiteRemoteAddresses, accounts)")
        whites = data.get("globalWhiteRemoteAddresses") or []
        if not isinstance(whites, list):
            raise AclConfigError(f"{path}: globalWhiteRemoteAddresses must be a list")
        accounts: dict[str, Account] = {}
        raw_accounts = data.get("accounts") or []
        if not isinstance(raw_accounts, list):
            raise AclConfigError(f"{path}: accounts must be a list")
        for raw in raw_accounts:
            account = _account(raw)
            if account.access_key in accounts:
                log.warning("ACL: accessKey %s is defined twice in %s; the first is used", account.access_key, path)
                continue
            accounts[account.access_key] = account
        return cls([remote_address_strategy(_text(w)) for w in whites], accounts)


class PlainPermissionManager:
    """``PlainPermissionManager(path)`` loads the file (raising AclConfigError when it is missing, unreadable or
    invalid); ``validate(request)`` raises AclError for a request the rules refuse."""

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        self._stamp = self._file_stamp()
        self.rules = PlainAclRules.load(self.path)
        self._next_check = time.monotonic() + RELOAD_CHECK_S
        log.info("ACL: %d accounts loaded from %s", len(self.rules.accounts), self.path)

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def maybe_reload(self, now: float | None = None) -> None:
        """Re-read the file if it changed (checked at most every RELOAD_CHECK_S); a broken file keeps the old rules."""
        now = time.monotonic() if now is None else now
        if now < self._next_check:
            return
        self._next_check = now + RELOAD_CHECK_S
        stamp = self._file_stamp()
        if stamp == self._stamp or stamp is None:
            return
        self._stamp = stamp
        try:
            self.rules = PlainAclRules.load(self.path)
        except AclConfigError as e:
            log.error("ACL: %s changed but cannot be used, the previous rules stay in force: %s", self.path, e)
            return
        log.info("ACL: %s reloaded, %d accounts", self.path, len(self.rules.accounts))

    def validate(self, req: AccessRequest) -> None:
        rules = self.rules
        for white in rules.global_white:
            if white(req.remote_ip):
                return
        if req.access_key is None:
            raise AclError("No accessKey is configured", _VALIDATE.format(663))
        owned = rules.accounts.get(req.access_key)
        if owned is None:
            raise AclError(f"No acl config for {req.access_key}", _VALIDATE.format(667))
        if owned.white(req.remote_ip):
            return
        if req.signed_content is not None:
            expected = cal_signature(req.signed_content, owned.secret_key)
        else:
            expected = request_signature(req.ext_fields, req.body, owned.secret_key)
        if req.signature is None or not hmac.compare_digest(expected, req.signature):
            raise AclError(f"Check signature failed for accessKey={req.access_key}", _VALIDATE.format(683))
        if req.resources.get(TRACE_TOPIC) == PUB:
            return
        self._check_perm(req, owned)

    @staticmethod
    def _check_perm(req: AccessRequest, owned: Account) -> None:
        if req.code in ADMIN_CODES and not owned.admin:
            raise AclError(
                f"Need admin permission for request code={req.code}, but accessKey={owned.access_key} is not",
                _CHECK_PERM.format(580),
            )
        if not req.resources or (owned.perms is None and owned.admin):
            return
        for resource, needed in req.resources.items():
            is_group = resource.startswith(RETRY_GROUP_TOPIC_PREFIX)
            if owned.perms is None or resource not in owned.perms:
                perm, line = (owned.default_group_perm if is_group else owned.default_topic_perm), 605
            else:
                perm, line = owned.perms[resource], 610
            if not check_permission(needed, perm):
                what = f"group:{resource[len(RETRY_GROUP_TOPIC_PREFIX) :]}" if is_group else f"topic:{resource}"
                raise AclError(f"No default permission for {what}", _CHECK_PERM.format(line))
