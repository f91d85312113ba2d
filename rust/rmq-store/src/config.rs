//! Store configuration: the contract's constructor keys (docs/CORE_API.md §2) with RocketMQ 4.9 defaults.
//!
//! Owns: `StoreConfig`, `FlushDiskType`.
//!
//! Format: none on disk (the broker's `config/` directory is not ours).
//!
//! Invariants:
//!   1. `mapped_file_size_consume_queue` is a multiple of the 20-byte unit (`normalized()` rounds it up).
//!   2. Every size is > 0; `validate()` refuses anything else with `Error::InvalidArgument`.
//!
//! Thread-safety: immutable after the engine is built; `Clone + Send + Sync`.

use crate::error::{Error, Result};
use crate::format::cq_unit::CQ_STORE_UNIT_SIZE;
use crate::format::index::{
    index_file_size, DEFAULT_MAX_HASH_SLOT_NUM, DEFAULT_MAX_INDEX_NUM, MAX_MSGS_NUM_BATCH,
};
use crate::format::message::Host;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushDiskType {
    AsyncFlush,
    SyncFlush,
}

impl FlushDiskType {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "ASYNC_FLUSH" => Ok(FlushDiskType::AsyncFlush),
            "SYNC_FLUSH" => Ok(FlushDiskType::SyncFlush),
            other => Err(Error::InvalidArgument(format!(
                "flush_disk_type must be \"ASYNC_FLUSH\" or \"SYNC_FLUSH\", got {other:?}"
            ))),
        }
    }
}

#[derive(Debug, Clone)]
pub struct StoreConfig {
    pub mapped_file_size_commit_log: u64,
    pub mapped_file_size_consume_queue: u64,
    pub max_message_size: u64,
    pub flush_disk_type: FlushDiskType,
    pub flush_interval_commit_log_ms: u64,
    /// `flushCommitLogTimed` (ASYNC_FLUSH): true (4.9's default) — the CommitLog is flushed by the flush thread's
    /// tick every `flush_interval_commit_log_ms`, puts do not wake it; false — a put wakes the flush thread once
    /// `FLUSH_LEAST_PAGES` pages are appended and it msyncs them (4.9's `waitForRunning` path).
    pub flush_commit_log_timed: bool,
    pub sync_flush_timeout_ms: u64,
    pub check_crc_on_recover: bool,
    pub max_transfer_bytes_on_message_in_memory: i64,
    pub max_transfer_count_on_message_in_memory: i64,
    pub max_transfer_bytes_on_message_in_disk: i64,
    pub max_transfer_count_on_message_in_disk: i64,
    pub access_message_in_memory_max_ratio: i64,
    pub total_physical_memory: i64,
    pub max_filter_message_size: i64,
    pub store_host: Host,
    /// `messageIndexEnable`: build `index/` files on dispatch and answer `query_message` from them.
    pub message_index_enable: bool,
    /// `maxHashSlotNum` / `maxIndexNum`: the geometry of every index file (4.9: 5,000,000 / 20,000,000).
    pub max_hash_slot_num: u32,
    pub max_index_num: u32,
    /// `maxMsgsNumBatch`: the most offsets one index query returns.
    pub max_msgs_num_batch: i32,
    /// `warmMapedFileEnable`: a background thread keeps the CommitLog's pages faulted ahead of the writer
    /// (`warm_mapped_file_service`); off, the writer faults its own pages as it writes.
    pub warm_mapped_file_enable: bool,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            mapped_file_size_commit_log: 1 << 30,
            mapped_file_size_consume_queue: 300_000 * CQ_STORE_UNIT_SIZE as u64,
            max_message_size: 4 * 1024 * 1024,
            flush_disk_type: FlushDiskType::AsyncFlush,
            flush_interval_commit_log_ms: 500,
            flush_commit_log_timed: true,
            sync_flush_timeout_ms: 5000,
            check_crc_on_recover: true,
            max_transfer_bytes_on_message_in_memory: 262_144,
            max_transfer_count_on_message_in_memory: 32,
            max_transfer_bytes_on_message_in_disk: 65_536,
            max_transfer_count_on_message_in_disk: 8,
            access_message_in_memory_max_ratio: 40,
            total_physical_memory: 16 << 30,
            max_filter_message_size: 16_000,
            store_host: Host::v4([127, 0, 0, 1], 10911),
            message_index_enable: true,
            max_hash_slot_num: DEFAULT_MAX_HASH_SLOT_NUM,
            max_index_num: DEFAULT_MAX_INDEX_NUM,
            max_msgs_num_batch: MAX_MSGS_NUM_BATCH,
            warm_mapped_file_enable: true,
        }
    }
}

impl StoreConfig {
    /// Rounds the ConsumeQueue file size up to a multiple of 20 and checks every value.
    pub fn normalized(mut self) -> Result<Self> {
        let unit = CQ_STORE_UNIT_SIZE as u64;
        self.mapped_file_size_consume_queue =
            self.mapped_file_size_consume_queue.div_ceil(unit) * unit;
        self.validate()?;
        Ok(self)
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |k: &str| Err(Error::InvalidArgument(format!("config {k} must be > 0")));
        if self.mapped_file_size_commit_log < 64
            || self.mapped_file_size_commit_log > i32::MAX as u64
        {
            return Err(Error::InvalidArgument(
                "config mapped_file_size_commit_log must be in [64, 2^31-1]".into(),
            ));
        }
        if self.mapped_file_size_consume_queue == 0
            || self.mapped_file_size_consume_queue > i32::MAX as u64
        {
            return Err(Error::InvalidArgument(
                "config mapped_file_size_consume_queue must be in [1, 2^31-1]".into(),
            ));
        }
        if self.access_message_in_memory_max_ratio < 0 {
            return bad("access_message_in_memory_max_ratio");
        }
        if self.max_hash_slot_num == 0 || self.max_index_num < 2 {
            return Err(Error::InvalidArgument(
                "config max_hash_slot_num must be >= 1 and max_index_num >= 2".into(),
            ));
        }
        if index_file_size(self.max_hash_slot_num, self.max_index_num) > i32::MAX as usize
            || self.max_index_num > i32::MAX as u32
        {
            return Err(Error::InvalidArgument(
                "config max_hash_slot_num/max_index_num give an index file above 2^31-1 bytes"
                    .into(),
            ));
        }
        if self.flush_interval_commit_log_ms == 0 {
            return bad("flush_interval_commit_log");
        }
        Ok(())
    }

    /// `total_physical_memory * ratio / 100` in integer arithmetic (floor), saturating.
    pub fn memory_threshold(&self) -> i64 {
        let v = (self.total_physical_memory as i128)
            * (self.access_message_in_memory_max_ratio as i128)
            / 100;
        v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }
}
