"""ScheduleMessageService against a real broker: a delayed message reaches its real topic once its level's delay has
passed and not before, with its identity kept; levels deliver in order; offsets go to config/delayOffset.json in
RocketMQ's layout and a restart resumes from them without duplicates or loss; bad offsets are corrected on load."""

from __future__ import annotations

import os
import time

import pytest

from rmq_core.broker import Broker, BrokerConfig, BrokerController
from rmq_core.broker.schedule.schedule_message_service import ScheduleMessageService, parse_delay_levels
from rmq_core.message_encoding import properties_to_string
from rmq_core.remoting import fastjson
from rmq_core.remoting.codes import ResponseCode

from support.send_helpers import SMALL_FILES, invoke, max_offset, send_request, stored, wait_until

SCHEDULE = "SCHEDULE_TOPIC_XXXX"


def _config(root: str, **kw) -> BrokerConfig:
    kw.setdefault("message_delay_level", "1s 2s 3s")
    kw.update(SMALL_FILES)
    return BrokerConfig(listen_port=0, store_path_root_dir=root, **kw)


@pytest.fixture
def root(tmp_path) -> str:
    return str(tmp_path / "store")


def _send_delayed(
    client, broker, body: bytes, level: int, topic: str = "DelayTopic", queue_id: int = 0, **props: str
) -> None:
    p = properties_to_string({"TAGS": "TagD", "DELAY": str(level), **props})
    resp = invoke(
        client,
        broker,
        send_request(topic, body, queue_id=queue_id, properties=p, born_timestamp=777, reconsume_times=2, flag=5),
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark


def _delay_offsets(root: str) -> dict[int, int]:
    with open(os.path.join(root, "config", "delayOffset.json"), encoding="utf-8") as f:
        text = f.read()
    return fastjson.loads(text)["offsetTable"]


# --- parsing -------------------------------------------------------------------------------------------------
def test_parse_delay_levels():
    assert parse_delay_levels("1s 5s 10s 30s 1m 2m") == {1: 1000, 2: 5000, 3: 10000, 4: 30000, 5: 60000, 6: 120000}
    assert parse_delay_levels("  2h   1d ") == {1: 7_200_000, 2: 86_400_000}
    levels = parse_delay_levels(BrokerConfig().message_delay_level)
    assert len(levels) == 18 and levels[18] == 7_200_000
    for bad in ("", "5x", "1s 2", "s", "1.5s", "-1s"):
        with pytest.raises(ValueError):
            parse_delay_levels(bad)


def test_decode_refuses_bad_documents_and_encodes_rocketmq_layout(root):
    c = BrokerController(_config(root))
    try:
        svc = ScheduleMessageService(c.broker_config)
        assert svc.max_delay_level == 3
        svc.decode('{"offsetTable":{1:5,3:7}}')
        assert svc.offset_table == {1: 5, 3: 7}
        assert svc.encode() == '{"offsetTable":{1:5,3:7}}'
        for bad in ("[]", '{"offsetTable":[1]}', '{"offsetTable":{"a":1}}', '{"offsetTable":{1:"x"}}', "{oops"):
            with pytest.raises(ValueError):
                svc.decode(bad)
            assert svc.offset_table == {1: 5, 3: 7}  # unchanged by a failed decode
    finally:
        c.loop.close()


# --- delivery ------------------------------------------------------------------------------------------------
def test_level_one_message_arrives_after_one_second_and_not_before(root, client):
    with Broker(_config(root)) as b:
        sent_at = time.monotonic()
        _send_delayed(client, b, b"one-second", 1, queue_id=1, UNIQ_KEY="UNIQ-DELAY-1", KEYS="k")
        [sched] = stored(b, SCHEDULE, 0)
        if time.monotonic() - sent_at < 0.8:
            assert stored(b, "DelayTopic", 1) == []
        [m] = wait_until(lambda: stored(b, "DelayTopic", 1), timeout=10)
        assert m.store_timestamp >= sched.store_timestamp + 1000  # not before its level's delay
        assert (m.body, m.flag, m.born_timestamp, m.born_host, m.reconsume_times) == (
            b"one-second",
            5,
            777,
            sched.born_host,
            2,
        )
        assert m.properties["UNIQ_KEY"] == "UNIQ-DELAY-1"
        assert (m.tags, m.keys, m.queue_id) == ("TagD", "k", 1)
        assert "DELAY" not in m.properties
        assert (m.properties["REAL_TOPIC"], m.properties["REAL_QID"]) == ("DelayTopic", "1")  # 4.9 leaves them
        assert b.controller.schedule_message_service.offset_table[1] == 1


def test_a_level_delivers_in_order(root, client):
    with Broker(_config(root)) as b:
        for i in range(5):
            _send_delayed(client, b, b"m%d" % i, 1)
        got = wait_until(lambda: (lambda ms: ms if len(ms) == 5 else None)(stored(b, "DelayTopic")), timeout=10)
        assert [m.body for m in got] == [b"m%d" % i for i in range(5)]
        sched = stored(b, SCHEDULE, 0)
        assert all(d.store_timestamp >= s.store_timestamp + 1000 for d, s in zip(got, sched))


def test_sync_flush_delivery(root, client):
    with Broker(_config(root, flush_disk_type="SYNC_FLUSH")) as b:
        _send_delayed(client, b, b"synced", 1)
        [m] = wait_until(lambda: stored(b, "DelayTopic"), timeout=10)
        assert m.body == b"synced"
        wait_until(lambda: b.controller.schedule_message_service.offset_table.get(1) == 1, timeout=5)


def test_offsets_persisted_and_resumed_after_restart(root, client):
    with Broker(_config(root)) as b:
        _send_delayed(client, b, b"late", 2)  # due 2 s after it was stored: still pending at shutdown
        _send_delayed(client, b, b"a", 1)
        _send_delayed(client, b, b"b", 1)
        wait_until(lambda: len(stored(b, "DelayTopic")) == 2, timeout=10)
    assert [m.body for m in stored_after(root)] == [b"a", b"b"]
    offsets = _delay_offsets(root)
    assert offsets[1] == 2 and offsets.get(2, 0) == 0
    with open(os.path.join(root, "config", "delayOffset.json"), encoding="utf-8") as f:
        assert '"1"' not in f.read()  # level keys unquoted, as fastjson writes them

    with Broker(_config(root)) as b:
        assert b.controller.schedule_message_service.offset_table[1] == 2
        _send_delayed(client, b, b"c", 1)
        wait_until(lambda: len(stored(b, "DelayTopic")) >= 4, timeout=10)
        time.sleep(0.3)  # a duplicate, if any, would be delivered right away
        assert sorted(m.body for m in stored(b, "DelayTopic")) == [b"a", b"b", b"c", b"late"]
    assert _delay_offsets(root)[1] == 3 and _delay_offsets(root)[2] == 1


def stored_after(root: str) -> list:
    """What DelayTopic holds, read with a plain store after the broker is gone."""
    from rmq_core.message import decode_messages
    from rmq_core.store import MessageStore, StoreConfig

    with MessageStore(root, StoreConfig(**SMALL_FILES)) as s:
        r = s.get_message("t", "DelayTopic", 0, 0, 32)
        return decode_messages(r.body) if r.body else []


def test_bad_offsets_are_corrected_on_load(root, client):
    with Broker(_config(root)) as b:
        _send_delayed(client, b, b"x", 1)
        assert max_offset(b, SCHEDULE, 0) == 1
    path = os.path.join(root, "config", "delayOffset.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"offsetTable":{1:-5,3:99}}')
    with Broker(_config(root)) as b:
        svc = b.controller.schedule_message_service
        assert svc.offset_table[3] == 0  # above the (empty) queue's max
        [m] = wait_until(lambda: stored(b, "DelayTopic"), timeout=10)  # -5 → 0: the message is not lost
        assert m.body == b"x"


def test_undeliverable_schedule_record_is_skipped(root, client):
    with Broker(_config(root)) as b:
        # a schedule record without REAL_QID cannot be delivered; the next one must not be held up by it
        from rmq_core.message import Message

        bad = Message(SCHEDULE, b"orphan", properties={"REAL_TOPIC": "DelayTopic", "DELAY": "1"})
        b.message_store.put_message(bad, 0)
        _send_delayed(client, b, b"fine", 1)
        [m] = wait_until(lambda: stored(b, "DelayTopic"), timeout=10)
        assert m.body == b"fine"
        assert b.controller.schedule_message_service.offset_table[1] == 2
