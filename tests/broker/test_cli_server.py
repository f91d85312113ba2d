"""``rmq-core serve`` / ``namesrv`` / ``broker`` / ``topic`` as processes: they start on embedded defaults, answer over
TCP, and on SIGTERM shut down cleanly with the store flushed and the configs persisted (read back after a restart)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.header import (
    QueryConsumerOffsetRequestHeader,
    SendMessageRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    encode_header,
)
from rmq_core.remoting.remoting_client import BlockingRemotingClient

CLI = [sys.executable, "-m", "rmq_core.cli"]


def _start(args: list[str], pattern: str) -> tuple[subprocess.Popen[str], re.Match[str]]:
    proc = subprocess.Popen(CLI + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(pattern, line)
    if m is None:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        pytest.fail(f"{args[0]} did not start: {line!r}\n{err[-3000:]}")
    return proc, m


def _stop(proc: subprocess.Popen[str]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def _send(client: BlockingRemotingClient, addr: str, topic: str, body: bytes) -> RemotingCommand:
    h = SendMessageRequestHeader(
        producerGroup="p",
        topic=topic,
        defaultTopic="TBW102",
        defaultTopicQueueNums=4,
        queueId=0,
        sysFlag=0,
        bornTimestamp=int(time.time() * 1000),
        flag=0,
        properties="TAGS\x01TagA\x02",
    )
    return client.invoke_sync(
        addr, RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, encode_header(h, short_names=True), body)
    )


SMALL_FILES_CONF = "mappedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=20000\n"  # not 1 GiB per test


def _small_conf(tmp_path, extra: str = "") -> str:
    conf = tmp_path / "broker.conf"
    conf.write_text(SMALL_FILES_CONF + extra)
    return str(conf)


def test_serve_persists_on_sigterm_and_reads_back_after_restart(tmp_path) -> None:
    store = str(tmp_path / "store")
    args = ["serve", "-c", _small_conf(tmp_path), "--dir", store, "--namesrv-port", "0", "--port", "0"]
    proc, m = _start(args, r"name server (\S+), broker \S+@(\S+),")
    broker = m.group(2)
    with BlockingRemotingClient() as c:
        r = _send(c, broker, "CliTopic", b"hello")
        assert r.code == ResponseCode.SUCCESS, r.remark
        upd = UpdateConsumerOffsetRequestHeader(consumerGroup="g1", topic="CliTopic", queueId=0, commitOffset=1)
        r = c.invoke_sync(broker, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, encode_header(upd)))
        assert r.code == ResponseCode.SUCCESS
    assert _stop(proc) == 0
    with open(os.path.join(store, "config", "consumerOffset.json")) as f:
        text = f.read()
    assert '"CliTopic@g1"' in text and re.search(r"\b0\s*:\s*1\b", text), text  # fastjson: unquoted queue id
    with open(os.path.join(store, "config", "topics.json")) as f:
        assert "CliTopic" in json.load(f)["topicConfigTable"]

    proc, m = _start(args, r"name server (\S+), broker \S+@(\S+),")
    broker = m.group(2)
    try:
        with BlockingRemotingClient() as c:
            q = QueryConsumerOffsetRequestHeader(consumerGroup="g1", topic="CliTopic", queueId=0)
            r = c.invoke_sync(broker, RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, encode_header(q)))
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "1"
    finally:
        assert _stop(proc) == 0


def test_namesrv_broker_and_topic_commands(tmp_path) -> None:
    ns_proc, m = _start(["namesrv", "--port", "0"], r"listening on (\S+)")
    namesrv = m.group(1)
    try:
        br_proc, m = _start(
            [
                "broker",
                "-c",
                _small_conf(tmp_path),
                "-n",
                namesrv,
                "--port",
                "0",
                "--dir",
                str(tmp_path / "b"),
                "--name",
                "broker-x",
            ],
            r"broker-x@(\S+) ",
        )
        try:
            out = subprocess.run(
                CLI + ["topic", "create", "OrdersTopic", "-n", namesrv, "--queues", "3"],
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert out.returncode == 0, out.stderr
            assert "created OrdersTopic on broker-x" in out.stdout
            deadline = time.time() + 10
            while True:  # the broker re-registers with the name server right after a topic is created
                out = subprocess.run(CLI + ["topic", "list", "-n", namesrv], capture_output=True, text=True, timeout=30)
                if "OrdersTopic" in out.stdout.split() or time.time() > deadline:
                    break
                time.sleep(0.2)
            assert "OrdersTopic" in out.stdout.split(), out.stdout
            bad = subprocess.run(
                CLI + ["topic", "create", "bad topic", "-n", namesrv], capture_output=True, text=True, timeout=30
            )
            assert bad.returncode == 2 and "illegal characters" in bad.stderr
        finally:
            assert _stop(br_proc) == 0
    finally:
        assert _stop(ns_proc) == 0


def test_broker_reads_a_rocketmq_broker_conf(tmp_path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        SMALL_FILES_CONF + "brokerClusterName=ConfCluster\nbrokerName=broker-conf\nbrokerId=0\ndeleteWhen=04\n"
        f"storePathRootDir={tmp_path / 'store'}\nlistenPort=0\nflushDiskType=SYNC_FLUSH\n"
    )
    proc, m = _start(["broker", "-c", str(conf)], r"broker-conf@(\S+) cluster=ConfCluster")
    try:
        with BlockingRemotingClient() as c:
            assert _send(c, m.group(1), "ConfTopic", b"x").code == ResponseCode.SUCCESS
    finally:
        assert _stop(proc) == 0
    assert os.path.isdir(tmp_path / "store" / "commitlog")


def test_send_and_consume_commands(tmp_path) -> None:
    proc, m = _start(
        ["serve", "-c", _small_conf(tmp_path), "--dir", str(tmp_path / "store"), "--namesrv-port", "0", "--port", "0"],
        r"name server (\S+), broker \S+@(\S+),",
    )
    namesrv = m.group(1)
    try:
        out = subprocess.run(
            CLI
            + [
                "send",
                "CliFlow",
                "hello",
                "-n",
                namesrv,
                "--tags",
                "TagA",
                "--keys",
                "k{i}",
                "--property",
                "region=eu",
                "--count",
                "3",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.count("SEND_OK") == 3
        out = subprocess.run(
            CLI + ["send", "CliFlow", "other", "-n", namesrv, "--tags", "TagB"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        out = subprocess.run(
            CLI
            + ["consume", "CliFlow", "-n", namesrv, "-e", "TagA", "--from-first", "--count", "3", "--timeout", "30"],
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        lines = [ln for ln in out.stdout.splitlines() if ln.startswith("CliFlow ")]
        assert len(lines) == 3 and all("tags=TagA" in ln and "body='hello'" in ln for ln in lines), out.stdout
        assert sorted(ln.split("keys=")[1].split()[0] for ln in lines) == ["k0", "k1", "k2"]
        bad = subprocess.run(
            CLI + ["send", "bad topic", "x", "-n", namesrv], capture_output=True, text=True, timeout=60
        )
        assert bad.returncode == 1 and "FAILED" in bad.stderr
    finally:
        assert _stop(proc) == 0


def test_broker_conf_store_settings_reach_the_store(tmp_path) -> None:
    from rmq_core.broker import BrokerConfig

    conf = tmp_path / "broker.conf"
    conf.write_text(
        "maxTransferCountOnMessageInMemory=400\nmaxTransferBytesOnMessageInMemory=1048576\n"
        "accessMessageInMemoryMaxRatio=30\nflushDiskType=SYNC_FLUSH\n"
    )
    cfg = BrokerConfig.from_properties_file(conf)
    store = cfg.to_store_config()
    assert (
        store.max_transfer_count_on_message_in_memory,
        store.max_transfer_bytes_on_message_in_memory,
        store.access_message_in_memory_max_ratio,
        store.flush_disk_type,
    ) == (400, 1048576, 30, "SYNC_FLUSH")
