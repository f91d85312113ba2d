"""UPDATE_BROKER_CONFIG (25) and GET_BROKER_CONFIG (26) as a hostile client sends them, raw frames to a real broker:
only live-tunable keys change, each range-checked, the whole request atomic; nothing unknown is kept; a persisted
file never splits start-only settings; the answer masks secrets and fits its frame."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from rmq_core.broker.broker_configuration import FILE_NAME
from rmq_core.broker.remote_config_policy import LIVE_TUNABLE, MASK, MAX_UPDATE_BODY
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.remoting.remoting_client import BlockingRemotingClient

from support.pull_helpers import running_broker


def _update(client: BlockingRemotingClient, addr: str, body: bytes) -> RemotingCommand:
    return client.invoke_sync(addr, RemotingCommand.request(RequestCode.UPDATE_BROKER_CONFIG, {}, body))


def _shown(client: BlockingRemotingClient, addr: str) -> dict[str, str]:
    r = client.invoke_sync(addr, RemotingCommand.request(RequestCode.GET_BROKER_CONFIG, {}))
    assert r.code == ResponseCode.SUCCESS
    return dict(line.split("=", 1) for line in bytes(r.body or b"").decode().splitlines())


def _persisted(tmp_path: Path) -> str | None:
    path = tmp_path / "broker" / "config" / FILE_NAME
    return path.read_text() if path.exists() else None


# each line is one request a hostile client sent; each must be refused and change nothing (issue 28's findings)
REFUSED = [
    "brokerIP1=10.9.9.9",  # every route would point elsewhere
    "namesrvAddr=10.9.9.9:9876",  # the broker would register elsewhere
    "brokerRole=SLAVE",
    "storePathRootDir=/tmp/elsewhere",
    "haListenPort=22",
    "listenPort=1",
    "brokerName=evil",
    "brokerClusterName=evil",
    "brokerId=1",
    "mappedFileSizeCommitLog=1",
    "timerWheelEnable=false",  # start-only: read when the store opens
    "rocketmqHome=/tmp",  # Apache's black list (CVE-2023-33246)
    "brokerConfigPath=/tmp/x",
    "configBlackList=none",
    "someUnknownKey=1",  # unknown keys are never kept
    "brokerPermission=8",  # out of range
    "brokerPermission=-1",
    "diskMaxUsedSpaceRatio=99",
    "defaultTopicQueueNums=0",
    "shortPollingTimeMills=99999999999999999999999",
    "autoCreateTopicEnable=yes",  # not true/false
    "deleteWhen=25",
]


@pytest.mark.parametrize("line", REFUSED)
def test_a_forbidden_or_invalid_key_is_refused_and_changes_nothing(tmp_path: Path, line: str) -> None:
    with running_broker(tmp_path) as broker, BlockingRemotingClient() as client:
        before = _shown(client, broker.address)
        # the request also carries a valid live key: the whole request is refused, that key too
        r = _update(client, broker.address, f"filterSupportRetry=true\n{line}\n".encode())
        assert r.code == ResponseCode.NO_PERMISSION, r.remark
        assert line.split("=", 1)[0] in (r.remark or "")
        assert _shown(client, broker.address) == before
        assert broker.config.filter_support_retry is False
        assert _persisted(tmp_path) is None


def test_live_keys_apply_at_once_persist_and_reach_the_store(tmp_path: Path) -> None:
    with running_broker(tmp_path) as broker, BlockingRemotingClient() as client:
        r = _update(client, broker.address, b"fileReservedTime=5\ndeleteWhen=03;15\nbrokerPermission=4\n")
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert broker.config.file_reserved_time == 5 and broker.config.broker_permission == 4
        store_config = broker.controller.message_store.config
        assert store_config.file_reserved_time == 5 and store_config.delete_when == "03;15"
        shown = _shown(client, broker.address)
        assert shown["fileReservedTime"] == "5" and shown["deleteWhen"] == "03;15"
    assert _persisted(tmp_path) == "brokerPermission=4\ndeleteWhen=03;15\nfileReservedTime=5\n"
    with running_broker(tmp_path) as broker:
        assert broker.config.file_reserved_time == 5
        assert broker.controller.message_store.config.file_reserved_time == 5


def test_every_live_key_round_trips_its_bounds(tmp_path: Path) -> None:
    """Each allow-listed key takes its low and high bound (so the ranges are not wider than the fields can hold)."""
    with running_broker(tmp_path) as broker, BlockingRemotingClient() as client:
        for key, spec in LIVE_TUNABLE.items():
            values = (
                ["true", "false"] if spec.kind is bool else ["04;16"] if spec.kind is str else [spec.low, spec.high]
            )
            for value in values:
                r = _update(client, broker.address, f"{key}={value}\n".encode())
                assert r.code == ResponseCode.SUCCESS, (key, value, r.remark)
                assert _shown(client, broker.address)[key] == str(value)
            if spec.kind is int:
                r = _update(client, broker.address, f"{key}={spec.high + 1}\n".encode())
                assert r.code == ResponseCode.NO_PERMISSION and "out of range" in (r.remark or "")


def test_an_oversized_update_is_refused_unread(tmp_path: Path) -> None:
    with running_broker(tmp_path) as broker, BlockingRemotingClient() as client:
        body = b"filterSupportRetry=true\n" + b"#" * MAX_UPDATE_BODY
        r = _update(client, broker.address, body)
        assert r.code == ResponseCode.NO_PERMISSION and str(MAX_UPDATE_BODY) in (r.remark or "")
        assert broker.config.filter_support_retry is False


def test_a_failed_persist_reverts_the_update(tmp_path: Path) -> None:
    with running_broker(tmp_path) as broker, BlockingRemotingClient() as client:
        assert _update(client, broker.address, b"slaveReadEnable=true\n").code == ResponseCode.SUCCESS
        tmp = tmp_path / "broker" / "config" / (FILE_NAME + ".tmp")
        tmp.mkdir()  # the persist's temporary file cannot be written: an I/O error, as a full disk gives
        r = _update(client, broker.address, b"slaveReadEnable=false\nautoCreateTopicEnable=false\n")
        assert r.code == ResponseCode.SYSTEM_ERROR and "nothing changed" in (r.remark or "")
        assert broker.config.slave_read_enable is True and broker.config.auto_create_topic_enable is True
        assert broker.controller.configuration.updated == {"slaveReadEnable": "true"}
        tmp.rmdir()


def test_a_persisted_start_only_key_is_ignored_at_start(tmp_path: Path, caplog: Any) -> None:
    """A file written by an older rmq_core (which persisted any key) cannot move the broker's port, root or role after
    its store and server were built: those keys are left out with a warning; the live ones still apply."""
    config_dir = tmp_path / "broker" / "config"
    os.makedirs(config_dir)
    (config_dir / FILE_NAME).write_text(
        "brokerRole=SLAVE\nstorePathRootDir=/tmp/elsewhere\nhaListenPort=1\njunk=" + "x" * 100_000 + "\n"
        "slaveReadEnable=true\n"
    )
    with caplog.at_level(logging.WARNING), running_broker(tmp_path) as broker:
        assert broker.config.broker_role == "ASYNC_MASTER" and broker.config.slave_read_enable is True
        assert broker.config.store_path_root_dir == str(tmp_path / "broker")
        assert "junk" not in broker.config.extra
    warned = [r.getMessage() for r in caplog.records if "set it in broker.conf" in r.getMessage()]
    assert len(warned) == 4 and all(len(m) < 600 for m in warned)
    assert _persisted(tmp_path) == "slaveReadEnable=true\n"  # rewritten at start without the ignored keys
    assert "brokerRole=SLAVE" in (tmp_path / "broker" / "config" / (FILE_NAME + ".bak")).read_text()


def test_get_broker_config_masks_secrets_and_fits_its_frame(tmp_path: Path) -> None:
    secret_user = '{"username":"rocketmq","password":"12345"}'
    with (
        running_broker(tmp_path) as broker,
        BlockingRemotingClient() as client,
    ):
        broker.config.extra.update(
            {"initAuthenticationUser": secret_user, "secretKey": "s3cr3t", "hugeValue": "v" * 5_000_000}
        )
        broker.config.extra.update({f"k{i}": "y" * 4000 for i in range(400)})  # 1.6 MB of settings
        r = client.invoke_sync(broker.address, RemotingCommand.request(RequestCode.GET_BROKER_CONFIG, {}))
        text = bytes(r.body or b"").decode()
        assert r.code == ResponseCode.SUCCESS and len(text) <= 1 << 20
        assert "12345" not in text and "s3cr3t" not in text
        assert f"initAuthenticationUser={MASK}\n" in text and f"secretKey={MASK}\n" in text
        assert "hugeValue=<5000000 characters, not shown>\n" in text
        assert "brokerName=broker-a\n" in text  # the broker's own settings come first
