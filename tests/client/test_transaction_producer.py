"""TransactionProducer against rmq_core's broker (name server + broker in this process, real TCP): commit, rollback,
UNKNOW resolved by the broker's check-back to commit and to rollback (the check runs on the producer's executor, not
the client loop), an exception in the local transaction, a broker restart between the half message and its end
(resolved once, not twice), and a push consumer that sees the committed messages only, each exactly once. Bad input:
no listener, a delay level (dropped, as 4.9's client does), a message that fails the checks."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    LocalTransactionState,
    MQClientException,
    PushConsumer,
    SendStatus,
    TransactionProducer,
    TransactionSendResult,
)
from rmq_core.message import Message, MessageExt

from support.client_helpers_e2e import FAST_CLIENT, Cluster, cluster
from support.helpers import wait_until

COMMIT, ROLLBACK, UNKNOW = (
    LocalTransactionState.COMMIT_MESSAGE,
    LocalTransactionState.ROLLBACK_MESSAGE,
    LocalTransactionState.UNKNOW,
)
FAST_CHECK = {"transaction_timeout": 500, "transaction_check_interval": 200}  # a check asks after 0.5 s


class Listener:
    """Decides by the message's ``decide`` property: what execute says, and what a check says (``check`` property)."""

    def __init__(self) -> None:
        self.executed: list[str] = []
        self.checked: list[tuple[str, str]] = []  # (key, thread name)
        self.lock = threading.Lock()

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        with self.lock:
            self.executed.append(msg.keys or "")
        decide = msg.properties.get("decide", "COMMIT_MESSAGE")
        if decide == "RAISE":
            raise RuntimeError("local transaction failed")
        return LocalTransactionState(decide)

    def check_local_transaction(self, msg_ext: MessageExt) -> LocalTransactionState:
        with self.lock:
            self.checked.append((msg_ext.keys or "", threading.current_thread().name))
        return LocalTransactionState(msg_ext.properties.get("check", "UNKNOW"))

    def checks_of(self, key: str) -> int:
        with self.lock:
            return sum(1 for k, _ in self.checked if k == key)


def tx_message(topic: str, key: str, decide: str = "COMMIT_MESSAGE", check: str = "UNKNOW") -> Message:
    return Message(topic, key.encode(), tags="tx", keys=key, properties={"decide": decide, "check": check})


@pytest.fixture
def tx_cluster(tmp_path: Any) -> Iterator[Cluster]:
    with cluster(tmp_path, **FAST_CHECK) as c:
        c.create_topic("TxTopic", queues=2)
        yield c


def start_producer(c: Cluster, listener: Listener, group: str = "tx_producer") -> TransactionProducer:
    p = TransactionProducer(
        group, namesrv_addr=c.namesrv_addr, transaction_listener=listener, instance_name=f"{group}-inst", **FAST_CLIENT
    )
    p.start()
    return p


def stored_keys(c: Cluster, topic: str = "TxTopic") -> Counter[str]:
    return Counter(m.keys or "" for q in range(2) for m in c.stored(topic, q))


def test_commit_rollback_and_check_back(tx_cluster: Cluster) -> None:
    c, listener = tx_cluster, Listener()
    p = start_producer(c, listener)
    try:
        r = p.send_message_in_transaction(tx_message("TxTopic", "commit"), arg="a")
        assert isinstance(r, TransactionSendResult)
        assert r.send_status == SendStatus.SEND_OK and r.local_transaction_state == COMMIT
        assert r.transaction_id == r.msg_id  # the UNIQ_KEY
        assert r.message_queue.topic == "TxTopic"
        r = p.send_message_in_transaction(tx_message("TxTopic", "rollback", "ROLLBACK_MESSAGE"))
        assert r.local_transaction_state == ROLLBACK
        p.send_message_in_transaction(tx_message("TxTopic", "unknow-commit", "UNKNOW", "COMMIT_MESSAGE"))
        p.send_message_in_transaction(tx_message("TxTopic", "unknow-rollback", "UNKNOW", "ROLLBACK_MESSAGE"))
        r = p.send_message_in_transaction(tx_message("TxTopic", "raise-commit", "RAISE", "COMMIT_MESSAGE"))
        assert r.local_transaction_state == UNKNOW
        wait_until(lambda: stored_keys(c)["unknow-commit"] and stored_keys(c)["raise-commit"], "the check-back commits")
        wait_until(lambda: listener.checks_of("unknow-rollback") >= 1, "the check-back of the rolled back one")
        time.sleep(1.0)  # a few more check intervals: nothing more may happen
        assert stored_keys(c) == Counter({"commit": 1, "unknow-commit": 1, "raise-commit": 1})
        for key in ("unknow-commit", "unknow-rollback", "raise-commit"):
            assert listener.checks_of(key) == 1, listener.checked
        assert listener.checks_of("commit") == 0 and listener.checks_of("rollback") == 0
        # the checks ran on the producer's executor, not on the client's event loop
        assert all(name.startswith("rmq-transaction-check-") for _, name in listener.checked)
        [m] = [m for q in range(2) for m in c.stored("TxTopic", q) if m.keys == "commit"]
        assert "TRAN_MSG" not in m.properties and "REAL_TOPIC" not in m.properties
        assert m.properties["PGROUP"] == "tx_producer"
    finally:
        p.shutdown()


def test_consumer_sees_committed_messages_exactly_once(tx_cluster: Cluster) -> None:
    c, listener = tx_cluster, Listener()
    seen: Counter[str] = Counter()
    lock = threading.Lock()

    def on_messages(msgs: list[MessageExt], _ctx: Any) -> ConsumeConcurrentlyStatus:
        with lock:
            seen.update(m.keys or "" for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "tx_consumer",
        namesrv_addr=c.namesrv_addr,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        instance_name="tx-consumer-inst",
        **FAST_CLIENT,
    )
    consumer.subscribe("TxTopic", "*")
    consumer.register_message_listener(on_messages)
    consumer.start()
    p = start_producer(c, listener)
    try:
        expected = Counter()
        for i in range(30):
            decide, check = [
                ("COMMIT_MESSAGE", "UNKNOW"),
                ("ROLLBACK_MESSAGE", "UNKNOW"),
                ("UNKNOW", "COMMIT_MESSAGE"),
                ("UNKNOW", "ROLLBACK_MESSAGE"),
            ][i % 4]
            key = f"k{i}"
            p.send_message_in_transaction(tx_message("TxTopic", key, decide, check))
            if "COMMIT_MESSAGE" in (decide, check):
                expected[key] = 1
        wait_until(lambda: set(seen) >= set(expected), "every committed message consumed", timeout=20)
        time.sleep(1.0)
        with lock:
            assert seen == expected
    finally:
        p.shutdown()
        consumer.shutdown()


def test_broker_restart_between_half_and_end_resolves_once(tmp_path: Any) -> None:
    """The producer's local transaction says UNKNOW, the broker restarts (same port and store), its check asks the
    producer, which commits: stored once; restarted again, the transaction is not checked or stored again."""
    with cluster(tmp_path, transaction_timeout=100, transaction_check_interval=3_600_000) as c:
        c.create_topic("TxTopic", queues=2)
        listener = Listener()
        p = start_producer(c, listener)
        try:
            p.send_message_in_transaction(tx_message("TxTopic", "restart", "UNKNOW", "COMMIT_MESSAGE"))
            old = c.brokers[0]
            cfg = old.config
            old.shutdown()
            for _round in range(2):
                restarted = Broker(
                    BrokerConfig(
                        listen_port=int(old.address.rsplit(":", 1)[1]),
                        namesrv_addr=c.namesrv_addr,
                        broker_name=cfg.broker_name,
                        store_path_root_dir=cfg.store_path_root_dir,
                        transaction_timeout=100,
                        transaction_check_interval=200,
                    )
                )
                restarted.start()
                c.brokers[0] = restarted
                if _round == 0:
                    wait_until(lambda: stored_keys(c)["restart"] == 1, "the check-back commit", timeout=20)
                else:
                    time.sleep(1.5)  # several check intervals with the producer connected again
                restarted.shutdown()
                old = restarted
            c.brokers[0] = Broker(BrokerConfig(listen_port=0, store_path_root_dir=cfg.store_path_root_dir)).start()
            assert stored_keys(c) == Counter({"restart": 1})
            assert listener.checks_of("restart") == 1
        finally:
            p.shutdown()


def test_bad_input(tx_cluster: Cluster) -> None:
    c = tx_cluster
    no_listener = TransactionProducer("tx_none", namesrv_addr=c.namesrv_addr, instance_name="tx-none")
    no_listener.start()
    try:
        with pytest.raises(MQClientException, match="TransactionListener is null"):
            no_listener.send_message_in_transaction(tx_message("TxTopic", "x"))
    finally:
        no_listener.shutdown()
    listener = Listener()
    p = start_producer(c, listener, "tx_bad")
    try:
        with pytest.raises(MQClientException):
            p.send_message_in_transaction(Message("TxTopic", b""))  # empty body: refused before anything is sent
        with pytest.raises(MQClientException):
            p.send_message_in_transaction(Message("RMQ_SYS_TRANS_HALF_TOPIC", b"x"))
        assert listener.executed == []
        delayed = tx_message("TxTopic", "delayed")
        delayed.delay_time_level = 3
        r = p.send_message_in_transaction(delayed)  # 4.9's client ignores the delay level
        assert r.local_transaction_state == COMMIT
        wait_until(lambda: stored_keys(c)["delayed"], "the commit (END_TRANSACTION is oneway)")
        [m] = [m for q in range(2) for m in c.stored("TxTopic", q)]
        assert m.keys == "delayed" and "DELAY" not in m.properties
        assert os.path.isdir(c.broker.config.store_path_root_dir)
    finally:
        p.shutdown()


def test_async_transaction_producer_with_async_listener(tx_cluster: Cluster) -> None:
    """rmq_core.aio.AsyncTransactionProducer on the caller's loop: ``async def`` execute and check; commit, rollback
    and UNKNOW → commit by the check-back (the check awaited on the loop)."""
    import asyncio

    from rmq_core.aio import AsyncTransactionProducer

    c = tx_cluster
    checked: list[str] = []

    class AsyncListener:
        async def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
            await asyncio.sleep(0)
            return LocalTransactionState(msg.properties["decide"])

        async def check_local_transaction(self, msg_ext: MessageExt) -> LocalTransactionState:
            checked.append(msg_ext.keys or "")
            return LocalTransactionState(msg_ext.properties["check"])

    async def run() -> None:
        async with AsyncTransactionProducer(
            "tx_aio", namesrv_addr=c.namesrv_addr, transaction_listener=AsyncListener(), **FAST_CLIENT
        ) as p:
            r = await p.send_message_in_transaction(tx_message("TxTopic", "aio-commit"))
            assert r.local_transaction_state == COMMIT
            await p.send_message_in_transaction(tx_message("TxTopic", "aio-rollback", "ROLLBACK_MESSAGE"))
            await p.send_message_in_transaction(tx_message("TxTopic", "aio-unknow", "UNKNOW", "COMMIT_MESSAGE"))
            for _ in range(200):
                if stored_keys(c)["aio-unknow"]:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)

    asyncio.run(run())
    assert stored_keys(c) == Counter({"aio-commit": 1, "aio-unknow": 1})
    assert checked == ["aio-unknow"]
