//! The warm-ahead thread (the pre-faulting half of RocketMQ's `AllocateMappedFileService` with
//! `warmMapedFileEnable`, `MappedFile#warmMappedFile`): keeps the pages the writer is about to write — the CommitLog
//! ahead of its write position, a ConsumeQueue file ahead of its last unit, the index file's hash-slot table and
//! entries ahead — faulted, so the writer (a put, on the caller's thread) does not pay the kernel's page faults.
//!
//! Owns: the thread, the pending requests (a target and the position to warm it to) and the stop flag.
//!
//! Format: none. Warming is `MADV_POPULATE_WRITE` (Linux 5.14+; `mapped_file::populate_write`): pages become present
//! and writable, their bytes are not changed (no byte on disk differs from an unwarmed store). Where it is unsupported
//! a target stops asking (the writer faults its own pages, as without the thread).
//!
//! Invariants:
//!   1. At most one request per target is pending; a newer one for the same target replaces its position; a request
//!      for pages already warm is dropped before it takes the lock or wakes the thread. The
//!      writer asks for at most a bounded window beyond what it has written (`WARM_AHEAD_BYTES` of CommitLog,
//!      `CQ_WARM_AHEAD_BYTES` per ConsumeQueue written, the index's slot table plus `INDEX_WARM_AHEAD_BYTES` of
//!      entries), so the memory faulted ahead is bounded.
//!   2. Requests are served round robin, `WARM_CHUNK_BYTES` at a time, the stop flag checked between chunks:
//!      `stop` returns within one chunk.
//!   3. The thread holds an `Arc` of each target while it warms it, so a mapping outlives a concurrent delete,
//!      truncation or close (warming a deleted or truncated file's pages changes nothing).
//!   4. Warming never takes the engine's write mutex and never writes: it cannot race a put, recovery or truncation.
//!
//! Thread-safety: `Send + Sync`; a `Mutex<Vec<request>>` + `Condvar` is the only shared state.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// Pre-faulted in one `madvise` call; the stop flag and the other requests get their turn between chunks.
const WARM_CHUNK_BYTES: usize = 1 << 20;

/// A mapping the thread can pre-fault (a CommitLog or ConsumeQueue `MappedFile`, an index file's mapping).
pub trait WarmTarget: Send + Sync {
    /// Pre-faults at most `chunk` more bytes below `upto` (contents unchanged); true while some remain.
    fn warm_to(&self, upto: usize, chunk: usize) -> bool;
    /// Its pages below `upto` are warm already (or warming is unsupported or pointless): nothing to ask for.
    fn is_warm_to(&self, upto: usize) -> bool;
}

/// `upto` rounded up to a whole page, within a mapping of `len` bytes: the end a request for `upto` stands for.
pub(crate) fn warm_end(upto: usize, len: usize) -> usize {
    let page = crate::format::OS_PAGE_SIZE;
    (upto.div_ceil(page) * page).min(len)
}

/// Pre-faults `[from, to)` of the `len`-byte mapping at `base` and records `to` in `warmed_to`; where populating is
/// unsupported records `len` instead (the target stops asking) and returns false.
///
/// # Safety
/// `[from, to)` must lie inside a live mapping starting at `base`, kept mapped for the call.
pub(crate) unsafe fn populate_recorded(
    base: *mut u8,
    from: usize,
    to: usize,
    len: usize,
    warmed_to: &AtomicUsize,
) -> bool {
    if crate::mapped_file::populate_write(base.add(from), to - from) {
        warmed_to.store(to, Ordering::Release);
        true
    } else {
        warmed_to.store(len, Ordering::Release);
        false
    }
}

type Request = (Arc<dyn WarmTarget>, usize);

struct Shared {
    requests: Mutex<Vec<Request>>,
    wake: Condvar,
    stop: AtomicBool,
}

pub struct WarmMappedFileService {
    shared: Arc<Shared>,
    handle: Mutex<Option<JoinHandle<()>>>,
}

fn same(a: &Arc<dyn WarmTarget>, b: &Arc<dyn WarmTarget>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

impl WarmMappedFileService {
    pub fn start() -> std::io::Result<WarmMappedFileService> {
        let shared = Arc::new(Shared {
            requests: Mutex::new(Vec::new()),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("rmq-store-warm".into())
            .spawn(move || run(&s))?;
        Ok(WarmMappedFileService {
            shared,
            handle: Mutex::new(Some(handle)),
        })
    }

    /// Asks for `target`'s pages below `upto` to be faulted (never waits for the warming). A request its target
    /// covers already costs nothing: no lock, no wake-up (a put asks at every call; most find the pages warm).
    pub fn warm(&self, target: Arc<dyn WarmTarget>, upto: usize) {
        if target.is_warm_to(upto) {
            return;
        }
        let mut reqs = self
            .shared
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match reqs.iter_mut().find(|r| same(&r.0, &target)) {
            Some(r) => r.1 = r.1.max(upto),
            None => reqs.push((target, upto)),
        }
        drop(reqs);
        self.shared.wake.notify_one();
    }

    /// Stops and joins the thread (idempotent; returns within one chunk of warming). Pending requests are dropped.
    pub fn stop(&self) {
        let handle = self.handle.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            self.shared.stop.store(true, Ordering::Release);
            self.shared
                .requests
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear();
            self.shared.wake.notify_one();
            let _ = h.join();
        }
    }
}

impl Drop for WarmMappedFileService {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(shared: &Shared) {
    loop {
        let (target, upto) = {
            let mut reqs = shared.requests.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if shared.stop.load(Ordering::Acquire) {
                    return;
                }
                if !reqs.is_empty() {
                    break reqs.remove(0);
                }
                reqs = shared.wake.wait(reqs).unwrap_or_else(|e| e.into_inner());
            }
        };
        if target.warm_to(upto, WARM_CHUNK_BYTES) {
            // more to do: back in line behind the others (a newer request for it may be there already)
            let mut reqs = shared.requests.lock().unwrap_or_else(|e| e.into_inner());
            match reqs.iter_mut().find(|r| same(&r.0, &target)) {
                Some(r) => r.1 = r.1.max(upto),
                None => reqs.push((target, upto)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Warm below `warm` already; counts the `warm_to` calls the thread makes.
    struct Target {
        warm: usize,
        calls: AtomicUsize,
    }

    impl WarmTarget for Target {
        fn warm_to(&self, _upto: usize, _chunk: usize) -> bool {
            self.calls.fetch_add(1, Ordering::AcqRel);
            false
        }
        fn is_warm_to(&self, upto: usize) -> bool {
            upto <= self.warm
        }
    }

    #[test]
    fn a_request_for_warm_pages_is_dropped_and_a_new_one_served() {
        let service = WarmMappedFileService::start().unwrap();
        let target = Arc::new(Target {
            warm: 1 << 20,
            calls: AtomicUsize::new(0),
        });
        for _ in 0..1000 {
            service.warm(target.clone(), 4096); // covered: no lock taken, no wake-up, nothing queued
        }
        assert!(service.shared.requests.lock().unwrap().is_empty());
        service.warm(target.clone(), 2 << 20);
        for _ in 0..500 {
            if target.calls.load(Ordering::Acquire) > 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        service.stop();
        assert_eq!(target.calls.load(Ordering::Acquire), 1);
    }
}
