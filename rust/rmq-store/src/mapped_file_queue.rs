//! An ordered run of equally sized mapped files in one directory (a CommitLog, or one ConsumeQueue).
//!
//! Owns: the list of `Arc<MappedFile>`, file lookup by global offset, creation of the next file, deletion
//! of old files, truncation and flushing of the whole run.
//!
//! Format: `<dir>/<20-digit start offset>`; each file is exactly `file_size` bytes; file k+1 starts where
//! file k ends. Names that are not 20 digits are ignored.
//!
//! Invariants:
//!   1. Files are sorted by start offset; each start is a multiple of the file size. Files the engine creates
//!      are contiguous; a file deleted by hand leaves a gap that loads fine (reads there find nothing).
//!   2. At load, a newest file shorter than the file size and all zero (a crash between create and
//!      fallocate) is deleted; any other size mismatch is an error.
//!   3. Only the last file may be partially written; earlier files are full (their write position = size).
//!   4. The last file is never deleted by `delete_files_before`.
//!
//! Thread-safety: the list sits behind an `RwLock`; readers clone an `Arc` under a short read lock and then
//! read without locks. Creation/deletion take the write lock briefly. Appends are serialised by the engine.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use crate::error::{Error, Result};
use crate::format::file_name::{offset_to_file_name, parse_file_name};
use crate::format::OS_PAGE_SIZE;
use crate::mapped_file::MappedFile;

pub struct MappedFileQueue {
    dir: PathBuf,
    file_size: usize,
    /// Bytes of a new file reserved at its creation (the file size, or `RESERVE_STEP` for the CommitLog, whose
    /// writer reserves the rest step by step: `MappedFile::ensure_reserved`).
    initial_reserve: usize,
    files: RwLock<Vec<Arc<MappedFile>>>,
    flush_lock: Mutex<()>,
}

impl MappedFileQueue {
    /// Opens every store file in `dir` (creating `dir` if needed). Write positions start at the file ends;
    /// recovery lowers the last ones.
    pub fn load(dir: &Path, file_size: usize) -> Result<MappedFileQueue> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let mut starts = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
            let entry = entry.map_err(|e| Error::io(dir, e))?;
            if let Some(start) = entry.file_name().to_str().and_then(parse_file_name) {
                if entry.file_type().map(|t| t.is_file()).unwrap_or(false) {
                    starts.push(start);
                }
            }
        }
        starts.sort_unstable();
        // a crash between creating and sizing the newest file leaves it short and all zero: drop it
        if let Some(&last) = starts.last() {
            let path = dir.join(offset_to_file_name(last));
            let len = std::fs::metadata(&path)
                .map_err(|e| Error::io(&path, e))?
                .len();
            if len < file_size as u64 {
                let data = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
                if data.iter().all(|&b| b == 0) {
                    std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
                    starts.pop();
                }
            }
        }
        let mut files = Vec::with_capacity(starts.len());
        for (i, &start) in starts.iter().enumerate() {
            let path = dir.join(offset_to_file_name(start));
            if start % file_size as u64 != 0 || (i > 0 && start == starts[i - 1]) {
                return Err(Error::io(
                    &path,
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "mapped file name is not a multiple of the configured file size",
                    ),
                ));
            }
            files.push(Arc::new(MappedFile::open(&path, start, file_size)?));
        }
        Ok(MappedFileQueue {
            dir: dir.to_path_buf(),
            file_size,
            initial_reserve: file_size,
            files: RwLock::new(files),
            flush_lock: Mutex::new(()),
        })
    }

    /// New files get only their first `reserve` bytes reserved at creation; their writer calls
    /// `MappedFile::ensure_reserved` before every write.
    pub fn with_stepped_reserve(mut self, reserve: usize) -> MappedFileQueue {
        self.initial_reserve = reserve.min(self.file_size);
        self
    }

    #[inline]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    #[inline]
    pub fn file_size(&self) -> usize {
        self.file_size
    }

    fn read_files(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<MappedFile>>> {
        self.files.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_files(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Arc<MappedFile>>> {
        self.files.write().unwrap_or_else(|e| e.into_inner())
    }

    pub fn snapshot(&self) -> Vec<Arc<MappedFile>> {
        self.read_files().clone()
    }

    pub fn is_empty(&self) -> bool {
        self.read_files().is_empty()
    }

    pub fn first(&self) -> Option<Arc<MappedFile>> {
        self.read_files().first().cloned()
    }

    pub fn last(&self) -> Option<Arc<MappedFile>> {
        self.read_files().last().cloned()
    }

    /// The file holding global byte `offset`, if it exists.
    pub fn find(&self, offset: i64) -> Option<Arc<MappedFile>> {
        if offset < 0 {
            return None;
        }
        let offset = offset as u64;
        let files = self.read_files();
        let first = files.first()?;
        if offset < first.start() {
            return None;
        }
        let idx = ((offset - first.start()) / self.file_size as u64) as usize;
        if let Some(f) = files.get(idx) {
            if f.start() <= offset && offset < f.end() {
                return Some(f.clone());
            }
        }
        // a gap before `offset` (a file deleted by hand): binary search
        let i = files.partition_point(|f| f.end() <= offset);
        files.get(i).filter(|f| f.start() <= offset).cloned()
    }

    /// Creates the file starting at `start`, which must be the end of the last file (or anything if empty).
    pub fn create_file(&self, start: u64) -> Result<Arc<MappedFile>> {
        let mut files = self.write_files();
        if let Some(last) = files.last() {
            if last.end() != start {
                return Err(Error::InvalidArgument(format!(
                    "new mapped file at {start} does not follow {}",
                    last.path().display()
                )));
            }
        }
        let path = self.dir.join(offset_to_file_name(start));
        let file = Arc::new(MappedFile::create_stepped(
            &path,
            start,
            self.file_size,
            self.initial_reserve,
        )?);
        files.push(file.clone());
        Ok(file)
    }

    /// First file's start, 0 when there is none.
    pub fn min_offset(&self) -> i64 {
        self.first().map(|f| f.start() as i64).unwrap_or(0)
    }

    /// End of the published data, 0 when there is no file.
    pub fn max_offset(&self) -> i64 {
        self.last()
            .map(|f| (f.start() + f.wrote_position() as u64) as i64)
            .unwrap_or(0)
    }

    /// msyncs every file's unflushed published bytes; returns the offset known flushed (the max offset seen first).
    pub fn flush(&self) -> Result<i64> {
        let _g = self.flush_lock.lock().unwrap_or_else(|e| e.into_inner());
        let target = self.max_offset();
        for f in self.snapshot() {
            if f.flushed_position() < f.wrote_position() {
                f.flush()?;
            }
        }
        Ok(target)
    }

    /// 4.9's `isAbleToFlush(leastPages)` over the run: a file before the last one with unflushed bytes (it is full),
    /// or at least `least_pages` OS pages between the last file's flushed and written positions; with 0, any
    /// unflushed byte.
    pub fn is_able_to_flush(&self, least_pages: usize) -> bool {
        let files = self.snapshot();
        let Some((last, full)) = files.split_last() else {
            return false;
        };
        if full
            .iter()
            .any(|f| f.flushed_position() < f.wrote_position())
        {
            return true;
        }
        let (wrote, flushed) = (last.wrote_position(), last.flushed_position());
        if least_pages == 0 {
            return wrote > flushed;
        }
        (wrote / OS_PAGE_SIZE).saturating_sub(flushed / OS_PAGE_SIZE) >= least_pages
    }

    /// Deletes files whose whole range ends at or before `offset`, never the last one. Returns how many.
    pub fn delete_files_before(&self, offset: i64) -> Result<usize> {
        let mut files = self.write_files();
        let mut n = 0;
        while files.len() > 1 && (files[0].end() as i64) <= offset {
            let f = files.remove(0);
            f.delete()?;
            n += 1;
        }
        Ok(n)
    }

    /// Cuts the run at global `offset`: the file holding `offset` keeps `offset - start` written bytes (the
    /// rest up to its old write position is zeroed); files starting after `offset` are deleted; a file
    /// starting exactly at `offset` is kept, empty.
    pub fn truncate(&self, offset: i64) -> Result<()> {
        let mut files = self.write_files();
        let mut keep = files.len();
        for (i, f) in files.iter().enumerate() {
            if (f.end() as i64) <= offset {
                continue;
            }
            if (f.start() as i64) <= offset {
                let pos = (offset - f.start() as i64) as usize;
                let old = f.wrote_position();
                f.reset_positions(pos);
                f.zero_range(pos, old)?;
            } else {
                keep = keep.min(i);
            }
        }
        for f in files.drain(keep..) {
            f.delete()?;
        }
        Ok(())
    }

    /// Removes and deletes every file from index `from` on (recovery).
    pub fn delete_from_index(&self, from: usize) -> Result<()> {
        let mut files = self.write_files();
        if from < files.len() {
            for f in files.drain(from..) {
                f.delete()?;
            }
        }
        Ok(())
    }

    /// Forgets every file without deleting (close: unmaps once readers drop their `Arc`s).
    pub fn unload(&self) {
        self.write_files().clear();
    }
}
