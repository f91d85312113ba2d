//! The background flush thread (RocketMQ `FlushRealTimeService` + `GroupCommitService` + the periodic
//! ConsumeQueue/checkpoint flush), fed by crossbeam channels.
//!
//! Owns: the thread, its wake-up channel and its sync-flush request channel.
//!
//! Format: none on disk (it calls back into the engine to msync files and write the checkpoint).
//!
//! Invariants:
//!   1. Every `flush_interval_commit_log` ms the thread runs `flush_all` (the CommitLog, the ConsumeQueues with at
//!      least `FLUSH_CONSUME_QUEUE_LEAST_PAGES` dirty — every one each `FLUSH_CONSUME_QUEUE_THOROUGH_INTERVAL_MS` —,
//!      the full index files, the checkpoint), whatever the flush mode.
//!   2. ASYNC_FLUSH with `flush_commit_log_timed` (4.9.7's default, `flushCommitLogTimed=true`): puts send no
//!      wake-up; the tick of invariant 1 flushes the CommitLog (4.9.7's FlushRealTimeService sleeps
//!      `flushIntervalCommitLog` between flushes the same way). With it off: a put sends a wake-up once
//!      `FLUSH_LEAST_PAGES` pages were appended since the last one (dropped if one is pending); a wake-up msyncs
//!      the CommitLog's whole dirty pages when at least `FLUSH_LEAST_PAGES` are dirty (pre-faulting ahead of the
//!      writer is the warm-ahead thread's, `warm_mapped_file_service`).
//!   3. SYNC_FLUSH (group commit): a put sends `Sync { upto }` and waits up to `sync_flush_timeout`; the thread
//!      drains every pending request, msyncs the CommitLog once and answers all of them (true iff the
//!      flushed offset covers `upto` and the msync succeeded).
//!   4. `stop` answers pending sync requests after a final CommitLog flush, then joins the thread.
//!
//! Thread-safety: `FlushService` is `Send + Sync`; the channels are the only shared state.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, select, unbounded, Receiver, RecvTimeoutError, Sender};

/// What the flush thread flushes (implemented by the engine).
pub trait FlushTarget: Send + Sync + 'static {
    /// msync the CommitLog; returns the flushed offset or None on an I/O error.
    fn flush_commit_log(&self) -> Option<i64>;
    /// CommitLog + the ConsumeQueues due + full index files + checkpoint (the periodic tick).
    fn flush_all(&self);
    /// Async wake-up: msync whole dirty pages of the CommitLog.
    fn on_wake(&self);
}

enum Request {
    Sync { upto: i64, reply: Sender<bool> },
    Stop,
}

pub struct FlushService {
    wake_tx: Sender<()>,
    req_tx: Sender<Request>,
    handle: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl FlushService {
    pub fn start(
        target: Arc<dyn FlushTarget>,
        interval: Duration,
    ) -> std::io::Result<FlushService> {
        let (wake_tx, wake_rx) = bounded::<()>(1);
        let (req_tx, req_rx) = unbounded::<Request>();
        let handle = std::thread::Builder::new()
            .name("rmq-store-flush".into())
            .spawn(move || run(target, interval, wake_rx, req_rx))?;
        Ok(FlushService {
            wake_tx,
            req_tx,
            handle: std::sync::Mutex::new(Some(handle)),
        })
    }

    /// ASYNC_FLUSH wake-up (never blocks).
    #[inline]
    pub fn wake(&self) {
        let _ = self.wake_tx.try_send(());
    }

    /// SYNC_FLUSH: waits until a flush covers `upto`; false on timeout or flush failure.
    pub fn sync(&self, upto: i64, timeout: Duration) -> bool {
        let (reply, rx) = bounded(1);
        if self.req_tx.send(Request::Sync { upto, reply }).is_err() {
            return false;
        }
        match rx.recv_timeout(timeout) {
            Ok(ok) => ok,
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => false,
        }
    }

    /// Stops and joins the thread (idempotent).
    pub fn stop(&self) {
        let handle = self.handle.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            let _ = self.req_tx.send(Request::Stop);
            let _ = h.join();
        }
    }
}

impl Drop for FlushService {
    fn drop(&mut self) {
        self.stop();
    }
}

fn answer(target: &dyn FlushTarget, pending: Vec<(i64, Sender<bool>)>) {
    if pending.is_empty() {
        return;
    }
    let flushed = target.flush_commit_log();
    for (upto, reply) in pending {
        let _ = reply.send(matches!(flushed, Some(f) if f >= upto));
    }
}

fn run(
    target: Arc<dyn FlushTarget>,
    interval: Duration,
    wake_rx: Receiver<()>,
    req_rx: Receiver<Request>,
) {
    let mut next_tick = Instant::now() + interval;
    loop {
        let now = Instant::now();
        if now >= next_tick {
            target.flush_all();
            next_tick = Instant::now() + interval;
            continue;
        }
        select! {
            recv(req_rx) -> msg => {
                let mut pending = Vec::new();
                let mut stop = false;
                match msg {
                    Ok(Request::Sync { upto, reply }) => pending.push((upto, reply)),
                    Ok(Request::Stop) | Err(_) => stop = true,
                }
                // group commit: everyone waiting right now shares one msync
                while let Ok(more) = req_rx.try_recv() {
                    match more {
                        Request::Sync { upto, reply } => pending.push((upto, reply)),
                        Request::Stop => stop = true,
                    }
                }
                answer(&*target, pending);
                if stop {
                    return;
                }
            }
            recv(wake_rx) -> _ => {
                target.on_wake();
            }
            default(next_tick.saturating_duration_since(now)) => {}
        }
    }
}
