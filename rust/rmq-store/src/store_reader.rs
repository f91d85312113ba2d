//! A read-only view of a store directory — ours or a live broker's — without opening a `MessageStore`.
//!
//! Owns: `StoreReader` (queues, min/max logical offsets, a queue range's CommitLog records, a record by its
//! physical offset) and `mapped_file_size` (a directory's mapped file size from its files).
//!
//! Why: `MessageStore` locks `<root>/lock`, runs recovery and creates `abort` at open — a second handle on one
//! directory fails and opening is a write. Spark tasks, `rmq-core store inspect` and tools read beside the owner.
//!
//! Format: `<root>/commitlog/<20-digit start>` (records, `format::message`), `<root>/consumequeue/<topic>/<queue
//! id>/<20-digit start byte>` (20-byte units, `format::cq_unit`). File sizes are not needed to read: a CommitLog
//! offset is in the listed file with the greatest start at or below it, unit N in the queue file with the greatest
//! start at or below N×20. The sizes (given, else `mapped_file_size`) bound a record to its file.
//!
//! Invariants:
//!   1. Nothing under the root is created, written, locked or deleted; files are opened read-only, CommitLog files
//!      mapped read-only (MAP_SHARED: coherent with a writer on the same machine), ConsumeQueue units `pread`.
//!   2. A writer may append, roll (a new file appears, first at length 0 while it is allocated) and delete old
//!      files at any time: a file that is missing or too short is listed/mapped again once, then treated as not
//!      there yet. Files are never truncated by their writer (RocketMQ and this engine only unlink them).
//!   3. A record is served only if it lies inside its file's mapped bytes and `record_head_matches` (TOTALSIZE =
//!      the unit's size, a message magic, PHYSICALOFFSET = the unit's offset). A range read stops at the first
//!      unit that is not written (size 0) or whose record fails that check (torn, being written, its file gone
//!      though above the CommitLog's min), and says where: nothing after a torn record is served.
//!   4. `max_offset` = end of the written units of the queue's last non-empty file (the written units are a prefix
//!      of each file: found by binary search on size ≠ 0), minus trailing units whose record fails invariant 3's
//!      check; `min_offset` = first written unit that is not pre-blank and whose CommitLog offset is at or above
//!      the CommitLog's first file start, capped at `max_offset` — the engine's `correctMinOffset` rule.
//!   5. Units below the CommitLog's min (deleted data), pre-blank units and tag-filter misses are skipped, never
//!      served; queue files missing below the last one (deleted) are skipped.
//!   6. Bytes of a record being written may read as anything while they are read; the checks above only ever
//!      reject them. They are read as plain bytes, never trusted as lengths beyond the mapped file.
//!
//! Thread-safety: `Send + Sync`; the CommitLog listing and its maps sit behind one mutex (held for one call), so
//! concurrent calls on one reader take turns. The Python twin is `_reference/store_reader.py`, identical results.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use memmap2::Mmap;

use crate::error::{Error, Result};
use crate::format::cq_unit::{CqUnit, CQ_STORE_UNIT_SIZE};
use crate::format::file_name::{infer_mapped_file_size, parse_file_name};
use crate::format::message::{
    decode_record, is_message_magic, record_head_matches, record_magic, record_total_size,
    MIN_RECORD_LEN_V1_IPV4, RECORD_HEADER_LEN,
};
use crate::format::{COMMITLOG_DIR, CONSUMEQUEUE_DIR};

const UNIT: u64 = CQ_STORE_UNIT_SIZE as u64;

/// The numbered store files of `dir`, sorted by start (empty when `dir` is missing).
pub fn list_mapped_files(dir: &Path) -> Vec<(u64, PathBuf)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(u64, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let start = parse_file_name(e.file_name().to_str()?)?;
            Some((start, e.path()))
        })
        .collect();
    out.sort();
    out
}

/// The mapped file size of one directory of store files (`format::file_name::infer_mapped_file_size` over the
/// files on disk); None when nothing tells. Shared with `rmq-core store verify|inspect`.
pub fn mapped_file_size(dir: &Path) -> Option<u64> {
    let files: Vec<(u64, u64)> = list_mapped_files(dir)
        .into_iter()
        .map(|(start, path)| {
            (
                start,
                std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
            )
        })
        .collect();
    infer_mapped_file_size(&files)
}

/// Where a range read ended: `count` records served, the next unit to read is `next_offset` (the range's end
/// unless it stopped early, invariant 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRange {
    pub count: usize,
    pub next_offset: i64,
}

/// One mapped CommitLog file: bytes `[start, end)` of the log are readable through `map`.
struct MappedCommitLogFile {
    start: u64,
    end: u64,
    map: Arc<Mmap>,
}

impl MappedCommitLogFile {
    #[inline]
    fn bytes(&self, offset: u64, len: u64) -> Option<&[u8]> {
        let stop = offset.checked_add(len)?;
        if offset < self.start || stop > self.end {
            return None;
        }
        let pos = (offset - self.start) as usize;
        Some(&self.map[pos..pos + len as usize])
    }
}

struct CommitLogView {
    files: Vec<u64>,
    maps: BTreeMap<u64, Arc<Mmap>>,
}

pub struct StoreReader {
    root: PathBuf,
    commit_log_file_size: Option<u64>,
    consume_queue_file_size: Option<u64>,
    commit_log: Mutex<CommitLogView>,
}

impl std::fmt::Debug for StoreReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreReader")
            .field("root", &self.root)
            .finish()
    }
}

impl StoreReader {
    /// A reader of `root`; the file sizes are taken from the files on disk when not given.
    /// `Error::Io` (NotFound) when `root` has neither `commitlog/` nor `consumequeue/`.
    pub fn open(
        root: &Path,
        commit_log_file_size: Option<u64>,
        consume_queue_file_size: Option<u64>,
    ) -> Result<StoreReader> {
        if !root.join(COMMITLOG_DIR).is_dir() && !root.join(CONSUMEQUEUE_DIR).is_dir() {
            return Err(Error::io(
                root,
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "not a RocketMQ store directory (no commitlog/ or consumequeue/)",
                ),
            ));
        }
        for (name, size) in [
            ("commit_log_file_size", commit_log_file_size),
            ("consume_queue_file_size", consume_queue_file_size),
        ] {
            if size == Some(0) {
                return Err(Error::InvalidArgument(format!("{name} must be positive")));
            }
        }
        let reader = StoreReader {
            root: root.to_path_buf(),
            commit_log_file_size,
            consume_queue_file_size,
            commit_log: Mutex::new(CommitLogView {
                files: Vec::new(),
                maps: BTreeMap::new(),
            }),
        };
        reader.view().files = reader.list_commit_log();
        Ok(reader)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Drops the CommitLog maps (a later read maps again).
    pub fn close(&self) {
        self.view().maps.clear();
    }

    fn view(&self) -> std::sync::MutexGuard<'_, CommitLogView> {
        self.commit_log.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn list_commit_log(&self) -> Vec<u64> {
        list_mapped_files(&self.root.join(COMMITLOG_DIR))
            .into_iter()
            .map(|(s, _)| s)
            .collect()
    }

    /// The CommitLog's mapped file size: as given, else from the files on disk (None: no file tells yet).
    pub fn commit_log_file_size(&self) -> Option<u64> {
        self.commit_log_file_size
            .or_else(|| mapped_file_size(&self.root.join(COMMITLOG_DIR)))
    }

    /// The ConsumeQueue mapped file size: as given, else from the first queue directory whose files tell.
    pub fn consume_queue_file_size(&self) -> Option<u64> {
        self.consume_queue_file_size.or_else(|| {
            self.queues()
                .iter()
                .find_map(|(t, q)| mapped_file_size(&self.queue_dir(t, *q)))
        })
    }

    /// Topic names with a ConsumeQueue directory, sorted.
    pub fn topics(&self) -> Vec<String> {
        let mut out: Vec<String> = self.queues().into_iter().map(|(t, _)| t).collect();
        out.dedup();
        out
    }

    /// Every `(topic, queue id)` with a ConsumeQueue directory, sorted. A queue directory's name is a canonical
    /// decimal queue id (anything else is ignored).
    pub fn queues(&self) -> Vec<(String, i32)> {
        let mut out = Vec::new();
        let Ok(topics) = std::fs::read_dir(self.root.join(CONSUMEQUEUE_DIR)) else {
            return out;
        };
        for t in topics.filter_map(|e| e.ok()) {
            let Ok(topic) = t.file_name().into_string() else {
                continue;
            };
            let Ok(qids) = std::fs::read_dir(t.path()) else {
                continue;
            };
            for q in qids.filter_map(|e| e.ok()) {
                let Some(name) = q.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                if let Ok(qid) = name.parse::<i32>() {
                    if qid.to_string() == name {
                        out.push((topic.clone(), qid));
                    }
                }
            }
        }
        out.sort();
        out
    }

    /// The CommitLog's first file start (0 when there is none): data below it is deleted.
    pub fn min_physical_offset(&self) -> i64 {
        let mut v = self.view();
        v.files = self.list_commit_log();
        v.files.first().copied().unwrap_or(0) as i64
    }

    fn queue_dir(&self, topic: &str, queue_id: i32) -> PathBuf {
        self.root
            .join(CONSUMEQUEUE_DIR)
            .join(topic)
            .join(queue_id.to_string())
    }

    fn queue_files(&self, topic: &str, queue_id: i32) -> Vec<(u64, PathBuf)> {
        list_mapped_files(&self.queue_dir(topic, queue_id))
    }

    /// The queue's next logical offset (invariant 4); 0 for a queue with no units.
    pub fn max_offset(&self, topic: &str, queue_id: i32) -> i64 {
        let mut files = self.queue_files(topic, queue_id);
        let min_phys = self.min_physical_offset();
        let mut v = self.view();
        while let Some((start, path)) = files.last() {
            let Ok(file) = File::open(path) else {
                files.pop();
                continue;
            };
            let mut n = written_units(&file);
            if n == 0 && files.len() > 1 {
                // a freshly rolled file without units yet: the data ends in the one before
                files.pop();
                continue;
            }
            // the last units may be in flight: count them once their records are there
            while n > 0 {
                match read_unit(&file, n - 1) {
                    Some(u) if self.unit_is_servable(&mut v, &u, min_phys) => break,
                    _ => n -= 1,
                }
            }
            return (start / UNIT + n) as i64;
        }
        0
    }

    /// The queue's first readable logical offset (invariant 4).
    pub fn min_offset(&self, topic: &str, queue_id: i32) -> i64 {
        let files = self.queue_files(topic, queue_id);
        if files.is_empty() {
            return 0;
        }
        let max = self.max_offset(topic, queue_id);
        let min_phys = self.min_physical_offset();
        for (start, path) in &files {
            let Ok(file) = File::open(path) else {
                continue;
            };
            let units = read_units(&file, 0, u64::MAX / UNIT);
            for (i, u) in units.chunks_exact(CQ_STORE_UNIT_SIZE).enumerate() {
                let u = CqUnit::decode(u);
                if u.size == 0 {
                    break;
                }
                if !u.is_pre_blank() && u.offset >= min_phys {
                    return ((start / UNIT) as i64 + i as i64).min(max);
                }
            }
        }
        max
    }

    /// Appends to `out` the records of the queue's units `[start, end)`, in queue order, keeping units whose
    /// `tags_code as i32` is in `tag_codes` (all when None); invariants 3 and 5.
    pub fn read_records(
        &self,
        topic: &str,
        queue_id: i32,
        start: i64,
        end: i64,
        tag_codes: Option<&[i32]>,
        out: &mut Vec<u8>,
    ) -> ReadRange {
        let mut count = 0usize;
        let start = start.max(0);
        if start >= end {
            return ReadRange {
                count,
                next_offset: end.max(start),
            };
        }
        let files = self.queue_files(topic, queue_id);
        let min_phys = self.min_physical_offset();
        let mut v = self.view();
        let mut cur = start as u64;
        let end = end as u64;
        while cur < end {
            let idx = files.partition_point(|(s, _)| s / UNIT <= cur);
            if idx == 0 {
                // below the queue's first file: deleted units
                match files.first() {
                    Some((s, _)) => {
                        cur = (s / UNIT).min(end);
                        continue;
                    }
                    None => break,
                }
            }
            let (fstart, path) = &files[idx - 1];
            let base = fstart / UNIT;
            let is_last = idx == files.len();
            let limit = if is_last {
                end
            } else {
                end.min(files[idx].0 / UNIT)
            };
            let units = match File::open(path) {
                Ok(f) => read_units(&f, cur - base, limit - cur),
                Err(_) => Vec::new(),
            };
            let wanted = |u: &CqUnit| {
                !u.is_pre_blank()
                    && u.offset >= min_phys
                    && tag_codes.is_none_or(|c| c.contains(&(u.tags_code as i32)))
            };
            // one allocation for the segment's records (a growing multi-MiB buffer costs page faults)
            let bytes: u64 = units
                .chunks_exact(CQ_STORE_UNIT_SIZE)
                .map(CqUnit::decode)
                .take_while(|u| u.size != 0)
                .filter(&wanted)
                .map(|u| u.size.max(0) as u64)
                .sum();
            out.reserve(bytes.min(isize::MAX as u64 / 2) as usize);
            let mut file: Option<MappedCommitLogFile> = None;
            for u in units.chunks_exact(CQ_STORE_UNIT_SIZE) {
                let u = CqUnit::decode(u);
                if u.size == 0 {
                    return ReadRange {
                        count,
                        next_offset: cur as i64,
                    };
                }
                if wanted(&u) {
                    let len = u.size as u64;
                    let inside = |f: &Option<MappedCommitLogFile>| {
                        f.as_ref()
                            .is_some_and(|f| f.bytes(u.offset as u64, len).is_some())
                    };
                    if u.offset < 0 || !inside(&file) {
                        file = self.locate(&mut v, u.offset, len);
                    }
                    let rec = file
                        .as_ref()
                        .and_then(|f| f.bytes(u.offset as u64, len))
                        .filter(|rec| record_head_matches(rec, u.offset));
                    let Some(rec) = rec else {
                        return ReadRange {
                            count,
                            next_offset: cur as i64,
                        };
                    };
                    out.extend_from_slice(rec);
                    count += 1;
                }
                cur += 1;
            }
            if cur < limit {
                if is_last {
                    break; // the last file ends before the range: not written yet
                }
                cur = limit; // a short file below the last (deleted units)
            }
        }
        ReadRange {
            count,
            next_offset: cur as i64,
        }
    }

    /// The whole record that starts at CommitLog offset `phy_offset`, or None when no message record starts there
    /// (past the end, deleted, BLANK padding, inside another record, torn: it must decode and its PHYSICALOFFSET
    /// must be `phy_offset`).
    pub fn record_at(&self, phy_offset: i64) -> Option<Vec<u8>> {
        if phy_offset < 0 {
            return None;
        }
        let mut v = self.view();
        let total = self.with_record(&mut v, phy_offset, RECORD_HEADER_LEN as u64, |head| {
            is_message_magic(record_magic(head)).then(|| record_total_size(head))
        })??;
        if total < MIN_RECORD_LEN_V1_IPV4 as i32 {
            return None;
        }
        self.with_record(&mut v, phy_offset, total as u64, |rec| {
            (record_head_matches(rec, phy_offset) && decode_record(rec).is_ok())
                .then(|| rec.to_vec())
        })?
    }

    /// Whether a unit's record may be served (pre-blank and deleted data count as written: nothing to check).
    fn unit_is_servable(&self, v: &mut CommitLogView, u: &CqUnit, min_phys: i64) -> bool {
        if u.is_pre_blank() || u.offset < min_phys {
            return true;
        }
        u.size > 0
            && self.with_record(v, u.offset, u.size as u64, |rec| {
                record_head_matches(rec, u.offset)
            }) == Some(true)
    }

    /// Calls `f` on the `len` CommitLog bytes at `offset` when they lie inside one mapped file (invariant 2:
    /// the listing and the map are refreshed once when they do not).
    fn with_record<T>(
        &self,
        v: &mut CommitLogView,
        offset: i64,
        len: u64,
        f: impl FnOnce(&[u8]) -> T,
    ) -> Option<T> {
        let file = self.locate(v, offset, len)?;
        file.bytes(offset as u64, len).map(f)
    }

    /// The mapped CommitLog file holding the `len` bytes at `offset` (invariant 2: the listing and the map are
    /// refreshed once when they do not lie inside one).
    fn locate(&self, v: &mut CommitLogView, offset: i64, len: u64) -> Option<MappedCommitLogFile> {
        if offset < 0 {
            return None;
        }
        let offset = offset as u64;
        for attempt in 0..2 {
            if attempt == 1 {
                v.files = self.list_commit_log();
            }
            let idx = v.files.partition_point(|&s| s <= offset);
            if idx == 0 {
                continue;
            }
            let start = v.files[idx - 1];
            let file_end = match (self.commit_log_file_size, v.files.get(idx)) {
                (Some(size), _) => start + size,
                (None, Some(&next)) => next,
                (None, None) => u64::MAX,
            };
            if offset.checked_add(len).is_none_or(|e| e > file_end) {
                continue;
            }
            let Some(map) = self.map(v, start, attempt == 1) else {
                continue;
            };
            let file = MappedCommitLogFile {
                start,
                end: file_end.min(start + map.len() as u64),
                map,
            };
            if file.bytes(offset, len).is_some() {
                return Some(file);
            }
        }
        None
    }

    /// The read-only map of the CommitLog file at `start`, mapped again when `refresh` and the file has grown.
    fn map(&self, v: &mut CommitLogView, start: u64, refresh: bool) -> Option<Arc<Mmap>> {
        let path = self
            .root
            .join(COMMITLOG_DIR)
            .join(crate::format::file_name::offset_to_file_name(start));
        if let Some(m) = v.maps.get(&start) {
            let grown = refresh
                && std::fs::metadata(&path)
                    .map(|md| md.len() > m.len() as u64)
                    .unwrap_or(false);
            if !grown {
                return Some(m.clone());
            }
        }
        let file = File::open(&path).ok()?;
        if file.metadata().ok()?.len() == 0 {
            return None;
        }
        // SAFETY: a read-only shared mapping; the writer only appends to (never truncates) the file, so the
        // mapped length stays backed (invariant 2); bytes being written are only compared (invariant 6).
        let m = Arc::new(unsafe { Mmap::map(&file) }.ok()?);
        v.maps.insert(start, m.clone());
        Some(m)
    }
}

/// Written units of one ConsumeQueue file: the written units are a prefix (size ≠ 0), found by binary search.
fn written_units(file: &File) -> u64 {
    let len = file.metadata().map(|m| m.len()).unwrap_or(0) / UNIT;
    let (mut lo, mut hi) = (0u64, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match read_unit(file, mid) {
            Some(u) if u.size != 0 => lo = mid + 1,
            _ => hi = mid,
        }
    }
    lo
}

fn read_unit(file: &File, index: u64) -> Option<CqUnit> {
    let mut b = [0u8; CQ_STORE_UNIT_SIZE];
    file.read_exact_at(&mut b, index * UNIT).ok()?;
    Some(CqUnit::decode(&b))
}

/// Units `[first, first + count)` of one file (local indices), fewer at its end; whole units only.
fn read_units(file: &File, first: u64, count: u64) -> Vec<u8> {
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let from = first.saturating_mul(UNIT).min(len);
    let to = first.saturating_add(count).saturating_mul(UNIT).min(len);
    let mut buf = vec![0u8; (to - from) as usize];
    let mut got = 0usize;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], from + got as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    buf.truncate(got - got % CQ_STORE_UNIT_SIZE);
    buf
}
