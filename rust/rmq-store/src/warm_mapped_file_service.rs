//! The warm-ahead thread (the pre-faulting half of RocketMQ's `AllocateMappedFileService` with
//! `warmMapedFileEnable`, `MappedFile#warmMappedFile`): keeps the CommitLog's pages faulted in a bounded window
//! ahead of the write position, so the writer (a put, on the caller's thread) does not pay the kernel's page faults.
//!
//! Owns: the thread, the one pending request (a file and the position to warm it to) and the stop flag.
//!
//! Format: none. Warming is `MADV_POPULATE_WRITE` (Linux 5.14+; see `MappedFile::warm_to`): pages become present and
//! writable, their bytes are not changed (no byte on disk differs from an unwarmed store). Where it is unsupported
//! the thread does nothing (the writer faults its own pages, as before).
//!
//! Invariants:
//!   1. At most one request is pending; a newer one replaces it (the writer only ever asks for "its file up to X").
//!   2. A file is warmed at most `WARM_AHEAD_BYTES` beyond the write position seen when the request was made, so the
//!      memory it faults ahead is bounded; the writer asks again every `WARM_STEP_BYTES` it writes.
//!   3. The thread holds an `Arc<MappedFile>` while warming, so the mapping outlives a concurrent delete, truncation
//!      or close (warming a deleted or truncated file's pages changes nothing). It warms in `WARM_CHUNK_BYTES` steps
//!      and checks the stop flag between them: `stop` returns within one chunk.
//!   4. Warming never takes the engine's write mutex and never writes: it cannot race a put or recovery.
//!
//! Thread-safety: `Send + Sync`; a `Mutex<State>` + `Condvar` is the only shared state.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::mapped_file::MappedFile;

/// Pre-faulted in one `madvise` call; the stop flag and a newer request are checked between chunks.
const WARM_CHUNK_BYTES: usize = 1 << 20;

#[derive(Default)]
struct State {
    request: Option<(Arc<MappedFile>, usize)>,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    stop: AtomicBool,
}

pub struct WarmMappedFileService {
    shared: Arc<Shared>,
    handle: Mutex<Option<JoinHandle<()>>>,
}

impl WarmMappedFileService {
    pub fn start() -> std::io::Result<WarmMappedFileService> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
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

    /// Asks for `file`'s pages below `upto` to be faulted (replacing any pending request; never blocks on warming).
    pub fn warm(&self, file: &Arc<MappedFile>, upto: usize) {
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        st.request = Some((file.clone(), upto));
        drop(st);
        self.shared.wake.notify_one();
    }

    /// Stops and joins the thread (idempotent; returns within one chunk of warming).
    pub fn stop(&self) {
        let handle = self.handle.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            self.shared.stop.store(true, Ordering::Release);
            {
                let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
                st.request = None;
            }
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
        let (file, upto) = {
            let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if shared.stop.load(Ordering::Acquire) {
                    return;
                }
                if let Some(r) = st.request.take() {
                    break r;
                }
                st = shared.wake.wait(st).unwrap_or_else(|e| e.into_inner());
            }
        };
        while file.warm_to(upto, WARM_CHUNK_BYTES) {
            if shared.stop.load(Ordering::Acquire) {
                return;
            }
        }
    }
}
