"""Interop scenarios driven by Apache RocketMQ's Java client (compat/java harness), asserting what a RocketMQ 4.9
name server + broker must make the client see. The same functions run against rmq_core (tests/interop/test_compat_java.py)
and against Apache RocketMQ 4.9.7 itself (tests/interop/test_apache_broker_smoke.py), so every expectation here is checked
to be Apache's behaviour too.

Messages produced by ``produce`` are numbered ``i``: tags ``TAGS[i % 3]``, keys ``key-<i>``, body ``body-<i>``, user
property ``compatProp = v-<i>``. Each scenario uses its own topic and groups (callers pass unique names).
Thread-safety: scenarios are plain sequential functions; run them from one test thread.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from support.java_compat import JavaProgram, run_java

TAGS = ("TagA", "TagB", "TagC")
PROPERTY = "compatProp"
CLIENT_ADDED_PROPERTIES = {"MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME"}
HEX32 = re.compile(r"^[0-9A-F]{32}$")  # offset msg id: IPv4 store host, port, commit-log offset
UNIQ_KEY = re.compile(r"^[0-9A-F]{32}([0-9A-F]{24})?$")  # client ip (IPv4 or IPv6), pid, loader hash, time, counter


def index_of(msg: dict[str, Any]) -> int:
    body = msg["body"]
    assert body.startswith("body-"), msg
    return int(body[len("body-") :])


def events(lines: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [ln for ln in lines if ln.get("event") == name]


def produce(namesrv: str, topic: str, log_dir: str, count: int, start: int = 0) -> dict[int, dict[str, Any]]:
    """Send ``count`` messages synchronously; every SendResult must be SEND_OK. Returns them by index."""
    lines = run_java("Produce", ["--namesrv", namesrv, "--topic", topic, "--count", count, "--start", start], log_dir)
    sends = events(lines, "send")
    assert events(lines, "done") == [{"event": "done", "sent": count}], lines[-3:]
    assert [s["i"] for s in sends] == list(range(start, start + count))
    for s in sends:
        assert s["status"] == "SEND_OK", s
        assert s["topic"] == topic and s["tags"] == TAGS[s["i"] % 3] and s["keys"] == f"key-{s['i']}"
        assert UNIQ_KEY.match(s["msgId"]), s  # UNIQ_KEY, made by the client
        assert HEX32.match(s["offsetMsgId"]), s  # store host + commit-log offset, made by the broker
        assert s["queueId"] >= 0 and s["queueOffset"] >= 0
    return {s["i"]: s for s in sends}


def query_offsets(namesrv: str, group: str, topic: str, log_dir: str) -> dict[int, dict[str, Any]]:
    """Per queue id: consumerOffset (QUERY_CONSUMER_OFFSET), minOffset, maxOffset, read through the Java client."""
    lines = run_java("QueryOffset", ["--namesrv", namesrv, "--group", group, "--topic", topic], log_dir)
    return {o["queueId"]: o for o in events(lines, "offset")}


def check_delivered(msg: dict[str, Any], topic: str, sends: dict[int, dict[str, Any]]) -> int:
    """A delivered message matches what was sent: body, tags, keys, the user property, ids and position."""
    i = index_of(msg)
    sent = sends[i]
    assert msg["topic"] == topic
    assert msg["tags"] == TAGS[i % 3] and msg["keys"] == f"key-{i}"
    props = msg["properties"]
    assert props[PROPERTY] == f"v-{i}"
    assert props["TAGS"] == TAGS[i % 3] and props["KEYS"] == f"key-{i}"
    assert props["UNIQ_KEY"] == sent["msgId"] and msg["msgId"] == sent["msgId"]
    if msg["reconsumeTimes"] == 0:
        # As stored by the broker: the producer's properties minus WAIT=true (4.9 SendMessageProcessor drops it to
        # save 9 bytes), plus CLUSTER; the rest is added by the client after the pull.
        stored = set(props) - CLIENT_ADDED_PROPERTIES
        assert stored == {"KEYS", "TAGS", "UNIQ_KEY", PROPERTY, "CLUSTER"}, props
    return i


def scenario_producer(namesrv: str, topic: str, log_dir: str, count: int = 40) -> None:
    """Sync sends to a new topic (auto-created from TBW102): distinct, gap-free queue offsets per queue, distinct
    message ids; GET_MAX_OFFSET / GET_MIN_OFFSET then agree with what was sent."""
    sends = produce(namesrv, topic, log_dir, count)
    per_queue: dict[int, list[int]] = defaultdict(list)
    for s in sends.values():
        per_queue[s["queueId"]].append(s["queueOffset"])
    for qid, offs in per_queue.items():
        assert offs == list(range(len(offs))), (qid, offs)  # in send order, from 0, no gaps, no repeats
    assert len({s["msgId"] for s in sends.values()}) == count
    assert len({s["offsetMsgId"] for s in sends.values()}) == count
    offsets = query_offsets(namesrv, "compat_never_consumed", topic, log_dir)
    assert set(per_queue) <= set(offsets)
    for qid, o in offsets.items():
        assert o["minOffset"] == 0 and o["maxOffset"] == len(per_queue.get(qid, [])), (qid, o)


def scenario_push_tag_filter_resume(namesrv: str, topic: str, group: str, log_dir: str) -> None:
    """A push consumer with "TagA || TagC" gets exactly the TagA/TagC messages, intact; its offsets are committed at
    shutdown and read back: restarted, it gets only what was sent after it stopped, and then (long polling) what
    is sent while it runs."""
    wanted = "TagA || TagC"

    def matches(i: int) -> bool:
        return TAGS[i % 3] in ("TagA", "TagC")

    sends = produce(namesrv, topic, log_dir, 40)
    expected = sorted(i for i in range(40) if matches(i))
    lines = run_java(
        "PushConsume",
        [
            "--namesrv",
            namesrv,
            "--group",
            group,
            "--topic",
            topic,
            "--sub",
            wanted,
            "--expect",
            len(expected),
            "--linger-ms",
            1500,
            "--timeout-ms",
            40000,
        ],
        log_dir,
    )
    msgs = events(lines, "msg")
    assert events(lines, "done")[0]["timedOut"] is False
    got = sorted(check_delivered(m, topic, sends) for m in msgs)
    assert got == expected  # exactly once each, nothing filtered wrongly
    for m in msgs:
        i = index_of(m)
        assert (m["queueId"], m["queueOffset"]) == (sends[i]["queueId"], sends[i]["queueOffset"])
        assert m["reconsumeTimes"] == 0

    # Offsets committed at shutdown (UPDATE_CONSUMER_OFFSET) and read back (QUERY_CONSUMER_OFFSET).
    offsets = query_offsets(namesrv, group, topic, log_dir)
    for qid, o in offsets.items():
        consumed = [sends[i]["queueOffset"] for i in expected if sends[i]["queueId"] == qid]
        low = max(consumed) + 1 if consumed else 0
        assert low <= o["consumerOffset"] <= o["maxOffset"], (qid, o, consumed)

    # Sent while no consumer runs: the restarted consumer starts from the committed offsets.
    sends.update(produce(namesrv, topic, log_dir, 9, start=40))
    batch2 = sorted(i for i in range(40, 49) if matches(i))
    batch3 = sorted(i for i in range(49, 58) if matches(i))
    with JavaProgram(
        "PushConsume",
        [
            "--namesrv",
            namesrv,
            "--group",
            group,
            "--topic",
            topic,
            "--sub",
            wanted,
            "--expect",
            len(batch2) + len(batch3),
            "--linger-ms",
            1500,
            "--timeout-ms",
            40000,
        ],
        log_dir,
    ) as consumer:
        consumer.next_event("assigned")  # every queue it holds has issued its first pull
        while len(events(consumer.lines, "msg")) < len(batch2):
            consumer.next_event("msg")
        first = sorted(check_delivered(m, topic, sends) for m in events(consumer.lines, "msg"))
        assert first == batch2  # from the committed offsets: nothing consumed before comes again
        sends.update(produce(namesrv, topic, log_dir, 9, start=49))  # answered by parked (long-polling) pulls
        lines = consumer.wait(60)
    msgs = events(lines, "msg")
    got = sorted(check_delivered(m, topic, sends) for m in msgs)
    assert got == batch2 + batch3, got


def scenario_pull_consumer(namesrv: str, topic: str, group: str, log_dir: str) -> None:
    """DefaultLitePullConsumer (subscribe, "TagA"): the broker builds the subscription from the pull request
    (sysFlag SUBSCRIPTION|LITE_PULL) and filters by tag; bodies and properties intact."""
    sends = produce(namesrv, topic, log_dir, 12)
    expected = sorted(i for i in range(12) if TAGS[i % 3] == "TagA")
    lines = run_java(
        "PullConsume",
        [
            "--namesrv",
            namesrv,
            "--group",
            group,
            "--topic",
            topic,
            "--sub",
            "TagA",
            "--expect",
            len(expected),
            "--linger-ms",
            1000,
            "--timeout-ms",
            40000,
        ],
        log_dir,
    )
    got = sorted(check_delivered(m, topic, sends) for m in events(lines, "msg"))
    assert got == expected


def scenario_reconsume_later(namesrv: str, topic: str, group: str, log_dir: str) -> None:
    """A listener answering RECONSUME_LATER (delay level 1) once: CONSUMER_SEND_MSG_BACK puts the message on the
    delay topic, then %RETRY%<group>; it is delivered again with reconsumeTimes 1, the same msgId, body and
    properties, under its original topic."""
    sends = produce(namesrv, topic, log_dir, 6)
    expected = [i for i in range(6) if TAGS[i % 3] == "TagB"]
    lines = run_java(
        "PushConsume",
        [
            "--namesrv",
            namesrv,
            "--group",
            group,
            "--topic",
            topic,
            "--sub",
            "TagB",
            "--reconsume-once",
            "true",
            "--expect",
            2 * len(expected),
            "--linger-ms",
            1500,
            "--timeout-ms",
            40000,
        ],
        log_dir,
    )
    msgs = events(lines, "msg")
    by_index: dict[int, list[int]] = defaultdict(list)
    for m in msgs:
        by_index[check_delivered(m, topic, sends)].append(m["reconsumeTimes"])
    assert {i: sorted(v) for i, v in by_index.items()} == {i: [0, 1] for i in expected}, msgs
    for m in msgs:
        if m["reconsumeTimes"] == 1:  # came back through the delay topic into %RETRY%<group>
            props, sent = m["properties"], sends[index_of(m)]
            assert props["RETRY_TOPIC"] == topic and props["REAL_TOPIC"] == f"%RETRY%{group}", m
            assert props["REAL_QID"] == "0", m
            # (Apache 4.9.7's record also keeps DELAY=1 and WAIT=false here; the client does not use them.)
            assert props["ORIGIN_MESSAGE_ID"] == sent["offsetMsgId"], m
            assert m["bornTimestamp"] <= m["storeTimestamp"]


def scenario_orderly(namesrv: str, topic: str, group: str, log_dir: str) -> None:
    """An orderly push consumer (LOCK_BATCH_MQ before pulling, UNLOCK_BATCH_MQ at shutdown) gets every message,
    each queue in offset order."""
    sends = produce(namesrv, topic, log_dir, 16)
    lines = run_java(
        "PushConsume",
        [
            "--namesrv",
            namesrv,
            "--group",
            group,
            "--topic",
            topic,
            "--orderly",
            "true",
            "--expect",
            16,
            "--linger-ms",
            1000,
            "--timeout-ms",
            40000,
        ],
        log_dir,
    )
    msgs = events(lines, "msg")
    assert sorted(check_delivered(m, topic, sends) for m in msgs) == list(range(16))
    per_queue: dict[int, list[int]] = defaultdict(list)
    for m in msgs:
        per_queue[m["queueId"]].append(m["queueOffset"])
    for qid, offs in per_queue.items():
        assert offs == sorted(offs), (qid, offs)


def scenario_sql92(namesrv: str, topic: str, group: str, log_dir: str) -> None:
    """A SQL92 selector on a user property (CHECK_CLIENT_CONFIG at start, expressionType SQL92 in heartbeat and
    pulls): exactly the matching messages."""
    sends = produce(namesrv, topic, log_dir, 9)
    lines = run_java(
        "PushConsume",
        [
            "--namesrv",
            namesrv,
            "--group",
            group,
            "--topic",
            topic,
            "--selector",
            "SQL92",
            "--sub",
            f"{PROPERTY} IN ('v-1', 'v-4', 'v-8') AND TAGS <> 'TagC'",
            "--expect",
            2,
            "--linger-ms",
            1500,
            "--timeout-ms",
            40000,
        ],
        log_dir,
    )
    got = sorted(check_delivered(m, topic, sends) for m in events(lines, "msg"))
    assert got == [1, 4]


def scenario_lite_pull_5x(namesrv: str, topic: str, group: str, log_dir: str, mode: str, version: str) -> None:
    """The Java client ``version`` (5.x) sends and its DefaultLitePullConsumer (``mode`` subscribe or assign, "*")
    pulls with LITE_PULL_MESSAGE (361): every message arrives once with its body, tags and keys, and the group's
    offsets committed on the broker reach every queue's max offset."""
    count = 30
    lines = run_java(
        "Produce", ["--namesrv", namesrv, "--topic", topic, "--count", count], log_dir, client_version=version
    )
    sends = {s["i"]: s for s in events(lines, "send")}
    assert sorted(sends) == list(range(count)) and all(s["status"] == "SEND_OK" for s in sends.values())
    lines = run_java(
        "PullConsume",
        ["--namesrv", namesrv, "--group", group, "--topic", topic, "--mode", mode, "--expect", count]
        + ["--linger-ms", 1000, "--timeout-ms", 40000],
        log_dir,
        timeout=90.0,
        client_version=version,
    )
    msgs = events(lines, "msg")
    got = sorted(index_of(m) for m in msgs)
    assert got == list(range(count)), got
    for m in msgs:
        i = index_of(m)
        assert m["topic"] == topic and m["tags"] == TAGS[i % 3] and m["keys"] == f"key-{i}"
        assert m["msgId"] == sends[i]["msgId"] and m["properties"][PROPERTY] == f"v-{i}"
    done = events(lines, "done")[0]
    offsets = query_offsets(namesrv, group, topic, log_dir)
    assert offsets and all(o["consumerOffset"] == o["maxOffset"] for o in offsets.values()), offsets
    assert sum(o["maxOffset"] - o["minOffset"] for o in offsets.values()) == count
    if mode == "assign":  # the client's own committed() read back from the broker
        assert done["committed"] == {f"{o['brokerName']}:{q}": o["maxOffset"] for q, o in offsets.items()}, done


# --- transactions -------------------------------------------------------------------------------------------------
TX_PLAN = ("COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "UNKNOW:COMMIT_MESSAGE", "UNKNOW:ROLLBACK_MESSAGE")


def tx_committed(count: int) -> set[str]:
    """The keys of ``TransactionProduce``'s messages that end committed (by the send or by the check-back)."""
    return {f"key-{i}" for i in range(count) if "COMMIT_MESSAGE" in TX_PLAN[i % len(TX_PLAN)]}


def pulled_keys(namesrv: str, topic: str, group: str, log_dir: str, expect: int) -> list[str]:
    """Every message of ``topic`` read by the Java DefaultLitePullConsumer from the first offset (lingering 2 s
    after ``expect`` arrived, so an extra or a duplicate would be seen): their keys, as often as delivered."""
    lines = run_java(
        "PullConsume",
        ["--namesrv", namesrv, "--group", group, "--topic", topic, "--expect", expect, "--linger-ms", 2000]
        + ["--timeout-ms", 40000],
        log_dir,
        timeout=90.0,
    )
    return [m["keys"] for m in events(lines, "msg")]


def scenario_transaction_producer(namesrv: str, topic: str, group: str, log_dir: str, count: int = 8) -> None:
    """TransactionMQProducer (4.9.7): COMMIT and ROLLBACK from executeLocalTransaction, and UNKNOW resolved by the
    broker's check-back (CHECK_TRANSACTION_STATE) to COMMIT and to ROLLBACK. The check names the real topic, each
    undecided message is checked until decided (once when the broker checks each once), and a consumer reads the
    committed messages only, each once."""
    lines = run_java(
        "TransactionProduce",
        ["--namesrv", namesrv, "--topic", topic, "--count", count, "--group", group, "--wait-checks-ms", 40000],
        log_dir,
        timeout=120.0,
    )
    sends = events(lines, "send")
    assert [s["i"] for s in sends] == list(range(count)), lines[-3:]
    for s in sends:
        assert s["status"] == "SEND_OK", s
        assert s["localTransactionState"] == TX_PLAN[s["i"] % len(TX_PLAN)].split(":")[0], s
        assert UNIQ_KEY.match(s["msgId"]), s
        assert s.get("offsetMsgId") is None, s  # 4.9.7's TransactionSendResult does not copy it
    [done] = events(lines, "done")
    assert done == {"event": "done", "sent": count, "unresolved": 0}, lines[-5:]
    checks = events(lines, "check")
    undecided = {f"key-{i}" for i in range(count) if TX_PLAN[i % len(TX_PLAN)].startswith("UNKNOW")}
    assert {c["keys"] for c in checks} == undecided, checks
    for c in checks:
        assert c["topic"] == topic, c
        i = int(c["keys"][len("key-") :])
        assert c["state"] == TX_PLAN[i % len(TX_PLAN)].split(":")[1], c
    keys = pulled_keys(namesrv, topic, f"{group}_reader", log_dir, len(tx_committed(count)))
    assert sorted(keys) == sorted(tx_committed(count)), keys


def scenario_timer_5x(namesrv: str, topic: str, group: str, log_dir: str, version: str) -> None:
    """The Java client ``version`` (5.x) sends RocketMQ 5 timer messages (``Message.setDeliverTimeMs`` and
    ``setDelayTimeSec``) and a push consumer of the same client receives each once, with its body, keys and
    properties, stored to its topic and printed by the consumer not before its deliver time."""
    lines = run_java(
        "Produce",
        ["--namesrv", namesrv, "--topic", topic, "--count", 4, "--deliver-after-ms", 6000],
        log_dir,
        client_version=version,
    )
    lines += run_java(
        "Produce",
        ["--namesrv", namesrv, "--topic", topic, "--count", 2, "--start", 4, "--delay-sec", 5],
        log_dir,
        client_version=version,
    )
    sends = {s["i"]: s for s in events(lines, "send")}
    assert sorted(sends) == list(range(6)) and all(s["status"] == "SEND_OK" for s in sends.values()), sends
    for i, s in sends.items():  # the properties on the wire are 5.x's
        name = "TIMER_DELIVER_MS" if i < 4 else "TIMER_DELAY_SEC"
        assert s["properties"][name] == (str(s["deliverTimeMs"]) if i < 4 else "5"), s
    lines = run_java(
        "PushConsume",
        ["--namesrv", namesrv, "--group", group, "--topic", topic, "--expect", 6]
        + ["--linger-ms", 1000, "--timeout-ms", 40000],
        log_dir,
        timeout=90.0,
        client_version=version,
    )
    msgs = events(lines, "msg")
    assert sorted(index_of(m) for m in msgs) == list(range(6)), msgs
    for m in msgs:
        i = index_of(m)
        sent = sends[i]
        assert m["topic"] == topic and m["keys"] == f"key-{i}" and m["msgId"] == sent["msgId"]
        props = m["properties"]
        assert props[PROPERTY] == f"v-{i}" and "TIMER_OUT_MS" in props and props["REAL_TOPIC"] == topic
        # the broker's clock decides (store timestamp); the consumer saw it no earlier (same host clock)
        assert m["storeTimestamp"] >= sent["deliverTimeMs"] - (1000 if i >= 4 else 0), (m, sent)
        assert m["printedMs"] >= sent["deliverTimeMs"] - (1000 if i >= 4 else 0), (m, sent)
        if i < 4:
            assert props["TIMER_DELIVER_MS"] == str(sent["deliverTimeMs"])
