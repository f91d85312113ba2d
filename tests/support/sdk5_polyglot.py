"""RocketMQ's 5.x Go and Node.js SDKs (compat/go5, compat/node5) as subprocess drivers for the gRPC interop tests:
``go_driver()`` builds compat/go5 (``go build``: modules pinned by go.mod/go.sum, the Go build cache makes a rebuild
a no-op) into build/sdk5/; ``node_driver()`` runs ``npm ci`` in compat/node5 when its lock changed (a stamp beside
node_modules). Both steps are idempotent and need no stdin; a missing toolchain skips with the reason.
``run_driver(cmd, endpoint, config)`` runs one driver (all its scenarios in one process) and returns its RESULT json.
``make_topics(namesrv, broker_addr, topics, fifo_groups)`` creates typed topics (``message.type``) and orderly groups
over remoting (UPDATE_AND_CREATE_TOPIC with Apache 5's ``attributes`` field), the same on rmq_core and Apache.
Both builds are one ``sdk_driver(SdkBuild)``: GO and NODE hold what differs (tools, build step, driver, cache stamp)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rmq_core.client.blocking_mq_client_api import BlockingMQClientAPI
from rmq_core.common.subscription_group_config import SubscriptionGroupConfig
from rmq_core.remoting import RemotingCommand
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.remoting_client import BlockingRemotingClient

ROOT = Path(__file__).resolve().parents[2]
GO_DIR = ROOT / "compat" / "go5"
NODE_DIR = ROOT / "compat" / "node5"
BUILD_DIR = ROOT / "build" / "sdk5"
QUEUES = 4


@dataclass(frozen=True)
class SdkBuild:
    """How one SDK's driver is built and run. ``build`` and ``driver`` are argv templates: ``{tool}`` for each of
    ``tools`` (found on PATH), ``{build}`` for BUILD_DIR, ``{sdk}`` for ``sdk_dir``. ``lock``: the file whose sha256,
    stamped at ``stamp`` after a build, makes the next one a no-op (None: the toolchain's own cache does)."""

    sdk_dir: Path
    tools: tuple[str, ...]
    missing: str  # the skip reason where a tool is not on PATH
    step: str  # the build step, as its failure names it
    build: tuple[str, ...]
    timeout: float
    driver: tuple[str, ...]
    lock: str | None = None
    stamp: str | None = None


GO = SdkBuild(
    sdk_dir=GO_DIR,
    tools=("go",),
    missing="Go toolchain not on PATH (the Go 5.x SDK driver needs `go`)",
    step="go build",
    build=("{go}", "build", "-mod=readonly", "-o", "{build}/sdk5-go", "."),  # modules pinned by go.mod/go.sum
    timeout=900,
    driver=("{build}/sdk5-go",),
)
NODE = SdkBuild(
    sdk_dir=NODE_DIR,
    tools=("node", "npm"),
    missing="node/npm not on PATH (the Node.js 5.x SDK driver needs them)",
    step="npm ci",
    build=("{npm}", "ci", "--no-audit", "--no-fund", "--ignore-scripts"),
    timeout=600,
    driver=("{node}", "{sdk}/driver.js"),
    lock="package-lock.json",
    stamp="node_modules/.rmq-core-lock-sha256",
)


def sdk_driver(sdk: SdkBuild) -> list[str]:
    """Build ``sdk``'s driver where needed (idempotent, no stdin) and return the argv that runs it."""
    found = {tool: shutil.which(tool) for tool in sdk.tools}
    if None in found.values():
        pytest.skip(sdk.missing)
    names = {**found, "build": str(BUILD_DIR), "sdk": str(sdk.sdk_dir)}
    stamp = digest = None
    if sdk.lock is not None and sdk.stamp is not None:
        stamp, digest = sdk.sdk_dir / sdk.stamp, hashlib.sha256((sdk.sdk_dir / sdk.lock).read_bytes()).hexdigest()
    if stamp is None or not stamp.exists() or stamp.read_text() != digest:
        BUILD_DIR.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(
            [arg.format(**names) for arg in sdk.build],
            cwd=sdk.sdk_dir,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=sdk.timeout,
        )
        assert r.returncode == 0, f"{sdk.step} {sdk.sdk_dir.relative_to(ROOT)} failed:\n{r.stderr[-4000:]}"
        if stamp is not None and digest is not None:
            stamp.write_text(digest)
    return [arg.format(**names) for arg in sdk.driver]


def go_driver() -> list[str]:
    return sdk_driver(GO)


def node_driver() -> list[str]:
    return sdk_driver(NODE)


def run_driver(cmd: list[str], endpoint: str, config: dict[str, Any], workdir: Path, timeout: float = 120) -> dict:
    env = {
        **os.environ,
        "HOME": str(workdir),  # the SDKs' log files (~/logs/rocketmqlogs) stay in the test's directory
        "rocketmq.client.logRoot": str(workdir / "logs"),
    }
    r = subprocess.run(
        [*cmd, endpoint, json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
        cwd=workdir,
    )
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    assert r.returncode == 0 and lines, (
        f"driver {cmd[-1]} failed ({r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    )
    return json.loads(lines[-1][len("RESULT ") :])


def make_topics(namesrv: str, broker_addr: str, topics: dict[str, str], orderly_groups: list[str]) -> None:
    """Each ``{topic: message_type}`` with QUEUES queues on ``broker_addr`` (routed before this returns), and each
    of ``orderly_groups`` as a FIFO (consumeMessageOrderly) subscription group."""
    client = BlockingRemotingClient()
    try:
        for name, message_type in topics.items():
            fields = {
                "topic": name,
                "defaultTopic": "TBW102",
                "readQueueNums": QUEUES,
                "writeQueueNums": QUEUES,
                "perm": 6,
                "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": 0,
                "order": False,
                "attributes": f"+message.type={message_type}",
            }
            r = client.invoke_sync(broker_addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields))
            assert r.code == ResponseCode.SUCCESS, f"create {name}: {r.code} {r.remark}"
    finally:
        client.close()
    with BlockingMQClientAPI(namesrv, 5000) as api:
        for group in orderly_groups:
            api.create_subscription_group(broker_addr, SubscriptionGroupConfig(group, consume_message_orderly=True))
        for name in topics:
            api.wait_for_route(name, lambda r: any(q.read_queue_nums == QUEUES for q in r.queue_datas), 30.0)
