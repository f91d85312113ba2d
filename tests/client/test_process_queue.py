"""ProcessQueue (offset-ordered cache, commit offset rules, orderly take/commit/rollback, expiry, consume timeout)
and the LocalFileOffsetStore file format, without a broker."""

from __future__ import annotations

import random

import pytest

from rmq_core.client.consumer.process_queue import OffsetMap, ProcessQueue
from rmq_core.client.consumer.store.local_file_offset_store import (
    LocalFileOffsetStore,
    decode_offset_table,
    encode_offset_table,
)
from rmq_core.client.consumer.store.offset_store import ReadOffsetType
from rmq_core.message import MessageExt, MessageQueue


def msg(offset: int, body: bytes = b"x", props: dict[str, str] | None = None) -> MessageExt:
    m = object.__new__(MessageExt)
    m.topic, m.body, m.flag, m.properties = "T", body, 0, dict(props or {})
    m.queue_id, m.queue_offset, m.commitlog_offset, m.store_size, m.body_crc, m.sys_flag = 0, offset, 0, 0, 0, 0
    m.born_timestamp, m.born_host, m.store_timestamp, m.store_host = 0, ("127.0.0.1", 1), 0, ("127.0.0.1", 2)
    m.reconsume_times, m.prepared_transaction_offset, m.msg_id, m.broker_name = 0, 0, "", "b"
    return m


def test_remove_returns_smallest_unconsumed_offset() -> None:
    pq = ProcessQueue()
    ms = [msg(o, b"ab") for o in range(10, 15)]
    assert pq.put_message(ms) is True
    assert (pq.msg_count, pq.msg_size, pq.queue_offset_max) == (5, 10, 14)
    assert pq.remove_message([ms[1], ms[3]]) == 10  # offset 10 unfinished: the commit stays at it
    assert pq.remove_message([ms[0]]) == 12
    assert pq.remove_message([ms[4]]) == 12
    assert pq.get_max_span() == 0
    assert pq.remove_message([ms[2]]) == 15  # emptied: queue_offset_max + 1
    assert (pq.msg_count, pq.msg_size) == (0, 0)
    assert pq.remove_message([ms[2]]) == -1  # nothing cached: nothing to commit


def test_duplicates_are_counted_once_and_span() -> None:
    pq = ProcessQueue()
    pq.put_message([msg(0), msg(1)])
    assert pq.put_message([msg(1), msg(2), msg(2000)]) is False  # already dispatched (consuming)
    assert pq.msg_count == 4
    assert pq.get_max_span() == 2000
    assert pq.first_offset() == 0


def test_max_offset_property_sets_accumulated_count() -> None:
    pq = ProcessQueue()
    pq.put_message([msg(5, props={"MAX_OFFSET": "50"})])
    assert pq.msg_acc_cnt == 45


def test_orderly_take_commit_rollback() -> None:
    pq = ProcessQueue()
    ms = [msg(o) for o in range(5)]
    pq.put_message(ms)
    taken = pq.take_messages(3)
    assert [m.queue_offset for m in taken] == [0, 1, 2]
    assert pq.msg_count == 5  # taken messages still count until committed
    pq.rollback()
    assert [m.queue_offset for m in pq.take_messages(2)] == [0, 1]
    pq.make_message_to_consume_again([ms[1]])
    assert [m.queue_offset for m in pq.messages()] == [1, 2, 3, 4]
    assert pq.commit() == 1  # only offset 0 was still taken
    assert pq.msg_count == 4
    assert [m.queue_offset for m in pq.take_messages(10)] == [1, 2, 3, 4]
    assert pq.commit() == 5
    assert pq.take_messages(1) == []
    assert pq.consuming is False
    assert pq.commit() == -1


def test_expiry_uses_the_clock() -> None:
    now = [1_000_000]
    pq = ProcessQueue(now_ms=lambda: now[0])
    assert not pq.is_lock_expired() and not pq.is_pull_expired()
    now[0] += 30_001
    assert pq.is_lock_expired() and not pq.is_pull_expired()
    now[0] += 90_000
    assert pq.is_pull_expired()
    assert not pq.is_lock_expired(now_ms=pq.last_lock_timestamp + 30_000)


class _SendBackRecorder:
    """What clean_expired_msg needs of a push consumer: consume_timeout and send_message_back."""

    def __init__(self, fail: bool = False) -> None:
        self.consume_timeout = 15
        self.sent: list[tuple[int, int]] = []
        self.fail = fail

    def send_message_back(self, m: MessageExt, delay_level: int) -> None:
        if self.fail:
            raise RuntimeError("broker down")
        self.sent.append((m.queue_offset, delay_level))


def test_clean_expired_msg_sends_back_messages_consumed_too_long() -> None:
    now = 100 * 60_000
    pq = ProcessQueue(now_ms=lambda: now)
    started_long_ago = str(now - 16 * 60_000)
    pq.put_message(
        [
            msg(0, props={"CONSUME_START_TIME": started_long_ago}),
            msg(1, props={"CONSUME_START_TIME": started_long_ago}),
            msg(2, props={"CONSUME_START_TIME": str(now - 60_000)}),
            msg(3, props={"CONSUME_START_TIME": started_long_ago}),
        ]
    )
    failing = _SendBackRecorder(fail=True)
    assert pq.clean_expired_msg(failing, now_ms=now) == 0
    assert pq.msg_count == 4  # nothing lost when the send-back fails
    rec = _SendBackRecorder()
    assert pq.clean_expired_msg(rec, now_ms=now) == 2
    assert rec.sent == [(0, 3), (1, 3)]  # stops at the first message not expired
    assert [m.queue_offset for m in pq.messages()] == [2, 3]
    assert pq.msg_count == 2


def test_offset_map_orders_out_of_order_inserts() -> None:
    rnd = random.Random(7)
    om = OffsetMap()
    ref: dict[int, MessageExt] = {}
    for step in range(5000):
        k = rnd.randrange(300)
        if rnd.random() < 0.55:
            m = msg(k)
            assert (om.put(k, m) is None) == (k not in ref)
            ref[k] = m
        else:
            assert (om.remove(k) is not None) == (k in ref)
            ref.pop(k, None)
        if step % 97 == 0:
            assert [m.queue_offset for m in om.values()] == sorted(ref)
            assert om.first_key() == (min(ref) if ref else None)
            assert om.last_key() == (max(ref) if ref else None)
    assert len(om) == len(ref)


class _Instance:
    client_id = "127.0.0.1@test"


def test_local_file_offset_store_layout_bak_and_reload(tmp_path) -> None:
    mq0, mq1 = MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)
    store = LocalFileOffsetStore(_Instance(), "G", tmp_path)
    store.update_offset(mq0, 5, False)
    store.update_offset(mq0, 3, True)  # increase-only keeps 5
    store.update_offset(mq1, 9, False)
    store.persist_all({mq0, mq1})
    path = tmp_path / "127.0.0.1@test" / "G" / "offsets.json"
    text = path.read_text()
    assert text == (
        '{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:5,'
        '{"brokerName":"broker-a","queueId":1,"topic":"T"}:9}}'
    )
    store.update_offset(mq0, 7, True)
    store.persist_all({mq0, mq1})
    assert (path.parent / "offsets.json.bak").read_text() == text
    again = LocalFileOffsetStore(_Instance(), "G", tmp_path)
    again.load()
    assert again.read_offset(mq0, ReadOffsetType.READ_FROM_MEMORY) == 7
    assert again.read_offset(MessageQueue("T", "broker-a", 2), ReadOffsetType.MEMORY_FIRST_THEN_STORE) == -1
    path.write_text("")  # an empty file falls back to the .bak
    third = LocalFileOffsetStore(_Instance(), "G", tmp_path)
    third.load()
    assert third.read_offset(mq0, ReadOffsetType.READ_FROM_MEMORY) == 5


def test_local_file_offset_store_reads_fastjson_pretty_output_and_rejects_garbage(tmp_path) -> None:
    pretty = (
        '{\n\t"offsetTable":{{\n\t\t\t"brokerName":"broker-a",\n\t\t\t"queueId":3,\n\t\t\t"topic":"T"\n\t\t}:12\n\t}\n}'
    )
    assert decode_offset_table(pretty) == {MessageQueue("T", "broker-a", 3): 12}
    assert decode_offset_table(encode_offset_table({})) == {}
    path = tmp_path / "127.0.0.1@test" / "G" / "offsets.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"offsetTable":{"T":1}}')
    with pytest.raises(ValueError, match=r"offsets\.json"):
        LocalFileOffsetStore(_Instance(), "G", tmp_path).load()
    assert path.read_text() == '{"offsetTable":{"T":1}}'  # nothing overwritten
