//! Master/slave replication at the store level (4.9's `DefaultMessageStore.getCommitLogData` and
//! `appendToCommitLog` + the slave's `ReputMessageService`): the master reads raw CommitLog bytes to ship, the
//! slave appends them at exactly the master's offsets and dispatches every whole record they complete.
//!
//! Owns: `get_commit_log_data`, `append_commit_log`, the slave's dispatch position (`WriteState.reput_from`).
//!
//! Format: raw CommitLog bytes (records, BLANK, the zeros after a BLANK), as `format::message` lays them out.
//!
//! Invariants:
//!   1. `get_commit_log_data(offset, max)`: the published bytes of the one file holding `offset`, from `offset` to
//!      that file's written end, at most `max` bytes; never across a file end (4.9 `CommitLog.getData`).
//!   2. `append_commit_log(offset, data)` appends only at the CommitLog's end (`offset == max_physical_offset`), or,
//!      into an empty CommitLog, at a file boundary; never across a file end. Anything else is refused
//!      (`InvalidArgument`) and nothing is written.
//!   3. Before anything is published, the bytes from the dispatch position to the end of the new data are parsed:
//!      every whole record must decode, carry its own offset as PHYSICALOFFSET and fit its file; a BLANK must fill
//!      its file exactly. Otherwise the append is refused (`Corrupt`) and the new bytes are zeroed, unpublished.
//!      A record cut by the end of the data (the master's batches split records) waits for the next append.
//!   4. Every whole record is dispatched once, in order, under the write mutex: its ConsumeQueue unit at its own
//!      QUEUEOFFSET (not for PREPARED/ROLLBACK), then its index keys (inline, or by the index builder thread for a
//!      large append, as for a put: `build_index_service`); the result names each (topic, queue) that got
//!      units with the queue's new max offset, in order of first appearance (the broker wakes long polls with it).
//!   5. The dispatch position starts at the recovered end (recovery leaves whole records only) and follows puts;
//!      a store should either take puts (a master) or appends (a slave).
//!
//! Thread-safety: both run under the engine's rules: reads lock-free, appends under the write mutex.

use crate::build_index_service::BUILD_INDEX_HANDOFF_MESSAGES;
use crate::commit_log::SelectedBuffer;
use crate::error::{Error, Result};
use crate::format::index::is_indexed_sys_flag;
use crate::format::message::{
    be_i32, check_record, RecordCheck, BLANK_MAGIC, MAGIC_POSITION, MAGIC_V1, MAGIC_V2,
    MIN_RECORD_LEN_V1_IPV4,
};
use crate::message_store::MessageStore;
use crate::recovery::dispatch_unit_of;
use std::sync::atomic::Ordering;

/// One (topic, queue) that got units in an append, and its max offset after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchedQueue {
    pub topic: String,
    pub queue_id: i32,
    pub max_offset: i64,
}

/// What parsing found at one position of the appended range.
enum Step {
    /// A whole record of this many bytes.
    Record(usize),
    /// A BLANK: the rest of the file is padding.
    Blank,
    /// The record continues past the data given so far.
    Incomplete,
}

fn step(bytes: &[u8], offset: i64, file_remaining: usize) -> Result<Step> {
    if bytes.len() < 8 {
        return Ok(Step::Incomplete);
    }
    let size = be_i32(bytes, 0);
    let magic = be_i32(bytes, MAGIC_POSITION);
    if magic == BLANK_MAGIC {
        if size < 0 || size as usize != file_remaining {
            return Err(Error::corrupt(
                offset,
                format!("BLANK of {size} bytes but {file_remaining} bytes are left in its file"),
            ));
        }
        return Ok(Step::Blank);
    }
    if magic != MAGIC_V1 && magic != MAGIC_V2 {
        return Err(Error::corrupt(
            offset,
            format!("bad magic 0x{:08X}", magic as u32),
        ));
    }
    if size < MIN_RECORD_LEN_V1_IPV4 as i32 || size as usize > file_remaining {
        return Err(Error::corrupt(
            offset,
            format!("total size {size} impossible with {file_remaining} bytes left in its file"),
        ));
    }
    let size = size as usize;
    if size > bytes.len() {
        return Ok(Step::Incomplete);
    }
    match check_record(&bytes[..size], false) {
        RecordCheck::Record(r) if r.physical_offset == offset => Ok(Step::Record(size)),
        RecordCheck::Record(r) => Err(Error::corrupt(
            offset,
            format!(
                "the record says PHYSICALOFFSET {} (not the offset it is appended at)",
                r.physical_offset
            ),
        )),
        RecordCheck::Blank => unreachable!("magic checked"),
        RecordCheck::Invalid(reason) => Err(Error::corrupt(offset, reason)),
    }
}

impl MessageStore {
    /// Invariant 1 (`getCommitLogData`): None when no file holds `offset` or nothing is written there yet.
    pub fn get_commit_log_data(
        &self,
        offset: i64,
        max_size: i64,
    ) -> Result<Option<SelectedBuffer>> {
        self.check_open()?;
        if max_size <= 0 || offset < 0 {
            return Err(Error::InvalidArgument(format!(
                "offset must be >= 0 and max_size > 0, got {offset}, {max_size}"
            )));
        }
        let Some(file) = self.inner.commit_log.queue.find(offset) else {
            return Ok(None);
        };
        let pos = (offset as u64 - file.start()) as usize;
        let wrote = file.wrote_position();
        if pos >= wrote {
            return Ok(None);
        }
        let len = (wrote - pos).min(max_size as usize);
        Ok(self.inner.commit_log.select(offset, len as i64))
    }

    /// Invariants 2–4: appends `data` at `offset` and dispatches the records it completes.
    pub fn append_commit_log(&self, offset: i64, data: &[u8]) -> Result<Vec<DispatchedQueue>> {
        self.check_open()?;
        let mut ws = self.write.lock().unwrap_or_else(|e| e.into_inner());
        self.check_open()?;
        let cl = &self.inner.commit_log;
        let fs = cl.file_size() as i64;
        let end = cl.max_offset();
        let empty = cl.queue.is_empty();
        if empty {
            if offset < 0 || offset % fs != 0 {
                return Err(Error::InvalidArgument(format!(
                    "append at {offset}: an empty CommitLog can only start at a file boundary (file size {fs})"
                )));
            }
        } else if offset != end {
            return Err(Error::InvalidArgument(format!(
                "append at {offset} but the CommitLog ends at {end} (a gap or an overlap)"
            )));
        }
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let file = match cl.queue.last() {
            Some(f) if f.wrote_position() < f.size() => f,
            Some(f) => cl.queue.create_file(f.end())?,
            None => cl.queue.create_file(offset as u64)?,
        };
        ws.current = None;
        if empty {
            ws.reput_from = offset;
        }
        let pos = (offset as u64 - file.start()) as usize;
        if pos + data.len() > file.size() {
            return Err(Error::InvalidArgument(format!(
                "append of {} bytes at {offset} crosses the end of the file at {} ({} bytes left)",
                data.len(),
                file.end(),
                file.size() - pos
            )));
        }
        file.ensure_reserved(pos + data.len())?;
        // SAFETY: write mutex held; `pos` is the unpublished end of the last file.
        unsafe { file.write_slice(pos, data.len()) }.copy_from_slice(data);
        let new_wrote = pos + data.len();
        // parse from the dispatch position (invariant 3) before publishing anything
        // (files end with a BLANK, so nothing incomplete is left behind in an earlier file)
        let reput = ws.reput_from.max(file.start() as i64);
        // SAFETY: write mutex held; bytes below `new_wrote` were just written or are published.
        let whole = unsafe { file.whole() };
        let mut records: Vec<(usize, usize)> = Vec::new();
        let mut p = (reput - file.start() as i64) as usize;
        let mut blank_at: Option<usize> = None;
        let failed = loop {
            if p >= new_wrote {
                break None;
            }
            match step(
                &whole[p..new_wrote],
                file.start() as i64 + p as i64,
                file.size() - p,
            ) {
                Ok(Step::Record(n)) => {
                    records.push((p, n));
                    p += n;
                }
                Ok(Step::Blank) => {
                    blank_at = Some(p);
                    break None;
                }
                Ok(Step::Incomplete) => break None,
                Err(e) => break Some(e),
            }
        };
        if let Some(e) = failed {
            // SAFETY: unpublished bytes of this append.
            unsafe { file.write_slice(pos, data.len()) }.fill(0);
            return Err(e);
        }
        file.set_wrote_position(new_wrote);
        let new_reput = match blank_at {
            Some(_) => file.end() as i64,
            None => file.start() as i64 + p as i64,
        };
        ws.reput_from = new_reput;
        // dispatch (invariant 4)
        let mut out: Vec<DispatchedQueue> = Vec::new();
        // a large append (or any while earlier ranges are pending) leaves its index to the builder thread, as a put
        let stopped = self.inner.index_stopped.load(Ordering::Acquire);
        let handoff = self.index_builder.as_ref().filter(|b| {
            !stopped && (records.len() >= BUILD_INDEX_HANDOFF_MESSAGES || !b.is_idle())
        });
        let mut index_writer = match (&self.inner.index, stopped, handoff.is_some()) {
            (Some(index), false, false) => Some(index.writer()),
            _ => None,
        };
        if let (Some(b), Some(&(a, _)), Some(&(z, n))) = (handoff, records.first(), records.last())
        {
            let start = file.start() as i64;
            b.submit(start + a as i64, start + (z + n) as i64);
        }
        let mut last_ts = None;
        let mut logics_ts = None;
        for (at, n) in records {
            let RecordCheck::Record(rec) = check_record(&whole[at..at + n], false) else {
                continue;
            };
            let off = file.start() as i64 + at as i64;
            last_ts = Some(rec.store_timestamp);
            if let Some(unit) = dispatch_unit_of(off, &rec) {
                let topic = String::from_utf8_lossy(rec.topic);
                if crate::format::message::is_legal_topic(&topic) && rec.queue_id >= 0 {
                    let q = self.inner.queue_or_create(&topic, rec.queue_id)?;
                    if q.write_unit(rec.queue_offset, unit)? {
                        logics_ts = Some(rec.store_timestamp);
                        let max = q.max_offset();
                        match out
                            .iter_mut()
                            .rev()
                            .find(|d| d.queue_id == rec.queue_id && d.topic == topic)
                        {
                            Some(d) => d.max_offset = max,
                            None => out.push(DispatchedQueue {
                                topic: topic.into_owned(),
                                queue_id: rec.queue_id,
                                max_offset: max,
                            }),
                        }
                    }
                }
            }
            if let Some(w) = index_writer.as_mut() {
                if is_indexed_sys_flag(rec.sys_flag) {
                    if let Err(e) =
                        w.build_index(rec.topic, rec.properties, off, rec.store_timestamp)
                    {
                        self.inner.stop_index(&e);
                        index_writer = None;
                    }
                }
            }
        }
        if let Some(ts) = last_ts {
            self.inner.last_physic_ts.store(ts, Ordering::Release);
        }
        if let Some(ts) = logics_ts {
            self.inner.last_logics_ts.store(ts, Ordering::Release);
        }
        drop(ws);
        // a SYNC_FLUSH slave flushes what it copies at once (4.9's GroupCommitService flushes it every 10 ms);
        // under ASYNC_FLUSH the timed flush leaves it to the tick, as the master's puts
        let cfg = &self.inner.config;
        if cfg.flush_disk_type == crate::config::FlushDiskType::SyncFlush
            || !cfg.flush_commit_log_timed
        {
            self.flush.wake();
        }
        Ok(out)
    }
}
