//! Byte layouts and file names: every magic number of the store lives below this module.
//!
//! Owns: `message` (CommitLog record layout, properties, tags hash, offset msg id), `batch` (a SEND_BATCH_MESSAGE
//! body and the properties its records store), `columns` (records → Arrow-layout
//! column buffers), `cq_unit` (the 20-byte ConsumeQueue unit), `gather`
//! (byte runs of a mapped file → one buffer), `file_name` (20-digit mapped file names), `index` (index files), `remoting`
//! (JSON-header frames), `send_request` (a plain send's fields and properties), and the checkpoint layout constants here.
//!
//! Format: all integers big-endian (Java ByteBuffer).
//!
//! Invariants: constants mirror RocketMQ 4.9 (`CommitLog`, `MessageDecoder`, `ConsumeQueue`, `StoreCheckpoint`).
//!
//! Thread-safety: pure functions and constants.

pub mod batch;
pub mod columns;
pub mod cq_unit;
pub mod file_name;
pub mod gather;
pub mod index;
pub mod message;
pub mod remoting;
pub mod send_request;

/// `<root>/checkpoint` is this many bytes (RocketMQ maps one OS page).
pub const CHECKPOINT_FILE_SIZE: usize = 4096;
/// i64 BE physicMsgTimestamp.
pub const CHECKPOINT_PHYSIC_MSG_TIMESTAMP: usize = 0;
/// i64 BE logicsMsgTimestamp.
pub const CHECKPOINT_LOGICS_MSG_TIMESTAMP: usize = 8;
/// i64 BE indexMsgTimestamp (see `checkpoint`).
pub const CHECKPOINT_INDEX_MSG_TIMESTAMP: usize = 16;
/// i64 BE masterFlushedOffset (always 0: no HA).
pub const CHECKPOINT_MASTER_FLUSHED_OFFSET: usize = 24;
/// i64 BE confirmPhyOffset.
pub const CHECKPOINT_CONFIRM_PHY_OFFSET: usize = 32;

/// Directory and file names under the store root.
pub const COMMITLOG_DIR: &str = "commitlog";
pub const CONSUMEQUEUE_DIR: &str = "consumequeue";
pub const CONFIG_DIR: &str = "config";
pub const CHECKPOINT_FILE: &str = "checkpoint";
/// Exists while a store is open (RocketMQ's marker of an abnormal exit: 4.9 writes it empty and reads only that it
/// exists). rmq_core writes the machine's boot id in it (`/proc/sys/kernel/random/boot_id`, ASCII, no newline), so a
/// store reopened after a process crash within the same boot knows its page cache, and so its mapped files, are as
/// the process left them (see `index_service`'s invariant 5). An empty or foreign content means "unknown boot".
pub const ABORT_FILE: &str = "abort";
/// Where Linux gives the boot id.
pub const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

/// The boot id an abort file's bytes name (`None`: empty, or not a boot id).
pub fn decode_abort_boot_id(bytes: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(bytes).ok()?.trim();
    let ok = s.len() == 36 && s.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    ok.then(|| s.to_string())
}
pub const LOCK_FILE: &str = "lock";

/// RocketMQ's normal recovery scans this many CommitLog files from the end.
pub const RECOVER_NORMAL_FILE_COUNT: usize = 3;
/// Async flush wake-ups flush the CommitLog only when this many OS pages are dirty (`flushPhysicQueueLeastPages`).
pub const FLUSH_LEAST_PAGES: usize = 4;
/// The flush thread's tick msyncs a ConsumeQueue only when this many OS pages of it are dirty
/// (`flushConsumeQueueLeastPages`), except every `FLUSH_CONSUME_QUEUE_THOROUGH_INTERVAL_MS`, when it msyncs all of them
/// (`flushConsumeQueueThoroughInterval`); explicit flushes and close msync all of them.
pub const FLUSH_CONSUME_QUEUE_LEAST_PAGES: usize = 2;
pub const FLUSH_CONSUME_QUEUE_THOROUGH_INTERVAL_MS: u64 = 60_000;
pub const OS_PAGE_SIZE: usize = 4096;
/// The warm-ahead thread keeps at most this many CommitLog bytes faulted beyond the write position
/// (`warm_mapped_file_enable`; see `warm_mapped_file_service`).
pub const WARM_AHEAD_BYTES: usize = 8 << 20;
/// The writer asks the warm-ahead thread again each time it has written this many bytes since the last request.
pub const WARM_STEP_BYTES: usize = 1 << 20;
/// A ConsumeQueue file is kept faulted this far past its last unit, asked again every `CQ_WARM_STEP_BYTES` of units.
pub const CQ_WARM_AHEAD_BYTES: usize = 128 << 10;
pub const CQ_WARM_STEP_BYTES: usize = 32 << 10;
/// Inside one put's index build, the warm-ahead thread is asked again every this many messages.
pub const INDEX_WARM_STEP_MESSAGES: usize = 1 << 16;
