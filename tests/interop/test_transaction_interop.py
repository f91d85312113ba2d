"""Transactional messages across implementations, each side against the other in the same run:
Apache RocketMQ's Java TransactionMQProducer 4.9.7 against rmq_core's broker (and, as the control, against Apache's
4.9.7 broker), and rmq_core's TransactionProducer against Apache's 4.9.7 broker — commit, rollback, UNKNOW → commit
and UNKNOW → rollback through the broker's check-back (transactionCheckInterval shortened in broker.conf); consumers
(the Java lite pull consumer) read the committed messages only, each once."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rmq_core.client import LocalTransactionState, TransactionProducer
from rmq_core.message import Message, MessageExt

from support import java_scenarios as sc
from support.apache_rocketmq import ApacheRocketMQ
from support.client_helpers_e2e import FAST_CLIENT, cluster
from support.helpers import wait_until
from support.java_compat import require_java

pytestmark = pytest.mark.apache_broker

TX_BROKER_CONF = {"transactionCheckInterval": "1000", "transactionTimeOut": "1000", "transactionCheckMax": "15"}


@pytest.fixture(scope="module")
def apache_tx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheRocketMQ]:
    require_java()
    server = ApacheRocketMQ(str(tmp_path_factory.mktemp("apache-tx")), extra_broker_conf=TX_BROKER_CONF)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def log_dir(tmp_path: Any) -> str:
    return os.path.join(str(tmp_path), "client-logs")


def test_java_transaction_producer_on_rmq_core(tmp_path: Any, log_dir: str) -> None:
    require_java()
    with cluster(tmp_path, transaction_check_interval=1000, transaction_timeout=1000) as c:
        sc.scenario_transaction_producer(c.namesrv_addr, "JavaTxOnRmq", "java_tx_rmq", log_dir)
        checks = c.broker.controller.transactional_message_check_listener.checks_sent
        assert checks == 4, checks  # the four undecided transactions, each asked once


def test_java_transaction_producer_on_apache(apache_tx: ApacheRocketMQ, log_dir: str) -> None:
    sc.scenario_transaction_producer(apache_tx.namesrv_addr, "JavaTxOnApache", "java_tx_apache", log_dir)


class PlanListener:
    """execute / check answers from the message's ``plan`` property ("EXEC[:CHECK]"), as TransactionProduce's."""

    def __init__(self) -> None:
        self.checked: list[tuple[str, str, str]] = []  # (keys, topic, thread)
        self.lock = threading.Lock()

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return LocalTransactionState(str(arg).split(":")[0])

    def check_local_transaction(self, msg_ext: MessageExt) -> LocalTransactionState:
        with self.lock:
            self.checked.append((msg_ext.keys or "", msg_ext.topic, threading.current_thread().name))
        i = int((msg_ext.keys or "key-0")[len("key-") :])
        return LocalTransactionState(sc.TX_PLAN[i % len(sc.TX_PLAN)].split(":")[1])


def test_rmq_core_transaction_producer_on_apache(apache_tx: ApacheRocketMQ, log_dir: str) -> None:
    topic, count = "RmqTxOnApache", 8
    listener = PlanListener()
    p = TransactionProducer(
        "rmq_tx_apache",
        namesrv_addr=apache_tx.namesrv_addr,
        transaction_listener=listener,
        instance_name="rmq-tx-apache",
        **FAST_CLIENT,
    )
    p.start()
    try:
        for i in range(count):
            plan = sc.TX_PLAN[i % len(sc.TX_PLAN)]
            msg = Message(topic, f"body-{i}".encode(), tags="TagTx", keys=f"key-{i}")
            r = p.send_message_in_transaction(msg, plan)
            assert r.send_status.value == "SEND_OK"
            assert r.local_transaction_state == LocalTransactionState(plan.split(":")[0])
        undecided = {f"key-{i}" for i in range(count) if sc.TX_PLAN[i % len(sc.TX_PLAN)].startswith("UNKNOW")}

        def checked_keys() -> set[str]:
            with listener.lock:
                return {k for k, _, _ in listener.checked}

        wait_until(lambda: checked_keys() >= undecided, "Apache's check-back of every undecided transaction", 40)
        time.sleep(0.5)  # the END_TRANSACTION of the last check (oneway) reaches the broker
        with listener.lock:
            assert {k for k, _, _ in listener.checked} == undecided
            assert all(t == topic and th.startswith("rmq-transaction-check-") for _, t, th in listener.checked)
    finally:
        p.shutdown()
    keys = sc.pulled_keys(apache_tx.namesrv_addr, topic, "rmq_tx_apache_reader", log_dir, len(sc.tx_committed(count)))
    assert sorted(keys) == sorted(sc.tx_committed(count)), keys
