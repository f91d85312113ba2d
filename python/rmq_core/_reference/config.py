"""Store configuration: the contract's constructor keys (docs/CORE_API.md §2) with RocketMQ 4.9 defaults.

Owns: :class:`StoreConfig` (built from the facade's dict), the flush disk types.
Format: none on disk (the broker's ``config/`` directory is not ours).
Invariants:
  1. ``mapped_file_size_consume_queue`` is a multiple of the 20-byte unit (rounded up, like MessageStoreConfig).
  2. ``mapped_file_size_commit_log`` is in [64, 2**31-1]; the CQ file size in [20, 2**31-1]; the memory ratio >= 0;
     the flush interval > 0. Anything else is a ``ValueError`` (same limits as rust/rmq-store/src/config.rs).
Thread-safety: immutable after the engine is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rmq_core.format.cq_unit import round_file_size
from rmq_core.format.index import DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM, MAX_MSGS_NUM_BATCH, index_file_size
from rmq_core.format.message import encode_host

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"

DEFAULTS: dict[str, Any] = {
    "mapped_file_size_commit_log": 1 << 30,
    "mapped_file_size_consume_queue": 300_000 * 20,
    "max_message_size": 4 * 1024 * 1024,
    "flush_disk_type": ASYNC_FLUSH,
    "flush_interval_commit_log": 500,
    "flush_commit_log_timed": True,
    "sync_flush_timeout": 5000,
    "check_crc_on_recover": True,
    "max_transfer_bytes_on_message_in_memory": 262_144,
    "max_transfer_count_on_message_in_memory": 32,
    "max_transfer_bytes_on_message_in_disk": 65_536,
    "max_transfer_count_on_message_in_disk": 8,
    "access_message_in_memory_max_ratio": 40,
    "total_physical_memory": 16 << 30,
    "max_filter_message_size": 16_000,
    "store_host": ("127.0.0.1", 10911),
    "message_index_enable": True,
    "max_hash_slot_num": DEFAULT_MAX_HASH_SLOT_NUM,
    "max_index_num": DEFAULT_MAX_INDEX_NUM,
    "max_msgs_num_batch": MAX_MSGS_NUM_BATCH,
    "warm_mapped_file_enable": True,
}

_INT32_MAX = 2**31 - 1
_NOT_INT = (
    "flush_disk_type",
    "store_host",
    "check_crc_on_recover",
    "message_index_enable",
    "warm_mapped_file_enable",
    "flush_commit_log_timed",
)


@dataclass(frozen=True)
class StoreConfig:
    mapped_file_size_commit_log: int
    mapped_file_size_consume_queue: int
    max_message_size: int
    flush_disk_type: str
    flush_interval_commit_log: int
    flush_commit_log_timed: bool
    sync_flush_timeout: int
    check_crc_on_recover: bool
    max_transfer_bytes_on_message_in_memory: int
    max_transfer_count_on_message_in_memory: int
    max_transfer_bytes_on_message_in_disk: int
    max_transfer_count_on_message_in_disk: int
    access_message_in_memory_max_ratio: int
    total_physical_memory: int
    max_filter_message_size: int
    store_host: tuple[str, int]
    message_index_enable: bool
    max_hash_slot_num: int
    max_index_num: int
    max_msgs_num_batch: int
    warm_mapped_file_enable: bool

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> StoreConfig:
        """Missing keys take the defaults above (the facade normally passes them all)."""
        v = {**DEFAULTS, **{k: config[k] for k in config if k in DEFAULTS}}
        v["mapped_file_size_consume_queue"] = round_file_size(int(v["mapped_file_size_consume_queue"]))
        ip, port = v["store_host"]
        v["store_host"] = (str(ip), int(port))
        v["check_crc_on_recover"] = bool(v["check_crc_on_recover"])
        v["message_index_enable"] = bool(v["message_index_enable"])
        v["warm_mapped_file_enable"] = bool(v["warm_mapped_file_enable"])
        v["flush_commit_log_timed"] = bool(v["flush_commit_log_timed"])
        for k in DEFAULTS:
            if k not in _NOT_INT:
                v[k] = int(v[k])
        cfg = cls(**v)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        if not 64 <= self.mapped_file_size_commit_log <= _INT32_MAX:
            raise ValueError("config mapped_file_size_commit_log must be in [64, 2^31-1]")
        if not 1 <= self.mapped_file_size_consume_queue <= _INT32_MAX:
            raise ValueError("config mapped_file_size_consume_queue must be in [1, 2^31-1]")
        if self.flush_disk_type not in (ASYNC_FLUSH, SYNC_FLUSH):
            raise ValueError(f'flush_disk_type must be "ASYNC_FLUSH" or "SYNC_FLUSH", got {self.flush_disk_type!r}')
        if self.access_message_in_memory_max_ratio < 0:
            raise ValueError("config access_message_in_memory_max_ratio must be > 0")
        if self.max_hash_slot_num < 1 or self.max_index_num < 2:
            raise ValueError("config max_hash_slot_num must be >= 1 and max_index_num >= 2")
        if index_file_size(self.max_hash_slot_num, self.max_index_num) > _INT32_MAX or self.max_index_num > _INT32_MAX:
            raise ValueError("config max_hash_slot_num/max_index_num give an index file above 2^31-1 bytes")
        if self.flush_interval_commit_log <= 0:
            raise ValueError("config flush_interval_commit_log must be > 0")
        encode_host(self.store_host)  # ValueError if not an ip literal / port out of range

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type == SYNC_FLUSH

    def memory_threshold(self) -> int:
        """``total_physical_memory * ratio / 100`` in integer arithmetic, truncated toward zero (like Rust's i128 ``/``)."""
        product = self.total_physical_memory * self.access_message_in_memory_max_ratio
        q = abs(product) // 100
        return q if product >= 0 else -q
