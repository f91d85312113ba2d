"""Admin sees RocketMQ 5 gRPC consumers (the 5.x Python SDK's SimpleConsumer and PushConsumer against an rmq_core
broker's gRPC endpoint): GET_CONSUMER_CONNECTION_LIST (and GET_CONSUMER_LIST_BY_GROUP) lists the client (its id, language PYTHON, the SDK's version,
consume type, subscription) while it runs and not after it terminates; GET_CONSUME_STATS counts received-not-acked
messages as lag and in flight, and neither once acked; ``rmq-core admin consumer-progress`` and Apache's mqadmin
4.9.7 (``consumerConnection``, ``consumerProgress``) show the same."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

import pytest

pytest.importorskip("grpc", reason="the rmq_core[grpc] extra (grpcio) is not installed")

from rmq_core.common.mq_version import version_ordinal
from rmq_core.remoting.body.queue_offsets import ConsumeStats
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    GetConsumerConnectionListRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetConsumeStatsRequestHeader,
    encode_header,
)
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.grpc5_helpers import endpoint, needs_sdk, sdk, topic
from support.helpers import subprocess_env, wait_until

pytestmark = needs_sdk

SDK_VERSION = "V5_1_2"  # rocketmq-python-client 5.1.2 sends x-mq-client-version 5.1.2


def _connections(client: BlockingRemotingClient, addr: str, group: str) -> dict[str, Any] | None:
    h = encode_header(GetConsumerConnectionListRequestHeader(consumerGroup=group))
    r = client.invoke_sync(addr, RemotingCommand.request(RequestCode.GET_CONSUMER_CONNECTION_LIST, h), 5.0)
    if r.code == ResponseCode.CONSUMER_NOT_ONLINE:
        return None
    assert r.code == ResponseCode.SUCCESS, r.remark
    return json.loads(r.body)


def _lag_and_inflight(client: BlockingRemotingClient, addr: str, group: str, name: str) -> tuple[int, int]:
    h = encode_header(GetConsumeStatsRequestHeader(consumerGroup=group, topic=name))
    r = client.invoke_sync(addr, RemotingCommand.request(RequestCode.GET_CONSUME_STATS, h), 5.0)
    assert r.code == ResponseCode.SUCCESS, r.remark
    table = ConsumeStats.decode(r.body).offset_table.values()
    return sum(w.broker_offset - w.consumer_offset for w in table), sum(
        w.pull_offset - w.consumer_offset for w in table
    )


def _in_background(fn: Any, *args: Any) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = fn(*args)
        except BaseException as e:  # surfaced by the test after join
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def test_simple_consumer_in_connection_list_and_consumer_progress(grpc_cluster, tmp_path):
    from support.mqadmin import parse_table, run_mqadmin

    c = grpc_cluster
    name, group = "AdminSimple", "admin_simple_cg"
    topic(c, name)
    sdk(endpoint(c), "produce", {"topic": name, "messages": [{"body": f"m{i}"} for i in range(5)]})
    held, acked = tmp_path / "held", tmp_path / "acked"
    steps = [
        {"op": "receive", "until": 5, "invisible_s": 120, "timeout_s": 60},
        {"op": "wait_file", "path": str(held)},
        {"op": "ack_held"},
        {"op": "wait_file", "path": str(acked)},
    ]
    t, out = _in_background(sdk, endpoint(c), "simple", {"topic": name, "group": group, "await_s": 2, "steps": steps})
    addr = c.brokers[0].address
    with BlockingRemotingClient() as client:
        try:
            wait_until(lambda: _lag_and_inflight(client, addr, group, name) == (5, 5), "5 in flight", timeout=60)
            conns = _connections(client, addr, group)
            assert conns is not None
            [conn] = conns["connectionSet"]
            assert conn["language"] == "PYTHON" and conn["version"] == version_ordinal(SDK_VERSION), conn
            assert conn["clientId"] and ":" in conn["clientAddr"]
            assert conns["consumeType"] == "CONSUME_ACTIVELY" and conns["messageModel"] == "CLUSTERING"
            assert name in conns["subscriptionTable"], conns
            assert conns["subscriptionTable"][name]["subString"] == "*"
            h = encode_header(GetConsumerListByGroupRequestHeader(consumerGroup=group))
            r = client.invoke_sync(addr, RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, h), 5.0)
            assert r.code == ResponseCode.SUCCESS and json.loads(r.body)["consumerIdList"] == [conn["clientId"]]

            # rmq-core admin consumer-progress: the lag and the in-flight column
            r = subprocess.run(
                [sys.executable, "-m", "rmq_core.cli", "admin", "consumer-progress", "-g", group, "-n", c.namesrv_addr],
                capture_output=True,
                text=True,
                env=subprocess_env(),
                timeout=60,
            )
            assert r.returncode == 0, (r.stdout, r.stderr)
            assert "In flight" in r.stdout and "total lag 5" in r.stdout, r.stdout
            rows = [ln.split() for ln in r.stdout.splitlines() if ln.startswith(name + " ")]
            assert len(rows) == 4 and sum(int(row[6]) for row in rows) == 5, r.stdout

            # Apache's mqadmin 4.9.7
            text = run_mqadmin(c.namesrv_addr, "consumerConnection", "-g", group)
            [mq_conn] = parse_table(text)
            assert (mq_conn["#Language"], mq_conn["#Version"]) == ("PYTHON", SDK_VERSION), text
            assert mq_conn["#ClientId"] == conn["clientId"], text
            assert "ConsumeType: CONSUME_ACTIVELY" in text and name in text, text
            text = run_mqadmin(c.namesrv_addr, "consumerProgress", "-g", group)
            assert "Diff Total: 5" in text, text

            held.write_text("")
            wait_until(lambda: _lag_and_inflight(client, addr, group, name) == (0, 0), "all acked", timeout=30)
        finally:
            held.write_text("")
            acked.write_text("")
            t.join(120)
        assert "error" not in out, out.get("error")
        received = out["result"]["steps"][0]["messages"]
        assert len(received) == 5
        # NotifyClientTermination: not online any more
        wait_until(lambda: _connections(client, addr, group) is None, "the consumer gone", timeout=10)


def test_push_consumer_in_connection_list(grpc_cluster):
    c = grpc_cluster
    name, group = "AdminPush", "admin_push_cg"
    topic(c, name)
    t, out = _in_background(sdk, endpoint(c), "push", {"topic": name, "group": group, "run_s": 15})
    addr = c.brokers[0].address
    with BlockingRemotingClient() as client:
        try:
            wait_until(lambda: _connections(client, addr, group) is not None, "the push consumer online", timeout=30)
            conns = _connections(client, addr, group)
            assert conns is not None and conns["consumeType"] == "CONSUME_PASSIVELY", conns
            assert [x["language"] for x in conns["connectionSet"]] == ["PYTHON"]
            assert set(conns["subscriptionTable"]) == {name}
        finally:
            t.join(60)
        assert "error" not in out, out.get("error")
        wait_until(lambda: _connections(client, addr, group) is None, "the consumer gone", timeout=10)
