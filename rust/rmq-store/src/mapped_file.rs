//! One memory-mapped store file (a CommitLog or ConsumeQueue segment).
//!
//! Owns: the file, its shared read-write mapping, and its published write position.
//!
//! Format: a file named by its global start offset (see `format::file_name`), created full size and zero-filled.
//! Its blocks are reserved with `posix_fallocate` — the whole file at creation (`create`), or (`create_stepped`, the
//! CommitLog's files) the first `RESERVE_STEP` bytes at creation and then `RESERVE_STEP` at a time ahead of the
//! writer (`ensure_reserved`, which every CommitLog write calls first): a file costs the disk what it holds plus
//! less than one step, and a full disk fails the write that needs a new step (`Error::Io`), never a SIGBUS through
//! the mapping.
//!
//! Portability: Linux gets `posix_fallocate` and `MADV_POPULATE_WRITE` (the warm-ahead thread's pre-faulting,
//! `WarmTarget`); other systems (macOS, Windows) zero-extend with `set_len` (a full disk may then surface on a later
//! write) and skip pre-faulting. On Windows a file still
//! mapped cannot be deleted: `delete` reports the error and the file stays until the next start.
//!
//! Invariants:
//!   1. Bytes below `wrote_position` are immutable while the engine is shared (readers need no lock);
//!      the single writer (the engine's write mutex holder) only writes at or above it, then publishes
//!      the new position with a Release store. Readers load it with Acquire.
//!   2. The only writes below `wrote_position` are recovery and truncation, which run before the engine is
//!      shared or under the write mutex on units no reader can reach.
//!   3. A `MappedFile` is shared as `Arc<MappedFile>`: deleting unlinks the path, the mapping lives until the
//!      last reader drops its `Arc` (unlinking a mapped file is safe on POSIX).
//!   4. `flushed_position <= wrote_position` except transiently; `flush` msyncs `[flushed, wrote)`.
//!   5. Pre-faulting (`WarmTarget::warm_to`, the warm-ahead thread only) never changes a byte and never goes below
//!      the page after the write position; `warmed_to` is reset with the positions by recovery and truncation.
//!
//! Thread-safety: `Send + Sync`; writes are `unsafe` and callers uphold invariant 1.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use memmap2::{MmapOptions, MmapRaw};

use crate::error::{Error, Result};
use crate::warm_mapped_file_service::{populate_recorded, warm_end, WarmTarget};

pub struct MappedFile {
    path: PathBuf,
    file_from_offset: u64,
    file_size: usize,
    mmap: MmapRaw,
    file: File,
    /// Blocks `[0, reserved_to)` are reserved (0 for a file opened: the first `ensure_reserved` reserves from 0,
    /// which costs nothing where blocks are already allocated).
    reserved_to: AtomicUsize,
    wrote_position: AtomicUsize,
    flushed_position: AtomicUsize,
    flush_lock: Mutex<()>,
    deleted: AtomicBool,
    warmed_to: AtomicUsize,
}

impl std::fmt::Debug for MappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile")
            .field("path", &self.path)
            .field("wrote", &self.wrote_position())
            .finish()
    }
}

impl MappedFile {
    /// Creates `path` with `file_size` zero bytes reserved on disk and maps it.
    pub fn create(path: &Path, file_from_offset: u64, file_size: usize) -> Result<MappedFile> {
        Self::create_stepped(path, file_from_offset, file_size, file_size)
    }

    /// Creates `path` with `file_size` zero bytes, the first `reserve` of them reserved on disk (the rest sparse
    /// until `ensure_reserved` reserves them), and maps it.
    pub fn create_stepped(
        path: &Path,
        file_from_offset: u64,
        file_size: usize,
        reserve: usize,
    ) -> Result<MappedFile> {
        let reserve = reserve.min(file_size);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        let reserved = file
            .set_len(file_size as u64)
            .and_then(|()| reserve_range(&file, 0, reserve));
        if let Err(e) = reserved {
            drop(file);
            let _ = std::fs::remove_file(path);
            return Err(Error::io(path, e));
        }
        let f = Self::map(path, file, file_from_offset, file_size, 0)?;
        f.reserved_to.store(reserve, Ordering::Release);
        Ok(f)
    }

    /// Reserves the file's blocks up to at least `end` (up to the next multiple of `RESERVE_STEP`, at most the file
    /// size) before a write there: one atomic load when they are; else `posix_fallocate`, whose failure (a full
    /// disk) is returned and nothing is written. Writer only (the warm-ahead thread never calls it).
    #[inline]
    pub fn ensure_reserved(&self, end: usize) -> Result<()> {
        let from = self.reserved_to.load(Ordering::Acquire);
        if end <= from {
            return Ok(());
        }
        self.reserve_to(from, end)
    }

    #[cold]
    fn reserve_to(&self, from: usize, end: usize) -> Result<()> {
        let to = end
            .div_ceil(RESERVE_STEP)
            .saturating_mul(RESERVE_STEP)
            .min(self.file_size)
            .max(end.min(self.file_size));
        reserve_range(&self.file, from, to - from).map_err(|e| Error::io(&self.path, e))?;
        self.reserved_to.fetch_max(to, Ordering::AcqRel);
        Ok(())
    }

    /// Bytes of the file reserved on disk so far (see `ensure_reserved`).
    pub fn reserved(&self) -> usize {
        self.reserved_to.load(Ordering::Acquire)
    }

    /// Maps an existing store file; its length must be `file_size`. The write position starts at the end
    /// (recovery lowers it).
    pub fn open(path: &Path, file_from_offset: u64, file_size: usize) -> Result<MappedFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        if len != file_size as u64 {
            return Err(Error::io(
                path,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("file size {len} does not match the configured mapped file size {file_size}"),
                ),
            ));
        }
        Self::map(path, file, file_from_offset, file_size, file_size)
    }

    fn map(
        path: &Path,
        file: File,
        file_from_offset: u64,
        file_size: usize,
        wrote: usize,
    ) -> Result<MappedFile> {
        let mmap = MmapOptions::new()
            .len(file_size)
            .map_raw(&file)
            .map_err(|e| Error::io(path, e))?;
        Ok(MappedFile {
            path: path.to_path_buf(),
            file_from_offset,
            file_size,
            mmap,
            file,
            reserved_to: AtomicUsize::new(0),
            wrote_position: AtomicUsize::new(wrote),
            flushed_position: AtomicUsize::new(wrote),
            flush_lock: Mutex::new(()),
            deleted: AtomicBool::new(false),
            warmed_to: AtomicUsize::new(wrote),
        })
    }

    #[inline]
    pub fn path(&self) -> &Path {
        &self.path
    }

    #[inline]
    pub fn start(&self) -> u64 {
        self.file_from_offset
    }

    #[inline]
    pub fn size(&self) -> usize {
        self.file_size
    }

    #[inline]
    pub fn end(&self) -> u64 {
        self.file_from_offset + self.file_size as u64
    }

    #[inline]
    pub fn wrote_position(&self) -> usize {
        self.wrote_position.load(Ordering::Acquire)
    }

    #[inline]
    pub fn remaining(&self) -> usize {
        self.file_size - self.wrote_position()
    }

    /// Publishes bytes below `pos` to readers (invariant 1).
    #[inline]
    pub fn set_wrote_position(&self, pos: usize) {
        debug_assert!(pos <= self.file_size);
        self.wrote_position.store(pos, Ordering::Release);
    }

    /// Recovery/truncation: sets both positions (the bytes below are durable or about to be zeroed+synced).
    pub fn reset_positions(&self, pos: usize) {
        self.wrote_position.store(pos, Ordering::Release);
        self.flushed_position.store(pos, Ordering::Release);
        self.warmed_to.store(pos, Ordering::Release);
    }

    #[inline]
    pub fn flushed_position(&self) -> usize {
        self.flushed_position.load(Ordering::Acquire)
    }

    /// Published bytes `[pos, pos+len)`, or None if any of them is not written yet.
    #[inline]
    pub fn read(&self, pos: usize, len: usize) -> Option<&[u8]> {
        let end = pos.checked_add(len)?;
        if end > self.wrote_position() {
            return None;
        }
        // SAFETY: in bounds; bytes below the published position are immutable (invariant 1).
        Some(unsafe { std::slice::from_raw_parts(self.mmap.as_ptr().add(pos), len) })
    }

    /// All published bytes.
    #[inline]
    pub fn written(&self) -> &[u8] {
        let w = self.wrote_position();
        // SAFETY: as in `read`.
        unsafe { std::slice::from_raw_parts(self.mmap.as_ptr(), w) }
    }

    /// The whole mapping, ignoring the write position.
    ///
    /// # Safety
    /// Only while no writer can touch the file (recovery, before the engine is shared).
    #[inline]
    pub unsafe fn whole(&self) -> &[u8] {
        std::slice::from_raw_parts(self.mmap.as_ptr(), self.file_size)
    }

    /// A writable view of unpublished bytes.
    ///
    /// # Safety
    /// Caller is the single writer, `pos >= wrote_position()` (or invariant 2 holds), and no other `&mut`
    /// to the same bytes exists.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn write_slice(&self, pos: usize, len: usize) -> &mut [u8] {
        assert!(pos + len <= self.file_size, "write beyond the mapped file");
        std::slice::from_raw_parts_mut(self.mmap.as_mut_ptr().add(pos), len)
    }

    /// Zeroes `[from, to)` and syncs it (recovery and truncation only, see invariant 2).
    pub fn zero_range(&self, from: usize, to: usize) -> Result<()> {
        if from >= to {
            return Ok(());
        }
        // SAFETY: invariant 2 — no reader can reach these bytes (they are at/after the published end).
        unsafe { self.write_slice(from, to - from).fill(0) };
        self.mmap
            .flush_range(from, to - from)
            .map_err(|e| Error::io(&self.path, e))
    }

    /// msync of the published bytes not yet flushed; returns the flushed position.
    pub fn flush(&self) -> Result<usize> {
        let _g = self.flush_lock.lock().unwrap_or_else(|e| e.into_inner());
        let wrote = self.wrote_position();
        let flushed = self.flushed_position();
        if wrote > flushed && !self.deleted.load(Ordering::Acquire) {
            self.mmap
                .flush_range(flushed, wrote - flushed)
                .map_err(|e| Error::io(&self.path, e))?;
        }
        if wrote != flushed {
            self.flushed_position.store(wrote, Ordering::Release);
        }
        Ok(wrote)
    }

    /// msync of whole pages below the write position only (async wake-ups): the page being written stays
    /// writable, so the writer does not take write-protect faults after each flush.
    pub fn flush_whole_pages(&self) -> Result<usize> {
        let _g = self.flush_lock.lock().unwrap_or_else(|e| e.into_inner());
        let page = crate::format::OS_PAGE_SIZE;
        let upto = self.wrote_position() / page * page;
        let flushed = self.flushed_position();
        if upto > flushed && !self.deleted.load(Ordering::Acquire) {
            self.mmap
                .flush_range(flushed, upto - flushed)
                .map_err(|e| Error::io(&self.path, e))?;
            self.flushed_position.store(upto, Ordering::Release);
        }
        Ok(upto.max(flushed))
    }

    /// Unlinks the file; the mapping stays valid for readers still holding an `Arc` (invariant 3).
    pub fn delete(&self) -> Result<()> {
        self.deleted.store(true, Ordering::Release);
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(&self.path, e)),
        }
    }
}

/// Position just after the last non-zero byte of `bytes` (0 if all zero), scanning 64-byte blocks from the end.
pub fn last_non_zero_end(bytes: &[u8]) -> usize {
    let rem = bytes.len() % 64;
    let full = bytes.len() - rem;
    if let Some(p) = bytes[full..].iter().rposition(|&b| b != 0) {
        return full + p + 1;
    }
    for (i, chunk) in bytes[..full].chunks_exact(64).enumerate().rev() {
        if chunk.iter().fold(0u8, |acc, &b| acc | b) != 0 {
            return i * 64 + chunk.iter().rposition(|&b| b != 0).unwrap() + 1;
        }
    }
    0
}

impl WarmTarget for MappedFile {
    fn is_warm_to(&self, upto: usize) -> bool {
        self.warmed_to.load(Ordering::Acquire) >= warm_end(upto, self.file_size)
            || self.deleted.load(Ordering::Acquire)
    }

    /// Pre-faults the next at most `chunk` bytes of `[max(warmed, page after the writer's), upto)` (`MADV_POPULATE_WRITE`,
    /// Linux ≥ 5.14; nothing elsewhere), so the writer does not pay the kernel's page faults. Contents unchanged. Returns
    /// true while pages below `upto` remain to warm (call again), false when done, unsupported or deleted.
    fn warm_to(&self, upto: usize, chunk: usize) -> bool {
        // the writer's own page is its own: start at the next page boundary
        let from = self
            .warmed_to
            .load(Ordering::Acquire)
            .max(warm_end(self.wrote_position(), usize::MAX));
        let upto = warm_end(upto, self.file_size);
        let to = upto.min(from.saturating_add(chunk));
        if to <= from || self.deleted.load(Ordering::Acquire) {
            return false;
        }
        // SAFETY: the range lies inside our live mapping; populate does not change contents.
        let warmed = unsafe {
            populate_recorded(
                self.mmap.as_mut_ptr(),
                from,
                to,
                self.file_size,
                &self.warmed_to,
            )
        };
        warmed && to < upto
    }
}

/// How far ahead of its writer a CommitLog file's blocks are reserved, and the step they are reserved in (64 MiB):
/// a store's disk cost is what it holds plus less than this per CommitLog file being written.
pub const RESERVE_STEP: usize = 64 << 20;

/// Reserves the blocks of `[offset, offset + len)` of `file` (Linux: `posix_fallocate`; elsewhere nothing: the
/// file was zero-extended by `set_len`).
#[cfg(target_os = "linux")]
pub(crate) fn reserve_range(file: &File, offset: usize, len: usize) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd;
    if len == 0 {
        return Ok(());
    }
    // SAFETY: plain syscall on an fd we own.
    let rc = unsafe {
        libc::posix_fallocate(file.as_raw_fd(), offset as libc::off_t, len as libc::off_t)
    };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn reserve_range(_file: &File, _offset: usize, _len: usize) -> std::io::Result<()> {
    Ok(())
}

/// Pre-faults `[ptr, ptr + len)` writable (`MADV_POPULATE_WRITE`, Linux 5.14+); false when unsupported (older
/// kernels, other systems), and the caller then stops asking.
///
/// # Safety
/// The range must lie inside a live writable mapping.
#[cfg(target_os = "linux")]
pub(crate) unsafe fn populate_write(ptr: *mut u8, len: usize) -> bool {
    const MADV_POPULATE_WRITE: libc::c_int = 23;
    libc::madvise(ptr as *mut libc::c_void, len, MADV_POPULATE_WRITE) == 0
}

#[cfg(not(target_os = "linux"))]
pub(crate) unsafe fn populate_write(_ptr: *mut u8, _len: usize) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_non_zero() {
        assert_eq!(last_non_zero_end(&[0u8; 100]), 0);
        for len in [1usize, 7, 8, 63, 64, 65, 130, 200] {
            for at in 0..len {
                let mut v = vec![0u8; len];
                v[at] = 1;
                assert_eq!(last_non_zero_end(&v), at + 1, "len {len} at {at}");
            }
        }
    }
}
