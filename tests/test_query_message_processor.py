"""VIEW_MESSAGE_BY_ID and QUERY_MESSAGE against a real Broker over TCP: the record comes back byte for byte; an offset
where no record starts is SYSTEM_ERROR with RocketMQ's remark; QUERY_MESSAGE is honestly QUERY_NOT_FOUND (no index)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from rmq_core.broker import Broker
from rmq_core.message import Message, decode_messages
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.transport import BlockingRemotingClient

TOPIC = "ViewTopic"


def on_loop(broker: Broker, fn: Callable[[], Any]) -> Any:
    async def run() -> Any:
        return fn()

    return asyncio.run_coroutine_threadsafe(run(), broker.controller.loop).result(5)


def view(client: BlockingRemotingClient, broker: Broker, offset: int) -> RemotingCommand:
    return client.invoke_sync(
        broker.address, RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset})
    )


def test_view_message_by_id_returns_the_exact_record(broker, client):
    store = broker.message_store
    msgs = [Message(TOPIC, b"first", tags="A", keys="k1"), Message(TOPIC, b"second" * 100, properties={"p": "v"})]
    results = on_loop(broker, lambda: [store.put_message(m, 0) for m in msgs])
    for msg, res in zip(msgs, results):
        r = view(client, broker, res.commitlog_offset)
        assert r.code == ResponseCode.SUCCESS
        assert r.body == on_loop(broker, lambda res=res: store.read_commit_log(res.commitlog_offset, res.wrote_bytes))
        (decoded,) = decode_messages(r.body)
        assert decoded.body == msg.body and decoded.topic == TOPIC
        assert decoded.commitlog_offset == res.commitlog_offset and decoded.msg_id == res.msg_id


@pytest.mark.parametrize("where", ["inside a record", "at the end", "far past the end", "negative"])
def test_view_message_where_no_record_starts(broker, client, where):
    store = broker.message_store
    res = on_loop(broker, lambda: store.put_message(Message(TOPIC, b"only"), 0))
    offset = {
        "inside a record": res.commitlog_offset + 4,
        "at the end": res.commitlog_offset + res.wrote_bytes,
        "far past the end": 1 << 40,
        "negative": -1,
    }[where]
    r = view(client, broker, offset)
    assert r.code == ResponseCode.SYSTEM_ERROR
    assert r.remark == f"can not find message by the offset, {offset}"
    assert r.body is None


def test_view_message_missing_offset_names_it(broker, client):
    r = client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {}))
    assert r.code == ResponseCode.SYSTEM_ERROR and "offset" in (r.remark or "")


def test_query_message_by_key_is_not_found_without_index(broker, client):
    store = broker.message_store
    on_loop(broker, lambda: store.put_message(Message(TOPIC, b"x", keys="order-1"), 0))
    ext = {"topic": TOPIC, "key": "order-1", "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 1 << 62}
    r = client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.QUERY_MESSAGE, ext))
    assert r.code == ResponseCode.QUERY_NOT_FOUND and "no index" in (r.remark or "")
    assert r.body is None


def test_query_message_missing_key_names_it(broker, client):
    ext = {"topic": TOPIC, "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 1}
    r = client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.QUERY_MESSAGE, ext))
    assert r.code == ResponseCode.SYSTEM_ERROR and "key" in (r.remark or "")
