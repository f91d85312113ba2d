"""Helpers for the pull-path tests: a real Broker on 127.0.0.1:0 with a temporary store, a BlockingRemotingClient,
and builders for PULL_MESSAGE / HEART_BEAT / topic and group requests as a Java client sends them.

Nothing here replaces a component: requests go over TCP to the broker's processors; ``on_loop`` runs a call on the
broker's own event loop (managers are loop-owned) for set-up and inspection only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.common import sys_flag
from rmq_core.common.topic_config import TopicConfig
from rmq_core.message import Message, tags_hash
from rmq_core.remoting.codes import RequestCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    PullMessageRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    encode_header,
)
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.admin_helpers import add_topic_config
from support.helpers import wait_until  # noqa: F401 - the one poll helper, re-exported for the test files

TOPIC = "PullTopic"
GROUP = "pull_group"
ALL_FLAGS = sys_flag.FLAG_COMMIT_OFFSET | sys_flag.FLAG_SUSPEND | sys_flag.FLAG_SUBSCRIPTION


SMALL_FILES = {"mapped_file_size_commit_log": 1024 * 1024, "mapped_file_size_consume_queue": 20 * 1000}


@contextlib.contextmanager
def running_broker(tmp_path: Any, **config: Any) -> Iterator[Broker]:
    """A started broker on a free port. Mapped files are small: a default broker takes a whole 1 GiB CommitLog file
    of real disk at start."""
    config = {**SMALL_FILES, **config}
    cfg = BrokerConfig(
        listen_port=0, store_path_root_dir=str(tmp_path / "broker"), namesrv_addr=None, broker_name="broker-a", **config
    )
    broker = Broker(cfg)
    broker.start()
    try:
        yield broker
    finally:
        broker.shutdown()


def on_loop(broker: Broker, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)`` on the broker's loop and return its result."""

    async def run() -> Any:
        return fn(*args, **kwargs)

    return asyncio.run_coroutine_threadsafe(run(), broker.controller.loop).result(10)


def add_topic(broker: Broker, topic: str = TOPIC, queues: int = 4, perm: int = 6) -> None:
    """The pull tests' topic, straight into the TopicConfigManager (works on a slave too)."""
    add_topic_config(broker, TopicConfig(topic, read_queue_nums=queues, write_queue_nums=queues, perm=perm))


def subscription_json(
    topic: str, expression: str = "*", expression_type: str = "TAG", sub_version: int = 1000
) -> dict[str, Any]:
    tags = (
        []
        if expression_type != "TAG" or expression.strip() in ("", "*")
        else [t.strip() for t in expression.split("||") if t.strip()]
    )
    return {
        "classFilterMode": False,
        "topic": topic,
        "subString": expression if tags or expression_type != "TAG" else "*",
        "tagsSet": tags,
        "codeSet": [tags_hash(t) for t in tags],
        "subVersion": sub_version,
        "expressionType": expression_type,
    }


def heartbeat(
    client: BlockingRemotingClient,
    addr: str,
    group: str = GROUP,
    subscriptions: list[dict[str, Any]] | None = None,
    message_model: str = "CLUSTERING",
    client_id: str = "127.0.0.1@test",
) -> None:
    body = {
        "clientID": client_id,
        "producerDataSet": [],
        "consumerDataSet": [
            {
                "groupName": group,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": message_model,
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                "unitMode": False,
                "subscriptionDataSet": subscriptions if subscriptions is not None else [subscription_json(TOPIC)],
            }
        ],
    }
    r = client.invoke_sync(addr, RemotingCommand.request(RequestCode.HEART_BEAT, body=json.dumps(body).encode()))
    assert r.code == 0, r.remark


def pull_request(
    topic: str = TOPIC,
    queue_id: int = 0,
    offset: int = 0,
    *,
    group: str = GROUP,
    max_nums: int = 32,
    flags: int = sys_flag.FLAG_SUBSCRIPTION,
    commit_offset: int = 0,
    suspend_ms: int = 0,
    subscription: str | None = "*",
    expression_type: str | None = "TAG",
    sub_version: int = 0,
    ext: dict[str, str] | None = None,
) -> RemotingCommand:
    header = PullMessageRequestHeader(
        consumerGroup=group,
        topic=topic,
        queueId=queue_id,
        queueOffset=offset,
        maxMsgNums=max_nums,
        sysFlag=flags,
        commitOffset=commit_offset,
        suspendTimeoutMillis=suspend_ms,
        subscription=subscription,
        subVersion=sub_version,
        expressionType=expression_type,
    )
    fields = encode_header(header)
    fields.update(ext or {})
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, fields)


def pull(client: BlockingRemotingClient, addr: str, *args: Any, timeout: float = 3.0, **kwargs: Any) -> RemotingCommand:
    return client.invoke_sync(addr, pull_request(*args, **kwargs), timeout=timeout)


def put(
    broker: Broker,
    topic: str = TOPIC,
    queue_id: int = 0,
    body: bytes = b"hello",
    tags: str | None = None,
    properties: dict[str, str] | None = None,
) -> Any:
    r = broker.message_store.put_message(Message(topic, body, tags=tags, properties=properties), queue_id)
    assert r.ok, r
    return r


def query_offset(
    client: BlockingRemotingClient, addr: str, group: str = GROUP, topic: str = TOPIC, queue_id: int = 0
) -> RemotingCommand:
    header = QueryConsumerOffsetRequestHeader(consumerGroup=group, topic=topic, queueId=queue_id)
    return client.invoke_sync(addr, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, encode_header(header)))


def update_offset(
    client: BlockingRemotingClient, addr: str, offset: int, group: str = GROUP, topic: str = TOPIC, queue_id: int = 0
) -> None:
    header = UpdateConsumerOffsetRequestHeader(consumerGroup=group, topic=topic, queueId=queue_id, commitOffset=offset)
    r = client.invoke_sync(addr, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, encode_header(header)))
    assert r.code == 0, r.remark


def parked(broker: Broker, topic: str | None = None, queue_id: int | None = None) -> list[Any]:
    return on_loop(broker, broker.controller.pull_request_hold_service.parked, topic, queue_id)


def stored_offset(broker: Broker, group: str = GROUP, topic: str = TOPIC, queue_id: int = 0) -> int:
    return on_loop(broker, broker.controller.consumer_offset_manager.query_offset, group, topic, queue_id)
