"""A full disk, Apache RocketMQ 4.9.7 as the control in the same run: both brokers are told that any usage is "full"
(Apache by its system property ``rocketmq.broker.diskSpaceWarningLevelRatio=0.01``, rmq_core by
``diskSpaceWarningLevelRatio=1`` in its config), so each one's own disk check marks its store DISK_FULL; then the same
sends down every path (a plain send, a delayed send, a batch) get the same code (SERVICE_NOT_AVAILABLE, 14) and the same
remark (the disk figures aside), and neither stores anything.

Marked ``apache_broker``: needs Java and the jars compat/apache/build.sh fetches."""

from __future__ import annotations

import re
import time

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.message import Message
from rmq_core.message_encoding import encode_batch, properties_to_string
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import GetMaxOffsetRequestHeader, encode_header
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.apache_rocketmq import ApacheRocketMQ
from support.send_helpers import SMALL_FILES, send_request

pytestmark = pytest.mark.apache_broker

TOPIC = "DiskFullTopic"
FIGURES = re.compile(r"CL: +-?\d+\.\d\d CQ: +-?\d+\.\d\d INDEX: +-?\d+\.\d\d")


def _refused_once_full(client: BlockingRemotingClient, addr: str) -> None:
    """Sends to a probe topic until the broker's disk check has marked the store full (it runs 1 s after start)."""
    deadline = time.monotonic() + 30
    while True:
        resp = client.invoke_sync(addr, send_request("DiskProbe", b"probe"), timeout=5.0)
        if resp.code == ResponseCode.SERVICE_NOT_AVAILABLE:
            return
        assert time.monotonic() < deadline, f"{addr} never refused: {resp.code} {resp.remark}"
        time.sleep(0.5)


def _sends(client: BlockingRemotingClient, addr: str) -> list[tuple[int, str]]:
    delayed = properties_to_string({"DELAY": "1"})
    batch = encode_batch([Message(TOPIC, b"b1"), Message(TOPIC, b"b2")])
    out = []
    for req in (
        send_request(TOPIC, b"plain"),
        send_request(TOPIC, b"delayed", properties=delayed),
        send_request(TOPIC, batch, code=RequestCode.SEND_BATCH_MESSAGE, batch=True),
    ):
        resp = client.invoke_sync(addr, req, timeout=5.0)
        out.append((resp.code, resp.remark or ""))
    return out


def _max_offset(client: BlockingRemotingClient, addr: str) -> int:
    req = RemotingCommand.request(
        RequestCode.GET_MAX_OFFSET, encode_header(GetMaxOffsetRequestHeader(topic=TOPIC, queueId=0))
    )
    resp = client.invoke_sync(addr, req, timeout=5.0)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return int(resp.ext_fields["offset"])


def test_a_full_disk_is_answered_as_apache_answers_it(tmp_path):
    apache = ApacheRocketMQ(
        str(tmp_path / "apache"), extra_jvm_opts=["-Drocketmq.broker.diskSpaceWarningLevelRatio=0.01"]
    )
    config = BrokerConfig(
        listen_port=0, store_path_root_dir=str(tmp_path / "rmq"), disk_space_warning_level_ratio=1, **SMALL_FILES
    )
    with Broker(config) as broker, BlockingRemotingClient() as client:
        apache.start()
        try:
            answers = {}
            for name, addr in (("rmq_core", broker.address), ("apache", apache.broker_addr)):
                _refused_once_full(client, addr)
                answers[name] = _sends(client, addr)
                assert _max_offset(client, addr) == 0, name  # nothing stored
        finally:
            apache.stop()
    for name, got in answers.items():
        assert [code for code, _ in got] == [ResponseCode.SERVICE_NOT_AVAILABLE] * 3, (name, got)
        for _code, remark in got:
            assert FIGURES.search(remark), (name, remark)
    normalise = [FIGURES.sub("CL: x CQ: x INDEX: x", remark) for _code, remark in answers["rmq_core"]]
    assert normalise == [FIGURES.sub("CL: x CQ: x INDEX: x", remark) for _code, remark in answers["apache"]]
