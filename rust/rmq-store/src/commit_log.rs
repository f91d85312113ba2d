//! The CommitLog: every record of every topic, appended in order across 1 GiB (configurable) mapped files.
//!
//! Owns: space allocation for appends (BLANK padding and roll-over to the next file), record reads by
//! (offset, size), the CommitLog's min/max offsets.
//!
//! Format: `<root>/commitlog/<20-digit start>`; records per `format::message`; a record never spans files:
//! when `len + 8 > remaining`, the 8-byte BLANK (TOTALSIZE = remaining, MAGIC `BLANK_MAGIC`) ends the file.
//!
//! Invariants:
//!   1. Every file but the last is full (its write position = file size, ending with a BLANK or a record
//!      that leaves ≥ 8 bytes, which the BLANK then fills).
//!   2. `max_offset()` only moves forward between recoveries/truncations, by whole records.
//!   3. Roll-over creates the next file before writing the BLANK: a failed creation writes nothing.
//!   4. A record larger than `file_size - 8` can never be written (`fits_in_a_file`).
//!
//! Thread-safety: reads are lock-free (Arc-pinned files, published positions). `allocate` must only be
//! called by the holder of the engine's write mutex.

use std::path::Path;
use std::sync::Arc;

use crate::error::Result;
use crate::format::message::{encode_blank, END_FILE_MIN_BLANK_LENGTH};
use crate::mapped_file::MappedFile;
use crate::mapped_file_queue::MappedFileQueue;

pub struct CommitLog {
    pub(crate) queue: MappedFileQueue,
}

/// A record's bytes pinned in their mapped file.
pub struct SelectedBuffer {
    file: Arc<MappedFile>,
    pos: usize,
    len: usize,
}

/// The CommitLog file a run of reads is in (`CommitLog::read_with`); empty at first.
#[derive(Default)]
pub struct ReadCursor(Option<Arc<MappedFile>>);

impl SelectedBuffer {
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        // bounds were checked against the published position when selected
        self.file
            .read(self.pos, self.len)
            .expect("selected bytes stay published")
    }

    #[inline]
    pub fn offset(&self) -> i64 {
        (self.file.start() + self.pos as u64) as i64
    }
}

impl CommitLog {
    pub fn load(dir: &Path, file_size: usize) -> Result<CommitLog> {
        Ok(CommitLog {
            queue: MappedFileQueue::load(dir, file_size)?
                .with_stepped_reserve(crate::mapped_file::RESERVE_STEP),
        })
    }

    #[inline]
    pub fn file_size(&self) -> usize {
        self.queue.file_size()
    }

    #[inline]
    pub fn max_offset(&self) -> i64 {
        self.queue.max_offset()
    }

    #[inline]
    pub fn min_offset(&self) -> i64 {
        self.queue.min_offset()
    }

    /// `rollNextFile`: start of the file after the one holding `offset`.
    #[inline]
    pub fn roll_next_file(&self, offset: i64) -> i64 {
        let fs = self.file_size() as i64;
        offset + fs - offset.rem_euclid(fs)
    }

    #[inline]
    pub fn fits_in_a_file(&self, record_len: usize) -> bool {
        record_len + END_FILE_MIN_BLANK_LENGTH <= self.file_size()
    }

    /// `(offset, size)` if wholly inside one file's published data.
    pub fn select(&self, offset: i64, size: i64) -> Option<SelectedBuffer> {
        if offset < 0 || size < 0 {
            return None;
        }
        let file = self.queue.find(offset)?;
        let pos = (offset as u64 - file.start()) as usize;
        let len = usize::try_from(size).ok()?;
        file.read(pos, len)?;
        Some(SelectedBuffer { file, pos, len })
    }

    /// `CommitLog.getMessage`: a stored record's bytes, None when deleted or not (yet) written; size ≤ 0 → None.
    #[inline]
    pub fn get_message(&self, offset: i64, size: i32) -> Option<SelectedBuffer> {
        if size <= 0 {
            return None;
        }
        self.select(offset, size as i64)
    }

    /// `get_message` for a run of reads (a pull's records, mostly in one file): the bytes, borrowed from the file
    /// `cursor` keeps, which is looked up again only when `offset` is outside it. None as `get_message` gives None.
    /// (A file deleted during the run is still read while the cursor holds it: as if deleted just after.)
    #[inline]
    pub fn read_with<'c>(
        &self,
        cursor: &'c mut ReadCursor,
        offset: i64,
        size: i32,
    ) -> Option<&'c [u8]> {
        if size <= 0 || offset < 0 {
            return None;
        }
        let at = offset as u64;
        if !cursor
            .0
            .as_ref()
            .is_some_and(|f| f.start() <= at && at < f.end())
        {
            cursor.0 = Some(self.queue.find(offset)?);
        }
        let file = cursor.0.as_ref()?;
        file.read((at - file.start()) as usize, size as usize)
    }

    /// Finds room for a record of `len` bytes: pads the current file with a BLANK and creates the next file
    /// when `len + 8 > remaining`. Returns the file and the position to write at. Writer only.
    pub fn allocate(&self, len: usize) -> Result<(Arc<MappedFile>, usize)> {
        debug_assert!(self.fits_in_a_file(len));
        let file = match self.queue.last() {
            Some(f) => f,
            None => self.queue.create_file(0)?,
        };
        let wrote = file.wrote_position();
        let remaining = file.size() - wrote;
        if len + END_FILE_MIN_BLANK_LENGTH <= remaining {
            // the record and the BLANK that may follow it: reserved before anything is written (full disk: an error)
            file.ensure_reserved(wrote + len + END_FILE_MIN_BLANK_LENGTH)?;
            return Ok((file, wrote));
        }
        if remaining >= END_FILE_MIN_BLANK_LENGTH {
            file.ensure_reserved(wrote + END_FILE_MIN_BLANK_LENGTH)?;
        }
        // create the next file first: if that fails (full disk) nothing is written, the end stays put
        let next = self.queue.create_file(file.end())?;
        next.ensure_reserved(len + END_FILE_MIN_BLANK_LENGTH)?;
        if remaining >= END_FILE_MIN_BLANK_LENGTH {
            // SAFETY: single writer, unpublished bytes.
            encode_blank(
                unsafe { file.write_slice(wrote, END_FILE_MIN_BLANK_LENGTH) },
                remaining,
            );
        }
        // (remaining < 8 cannot happen with whole records, each leaves ≥ 8 bytes; close the file anyway)
        file.set_wrote_position(file.size());
        Ok((next, 0))
    }
}
