//! One ConsumeQueue: the index of one (topic, queue id) into the CommitLog, a run of 20-byte units.
//!
//! Owns: unit writes (with pre-blank filling), unit reads, min/max logical offsets, the filtered bulk scan,
//! `correct_min_offset`.
//!
//! Format: `<root>/consumequeue/<topic>/<queueId>/<20-digit start byte>`; files of
//! `mapped_file_size_consume_queue` bytes (a multiple of 20); unit N at global byte N×20 (`format::cq_unit`).
//!
//! Invariants:
//!   1. `max_offset` = next logical offset to assign = (end of the last written unit) / 20; published with
//!      Release after the unit bytes and the file's write position.
//!   2. Units in `[min_offset, max_offset)` are real units or pre-blank gap fillers; units below
//!      `min_offset` are pre-blank or point at deleted CommitLog data.
//!   3. When a queue's first file is created for a unit at logical offset N ≠ file start, the units before N
//!      in that file are pre-blank `(0, i32::MAX, 0)` and `min_offset = N` (RocketMQ `fillPreBlank`). A write
//!      past `max_offset` in an existing queue fills the gap with pre-blank units too.
//!   4. `max_phys_end` = offset + size of the last real unit (−1 if none): re-dispatch skips records
//!      ending at or below it.
//!
//! Thread-safety: reads are lock-free; `prepare`/`write_unit`/`truncate_from`/`correct_min_offset` run
//! under the engine's write mutex (or during recovery).

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use crate::error::Result;
use crate::format::cq_unit::{CqUnit, CQ_STORE_UNIT_SIZE, MSG_TAG_LOW32_INDEX};
use crate::mapped_file::MappedFile;
use crate::mapped_file_queue::MappedFileQueue;

const UNIT: usize = CQ_STORE_UNIT_SIZE;

pub struct ConsumeQueue {
    pub(crate) topic: String,
    pub(crate) queue_id: i32,
    pub(crate) queue: MappedFileQueue,
    pub(crate) min_offset: AtomicI64,
    pub(crate) max_offset: AtomicI64,
    pub(crate) max_phys_end: AtomicI64,
}

impl ConsumeQueue {
    /// Opens (or creates the directory of) one queue; recovery then sets its offsets.
    pub fn load(dir: &Path, topic: &str, queue_id: i32, file_size: usize) -> Result<ConsumeQueue> {
        let queue = MappedFileQueue::load(dir, file_size)?;
        Ok(ConsumeQueue {
            topic: topic.to_string(),
            queue_id,
            queue,
            min_offset: AtomicI64::new(0),
            max_offset: AtomicI64::new(0),
            max_phys_end: AtomicI64::new(-1),
        })
    }

    #[inline]
    pub fn topic(&self) -> &str {
        &self.topic
    }

    #[inline]
    pub fn queue_id(&self) -> i32 {
        self.queue_id
    }

    #[inline]
    pub fn min_offset(&self) -> i64 {
        self.min_offset.load(Ordering::Acquire)
    }

    #[inline]
    pub fn max_offset(&self) -> i64 {
        self.max_offset.load(Ordering::Acquire)
    }

    #[inline]
    pub fn units_per_file(&self) -> i64 {
        (self.queue.file_size() / UNIT) as i64
    }

    /// `rollNextFile(offset)`: first logical offset of the next file.
    #[inline]
    pub fn roll_next_file(&self, offset: i64) -> i64 {
        let n = self.units_per_file();
        offset + n - offset.rem_euclid(n)
    }

    /// `getIndexBuffer`: the file holding unit `offset` and the published unit bytes from it to that file's
    /// written end. None if the file is missing or the unit is not written.
    pub fn index_buffer(&self, offset: i64) -> Option<(Arc<MappedFile>, usize, usize)> {
        let global = offset.checked_mul(UNIT as i64)?;
        let file = self.queue.find(global)?;
        let pos = (global as u64 - file.start()) as usize;
        let wrote = file.wrote_position();
        if pos >= wrote {
            return None;
        }
        Some((file, pos, wrote - pos))
    }

    /// The unit at logical `offset` if published.
    pub fn unit_at(&self, offset: i64) -> Option<CqUnit> {
        let global = offset.checked_mul(UNIT as i64)?;
        let file = self.queue.find(global)?;
        let pos = (global as u64 - file.start()) as usize;
        file.read(pos, UNIT).map(CqUnit::decode)
    }

    /// The file that will hold global byte `global`, creating it (and any files before it) if needed.
    fn file_for_write(&self, global: u64) -> Result<Arc<MappedFile>> {
        let fs = self.queue.file_size() as u64;
        if let Some(f) = self.queue.find(global as i64) {
            return Ok(f);
        }
        loop {
            let next_start = match self.queue.last() {
                Some(last) => last.end(),
                None => global - global % fs,
            };
            let f = self.queue.create_file(next_start)?;
            if f.end() > global {
                return Ok(f);
            }
        }
    }

    /// Makes sure the unit at logical `offset` has a file (so a failed file creation happens before the
    /// CommitLog record is written). Writer only.
    pub fn prepare(&self, offset: i64) -> Result<()> {
        self.file_for_write(offset as u64 * UNIT as u64).map(|_| ())
    }

    /// The file holding the unit at logical `offset` and the position `ahead` bytes past that unit (what the
    /// warm-ahead thread should fault next), None when no file holds it.
    pub fn warm_request(&self, offset: i64, ahead: usize) -> Option<(Arc<MappedFile>, usize)> {
        let global = offset as u64 * UNIT as u64;
        let file = self.queue.find(global as i64)?;
        let pos = (global - file.start()) as usize;
        Some((file, pos + ahead))
    }

    /// `prepare` for a writer keeping the queue's file at hand through a put: `file` stays when it holds the unit
    /// at `offset`, else becomes the file that does (created if needed). Writer only.
    pub fn prepare_in(&self, file: &mut Option<Arc<MappedFile>>, offset: i64) -> Result<()> {
        let global = offset as u64 * UNIT as u64;
        if file
            .as_ref()
            .is_some_and(|f| f.start() <= global && global + UNIT as u64 <= f.end())
        {
            return Ok(());
        }
        *file = Some(self.file_for_write(global)?);
        Ok(())
    }

    fn put_raw(&self, offset: i64, unit: &CqUnit) -> Result<()> {
        let global = offset as u64 * UNIT as u64;
        let file = self.file_for_write(global)?;
        Self::put_raw_in(&file, global, unit);
        Ok(())
    }

    fn put_raw_in(file: &MappedFile, global: u64, unit: &CqUnit) {
        let pos = (global - file.start()) as usize;
        // SAFETY: writer only; `pos` is at/after the published end (offset >= max_offset).
        unsafe { file.write_slice(pos, UNIT) }.copy_from_slice(&unit.encode());
        file.set_wrote_position(pos + UNIT);
    }

    /// Writes `unit` at logical `offset` (invariant 3 for gaps). A unit below `max_offset` is skipped
    /// (returns false), as RocketMQ does for repeated dispatch. A unit more than one file's worth of units past
    /// `max_offset` in a non-empty queue is refused too (returns false): puts never leave a gap, so only a
    /// damaged QUEUEOFFSET (no checksum covers it) met by recovery's re-dispatch asks for one, and filling it would
    /// create every file up to it (20,000 files for one flipped byte, found by fuzzing). Writer only.
    pub fn write_unit(&self, offset: i64, unit: CqUnit) -> Result<bool> {
        let max = self.max_offset();
        if offset < max || (!self.queue.is_empty() && offset - max > self.units_per_file()) {
            return Ok(false);
        }
        let mut cur = max;
        if self.queue.is_empty() {
            // first file of the queue: pre-blank from its start (fillPreBlank), min = offset
            let global = offset as u64 * UNIT as u64;
            let fs = self.queue.file_size() as u64;
            cur = ((global - global % fs) / UNIT as u64) as i64;
            self.min_offset.store(offset, Ordering::Release);
        }
        while cur < offset {
            self.put_raw(cur, &CqUnit::PRE_BLANK)?;
            cur += 1;
        }
        self.put_raw(offset, &unit)?;
        if !unit.is_pre_blank() {
            self.max_phys_end
                .store(unit.offset + unit.size as i64, Ordering::Release);
        }
        self.max_offset.store(offset + 1, Ordering::Release);
        Ok(true)
    }

    /// Fast path of `write_unit` for the next offset in a queue whose file is prepared. Writer only.
    #[inline]
    pub fn append_unit(&self, offset: i64, unit: CqUnit) -> Result<()> {
        if offset != self.max_offset() || self.queue.is_empty() {
            return self.write_unit(offset, unit).map(|_| ());
        }
        self.put_raw(offset, &unit)?;
        self.max_phys_end
            .store(unit.offset + unit.size as i64, Ordering::Release);
        self.max_offset.store(offset + 1, Ordering::Release);
        Ok(())
    }

    /// `append_unit` into `file`, the queue's file from `prepare_in` (no file lookup), when it holds the unit at the
    /// next offset; anything else goes through `append_unit`. Writer only.
    #[inline]
    pub fn append_unit_in(&self, file: &MappedFile, offset: i64, unit: CqUnit) -> Result<()> {
        let global = offset as u64 * UNIT as u64;
        if offset != self.max_offset() || global < file.start() || global + UNIT as u64 > file.end()
        {
            return self.append_unit(offset, unit);
        }
        // `file` came from this queue, so it is not empty: `append_unit`'s plain path
        Self::put_raw_in(file, global, &unit);
        self.max_phys_end
            .store(unit.offset + unit.size as i64, Ordering::Release);
        self.max_offset.store(offset + 1, Ordering::Release);
        Ok(())
    }

    /// Units `[start, end)` that exist, concatenated into `out`, keeping those whose `tags_code as i32` is
    /// in `codes` (all when None). Missing files are skipped.
    pub fn scan_units(&self, start: i64, end: i64, codes: Option<&[i32]>, out: &mut Vec<u8>) {
        if start >= end {
            return;
        }
        let fs = self.queue.file_size() as i64;
        let mut global = start * UNIT as i64;
        let global_end = end * UNIT as i64;
        while global < global_end {
            let file_start = global - global % fs;
            let stop = global_end.min(file_start + fs);
            if let Some(file) = self.queue.find(global) {
                let written = file.written();
                let from = (global - file_start) as usize;
                let to = ((stop - file_start) as usize).min(written.len());
                if from < to {
                    scan_slice(&written[from..to], codes, out);
                }
            }
            global = stop;
        }
    }

    /// `correctMinOffset`: min = first unit from the current min whose CommitLog offset ≥ `min_phys`
    /// (max when none); then deletes files wholly below the new min (never the last file). Writer only.
    pub fn correct_min_offset(&self, min_phys: i64) -> Result<()> {
        self.correct_min_offset_only(min_phys);
        self.queue
            .delete_files_before(self.min_offset() * UNIT as i64)?;
        Ok(())
    }

    /// The min-offset half of `correct_min_offset` (no file deletion): what open does after recovery,
    /// as RocketMQ's `recoverTopicQueueTable`.
    pub fn correct_min_offset_only(&self, min_phys: i64) {
        let max = self.max_offset();
        let mut off = self.min_offset();
        while off < max {
            match self.unit_at(off) {
                Some(u) if u.offset >= min_phys && !u.is_pre_blank() => break,
                _ => off += 1,
            }
        }
        self.min_offset.store(off, Ordering::Release);
    }

    pub fn flush(&self) -> Result<i64> {
        self.queue.flush()
    }

    /// The flush thread's rule (4.9's `flush(flushConsumeQueueLeastPages)`): msyncs the queue when at least
    /// `least_pages` pages are dirty (0: any unflushed unit). Returns true when no unit written before the call is
    /// left unflushed.
    pub fn flush_if_dirty(&self, least_pages: usize) -> Result<bool> {
        if self.queue.is_able_to_flush(least_pages) {
            self.queue.flush()?;
            return Ok(true);
        }
        Ok(!self.queue.is_able_to_flush(0))
    }
}

/// The tag-filter stride: copies matching 20-byte units. Only the low 32 bits of tagsCode are compared
/// (`(int) tagsCode` in Java), which are unit bytes 16..20.
#[inline]
fn scan_slice(units: &[u8], codes: Option<&[i32]>, out: &mut Vec<u8>) {
    let units = &units[..units.len() - units.len() % UNIT];
    match codes {
        None => out.extend_from_slice(units),
        Some([]) => {}
        Some([one]) => {
            let want = one.to_be_bytes();
            for u in units.chunks_exact(UNIT) {
                if u[MSG_TAG_LOW32_INDEX..UNIT] == want {
                    out.extend_from_slice(u);
                }
            }
        }
        Some(many) => {
            for u in units.chunks_exact(UNIT) {
                let code = i32::from_be_bytes(u[MSG_TAG_LOW32_INDEX..UNIT].try_into().unwrap());
                if many.contains(&code) {
                    out.extend_from_slice(u);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! docs/FAST_PATHS.md S7: `append_unit` / `append_unit_in` write what `write_unit` writes.

    use super::*;

    /// Three units a file, the first unit at offset 4 (its file pre-blank before it), 14 units, then a gap.
    const FILE_SIZE: usize = 3 * UNIT;
    const FIRST: i64 = 4;
    const UNITS: i64 = 14;

    fn unit(i: i64) -> CqUnit {
        CqUnit {
            offset: 1_000 + i * 300,
            size: 100 + i as i32,
            tags_code: i * 7 - 20,
        }
    }

    fn fresh(name: &str) -> (std::path::PathBuf, ConsumeQueue) {
        let dir = std::env::temp_dir().join(format!("rmq-cq-s7-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let cq = ConsumeQueue::load(&dir, "T", 0, FILE_SIZE).unwrap();
        (dir, cq)
    }

    /// Every file of the queue's directory: (name, bytes), by name.
    fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut out: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let name = e.file_name().into_string().unwrap();
                (name, std::fs::read(e.path()).unwrap())
            })
            .collect();
        out.sort();
        out
    }

    fn state(cq: &ConsumeQueue) -> (i64, i64, i64) {
        (
            cq.min_offset.load(Ordering::Acquire),
            cq.max_offset(),
            cq.max_phys_end.load(Ordering::Acquire),
        )
    }

    #[test]
    fn appended_units_are_the_units_write_unit_writes() {
        let (plain_dir, plain) = fresh("plain");
        let (fast_dir, fast) = fresh("append");
        let (held_dir, held) = fresh("append-in");
        // the queues' first unit, at offset 4: the first file, pre-blank up to it (invariant 3), for all three
        for q in [&plain, &fast, &held] {
            assert!(q.write_unit(FIRST, unit(0)).unwrap());
        }
        let mut file = None;
        for i in 1..UNITS {
            let offset = FIRST + i;
            assert!(plain.write_unit(offset, unit(i)).unwrap());
            // the put's way (put_message.rs): prepare the unit's file, then append at the next offset
            fast.prepare(offset).unwrap();
            fast.append_unit(offset, unit(i)).unwrap();
            held.prepare_in(&mut file, offset).unwrap();
            held.append_unit_in(file.as_ref().unwrap(), offset, unit(i))
                .unwrap();
            assert_eq!(state(&fast), state(&plain), "append_unit, unit {offset}");
            assert_eq!(state(&held), state(&plain), "append_unit_in, unit {offset}");
        }
        // a unit the gate sends on (not the next offset: a gap of pre-blank units, then a repeated offset skipped)
        let gap = FIRST + UNITS + 2;
        assert!(plain.write_unit(gap, unit(99)).unwrap());
        fast.append_unit(gap, unit(99)).unwrap();
        held.append_unit_in(file.as_ref().unwrap(), gap, unit(99))
            .unwrap();
        assert!(!plain.write_unit(gap, unit(98)).unwrap());
        fast.append_unit(gap, unit(98)).unwrap();
        held.append_unit_in(file.as_ref().unwrap(), gap, unit(98))
            .unwrap();
        assert_eq!(state(&fast), state(&plain));
        assert_eq!(state(&held), state(&plain));
        assert_eq!(state(&plain), (FIRST, gap + 1, 1_000 + 99 * 300 + 199));
        let want = files(&plain_dir);
        assert_eq!(want.len(), 6); // files from byte 60 (unit 3) to the one of unit 20
        assert_eq!(files(&fast_dir), want);
        assert_eq!(files(&held_dir), want);
        let mut units = Vec::new();
        plain.scan_units(FIRST, gap + 1, None, &mut units);
        assert_eq!(units.len(), (gap + 1 - FIRST) as usize * UNIT);
        drop((plain, fast, held));
        for d in [plain_dir, fast_dir, held_dir] {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
