"""RocketMQ 4.9's plain ACL in tests: the plain_acl.yml the ACL tests share, the accounts in it, and the raw requests
(signed, unsigned, badly signed) whose answers are compared between rmq_core's broker and Apache 4.9.7's.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.namesrv import NameServer
from rmq_core.remoting.acl_signer import SessionCredentials
from rmq_core.remoting.codes import RequestCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.frame_codec import split_frames
from rmq_core.remoting.header import encode_header

from support.send_helpers import send_request

USER = SessionCredentials("rocketmq-user", "user-secret-1")  # topicA PUB|SUB, topicB SUB, groupA SUB
ADMIN = SessionCredentials("rocketmq-admin", "admin-secret-1")  # admin, no per-resource perms
UNKNOWN = SessionCredentials("nobody-here", "whatever-secret")
WRONG_SECRET = SessionCredentials(USER.access_key, "not-the-secret")
TOPIC_A, TOPIC_B, GROUP_A = "aclTopicA", "aclTopicB", "aclGroupA"

PLAIN_ACL_YML = f"""
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: {USER.access_key}
    secretKey: {USER.secret_key}
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - {TOPIC_A}=PUB|SUB
      - {TOPIC_B}=SUB
      - TBW102=PUB|SUB
    groupPerms:
      - {GROUP_A}=SUB

  - accessKey: {ADMIN.access_key}
    secretKey: {ADMIN.secret_key}
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""


def signed(req: RemotingCommand, creds: SessionCredentials | None) -> RemotingCommand:
    return req if creds is None else creds.sign(req)


def send(topic: str, creds: SessionCredentials | None, body: bytes = b"acl-body") -> RemotingCommand:
    return signed(send_request(topic, body, producer_group="aclProducer"), creds)


def create_topic_request(topic: str, creds: SessionCredentials | None) -> RemotingCommand:
    ext = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": "4",
        "writeQueueNums": "4",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
    }
    return signed(RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext), creds)


def pull(topic: str, group: str, creds: SessionCredentials | None) -> RemotingCommand:
    from rmq_core.remoting.header import PullMessageRequestHeader

    header = PullMessageRequestHeader(
        consumerGroup=group,
        topic=topic,
        queueId=0,
        queueOffset=0,
        maxMsgNums=8,
        sysFlag=0,
        commitOffset=0,
        suspendTimeoutMillis=0,
        subscription="*",
        subVersion=0,
    )
    return signed(RemotingCommand.request(RequestCode.PULL_MESSAGE, encode_header(header)), creds)


def tampered(req: RemotingCommand) -> RemotingCommand:
    """``req`` signed, then its body changed (a man in the middle)."""
    req.body = (req.body or b"") + b"!"
    return req


def probes() -> list[tuple[str, RemotingCommand]]:
    """The refusals and acceptances both brokers must answer alike: (name, request)."""
    return [
        ("unsigned send", send(TOPIC_A, None)),
        ("signed send", send(TOPIC_A, USER)),
        ("tampered send", tampered(send(TOPIC_A, USER))),
        ("wrong secret", send(TOPIC_A, WRONG_SECRET)),
        ("unknown account", send(TOPIC_A, UNKNOWN)),
        ("send without PUB", send(TOPIC_B, USER)),
        ("send to a default-DENY topic", send("aclTopicC", USER)),
        ("admin code without admin", create_topic_request("aclTopicZ", USER)),
        ("admin code as admin", create_topic_request("aclTopicZ", ADMIN)),
        ("pull without group perm", pull(TOPIC_A, "aclGroupX", USER)),
        ("pull without topic SUB", pull("aclTopicC", GROUP_A, USER)),
        ("unknown code signed", signed(RemotingCommand.request(9999, {"x": "y"}), USER)),
        ("unknown code unsigned", RemotingCommand.request(9999)),
    ]


def exchange(addr: str, reqs: list[RemotingCommand], timeout: float = 10.0) -> list[RemotingCommand]:
    """Write every request in one ``sendall`` (one chunk for the broker), read one answer per request."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(b"".join(r.encode() for r in reqs))
        buf = bytearray()
        answers: list[RemotingCommand] = []
        deadline = time.monotonic() + timeout
        while len(answers) < len(reqs) and time.monotonic() < deadline:
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            buf += chunk
            cmds, used, err = split_frames(buf)
            assert err is None, err
            del buf[:used]
            answers.extend(cmds)
    by_opaque = {a.opaque: a for a in answers}
    return [by_opaque[r.opaque] for r in reqs]


@contextlib.contextmanager
def acl_broker(tmp_path: Path, broker_name: str) -> Iterator[tuple[NameServer, Broker, Path]]:
    """A name server and a broker with ``aclEnable`` over ``PLAIN_ACL_YML`` (written under ``tmp_path``), stopped after."""
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(PLAIN_ACL_YML)
    ns = NameServer(listen_port=0).start()
    cfg = BrokerConfig(
        broker_name=broker_name,
        listen_port=0,
        store_path_root_dir=str(tmp_path / "store"),
        namesrv_addr=ns.address,
        acl_enable=True,
        acl_file=str(acl_file),
    )
    try:
        broker = Broker(cfg).start()
        try:
            yield ns, broker, acl_file
        finally:
            broker.shutdown()
    finally:
        ns.shutdown()
