"""Half and op messages across brokers, on disk: a store where rmq_core's broker holds four transactions (one
committed, one rolled back, two open) is opened by Apache RocketMQ 4.9.7's broker, and the reverse (a copy of
Apache's store opened by rmq_core's broker). In both directions the second broker asks the producer group about the
two open transactions only (it reads the first one's op messages), and a consumer then sees the committed two,
each once.

Run alone with ``-m apache_broker`` (needs java and mvn; RMQ_COMPAT_JAVA=0 skips)."""

from __future__ import annotations

import os
import shutil
import threading
import time
from typing import Any

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.client import ConsumeConcurrentlyStatus, LocalTransactionState, PushConsumer, TransactionProducer
from rmq_core.client.consumer.listener import ConsumeFromWhere
from rmq_core.message import Message, MessageExt
from rmq_core.namesrv import NameServer

from support.admin_helpers import wait_for_route
from support.apache_rocketmq import ApacheRocketMQ
from support.client_helpers_e2e import FAST_CLIENT
from support.helpers import wait_until

pytestmark = pytest.mark.apache_broker

TX_BROKER_CONF = {"transactionCheckInterval": "1000", "transactionTimeOut": "1000", "transactionCheckMax": "15"}
GROUP = "tx_files_pg"
FIRST_BROKER_PLAN = {"key-0": "COMMIT_MESSAGE", "key-1": "ROLLBACK_MESSAGE", "key-2": "UNKNOW", "key-3": "UNKNOW"}
SECOND_BROKER_CHECK = {"key-2": "COMMIT_MESSAGE", "key-3": "ROLLBACK_MESSAGE"}


class Listener:
    """Executes by ``plan`` (key → state); answers checks from ``checks`` (UNKNOW for a key it does not hold) and
    records every key checked."""

    def __init__(self, checks: dict[str, str]) -> None:
        self.checks = checks
        self.checked: list[str] = []
        self.lock = threading.Lock()

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return LocalTransactionState(FIRST_BROKER_PLAN[msg.keys or ""])

    def check_local_transaction(self, msg_ext: MessageExt) -> LocalTransactionState:
        with self.lock:
            self.checked.append(msg_ext.keys or "")
        return LocalTransactionState(self.checks.get(msg_ext.keys or "", "UNKNOW"))

    def keys_checked(self) -> set[str]:
        with self.lock:
            return set(self.checked)


def _produce(namesrv: str, topic: str) -> None:
    """The four transactions of FIRST_BROKER_PLAN; checks answered UNKNOW (they stay open on this broker)."""
    p = TransactionProducer(GROUP, namesrv_addr=namesrv, transaction_listener=Listener({}), **FAST_CLIENT)
    p.start()
    try:
        for key in FIRST_BROKER_PLAN:
            r = p.send_message_in_transaction(Message(topic, f"body-{key}".encode(), keys=key))
            assert r.send_status.value == "SEND_OK"
    finally:
        p.shutdown()


def _resolve(namesrv: str) -> set[str]:
    """A producer of the group answering the second broker's checks; the keys it was asked about."""
    listener = Listener(SECOND_BROKER_CHECK)
    p = TransactionProducer(GROUP, namesrv_addr=namesrv, transaction_listener=listener, **FAST_CLIENT)
    p.start()
    try:
        wait_until(lambda: listener.keys_checked() >= set(SECOND_BROKER_CHECK), "the open transactions checked", 60)
        time.sleep(3.0)  # the ENDs (oneway) land; a resolved transaction would be asked about again by now
        return listener.keys_checked()
    finally:
        p.shutdown()


def _consume(namesrv: str, topic: str, expect: int) -> list[str]:
    got: list[str] = []
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], _ctx: object) -> ConsumeConcurrentlyStatus:
        with lock:
            got.extend(m.keys or "" for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    pc = PushConsumer(
        f"{topic}_reader", namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, **FAST_CLIENT
    )
    pc.subscribe(topic, "*")
    pc.register_message_listener(listener)
    pc.start()
    try:
        wait_until(lambda: len(got) >= expect, "the committed messages consumed", 60)
        time.sleep(2.0)  # nothing else comes
        with lock:
            return sorted(got)
    finally:
        pc.shutdown()


def _rmq_config(root: str, namesrv: str) -> BrokerConfig:
    return BrokerConfig(  # the sizes tests/support/apache_rocketmq.py gives Apache
        listen_port=0,
        broker_name="broker-a",
        namesrv_addr=namesrv,
        store_path_root_dir=root,
        mapped_file_size_commit_log=16 * 1024 * 1024,
        mapped_file_size_consume_queue=6000 * 20,
        transaction_check_interval=1000,
        transaction_timeout=1000,
    )


def test_apache_resolves_the_transactions_rmq_core_left(tmp_path: Any) -> None:
    server = ApacheRocketMQ(str(tmp_path / "apache"), extra_broker_conf=TX_BROKER_CONF)
    topic = "TxFilesFromRmq"
    ns = NameServer(listen_port=0).start()
    try:
        cfg = _rmq_config(os.path.join(server.store, "broker"), ns.address)
        cfg.transaction_check_interval = 600_000  # rmq_core asks nothing: the open two stay open
        with Broker(cfg):
            wait_for_route(ns.address, "broker-a", timeout=10)
            _produce(ns.address, topic)
    finally:
        ns.shutdown()
    with server:
        wait_for_route(server.namesrv_addr, topic, timeout=60)
        checked = _resolve(server.namesrv_addr)
        consumed = _consume(server.namesrv_addr, topic, 2)
    assert checked == set(SECOND_BROKER_CHECK), (checked, server.tail("broker"))
    assert consumed == ["key-0", "key-2"], consumed


def test_rmq_core_resolves_the_transactions_apache_left(tmp_path: Any) -> None:
    server = ApacheRocketMQ(str(tmp_path / "apache"), extra_broker_conf=TX_BROKER_CONF)
    topic = "TxFilesFromApache"
    with server:
        wait_for_route(server.namesrv_addr, "TBW102", timeout=60)
        _produce(server.namesrv_addr, topic)  # Apache's checks of the open two are answered UNKNOW meanwhile
    root = str(tmp_path / "copy")
    shutil.copytree(os.path.join(server.store, "broker"), root, ignore=shutil.ignore_patterns("lock"))
    ns = NameServer(listen_port=0).start()
    try:
        with Broker(_rmq_config(root, ns.address)):
            wait_for_route(ns.address, topic, timeout=10)
            checked = _resolve(ns.address)
            consumed = _consume(ns.address, topic, 2)
    finally:
        ns.shutdown()
    assert checked == set(SECOND_BROKER_CHECK), checked
    assert consumed == ["key-0", "key-2"], consumed
