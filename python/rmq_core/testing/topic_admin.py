"""Topic administration for the test fixtures: the brokers a name server knows, and creating a topic on them.

Owns: ``brokers_of(namesrv)`` and ``create_topic(namesrv, topic, queues)``, the plugin's only admin requests
(GET_BROKER_CLUSTER_INFO, UPDATE_AND_CREATE_TOPIC, GET_ROUTEINFO_BY_TOPIC over ``rmq_core.remoting``, as the CLI's
``topic create`` sends them). Kept in this one file so that it can move onto the RPC layer's helpers unchanged
for its callers.

Invariants: ``create_topic`` returns only once the name server routes the topic to every broker it was created on
with ``queues`` read and write queues, so a client started afterwards sees the queue count asked for (not the
TBW102 auto-created default). Every failure raises ``TopicAdminError`` naming the broker and the response code.
Thread-safety: the functions share nothing; each opens and closes its own remoting client.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmq_core.remoting.remoting_client import BlockingRemotingClient

TIMEOUT_S = 10.0
POLL_INTERVAL_S = 0.01


class TopicAdminError(RuntimeError):
    """A name server or broker refused or did not answer an admin request in time."""


def _client() -> BlockingRemotingClient:
    from rmq_core.remoting.remoting_client import BlockingRemotingClient

    return BlockingRemotingClient(name="rmq-core-testing")


def _brokers(client: BlockingRemotingClient, namesrv: str) -> dict[str, str]:
    from rmq_core.remoting.body.route import ClusterInfo
    from rmq_core.remoting.codes import RequestCode, ResponseCode
    from rmq_core.remoting.command import RemotingCommand

    r = client.invoke_sync(namesrv, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
    if r.code != ResponseCode.SUCCESS:
        raise TopicAdminError(f"name server {namesrv}: GET_BROKER_CLUSTER_INFO answered {r.code} {r.remark}")
    info = ClusterInfo.decode(r.body or b"{}")
    out = {}
    for name, bd in sorted(info.broker_addr_table.items()):
        addr = bd.broker_addrs.get(0)  # masters only: topics are created where they are written
        if addr:
            out[name] = addr
    return out


def brokers_of(namesrv: str, *, wait_s: float = 0.0) -> dict[str, str]:
    """Broker name -> master address of every broker the name server knows; waits up to ``wait_s`` for one."""
    deadline = time.monotonic() + wait_s
    with _client() as client:
        while True:
            brokers = _brokers(client, namesrv)
            if brokers or time.monotonic() >= deadline:
                return brokers
            time.sleep(POLL_INTERVAL_S)


def _routed_queues(client: BlockingRemotingClient, namesrv: str, topic: str) -> dict[str, int]:
    """Broker name -> write queue count the name server routes ``topic`` to (empty when it has no route)."""
    from rmq_core.remoting.body.route import TopicRouteData
    from rmq_core.remoting.codes import RequestCode, ResponseCode
    from rmq_core.remoting.command import RemotingCommand
    from rmq_core.remoting.header import GetRouteInfoRequestHeader, encode_header

    req = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, encode_header(GetRouteInfoRequestHeader(topic)))
    r = client.invoke_sync(namesrv, req)
    if r.code != ResponseCode.SUCCESS:
        return {}
    route = TopicRouteData.decode(r.body or b"{}")
    return {qd.broker_name: qd.write_queue_nums for qd in route.queue_datas}


def create_topic(
    namesrv: str,
    topic: str,
    queues: int = 4,
    *,
    brokers: Sequence[str] | None = None,
    timeout_s: float = TIMEOUT_S,
    access_key: str | None = None,
    secret_key: str | None = None,
) -> list[str]:
    """Create ``topic`` with ``queues`` read/write queues on every master the name server knows (or on the broker
    names in ``brokers``); returns the broker names. Waits until the name server routes it. With ``access_key``/
    ``secret_key`` (an ACL ``admin`` account) the request is signed."""
    from rmq_core.common.mix_all import validate_topic
    from rmq_core.common.perm_name import DEFAULT_PERM
    from rmq_core.remoting.acl_signer import credentials_from
    from rmq_core.remoting.codes import RequestCode, ResponseCode
    from rmq_core.remoting.command import RemotingCommand
    from rmq_core.remoting.header import CreateTopicRequestHeader, encode_header

    problem = validate_topic(topic)
    if problem:
        raise ValueError(problem)
    if queues < 1:
        raise ValueError(f"a topic needs at least one queue, not {queues}")
    header = CreateTopicRequestHeader(
        topic=topic,
        defaultTopic="TBW102",
        readQueueNums=queues,
        writeQueueNums=queues,
        perm=DEFAULT_PERM,
        topicFilterType="SINGLE_TAG",
        topicSysFlag=0,
        order=False,
    )
    creds = credentials_from(access_key, secret_key)
    deadline = time.monotonic() + timeout_s
    with _client() as client:
        known = _brokers(client, namesrv)
        targets = {n: a for n, a in known.items() if brokers is None or n in brokers}
        if not targets:
            raise TopicAdminError(f"name server {namesrv} knows no broker to create {topic} on (knows {sorted(known)})")
        for name, addr in targets.items():
            req = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, encode_header(header))
            if creds is not None:
                creds.sign(req)
            r = client.invoke_sync(addr, req)
            if r.code != ResponseCode.SUCCESS:
                raise TopicAdminError(f"creating {topic} on {name} ({addr}): {r.code} {r.remark}")
        while True:
            routed = _routed_queues(client, namesrv, topic)
            if all(routed.get(name) == queues for name in targets):
                return sorted(targets)
            if time.monotonic() >= deadline:
                raise TopicAdminError(
                    f"name server {namesrv} did not route {topic} to {sorted(targets)} with {queues} queues "
                    f"within {timeout_s} s (routes {routed})"
                )
            time.sleep(POLL_INTERVAL_S)
