"""Running RocketMQ's 5.x Python SDK (PyPI rocketmq-python-client) against rmq_core's gRPC endpoint: the SDK runs in
its own venv (its top-level ``rocketmq`` package is not the C++ client's of the same name): ``./dev`` makes
``.venv-rmq5``; ``RMQ_CORE_ROCKETMQ5_PYTHON`` names another interpreter. ``sdk()`` runs tests/grpc_endpoint/
sdk5_driver.py there; ``pull_all()`` reads a topic back with rmq_core's 4.x PullConsumer; ``receive_request()`` builds
the ReceiveMessageRequest that raw grpcio / HTTP/2 clients (tests, benches/bench_grpc_hostile.py) send."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rmq_core.client.consumer.pull_consumer import PullConsumer
from rmq_core.client.pull_result import PullStatus
from rmq_core.common.topic_config import TopicConfig
from rmq_core.message import MessageExt, MessageQueue

from support.admin_helpers import add_topic_config, wait_for_route
from support.client_helpers_e2e import cluster

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "tests" / "grpc_endpoint" / "sdk5_driver.py"
SDK_PYTHON = os.environ.get("RMQ_CORE_ROCKETMQ5_PYTHON") or str(ROOT / ".venv-rmq5" / "bin" / "python")
QUEUES = 4

# the mark of every test that runs the SDK
needs_sdk = pytest.mark.skipif(
    not os.path.exists(SDK_PYTHON), reason=f"RocketMQ's 5.x Python SDK venv not found ({SDK_PYTHON}): ./dev setup"
)


def sdk(
    endpoint: str, scenario: str, args: dict[str, Any], timeout: float = 90, env: dict[str, str] | None = None
) -> dict[str, Any]:
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **(env or {})}
    r = subprocess.run(
        [SDK_PYTHON, str(DRIVER), endpoint, scenario, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    assert r.returncode == 0 and lines, f"SDK driver failed ({r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return json.loads(lines[-1][len("RESULT ") :])


def topic(c: Any, name: str, message_type: str | None = None) -> None:
    attributes = {"message.type": message_type} if message_type else None
    add_topic_config(c.brokers[0], TopicConfig(name, QUEUES, QUEUES, attributes=attributes))
    wait_for_route(c.namesrv_addr, name)


def pull_all(c: Any, name: str, group: str = "grpc_pull_cg") -> dict[int, list[MessageExt]]:
    """Every message of ``name``, per queue, read with rmq_core's 4.x PullConsumer."""
    pc = PullConsumer(group, namesrv_addr=c.namesrv_addr)
    pc.start()
    try:
        out: dict[int, list[MessageExt]] = {}
        for q in range(QUEUES):
            offset, got = 0, []
            while True:
                r = pc.pull(MessageQueue(name, "broker-0", q), "*", offset, 32)
                if r.pull_status != PullStatus.FOUND:
                    break
                got.extend(r.msg_found_list)
                offset = r.next_begin_offset
            out[q] = got
        return out
    finally:
        pc.shutdown()


def flat(per_queue: dict[int, list[MessageExt]]) -> list[MessageExt]:
    return [m for q in sorted(per_queue) for m in per_queue[q]]


@contextlib.contextmanager
def grpc_cluster(tmp_path: Any, **settings: Any) -> Iterator[Any]:
    """A name server and one broker serving gRPC on a free port (transaction checks every 0.5 s after 1 s)."""
    with cluster(tmp_path, grpc_port=0, transaction_check_interval=500, transaction_timeout=1000, **settings) as c:
        yield c


def endpoint(c: Any) -> str:
    addr = c.brokers[0].controller.grpc_address
    assert addr is not None
    return addr


def receive_request(
    group: str, topic: str, *, batch: int = 32, invisible_ms: int = 10_000, poll_ms: int = 5_000
) -> Any:
    """A ReceiveMessageRequest as the 5.x SDKs send it: up to ``batch`` messages of any queue (id -1) of ``topic``,
    tag ``*``, invisible ``invisible_ms``, long-polling up to ``poll_ms``. (protobuf is imported here, on first use:
    the rmq_core[grpc] extra may be missing where this module is imported.)"""
    from rmq_core.broker.grpc.messaging_v2 import V2

    req = V2.ReceiveMessageRequest(batch_size=batch)
    req.group.name, req.message_queue.topic.name, req.message_queue.id = group, topic, -1
    req.filter_expression.expression = "*"
    req.invisible_duration.FromMilliseconds(invisible_ms)
    req.long_polling_timeout.FromMilliseconds(poll_ms)
    return req
