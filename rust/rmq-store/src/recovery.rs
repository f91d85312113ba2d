//! Recovery on open (docs/CORE_API.md §7), apart from the write path.
//!
//! Owns: ConsumeQueue recovery, CommitLog recovery (normal and abnormal), truncation of dirty ConsumeQueue
//! units, re-dispatch, and the `RecoveryReport`.
//!
//! Format: reads `commitlog/`, `consumequeue/`, `checkpoint`; zeroes torn bytes in place.
//!
//! Invariants:
//!   1. ConsumeQueue: the last valid unit (`offset >= 0 && size > 0`, pre-blank counts) is found scanning
//!      from the end of the last file backwards, file by file; max = after it; the rest of its file is
//!      zeroed and later files are deleted. No valid unit at all: the first file is kept empty (max = min =
//!      its start), the others are deleted. min = first unit (from the first file's start) that is not
//!      pre-blank, capped at max.
//!   2. CommitLog: scan record by record (magic v1/v2, lengths adding up to TOTALSIZE, CRC when
//!      `check_crc_on_recover`) from the start of: normal → the last 3 files; abnormal → the last file whose
//!      start ≤ checkpoint confirmPhyOffset (the first file when that is 0 or below every file). BLANK → next
//!      file; BLANK in the last file → the end is that file's end. The first invalid record (zeros included)
//!      is the end, even with valid records after it.
//!   3. After the end: the holding file keeps `end - start` written bytes and the bytes up to its last
//!      non-zero byte are zeroed; files starting after the end are deleted; earlier files are full.
//!      `truncated_bytes` = (1 + global offset of the last non-zero byte in the holding file at/after the end
//!      or in a later file) − end, or 0.
//!   4. Both modes: every queue loses its trailing units whose CommitLog offset ≥ end (pre-blank units stop
//!      the removal); `cq_truncated_units` counts them.
//!   5. Abnormal only: re-dispatch every valid record from
//!      `clamp(min(confirmPhyOffset, min over queues with a real unit of their max_phys_end), cl_min, end)`
//!      to the end; PREPARED/ROLLBACK records are skipped; a record is skipped when
//!      `offset + size <= queue.max_phys_end` or its QUEUEOFFSET < the queue's max; `redispatched` counts
//!      units written.
//!
//! Thread-safety: runs before the engine is shared (single-threaded).

use std::sync::atomic::Ordering;

use crate::commit_log::CommitLog;
use crate::consume_queue::ConsumeQueue;
use crate::error::Result;
use crate::format::cq_unit::{CqUnit, CQ_STORE_UNIT_SIZE};
use crate::format::message::{
    check_record, is_tx_prepared_or_rollback, tags_code_of_properties, RecordCheck,
};
use crate::format::RECOVER_NORMAL_FILE_COUNT;
use crate::mapped_file::last_non_zero_end;

const UNIT: usize = CQ_STORE_UNIT_SIZE;

/// What the last open did (`recovery_report()`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    pub abnormal: bool,
    pub commit_log_end: i64,
    pub truncated_bytes: i64,
    pub redispatched: i64,
    pub cq_truncated_units: i64,
    /// Records (re)indexed into `index/` at open (those after the index's endPhyOffset).
    pub index_rebuilt: i64,
    /// Index files refused (moved to `index_refused/`) or deleted (abnormal exit, or beyond a truncated end).
    pub index_files_refused: i64,
    pub index_files_dropped: i64,
}

/// Invariant 1.
pub fn recover_consume_queue(cq: &ConsumeQueue) -> Result<()> {
    let files = cq.queue.snapshot();
    if files.is_empty() {
        cq.min_offset.store(0, Ordering::Release);
        cq.max_offset.store(0, Ordering::Release);
        cq.max_phys_end.store(-1, Ordering::Release);
        return Ok(());
    }
    let mut found: Option<(usize, usize)> = None; // (file index, unit index in file)
    'files: for (fi, f) in files.iter().enumerate().rev() {
        // SAFETY: recovery runs before the engine is shared.
        let bytes = unsafe { f.whole() };
        let n = bytes.len() / UNIT;
        for ui in (0..n).rev() {
            if CqUnit::decode(&bytes[ui * UNIT..]).is_valid() {
                found = Some((fi, ui));
                break 'files;
            }
        }
    }
    let (keep_idx, wrote) = match found {
        Some((fi, ui)) => (fi, (ui + 1) * UNIT),
        None => (0, 0),
    };
    for f in &files[..keep_idx] {
        f.reset_positions(f.size());
    }
    let holder = &files[keep_idx];
    // SAFETY: as above.
    let tail_end = wrote + last_non_zero_end(unsafe { &holder.whole()[wrote..] });
    holder.reset_positions(wrote);
    holder.zero_range(wrote, tail_end)?;
    cq.queue.delete_from_index(keep_idx + 1)?;
    let max = (holder.start() as usize + wrote) as i64 / UNIT as i64;
    cq.max_offset.store(max, Ordering::Release);
    // min: first unit that is not pre-blank
    let first_start = files[0].start() as i64 / UNIT as i64;
    let mut min = first_start;
    while min < max {
        match cq.unit_at(min) {
            Some(u) if u.is_pre_blank() => min += 1,
            _ => break,
        }
    }
    cq.min_offset.store(min, Ordering::Release);
    cq.max_phys_end
        .store(last_real_unit_end(cq), Ordering::Release);
    Ok(())
}

/// offset + size of the last unit that is not pre-blank, −1 if none.
fn last_real_unit_end(cq: &ConsumeQueue) -> i64 {
    let min_start = cq
        .queue
        .first()
        .map(|f| f.start() as i64 / UNIT as i64)
        .unwrap_or(0);
    let mut off = cq.max_offset() - 1;
    while off >= min_start {
        match cq.unit_at(off) {
            Some(u) if !u.is_pre_blank() => return u.offset + u.size as i64,
            Some(_) => off -= 1,
            None => break,
        }
    }
    -1
}

/// Invariants 2 and 3: returns (end, truncated_bytes).
pub fn recover_commit_log(
    cl: &CommitLog,
    abnormal: bool,
    confirm_phy_offset: i64,
    check_crc: bool,
) -> Result<(i64, i64)> {
    let files = cl.queue.snapshot();
    if files.is_empty() {
        return Ok((0, 0));
    }
    let start_idx = if abnormal {
        if confirm_phy_offset <= 0 {
            0
        } else {
            files
                .iter()
                .rposition(|f| (f.start() as i64) <= confirm_phy_offset)
                .unwrap_or(0)
        }
    } else {
        files.len().saturating_sub(RECOVER_NORMAL_FILE_COUNT)
    };
    let mut idx = start_idx;
    let mut pos = 0usize;
    let end: i64 = loop {
        let f = &files[idx];
        // SAFETY: recovery runs before the engine is shared.
        let bytes = unsafe { f.whole() };
        if pos >= bytes.len() {
            if idx + 1 < files.len() {
                idx += 1;
                pos = 0;
                continue;
            }
            break f.end() as i64;
        }
        match check_record(&bytes[pos..], check_crc) {
            RecordCheck::Record(r) => pos += r.total_size as usize,
            RecordCheck::Blank => {
                if idx + 1 < files.len() {
                    idx += 1;
                    pos = 0;
                } else {
                    break f.end() as i64;
                }
            }
            RecordCheck::Invalid(_) => break (f.start() + pos as u64) as i64,
        }
    };
    // truncated bytes: last non-zero byte at/after `end`
    let mut garbage_end = end;
    for f in files.iter().rev() {
        if (f.end() as i64) <= end {
            break;
        }
        let from = (end - f.start() as i64).max(0) as usize;
        // SAFETY: as above.
        let nz = last_non_zero_end(unsafe { &f.whole()[from..] });
        if nz > 0 {
            garbage_end = f.start() as i64 + (from + nz) as i64;
            break;
        }
    }
    let truncated = (garbage_end - end).max(0);
    // cut: earlier files full, holder keeps end - start, zero its garbage, delete later files
    let mut delete_from = files.len();
    for (i, f) in files.iter().enumerate() {
        let (s, e) = (f.start() as i64, f.end() as i64);
        if e <= end {
            f.reset_positions(f.size());
        } else if s <= end {
            let p = (end - s) as usize;
            let zero_to = ((garbage_end - s).max(0) as usize).min(f.size());
            f.reset_positions(p);
            f.zero_range(p, zero_to)?;
        } else {
            delete_from = delete_from.min(i);
        }
    }
    cl.queue.delete_from_index(delete_from)?;
    Ok((end, truncated))
}

/// Invariant 4: returns the number of units removed from this queue.
pub fn truncate_dirty_units(cq: &ConsumeQueue, end: i64) -> Result<i64> {
    let max = cq.max_offset();
    let first = cq
        .queue
        .first()
        .map(|f| f.start() as i64 / UNIT as i64)
        .unwrap_or(0);
    let mut new_max = max;
    while new_max > first {
        match cq.unit_at(new_max - 1) {
            Some(u) if !u.is_pre_blank() && u.offset >= end => new_max -= 1,
            _ => break,
        }
    }
    if new_max == max {
        return Ok(0);
    }
    cq.queue.truncate(new_max * UNIT as i64)?;
    cq.max_offset.store(new_max, Ordering::Release);
    if cq.min_offset() > new_max {
        cq.min_offset.store(new_max, Ordering::Release);
    }
    cq.max_phys_end
        .store(last_real_unit_end(cq), Ordering::Release);
    Ok(max - new_max)
}

/// Calls `f(offset, record)` for every valid record from `from` to `end` (BLANK → next file).
pub fn for_each_record(
    cl: &CommitLog,
    from: i64,
    end: i64,
    mut f: impl FnMut(i64, crate::format::message::Record<'_>) -> Result<()>,
) -> Result<()> {
    let mut off = from;
    while off < end {
        let Some(file) = cl.queue.find(off) else {
            break;
        };
        let pos = (off as u64 - file.start()) as usize;
        let bytes = file.written();
        if pos >= bytes.len() {
            off = file.end() as i64;
            continue;
        }
        match check_record(&bytes[pos..], false) {
            RecordCheck::Record(r) => {
                let size = r.total_size as i64;
                f(off, r)?;
                off += size;
            }
            RecordCheck::Blank => off = file.end() as i64,
            RecordCheck::Invalid(_) => break,
        }
    }
    Ok(())
}

/// Invariant 5 for one record: the unit to (re)dispatch, if any.
pub fn dispatch_unit_of(offset: i64, r: &crate::format::message::Record<'_>) -> Option<CqUnit> {
    if is_tx_prepared_or_rollback(r.sys_flag) {
        return None;
    }
    Some(CqUnit {
        offset,
        size: r.total_size,
        tags_code: tags_code_of_properties(r.properties),
    })
}
