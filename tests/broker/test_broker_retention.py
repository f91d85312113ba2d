"""The broker and the store's retention over real TCP: on a full disk (the store's DISK_FULL flag, set by the disk
check from an injected disk usage) every send path — the plain path (``put_send_requests``), the general path
(``put_messages``: a delayed send) and SEND_BATCH_MESSAGE — is answered SERVICE_NOT_AVAILABLE (14) with 4.9's remark
and stores nothing; back under the warning level, sends are stored again. DELETE_EXPIRED_COMMITLOG (329) arms the
manual deletion; the retention keys are read from broker.conf."""

from __future__ import annotations

import os
import time

import pytest

from rmq_core.broker import Broker, BrokerConfig
from rmq_core.message import Message
from rmq_core.message_encoding import encode_batch, properties_to_string
from rmq_core.remoting.codes import RequestCode, ResponseCode
from rmq_core.remoting.command import RemotingCommand
from rmq_core.store_clean_service import HOUR_MS, MAX_MANUAL_DELETE_FILE_TIMES

from support.send_helpers import SMALL_FILES, invoke, send_request, stored

BATCH = RequestCode.SEND_BATCH_MESSAGE
REMARK = (
    "service not available now. It may be caused by one of the following reasons: the broker's disk is full "
    "[CL:  0.91 CQ:  0.91 INDEX:  0.91], messages are put to the slave, message store has been shut down, etc."
)


class Disk:
    def __init__(self, ratio: float) -> None:
        self.ratio = ratio

    def __call__(self, path: str) -> float:
        return self.ratio


@pytest.fixture
def broker(tmp_path):
    cfg = BrokerConfig(listen_port=0, store_path_root_dir=str(tmp_path / "store"), **SMALL_FILES)
    with Broker(cfg) as b:
        yield b


def _sends(broker: Broker, client) -> dict[str, RemotingCommand]:
    """One send down each path: plain, general (a delayed message) and batch."""
    delayed = properties_to_string({"DELAY": "1"})
    return {
        "plain": invoke(client, broker, send_request("DiskTopic", b"plain")),
        "general": invoke(client, broker, send_request("DiskTopic", b"delayed", properties=delayed)),
        "batch": invoke(
            client,
            broker,
            send_request(
                "DiskTopic", encode_batch([Message("DiskTopic", b"b1"), Message("DiskTopic", b"b2")]), code=BATCH
            ),
        ),
    }


def test_a_full_disk_refuses_every_send_path_and_stores_nothing(broker, client):
    store = broker.controller.message_store
    ok = _sends(broker, client)
    assert {k: r.code for k, r in ok.items()} == dict.fromkeys(ok, ResponseCode.SUCCESS), {
        k: r.remark for k, r in ok.items()
    }
    check = store.clean_service.clean_commit_log_service
    disk = Disk(0.91)
    check.disk_usage = disk  # the broker's own 10 s check reads it too
    assert check.is_space_full()
    before = store.max_physical_offset
    refused = _sends(broker, client)
    for path, resp in refused.items():
        assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE, (path, resp.code, resp.remark)
        assert resp.remark == REMARK, path
    assert store.max_physical_offset == before  # nothing stored
    assert [m.body for m in stored(broker, "DiskTopic")] == [b"plain", b"b1", b"b2"]

    disk.ratio = 0.50
    assert not check.is_space_full()
    again = _sends(broker, client)
    assert {k: r.code for k, r in again.items()} == dict.fromkeys(again, ResponseCode.SUCCESS)
    assert [m.body for m in stored(broker, "DiskTopic")] == [b"plain", b"b1", b"b2", b"plain", b"b1", b"b2"]
    assert store.max_physical_offset > before


def test_delete_expired_commit_log_request_arms_the_manual_deletion(broker, client):
    store = broker.controller.message_store
    for i in range(40):  # 1 MiB CommitLog files: 40 x 60 KB spans 3 files
        resp = invoke(client, broker, send_request("OldTopic", bytes([65 + i % 26]) * 60_000))
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    store.flush()
    cl = os.path.join(store.root_dir, "commitlog")
    names = sorted(os.listdir(cl))
    assert len(names) >= 3
    old = time.time() - 80 * HOUR_MS / 1000
    for name in names[:-1]:
        os.utime(os.path.join(cl, name), (old, old))
    check = store.clean_service.clean_commit_log_service
    check.disk_usage = Disk(0.30)
    store.config.delete_when = str((time.localtime().tm_hour + 12) % 24)  # not now
    assert check.run() == 0
    resp = invoke(client, broker, RemotingCommand.request(RequestCode.DELETE_EXPIRED_COMMITLOG))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert check.manual_delete_file_several_times == MAX_MANUAL_DELETE_FILE_TIMES
    store.config.delete_commit_log_files_interval = 0
    assert store.clean_service.clean_files_periodically() == len(names) - 1
    assert sorted(os.listdir(cl)) == names[-1:]
    # a pull from the deleted range is told where the queue now begins
    min_offset = store.get_min_offset_in_queue("OldTopic", 0)
    assert min_offset > 0
    g = store.get_message("g", "OldTopic", 0, 0, 32)
    assert (g.status.name, g.next_begin_offset) == ("OFFSET_TOO_SMALL", min_offset)


def test_retention_keys_come_from_broker_conf():
    cfg = BrokerConfig.from_properties(
        {
            "deleteWhen": "01;13",
            "fileReservedTime": "48",
            "cleanResourceInterval": "5000",
            "diskMaxUsedSpaceRatio": "80",
            "deleteCommitLogFilesInterval": "0",
            "deleteConsumeQueueFilesInterval": "50",
            "cleanFileForciblyEnable": "false",
            "diskSpaceWarningLevelRatio": "95",
            "diskSpaceCleanForciblyRatio": "90",
            "deleteFileBatchMax": "3",
        }
    )
    assert cfg.extra == {}
    sc = cfg.to_store_config()
    assert (sc.delete_when, sc.file_reserved_time, sc.clean_resource_interval, sc.disk_max_used_space_ratio) == (
        "01;13",
        48,
        5000,
        80,
    )
    assert (sc.delete_commit_log_files_interval, sc.delete_consume_queue_files_interval) == (0, 50)
    assert sc.clean_file_forcibly_enable is False
    assert (sc.disk_space_warning_level_ratio, sc.disk_space_clean_forcibly_ratio, sc.delete_file_batch_max) == (
        95,
        90,
        3,
    )
    with pytest.raises(ValueError, match="delete_when"):
        BrokerConfig.from_properties({"deleteWhen": "four"}).to_store_config()
