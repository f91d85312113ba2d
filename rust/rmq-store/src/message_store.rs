//! The engine: ties the CommitLog, the ConsumeQueues, the flush thread, the checkpoint and recovery
//! together behind the contract of docs/CORE_API.md (the write path, dispatch included, is `put_message`).
//!
//! Owns: the store root (`commitlog/`, `consumequeue/`, `index/`, `checkpoint`, `abort`, `lock`, `config/`), the
//! queue table, the write mutex, open/close, and the query by key over the index service.
//!
//! Format: see §1 of the contract; record/unit layouts in `format`.
//!
//! Invariants:
//!   1. One write mutex serialises appends and dispatch: a record is published (CommitLog write position)
//!      before its ConsumeQueue unit, so a reader that sees a unit can read its record.
//!   2. Validation happens for every message before anything is written; a put either raises
//!      (illegal topic, negative queue id — these win over statuses, whatever their position), returns the
//!      first failing status for every message, or writes messages in order until the first I/O failure
//!      (that message and the rest get CREATE_MAPPED_FILE_FAILED; nothing half-written: the ConsumeQueue file
//!      is prepared before the record is written).
//!   3. The engine's own sys flag bits 0x10/0x20 are set from the hosts (and cleared when IPv4), whatever the
//!      caller passed.
//!   4. `<root>/lock` is flock'ed before recovery touches anything and released at close; `abort` exists from
//!      the end of a successful open until close.
//!   5. After `close`, every call fails with `Error::Closed`; `close` itself is idempotent.
//!   6. With `message_index_enable`, every appended record that is not a rollback gets its UNIQ_KEY and KEYS
//!      indexed in CommitLog order (4.9's `CommitLogDispatcherBuildIndex`): inside the put, under the write mutex,
//!      for a put of fewer than `BUILD_INDEX_HANDOFF_MESSAGES` messages when nothing is pending; otherwise by the
//!      index builder thread after the put returns (`build_index_service`, 4.9's `ReputMessageService`), reading
//!      the records back from the CommitLog. `query_message`, `flush`, `close`, `index_notes`, the CommitLog's file
//!      deletion and `correct_min_offsets` first wait until the index holds every record put before the call.
//!      Open re-indexes the records after the index's last entry (4.9's abnormal-exit rule first, see
//!      `index_service`). `query_message` serves only whole records whose topic and key match (a hash collision
//!      or a stale entry is skipped, never served).
//!   7. With `warm_mapped_file_enable` the warm-ahead thread (`warm_mapped_file_service`) runs from the end of
//!      open until close (stopped before anything is unmapped) or drop; a put only asks it, never waits for it.
//!      A put that indexes inline makes sure the index file its keys go to exists before it writes the records (the
//!      file its first key would have created), so that file's slot table is warmed meanwhile; the builder thread
//!      makes the index's warm requests for what it builds.
//!
//! Decisions where the contract is silent (the Python twin matches them):
//!   * the ConsumeQueue directory is created on the first dispatched put to it (not for PREPARED/ROLLBACK).
//!   * `min_physical_offset`/`max_physical_offset` are 0 when there is no CommitLog file.
//!   * `read_commit_log`: size < 0 → InvalidArgument; size 0 inside a file → b"".
//!   * `look_message_by_offset`: None when fewer than 8 published bytes exist at `offset`; CRC not checked.
//!   * `get_offset_in_queue_by_time`: units whose record cannot be read count as older than any ts.
//!   * `scan_consume_queue`: s = max(start, min); returns (min(max, s + max_units), …) or (s, b"") when
//!     s ≥ max; no queue → (start, b""); negative start/max_units → InvalidArgument.
//!   * `consume_queue_units`: units [start, min(start+count, max)) whose file exists; no queue → b"".
//!   * open ends recovery like RocketMQ's `recoverTopicQueueTable`: every queue's min offset is corrected
//!     against the CommitLog's min offset (first unit, from the recovered min, pointing at or above it; no
//!     ConsumeQueue file is deleted by open).
//!   * `topics()` lists queues loaded from `consumequeue/<topic>/<qid>` (qid a canonical non-negative int)
//!     or created by puts, sorted by (topic, qid).
//!
//! Thread-safety: `MessageStore` is `Send + Sync`; reads take no engine lock (see `mapped_file`). The index builder
//! thread never takes the write mutex (a holder of it may wait for the builder).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::build_index_service::BuildIndexService;
use crate::checkpoint::{Checkpoint, CheckpointData};
use crate::commit_log::{CommitLog, SelectedBuffer};
use crate::config::StoreConfig;
use crate::consume_queue::ConsumeQueue;
use crate::error::{Error, Result};
use crate::flush::{FlushService, FlushTarget};
use crate::format::batch::BatchRecords;
use crate::format::cq_unit::{CqUnit, CQ_STORE_UNIT_SIZE};
use crate::format::index::{
    for_each_index_key, is_indexed_sys_flag, record_has_index_key, QUERY_ROUNDS,
};
use crate::format::message::{
    be_i32, be_i64, body_crc, decode_record, is_legal_topic, store_timestamp_position, Host,
    SYSFLAG_POSITION,
};
use crate::format::{
    decode_abort_boot_id, ABORT_FILE, BOOT_ID_PATH, CHECKPOINT_FILE, COMMITLOG_DIR, CONFIG_DIR,
    CONSUMEQUEUE_DIR, LOCK_FILE,
};
use crate::format::{
    FLUSH_CONSUME_QUEUE_LEAST_PAGES, FLUSH_CONSUME_QUEUE_THOROUGH_INTERVAL_MS, FLUSH_LEAST_PAGES,
    OS_PAGE_SIZE,
};
use crate::get_message::{self, GetMessageResult, MessageFilter};
use crate::index_service::{IndexService, INDEX_REFUSED_DIR};
use crate::mapped_file::MappedFile;
use crate::recovery::{self, RecoveryReport};
use crate::warm_mapped_file_service::WarmMappedFileService;
use crate::warm_pacing::WarmPacing;

/// RocketMQ's order; the discriminant is the ordinal the bindings return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum PutMessageStatus {
    PutOk = 0,
    FlushDiskTimeout = 1,
    FlushSlaveTimeout = 2,
    SlaveNotAvailable = 3,
    ServiceNotAvailable = 4,
    CreateMappedFileFailed = 5,
    MessageIllegal = 6,
    PropertiesSizeExceeded = 7,
    OsPageCacheBusy = 8,
    UnknownError = 9,
}

/// One message of a put: borrowed, properties already encoded (`name\x01value\x02`…).
#[derive(Debug, Clone, Copy)]
pub struct PutMessage<'a> {
    pub topic: &'a str,
    pub body: &'a [u8],
    pub flag: i32,
    pub properties: &'a [u8],
    pub queue_id: i32,
    /// This message's own born timestamp, sys flag and reconsume times instead of the `PutContext`'s (a batch
    /// of separate sends stored in one call).
    pub own: Option<OwnFields>,
}

/// The per-send fields of a record, when the messages of one put come from different sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnFields {
    pub born_timestamp: i64,
    pub sys_flag: i32,
    pub reconsume_times: i32,
}

/// Fields shared by every message of one put.
#[derive(Debug, Clone, Copy)]
pub struct PutContext {
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: Host,
    pub reconsume_times: i32,
    pub store_timestamp: i64,
    /// Written into every record of the call (4.9: a committed transactional message records its half
    /// message's commitlog offset here); 0 otherwise.
    pub prepared_transaction_offset: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutResult {
    pub status: PutMessageStatus,
    pub commitlog_offset: i64,
    pub queue_offset: i64,
    pub wrote_bytes: i32,
}

impl PutResult {
    pub(crate) fn failed(status: PutMessageStatus) -> Self {
        PutResult {
            status,
            commitlog_offset: -1,
            queue_offset: -1,
            wrote_bytes: 0,
        }
    }
}

/// What a batch put did (`put_batch`): its status (the first record's that is not PUT_OK, else PUT_OK), how many
/// records were appended (`stored`, in order from the first; all of them unless an I/O failure cut the put short),
/// the first one's queue offset, their CommitLog offsets, the bytes written and where the last one ends (-1: none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchPutResult {
    pub status: PutMessageStatus,
    pub stored: usize,
    pub queue_offset: i64,
    pub commitlog_offsets: Vec<i64>,
    pub wrote_bytes: i64,
    pub end_offset: i64,
}

impl BatchPutResult {
    pub(crate) fn of(results: &[PutResult]) -> Self {
        let ok: Vec<&PutResult> = results
            .iter()
            .take_while(|r| r.commitlog_offset >= 0)
            .collect();
        let status = results
            .iter()
            .map(|r| r.status)
            .find(|s| *s != PutMessageStatus::PutOk)
            .unwrap_or(PutMessageStatus::PutOk);
        let last = ok.last();
        BatchPutResult {
            status,
            stored: ok.len(),
            queue_offset: ok.first().map_or(-1, |r| r.queue_offset),
            commitlog_offsets: ok.iter().map(|r| r.commitlog_offset).collect(),
            wrote_bytes: ok.iter().map(|r| r.wrote_bytes as i64).sum(),
            end_offset: last.map_or(-1, |r| r.commitlog_offset + r.wrote_bytes as i64),
        }
    }
}

/// `QueryMessageResult`: the matching records concatenated in CommitLog order, and the index's last update.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryMessageResult {
    pub records: Vec<u8>,
    pub count: usize,
    pub index_last_update_timestamp: i64,
    pub index_last_update_phyoffset: i64,
}

type QueueTable = HashMap<String, HashMap<i32, Arc<ConsumeQueue>>>;

pub(crate) struct Inner {
    root: PathBuf,
    pub(crate) config: StoreConfig,
    pub(crate) commit_log: CommitLog,
    queues: RwLock<QueueTable>,
    checkpoint: Checkpoint,
    pub(crate) last_physic_ts: AtomicI64,
    pub(crate) last_logics_ts: AtomicI64,
    flush_all_lock: Mutex<()>,
    pub(crate) index: Option<IndexService>,
    /// Set when building the index failed (e.g. no disk space for a new index file): puts stop indexing until the
    /// next open, which re-indexes the records after the last entry. The reason is in `index_notes`.
    pub(crate) index_stopped: AtomicBool,
    index_stop_reason: Mutex<Option<String>>,
    /// The checkpoint's indexMsgTimestamp: kept as loaded until an index flush makes something newer durable.
    last_index_ts: AtomicI64,
    /// The checkpoint's logicsMsgTimestamp: the last dispatch time as of a flush that left no ConsumeQueue unit
    /// unflushed (the tick skips queues with less than `FLUSH_CONSUME_QUEUE_LEAST_PAGES` dirty).
    flushed_logics_ts: AtomicI64,
    /// When the tick last msynced every ConsumeQueue (`FLUSH_CONSUME_QUEUE_THOROUGH_INTERVAL_MS`).
    pub(crate) last_thorough_cq_flush: Mutex<Instant>,
}

pub(crate) struct WriteState {
    /// The CommitLog file appends go to (saves a lookup per message).
    pub(crate) current: Option<Arc<MappedFile>>,
    /// Where the next whole record to dispatch starts: the recovered end at open, then the end of each put; a
    /// slave's appends (`replica`) dispatch from here the records their bytes complete.
    pub(crate) reput_from: i64,
    /// ASYNC_FLUSH with `flush_commit_log_timed` off wakes the flush thread once per `FLUSH_LEAST_PAGES` pages
    /// appended, not once per put: a wake-up per put costs a futex round trip and a context switch on every
    /// small message, and the periodic tick already bounds how long dirty data waits.
    pub(crate) next_wake_at: i64,
    /// When the put asks the warm-ahead thread for more (the CommitLog's next request position included).
    pub(crate) warm: WarmPacing,
}

pub struct MessageStore {
    pub(crate) inner: Arc<Inner>,
    pub(crate) write: Mutex<WriteState>,
    pub(crate) flush: FlushService,
    /// `warm_mapped_file_enable`: the thread keeping the CommitLog, the ConsumeQueues written and the index faulted
    /// ahead of the writer.
    warm: Option<Arc<WarmMappedFileService>>,
    /// `message_index_enable`: the thread building the index of large puts after they return (invariant 6).
    pub(crate) index_builder: Option<BuildIndexService>,
    closed: AtomicBool,
    lock_file: Mutex<Option<File>>,
    report: RecoveryReport,
    index_notes: Vec<String>,
}

impl Inner {
    pub(crate) fn queue(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        self.queues
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(topic)?
            .get(&queue_id)
            .cloned()
    }

    pub(crate) fn queue_or_create(&self, topic: &str, queue_id: i32) -> Result<Arc<ConsumeQueue>> {
        if let Some(q) = self.queue(topic, queue_id) {
            return Ok(q);
        }
        let mut table = self.queues.write().unwrap_or_else(|e| e.into_inner());
        if let Some(q) = table.get(topic).and_then(|m| m.get(&queue_id)) {
            return Ok(q.clone());
        }
        let dir = self
            .root
            .join(CONSUMEQUEUE_DIR)
            .join(topic)
            .join(queue_id.to_string());
        let cq = Arc::new(ConsumeQueue::load(
            &dir,
            topic,
            queue_id,
            self.config.mapped_file_size_consume_queue as usize,
        )?);
        table
            .entry(topic.to_string())
            .or_default()
            .insert(queue_id, cq.clone());
        Ok(cq)
    }

    fn all_queues(&self) -> Vec<Arc<ConsumeQueue>> {
        let table = self.queues.read().unwrap_or_else(|e| e.into_inner());
        table.values().flat_map(|m| m.values().cloned()).collect()
    }

    /// The CommitLog, then the ConsumeQueues, then the index (`IndexService::flush`), then the checkpoint; returns the
    /// flushed CommitLog offset. `explicit` (`flush()`, close): every file. Otherwise the flush thread's tick: the
    /// ConsumeQueues with at least `FLUSH_CONSUME_QUEUE_LEAST_PAGES` dirty (all of them once per
    /// `FLUSH_CONSUME_QUEUE_THOROUGH_INTERVAL_MS`) and the full index files only.
    pub(crate) fn flush_all_inner(&self, explicit: bool) -> Result<i64> {
        let _g = self
            .flush_all_lock
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let physic_ts = self.last_physic_ts.load(Ordering::Acquire);
        let logics_ts = self.last_logics_ts.load(Ordering::Acquire);
        let flushed = self.commit_log.queue.flush()?;
        let least_pages = {
            let mut last = self
                .last_thorough_cq_flush
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let due =
                last.elapsed() >= Duration::from_millis(FLUSH_CONSUME_QUEUE_THOROUGH_INTERVAL_MS);
            if explicit || due {
                *last = Instant::now();
                0
            } else {
                FLUSH_CONSUME_QUEUE_LEAST_PAGES
            }
        };
        let mut every_unit_flushed = true;
        for q in self.all_queues() {
            every_unit_flushed &= q.flush_if_dirty(least_pages)?;
        }
        if every_unit_flushed {
            self.flushed_logics_ts
                .fetch_max(logics_ts, Ordering::AcqRel);
        }
        if let Some(index) = &self.index {
            let ts = index.flush(explicit)?;
            self.last_index_ts.fetch_max(ts, Ordering::AcqRel);
        }
        self.checkpoint.write(&CheckpointData {
            physic_msg_timestamp: physic_ts,
            logics_msg_timestamp: self.flushed_logics_ts.load(Ordering::Acquire),
            index_msg_timestamp: self.last_index_ts.load(Ordering::Acquire),
            confirm_phy_offset: flushed,
        })?;
        Ok(flushed)
    }

    /// STORETIMESTAMP of the record a unit points at.
    fn store_time_of(&self, unit: &CqUnit) -> Option<i64> {
        let sel = self.commit_log.get_message(unit.offset, unit.size)?;
        let rec = sel.as_slice();
        if rec.len() < SYSFLAG_POSITION + 4 {
            return None;
        }
        let at = store_timestamp_position(be_i32(rec, SYSFLAG_POSITION));
        if rec.len() < at + 8 {
            return None;
        }
        Some(be_i64(rec, at))
    }
}

impl Inner {
    pub(crate) fn stop_index(&self, e: &Error) {
        self.index_stopped.store(true, Ordering::Release);
        *self
            .index_stop_reason
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(format!(
            "building the index stopped until the next open (its records are re-indexed then): {e}"
        ));
    }
}

impl FlushTarget for Inner {
    fn flush_commit_log(&self) -> Option<i64> {
        self.commit_log.queue.flush().ok()
    }

    fn on_wake(&self) {
        let Some(last) = self.commit_log.queue.last() else {
            return;
        };
        if last
            .wrote_position()
            .saturating_sub(last.flushed_position())
            >= FLUSH_LEAST_PAGES * OS_PAGE_SIZE
        {
            // earlier files are full: flush them whole, the last one by whole pages
            for f in self.commit_log.queue.snapshot() {
                if f.flushed_position() < f.wrote_position() {
                    let _ = if Arc::ptr_eq(&f, &last) {
                        f.flush_whole_pages()
                    } else {
                        f.flush()
                    };
                }
            }
        }
    }

    fn flush_all(&self) {
        let _ = self.flush_all_inner(false);
    }
}

/// This machine's boot id (Linux; `None` elsewhere or when unreadable: every abnormal exit is then a machine's).
fn current_boot_id() -> Option<String> {
    std::fs::read(BOOT_ID_PATH)
        .ok()
        .and_then(|b| decode_abort_boot_id(&b))
}

fn lock_root(root: &Path) -> Result<File> {
    let path = root.join(LOCK_FILE);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    match try_lock_exclusive(&file) {
        Ok(true) => Ok(file),
        Ok(false) => Err(Error::Locked(path)),
        Err(err) => Err(Error::io(&path, err)),
    }
}

/// An advisory exclusive lock on the whole file, released when the file is closed; Ok(false) when another
/// process (or another open store in this one) holds it. Unix: `flock(LOCK_EX | LOCK_NB)`; elsewhere std's
/// `File::try_lock` (Windows: `LockFileEx`).
#[cfg(unix)]
fn try_lock_exclusive(file: &File) -> std::io::Result<bool> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: plain syscall on an fd we own.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        return Ok(false);
    }
    Err(err)
}

#[cfg(not(unix))]
fn try_lock_exclusive(file: &File) -> std::io::Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(std::fs::TryLockError::WouldBlock) => Ok(false),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

fn load_queues(root: &Path, file_size: usize) -> Result<QueueTable> {
    let base = root.join(CONSUMEQUEUE_DIR);
    let mut table = QueueTable::new();
    for topic_entry in std::fs::read_dir(&base).map_err(|e| Error::io(&base, e))? {
        let topic_entry = topic_entry.map_err(|e| Error::io(&base, e))?;
        if !topic_entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            continue;
        }
        let Some(topic) = topic_entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let topic_dir = topic_entry.path();
        for q_entry in std::fs::read_dir(&topic_dir).map_err(|e| Error::io(&topic_dir, e))? {
            let q_entry = q_entry.map_err(|e| Error::io(&topic_dir, e))?;
            if !q_entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                continue;
            }
            let Some(name) = q_entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let Ok(qid) = name.parse::<i32>() else {
                continue;
            };
            if qid < 0 || qid.to_string() != name {
                continue;
            }
            let cq = ConsumeQueue::load(&q_entry.path(), &topic, qid, file_size)?;
            recovery::recover_consume_queue(&cq)?;
            table
                .entry(topic.clone())
                .or_default()
                .insert(qid, Arc::new(cq));
        }
    }
    Ok(table)
}

impl MessageStore {
    /// Opens (creating if needed) the store at `root` and runs recovery (§7).
    pub fn open(root: impl AsRef<Path>, config: StoreConfig) -> Result<MessageStore> {
        let config = config.normalized()?;
        let root = root.as_ref().to_path_buf();
        for d in [
            root.clone(),
            root.join(COMMITLOG_DIR),
            root.join(CONSUMEQUEUE_DIR),
            root.join(CONFIG_DIR),
        ] {
            std::fs::create_dir_all(&d).map_err(|e| Error::io(&d, e))?;
        }
        let lock_file = lock_root(&root)?;
        let abort_path = root.join(ABORT_FILE);
        let abnormal = abort_path.exists();
        let boot = current_boot_id();
        let same_boot = abnormal
            && boot.is_some()
            && std::fs::read(&abort_path)
                .ok()
                .and_then(|b| decode_abort_boot_id(&b))
                == boot;
        let checkpoint = Checkpoint::open(&root.join(CHECKPOINT_FILE))?;
        let cp = checkpoint.loaded();
        let commit_log = CommitLog::load(
            &root.join(COMMITLOG_DIR),
            config.mapped_file_size_commit_log as usize,
        )?;
        let queues = load_queues(&root, config.mapped_file_size_consume_queue as usize)?;
        let (end, truncated_bytes) = recovery::recover_commit_log(
            &commit_log,
            abnormal,
            cp.confirm_phy_offset,
            config.check_crc_on_recover,
        )?;
        let mut report = RecoveryReport {
            abnormal,
            commit_log_end: end,
            truncated_bytes,
            ..Default::default()
        };
        let mut index_notes = Vec::new();
        let index = if config.message_index_enable {
            let (svc, load) = IndexService::load(
                &root,
                config.max_hash_slot_num,
                config.max_index_num,
                abnormal,
                same_boot,
                cp.index_msg_timestamp,
            )?;
            if load.repaired_slots > 0 {
                index_notes.push(format!(
                    "index: {} slot(s) of a key put cut short by the crash restored (the files are kept: a \
                     process crash within this boot)",
                    load.repaired_slots
                ));
            }
            for (name, reason) in &load.refused {
                index_notes.push(format!(
                    "index file {name} refused ({reason}): moved to {INDEX_REFUSED_DIR}/, its records are re-indexed"
                ));
            }
            for name in &load.dropped {
                index_notes.push(format!(
                    "index file {name} deleted: abnormal exit and its endTimestamp is above the checkpoint's \
                     indexMsgTimestamp {}; its records are re-indexed",
                    cp.index_msg_timestamp
                ));
            }
            let beyond = svc.drop_files_beyond(end)?;
            for name in &beyond {
                index_notes.push(format!(
                    "index file {name} deleted: it indexes offsets at or beyond the recovered CommitLog end {end}"
                ));
            }
            report.index_files_refused = load.refused.len() as i64;
            report.index_files_dropped = (load.dropped.len() + beyond.len()) as i64;
            Some(svc)
        } else {
            None
        };
        for q in queues.values().flat_map(|m| m.values()) {
            report.cq_truncated_units += recovery::truncate_dirty_units(q, end)?;
        }
        let inner = Arc::new(Inner {
            root: root.clone(),
            config,
            commit_log,
            queues: RwLock::new(queues),
            checkpoint,
            last_physic_ts: AtomicI64::new(cp.physic_msg_timestamp),
            last_logics_ts: AtomicI64::new(cp.logics_msg_timestamp),
            flush_all_lock: Mutex::new(()),
            index,
            index_stopped: AtomicBool::new(false),
            index_stop_reason: Mutex::new(None),
            last_index_ts: AtomicI64::new(cp.index_msg_timestamp),
            flushed_logics_ts: AtomicI64::new(cp.logics_msg_timestamp),
            last_thorough_cq_flush: Mutex::new(Instant::now()),
        });
        if abnormal {
            report.redispatched = Self::redispatch(&inner, cp.confirm_phy_offset, end)?;
        }
        report.index_rebuilt = Self::reindex(&inner, end).unwrap_or_else(|e| {
            inner.stop_index(&e);
            0
        });
        // RocketMQ's recoverTopicQueueTable: min offsets follow the CommitLog's first file (no CQ file deletion)
        let cl_min = inner.commit_log.min_offset();
        for q in inner.all_queues() {
            q.correct_min_offset_only(cl_min);
        }
        std::fs::write(&abort_path, boot.unwrap_or_default())
            .map_err(|e| Error::io(&abort_path, e))?;
        let interval = Duration::from_millis(inner.config.flush_interval_commit_log_ms);
        let flush = FlushService::start(inner.clone() as Arc<dyn FlushTarget>, interval)
            .map_err(|e| Error::io(&root, e))?;
        let warm = if inner.config.warm_mapped_file_enable {
            Some(Arc::new(
                WarmMappedFileService::start().map_err(|e| Error::io(&root, e))?,
            ))
        } else {
            None
        };
        let index_builder = if inner.index.is_some() {
            match BuildIndexService::start(inner.clone(), warm.clone()) {
                Ok(b) => Some(b),
                Err(e) => {
                    if let Some(w) = &warm {
                        w.stop();
                    }
                    flush.stop();
                    return Err(Error::io(&root, e));
                }
            }
        } else {
            None
        };
        Ok(MessageStore {
            inner,
            write: Mutex::new(WriteState {
                current: None,
                reput_from: end,
                next_wake_at: 0,
                warm: WarmPacing::new(warm.clone()),
            }),
            flush,
            warm,
            index_builder,
            closed: AtomicBool::new(false),
            lock_file: Mutex::new(Some(lock_file)),
            report,
            index_notes,
        })
    }

    /// Indexes the records after the index's last entry up to `end` (all of them when nothing is indexed).
    fn reindex(inner: &Inner, end: i64) -> Result<i64> {
        let Some(index) = &inner.index else {
            return Ok(0);
        };
        let min = inner.commit_log.min_offset();
        let (from, skip_at_or_below) = match index.last_indexed_offset() {
            Some(last) => (last.max(min), last),
            None => (min, -1),
        };
        if from >= end {
            return Ok(0);
        }
        // the last indexed record may have only its first keys (a build that stopped inside it): finish it
        let done_at_last = index.entries_at_tail(skip_at_or_below);
        let mut count = 0i64;
        let mut w = index.writer();
        recovery::for_each_record(&inner.commit_log, from, end, |off, rec| {
            if off < skip_at_or_below || !is_indexed_sys_flag(rec.sys_flag) {
                return Ok(());
            }
            if off == skip_at_or_below {
                let mut keys = 0usize;
                for_each_index_key(rec.properties, |_| keys += 1);
                if done_at_last < keys {
                    w.build_index_from(
                        rec.topic,
                        rec.properties,
                        off,
                        rec.store_timestamp,
                        done_at_last,
                    )?;
                    count += 1;
                }
                return Ok(());
            }
            w.build_index(rec.topic, rec.properties, off, rec.store_timestamp)?;
            count += 1;
            Ok(())
        })?;
        Ok(count)
    }

    fn redispatch(inner: &Inner, confirm: i64, end: i64) -> Result<i64> {
        let mut from = confirm.max(0);
        for q in inner.all_queues() {
            let e = q.max_phys_end.load(Ordering::Acquire);
            if e >= 0 {
                from = from.min(e);
            }
        }
        let from = from.clamp(
            inner.commit_log.min_offset(),
            end.max(inner.commit_log.min_offset()),
        );
        let mut count = 0i64;
        recovery::for_each_record(&inner.commit_log, from, end, |off, rec| {
            let Some(unit) = recovery::dispatch_unit_of(off, &rec) else {
                return Ok(());
            };
            let topic = String::from_utf8_lossy(rec.topic);
            // a record that passed CRC but names an impossible queue must not create a directory outside the store
            if !is_legal_topic(&topic) || rec.queue_id < 0 {
                return Ok(());
            }
            let q = inner.queue_or_create(&topic, rec.queue_id)?;
            if off + rec.total_size as i64 <= q.max_phys_end.load(Ordering::Acquire) {
                return Ok(());
            }
            if q.write_unit(rec.queue_offset, unit)? {
                count += 1;
                inner
                    .last_logics_ts
                    .fetch_max(rec.store_timestamp, Ordering::AcqRel);
            }
            Ok(())
        })?;
        Ok(count)
    }

    #[inline]
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    pub fn config(&self) -> &StoreConfig {
        &self.inner.config
    }

    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// §3: validates every message, then appends and dispatches them in order under the write mutex,
    /// then waits for the flush (SYNC_FLUSH) or wakes the flush thread (ASYNC_FLUSH).
    pub fn put_messages(
        &self,
        msgs: &[PutMessage<'_>],
        ctx: &PutContext,
    ) -> Result<Vec<PutResult>> {
        self.put_messages_with(msgs, ctx, true)
    }

    /// SEND_BATCH_MESSAGE's put (4.9 `asyncPutMessages` of a `MessageExtBatch`): the records of `batch` (its blocks,
    /// `format::batch`), all to `topic`/`queue_id` with the shared fields of `ctx`, appended under one write mutex
    /// as `put_messages_with` appends them (same validation, same statuses). Summarised, not per record: see
    /// `BatchPutResult`.
    pub fn put_batch(
        &self,
        topic: &str,
        queue_id: i32,
        batch: &BatchRecords<'_>,
        ctx: &PutContext,
        wait_flush: bool,
    ) -> Result<BatchPutResult> {
        let msgs: Vec<PutMessage<'_>> = batch
            .blocks
            .iter()
            .enumerate()
            .map(|(i, b)| PutMessage {
                topic,
                body: b.body,
                flag: b.flag,
                properties: batch.properties(i),
                queue_id,
                own: None,
            })
            .collect();
        let results = self.put_messages_with(&msgs, ctx, wait_flush)?;
        Ok(BatchPutResult::of(&results))
    }

    /// Waits (up to `sync_flush_timeout`) until a CommitLog flush covers `upto`, the end offset of a put made
    /// with `wait_flush` false; true once it does, false on timeout, flush failure or a closed store. Callers
    /// waiting at the same time share one msync (the flush thread's group commit).
    pub fn wait_flushed(&self, upto: i64) -> bool {
        if self.check_open().is_err() {
            return false;
        }
        let timeout = Duration::from_millis(self.inner.config.sync_flush_timeout_ms);
        self.flush.sync(upto, timeout)
    }

    /// §4 `get_message`.
    pub fn get_message(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msg_nums: i32,
        filter: &mut dyn MessageFilter,
    ) -> Result<GetMessageResult> {
        self.check_open()?;
        let q = self.inner.queue(topic, queue_id);
        Ok(get_message::get_message(
            &self.inner.config,
            &self.inner.commit_log,
            q.as_deref(),
            offset,
            max_msg_nums,
            filter,
        ))
    }

    pub fn is_the_batch_full(
        &self,
        phy_size: i64,
        max_msg_nums: i64,
        buffer_total: i64,
        msg_total: i64,
        in_disk: bool,
    ) -> bool {
        get_message::is_the_batch_full(
            &self.inner.config,
            phy_size,
            max_msg_nums,
            buffer_total,
            msg_total,
            in_disk,
        )
    }

    pub fn get_max_offset_in_queue(&self, topic: &str, queue_id: i32) -> Result<i64> {
        self.check_open()?;
        Ok(self
            .inner
            .queue(topic, queue_id)
            .map(|q| q.max_offset())
            .unwrap_or(0))
    }

    pub fn get_min_offset_in_queue(&self, topic: &str, queue_id: i32) -> Result<i64> {
        self.check_open()?;
        Ok(self
            .inner
            .queue(topic, queue_id)
            .map(|q| q.min_offset())
            .unwrap_or(0))
    }

    pub fn get_offset_in_queue_by_time(&self, topic: &str, queue_id: i32, ts: i64) -> Result<i64> {
        self.check_open()?;
        let Some(q) = self.inner.queue(topic, queue_id) else {
            return Ok(0);
        };
        let (mut lo, mut hi) = (q.min_offset(), q.max_offset());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let t = q
                .unit_at(mid)
                .and_then(|u| self.inner.store_time_of(&u))
                .unwrap_or(i64::MIN);
            if t >= ts {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok(lo)
    }

    pub fn get_earliest_message_time(&self, topic: &str, queue_id: i32) -> Result<i64> {
        self.check_open()?;
        let Some(q) = self.inner.queue(topic, queue_id) else {
            return Ok(-1);
        };
        let min = q.min_offset();
        if min >= q.max_offset() {
            return Ok(-1);
        }
        Ok(q.unit_at(min)
            .and_then(|u| self.inner.store_time_of(&u))
            .unwrap_or(-1))
    }

    pub fn max_physical_offset(&self) -> Result<i64> {
        self.check_open()?;
        Ok(self.inner.commit_log.max_offset())
    }

    pub fn min_physical_offset(&self) -> Result<i64> {
        self.check_open()?;
        Ok(self.inner.commit_log.min_offset())
    }

    pub fn read_commit_log(&self, offset: i64, size: i64) -> Result<Option<SelectedBuffer>> {
        self.check_open()?;
        if size < 0 {
            return Err(Error::InvalidArgument(format!(
                "size must be >= 0, got {size}"
            )));
        }
        Ok(self.inner.commit_log.select(offset, size))
    }

    pub fn look_message_by_offset(&self, offset: i64) -> Result<Option<SelectedBuffer>> {
        self.check_open()?;
        let cl = &self.inner.commit_log;
        let Some(file) = cl.queue.find(offset) else {
            return Ok(None);
        };
        let pos = (offset as u64 - file.start()) as usize;
        let written = file.written();
        if pos + 8 > written.len() {
            return Ok(None);
        }
        match decode_record(&written[pos..]) {
            Ok(rec) => Ok(cl.select(offset, rec.total_size as i64)),
            Err(reason) => Err(Error::corrupt(offset, reason)),
        }
    }

    pub fn scan_consume_queue(
        &self,
        topic: &str,
        queue_id: i32,
        start: i64,
        max_units: i64,
        tag_codes: Option<&[i32]>,
    ) -> Result<(i64, Vec<u8>)> {
        self.check_open()?;
        if start < 0 || max_units < 0 {
            return Err(Error::InvalidArgument(
                "start and max_units must be >= 0".into(),
            ));
        }
        let Some(q) = self.inner.queue(topic, queue_id) else {
            return Ok((start, Vec::new()));
        };
        let s = start.max(q.min_offset());
        let max = q.max_offset();
        if s >= max {
            return Ok((s, Vec::new()));
        }
        let e = max.min(s.saturating_add(max_units));
        let mut out = Vec::new();
        q.scan_units(s, e, tag_codes, &mut out);
        Ok((e, out))
    }

    pub fn consume_queue_units(
        &self,
        topic: &str,
        queue_id: i32,
        start: i64,
        count: i64,
    ) -> Result<Vec<u8>> {
        self.check_open()?;
        if start < 0 || count < 0 {
            return Err(Error::InvalidArgument(
                "start and count must be >= 0".into(),
            ));
        }
        let Some(q) = self.inner.queue(topic, queue_id) else {
            return Ok(Vec::new());
        };
        let e = q.max_offset().min(start.saturating_add(count));
        let mut out = Vec::with_capacity(((e - start).max(0) as usize) * CQ_STORE_UNIT_SIZE);
        q.scan_units(start, e, None, &mut out);
        Ok(out)
    }

    pub fn topics(&self) -> Result<Vec<(String, i32)>> {
        self.check_open()?;
        let table = self.inner.queues.read().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<(String, i32)> = table
            .iter()
            .flat_map(|(t, m)| m.keys().map(move |q| (t.clone(), *q)))
            .collect();
        v.sort();
        Ok(v)
    }

    /// §5 `flush`: CommitLog, ConsumeQueues, every index file, checkpoint; returns the flushed CommitLog offset.
    pub fn flush(&self) -> Result<i64> {
        self.check_open()?;
        self.wait_index_built();
        self.inner.flush_all_inner(true)
    }

    pub fn delete_commit_log_files_before(&self, offset: i64) -> Result<usize> {
        self.check_open()?;
        let _w = self.write.lock().unwrap_or_else(|e| e.into_inner());
        // the builder reads the records it indexes from the CommitLog: it finishes before their files go
        self.wait_index_built();
        self.inner.commit_log.queue.delete_files_before(offset)
    }

    pub fn correct_min_offsets(&self) -> Result<()> {
        self.check_open()?;
        let _w = self.write.lock().unwrap_or_else(|e| e.into_inner());
        self.wait_index_built();
        let min_phys = self.inner.commit_log.min_offset();
        for q in self.inner.all_queues() {
            q.correct_min_offset(min_phys)?;
        }
        // 4.9's CleanConsumeQueueService then IndexService.deleteExpiredFile(commitLog min offset)
        if let Some(index) = &self.inner.index {
            index.delete_expired_files(min_phys)?;
        }
        Ok(())
    }

    pub fn recovery_report(&self) -> RecoveryReport {
        self.report
    }

    /// What open did to `index/` that an operator should know (refused or deleted files), and whether building the
    /// index stopped since (a failure creating an index file), one sentence each.
    pub fn index_notes(&self) -> Vec<String> {
        self.wait_index_built();
        let mut notes = self.index_notes.clone();
        if let Some(reason) = self
            .inner
            .index_stop_reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            notes.push(reason);
        }
        notes
    }

    /// `DefaultMessageStore.queryMessage`: up to `min(max_num, max_msgs_num_batch)` records whose topic is `topic`
    /// and whose UNIQ_KEY or KEYS hold `key`, stored in `[begin, end]` (ms), in CommitLog order, found by the
    /// newest-first walk of the key's slot chain (three rounds, each ending at the first found record's time).
    pub fn query_message(
        &self,
        topic: &str,
        key: &str,
        max_num: i32,
        begin: i64,
        end: i64,
    ) -> Result<QueryMessageResult> {
        self.check_open()?;
        let mut result = QueryMessageResult::default();
        let Some(index) = &self.inner.index else {
            return Ok(result);
        };
        self.wait_index_built();
        let max_num = max_num.min(self.inner.config.max_msgs_num_batch).max(0) as usize;
        let mut last_query_time = end;
        for _ in 0..QUERY_ROUNDS {
            let mut q = index.query_offset(
                topic.as_bytes(),
                key.as_bytes(),
                max_num,
                begin,
                last_query_time,
            );
            if q.phy_offsets.is_empty() {
                break;
            }
            q.phy_offsets.sort_unstable();
            q.phy_offsets.dedup();
            result.index_last_update_timestamp = q.index_last_update_timestamp;
            result.index_last_update_phyoffset = q.index_last_update_phyoffset;
            for (m, &off) in q.phy_offsets.iter().enumerate() {
                let Ok(Some(sel)) = self.look_message_by_offset(off) else {
                    continue;
                };
                let rec = sel.as_slice();
                let Ok(r) = decode_record(rec) else {
                    continue;
                };
                if m == 0 {
                    last_query_time = r.store_timestamp;
                }
                if r.physical_offset != off
                    || r.topic != topic.as_bytes()
                    || !record_has_index_key(r.properties, key.as_bytes())
                    || (self.inner.config.check_crc_on_recover && body_crc(r.body) != r.body_crc)
                {
                    continue;
                }
                result.records.extend_from_slice(rec);
                result.count += 1;
            }
            if !result.records.is_empty() || last_query_time < begin {
                break;
            }
        }
        Ok(result)
    }

    /// §5 `close`: stop the flush thread, flush, write the checkpoint, unmap, delete `abort`, unlock.
    pub fn close(&self) -> Result<()> {
        let mut ws = self.write.lock().unwrap_or_else(|e| e.into_inner());
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        if let Some(builder) = &self.index_builder {
            builder.wait_built();
            builder.stop();
        }
        if let Some(warm) = &self.warm {
            warm.stop();
        }
        self.flush.stop();
        let flushed = self.inner.flush_all_inner(true);
        ws.current = None;
        for q in self.inner.all_queues() {
            q.queue.unload();
        }
        self.inner
            .queues
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.inner.commit_log.queue.unload();
        if let Some(index) = &self.inner.index {
            index.unload();
        }
        let abort = self.inner.root.join(ABORT_FILE);
        let removed = match std::fs::remove_file(&abort) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(&abort, e)),
        };
        self.lock_file
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        flushed?;
        removed
    }

    /// Waits until the index holds every record put before the call (`build_index_service` invariant 3).
    pub fn wait_index_built(&self) {
        if let Some(builder) = &self.index_builder {
            builder.wait_built();
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

impl Drop for MessageStore {
    fn drop(&mut self) {
        // a dropped (not closed) engine behaves like a crash for the files, but stops its threads (the index
        // builder drops what it has not built: the next open re-indexes it)
        if let Some(builder) = &self.index_builder {
            builder.stop();
        }
        if let Some(warm) = &self.warm {
            warm.stop();
        }
        self.flush.stop();
    }
}
