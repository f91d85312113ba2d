//! The index builder thread (RocketMQ 4.9's `ReputMessageService` dispatching to `CommitLogDispatcherBuildIndex`,
//! for the index only): builds the index entries of a large put after the put has returned, reading its records
//! back from the CommitLog, so the caller's thread does not pay for the keys' hashing and the index file's writes.
//!
//! Owns: the thread, the CommitLog ranges waiting to be indexed, and the counts that let a caller wait until
//! everything put before its call is indexed (`wait_built`).
//!
//! Format: none of its own; it writes the index files through `index_service` exactly as a put would (the same
//! entries in the same order: the bytes on disk do not depend on which thread built them).
//!
//! Invariants:
//!   1. Ranges are submitted under the engine's write mutex, in CommitLog order, each covering exactly the records
//!      one put (or one slave append) dispatched; the thread indexes them in that order, each record whose sys flag
//!      is not a rollback (`is_indexed_sys_flag`), as the put did inline.
//!   2. A put indexes inline (under the write mutex, as before) when nothing is pending here (`is_idle`), so
//!      the index order stays CommitLog order whichever thread builds; the engine hands a range over only for a
//!      put of at least `BUILD_INDEX_HANDOFF_MESSAGES` messages, or when earlier ranges are still pending.
//!   3. `wait_built` returns once every range submitted before the call is built (or dropped after a build error,
//!      which stops the index until the next open, `Inner::stop_index`), or at once when the thread is stopped.
//!      Queries by key, `flush`, `close`, `index_notes` and the CommitLog's file deletion wait first.
//!   4. The thread never takes the engine's write mutex (so a holder of it may wait here); it takes the index
//!      service's write lock once per batch of ranges. `stop` after `wait_built` loses nothing; `stop` alone (a
//!      dropped engine, like a crash) drops what is pending: the next open re-indexes it from the CommitLog.
//!   5. The warm-ahead requests for the index (the file the keys go to, then its entries ahead) are made by this
//!      thread for the ranges it builds, as the put makes them for what it builds inline.
//!
//! Thread-safety: `Send + Sync`; one `Mutex<State>` and two `Condvar`s (work, progress) are the shared state.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::format::index::is_indexed_sys_flag;
use crate::message_store::Inner;
use crate::recovery::for_each_record;
use crate::warm_mapped_file_service::WarmMappedFileService;
use crate::warm_pacing::WarmPacing;

/// A put of at least this many messages hands its index build to the thread (fewer: built inline, no hand-off).
pub const BUILD_INDEX_HANDOFF_MESSAGES: usize = 64;

/// After draining its ranges the thread waits this long for more before it sleeps until woken (a submit wakes it
/// only from that sleep: steady puts are collected by the timed wait without a wake-up each).
const LINGER: Duration = Duration::from_millis(1);

#[derive(Default)]
struct State {
    /// CommitLog ranges `[from, to)` to index, in CommitLog order.
    pending: VecDeque<(i64, i64)>,
    /// Ranges ever submitted / ever built (or dropped): caught up when equal.
    submitted: u64,
    built: u64,
    /// The thread waits without a timeout (a submit must wake it).
    sleeping: bool,
    /// Callers in `wait_built`.
    waiters: usize,
    stop: bool,
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
    progress: Condvar,
}

pub(crate) struct BuildIndexService {
    shared: Arc<Shared>,
    handle: Mutex<Option<JoinHandle<()>>>,
}

impl BuildIndexService {
    pub(crate) fn start(
        inner: Arc<Inner>,
        warm: Option<Arc<WarmMappedFileService>>,
    ) -> std::io::Result<BuildIndexService> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            progress: Condvar::new(),
        });
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("rmq-store-index".into())
            .spawn(move || run(&s, &inner, &WarmPacing::new(warm)))?;
        Ok(BuildIndexService {
            shared,
            handle: Mutex::new(Some(handle)),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Nothing pending or being built (invariant 2: the caller, holding the write mutex, may build inline).
    pub(crate) fn is_idle(&self) -> bool {
        let st = self.lock();
        st.submitted == st.built
    }

    /// Queues `[from, to)` (invariant 1; called under the engine's write mutex).
    pub(crate) fn submit(&self, from: i64, to: i64) {
        if to <= from {
            return;
        }
        let mut st = self.lock();
        if st.stop {
            return;
        }
        st.pending.push_back((from, to));
        st.submitted += 1;
        if st.sleeping {
            st.sleeping = false;
            self.shared.work.notify_one();
        }
    }

    /// Invariant 3.
    pub(crate) fn wait_built(&self) {
        let mut st = self.lock();
        let target = st.submitted;
        if st.built >= target || st.stop {
            return;
        }
        st.waiters += 1;
        // the thread may be lingering in its timed wait: no reason to let it finish the linger
        self.shared.work.notify_one();
        while st.built < target && !st.stop {
            st = self
                .shared
                .progress
                .wait(st)
                .unwrap_or_else(|e| e.into_inner());
        }
        st.waiters -= 1;
    }

    /// Stops the thread (invariant 4): what is pending is dropped.
    pub(crate) fn stop(&self) {
        let handle = self.handle.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            {
                let mut st = self.lock();
                st.stop = true;
                st.pending.clear();
                self.shared.work.notify_one();
                self.shared.progress.notify_all();
            }
            let _ = h.join();
        }
    }
}

fn run(shared: &Shared, inner: &Inner, warm: &WarmPacing) {
    let mut batch: Vec<(i64, i64)> = Vec::new();
    loop {
        {
            let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            let mut lingered = false;
            while st.pending.is_empty() && !st.stop {
                if lingered {
                    st.sleeping = true;
                    st = shared.work.wait(st).unwrap_or_else(|e| e.into_inner());
                } else {
                    st = shared
                        .work
                        .wait_timeout(st, LINGER)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    lingered = true;
                }
            }
            st.sleeping = false;
            if st.stop {
                return;
            }
            batch.extend(st.pending.drain(..));
        }
        build(inner, warm, &batch);
        let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
        st.built += batch.len() as u64;
        batch.clear();
        if st.waiters > 0 {
            shared.progress.notify_all();
        }
    }
}

/// Indexes the records of `ranges` (invariant 1); a build error stops the index (`Inner::stop_index`).
fn build(inner: &Inner, warm: &WarmPacing, ranges: &[(i64, i64)]) {
    let Some(index) = &inner.index else {
        return;
    };
    if inner.index_stopped.load(Ordering::Acquire) {
        return;
    }
    let mut w = index.writer();
    warm.index_file(&mut w);
    let mut n = 0usize;
    for &(from, to) in ranges {
        let built = for_each_record(&inner.commit_log, from, to, |off, rec| {
            if !is_indexed_sys_flag(rec.sys_flag) {
                return Ok(());
            }
            warm.index_entries(&w, n);
            n += 1;
            w.build_index(rec.topic, rec.properties, off, rec.store_timestamp)
        });
        if let Err(e) = built {
            // the records are stored; 4.9 stops building the index (makeIndexFileError), the next open re-indexes
            inner.stop_index(&e);
            return;
        }
    }
}
