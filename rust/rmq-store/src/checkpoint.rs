//! `<root>/checkpoint`: what was durable at the last flush (RocketMQ `StoreCheckpoint`, 5.x layout).
//!
//! Owns: reading and rewriting the checkpoint file.
//!
//! Format: 4096 bytes, i64 BE @0 physicMsgTimestamp, @8 logicsMsgTimestamp, @16 indexMsgTimestamp (the newest index
//! entry's store timestamp that was msynced before this write; 0 with no index),
//! @24 masterFlushedOffset (always 0), @32 confirmPhyOffset; the rest zero.
//!
//! Invariants:
//!   1. Written only after the CommitLog (then the ConsumeQueues due) were msynced, so `confirm_phy_offset` is
//!      durable CommitLog data: abnormal recovery starts from the file holding it (and from where the
//!      ConsumeQueues' own last units end, if earlier).
//!   2. physicMsgTimestamp = STORETIMESTAMP of the last record appended (so far, in this or an earlier run);
//!      logicsMsgTimestamp = STORETIMESTAMP of the last record that got a ConsumeQueue unit as of the last flush
//!      that left no ConsumeQueue unit unflushed (the flush thread's tick skips queues with few dirty pages, as
//!      4.9's FlushConsumeQueueService, which also advances it only at its thorough flushes). Both keep the
//!      loaded values until something newer is durable.
//!   3. A missing or short file reads as all zeros (abnormal recovery then scans from the first file).
//!
//! Thread-safety: one `Mutex` around the file; callers serialise flushes anyway.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::format::{
    CHECKPOINT_CONFIRM_PHY_OFFSET, CHECKPOINT_FILE_SIZE, CHECKPOINT_INDEX_MSG_TIMESTAMP,
    CHECKPOINT_LOGICS_MSG_TIMESTAMP, CHECKPOINT_MASTER_FLUSHED_OFFSET,
    CHECKPOINT_PHYSIC_MSG_TIMESTAMP,
};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckpointData {
    pub physic_msg_timestamp: i64,
    pub logics_msg_timestamp: i64,
    pub index_msg_timestamp: i64,
    pub confirm_phy_offset: i64,
}

pub struct Checkpoint {
    path: PathBuf,
    file: Mutex<File>,
    loaded: CheckpointData,
    existed: bool,
}

impl Checkpoint {
    pub fn open(path: &Path) -> Result<Checkpoint> {
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        let mut buf = [0u8; 40];
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        if len >= 40 {
            read_exact_at(&file, &mut buf, 0).map_err(|e| Error::io(path, e))?;
        }
        let at = |i: usize| i64::from_be_bytes(buf[i..i + 8].try_into().unwrap());
        let loaded = CheckpointData {
            physic_msg_timestamp: at(CHECKPOINT_PHYSIC_MSG_TIMESTAMP),
            logics_msg_timestamp: at(CHECKPOINT_LOGICS_MSG_TIMESTAMP),
            index_msg_timestamp: at(CHECKPOINT_INDEX_MSG_TIMESTAMP),
            confirm_phy_offset: at(CHECKPOINT_CONFIRM_PHY_OFFSET),
        };
        Ok(Checkpoint {
            path: path.to_path_buf(),
            file: Mutex::new(file),
            loaded,
            existed,
        })
    }

    /// What the file held at open (zeros if missing/short).
    pub fn loaded(&self) -> CheckpointData {
        self.loaded
    }

    pub fn existed(&self) -> bool {
        self.existed
    }

    /// Rewrites the whole 4096-byte file and fdatasyncs it.
    pub fn write(&self, d: &CheckpointData) -> Result<()> {
        let mut buf = [0u8; CHECKPOINT_FILE_SIZE];
        let mut put = |i: usize, v: i64| buf[i..i + 8].copy_from_slice(&v.to_be_bytes());
        put(CHECKPOINT_PHYSIC_MSG_TIMESTAMP, d.physic_msg_timestamp);
        put(CHECKPOINT_LOGICS_MSG_TIMESTAMP, d.logics_msg_timestamp);
        put(CHECKPOINT_INDEX_MSG_TIMESTAMP, d.index_msg_timestamp);
        put(CHECKPOINT_MASTER_FLUSHED_OFFSET, 0);
        put(CHECKPOINT_CONFIRM_PHY_OFFSET, d.confirm_phy_offset);
        let file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        write_all_at(&file, &buf, 0).map_err(|e| Error::io(&self.path, e))?;
        file.set_len(CHECKPOINT_FILE_SIZE as u64)
            .map_err(|e| Error::io(&self.path, e))?;
        file.sync_data().map_err(|e| Error::io(&self.path, e))
    }
}

/// Positioned reads and writes: `pread`/`pwrite` on Unix; elsewhere a seek then a read/write on the handle (the
/// callers hold the file alone: at open, or under the `Mutex`).
#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(unix)]
fn write_all_at(file: &File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
}

#[cfg(not(unix))]
fn read_exact_at(mut file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buf)
}

#[cfg(not(unix))]
fn write_all_at(mut file: &File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    file.seek(SeekFrom::Start(offset))?;
    file.write_all(buf)
}
