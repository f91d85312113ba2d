//! The pull read path: `DefaultMessageStore#getMessage` as in RocketMQ 4.9, the batch-full
//! rule and the message filter hooks.
//!
//! Owns: `GetMessageStatus`, `GetMessageResult`, `MessageFilter`, `is_the_batch_full`, `get_message` (which asks
//! the CPU for a read's records ahead of checking them: a prefetch hint, no effect on what is read).
//!
//! Format: reads ConsumeQueue units and CommitLog records; `body` is the selected records concatenated.
//!
//! Invariants (the 4.9 loop, in order, per unit; `i` = bytes of units scanned):
//!   1. offset checks: no queue → NO_MATCHED_LOGIC_QUEUE (next 0); max == 0 → NO_MESSAGE_IN_QUEUE (next 0);
//!      offset < min → OFFSET_TOO_SMALL (next min); == max → OFFSET_OVERFLOW_ONE (next offset);
//!      above max → OFFSET_OVERFLOW_BADLY (next 0 if min == 0 else max); unit file missing →
//!      OFFSET_FOUND_NULL (next = roll_next_file(offset)).
//!   2. scan only the written units of the one ConsumeQueue file holding `offset`, while
//!      `i < max(max_filter_message_size, max_msg_nums*20)`; status starts NO_MATCHED_MESSAGE.
//!   3. skip units below `next_phy_file_start`; stop (uncounted) when the batch is full; tag miss → skip;
//!      record unreadable → MESSAGE_WAS_REMOVING if nothing found yet, jump to the next CommitLog file;
//!      a record that is not the whole, intact record the unit names (`record_matches_unit`: size,
//!      physical offset, topic, queue id and offset, body CRC unless `check_crc_on_recover` is off) → skipped
//!      like a filter miss, never served (4.9 serves whatever bytes the unit points at);
//!      property miss → skip; else add (FOUND).
//!   4. As in 4.9, a filter miss while nothing is found yet sets the status back to
//!      NO_MATCHED_MESSAGE (so a later tag miss overrides an earlier MESSAGE_WAS_REMOVING).
//!   5. `next_begin_offset = offset + i/20`; `max_phy_offset_pulling` = CommitLog offset of the last unit
//!      read (including the one that made the batch full; 0 if none).
//!
//! Names: `phy_offset`/`phy_size` are a unit's CommitLog offset and record size (Java's `offsetPy`/`sizePy`,
//! "physical"), `max_phy_offset` the CommitLog's max offset (Java's `maxOffsetPy`).
//!
//! Decisions: sizes are summed in i64 (Java's int overflow on a pre-blank unit's i32::MAX size is not
//! reproduced); the property filter gets the record's raw properties (empty if the record does not decode).
//!
//! Thread-safety: runs without locks on published data; the filter is called on the calling thread.

use crate::commit_log::{CommitLog, ReadCursor};
use crate::config::StoreConfig;
use crate::consume_queue::ConsumeQueue;
use crate::format::cq_unit::{CqUnit, CQ_STORE_UNIT_SIZE};
use crate::format::message::{decode_record, record_matches_unit};

/// RocketMQ's order; the discriminant is the ordinal the bindings return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum GetMessageStatus {
    Found = 0,
    NoMatchedMessage = 1,
    MessageWasRemoving = 2,
    OffsetFoundNull = 3,
    OffsetOverflowBadly = 4,
    OffsetOverflowOne = 5,
    OffsetTooSmall = 6,
    NoMatchedLogicQueue = 7,
    NoMessageInQueue = 8,
    OffsetReset = 9,
}

#[derive(Debug, Clone)]
pub struct GetMessageResult {
    pub status: GetMessageStatus,
    pub next_begin_offset: i64,
    pub min_offset: i64,
    pub max_offset: i64,
    pub message_count: i32,
    pub buffer_total_size: i64,
    pub suggest_pulling_from_slave: bool,
    pub body: Vec<u8>,
    pub max_phy_offset_pulling: i64,
}

impl GetMessageResult {
    fn empty(status: GetMessageStatus, next: i64, min: i64, max: i64) -> Self {
        GetMessageResult {
            status,
            next_begin_offset: next,
            min_offset: min,
            max_offset: max,
            message_count: 0,
            buffer_total_size: 0,
            suggest_pulling_from_slave: false,
            body: Vec::new(),
            max_phy_offset_pulling: 0,
        }
    }
}

/// `MessageFilter`: the tag check on the ConsumeQueue unit, then the property check on the record.
pub trait MessageFilter {
    /// `isMatchedByConsumeQueue(tagsCode)`.
    fn is_matched_by_consume_queue(&self, tags_code: i64) -> bool;
    /// `isMatchedByCommitLog`: `properties` is the record's raw properties string.
    fn is_matched_by_commit_log(&mut self, properties: &[u8]) -> bool;
    /// Whether `is_matched_by_commit_log` needs to be called at all.
    fn has_commit_log_filter(&self) -> bool {
        true
    }
    /// A filter that failed (e.g. a Python callback raised) asks the scan to stop here.
    fn aborted(&self) -> bool {
        false
    }
}

/// Tag codes only: None = match all; else `tags_code as i32` in the list.
pub struct TagCodeFilter<'a> {
    pub codes: Option<&'a [i32]>,
}

impl MessageFilter for TagCodeFilter<'_> {
    #[inline]
    fn is_matched_by_consume_queue(&self, tags_code: i64) -> bool {
        match self.codes {
            None => true,
            Some(c) => c.contains(&(tags_code as i32)),
        }
    }

    fn is_matched_by_commit_log(&mut self, _properties: &[u8]) -> bool {
        true
    }

    fn has_commit_log_filter(&self) -> bool {
        false
    }
}

/// `DefaultMessageStore.isTheBatchFull` (4.9).
pub fn is_the_batch_full(
    config: &StoreConfig,
    phy_size: i64,
    max_msg_nums: i64,
    buffer_total: i64,
    msg_total: i64,
    in_disk: bool,
) -> bool {
    if buffer_total == 0 || msg_total == 0 {
        return false;
    }
    if msg_total >= max_msg_nums {
        return true;
    }
    if in_disk {
        buffer_total + phy_size > config.max_transfer_bytes_on_message_in_disk
            || msg_total > config.max_transfer_count_on_message_in_disk - 1
    } else {
        buffer_total + phy_size > config.max_transfer_bytes_on_message_in_memory
            || msg_total > config.max_transfer_count_on_message_in_memory - 1
    }
}

/// What the body of a batch that starts with a record of `first` bytes can reach (the batch-full rule's limits): the
/// body is reserved once, not grown record by record.
fn body_capacity(config: &StoreConfig, first: usize, max_msg_nums: i64, in_disk: bool) -> usize {
    let (max_bytes, max_count) = if in_disk {
        (
            config.max_transfer_bytes_on_message_in_disk,
            config.max_transfer_count_on_message_in_disk,
        )
    } else {
        (
            config.max_transfer_bytes_on_message_in_memory,
            config.max_transfer_count_on_message_in_memory,
        )
    };
    let count = max_msg_nums.min(max_count).max(1) as usize;
    count
        .saturating_mul(first)
        .min((max_bytes.max(0) as usize).max(first))
}

/// The whole read. `cq` is None when the queue does not exist.
pub fn get_message(
    config: &StoreConfig,
    commit_log: &CommitLog,
    cq: Option<&ConsumeQueue>,
    offset: i64,
    max_msg_nums: i32,
    filter: &mut dyn MessageFilter,
) -> GetMessageResult {
    use GetMessageStatus::*;
    let max_phy_offset = commit_log.max_offset();
    let Some(cq) = cq else {
        return GetMessageResult::empty(NoMatchedLogicQueue, 0, 0, 0);
    };
    let min = cq.min_offset();
    let max = cq.max_offset();
    if max == 0 {
        return GetMessageResult::empty(NoMessageInQueue, 0, min, max);
    }
    if offset < min {
        return GetMessageResult::empty(OffsetTooSmall, min, min, max);
    }
    if offset == max {
        return GetMessageResult::empty(OffsetOverflowOne, offset, min, max);
    }
    if offset > max {
        let next = if min == 0 { min } else { max };
        return GetMessageResult::empty(OffsetOverflowBadly, next, min, max);
    }
    let Some((file, pos, len)) = cq.index_buffer(offset) else {
        return GetMessageResult::empty(OffsetFoundNull, cq.roll_next_file(offset), min, max);
    };
    let units = file.read(pos, len).expect("index buffer is published");

    let memory = config.memory_threshold();
    let max_msg_nums_l = max_msg_nums as i64;
    let cap = config
        .max_filter_message_size
        .max(max_msg_nums_l * CQ_STORE_UNIT_SIZE as i64);
    let mut r = GetMessageResult::empty(NoMatchedMessage, offset, min, max);
    let mut next_phy_file_start = i64::MIN;
    let mut max_phy_offset_pulling = 0i64;
    let mut i = 0usize;
    let use_cl_filter = filter.has_commit_log_filter();
    let mut cursor = ReadCursor::default();
    let mut ahead = ReadCursor::default(); // the next record's file (its prefetch)
    prefetch_headers(commit_log, &mut ahead, units, max_msg_nums);
    while i < units.len() && (i as i64) < cap {
        if units.len() - i < CQ_STORE_UNIT_SIZE {
            break;
        }
        let unit = CqUnit::decode(&units[i..]);
        let phy_offset = unit.offset;
        let phy_size = unit.size;
        max_phy_offset_pulling = phy_offset;
        if next_phy_file_start != i64::MIN && phy_offset < next_phy_file_start {
            i += CQ_STORE_UNIT_SIZE;
            continue;
        }
        let in_disk = max_phy_offset - phy_offset > memory;
        if is_the_batch_full(
            config,
            phy_size as i64,
            max_msg_nums_l,
            r.buffer_total_size,
            r.message_count as i64,
            in_disk,
        ) {
            break;
        }
        i += CQ_STORE_UNIT_SIZE;
        if !filter.is_matched_by_consume_queue(unit.tags_code) {
            if r.buffer_total_size == 0 {
                r.status = NoMatchedMessage;
            }
            continue;
        }
        let Some(record) = commit_log.read_with(&mut cursor, phy_offset, phy_size) else {
            if r.buffer_total_size == 0 {
                r.status = MessageWasRemoving;
            }
            next_phy_file_start = commit_log.roll_next_file(phy_offset);
            continue;
        };
        if units.len() - i >= PREFETCH_DISTANCE * CQ_STORE_UNIT_SIZE {
            // a record further on streams in while this one is checked (its first line is on its way already)
            let next = CqUnit::decode(&units[i + (PREFETCH_DISTANCE - 1) * CQ_STORE_UNIT_SIZE..]);
            if let Some(bytes) = commit_log.read_with(&mut ahead, next.offset, next.size) {
                prefetch(bytes, NEXT_RECORD_LINES);
            }
        }
        let queue_offset = offset + (i / CQ_STORE_UNIT_SIZE) as i64 - 1;
        if !record_matches_unit(
            record,
            phy_offset,
            &cq.topic,
            cq.queue_id(),
            queue_offset,
            config.check_crc_on_recover,
        ) {
            // a damaged record (or a unit pointing at the wrong bytes) is never served: skipped like a filter miss
            if r.buffer_total_size == 0 {
                r.status = NoMatchedMessage;
            }
            continue;
        }
        if use_cl_filter {
            let props = decode_record(record)
                .map(|rec| rec.properties)
                .unwrap_or(&[]);
            let matched = filter.is_matched_by_commit_log(props);
            if filter.aborted() {
                break;
            }
            if !matched {
                if r.buffer_total_size == 0 {
                    r.status = NoMatchedMessage;
                }
                continue;
            }
        }
        if r.body.is_empty() {
            r.body
                .reserve(body_capacity(config, record.len(), max_msg_nums_l, in_disk));
        }
        r.body.extend_from_slice(record);
        r.message_count += 1;
        r.buffer_total_size += record.len() as i64;
        r.status = Found;
        next_phy_file_start = i64::MIN;
    }
    r.next_begin_offset = offset + (i / CQ_STORE_UNIT_SIZE) as i64;
    r.max_phy_offset_pulling = max_phy_offset_pulling;
    r.suggest_pulling_from_slave = max_phy_offset - max_phy_offset_pulling > memory;
    r
}

/// At most this many records of one read have their first lines asked for before the read starts.
const PREFETCH_RECORDS: usize = 64;
/// A record ahead is asked for up to this many cache lines (2 KiB: a 1 KiB message whole; past that the hardware
/// follows a record read in order by itself).
const NEXT_RECORD_LINES: usize = 32;
/// While a record is checked, the record this many further on is asked for (the first ones up front).
const PREFETCH_DISTANCE: usize = 2;

/// The first cache line of each record the read is about to check (its header: `record_matches_unit` reads it
/// first; the first `PREFETCH_DISTANCE` records whole), asked for at once, so that their misses overlap instead of coming one record at a time. A queue's
/// records lie apart in the CommitLog (the other queues' records between them), so the hardware fetches them ahead
/// only when the neighbouring queues were just read (one consumer pulling every queue in turn), not when several
/// connections pull the queues at their own pace. A hint only: nothing read changes.
fn prefetch_headers(
    commit_log: &CommitLog,
    cursor: &mut ReadCursor,
    units: &[u8],
    max_msg_nums: i32,
) {
    let n = (units.len() / CQ_STORE_UNIT_SIZE)
        .min(max_msg_nums.max(1) as usize)
        .min(PREFETCH_RECORDS);
    for k in 0..n {
        let unit = CqUnit::decode(&units[k * CQ_STORE_UNIT_SIZE..]);
        if let Some(bytes) = commit_log.read_with(cursor, unit.offset, unit.size) {
            prefetch(
                bytes,
                if k < PREFETCH_DISTANCE {
                    NEXT_RECORD_LINES
                } else {
                    1
                },
            );
        }
    }
}

/// Asks the CPU to start loading the cache lines of `bytes` (at most `max_lines` of them) into its caches. A hint:
/// no effect on any result, no fault on a page not present; a no-op off x86_64.
#[inline]
fn prefetch(bytes: &[u8], max_lines: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        const LINE: usize = 64;
        let lines = bytes.len().div_ceil(LINE).min(max_lines);
        for k in 0..lines {
            // SAFETY: a prefetch reads nothing and cannot fault; the address is inside `bytes`
            unsafe { _mm_prefetch::<_MM_HINT_T0>(bytes.as_ptr().add(k * LINE).cast::<i8>()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (bytes, max_lines);
}
