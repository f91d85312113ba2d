"""Transactional messages on the broker over TCP (raw remoting requests): a prepared send stored as its half message,
END_TRANSACTION (37) commit / rollback / UNKNOW with 4.9's checks and answers, the op messages, a second end, bad
input (unknown offset, wrong group or offsets, a batch, a delay level), ``rejectTransactionMessage``, and the
check-back (TransactionalMessageCheckService) run by hand: CHECK_TRANSACTION_STATE to the producer's connection,
TRANSACTION_CHECK_TIMES, the discard to TRANS_CHECK_MAX_TIME_TOPIC after transactionCheckMax."""

from __future__ import annotations

import logging
import socket
import time

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.message import decode_messages, decode_offset_msg_id
from rmq_core.message_encoding import encode_batch, properties_to_string
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import EndTransactionRequestHeader, encode_header

from support.send_helpers import SMALL_FILES, invoke, max_offset, on_loop, send_request, stored
from support.txn_helpers import RawProducerConnection, check_now

HALF, OP = "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"
PREPARED = 0x4
COMMIT, ROLLBACK, UNKNOW = 8, 12, 0


def _broker(tmp_path, **kw) -> Broker:
    kw.update(SMALL_FILES)
    return Broker(BrokerConfig(listen_port=0, store_path_root_dir=str(tmp_path / "store"), **kw))


@pytest.fixture
def broker(tmp_path):
    with _broker(tmp_path) as b:
        yield b


def half_send(topic: str, body: bytes = b"tx", group: str = "PG", queue_id: int = 1, **props: str) -> RemotingCommand:
    p = {"TRAN_MSG": "true", "PGROUP": group, "UNIQ_KEY": f"UNIQ{time.monotonic_ns()}", **props}
    return send_request(topic, body, queue_id=queue_id, properties=properties_to_string(p), sys_flag=PREPARED)


def end_request(resp: RemotingCommand, kind: int, group: str = "PG", **over: object) -> RemotingCommand:
    _host, phy = decode_offset_msg_id(resp.ext_fields["msgId"])
    fields: dict[str, object] = dict(
        producerGroup=group,
        tranStateTableOffset=int(resp.ext_fields["queueOffset"]),
        commitLogOffset=phy,
        commitOrRollback=kind,
        fromTransactionCheck=False,
        msgId="M",
    )
    fields.update(over)
    return RemotingCommand.request(RequestCode.END_TRANSACTION, encode_header(EndTransactionRequestHeader(**fields)))


def test_prepared_send_is_stored_as_the_half_message(broker, client):
    resp = invoke(client, broker, half_send("TxA", queue_id=2, TAGS="tagA"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert resp.ext_fields["queueId"] == "2"  # the queue it was sent to
    assert resp.ext_fields["queueOffset"] == "0"  # the half queue offset
    [half] = stored(broker, HALF, 0)
    assert half.properties["REAL_TOPIC"] == "TxA" and half.properties["REAL_QID"] == "2"
    assert half.properties["TRAN_MSG"] == "true" and half.properties["PGROUP"] == "PG"
    assert half.sys_flag & 0xC == 0  # transaction bits reset: the half queue indexes it
    assert decode_offset_msg_id(resp.ext_fields["msgId"])[1] == half.commitlog_offset
    assert max_offset(broker, "TxA", 2) == 0


def test_reject_transaction_message_refuses_it(tmp_path, client):
    with _broker(tmp_path, reject_transaction_message=True) as b:
        resp = invoke(client, b, half_send("TxR"))
        assert resp.code == ResponseCode.NO_PERMISSION
        assert "sending transaction message is forbidden" in resp.remark
        assert max_offset(b, HALF) == 0 and max_offset(b, "TxR", 1) == 0


def test_commit_restores_the_real_topic_and_writes_the_op_message(broker, client):
    resp = invoke(client, broker, half_send("TxC", b"payload", TAGS="tagC", KEYS="k1"))
    end = invoke(client, broker, end_request(resp, COMMIT))
    assert end.code == ResponseCode.SUCCESS, end.remark
    [m] = stored(broker, "TxC", 1)
    assert m.body == b"payload" and m.tags == "tagC" and m.keys == "k1"
    assert m.sys_flag & 0xC == COMMIT
    assert m.prepared_transaction_offset == decode_offset_msg_id(resp.ext_fields["msgId"])[1]  # the half's offset
    for gone in ("REAL_TOPIC", "REAL_QID", "TRAN_MSG"):
        assert gone not in m.properties
    assert m.properties["PGROUP"] == "PG"
    [half] = stored(broker, HALF, 0)
    assert m.properties["UNIQ_KEY"] == half.properties["UNIQ_KEY"]
    assert m.born_timestamp == half.born_timestamp
    [op] = stored(broker, OP, 0)
    assert (op.tags, op.body) == ("d", b"0")


def test_rollback_stores_only_the_op_message(broker, client):
    invoke(client, broker, half_send("TxRb"))  # half offset 0
    resp = invoke(client, broker, half_send("TxRb"))  # half offset 1
    end = invoke(client, broker, end_request(resp, ROLLBACK))
    assert end.code == ResponseCode.SUCCESS, end.remark
    assert max_offset(broker, "TxRb", 1) == 0
    [op] = stored(broker, OP, 0)
    assert (op.tags, op.body) == ("d", b"1")


def test_unknow_end_gets_no_answer_and_changes_nothing(broker, client):
    resp = invoke(client, broker, half_send("TxU"))
    client.invoke_oneway(broker.address, end_request(resp, UNKNOW))
    # a later request on another connection is answered after it: the UNKNOW was processed by then
    with pytest.raises(TimeoutError):
        client.invoke_sync(broker.address, end_request(resp, UNKNOW), timeout=0.5)
    assert max_offset(broker, "TxU", 1) == 0 and max_offset(broker, OP, 0) == 0


def test_second_end_stores_nothing_more(broker, client):
    resp = invoke(client, broker, half_send("Tx2"))
    assert invoke(client, broker, end_request(resp, COMMIT)).code == ResponseCode.SUCCESS
    again = invoke(client, broker, end_request(resp, COMMIT))
    assert again.code == ResponseCode.SUCCESS
    rollback = invoke(client, broker, end_request(resp, ROLLBACK))
    assert rollback.code == ResponseCode.SUCCESS
    assert max_offset(broker, "Tx2", 1) == 1 and max_offset(broker, OP, 0) == 1


def test_second_end_after_a_restart_stores_nothing_more(tmp_path, client):
    with _broker(tmp_path) as b:
        resp = invoke(client, b, half_send("TxRs"))
        assert invoke(client, b, end_request(resp, COMMIT)).code == ResponseCode.SUCCESS
    with _broker(tmp_path) as b:
        assert invoke(client, b, end_request(resp, COMMIT)).code == ResponseCode.SUCCESS
        assert max_offset(b, "TxRs", 1) == 1 and max_offset(b, OP, 0) == 1


@pytest.mark.parametrize(
    ("over", "remark"),
    [
        ({"commitLogOffset": 10**9}, "Find prepared transaction message failed"),
        ({"commitLogOffset": 3}, "Find prepared transaction message failed"),  # not a record start
        ({"producerGroup": "OTHER"}, "The producer group wrong"),
        ({"tranStateTableOffset": 7}, "The transaction state table offset wrong"),
    ],
)
def test_bad_end_transaction_is_refused_and_stores_nothing(broker, client, over, remark):
    resp = invoke(client, broker, half_send("TxBad"))
    kw = dict(over)
    group = str(kw.pop("producerGroup", "PG"))
    for kind in (COMMIT, ROLLBACK):
        end = invoke(client, broker, end_request(resp, kind, group=group, **kw))
        assert end.code == ResponseCode.SYSTEM_ERROR
        assert end.remark == remark
    assert max_offset(broker, "TxBad", 1) == 0 and max_offset(broker, OP, 0) == 0


def test_end_transaction_for_a_plain_message_is_refused(broker, client):
    """A record that is not a half message (not in the half topic, no TRAN_MSG=true) is not found as one, even when
    it carries PGROUP/REAL_TOPIC/REAL_QID (4.9.7 and 5.x would commit it there): nothing stored, no op message."""
    resp = invoke(client, broker, send_request("Plain", b"x", queue_id=1))
    end = invoke(client, broker, end_request(resp, COMMIT))
    assert (end.code, end.remark) == (ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
    forged = {"PGROUP": "PG", "REAL_TOPIC": "Elsewhere", "REAL_QID": "0"}
    resp = invoke(client, broker, send_request("Plain", b"y", queue_id=1, properties=properties_to_string(forged)))
    for kind in (COMMIT, ROLLBACK):
        end = invoke(client, broker, end_request(resp, kind))
        assert (end.code, end.remark) == (ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
    assert max_offset(broker, "Plain", 1) == 2 and max_offset(broker, OP, 0) == 0
    assert max_offset(broker, "Elsewhere", 0) == 0


def test_end_transaction_missing_a_field_is_refused(broker, client):
    req = RemotingCommand.request(RequestCode.END_TRANSACTION, {"producerGroup": "PG"})
    resp = invoke(client, broker, req)
    assert resp.code == ResponseCode.SYSTEM_ERROR and "is null" in resp.remark


def test_transactional_batch_is_refused(broker, client):
    body = encode_batch([_Msg(b"a"), _Msg(b"b")])
    props = properties_to_string({"TRAN_MSG": "true", "PGROUP": "PG"})
    resp = invoke(
        client,
        broker,
        send_request(
            "TxBatch", body, code=RequestCode.SEND_BATCH_MESSAGE, properties=props, sys_flag=PREPARED, batch=True
        ),
    )
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL
    assert max_offset(broker, "TxBatch", 0) == 0 and max_offset(broker, HALF, 0) == 0


class _Msg:
    def __init__(self, body: bytes) -> None:
        self.topic, self.body, self.flag, self.properties = "TxBatch", body, 0, {}


def test_transactional_message_with_a_delay_level_waits_for_the_commit(broker, client):
    """The half message stays in the half queue (4.9's broker would move it to the schedule topic and lose its real
    topic); once committed, its DELAY applies: it goes to SCHEDULE_TOPIC_XXXX for the real topic."""
    resp = invoke(client, broker, half_send("TxDelay", DELAY="2"))
    assert resp.code == ResponseCode.SUCCESS
    [half] = stored(broker, HALF, 0)
    assert half.properties["REAL_TOPIC"] == "TxDelay"
    assert max_offset(broker, "SCHEDULE_TOPIC_XXXX", 1) == 0
    assert invoke(client, broker, end_request(resp, COMMIT)).code == ResponseCode.SUCCESS
    [scheduled] = stored(broker, "SCHEDULE_TOPIC_XXXX", 1)
    assert scheduled.properties["REAL_TOPIC"] == "TxDelay" and scheduled.properties["REAL_QID"] == "1"
    assert max_offset(broker, OP, 0) == 1


# --- the check-back -------------------------------------------------------------------------------------------
def test_check_sends_check_transaction_state_to_the_producer_connection(tmp_path):
    with (
        _broker(tmp_path, transaction_timeout=0, transaction_check_interval=3_600_000) as b,
        RawProducerConnection(b.address, "PG") as conn,
    ):
        resp = conn.invoke(half_send("TxChk", b"body", TAGS="t"))
        time.sleep(0.01)
        check_now(b)
        req = conn.next_request(RequestCode.CHECK_TRANSACTION_STATE)
        assert req.is_oneway
        [renewed] = stored(b, HALF, 0, offset=1)  # put back at the tail with TRANSACTION_CHECK_TIMES=1
        assert renewed.properties["TRANSACTION_CHECK_TIMES"] == "1"
        assert int(req.ext_fields["tranStateTableOffset"]) == renewed.queue_offset == 1
        assert int(req.ext_fields["commitLogOffset"]) == renewed.commitlog_offset
        assert req.ext_fields["msgId"] == renewed.properties["UNIQ_KEY"] == req.ext_fields["transactionId"]
        [msg] = decode_messages(req.body)
        assert (msg.topic, msg.queue_id, msg.body, msg.tags) == ("TxChk", 1, b"body", "t")
        # the producer answers COMMIT for the renewed record: stored once, no further check
        end = RemotingCommand.request(
            RequestCode.END_TRANSACTION,
            encode_header(
                EndTransactionRequestHeader(
                    producerGroup="PG",
                    tranStateTableOffset=1,
                    commitLogOffset=renewed.commitlog_offset,
                    commitOrRollback=COMMIT,
                    fromTransactionCheck=True,
                    msgId=msg.properties["UNIQ_KEY"],
                )
            ),
        )
        assert conn.invoke(end).code == ResponseCode.SUCCESS
        assert resp.code == ResponseCode.SUCCESS
        time.sleep(0.01)
        check_now(b)
        assert conn.no_request_within(0.3)
        assert max_offset(b, "TxChk", 1) == 1 and max_offset(b, HALF, 0) == 2


def test_check_skips_ended_and_young_messages(tmp_path):
    with (
        _broker(tmp_path, transaction_timeout=60_000, transaction_check_interval=3_600_000) as b,
        RawProducerConnection(b.address, "PG") as conn,
    ):
        ended = conn.invoke(half_send("TxY"))
        assert conn.invoke(end_request(ended, ROLLBACK)).code == ResponseCode.SUCCESS
        conn.invoke(half_send("TxY"))  # young: not checked before transactionTimeOut
        time.sleep(0.01)
        check_now(b)
        assert conn.no_request_within(0.3)
        assert max_offset(b, HALF, 0) == 2  # nothing put back


def test_check_discards_after_transaction_check_max(tmp_path):
    with (
        _broker(tmp_path, transaction_timeout=0, transaction_check_max=2, transaction_check_interval=3_600_000) as b,
        RawProducerConnection(b.address, "PG") as conn,
    ):
        conn.invoke(half_send("TxMax", b"m"))
        for _ in range(2):  # two checks, the producer stays silent
            time.sleep(0.01)
            check_now(b)
            conn.next_request(RequestCode.CHECK_TRANSACTION_STATE)
        time.sleep(0.01)
        check_now(b)  # the third: checked twice already → discarded
        assert conn.no_request_within(0.3)
        [dropped] = stored(b, "TRANS_CHECK_MAX_TIME_TOPIC", 0)
        assert dropped.body == b"m" and dropped.properties["REAL_TOPIC"] == "TxMax"
        assert max_offset(b, "TxMax", 1) == 0


def test_check_without_a_producer_connection_sends_nothing(tmp_path, client):
    with _broker(tmp_path, transaction_timeout=0, transaction_check_interval=3_600_000) as b:
        invoke(client, b, half_send("TxNoConn", group="NobodyHere"))
        time.sleep(0.01)
        check_now(b)
        assert on_loop(b, lambda: b.controller.transactional_message_check_listener.checks_sent) == 0


def test_check_on_an_idle_broker_logs_no_warning(tmp_path, caplog):
    """The op queue of a broker that never saw a transaction is empty at offset 0, not illegal (it warned every
    minute: 'the op offset 0 in queue 0 is illegal: OFFSET_ILLEGAL')."""
    with _broker(tmp_path, transaction_timeout=0, transaction_check_interval=3_600_000) as b:
        caplog.set_level(logging.INFO, logger="rmq_core.broker.transaction")
        for _ in range(2):
            check_now(b)
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_broker_conf_names(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "transactionTimeOut=1500\ntransactionCheckMax=3\ntransactionCheckInterval=250\nrejectTransactionMessage=true\n"
    )
    cfg = BrokerConfig.from_properties_file(conf)
    assert (cfg.transaction_timeout, cfg.transaction_check_max, cfg.transaction_check_interval) == (1500, 3, 250)
    assert cfg.reject_transaction_message is True and not cfg.extra
    assert BrokerConfig().transaction_check_interval == 60000 and BrokerConfig().transaction_timeout == 6000


_ = socket


def test_end_transaction_on_a_slave_is_refused(tmp_path, client):
    with _broker(tmp_path, broker_role="SLAVE", broker_id=1) as b:
        req = RemotingCommand.request(
            RequestCode.END_TRANSACTION,
            encode_header(
                EndTransactionRequestHeader(
                    producerGroup="PG", tranStateTableOffset=0, commitLogOffset=0, commitOrRollback=COMMIT, msgId="M"
                )
            ),
        )
        assert invoke(client, b, req).code == ResponseCode.SLAVE_NOT_AVAILABLE
        assert b.controller.transactional_message_check_service._task is None  # a slave does not check
