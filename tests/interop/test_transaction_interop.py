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


@pytest.mark.compat_java
def test_java_transaction_producer_on_rmq_core(tmp_path: Any, log_dir: str) -> None:
    require_java()
    with cluster(tmp_path, transaction_check_interval=1000, transaction_timeout=1000) as c:
        sc.scenario_transaction_producer(c.namesrv_addr, "JavaTxOnRmq", "java_tx_rmq", log_dir)
        checks = c.broker.controller.transactional_message_check_listener.checks_sent
        assert checks == 4, checks  # the four undecided transactions, each asked once


@pytest.mark.apache_broker
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


@pytest.mark.apache_broker
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


# --- bad input: the same raw requests to both brokers, the same answers ----------------------------------------
def _bad_input_answers(broker_addr: str, client: Any) -> dict[str, tuple[int, str | None]]:
    """Raw requests to ``broker_addr``: a transactional batch, END_TRANSACTION for an offset past the end, for a
    half message with the wrong producer group and with the wrong tranStateTableOffset; (code, remark) of each."""
    from rmq_core.message_encoding import encode_batch, properties_to_string
    from rmq_core.remoting.codes import RequestCode
    from rmq_core.remoting.command import RemotingCommand
    from rmq_core.remoting.header import EndTransactionRequestHeader, encode_header

    from support.send_helpers import send_request

    class _M:
        def __init__(self, body: bytes) -> None:
            self.topic, self.body, self.flag, self.properties = "TxBadBatch", body, 0, {}

    def call(req: RemotingCommand) -> RemotingCommand:
        return client.invoke_sync(broker_addr, req, timeout=5.0)

    def end(**over: Any) -> RemotingCommand:
        fields: dict[str, Any] = dict(
            producerGroup="PG", tranStateTableOffset=0, commitLogOffset=0, commitOrRollback=8, msgId="M"
        )
        fields.update(over)
        return RemotingCommand.request(
            RequestCode.END_TRANSACTION, encode_header(EndTransactionRequestHeader(**fields))
        )

    out: dict[str, tuple[int, str | None]] = {}
    tx_props = properties_to_string({"TRAN_MSG": "true", "PGROUP": "PG"})
    batch = send_request(
        "TxBadBatch",
        encode_batch([_M(b"a"), _M(b"b")]),
        code=RequestCode.SEND_BATCH_MESSAGE,
        properties=tx_props,
        sys_flag=0x4,
        batch=True,
    )
    r = call(batch)
    out["batch"] = (r.code, None)
    half = call(send_request("TxBadEnd", b"x", queue_id=0, properties=tx_props, sys_flag=0x4))
    assert half.code == 0, half.remark
    from rmq_core.message import decode_offset_msg_id

    phy = decode_offset_msg_id(half.ext_fields["msgId"])[1]
    q_off = int(half.ext_fields["queueOffset"])
    for name, req in (
        ("unknown_offset", end(commitLogOffset=1 << 40, tranStateTableOffset=q_off)),
        ("wrong_group", end(producerGroup="OTHER", commitLogOffset=phy, tranStateTableOffset=q_off)),
        ("wrong_queue_offset", end(commitLogOffset=phy, tranStateTableOffset=q_off + 100)),
    ):
        r = call(req)
        out[name] = (r.code, r.remark)
    return out


EXPECTED_BAD_INPUT = {
    "batch": (13, None),  # MESSAGE_ILLEGAL
    "unknown_offset": (1, "Find prepared transaction message failed"),
    "wrong_group": (1, "The producer group wrong"),
    "wrong_queue_offset": (1, "The transaction state table offset wrong"),
}


@pytest.mark.apache_broker
def test_bad_input_answers_on_apache(apache_tx: ApacheRocketMQ, client: Any) -> None:
    assert _bad_input_answers(apache_tx.broker_addr, client) == EXPECTED_BAD_INPUT


def test_bad_input_answers_on_rmq_core(tmp_path: Any, client: Any) -> None:
    with cluster(tmp_path) as c:
        assert _bad_input_answers(c.broker.address, client) == EXPECTED_BAD_INPUT
        assert c.broker.message_store.get_max_offset_in_queue("TxBadEnd", 0) == 0
        assert c.broker.message_store.get_max_offset_in_queue("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0) == 0
