"""VIEW_MESSAGE_BY_ID and QUERY_MESSAGE against a real Broker over TCP: the record comes back byte for byte; an offset
where no record starts is SYSTEM_ERROR with RocketMQ's remark; QUERY_MESSAGE answers from the index files (records
byte for byte, the index's last update in the header, ``_UNIQUE_KEY_QUERY``), QUERY_NOT_FOUND with 4.9's remark when
nothing matches."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from rmq_core.broker import Broker
from rmq_core.message import Message, decode_messages
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.remoting_client import BlockingRemotingClient

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


def query(client: BlockingRemotingClient, broker: Broker, key: str, **kw: Any) -> RemotingCommand:
    ext: dict[str, Any] = {"topic": TOPIC, "key": key, "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 1 << 62}
    ext.update(kw)
    return client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.QUERY_MESSAGE, ext))


def test_query_message_by_key_returns_the_records(broker, client):
    store = broker.message_store
    puts = [
        on_loop(broker, lambda i=i: store.put_message(Message(TOPIC, b"x%d" % i, keys=f"order-{i % 2} all"), 0))
        for i in range(5)
    ]
    r = query(client, broker, "order-1")
    assert r.code == ResponseCode.SUCCESS
    msgs = decode_messages(r.body)
    assert [m.commitlog_offset for m in msgs] == [puts[1].commitlog_offset, puts[3].commitlog_offset]
    assert r.body == b"".join(store.read_commit_log(p.commitlog_offset, p.wrote_bytes) for p in (puts[1], puts[3]))
    assert int(r.ext_fields["indexLastUpdatePhyoffset"]) == puts[4].commitlog_offset
    assert int(r.ext_fields["indexLastUpdateTimestamp"]) > 0
    # maxNum caps; by UNIQ_KEY with the _UNIQUE_KEY_QUERY flag (maxNum replaced by defaultQueryMaxNum)
    assert len(decode_messages(query(client, broker, "all", maxNum=2).body)) == 2
    uniq = msgs[0].properties["UNIQ_KEY"]
    r = query(client, broker, uniq, maxNum=0, _UNIQUE_KEY_QUERY="true")
    assert r.code == ResponseCode.SUCCESS and [m.properties["UNIQ_KEY"] for m in decode_messages(r.body)] == [uniq]


def test_query_message_not_found(broker, client):
    store = broker.message_store
    on_loop(broker, lambda: store.put_message(Message(TOPIC, b"x", keys="order-1"), 0))
    for r in (query(client, broker, "order-2"), query(client, broker, "order-1", beginTimestamp=1, endTimestamp=2)):
        assert r.code == ResponseCode.QUERY_NOT_FOUND
        assert r.remark == "can not find message, maybe time range not correct"
        assert r.body is None


def test_query_message_missing_key_names_it(broker, client):
    ext = {"topic": TOPIC, "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 1}
    r = client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.QUERY_MESSAGE, ext))
    assert r.code == ResponseCode.SYSTEM_ERROR and "key" in (r.remark or "")
