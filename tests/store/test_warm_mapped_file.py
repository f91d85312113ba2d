"""``warm_mapped_file_enable`` (RocketMQ's warmMapedFileEnable): the Rust engine's warm-ahead thread pre-faults the
pages a put is about to write (CommitLog, ConsumeQueues, the index file) and changes no byte on disk; the Python twin
accepts the key and ignores it. Files big enough that one batch asks the thread many times and every kind of file
rolls over; a reopen, a CommitLog deletion and more puts after it.
"""

from __future__ import annotations

import os

import pytest

from rmq_core.message import Message
from rmq_core.store import StoreConfig

from support.helpers import Clock, UniqIds, small_config

pytestmark = pytest.mark.both_backends

MiB = 1 << 20


def _config(warm: bool) -> StoreConfig:
    return small_config(
        mapped_file_size_commit_log=3 * MiB,
        mapped_file_size_consume_queue=4000 * 20,
        max_hash_slot_num=500,
        max_index_num=6000,
        warm_mapped_file_enable=warm,
    )


def _put(store, rounds: int, n: int) -> None:
    for r in range(rounds):
        batch = [
            (Message("Warm", bytes([65 + (r + i) % 26]) * 300, tags=f"T{i % 3}", keys=f"k{i % 7}"), i % 4)
            for i in range(n)
        ]
        assert store.put_messages(batch).all_ok


def _image(root: str) -> tuple[list[tuple[str, bytes]], list[bytes]]:
    """CommitLog and ConsumeQueue files by path, index files by name order (their names are creation times)."""
    files = []
    for sub in ("commitlog", "consumequeue"):
        for d, _, names in os.walk(os.path.join(root, sub)):
            for n in names:
                p = os.path.join(d, n)
                with open(p, "rb") as f:
                    files.append((os.path.relpath(p, root), f.read()))
    index = []
    for n in sorted(os.listdir(os.path.join(root, "index"))):
        with open(os.path.join(root, "index", n), "rb") as f:
            index.append(f.read())
    return sorted(files), index


def test_default_is_on_and_the_engines_take_the_key():
    assert StoreConfig().warm_mapped_file_enable is True
    assert StoreConfig().to_engine()["warm_mapped_file_enable"] is True


def test_warming_changes_no_byte(backend, tmp_path):
    images = []
    for warm in (True, False):
        root = str(tmp_path / f"warm-{warm}")
        clock, ids = Clock(), UniqIds()
        store = backend.open(root, _config(warm), clock=clock, uniq_id=ids)
        _put(store, 3, 5000)
        store.close()
        store = backend.open(root, _config(warm), clock=clock, uniq_id=ids)
        _put(store, 1, 2000)
        assert store.delete_commit_log_files_before(3 * MiB) == 1
        _put(store, 1, 2000)
        store.close()
        images.append(_image(root))
    (files_on, index_on), (files_off, index_off) = images
    assert sum(p.startswith("commitlog") for p, _ in files_on) >= 2  # 3 written, the first deleted
    assert len(index_on) >= 4
    assert [p for p, _ in files_on] == [p for p, _ in files_off]
    for (p, a), (_, b) in zip(files_on, files_off):
        assert a == b, f"{p} differs with warm_mapped_file_enable"
    assert index_on == index_off


def test_broker_conf_warm_maped_file_enable_reaches_the_store_under_apaches_key():
    """broker.conf's ``warmMapedFileEnable`` (MessageStoreConfig's spelling, one p) switches the warm-ahead thread
    off; GET_BROKER_CONFIG lists it under the same key."""
    from rmq_core.broker.broker_config import BrokerConfig
    from rmq_core.broker.broker_configuration import camel

    cfg = BrokerConfig.from_properties({"warmMapedFileEnable": "false"})
    assert cfg.extra == {} and cfg.to_store_config().warm_mapped_file_enable is False
    assert BrokerConfig().to_store_config().warm_mapped_file_enable is True
    assert camel("warm_mapped_file_enable") == "warmMapedFileEnable"
