//! The index service (RocketMQ 4.9 `IndexService` + `IndexFile`): `<root>/index/<yyyyMMddHHmmssSSS>` files that map
//! `topic#key` (KEYS and UNIQ_KEY) to CommitLog offsets.
//!
//! Owns: the list of index files, building entries on dispatch, the key walk of a query, loading (with 4.9's
//! abnormal-exit rule) and refusing bad files.
//!
//! Format: `format::index` (header, slots, entries, names).
//!
//! Invariants:
//!   1. Entries are appended in CommitLog order; a record at an offset below the last file's endPhyOffset is not
//!      indexed again (4.9's rule), so recovery can re-dispatch from any point.
//!   2. A file is created with the blocks of its header, hash slots and first `INDEX_RESERVE_STEP` of entries reserved
//!      (`posix_fallocate`: unwritten extents, nothing written), the rest sparse; a put reserves the next step
//!      before it writes an entry there. So a file costs its slots (20 MB in 4.9's 420 MB default geometry) plus the
//!      entries it holds plus less than a step, and a full disk fails a creation or a put (the file counts as full)
//!      instead of a mapped write (SIGBUS).
//!   3. When the last file is full a new one starts with begin/end phy offset and timestamp of the full one.
//!   4. A file whose size or header does not fit the configured geometry is refused at load: moved to
//!      `<root>/index_refused/` (nothing deleted), with every later file (they continue it), and their records
//!      re-indexed from the CommitLog; the engine reports each refusal (`index_notes`) and the facade logs it.
//!   5. After an abnormal exit, files whose endTimestamp is above the checkpoint's indexMsgTimestamp are deleted
//!      (4.9's `IndexService.load`) and rebuilt from the CommitLog — unless the abort file names this boot (a
//!      process crash: the page cache, so every mapped write of the dead process, is intact). Then the files are kept
//!      and only a put the crash cut short is repaired: a put writes its entry at `indexCount`, then the slot, then
//!      the header, so a slot equal to the header's `indexCount` is a put whose header never followed; the slot gets
//!      back the value that entry saved (its prevIndex). The records after the last entry are indexed at open as
//!      after a clean exit.
//!   6. A query walk never loops: it follows at most `indexCount` links, each to a smaller index.
//!   7. A file's mapping is shared (`Arc<IndexMapping>`) with the warm-ahead thread, which only pre-faults it (the
//!      hash-slot table whole, then entries from the next one on; no byte changes) and keeps it mapped while it does.
//!
//! Thread-safety: one `RwLock` around the file list and their headers; the writer (the engine's write mutex holder
//! building a small put inline, or the index builder thread, `build_index_service`, one at a time and in CommitLog
//! order) takes it for writing once per put or per batch of ranges, queries and flushes take it for reading.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use memmap2::{MmapOptions, MmapRaw};

use crate::error::{Error, Result};
use crate::format::index::{
    entry_position, for_each_index_key, index_file_name, index_file_size, index_key_hash,
    index_key_hash_with_prefix, index_key_prefix_hash, is_index_file_name, next_index_file_name,
    slot_position, time_diff_seconds, IndexEntry, IndexHeader, INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE,
    INVALID_INDEX,
};
use crate::warm_mapped_file_service::{populate_recorded, warm_end, WarmTarget};

pub const INDEX_REFUSED_DIR: &str = "index_refused";

/// Index entries the warm-ahead thread keeps faulted beyond the last one written (the slot table is warmed whole).
pub const INDEX_WARM_AHEAD_BYTES: usize = 4 << 20;

/// An index file's entries are reserved on disk this far ahead of the next one, in steps of this size (16 MiB:
/// 838,860 entries of 20 bytes).
pub const INDEX_RESERVE_STEP: usize = 16 << 20;

/// An index file's mapping, shared with the warm-ahead thread: it pre-faults the hash-slot table (touched at random
/// by every key) and then the entries from the last written one on (`WarmTarget`).
pub(crate) struct IndexMapping {
    mmap: MmapRaw,
    /// End of the slot table (header + slots): warmed first, whole.
    slots_end: usize,
    /// Where the next entry goes, as of the writer's last warm request.
    entries_at: AtomicUsize,
    warmed_to: AtomicUsize,
}

impl WarmTarget for IndexMapping {
    fn is_warm_to(&self, upto: usize) -> bool {
        self.warmed_to.load(Ordering::Acquire) >= warm_end(upto, self.mmap.len())
    }

    fn warm_to(&self, upto: usize, chunk: usize) -> bool {
        let page = crate::format::OS_PAGE_SIZE;
        let mut from = self.warmed_to.load(Ordering::Acquire);
        if from >= self.slots_end {
            from = from.max(self.entries_at.load(Ordering::Acquire) / page * page);
        }
        let upto = warm_end(upto, self.mmap.len());
        let mut to = upto.min(from.saturating_add(chunk));
        if from < self.slots_end {
            to = to.min(self.slots_end);
        }
        if to <= from {
            return false;
        }
        // SAFETY: inside the live mapping (the Arc keeps it); populating changes no byte.
        let warmed = unsafe {
            populate_recorded(
                self.mmap.as_mut_ptr(),
                from,
                to,
                self.mmap.len(),
                &self.warmed_to,
            )
        };
        warmed && to < upto
    }
}

pub struct IndexFile {
    path: PathBuf,
    file: File,
    /// Blocks `[0, reserved_to)` reserved (0 for a file opened: the first put reserves from 0, which costs nothing
    /// where they are allocated already).
    reserved_to: usize,
    name: String,
    map: Arc<IndexMapping>,
    hash_slot_num: u32,
    index_num: u32,
    header: IndexHeader,
    dirty: bool,
}

impl IndexMapping {
    fn new(mmap: MmapRaw, hash_slot_num: u32) -> Arc<IndexMapping> {
        Arc::new(IndexMapping {
            mmap,
            slots_end: slot_position(hash_slot_num),
            entries_at: AtomicUsize::new(0),
            warmed_to: AtomicUsize::new(0),
        })
    }
}

impl IndexFile {
    fn create(
        path: &Path,
        hash_slot_num: u32,
        index_num: u32,
        end_phy_offset: i64,
        end_timestamp: i64,
    ) -> Result<IndexFile> {
        let size = index_file_size(hash_slot_num, index_num);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        // the header, the slots and the first entries reserved (posix_fallocate: unwritten extents, nothing written),
        // so a full disk fails here, never with a SIGBUS on a mapped write into a hole (invariant 2)
        let reserved_to = size.min(slot_position(hash_slot_num) + INDEX_RESERVE_STEP);
        let mapped = file
            .set_len(size as u64)
            .and_then(|()| crate::mapped_file::reserve_range(&file, 0, reserved_to))
            .and_then(|()| MmapOptions::new().len(size).map_raw(&file));
        let mmap = match mapped {
            Ok(m) => m,
            Err(e) => {
                drop(file);
                let _ = std::fs::remove_file(path);
                return Err(Error::io(path, e));
            }
        };
        let mut header = IndexHeader::default();
        if end_phy_offset > 0 {
            header.begin_phy_offset = end_phy_offset;
            header.end_phy_offset = end_phy_offset;
        }
        if end_timestamp > 0 {
            header.begin_timestamp = end_timestamp;
            header.end_timestamp = end_timestamp;
        }
        let mut f = IndexFile {
            path: path.to_path_buf(),
            file,
            reserved_to,
            name: file_name_of(path),
            map: IndexMapping::new(mmap, hash_slot_num),
            hash_slot_num,
            index_num,
            header,
            dirty: true,
        };
        f.write_header();
        Ok(f)
    }

    /// Maps an existing file; Err(reason) when it does not fit the geometry (invariant 4).
    fn open(
        path: &Path,
        hash_slot_num: u32,
        index_num: u32,
    ) -> std::result::Result<IndexFile, String> {
        let size = index_file_size(hash_slot_num, index_num);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| e.to_string())?;
        let len = file.metadata().map_err(|e| e.to_string())?.len();
        if len != size as u64 {
            return Err(format!(
                "size {len} is not {size} (maxHashSlotNum {hash_slot_num}, maxIndexNum {index_num})"
            ));
        }
        let mmap = MmapOptions::new()
            .len(size)
            .map_raw(&file)
            .map_err(|e| e.to_string())?;
        // SAFETY: the mapping is `size` >= 40 bytes long and nobody else writes it yet.
        let header = IndexHeader::decode(unsafe {
            std::slice::from_raw_parts(mmap.as_ptr(), INDEX_HEADER_SIZE)
        });
        header.check(hash_slot_num, index_num)?;
        Ok(IndexFile {
            path: path.to_path_buf(),
            file,
            reserved_to: 0,
            name: file_name_of(path),
            map: IndexMapping::new(mmap, hash_slot_num),
            hash_slot_num,
            index_num,
            header,
            dirty: false,
        })
    }

    pub fn header(&self) -> IndexHeader {
        self.header
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn is_write_full(&self) -> bool {
        self.header.index_count as i64 >= self.index_num as i64
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping lives as long as `self`; writers hold `&mut self` (the service's write lock).
        unsafe { std::slice::from_raw_parts(self.map.mmap.as_ptr(), self.map.mmap.len()) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: `&mut self` is exclusive (the service's write lock).
        unsafe { std::slice::from_raw_parts_mut(self.map.mmap.as_mut_ptr(), self.map.mmap.len()) }
    }

    fn write_header(&mut self) {
        let h = self.header;
        h.encode(&mut self.bytes_mut()[..INDEX_HEADER_SIZE]);
    }

    fn read_i32(&self, at: usize) -> i32 {
        i32::from_be_bytes(self.bytes()[at..at + 4].try_into().unwrap())
    }

    /// `IndexFile.putKey`; false when the file is full.
    fn put_key(&mut self, key_hash: i32, phy_offset: i64, store_timestamp: i64) -> bool {
        if self.is_write_full() {
            return false;
        }
        let slot_pos = slot_position(key_hash as u32 % self.hash_slot_num);
        let mut slot_value = self.read_i32(slot_pos);
        if slot_value <= INVALID_INDEX || slot_value > self.header.index_count {
            slot_value = INVALID_INDEX;
        }
        let count = self.header.index_count;
        let entry = IndexEntry {
            key_hash,
            phy_offset,
            time_diff: time_diff_seconds(store_timestamp, self.header.begin_timestamp),
            prev_index: slot_value,
        };
        let at = entry_position(self.hash_slot_num, count);
        if at + INDEX_ENTRY_SIZE > self.reserved_to && !self.reserve_to(at + INDEX_ENTRY_SIZE) {
            return false; // a full disk: as a full file (a new one is tried, which the full disk refuses too)
        }
        entry.encode(&mut self.bytes_mut()[at..at + INDEX_ENTRY_SIZE]);
        self.bytes_mut()[slot_pos..slot_pos + 4].copy_from_slice(&count.to_be_bytes());
        if count <= 1 {
            self.header.begin_phy_offset = phy_offset;
            self.header.begin_timestamp = store_timestamp;
        }
        if slot_value == INVALID_INDEX {
            self.header.hash_slot_count += 1;
        }
        self.header.index_count += 1;
        self.header.end_phy_offset = phy_offset;
        self.header.end_timestamp = store_timestamp;
        // written through on every key, as 4.9's IndexHeader setters do (a crash leaves a header that matches)
        self.write_header();
        self.dirty = true;
        true
    }

    /// Reserves the file's blocks up to `end` and the step after it (invariant 2); false when the disk is full.
    #[cold]
    fn reserve_to(&mut self, end: usize) -> bool {
        let size = self.map.mmap.len();
        let to = size.min(end + INDEX_RESERVE_STEP);
        match crate::mapped_file::reserve_range(&self.file, self.reserved_to, to - self.reserved_to)
        {
            Ok(()) => {
                self.reserved_to = to;
                true
            }
            Err(_) => false,
        }
    }

    /// Invariant 5, same boot: undo the slot write of a put whose header was never written; the slots repaired.
    fn repair_torn_put(&mut self) -> u32 {
        let count = self.header.index_count;
        if count < 1 || count as u32 >= self.index_num {
            return 0;
        }
        let at = entry_position(self.hash_slot_num, count);
        let saved = IndexEntry::decode(&self.bytes()[at..at + INDEX_ENTRY_SIZE]).prev_index;
        let restored = if saved > INVALID_INDEX && saved < count {
            saved
        } else {
            INVALID_INDEX
        };
        let mut repaired = 0;
        for slot in 0..self.hash_slot_num {
            let pos = slot_position(slot);
            if self.read_i32(pos) == count {
                self.bytes_mut()[pos..pos + 4].copy_from_slice(&restored.to_be_bytes());
                repaired += 1;
            }
        }
        if repaired > 0 {
            self.dirty = true;
        }
        repaired
    }

    /// `IndexFile.selectPhyOffset`: newest-first walk of the key's slot chain.
    fn select_phy_offsets(
        &self,
        out: &mut Vec<i64>,
        key_hash: i32,
        max_num: usize,
        begin: i64,
        end: i64,
    ) {
        let h = self.header;
        let slot_pos = slot_position(key_hash as u32 % self.hash_slot_num);
        let slot_value = self.read_i32(slot_pos);
        if slot_value <= INVALID_INDEX || slot_value > h.index_count || h.index_count <= 1 {
            return;
        }
        let mut next = slot_value;
        let mut steps = 0i64;
        loop {
            if out.len() >= max_num || next >= h.index_count || next <= INVALID_INDEX {
                break;
            }
            steps += 1;
            if steps > h.index_count as i64 {
                break;
            }
            let at = entry_position(self.hash_slot_num, next);
            let e = IndexEntry::decode(&self.bytes()[at..at + INDEX_ENTRY_SIZE]);
            if e.time_diff < 0 {
                break;
            }
            let time_read = h.begin_timestamp + e.time_diff as i64 * 1000;
            let time_matched = time_read >= begin && time_read <= end;
            if e.key_hash == key_hash && time_matched {
                out.push(e.phy_offset);
            }
            // 4.9's stops, plus: a link must go to an older entry (a corrupt chain cannot loop)
            if e.prev_index <= INVALID_INDEX
                || e.prev_index > h.index_count
                || e.prev_index >= next
                || time_read < begin
            {
                break;
            }
            next = e.prev_index;
        }
    }

    fn flush(&mut self) -> Result<()> {
        if !self.dirty {
            return Ok(());
        }
        self.write_header();
        self.map
            .mmap
            .flush()
            .map_err(|e| Error::io(&self.path, e))?;
        self.dirty = false;
        Ok(())
    }
}

fn file_name_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `QueryOffsetResult`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryOffsetResult {
    pub phy_offsets: Vec<i64>,
    pub index_last_update_timestamp: i64,
    pub index_last_update_phyoffset: i64,
}

/// What load found, for the recovery report and the logs.
#[derive(Debug, Clone, Default)]
pub struct IndexLoadReport {
    pub loaded: usize,
    /// Files refused (moved to `index_refused/`), with the reason.
    pub refused: Vec<(String, String)>,
    /// Files deleted by the abnormal-exit rule.
    pub dropped: Vec<String>,
    /// Slots repaired in the last file (invariant 5, same boot).
    pub repaired_slots: u32,
}

pub struct IndexService {
    dir: PathBuf,
    hash_slot_num: u32,
    index_num: u32,
    files: RwLock<Vec<IndexFile>>,
}

impl IndexService {
    /// `IndexService.load(lastExitOK)`: files in name order; invariants 4 and 5 (`same_boot`: the abnormal exit was
    /// a process crash within this boot).
    pub fn load(
        root: &Path,
        hash_slot_num: u32,
        index_num: u32,
        abnormal: bool,
        same_boot: bool,
        index_msg_timestamp: i64,
    ) -> Result<(IndexService, IndexLoadReport)> {
        let dir = root.join(crate::format::index::INDEX_DIR);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let mut names: Vec<String> = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
            let entry = entry.map_err(|e| Error::io(&dir, e))?;
            if let Some(n) = entry.file_name().to_str() {
                if is_index_file_name(n) && entry.file_type().map(|t| t.is_file()).unwrap_or(false)
                {
                    names.push(n.to_string());
                }
            }
        }
        names.sort();
        let mut report = IndexLoadReport::default();
        let mut files = Vec::new();
        let mut refused_from: Option<String> = None;
        for name in names {
            let path = dir.join(&name);
            let opened = match &refused_from {
                Some(first) => Err(format!("follows the refused file {first}")),
                None => IndexFile::open(&path, hash_slot_num, index_num),
            };
            match opened {
                Ok(f) => {
                    if abnormal && !same_boot && f.header.end_timestamp > index_msg_timestamp {
                        drop(f);
                        std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
                        report.dropped.push(name);
                        continue;
                    }
                    files.push(f);
                }
                Err(reason) => {
                    let refused = root.join(INDEX_REFUSED_DIR);
                    std::fs::create_dir_all(&refused).map_err(|e| Error::io(&refused, e))?;
                    let to = refused.join(&name);
                    std::fs::rename(&path, &to).map_err(|e| Error::io(&path, e))?;
                    refused_from.get_or_insert_with(|| name.clone());
                    report.refused.push((name, reason));
                }
            }
        }
        // a later file must continue an earlier one: anything after a refused/dropped gap is re-indexed too
        report.loaded = files.len();
        if abnormal && same_boot {
            if let Some(last) = files.last_mut() {
                report.repaired_slots = last.repair_torn_put();
            }
        }
        Ok((
            IndexService {
                dir,
                hash_slot_num,
                index_num,
                files: RwLock::new(files),
            },
            report,
        ))
    }

    /// The CommitLog offset from which records still need indexing: records at or below the last entry's offset
    /// are indexed (`None`: nothing is indexed yet, start from the CommitLog's first record).
    pub fn last_indexed_offset(&self) -> Option<i64> {
        let files = self.files.read().unwrap_or_else(|e| e.into_inner());
        files
            .iter()
            .rev()
            .find(|f| f.header.index_count > 1)
            .map(|f| f.header.end_phy_offset)
    }

    /// How many entries at the end of the index (the last file, then the ones before it) point at `offset`: the keys
    /// of the last indexed record that made it, in build order.
    pub fn entries_at_tail(&self, offset: i64) -> usize {
        let files = self.files.read().unwrap_or_else(|e| e.into_inner());
        let mut n = 0;
        for f in files.iter().rev() {
            let mut i = f.header.index_count - 1;
            while i >= 1 {
                let at = entry_position(f.hash_slot_num, i);
                if IndexEntry::decode(&f.bytes()[at..at + INDEX_ENTRY_SIZE]).phy_offset != offset {
                    return n;
                }
                n += 1;
                i -= 1;
            }
        }
        n
    }

    /// Drops (deletes) trailing files that index offsets at or beyond `end` (a CommitLog truncated by recovery):
    /// their records are re-indexed from the CommitLog. Returns the names dropped.
    pub fn drop_files_beyond(&self, end: i64) -> Result<Vec<String>> {
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        let mut dropped = Vec::new();
        while let Some(f) = files.last() {
            if f.header.index_count > 1 && f.header.end_phy_offset >= end {
                let f = files.pop().unwrap();
                let path = f.path.clone();
                dropped.push(f.name.clone());
                drop(f);
                std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
            } else {
                break;
            }
        }
        Ok(dropped)
    }

    fn new_file(&self, files: &mut Vec<IndexFile>) -> Result<()> {
        let (end_phy, end_ts) = files
            .last()
            .map(|f| (f.header.end_phy_offset, f.header.end_timestamp))
            .unwrap_or((0, 0));
        if let Some(prev) = files.last_mut() {
            prev.flush()?;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        let mut name = index_file_name(now);
        while files.last().is_some_and(|f| f.name >= name) || self.dir.join(&name).exists() {
            name = next_index_file_name(files.last().map(|f| &f.name).unwrap_or(&name).max(&name));
        }
        let f = IndexFile::create(
            &self.dir.join(&name),
            self.hash_slot_num,
            self.index_num,
            end_phy,
            end_ts,
        )?;
        files.push(f);
        Ok(())
    }

    /// An indexer holding the write lock for the records of one put (or one recovery pass).
    pub fn writer(&self) -> IndexWriter<'_> {
        IndexWriter {
            service: self,
            files: self.files.write().unwrap_or_else(|e| e.into_inner()),
        }
    }

    /// `IndexService.queryOffset`: newest file first; `max_num` is already capped by the caller.
    pub fn query_offset(
        &self,
        topic: &[u8],
        key: &[u8],
        max_num: usize,
        begin: i64,
        end: i64,
    ) -> QueryOffsetResult {
        let files = self.files.read().unwrap_or_else(|e| e.into_inner());
        let mut r = QueryOffsetResult::default();
        let key_hash = index_key_hash(topic, key);
        for (i, f) in files.iter().enumerate().rev() {
            if i + 1 == files.len() {
                r.index_last_update_timestamp = f.header.end_timestamp;
                r.index_last_update_phyoffset = f.header.end_phy_offset;
            }
            if f.header.is_time_matched(begin, end) {
                f.select_phy_offsets(&mut r.phy_offsets, key_hash, max_num, begin, end);
            }
            if f.header.begin_timestamp < begin || r.phy_offsets.len() >= max_num {
                break;
            }
        }
        r
    }

    /// msyncs the files written since the last flush: every one with `live`, else only the full ones (4.9
    /// flushes an index file once, when it is full and the next one is created; the file being written is never
    /// msynced on a timer, since its slot table is written at random and each msync would write-protect the
    /// pages the next puts write again). Returns the newest endTimestamp now durable (the checkpoint's
    /// indexMsgTimestamp: after a machine's crash, files ending later are rebuilt from the CommitLog), 0 when
    /// none is.
    pub fn flush(&self, live: bool) -> Result<i64> {
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        let mut durable = 0;
        for f in files.iter_mut() {
            if live || f.is_write_full() {
                f.flush()?;
                durable = f.header.end_timestamp;
            }
        }
        Ok(durable)
    }

    /// `IndexService.deleteExpiredFile(offset)`: deletes the leading files (never the last one) whose endPhyOffset is
    /// below `offset` (the CommitLog's min offset after its files were deleted). Returns how many.
    pub fn delete_expired_files(&self, offset: i64) -> Result<usize> {
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        let mut n = 0;
        while files.len() > 1 && files[0].header.end_phy_offset < offset {
            let f = files.remove(0);
            let path = f.path.clone();
            drop(f);
            std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
            n += 1;
        }
        Ok(n)
    }

    pub fn file_count(&self) -> usize {
        self.files.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Unmaps every file (close).
    pub fn unload(&self) {
        self.files
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

pub struct IndexWriter<'a> {
    service: &'a IndexService,
    files: std::sync::RwLockWriteGuard<'a, Vec<IndexFile>>,
}

impl IndexWriter<'_> {
    /// Makes sure a file with room exists (what the next `build_index` would do first), so the warm-ahead thread can
    /// be asked for it before the put's records are indexed.
    pub fn ensure_file(&mut self) -> Result<()> {
        if self.files.last().is_none_or(|f| f.is_write_full()) {
            self.service.new_file(&mut self.files)?;
        }
        Ok(())
    }

    /// What the warm-ahead thread should fault for the next keys: the last file's mapping (its slot table and the
    /// entries from the next one on), up to `INDEX_WARM_AHEAD_BYTES` past the next entry.
    pub fn warm_request(&self) -> Option<(Arc<dyn WarmTarget>, usize)> {
        let f = self.files.last()?;
        let at = entry_position(f.hash_slot_num, f.header.index_count);
        f.map.entries_at.store(at, Ordering::Release);
        Some((
            f.map.clone() as Arc<dyn WarmTarget>,
            at + INDEX_WARM_AHEAD_BYTES,
        ))
    }

    /// `IndexService.buildIndex` for one record (the caller applies the rollback skip rule).
    pub fn build_index(
        &mut self,
        topic: &[u8],
        properties: &[u8],
        phy_offset: i64,
        store_timestamp: i64,
    ) -> Result<()> {
        self.build_index_from(topic, properties, phy_offset, store_timestamp, 0)
    }

    /// `build_index` without the record's first `skip` keys (they are indexed already: a build that stopped inside
    /// the record, see `IndexService::entries_at_tail`).
    pub fn build_index_from(
        &mut self,
        topic: &[u8],
        properties: &[u8],
        phy_offset: i64,
        store_timestamp: i64,
        skip: usize,
    ) -> Result<()> {
        if self.files.last().is_none_or(|f| f.is_write_full()) {
            self.service.new_file(&mut self.files)?;
        }
        if phy_offset
            < self
                .files
                .last()
                .map(|f| f.header.end_phy_offset)
                .unwrap_or(0)
        {
            return Ok(());
        }
        let mut err = None;
        let prefix = index_key_prefix_hash(topic);
        let mut nth = 0usize;
        for_each_index_key(properties, |key| {
            nth += 1;
            if err.is_some() || nth <= skip {
                return;
            }
            let h = index_key_hash_with_prefix(prefix, key);
            let f = self.files.last_mut().expect("a file exists");
            if !f.put_key(h, phy_offset, store_timestamp) {
                if let Err(e) = self.service.new_file(&mut self.files) {
                    err = Some(e);
                    return;
                }
                let f = self.files.last_mut().expect("a file exists");
                f.put_key(h, phy_offset, store_timestamp);
            }
        });
        match err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
