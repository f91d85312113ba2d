"""The broker's ACL check of every request (4.9.7 ``PlainAccessValidator`` + the RPC hook ``BrokerController.
initialAcl`` registers): ``parse`` makes an ``AccessRequest`` of a request — the client's IP, its AccessKey and
Signature, the signed fields and body, and the resources the request code needs with their permission — and ``check``
answers a refused request as Apache's broker does (SYSTEM_ERROR, remark ``AclException: <why>, <frame>``).

Resources per code (PlainAccessValidator.parse): SEND_MESSAGE / SEND_MESSAGE_V2: the topic PUB, or for a retry topic
the sending group's retry topic SUB; CONSUMER_SEND_MSG_BACK: the group SUB; PULL_MESSAGE: the topic SUB and the group
SUB; QUERY_MESSAGE: the topic SUB; HEART_BEAT: each consumer group SUB and each subscribed topic SUB;
UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP: the group SUB; UPDATE_CONSUMER_OFFSET: the group and the topic SUB.
rmq_core also checks SEND_BATCH_MESSAGE as SEND_MESSAGE_V2 and LITE_PULL_MESSAGE as PULL_MESSAGE (4.9.7 checks only
their signature: a signed account could batch-send to a topic it may not write). Every other code: the signature,
and ``admin`` for the admin codes.

Thread-safety: the broker's loop only.
"""

from __future__ import annotations

from typing import Any

from rmq_core.broker.acl.plain_permission_manager import (
    PUB,
    SUB,
    AccessRequest,
    AclError,
    PlainPermissionManager,
)
from rmq_core.common.mix_all import get_retry_topic, is_retry_topic
from rmq_core.remoting.acl_signer import ACCESS_KEY, SIGNATURE
from rmq_core.remoting.body.heartbeat import HeartbeatData
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand

_PARSE_FRAME = "org.apache.rocketmq.acl.plain.PlainAccessValidator.parse(PlainAccessValidator.java:134)"
_SEND_V1 = frozenset((int(RequestCode.SEND_MESSAGE),))
_SEND_V2 = frozenset((int(RequestCode.SEND_MESSAGE_V2), int(RequestCode.SEND_BATCH_MESSAGE)))
_PULL = frozenset((int(RequestCode.PULL_MESSAGE), int(RequestCode.LITE_PULL_MESSAGE)))


def _add(resources: dict[str, int], resource: str | None, perm: int) -> None:
    if resource is not None:  # PlainAccessResource.addResourceAndPerm ignores a null resource
        resources[resource] = perm


def _group(group: str | None) -> str | None:
    return None if group is None else get_retry_topic(group)


def _resources(code: int, ext: dict[str, str], body: bytes | None) -> dict[str, int]:
    res: dict[str, int] = {}
    if code in _SEND_V2 or code in _SEND_V1:
        topic, group = (ext.get("b"), ext.get("a")) if code in _SEND_V2 else (ext.get("topic"), ext.get("group"))
        if topic is not None and is_retry_topic(topic):
            _add(res, _group(group), SUB)
        else:
            _add(res, topic, PUB)
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        _add(res, _group(ext.get("group")), SUB)
    elif code in _PULL:
        _add(res, ext.get("topic"), SUB)
        _add(res, _group(ext.get("consumerGroup")), SUB)
    elif code == RequestCode.QUERY_MESSAGE:
        _add(res, ext.get("topic"), SUB)
    elif code == RequestCode.HEART_BEAT:
        data = HeartbeatData.decode(body or b"")
        for consumer in data.consumer_data_set:
            _add(res, _group(consumer.group_name), SUB)
            for sub in consumer.subscription_data_set:
                _add(res, sub.topic, SUB)
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        _add(res, _group(ext.get("consumerGroup")), SUB)
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
        _add(res, _group(ext.get("consumerGroup")), SUB)
        _add(res, ext.get("topic"), SUB)
    return res


def _remote_ip(remote_address: str) -> str:
    host = remote_address.rpartition(":")[0] if ":" in remote_address else remote_address
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


class PlainAccessValidator:
    """``PlainAccessValidator(manager)``; ``check(conn, cmd)`` → None (serve it) or the refusal to answer with."""

    def __init__(self, manager: PlainPermissionManager) -> None:
        self.manager = manager

    def parse(self, cmd: RemotingCommand, remote_address: str) -> AccessRequest:
        req = AccessRequest(_remote_ip(remote_address), cmd.code)
        ext = cmd.ext_fields
        if not ext:  # Apache: no extFields, only a white address can let it through
            return req
        req.access_key = ext.get(ACCESS_KEY)
        req.signature = ext.get(SIGNATURE)
        req.ext_fields, req.body = ext, cmd.body

        def find_resources() -> dict[str, int]:
            try:
                return _resources(cmd.code, ext, cmd.body)
            except Exception as e:  # a body or header that does not parse: refused, as Apache's AclException(t)
                raise AclError(str(e), _PARSE_FRAME) from None

        req.find_resources = find_resources
        return req

    def check(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand | None:
        manager = self.manager
        manager.maybe_reload()
        try:
            manager.validate(self.parse(cmd, conn.remote_address))
        except AclError as e:
            return RemotingCommand.response_to(cmd, ResponseCode.SYSTEM_ERROR, remark=e.remark)
        return None
