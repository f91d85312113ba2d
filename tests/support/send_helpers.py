"""Helpers for the send-path tests (send processor, send-back, schedule service): building SEND_MESSAGE(_V2) /
SEND_BATCH_MESSAGE / CONSUMER_SEND_MSG_BACK requests as a RocketMQ producer does, a raw-socket invoke that knows its
own local address, running a function on a broker's loop, reading what the store holds, and polling with a deadline."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Callable
from typing import Any, TypeVar

from rmq_core.broker import Broker
from rmq_core.message import MessageExt
from rmq_core.remoting.codes import RequestCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    ConsumerSendMsgBackRequestHeader,
    SendMessageRequestHeader,
    encode_header,
)
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.helpers import wait_until  # noqa: F401 - the one poll helper, re-exported for the test files

T = TypeVar("T")

# BrokerConfig overrides for tests: 1 MiB CommitLog files and 1000-unit ConsumeQueue files instead of 1 GiB / 6 MB
# (each broker started by a test would otherwise allocate a whole GiB on a shared disk)
SMALL_FILES = {"mapped_file_size_commit_log": 1 << 20, "mapped_file_size_consume_queue": 20 * 1000}


def send_header(
    topic: str,
    *,
    queue_id: int = 0,
    properties: str | None = None,
    sys_flag: int = 0,
    flag: int = 0,
    born_timestamp: int | None = None,
    reconsume_times: int | None = None,
    max_reconsume_times: int | None = None,
    default_topic: str = "TBW102",
    default_topic_queue_nums: int = 4,
    batch: bool | None = None,
    producer_group: str = "PG",
    unit_mode: bool | None = None,
) -> SendMessageRequestHeader:
    """A send header as a RocketMQ producer fills it (born now unless given)."""
    return SendMessageRequestHeader(
        producerGroup=producer_group,
        topic=topic,
        defaultTopic=default_topic,
        defaultTopicQueueNums=default_topic_queue_nums,
        queueId=queue_id,
        sysFlag=sys_flag,
        bornTimestamp=int(time.time() * 1000) if born_timestamp is None else born_timestamp,
        flag=flag,
        properties=properties,
        reconsumeTimes=reconsume_times,
        unitMode=unit_mode,
        maxReconsumeTimes=max_reconsume_times,
        batch=batch,
    )


def send_request(topic: str, body: bytes, *, code: int = RequestCode.SEND_MESSAGE_V2, **header: Any) -> RemotingCommand:
    """SEND_MESSAGE_V2 (default), SEND_BATCH_MESSAGE or SEND_MESSAGE with ``send_header(topic, **header)``."""
    h = send_header(topic, **header)
    short = code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)
    return RemotingCommand.request(code, encode_header(h, short_names=short), body)


def send_back_request(
    offset: int,
    group: str,
    delay_level: int = 0,
    *,
    max_reconsume_times: int | None = None,
    origin_msg_id: str | None = None,
    origin_topic: str | None = None,
    version: int | None = None,
) -> RemotingCommand:
    h = ConsumerSendMsgBackRequestHeader(
        offset=offset,
        group=group,
        delayLevel=delay_level,
        originMsgId=origin_msg_id,
        originTopic=origin_topic,
        maxReconsumeTimes=max_reconsume_times,
    )
    req = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, encode_header(h))
    if version is not None:
        req.version = version
    return req


def invoke(client: BlockingRemotingClient, broker: Broker, req: RemotingCommand) -> RemotingCommand:
    return client.invoke_sync(broker.address, req, timeout=5.0)


def invoke_raw(addr: str, req: RemotingCommand, timeout: float = 5.0) -> tuple[RemotingCommand, tuple[str, int]]:
    """Send one request on a fresh socket; the response and this socket's local (ip, port)."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        local = s.getsockname()[:2]
        s.sendall(req.encode())
        (length,) = struct.unpack(">i", _recv_exactly(s, 4))
        return RemotingCommand.decode_frame(_recv_exactly(s, length)), (local[0], local[1])


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        buf += chunk
    return bytes(buf)


def on_loop(broker: Broker, fn: Callable[[], T], timeout: float = 5.0) -> T:
    """Run ``fn`` on the broker's event loop (where managers live) and return its result."""

    async def call() -> T:
        return fn()

    return asyncio.run_coroutine_threadsafe(call(), broker.controller.loop).result(timeout)


def stored(broker: Broker, topic: str, queue_id: int = 0, offset: int = 0, decompress: bool = True) -> list[MessageExt]:
    """Every message of a queue from ``offset`` on, as the store holds them."""
    from rmq_core.message import decode_messages

    out: list[MessageExt] = []
    while True:
        r = broker.message_store.get_message("test", topic, queue_id, offset, 32)
        if not r.body:
            return out
        msgs = decode_messages(r.body, decompress=decompress)
        out.extend(msgs)
        offset = r.next_begin_offset


def max_offset(broker: Broker, topic: str, queue_id: int = 0) -> int:
    return broker.message_store.get_max_offset_in_queue(topic, queue_id)
