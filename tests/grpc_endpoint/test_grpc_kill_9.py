"""Kill -9 of a broker process whose messages RocketMQ's 5.x Python SDK SimpleConsumer received over gRPC: three
acked, three received and not acked; after a restart over the same store (the consumer offsets not flushed since:
``flushConsumerOffsetInterval`` 60 s) each unacked one comes back once with delivery attempt 2 and no acked one
comes back. The broker is ``rmq-core serve`` (name server and broker in one process) with ``--grpc-port 0``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("grpc", reason="the rmq_core[grpc] extra (grpcio) is not installed")

from rmq_core.testing.topic_admin import create_topic

from support.grpc5_helpers import needs_sdk, sdk

pytestmark = [needs_sdk, pytest.mark.slow]

TOPIC, GROUP, INVISIBLE_S = "Kill9GrpcT", "kill9_grpc_cg", 10


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    if proc.stdout is not None:
        proc.stdout.close()


def _serve(root: Path, log: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    """A ``serve`` process over ``root``; (process, name server, gRPC endpoint) once it is up."""
    conf = root.parent / "broker.conf"
    conf.write_text("flushConsumerOffsetInterval=60000\nmappedFileSizeCommitLog=1048576\n")
    cmd = [sys.executable, "-m", "rmq_core.cli", "serve", "--dir", str(root), "--namesrv-port", "0", "--port", "0"]
    cmd += ["--grpc-port", "0", "-c", str(conf)]
    with open(log, "ab") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, start_new_session=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    assert line.startswith("rmq-core serve: name server "), line
    return proc, line.split("name server ", 1)[1].split(",", 1)[0], line.rsplit("gRPC ", 1)[1].strip()


def test_kill_9_unacked_come_back_once_acked_never(tmp_path):
    root, log = tmp_path / "store", tmp_path / "broker.log"
    proc, namesrv, ep = _serve(root, log)
    try:
        create_topic(namesrv, TOPIC, 2)
        messages = [{"body": f"k{i}"} for i in range(6)]
        sent = {s["message_id"] for s in sdk(ep, "produce", {"topic": TOPIC, "messages": messages})["sent"]}
        steps = [
            {"op": "receive", "until": 3, "max": 3, "invisible_s": INVISIBLE_S, "then": "ack", "timeout_s": 20},
            {"op": "receive", "until": 3, "max": 3, "invisible_s": INVISIBLE_S, "timeout_s": 20},  # not acked
        ]
        acked, held = sdk(ep, "simple", {"topic": TOPIC, "group": GROUP, "await_s": 2, "steps": steps})["steps"]
        acked_ids = {m["message_id"] for m in acked["messages"]}
        held_ids = {m["message_id"] for m in held["messages"]}
        assert len(acked_ids) == len(held_ids) == 3 and acked_ids | held_ids == sent
        _kill(proc)
        proc, namesrv, ep = _serve(root, log)
        steps = [
            {"op": "receive", "until": 3, "invisible_s": 30, "then": "ack", "timeout_s": 30},
            {"op": "receive", "until": 1, "invisible_s": 30, "timeout_s": 3},  # nothing more
        ]
        again, more = sdk(ep, "simple", {"topic": TOPIC, "group": GROUP, "await_s": 2, "steps": steps})["steps"]
        got = sorted((m["message_id"], m["attempt"]) for m in again["messages"] + more["messages"])
        assert got == sorted((mid, 2) for mid in held_ids), (got, held_ids, acked_ids)
    finally:
        _kill(proc)
