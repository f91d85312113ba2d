"""Raw POP_MESSAGE / ACK_MESSAGE frames, the same to rmq_core's broker and Apache 5.x's, and the receipt handles
Apache's Java client builds from a pop's answer (``ExtraInfoUtil``). For the store-exchange and mqadmin 5.x tests.

``send_and_pop(client, addr, topic, group, invisible)`` sends 4 tagged messages to queues 0 and 1, pops them all and
acks the first 2 popped: (acked bodies, unacked bodies). Thread-safety: functions only; one client per thread.
"""

from __future__ import annotations

import time
from typing import Any

from rmq_core.broker.pop import extra_info as ei
from rmq_core.message import decode_messages
from rmq_core.message_encoding import properties_to_string
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import AckMessageRequestHeader, PopMessageRequestHeader, encode_header
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.send_helpers import send_request

BROKER_NAME = "broker-a"


def pop(
    client: BlockingRemotingClient, addr: str, topic: str, group: str, invisible: int, poll: int = 0
) -> RemotingCommand:
    h = PopMessageRequestHeader(
        consumerGroup=group,
        topic=topic,
        queueId=-1,
        maxMsgNums=32,
        invisibleTime=invisible,
        pollTime=poll,
        bornTime=int(time.time() * 1000),
        initMode=0,
        expType="TAG",
        exp="*",
        order=False,
    )
    return client.invoke_sync(addr, RemotingCommand.request(RequestCode.POP_MESSAGE, encode_header(h)), 5 + poll / 1000)


def popped(resp: RemotingCommand) -> list[tuple[str, Any]]:
    """(handle, message): the handle as Apache's Java client builds it from the answer."""
    msgs = decode_messages(resp.body)
    return list(zip(ei.receipt_handles(resp.ext_fields, msgs, BROKER_NAME), msgs, strict=True))


def pop_all(
    client: BlockingRemotingClient, addr: str, topic: str, group: str, want: int, invisible: int, timeout: float
) -> list[tuple[str, Any]]:
    got: list[tuple[str, Any]] = []
    deadline = time.time() + timeout
    while len(got) < want and time.time() < deadline:
        r = pop(client, addr, topic, group, invisible, poll=1000)
        if r.code == ResponseCode.SUCCESS:
            got.extend(popped(r))
    return got


def ack(client: BlockingRemotingClient, addr: str, group: str, handle: str, m: Any) -> None:
    parsed = ei.parse_receipt_handle(handle)
    assert parsed is not None
    topic = parsed.real_topic(m.topic, group)
    h = AckMessageRequestHeader(group, topic, parsed.queue_id, handle, parsed.queue_offset)
    r = client.invoke_sync(addr, RemotingCommand.request(RequestCode.ACK_MESSAGE, encode_header(h)), 5.0)
    assert r.code == ResponseCode.SUCCESS, r.remark


def send_and_pop(
    client: BlockingRemotingClient, addr: str, topic: str, group: str, invisible: int
) -> tuple[set[bytes], set[bytes]]:
    """Send 4, pop them, ack 2: (acked bodies, unacked bodies)."""
    for i in range(4):
        p = properties_to_string({"TAGS": "T", "UNIQ_KEY": f"U{topic}{i}"})
        r = client.invoke_sync(addr, send_request(topic, b"p%d" % i, queue_id=i % 2, properties=p), timeout=5.0)
        assert r.code == ResponseCode.SUCCESS, r.remark
    got = pop_all(client, addr, topic, group, 4, invisible, timeout=20)
    assert sorted(m.body for _, m in got) == [b"p0", b"p1", b"p2", b"p3"]
    for h, m in got[:2]:
        ack(client, addr, group, h, m)
    return {m.body for _, m in got[:2]}, {m.body for _, m in got[2:]}
