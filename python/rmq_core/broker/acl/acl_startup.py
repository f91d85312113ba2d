"""What a broker's configuration asks of access control, decided before the broker serves anything: the 4.9 plain
ACL (``aclEnable=true``: plain_acl.yml loaded, every request checked) or nothing — and never a start that would
serve unsigned requests while the configuration asks for them to be refused.

Where plain_acl.yml is (first found): ``BrokerConfig.acl_file`` (broker.conf ``aclFile``, rmq_core's key: 4.9.7 has
no key, it reads ``${rocketmqHome}/conf/plain_acl.yml`` or the ``rocketmq.acl.plain.file`` system property); beside
the broker.conf the config was read from (``from_properties_file`` sets ``acl_file`` so); ``$ROCKETMQ_HOME/conf/
plain_acl.yml``. None of them, an unreadable or invalid file, or PyYAML missing: ``AclConfigError``, the start stops.

RocketMQ 5's authentication and authorization (``authenticationEnabled``, ``authorizationEnabled`` and the other
AuthConfig keys below) are not implemented: a broker.conf that sets one stops the start with ``AclConfigError``.
"""

from __future__ import annotations

import os

from rmq_core.broker.acl.plain_access_validator import PlainAccessValidator
from rmq_core.broker.acl.plain_permission_manager import PlainPermissionManager
from rmq_core.broker.acl.remote_address_strategy import AclConfigError
from rmq_core.broker.broker_config import BrokerConfig

ACL_FILE_NAME = "plain_acl.yml"
# RocketMQ 5.x AuthConfig: switches (refused when true) and the settings that only mean something with them
# (refused when set to anything non-blank); its cache sizes ask for nothing and stay ignored
AUTH_5X_SWITCHES = ("authenticationEnabled", "authorizationEnabled", "migrateAuthFromV1Enabled")
AUTH_5X_SETTINGS = (
    "authConfigPath",
    "authenticationProvider",
    "authenticationMetadataProvider",
    "authenticationStrategy",
    "authenticationWhitelist",
    "initAuthenticationUser",
    "innerClientAuthenticationCredentials",
    "authorizationProvider",
    "authorizationMetadataProvider",
    "authorizationStrategy",
    "authorizationWhitelist",
)


def refuse_unenforced(cfg: BrokerConfig) -> None:
    """AclConfigError naming the first key that asks for access control rmq_core does not enforce."""
    for key, value in cfg.extra.items():
        if key in AUTH_5X_SWITCHES and value.strip().lower() == "true":
            raise AclConfigError(
                f"broker config {key}=true asks for RocketMQ 5's authentication/authorization, which rmq_core does "
                f"not implement; refusing to start rather than serve unauthenticated requests (use aclEnable=true "
                f"with plain_acl.yml, RocketMQ 4.9's ACL, or remove {key})"
            )
        if key in AUTH_5X_SETTINGS and value.strip():
            raise AclConfigError(
                f"broker config {key} is a RocketMQ 5 authentication/authorization setting, which rmq_core does not "
                f"implement; refusing to start (use aclEnable=true with plain_acl.yml, or remove {key})"
            )


def acl_file_path(cfg: BrokerConfig) -> str:
    if cfg.acl_file:
        return cfg.acl_file
    home = os.environ.get("ROCKETMQ_HOME")
    if home:
        return os.path.join(home, "conf", ACL_FILE_NAME)
    raise AclConfigError(
        "aclEnable=true but no plain_acl.yml is configured: set BrokerConfig.acl_file (broker.conf aclFile), start "
        "from a broker.conf with plain_acl.yml beside it, or set ROCKETMQ_HOME (its conf/plain_acl.yml)"
    )


def build_access_validator(cfg: BrokerConfig) -> PlainAccessValidator | None:
    """The broker's request check: None with ACL off; raises AclConfigError for a start that must not happen."""
    refuse_unenforced(cfg)
    if not cfg.acl_enable:
        return None
    path = acl_file_path(cfg)
    if not os.path.isfile(path):
        raise AclConfigError(f"aclEnable=true but the ACL file {path} does not exist")
    return PlainAccessValidator(PlainPermissionManager(path))
