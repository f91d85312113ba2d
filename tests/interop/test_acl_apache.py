"""RocketMQ 4.9's plain ACL, rmq_core against Apache RocketMQ 4.9.7 as the control (issue 28 item 2): the same
plain_acl.yml on both brokers (Apache's at ``${rocketmqHome}/conf/plain_acl.yml``, ``aclEnable=true``), the same raw
requests (tests/support/acl_helpers.probes: signed, unsigned, tampered, unknown account, missing permission, admin
code) answered with the same codes and remarks; rmq_core's producer and pull consumer signing against Apache's broker
(Apache verifies rmq_core's signatures); Apache's Java client with AclClientRPCHook is in test_acl_java.py.
Marked ``apache_broker``: run alone with ``-m apache_broker`` (needs java and mvn).
"""

from __future__ import annotations

import os

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.client import Producer, PullConsumer
from rmq_core.client.exceptions import MQClientException
from rmq_core.message import Message
from rmq_core.namesrv import NameServer

from support.acl_helpers import GROUP_A, PLAIN_ACL_YML, TOPIC_A, TOPIC_B, USER, exchange, probes
from support.apache_rocketmq import ApacheRocketMQ

pytestmark = pytest.mark.apache_broker


@pytest.fixture(scope="module")
def apache_acl(tmp_path_factory):
    apache = ApacheRocketMQ(str(tmp_path_factory.mktemp("apache-acl")), extra_broker_conf={"aclEnable": "true"})
    os.makedirs(os.path.join(apache.home, "conf"), exist_ok=True)
    with open(os.path.join(apache.home, "conf", "plain_acl.yml"), "w", encoding="utf-8") as f:
        f.write(PLAIN_ACL_YML)
    apache.start()
    try:
        yield apache
    finally:
        apache.stop()


@pytest.fixture
def rmq_acl(tmp_path):
    (tmp_path / "plain_acl.yml").write_text(PLAIN_ACL_YML)
    ns = NameServer(listen_port=0).start()
    cfg = BrokerConfig(
        broker_name="broker-a",
        listen_port=0,
        store_path_root_dir=str(tmp_path / "store"),
        namesrv_addr=ns.address,
        acl_enable=True,
        acl_file=str(tmp_path / "plain_acl.yml"),
    )
    broker = Broker(cfg).start()
    try:
        yield ns, broker
    finally:
        broker.shutdown()
        ns.shutdown()


def _answers(addr: str) -> dict[str, tuple[int, str | None]]:
    out = {}
    for name, req in probes():
        a = exchange(addr, [req])[0]
        # a success's remark is the processor's own text (Apache's UPDATE_AND_CREATE_TOPIC says "not set any
        # response code"): only refusals are compared by remark
        out[name] = (a.code, a.remark if a.code == 1 or a.code == 3 else None)
    return out


def test_same_answers_as_apache(apache_acl, rmq_acl):
    _ns, broker = rmq_acl
    # the topics exist on both first (created by the admin account), so a success is a success on both
    for addr in (apache_acl.broker_addr, broker.address):
        assert exchange(addr, [probes()[8][1]])[0].code == 0  # "admin code as admin"
    apache, ours = _answers(apache_acl.broker_addr), _answers(broker.address)
    assert ours == apache
    assert sum(code == 1 for code, _ in apache.values()) >= 9  # the refusals really are refusals on Apache


def test_rmq_core_clients_sign_for_apache(apache_acl):
    ns = apache_acl.namesrv_addr
    creds = {"access_key": USER.access_key, "secret_key": USER.secret_key}
    producer = Producer("aclProducer", ns, instance_name="acl-apache", **creds)
    producer.start()
    try:
        for i in range(3):
            assert producer.send(Message(TOPIC_A, f"apache-{i}".encode())).send_status.name == "SEND_OK"
        with pytest.raises(MQClientException) as refused:
            producer.send(Message(TOPIC_B, b"x"))
        assert "No default permission for topic:aclTopicB" in str(refused.value.__cause__ or refused.value)
    finally:
        producer.shutdown()
    consumer = PullConsumer(GROUP_A, ns, instance_name="acl-apache-pull", **creds)
    consumer.start()
    try:
        bodies = []
        for mq in consumer.fetch_subscribe_message_queues(TOPIC_A):
            bodies += [m.body for m in consumer.pull(mq, "*", 0, 32).msg_found_list or []]
        assert {b"apache-0", b"apache-1", b"apache-2"} <= set(bodies)
    finally:
        consumer.shutdown()
