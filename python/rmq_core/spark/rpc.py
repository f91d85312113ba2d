"""The few RocketMQ RPCs the ``rocketmq`` data source makes, synchronously, over one ``BlockingRemotingClient``:
routes (GET_ROUTEINFO_BY_TOPIC), queue min/max (GET_MIN_OFFSET / GET_MAX_OFFSET), PULL_MESSAGE (no suspend,
subscription in the request), UPDATE_CONSUMER_OFFSET and QUERY_CONSUMER_OFFSET. Wire names are RocketMQ's.

Invariants: a non-SUCCESS answer raises ``RocketMQRpcError`` naming the code, remark, address and what was asked
(PULL_MESSAGE returns its status codes instead: they are not errors). ``close()`` closes the connection thread.
Thread-safety: one instance per task or driver call; ``BlockingRemotingClient`` is itself thread-safe.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from rmq_core.common import sys_flag
from rmq_core.errors import RmqError
from rmq_core.remoting.body.route import TopicRouteData
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetRouteInfoRequestHeader,
    OffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    decode_header,
    encode_header,
)
from rmq_core.remoting.transport import BlockingRemotingClient


class RocketMQRpcError(RmqError):
    """An RPC of the data source failed (the message names the request, the address and the broker's answer)."""


@dataclass
class PullAnswer:
    code: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    body: bytes


class SourceRpc:
    def __init__(self, namesrv: str, timeout_ms: int = 10_000) -> None:
        self.namesrv_addrs = [a.strip() for a in namesrv.split(";") if a.strip()]
        if not self.namesrv_addrs:
            raise ValueError(f"no name server address in {namesrv!r}")
        self.timeout = timeout_ms / 1000.0
        self._client = BlockingRemotingClient(name="rmq-spark-rpc")

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> SourceRpc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _invoke(self, addr: str, code: int, header: object, what: str) -> RemotingCommand:
        try:
            return self._client.invoke_sync(addr, RemotingCommand.request(code, encode_header(header)), self.timeout)
        except (OSError, TimeoutError) as e:
            raise RocketMQRpcError(f"{what} to {addr} failed: {type(e).__name__}: {e}") from e

    def topic_route(self, topic: str) -> TopicRouteData:
        last: Exception | None = None
        addrs = list(self.namesrv_addrs)
        random.shuffle(addrs)
        for addr in addrs:
            try:
                resp = self._invoke(
                    addr,
                    RequestCode.GET_ROUTEINFO_BY_TOPIC,
                    GetRouteInfoRequestHeader(topic=topic),
                    f"GET_ROUTEINFO_BY_TOPIC({topic})",
                )
            except RocketMQRpcError as e:
                last = e
                continue
            if resp.code == ResponseCode.SUCCESS and resp.body:
                return TopicRouteData.decode(resp.body)
            raise RocketMQRpcError(
                f"no route for topic {topic!r} on name server {addr}: code {resp.code} {resp.remark or ''}".rstrip()
            )
        raise RocketMQRpcError(f"no name server answered for topic {topic!r}: {last}")

    def _offset(self, addr: str, code: int, header: object, what: str) -> int:
        resp = self._invoke(addr, code, header, what)
        if resp.code != ResponseCode.SUCCESS:
            raise RocketMQRpcError(f"{what} on {addr}: code {resp.code} {resp.remark or ''}".rstrip())
        return decode_header(OffsetResponseHeader, resp.ext_fields).offset

    def get_min_offset(self, addr: str, topic: str, queue_id: int) -> int:
        return self._offset(
            addr,
            RequestCode.GET_MIN_OFFSET,
            GetMinOffsetRequestHeader(topic=topic, queueId=queue_id),
            f"GET_MIN_OFFSET({topic}:{queue_id})",
        )

    def get_max_offset(self, addr: str, topic: str, queue_id: int) -> int:
        return self._offset(
            addr,
            RequestCode.GET_MAX_OFFSET,
            GetMaxOffsetRequestHeader(topic=topic, queueId=queue_id),
            f"GET_MAX_OFFSET({topic}:{queue_id})",
        )

    def query_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int) -> int | None:
        """The broker's committed offset of ``group`` for the queue, None when it has none (QUERY_NOT_FOUND)."""
        what = f"QUERY_CONSUMER_OFFSET({group}, {topic}:{queue_id})"
        resp = self._invoke(
            addr,
            RequestCode.QUERY_CONSUMER_OFFSET,
            QueryConsumerOffsetRequestHeader(consumerGroup=group, topic=topic, queueId=queue_id),
            what,
        )
        if resp.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        if resp.code != ResponseCode.SUCCESS:
            raise RocketMQRpcError(f"{what} on {addr}: code {resp.code} {resp.remark or ''}".rstrip())
        return decode_header(OffsetResponseHeader, resp.ext_fields).offset

    def update_consumer_offset(self, addr: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        what = f"UPDATE_CONSUMER_OFFSET({group}, {topic}:{queue_id}={offset})"
        resp = self._invoke(
            addr,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            UpdateConsumerOffsetRequestHeader(consumerGroup=group, topic=topic, queueId=queue_id, commitOffset=offset),
            what,
        )
        if resp.code != ResponseCode.SUCCESS:
            raise RocketMQRpcError(f"{what} on {addr}: code {resp.code} {resp.remark or ''}".rstrip())

    def pull(
        self,
        addr: str,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int,
        expression: str | None,
        expression_type: str,
    ) -> PullAnswer:
        """PULL_MESSAGE without suspend and without committing, with the subscription in the request (FOUND,
        NO_NEW_MSG, NO_MATCHED_MSG and OFFSET_MOVED come back as codes; anything else raises)."""
        flag = sys_flag.build_pull_sys_flag(commit_offset=False, suspend=False, subscription=True)
        header = PullMessageRequestHeader(
            consumerGroup=group,
            topic=topic,
            queueId=queue_id,
            queueOffset=offset,
            maxMsgNums=max_nums,
            sysFlag=flag,
            commitOffset=0,
            suspendTimeoutMillis=0,
            subscription=expression or "*",
            subVersion=0,
            expressionType=expression_type,
        )
        what = f"PULL_MESSAGE({group}, {topic}:{queue_id}@{offset})"
        resp = self._invoke(addr, RequestCode.PULL_MESSAGE, header, what)
        if resp.code not in (
            ResponseCode.SUCCESS,
            ResponseCode.PULL_NOT_FOUND,
            ResponseCode.PULL_RETRY_IMMEDIATELY,
            ResponseCode.PULL_OFFSET_MOVED,
        ):
            raise RocketMQRpcError(f"{what} on {addr}: code {resp.code} {resp.remark or ''}".rstrip())
        h = decode_header(PullMessageResponseHeader, resp.ext_fields)
        return PullAnswer(int(resp.code), h.nextBeginOffset, h.minOffset, h.maxOffset, resp.body or b"")
