"""``rmq-core store verify|inspect`` as processes, on stores of any mapped file size: sizes taken from the files or from
``-c broker.conf``, stores written by rmq_core (64 KiB and 16 MiB CommitLog files) and by Apache RocketMQ 4.9.7 (16 MiB
files, 120,000-byte ConsumeQueue files), read-only (the store's bytes are unchanged), and a corrupt CommitLog record or
ConsumeQueue unit reported with its file and offset."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys

import pytest

from rmq_core.format.message import record_layout
from rmq_core.message import Message
from rmq_core.store import MessageStore, StoreConfig

from support.helpers import CQ_SIZE, subprocess_env

CLI = [sys.executable, "-m", "rmq_core.cli"]
BACKENDS = ["rust", "python"]


def _run(args: list[str], backend: str = "rust") -> subprocess.CompletedProcess[str]:
    return subprocess.run(CLI + args, capture_output=True, text=True, env=subprocess_env(backend), timeout=300)


def _write(root: str, cl_size: int, cq_size: int, n: int, body: int, queues: int = 4) -> list[tuple[int, int]]:
    """n messages through MessageStore; returns (physical offset, size) of each."""
    out = []
    with MessageStore(
        root, StoreConfig(mapped_file_size_commit_log=cl_size, mapped_file_size_consume_queue=cq_size)
    ) as s:
        for i in range(0, n, 100):
            batch = [
                (Message("VerifyT", bytes([65 + j % 26]) * body, tags="t", keys=f"k{i + j}"), j % queues)
                for j in range(min(100, n - i))
            ]
            out += [(r.commitlog_offset, r.wrote_bytes) for r in s.put_messages(batch)]
        s.flush()
    return out


def _digest(root: str) -> str:
    h = hashlib.sha256()
    for d, _dirs, files in sorted(os.walk(root)):
        for f in sorted(files):
            p = os.path.join(d, f)
            h.update(p.encode())
            with open(p, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


def _verified(out: str) -> tuple[int, int, int]:
    m = re.search(r"verified ([\d,]+) records in (\d+) commitlog files .* and ([\d,]+) units in", out)
    assert m, out
    return int(m[1].replace(",", "")), int(m[2]), int(m[3].replace(",", ""))


@pytest.mark.parametrize("backend", BACKENDS)
def test_small_files_sizes_from_the_files(tmp_path, backend):
    root = str(tmp_path / "s")
    _write(root, 64 * 1024, CQ_SIZE, 2000, 100)
    before = _digest(root)
    r = _run(["store", "verify", root], backend)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "commitlog file size 64 KiB (65,536 bytes), consumequeue file size 2,000 bytes, from files" in r.stdout
    records, files, units = _verified(r.stdout)
    assert (records, units) == (2000, 2000) and files > 5
    r = _run(["store", "inspect", root], backend)
    assert r.returncode == 0, r.stderr
    assert "commitlog file size: 64 KiB" in r.stdout and "sizes from: files" in r.stdout
    for q in range(4):
        assert f"consumequeue VerifyT/{q}: offsets [0, 500)" in r.stdout
    assert _digest(root) == before  # read-only: nothing written, no lock, no recovery


def test_sixteen_mib_files_and_broker_conf(tmp_path):
    root = str(tmp_path / "s16")
    _write(root, 16 << 20, 300_000 * 20, 18_000, 1000)
    assert len(os.listdir(os.path.join(root, "commitlog"))) == 2
    r = _run(["store", "verify", root])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "commitlog file size 16 MiB" in r.stdout
    assert _verified(r.stdout) == (18_000, 2, 18_000)

    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"storePathRootDir={root}\nmappedFileSizeCommitLog={16 << 20}\nmappedFileSizeConsumeQueue=6000000\n"
    )
    r = _run(["store", "verify", "-c", str(conf)])  # the directory from the conf
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"from {conf}" in r.stdout and _verified(r.stdout) == (18_000, 2, 18_000)

    conf.write_text(f"storePathRootDir={root}\n")  # Apache's default 1 GiB: the broker would refuse these files
    r = _run(["store", "verify", "-c", str(conf)])
    assert r.returncode == 1
    assert "mappedFileSizeCommitLog=1,073,741,824 but the CommitLog files are 16,777,216 bytes" in r.stdout
    r = _run(["store", "inspect", root, "-c", str(conf)])
    assert r.returncode == 0 and "warning: " in r.stdout and "mappedFileSizeCommitLog=1,073,741,824" in r.stdout


@pytest.mark.parametrize("backend", BACKENDS)
def test_corruption_reported_with_file_and_offset(tmp_path, backend):
    root = str(tmp_path / "c")
    size = 64 * 1024
    placed = _write(root, size, CQ_SIZE, 1000, 100)
    # a body byte of a record in the third file: its CRC no longer matches
    phy, rec_len = next((o, n) for o, n in placed if o >= 2 * size + 1000)
    start = phy // size * size
    name = f"{start:020d}"
    with open(os.path.join(root, "commitlog", name), "r+b") as f:
        f.seek(phy - start)
        body_pos = record_layout(f.read(rec_len), 0, rec_len)[4]
        f.seek(phy - start + body_pos + 7)
        b = f.read(1)
        f.seek(phy - start + body_pos + 7)
        f.write(bytes([b[0] ^ 0xFF]))
    # a ConsumeQueue unit of queue 1 pointing into the middle of a record
    with open(os.path.join(root, "consumequeue", "VerifyT", "1", f"{0:020d}"), "r+b") as f:
        f.seek(5 * 20)
        f.write((placed[21][0] + 3).to_bytes(8, "big"))
    before = _digest(root)
    r = _run(["store", "verify", root], backend)
    assert r.returncode == 1, r.stdout
    crc = [ln for ln in r.stdout.splitlines() if "body CRC" in ln]
    assert (
        crc == [crc[0]] and f"problem: commitlog/{name} at byte {phy - start:,} (offset {phy:,}): body CRC" in crc[0]
    ), r.stdout
    assert (
        f"problem: consumequeue/VerifyT/1/{0:020d} at byte 100 (offset 5): unit (commitlog offset {placed[21][0] + 3:,}"
        in r.stdout
    )
    assert "2 problem(s)" in r.stdout
    assert _digest(root) == before


@pytest.mark.apache_broker
def test_apache_written_store(tmp_path):
    from rmq_core.client import Producer

    from support.apache_rocketmq import ApacheRocketMQ

    server = ApacheRocketMQ(str(tmp_path / "apache"))
    server.start()
    try:
        p = Producer("verify_producer", namesrv_addr=server.namesrv_addr, instance_name="verify-producer")
        p.start()
        try:
            for i in range(300):
                r = p.send(Message("ApacheVerifyT", f"body-{i}".encode() * 20, tags="t", keys=f"k{i}"))
                assert r.send_status.name == "SEND_OK"
        finally:
            p.shutdown()
    finally:
        server.stop()
    root = os.path.join(server.store, "broker")
    conf = os.path.join(server.workdir, "broker.conf")
    r = _run(["store", "verify", root])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "commitlog file size 16 MiB" in r.stdout and "consumequeue file size 120,000 bytes" in r.stdout
    records, files, units = _verified(r.stdout)
    assert records >= 300 and files == 1 and units == records
    r = _run(["store", "verify", "-c", conf])
    assert r.returncode == 0, r.stdout + r.stderr
    assert _verified(r.stdout) == (records, files, units)
    r = _run(["store", "inspect", "-c", conf])
    assert r.returncode == 0, r.stderr
    total = sum(
        int(a.replace(",", "")) - int(b.replace(",", ""))
        for b, a in re.findall(r"consumequeue ApacheVerifyT/\d+: offsets \[([\d,]+), ([\d,]+)\)", r.stdout)
    )
    assert total == 300, r.stdout
