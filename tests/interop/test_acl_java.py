"""Apache RocketMQ's Java 4.9.7 client signing with ``AclClientRPCHook`` (compat/java's Produce and PullConsume with
``--access-key/--secret-key``) against rmq_core's broker with plain_acl.yml, and the same programs against Apache
4.9.7's broker with the same file and ``aclEnable=true`` as the control: allowed sends and pulls succeed, a send
without PUB and an unsigned send are refused with the same reason on both.
Marked ``compat_java`` and ``apache_broker`` (needs java and mvn).
"""

from __future__ import annotations

import os
import subprocess

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.namesrv import NameServer

from support.acl_helpers import GROUP_A, PLAIN_ACL_YML, TOPIC_A, TOPIC_B, USER
from support.apache_rocketmq import ApacheRocketMQ
from support.java_compat import java_command, parse_lines, require_java

pytestmark = [pytest.mark.compat_java, pytest.mark.apache_broker]
SIGNED = ["--access-key", USER.access_key, "--secret-key", USER.secret_key]


def _java(main: str, args: list[object], log_dir: str) -> tuple[int, list[dict]]:
    proc = subprocess.run(
        java_command(main, args, log_dir), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=90
    )
    return proc.returncode, parse_lines(main, proc.stdout, proc.stderr)


def _scenario(namesrv: str, log_dir: str) -> dict[str, object]:
    """What the Java client sees: the allowed sends and pull, and the two refusals' reasons."""
    out: dict[str, object] = {}
    rc, lines = _java("Produce", ["--namesrv", namesrv, "--topic", TOPIC_A, "--count", 3, *SIGNED], log_dir)
    out["signed sends"] = (rc, [ln["status"] for ln in lines if ln["event"] == "send"])
    for name, args in (
        ("send without PUB", ["--topic", TOPIC_B, "--count", 1, *SIGNED]),
        ("unsigned send", ["--topic", TOPIC_A, "--count", 1]),
    ):
        rc, lines = _java("Produce", ["--namesrv", namesrv, *args], log_dir)
        errors = [ln["trace"] for ln in lines if ln["event"] == "error"]
        reasons = [
            r
            for r in ("No default permission for topic:aclTopicB", "No accessKey is configured")
            if any(r in e for e in errors)
        ]
        out[name] = (rc, reasons)
    rc, lines = _java(
        "PullConsume",
        [
            "--namesrv",
            namesrv,
            "--topic",
            TOPIC_A,
            "--group",
            GROUP_A,
            "--mode",
            "assign",
            "--expect",
            3,
            "--timeout-ms",
            20000,
            "--linger-ms",
            200,
            *SIGNED,
        ],
        log_dir,
    )
    out["signed pull"] = (rc, sorted(ln["body"] for ln in lines if ln["event"] == "msg"))
    return out


def test_java_acl_client_same_on_rmq_core_and_apache(tmp_path):
    require_java()
    expected = {
        "signed sends": (0, ["SEND_OK"] * 3),
        "send without PUB": (1, ["No default permission for topic:aclTopicB"]),
        "unsigned send": (1, ["No accessKey is configured"]),
        "signed pull": (0, ["body-0", "body-1", "body-2"]),
    }
    apache = ApacheRocketMQ(str(tmp_path / "apache"), extra_broker_conf={"aclEnable": "true"})
    os.makedirs(os.path.join(apache.home, "conf"), exist_ok=True)
    with open(os.path.join(apache.home, "conf", "plain_acl.yml"), "w", encoding="utf-8") as f:
        f.write(PLAIN_ACL_YML)
    apache.start()
    try:
        on_apache = _scenario(apache.namesrv_addr, str(tmp_path / "log-apache"))
    finally:
        apache.stop()
    assert on_apache == expected  # the control: Apache's broker enforces the file as the test expects

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
    try:
        with Broker(cfg):
            assert _scenario(ns.address, str(tmp_path / "log-rmq")) == expected
    finally:
        ns.shutdown()
