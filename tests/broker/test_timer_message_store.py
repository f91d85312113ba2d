"""RocketMQ 5's timer messages on a real broker (broker/timer/): a message with TIMER_DELIVER_MS / TIMER_DELAY_SEC /
TIMER_DELAY_MS goes to rmq_sys_wheel_timer and reaches its topic at its time and not before, in the order of the due
times, with 5.x's properties; past, negative, too far and malformed times as 5.x answers them; a delay level wins
over a timer; the files are 5.x's (timerwheel, timerlog/, config/timercheck); pending timers survive a clean restart
(none lost, none early, none twice) and a kill -9 of the broker process (none lost, none early, duplicates only of
timers that were due by the time the broker came back)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.broker.timer.timer_message_hook import normalize_precision_ms, transform_timer_message
from rmq_core.format import timer as fmt
from rmq_core.message import Message, decode_messages
from rmq_core.message_encoding import properties_to_string
from rmq_core.remoting.codes import ResponseCode
from rmq_core.store import MessageStore, StoreConfig

from support.apache_rocketmq import free_port
from support.send_helpers import SMALL_FILES, invoke, on_loop, send_request, stored, wait_until

TIMER_TOPIC = "rmq_sys_wheel_timer"
TOPIC = "TimerTopic"


def _config(root: str, **kw) -> BrokerConfig:
    kw.update(SMALL_FILES)
    kw.setdefault("mapped_file_size_timer_log", 1 << 16)
    return BrokerConfig(listen_port=0, store_path_root_dir=root, **kw)


@pytest.fixture
def root(tmp_path) -> str:
    return str(tmp_path / "store")


def _now() -> int:
    return time.time_ns() // 1_000_000


def _send(client, addr_or_broker, body: bytes, queue_id: int = 1, topic: str = TOPIC, **props: str):
    p = properties_to_string({"TAGS": "TagT", **props})
    req = send_request(topic, body, queue_id=queue_id, properties=p, born_timestamp=777, reconsume_times=2, flag=5)
    if isinstance(addr_or_broker, str):
        return client.invoke_sync(addr_or_broker, req, timeout=5.0)
    return invoke(client, addr_or_broker, req)


def _all(b: Broker, topic: str = TOPIC) -> list:
    out = []
    for q in range(4):
        out.extend(stored(b, topic, q))
    return out


# --- the send-side rules (5.x HookUtils) ----------------------------------------------------------------------
def _transform(props: dict[str, str], delay_level: int = 0, now: int = 1_000_000, **kw) -> tuple[Message, int]:
    m = Message("T", b"x", properties=props)
    kw.setdefault("timer_wheel_enable", True)
    kw.setdefault("timer_max_delay_sec", 3 * 86400)
    kw.setdefault("timer_precision_ms", 1000)
    q = transform_timer_message(m, 3, delay_level, now_ms=now, **kw)
    return m, q


def test_transform_rounds_down_to_the_slot_and_keeps_the_real_topic():
    m, q = _transform({"TIMER_DELIVER_MS": "1005500"})
    assert (m.topic, q) == (TIMER_TOPIC, 0)
    assert m.properties["TIMER_OUT_MS"] == "1005000"
    assert (m.properties["REAL_TOPIC"], m.properties["REAL_QID"]) == ("T", "3")
    m, _ = _transform({"TIMER_DELIVER_MS": "1005000"})  # a multiple of the precision: one slot less (5.x)
    assert m.properties["TIMER_OUT_MS"] == "1004000"
    m, _ = _transform({"TIMER_DELAY_SEC": "3"})
    assert m.properties["TIMER_OUT_MS"] == "1002000"
    m, _ = _transform({"TIMER_DELAY_MS": "2500"})
    assert m.properties["TIMER_OUT_MS"] == "1002000"
    # DELAY_SEC first, then DELAY_MS, then DELIVER_MS (5.x's order)
    m, _ = _transform({"TIMER_DELAY_SEC": "10", "TIMER_DELAY_MS": "1", "TIMER_DELIVER_MS": "1"})
    assert m.properties["TIMER_OUT_MS"] == "1009000"
    assert [normalize_precision_ms(p) for p in (1, 100, 150, 200, 499, 500, 999, 1000, 5000)] == [
        100,
        100,
        100,
        200,
        200,
        500,
        500,
        1000,
        1000,
    ]


def test_transform_past_negative_too_far_malformed_and_delay_level():
    for past in ("999999", "0", "-5"):
        m, q = _transform({"TIMER_DELIVER_MS": past})
        assert (m.topic, q) == ("T", 3) and "TIMER_OUT_MS" not in m.properties  # an ordinary message, at once
    m, q = _transform({"TIMER_DELAY_SEC": "-1"})
    assert (m.topic, q) == ("T", 3)
    from rmq_core.broker.timer.timer_message_hook import TimerMessageRefused

    for bad in ({"TIMER_DELIVER_MS": "soon"}, {"TIMER_DELAY_SEC": "1.5"}, {"TIMER_DELAY_MS": " 5"}):
        with pytest.raises(TimerMessageRefused) as e:
            _transform(bad)
        assert e.value.code == ResponseCode.MESSAGE_ILLEGAL
    with pytest.raises(TimerMessageRefused) as e:
        _transform({"TIMER_DELAY_SEC": str(3 * 86400 + 1)})
    assert e.value.code == ResponseCode.MESSAGE_ILLEGAL and "259200000ms" in e.value.remark
    m, _ = _transform({"TIMER_DELAY_SEC": str(3 * 86400)})  # exactly the max: accepted
    assert m.topic == TIMER_TOPIC
    with pytest.raises(TimerMessageRefused) as e:
        _transform({"TIMER_DELAY_SEC": "5"}, timer_wheel_enable=False)
    assert e.value.code == ResponseCode.SYSTEM_ERROR and "timerWheelEnable is false" in e.value.remark
    # a delay level wins: the timer properties are removed, even a malformed or too far one
    m, q = _transform({"TIMER_DELAY_SEC": "999999999", "TIMER_DELIVER_MS": "x", "DELAY": "2"}, delay_level=2)
    assert (m.topic, q) == ("T", 3) and not any(k.startswith("TIMER_") for k in m.properties)
    # a delivered timer message (TIMER_OUT_MS set) sent again is not a timer message
    m, q = _transform({"TIMER_DELIVER_MS": "2000000", "TIMER_OUT_MS": "1999000"})
    assert (m.topic, q) == ("T", 3)


# --- delivery ------------------------------------------------------------------------------------------------
def test_timer_message_arrives_at_its_time_not_before_with_5x_properties(root, client):
    with Broker(_config(root)) as b:
        due = _now() + 1500
        r = _send(client, b, b"timed", TIMER_DELIVER_MS=str(due), UNIQ_KEY="UNIQ-T-1", KEYS="k")
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert r.ext_fields["queueId"] == "1"  # the request's queue (5.x answers queueIdInt), though stored in queue 0
        [t] = stored(b, TIMER_TOPIC, 0)
        assert t.properties["REAL_TOPIC"] == TOPIC and t.properties["REAL_QID"] == "1"
        assert t.properties["TIMER_OUT_MS"] == str((due - 1) // 1000 * 1000 if due % 1000 == 0 else due // 1000 * 1000)
        if _now() < due - 300:
            assert _all(b) == []
        [m] = wait_until(lambda: stored(b, TOPIC, 1), timeout=10)
        assert m.store_timestamp >= due  # not before its time
        assert (m.body, m.flag, m.born_timestamp, m.reconsume_times, m.queue_id) == (b"timed", 5, 777, 2, 1)
        assert (m.tags, m.keys, m.properties["UNIQ_KEY"]) == ("TagT", "k", "UNIQ-T-1")
        # kept, as 5.x's records have them (its convertMessage clears the map after making the properties string)
        assert (m.properties["REAL_TOPIC"], m.properties["REAL_QID"]) == (TOPIC, "1")
        assert m.properties["TIMER_DELIVER_MS"] == str(due)
        assert int(m.properties["TIMER_DEQUEUE_MS"]) >= due
        assert "TIMER_ENQUEUE_MS" in m.properties and m.properties["TIMER_OUT_MS"] == t.properties["TIMER_OUT_MS"]
        # the files are 5.x's
        assert os.path.getsize(os.path.join(root, "timerwheel")) == fmt.WHEEL_LENGTH
        assert os.path.getsize(os.path.join(root, "config", "timercheck")) == fmt.CHECKPOINT_FILE_SIZE
        [logf] = os.listdir(os.path.join(root, "timerlog"))
        assert logf == "0" * 20
        with open(os.path.join(root, "timerlog", logf), "rb") as f:
            u = fmt.decode_unit(f.read(fmt.UNIT_SIZE))
        assert (u.size, u.prev_pos, u.magic, u.offset_py, u.size_py) == (52, -1, 1, t.commitlog_offset, t.store_size)
        assert u.delayed_time_ms == int(t.properties["TIMER_OUT_MS"]) and u.reserved == due
        assert u.topic_hash == fmt.topic_hash(TOPIC)


def test_relative_delays_and_the_order_of_due_times(root, client):
    with Broker(_config(root)) as b:
        start = _now()
        delays = [2200, 400, 1700, 900, 1300, 2600, 100]
        for i, d in enumerate(delays):
            kind = i % 3
            props = {"TIMER_DELIVER_MS": str(start + d)} if kind == 0 else {"TIMER_DELAY_MS": str(d)}
            r = _send(client, b, b"%d" % d, queue_id=0, **props)
            assert r.code == ResponseCode.SUCCESS, r.remark
        r = _send(client, b, b"3000", queue_id=0, TIMER_DELAY_SEC="3")
        assert r.code == ResponseCode.SUCCESS
        got = wait_until(lambda: (lambda ms: ms if len(ms) == 8 else None)(stored(b, TOPIC, 0)), timeout=15)
        assert [int(m.body) for m in got] == sorted(delays + [3000])  # in the order of their due times
        for m in got:
            assert m.store_timestamp >= int(m.properties["TIMER_DEQUEUE_MS"]) - 1
            assert m.store_timestamp >= start + int(m.body)  # never before (start is before each send)


def test_past_negative_too_far_and_malformed_sends(root, client):
    with Broker(_config(root)) as b:
        for i, past in enumerate(["0", "-1000", str(_now() - 60_000)]):
            r = _send(client, b, b"p%d" % i, queue_id=2, TIMER_DELIVER_MS=past)
            assert r.code == ResponseCode.SUCCESS, r.remark
        assert [m.body for m in stored(b, TOPIC, 2)] == [b"p0", b"p1", b"p2"]  # stored at once
        assert stored(b, TIMER_TOPIC, 0) == []
        r = _send(client, b, b"far", TIMER_DELAY_SEC=str(3 * 86400 + 5))
        assert r.code == ResponseCode.MESSAGE_ILLEGAL and "max delay 259200000ms" in r.remark
        r = _send(client, b, b"bad", TIMER_DELIVER_MS="tomorrow")
        assert r.code == ResponseCode.MESSAGE_ILLEGAL
        assert stored(b, TIMER_TOPIC, 0) == [] and stored(b, TOPIC, 1) == []  # nothing stored for a refusal


def test_delay_level_wins_over_a_timer(root, client):
    with Broker(_config(root, message_delay_level="1s 2s")) as b:
        r = _send(client, b, b"lvl", DELAY="1", TIMER_DELAY_SEC="100")
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert stored(b, TIMER_TOPIC, 0) == [] and len(stored(b, "SCHEDULE_TOPIC_XXXX", 0)) == 1
        [m] = wait_until(lambda: stored(b, TOPIC, 1), timeout=10)
        assert not any(k.startswith("TIMER_") for k in m.properties)


def test_a_broker_without_timers_writes_no_timer_file(root, client):
    with Broker(_config(root)) as b:
        assert _send(client, b, b"plain").code == ResponseCode.SUCCESS
        time.sleep(0.3)
    assert not os.path.exists(os.path.join(root, "timerwheel"))
    assert not os.path.exists(os.path.join(root, "timerlog"))
    assert not os.path.exists(os.path.join(root, "config", "timercheck"))


def test_timer_wheel_disabled_refuses_timers(root, client):
    with Broker(_config(root, timer_wheel_enable=False)) as b:
        assert b.controller.timer_message_store is None
        r = _send(client, b, b"x", TIMER_DELAY_SEC="5")
        assert r.code == ResponseCode.SYSTEM_ERROR and "timerWheelEnable is false" in r.remark
        assert not os.path.exists(os.path.join(root, "timerwheel"))


def test_roll_beyond_the_window_is_filed_again(root, client):
    # a 2-slot roll window at 100 ms: a timer 1 s ahead rolls (put back to rmq_sys_wheel_timer) before delivery
    with Broker(_config(root, timer_precision_ms=100, timer_roll_window_slot=2)) as b:
        due = _now() + 1000
        r = _send(client, b, b"rolled", TIMER_DELIVER_MS=str(due))
        assert r.code == ResponseCode.SUCCESS
        [m] = wait_until(lambda: stored(b, TOPIC, 1), timeout=10)
        assert m.store_timestamp >= due and int(m.properties["TIMER_ROLL_TIMES"]) >= 1
        assert len(stored(b, TIMER_TOPIC, 0)) == 1 + int(m.properties["TIMER_ROLL_TIMES"])


def test_clean_restart_keeps_pending_timers(root, client):
    cfg = _config(root)
    start = _now()
    dues = [start + d for d in (1200, 2500, 3500, 4200)]
    with Broker(cfg) as b:
        for i, due in enumerate(dues):
            assert _send(client, b, b"r%d" % i, TIMER_DELIVER_MS=str(due)).code == ResponseCode.SUCCESS
        wait_until(lambda: len(stored(b, TOPIC, 1)) >= 1, timeout=10)
    with open(os.path.join(root, "config", "timercheck"), "rb") as f:
        cp = fmt.decode_checkpoint(f.read())
    assert cp.last_timer_queue_offset == 4 and cp.last_read_time_ms > start - 1000
    with Broker(_config(root)) as b:
        got = wait_until(lambda: (lambda ms: ms if len(ms) >= 4 else None)(stored(b, TOPIC, 1)), timeout=15)
        time.sleep(0.3)
        got = stored(b, TOPIC, 1)
        assert [m.body for m in got] == [b"r0", b"r1", b"r2", b"r3"]  # none lost, none twice, in order
        assert all(m.store_timestamp >= due for m, due in zip(got, dues))  # none early


# --- kill -9 of a broker process ------------------------------------------------------------------------------
def _broker_proc(root: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    conf = Path(root).parent / "broker.conf"
    conf.write_text(
        "\n".join(
            [
                "brokerName=broker-timer",
                f"listenPort={port}",
                f"storePathRootDir={root}",
                "mappedFileSizeCommitLog=1048576",
                "mappedFileSizeConsumeQueue=20000",
                "mappedFileSizeTimerLog=65536",
                "timerFlushIntervalMs=200",
            ]
        )
        + "\n"
    )
    exe = Path(sys.executable).with_name("rmq-core")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "rmq_core.cli"]
    out = open(log, "ab")  # noqa: SIM115
    try:
        return subprocess.Popen([*cmd, "broker", "-c", str(conf)], stdout=out, stderr=out, start_new_session=True)
    finally:
        out.close()


def _wait_serving(client, addr: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            r = _send(client, addr, b"ping", topic="PingTopic")
            if r.code == ResponseCode.SUCCESS:
                return
        except Exception:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


@pytest.mark.slow
def test_kill_9_with_pending_timers_loses_none_and_delivers_none_early(root, client, tmp_path):
    log = tmp_path / "broker.log"
    port = free_port()
    addr = f"127.0.0.1:{port}"
    proc = _broker_proc(root, port, log)
    try:
        _wait_serving(client, addr)
        start = _now()
        dues: dict[bytes, int] = {}
        for i in range(200):
            due = start + 800 + i * 25  # 0.8 s .. 5.8 s from now, one every 25 ms
            key = b"k%03d" % i
            dues[key] = due
            r = _send(client, addr, key, queue_id=i % 4, TIMER_DELIVER_MS=str(due))
            assert r.code == ResponseCode.SUCCESS, r.remark
        time.sleep(max(0.0, (start + 2000 - _now()) / 1000))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        killed_at = _now()
        time.sleep(1.0)  # timers fall due while the broker is down
        port = free_port()
        addr = f"127.0.0.1:{port}"
        proc = _broker_proc(root, port, log)
        _wait_serving(client, addr)
        back_at = _now()
        time.sleep(max(0.0, (max(dues.values()) + 1500 - _now()) / 1000))
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    got = _read_topic(root)
    seen: dict[bytes, int] = {}
    for m in got:
        assert m.store_timestamp >= dues[m.body], (m.body, m.store_timestamp - dues[m.body])  # none early
        seen[m.body] = seen.get(m.body, 0) + 1
    assert set(seen) == set(dues), sorted(set(dues) - set(seen))  # none lost
    twice = [k for k, n in seen.items() if n > 1]
    assert all(dues[k] <= back_at for k in twice), [(k, dues[k] - killed_at) for k in twice]
    assert any(dues[k] > back_at for k in dues)  # the test did leave timers pending across the restart


def test_timer_log_files_are_deleted_once_delivered(root, client):
    # three units per file: ten timers fill four files; once all are delivered only the last file is kept
    with Broker(_config(root, mapped_file_size_timer_log=52 * 3 + 30, timer_flush_interval_ms=100)) as b:
        due = _now() + 1200
        for i in range(10):
            assert _send(client, b, b"c%d" % i, TIMER_DELIVER_MS=str(due + i)).code == ResponseCode.SUCCESS
        d = os.path.join(root, "timerlog")
        wait_until(lambda: len(os.listdir(d)) == 4, timeout=5)
        wait_until(lambda: len(stored(b, TOPIC, 1)) == 10, timeout=10)
        wait_until(lambda: len(os.listdir(d)) == 1, timeout=5)
        assert os.listdir(d) == [f"{3 * (52 * 3 + 30):020d}"]


def test_a_crash_image_with_units_past_the_checkpoint_files_each_timer_once(root, client, tmp_path):
    # the checkpoint is never flushed while running (1 h interval): a copy of the live store directory is what a
    # kill -9 leaves (the mappings' pages), with every unit in the timer log after the checkpoint's position; the
    # broker started on the copy must skip the messages already filed instead of filing them a second time
    import shutil

    with Broker(_config(root, timer_flush_interval_ms=3_600_000)) as b:
        due = _now() + 3000
        for i in range(5):
            assert _send(client, b, b"x%d" % i, TIMER_DELIVER_MS=str(due + i * 100)).code == ResponseCode.SUCCESS
        ts = b.controller.timer_message_store
        assert ts is not None
        wait_until(lambda: ts.enqueued == 5, timeout=5)
        image = str(tmp_path / "image")
        shutil.copytree(root, image)
    assert not os.path.exists(os.path.join(image, "config", "timercheck"))  # nothing checkpointed yet
    with Broker(_config(image)) as b:
        ts = b.controller.timer_message_store
        assert ts is not None
        got = wait_until(lambda: (lambda ms: ms if len(ms) >= 5 else None)(stored(b, TOPIC, 1)), timeout=15)
        time.sleep(0.5)
        got = stored(b, TOPIC, 1)
        assert [m.body for m in got] == [b"x%d" % i for i in range(5)]  # each once, in order
        assert all(m.store_timestamp >= due + i * 100 for i, m in enumerate(got))
        assert ts.enqueued == 0 and ts.timer_log.write_pos == 5 * 52  # nothing filed twice


def test_timers_due_at_the_same_ms_go_in_the_order_they_came(root, client):
    with Broker(_config(root)) as b:
        due = _now() + 1500
        for i in range(6):
            assert _send(client, b, b"s%d" % i, TIMER_DELIVER_MS=str(due)).code == ResponseCode.SUCCESS
        got = wait_until(lambda: (lambda ms: ms if len(ms) == 6 else None)(stored(b, TOPIC, 1)), timeout=10)
        assert [m.body for m in got] == [b"s%d" % i for i in range(6)]


def test_bad_records_in_the_timer_topic_are_skipped_and_the_rest_delivered(root, client):
    with Broker(_config(root)) as b:
        # records in rmq_sys_wheel_timer no send can write (a client's send there is refused; 5.x accepts it): no
        # TIMER_OUT_MS; then one without REAL_TOPIC
        assert _send(client, b, b"refused", topic=TIMER_TOPIC, queue_id=0).code == ResponseCode.NO_PERMISSION
        for body, props in ((b"no-out", {}), (b"no-real", {"TIMER_OUT_MS": str(_now() + 500)})):
            bad = Message(TIMER_TOPIC, body, properties=props)
            r = on_loop(b, lambda m=bad: b.message_store.put_message(m, 0, ("127.0.0.1", 1)))
            assert r.status.name == "PUT_OK"
        due = _now() + 1200
        assert _send(client, b, b"good", TIMER_DELIVER_MS=str(due)).code == ResponseCode.SUCCESS
        [m] = wait_until(lambda: stored(b, TOPIC, 1), timeout=10)
        assert m.body == b"good" and m.store_timestamp >= due
        ts = b.controller.timer_message_store
        assert ts is not None
        wait_until(lambda: ts.commit_queue_offset == 3, timeout=5)  # past the bad ones: nothing stuck
        assert [x.body for x in _all(b)] == [b"good"]


def test_a_damaged_timer_file_stops_the_start_with_a_clear_error_and_loses_nothing(root, client):
    with Broker(_config(root)) as b:
        assert _send(client, b, b"kept", TIMER_DELIVER_MS=str(_now() + 60_000)).code == ResponseCode.SUCCESS
        wait_until(lambda: b.controller.timer_message_store.enqueued == 1, timeout=5)  # type: ignore[union-attr]
    wheel = os.path.join(root, "timerwheel")
    with open(wheel, "rb") as f:
        saved = f.read()
    with open(wheel, "r+b") as f:
        f.truncate(1000)
    with pytest.raises(Exception, match="Timer wheel length:1000"):
        Broker(_config(root)).start()
    with open(wheel, "wb") as f:  # repaired: the pending timer is still there
        f.write(saved)
    with Broker(_config(root)) as b:
        ts = b.controller.timer_message_store
        assert ts is not None
        assert ts.timer_wheel.get_all_num(_now()) == 1 and len(stored(b, TIMER_TOPIC, 0)) == 1
    with open(os.path.join(root, "timerlog", "0" * 20), "r+b") as f:  # a timer log file of the wrong size
        f.truncate(100)
    with pytest.raises(Exception, match="expected mappedFileSizeTimerLog"):
        Broker(_config(root)).start()


def _read_topic(root: str) -> list:
    with MessageStore(root, StoreConfig(**SMALL_FILES)) as store:
        got = []
        for q in range(4):
            off, mx = 0, store.get_max_offset_in_queue(TOPIC, q)
            while off < mx:
                r = store.get_message("g", TOPIC, q, off, 10_000)
                got.extend(decode_messages(r.body))
                off = r.next_begin_offset
        return got


@pytest.mark.slow
def test_kill_9_while_timers_are_being_sent_loses_no_acknowledged_one(root, client, tmp_path):
    # a sender keeps sending timers (due 0.3 .. 2.5 s after sending) while the broker is SIGKILLed: every timer the
    # broker answered SUCCESS is delivered after the restart (none lost), none before its time, and a timer is
    # delivered twice only if it was due by the time the broker was back
    import random
    import threading

    from rmq_core.remoting.remoting_client import BlockingRemotingClient

    log = tmp_path / "broker.log"
    port = free_port()
    addr = f"127.0.0.1:{port}"
    proc = _broker_proc(root, port, log)
    acked: dict[bytes, int] = {}
    stop = threading.Event()

    def sender() -> None:
        rnd = random.Random(7)
        i = 0
        with BlockingRemotingClient() as c:
            while not stop.is_set():
                due = _now() + rnd.randint(300, 2500)
                body = b"w%05d" % i
                i += 1
                try:
                    r = _send(c, addr, body, queue_id=i % 4, TIMER_DELIVER_MS=str(due))
                except Exception:
                    return  # the broker is gone
                if r.code == ResponseCode.SUCCESS:
                    acked[body] = due
                time.sleep(0.005)

    try:
        _wait_serving(client, addr)
        t = threading.Thread(target=sender, daemon=True)
        t.start()
        time.sleep(2.5)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        stop.set()
        t.join(10)
        time.sleep(0.5)
        proc = _broker_proc(root, port, log)
        _wait_serving(client, addr)
        back_at = _now()
        time.sleep(max(0.0, (max(acked.values()) + 1500 - _now()) / 1000))
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    finally:
        stop.set()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert len(acked) > 50
    seen: dict[bytes, int] = {}
    dues: dict[bytes, int] = {}
    for m in _read_topic(root):
        due = int(m.properties["TIMER_DELIVER_MS"])
        assert m.store_timestamp >= due, (m.body, m.store_timestamp - due)  # none early
        seen[m.body] = seen.get(m.body, 0) + 1
        dues[m.body] = due
    assert set(acked) <= set(seen), sorted(set(acked) - set(seen))[:10]  # no acknowledged timer lost
    twice = [k for k, n in seen.items() if n > 1]
    assert all(dues[k] <= back_at for k in twice), [(k, dues[k] - back_at) for k in twice]
