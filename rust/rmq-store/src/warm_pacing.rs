//! The writer's pacing of warm-ahead requests: when a put (and the index builder thread) asks the warm-ahead thread
//! (`warm_mapped_file_service`) to fault pages ahead of what it writes, and how far.
//!
//! Owns: the warm-ahead service a writer asks (none with `warm_mapped_file_enable` off) and the CommitLog position
//! of the writer's next request. Format: none.
//!
//! Invariants (the window bounds of `warm_mapped_file_service` invariant 1):
//!   1. The CommitLog is asked once per `WARM_STEP_BYTES` written and at each new file, up to `WARM_AHEAD_BYTES`
//!      ahead; a ConsumeQueue once per `CQ_WARM_STEP_BYTES` of units, up to `CQ_WARM_AHEAD_BYTES` ahead; the index
//!      for the file the next keys go to before they are built, then once per `INDEX_WARM_STEP_MESSAGES` messages.
//!   2. Asking never waits; with no service every method does nothing.
//!
//! Thread-safety: not shared. The put's pacing lives in the write state (under the write mutex); the index builder
//! thread keeps its own.

use std::sync::Arc;

use crate::consume_queue::ConsumeQueue;
use crate::format::cq_unit::CQ_STORE_UNIT_SIZE;
use crate::format::{
    CQ_WARM_AHEAD_BYTES, CQ_WARM_STEP_BYTES, INDEX_WARM_STEP_MESSAGES, WARM_AHEAD_BYTES,
    WARM_STEP_BYTES,
};
use crate::index_service::IndexWriter;
use crate::mapped_file::MappedFile;
use crate::warm_mapped_file_service::{WarmMappedFileService, WarmTarget};

/// When a writer asks the warm-ahead thread for more (module header, invariant 1).
pub(crate) struct WarmPacing {
    service: Option<Arc<WarmMappedFileService>>,
    /// The CommitLog is asked again when the writer reaches this (file start, position).
    commit_log_next_at: (u64, usize),
}

impl WarmPacing {
    pub(crate) fn new(service: Option<Arc<WarmMappedFileService>>) -> WarmPacing {
        WarmPacing {
            service,
            commit_log_next_at: (u64::MAX, 0),
        }
    }

    /// Whether there is a warm-ahead thread to ask.
    pub(crate) fn is_on(&self) -> bool {
        self.service.is_some()
    }

    /// A record is about to be written at `pos` of the CommitLog file `file`.
    #[inline]
    pub(crate) fn commit_log(&mut self, file: &Arc<MappedFile>, pos: usize) {
        if let Some(warm) = &self.service {
            if self.commit_log_next_at.0 != file.start() || pos >= self.commit_log_next_at.1 {
                warm.warm(file.clone() as Arc<dyn WarmTarget>, pos + WARM_AHEAD_BYTES);
                self.commit_log_next_at = (file.start(), pos + WARM_STEP_BYTES);
            }
        }
    }

    /// A unit was appended at `queue_offset` of `queue`.
    #[inline]
    pub(crate) fn consume_queue(&self, queue: &ConsumeQueue, queue_offset: i64) {
        if let Some(warm) = &self.service {
            if (queue_offset as usize * CQ_STORE_UNIT_SIZE) % CQ_WARM_STEP_BYTES
                < CQ_STORE_UNIT_SIZE
            {
                if let Some((f, upto)) = queue.warm_request(queue_offset, CQ_WARM_AHEAD_BYTES) {
                    warm.warm(f as Arc<dyn WarmTarget>, upto);
                }
            }
        }
    }

    /// Before keys are built: the index file they go to is created now if it is missing (as the first key would
    /// create it), and its slot table and next entries asked for.
    pub(crate) fn index_file(&self, w: &mut IndexWriter<'_>) {
        if let Some(warm) = &self.service {
            if w.ensure_file().is_ok() {
                if let Some((target, upto)) = w.warm_request() {
                    warm.warm(target, upto);
                }
            }
        }
    }

    /// Before the keys of the `nth` (from 0) message of a build: the index's next entries, once per
    /// `INDEX_WARM_STEP_MESSAGES` messages.
    #[inline]
    pub(crate) fn index_entries(&self, w: &IndexWriter<'_>, nth: usize) {
        if let Some(warm) = &self.service {
            if nth % INDEX_WARM_STEP_MESSAGES == INDEX_WARM_STEP_MESSAGES - 1 {
                if let Some((target, upto)) = w.warm_request() {
                    warm.warm(target, upto);
                }
            }
        }
    }
}
