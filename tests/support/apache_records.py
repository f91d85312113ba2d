"""The same requests stored by rmq_core's broker and by a real Apache RocketMQ 4.9.7 broker, for the tests that
compare their records byte for byte (tests/interop/test_*_records_apache.py).

``store_on_both(workdir, requests)`` starts both brokers (small CommitLog files, fresh stores under ``workdir``),
sends each request to rmq_core's then to Apache's (in order, waiting for each answer; every answer must be
SUCCESS), stops them and returns the answers' extFields per broker and each broker's first CommitLog file's bytes.
Compare records with ``helpers.record_at`` / ``helpers.masked_record``. Needs Java and compat/apache's jars."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.remoting.codes import ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.apache_rocketmq import ApacheRocketMQ
from support.send_helpers import SMALL_FILES


class StoredOnBoth(NamedTuple):
    ours: list[dict[str, str]]  # the answers' extFields, one per request
    theirs: list[dict[str, str]]
    our_commit_log: bytes
    their_commit_log: bytes


def store_on_both(workdir: str, requests: Sequence[RemotingCommand]) -> StoredOnBoth:
    apache = ApacheRocketMQ(os.path.join(workdir, "apache"))
    config = BrokerConfig(listen_port=0, store_path_root_dir=os.path.join(workdir, "rmq"), **SMALL_FILES)
    answers: dict[str, list[dict[str, str]]] = {"rmq_core": [], "apache": []}
    with Broker(config) as broker, BlockingRemotingClient() as client:
        apache.start()
        try:
            for i, request in enumerate(requests):
                for who, addr in (("rmq_core", broker.address), ("apache", apache.broker_addr)):
                    resp = client.invoke_sync(addr, request, timeout=10.0)
                    assert resp.code == ResponseCode.SUCCESS, (i, who, resp.remark)
                    answers[who].append(resp.ext_fields)
            ours = broker.message_store.read_commit_log(0, broker.message_store.max_physical_offset)
            assert ours is not None
        finally:
            apache.stop()
    commit_log_dir = apache.commit_log_dir
    with open(os.path.join(commit_log_dir, sorted(os.listdir(commit_log_dir))[0]), "rb") as f:
        theirs = f.read()
    return StoredOnBoth(answers["rmq_core"], answers["apache"], ours, theirs)
