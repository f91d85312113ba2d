//! The write path (docs/CORE_API.md §3) in the phases of Apache's put — `CommitLog.asyncPutMessage`: the checks,
//! `DefaultAppendMessageCallback.doAppend` under the put lock, `handleDiskFlush` — and of its `ReputMessageService`
//! dispatchers (`CommitLogDispatcherBuildConsumeQueue`, `CommitLogDispatcherBuildIndex`), which this engine runs
//! inside the put, under the write mutex (`message_store` invariants 1, 2 and 6). `put_messages_with` calls them in
//! order:
//!   1. `validate`: every message checked before anything is written (no lock).
//!   2. `QueueCursors`: each (topic, queue) of the put looked up once; its queue offset is the cursor's.
//!   3. `append_one`: one record allocated, encoded and published, then its ConsumeQueue unit dispatched.
//!   4. `IndexHandOff`: the put's keys indexed inline, or its range handed to the index builder thread.
//!   5. `after_put`: the dispatch position, the checkpoint's timestamps, the flush thread's wake-up pacing; then,
//!      with the mutex released, `handle_disk_flush`.
//!
//! The warm-ahead requests of phases 3 and 4 are paced by `warm_pacing::WarmPacing`.
//!
//! Owns: no state of its own (the write state is `message_store::WriteState`). Format: records and units in `format`.
//! Thread-safety: phases 2 to 5 run with the write mutex held.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::build_index_service::BUILD_INDEX_HANDOFF_MESSAGES;
use crate::commit_log::CommitLog;
use crate::config::FlushDiskType;
use crate::consume_queue::ConsumeQueue;
use crate::error::{Error, Result};
use crate::format::cq_unit::CqUnit;
use crate::format::index::is_indexed_sys_flag;
use crate::format::message::{
    encode_record, is_legal_topic, is_tx_prepared_or_rollback, record_len_v1,
    tags_code_of_properties, Host, RecordFields, BORNHOST_V6_FLAG, END_FILE_MIN_BLANK_LENGTH,
    MAX_PROPERTIES_SIZE, STOREHOSTADDRESS_V6_FLAG,
};
use crate::format::{FLUSH_LEAST_PAGES, OS_PAGE_SIZE};
use crate::mapped_file::MappedFile;
use crate::message_store::{
    Inner, MessageStore, OwnFields, PutContext, PutMessage, PutMessageStatus, PutResult, WriteState,
};
use crate::warm_pacing::WarmPacing;

/// How many (topic, queue) a put keeps at hand (searched in order); a batch's further queues are asked of the table.
const BATCH_QUEUE_CACHE: usize = 16;

impl MessageStore {
    /// `put_messages`; with `wait_flush` false a SYNC_FLUSH put returns once appended and dispatched, and the
    /// caller waits for the flush with `wait_flushed(end)` (group commit across callers that must not block).
    pub fn put_messages_with(
        &self,
        msgs: &[PutMessage<'_>],
        ctx: &PutContext,
        wait_flush: bool,
    ) -> Result<Vec<PutResult>> {
        self.check_open()?;
        if let Some(status) = self.validate(msgs, ctx)? {
            return Ok(vec![PutResult::failed(status); msgs.len()]);
        }
        let host_flags = host_sys_flags(&ctx.born_host, &self.inner.config.store_host);
        let mut results = Vec::with_capacity(msgs.len());
        let mut appended = Appended {
            end: -1,
            dispatched_any: false,
        };
        let wake_flusher = {
            let mut ws = self.write.lock().unwrap_or_else(|e| e.into_inner());
            self.check_open()?;
            let index = IndexHandOff::decide(self, msgs.len());
            index.before_append(self, &ws.warm, msgs, ctx);
            let mut cursors = QueueCursors::new();
            for m in msgs {
                match self.append_one(&mut ws, &mut cursors, m, ctx, host_flags) {
                    AppendOne::Stored { result, dispatched } => {
                        appended.end = result.commitlog_offset + result.wrote_bytes as i64;
                        appended.dispatched_any |= dispatched;
                        results.push(result);
                    }
                    AppendOne::NotStored => break,
                    AppendOne::NotDispatched => {
                        results.push(PutResult::failed(PutMessageStatus::CreateMappedFileFailed));
                        break;
                    }
                }
            }
            index.after_append(self, &ws.warm, msgs, ctx, &results, appended.end);
            self.after_put(&mut ws, &appended, ctx.store_timestamp)
        };
        results.resize(
            msgs.len(),
            PutResult::failed(PutMessageStatus::CreateMappedFileFailed),
        );
        self.handle_disk_flush(&mut results, appended.end, wake_flusher, wait_flush);
        Ok(results)
    }

    /// Phase 1, validation (invariant 2; 4.9's `checkMessage` and the CommitLog's size checks), before the write
    /// mutex is taken: an illegal topic or a negative queue id is an error wherever it stands in the put; otherwise
    /// the first message over a limit — a body over `max_message_size`, properties over `MAX_PROPERTIES_SIZE`, a
    /// record longer than a CommitLog file can hold — names the status every message of the put gets (`Some`), and
    /// nothing is written. `None`: every message may be appended.
    fn validate(
        &self,
        msgs: &[PutMessage<'_>],
        ctx: &PutContext,
    ) -> Result<Option<PutMessageStatus>> {
        let cfg = &self.inner.config;
        let cl = &self.inner.commit_log;
        let (born_len, store_len) = (ctx.born_host.encoded_len(), cfg.store_host.encoded_len());
        let mut first_fail: Option<PutMessageStatus> = None;
        let mut last_topic: Option<&str> = None;
        for m in msgs {
            if last_topic != Some(m.topic) {
                if !is_legal_topic(m.topic) {
                    return Err(Error::IllegalTopic(m.topic.to_string()));
                }
                last_topic = Some(m.topic);
            }
            if m.queue_id < 0 {
                return Err(Error::InvalidArgument(format!(
                    "queue id must be >= 0, got {}",
                    m.queue_id
                )));
            }
            if first_fail.is_none() {
                let len = record_len_v1(
                    m.body.len(),
                    m.topic.len(),
                    m.properties.len(),
                    born_len,
                    store_len,
                );
                if m.body.len() as u64 > cfg.max_message_size {
                    first_fail = Some(PutMessageStatus::MessageIllegal);
                } else if m.properties.len() > MAX_PROPERTIES_SIZE {
                    first_fail = Some(PutMessageStatus::PropertiesSizeExceeded);
                } else if !cl.fits_in_a_file(len) {
                    first_fail = Some(PutMessageStatus::MessageIllegal);
                }
            }
        }
        Ok(first_fail)
    }

    /// Phase 3, one message (4.9's `doAppend`, then `CommitLogDispatcherBuildConsumeQueue` for its record): its
    /// fields resolved (its own or the put's, the host bits of its sys flag set, invariant 3), its queue offset read
    /// from its cursor, CommitLog space allocated and the ConsumeQueue file of its unit prepared — all before a byte
    /// is written, so a failure leaves nothing half-written (`NotStored`) — then the record encoded at its physical
    /// offset and published (the file's write position moves past it), then its unit dispatched
    /// (`dispatch_consume_queue`). PREPARED and ROLLBACK records get no cursor and no unit (queue offset 0).
    fn append_one<'a>(
        &self,
        ws: &mut WriteState,
        cursors: &mut QueueCursors<'a>,
        m: &PutMessage<'a>,
        ctx: &PutContext,
        host_flags: i32,
    ) -> AppendOne {
        let cfg = &self.inner.config;
        let own = m.own.unwrap_or(OwnFields {
            born_timestamp: ctx.born_timestamp,
            sys_flag: ctx.sys_flag,
            reconsume_times: ctx.reconsume_times,
        });
        let sys_flag = with_host_flags(own.sys_flag, host_flags);
        let dispatched = !is_tx_prepared_or_rollback(sys_flag);
        let mut cursor = if dispatched {
            match cursors.cursor(&self.inner, m.topic, m.queue_id) {
                Ok(c) => Some(c),
                Err(_) => return AppendOne::NotStored,
            }
        } else {
            None
        };
        let queue_offset = cursor.as_ref().map_or(0, |c| c.queue.max_offset());
        let fields = RecordFields {
            queue_id: m.queue_id,
            flag: m.flag,
            queue_offset,
            physical_offset: 0,
            sys_flag,
            born_timestamp: own.born_timestamp,
            born_host: &ctx.born_host,
            store_timestamp: ctx.store_timestamp,
            store_host: &cfg.store_host,
            reconsume_times: own.reconsume_times,
            prepared_transaction_offset: ctx.prepared_transaction_offset,
            body: m.body,
            topic: m.topic.as_bytes(),
            properties: m.properties,
        };
        let len = fields.encoded_len();
        let Ok((file, pos)) = allocate(&self.inner.commit_log, ws, len) else {
            return AppendOne::NotStored;
        };
        if let Some(c) = cursor.as_mut() {
            if c.queue.prepare_in(&mut c.file, queue_offset).is_err() {
                return AppendOne::NotStored;
            }
        }
        ws.warm.commit_log(&file, pos);
        let physical_offset = (file.start() + pos as u64) as i64;
        let fields = RecordFields {
            physical_offset,
            ..fields
        };
        // SAFETY: write mutex held; `pos` is the unpublished end of the current file.
        encode_record(unsafe { file.write_slice(pos, len) }, &fields);
        file.set_wrote_position(pos + len);
        if let Some(c) = cursor {
            let unit = CqUnit {
                offset: physical_offset,
                size: len as i32,
                tags_code: tags_code_of_properties(m.properties),
            };
            if dispatch_consume_queue(&ws.warm, c, queue_offset, unit).is_err() {
                return AppendOne::NotDispatched;
            }
        }
        AppendOne::Stored {
            result: PutResult {
                status: PutMessageStatus::PutOk,
                commitlog_offset: physical_offset,
                queue_offset,
                wrote_bytes: len as i32,
            },
            dispatched,
        }
    }

    /// Phase 5, the end of the put under the write mutex (what 4.9's `ReputMessageService` records after each
    /// dispatch): where the next record to dispatch starts (`reput_from`, from where a slave's appends dispatch),
    /// the checkpoint's physic and logics timestamps (logics only when a record got a unit), and the flush thread's
    /// wake-up pacing: true (wake it) once per `FLUSH_LEAST_PAGES` pages appended (`WriteState::next_wake_at`).
    fn after_put(&self, ws: &mut WriteState, appended: &Appended, store_timestamp: i64) -> bool {
        let end = appended.end;
        let mut wake_flusher = false;
        if end >= 0 {
            ws.reput_from = end;
        }
        if end >= ws.next_wake_at {
            ws.next_wake_at = end + (FLUSH_LEAST_PAGES * OS_PAGE_SIZE) as i64;
            wake_flusher = true;
        }
        if end >= 0 {
            self.inner
                .last_physic_ts
                .store(store_timestamp, Ordering::Release);
            if appended.dispatched_any {
                self.inner
                    .last_logics_ts
                    .store(store_timestamp, Ordering::Release);
            }
        }
        wake_flusher
    }

    /// Phase 5, with the write mutex released (4.9's `CommitLog.handleDiskFlush`), when the put appended anything
    /// (`end` >= 0): ASYNC_FLUSH wakes the flush thread when `after_put` said so (unless `flush_commit_log_timed`);
    /// SYNC_FLUSH waits up to `sync_flush_timeout` for a flush covering `end` — unless the caller waits itself
    /// (`wait_flush` false) — and turns every PUT_OK into FLUSH_DISK_TIMEOUT when none comes (offsets kept).
    fn handle_disk_flush(
        &self,
        results: &mut [PutResult],
        end: i64,
        wake_flusher: bool,
        wait_flush: bool,
    ) {
        if end < 0 {
            return;
        }
        let cfg = &self.inner.config;
        match cfg.flush_disk_type {
            FlushDiskType::AsyncFlush => {
                if wake_flusher && !cfg.flush_commit_log_timed {
                    self.flush.wake();
                }
            }
            FlushDiskType::SyncFlush if !wait_flush => {}
            FlushDiskType::SyncFlush => {
                let ok = self
                    .flush
                    .sync(end, Duration::from_millis(cfg.sync_flush_timeout_ms));
                if !ok {
                    for r in results
                        .iter_mut()
                        .filter(|r| r.status == PutMessageStatus::PutOk)
                    {
                        r.status = PutMessageStatus::FlushDiskTimeout;
                    }
                }
            }
        }
    }
}

/// The sys flag bits the engine sets itself from the hosts' families (invariant 3): `BORNHOST_V6_FLAG` and
/// `STOREHOSTADDRESS_V6_FLAG`, for `with_host_flags`.
fn host_sys_flags(born_host: &Host, store_host: &Host) -> i32 {
    let mut flags = 0;
    if born_host.is_v6() {
        flags |= BORNHOST_V6_FLAG;
    }
    if store_host.is_v6() {
        flags |= STOREHOSTADDRESS_V6_FLAG;
    }
    flags
}

/// `sys_flag` with its host bits replaced by `host_flags` (whatever the caller passed in them).
#[inline]
fn with_host_flags(sys_flag: i32, host_flags: i32) -> i32 {
    (sys_flag & !(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)) | host_flags
}

/// Space for a `len`-byte record: at the end of the CommitLog file the last put wrote to while it fits there
/// (leaving room for the BLANK that ends a file), else where `CommitLog::allocate` puts it (a new file after a BLANK).
fn allocate(cl: &CommitLog, ws: &mut WriteState, len: usize) -> Result<(Arc<MappedFile>, usize)> {
    if let Some(f) = &ws.current {
        let wrote = f.wrote_position();
        let end = wrote + len + END_FILE_MIN_BLANK_LENGTH;
        if cl.fits_in_a_file(len) && end <= f.size() {
            f.ensure_reserved(end)?; // an atomic load, a posix_fallocate every RESERVE_STEP
            return Ok((f.clone(), wrote));
        }
    }
    let (f, pos) = cl.allocate(len)?;
    ws.current = Some(f.clone());
    Ok((f, pos))
}

/// Phase 3's dispatch of one record to its queue, inline (4.9's `CommitLogDispatcherBuildConsumeQueue`, which runs
/// on the `ReputMessageService` thread there): its unit appended at `queue_offset` in the file `cursor` prepared
/// (looked up again when there is none), then the queue's file kept warm ahead (`WarmPacing::consume_queue`). An
/// error leaves the record written but without a unit: recovery would dispatch it again after a crash.
fn dispatch_consume_queue(
    warm: &WarmPacing,
    cursor: &QueueCursor<'_>,
    queue_offset: i64,
    unit: CqUnit,
) -> Result<()> {
    let q = &cursor.queue;
    match cursor.file.as_deref() {
        Some(f) => q.append_unit_in(f, queue_offset, unit)?,
        None => q.append_unit(queue_offset, unit)?,
    }
    warm.consume_queue(q, queue_offset);
    Ok(())
}

/// What `append_one` did with one message.
enum AppendOne {
    /// Written, published and (`dispatched`: not PREPARED or ROLLBACK) given its ConsumeQueue unit.
    Stored { result: PutResult, dispatched: bool },
    /// Nothing written (no queue, no CommitLog space or no ConsumeQueue file): the put stops before this message.
    NotStored,
    /// The record is written but its unit is not: the put stops, this message CREATE_MAPPED_FILE_FAILED.
    NotDispatched,
}

/// How far a put got: where its last appended record ends (-1: none appended), whether any record got a unit.
struct Appended {
    end: i64,
    dispatched_any: bool,
}

/// One (topic, queue) a put writes: its ConsumeQueue (whose max offset is the next message's queue offset, 4.9's
/// `topicQueueTable` entry) and the queue file its last unit went to (saves a lookup per unit).
struct QueueCursor<'a> {
    topic: &'a str,
    queue_id: i32,
    queue: Arc<ConsumeQueue>,
    file: Option<Arc<MappedFile>>,
}

/// Phase 2, the queue cursors of one put: each (topic, queue) it writes looked up in the queue table (or created,
/// with its directory, at its first dispatched message) once. A batch often cycles through a topic's queues: the
/// first `BATCH_QUEUE_CACHE` are kept in a short list searched from the one used last; a queue beyond them is asked
/// of the table at each of its messages.
struct QueueCursors<'a> {
    at_hand: Vec<QueueCursor<'a>>,
    last: usize,
    spill: Option<QueueCursor<'a>>,
}

impl<'a> QueueCursors<'a> {
    fn new() -> Self {
        QueueCursors {
            at_hand: Vec::new(),
            last: 0,
            spill: None,
        }
    }

    /// The cursor of (`topic`, `queue_id`); an error when its queue cannot be created.
    #[inline]
    fn cursor(
        &mut self,
        inner: &Inner,
        topic: &'a str,
        queue_id: i32,
    ) -> Result<&mut QueueCursor<'a>> {
        let is_it = |c: &QueueCursor<'_>| c.queue_id == queue_id && c.topic == topic;
        let hit = if self.at_hand.get(self.last).is_some_and(is_it) {
            Some(self.last)
        } else {
            self.at_hand.iter().position(is_it)
        };
        if let Some(i) = hit {
            self.last = i;
            return Ok(&mut self.at_hand[i]);
        }
        let cursor = QueueCursor {
            topic,
            queue_id,
            queue: inner.queue_or_create(topic, queue_id)?,
            file: None,
        };
        if self.at_hand.len() < BATCH_QUEUE_CACHE {
            self.at_hand.push(cursor);
            self.last = self.at_hand.len() - 1;
            Ok(&mut self.at_hand[self.last])
        } else {
            Ok(self.spill.insert(cursor))
        }
    }
}

/// Phase 4, who indexes the put's keys (4.9's `CommitLogDispatcherBuildIndex`; invariant 6), decided under the
/// write mutex before anything is appended: `Builder` — the index builder thread, after the put returns — for a put
/// of `BUILD_INDEX_HANDOFF_MESSAGES` messages or more, or for any put while earlier ranges are still pending there
/// (the index stays in CommitLog order); `Inline` — this put, under the write mutex — otherwise; `Off` with
/// `message_index_enable` off. Once the index has stopped (a build error), no put hands off or builds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum IndexHandOff {
    Off,
    Builder,
    Inline,
}

impl IndexHandOff {
    fn decide(store: &MessageStore, count: usize) -> IndexHandOff {
        let handoff = store.index_builder.as_ref().is_some_and(|b| {
            !store.inner.index_stopped.load(Ordering::Acquire)
                && (count >= BUILD_INDEX_HANDOFF_MESSAGES || !b.is_idle())
        });
        if handoff {
            IndexHandOff::Builder
        } else if store.inner.index.is_some() {
            IndexHandOff::Inline
        } else {
            IndexHandOff::Off
        }
    }

    /// Before the records: an inline build's index file (the one its first key would create) is created now, so the
    /// warm-ahead thread faults its slot table while the records are written (`message_store` invariant 7).
    fn before_append(
        self,
        store: &MessageStore,
        warm: &WarmPacing,
        msgs: &[PutMessage<'_>],
        ctx: &PutContext,
    ) {
        let (IndexHandOff::Inline, Some(index), true) = (self, &store.inner.index, warm.is_on())
        else {
            return;
        };
        let indexed = msgs
            .iter()
            .any(|m| is_indexed_sys_flag(m.own.map_or(ctx.sys_flag, |o| o.sys_flag)));
        if indexed && !store.inner.index_stopped.load(Ordering::Acquire) {
            warm.index_file(&mut index.writer());
        }
    }

    /// After the records: `Builder` submits the range of the records appended (from the first, if it was, to
    /// `end`); `Inline` indexes the UNIQ_KEY and KEYS of every appended record that is not a rollback, in order. A
    /// build error stops the index (4.9's makeIndexFileError): the records are stored, the next open re-indexes them.
    fn after_append(
        self,
        store: &MessageStore,
        warm: &WarmPacing,
        msgs: &[PutMessage<'_>],
        ctx: &PutContext,
        results: &[PutResult],
        end: i64,
    ) {
        match (self, &store.index_builder, &store.inner.index) {
            (IndexHandOff::Builder, Some(builder), _) => {
                if let Some(first) = results
                    .first()
                    .filter(|r| r.status == PutMessageStatus::PutOk)
                {
                    builder.submit(first.commitlog_offset, end);
                }
            }
            (IndexHandOff::Inline, _, Some(index)) => {
                if results.is_empty() || store.inner.index_stopped.load(Ordering::Acquire) {
                    return;
                }
                let mut w = index.writer();
                for (i, (m, r)) in msgs.iter().zip(results.iter()).enumerate() {
                    warm.index_entries(&w, i);
                    let flags = m.own.map_or(ctx.sys_flag, |o| o.sys_flag);
                    if r.status != PutMessageStatus::PutOk || !is_indexed_sys_flag(flags) {
                        continue;
                    }
                    let built = w.build_index(
                        m.topic.as_bytes(),
                        m.properties,
                        r.commitlog_offset,
                        ctx.store_timestamp,
                    );
                    if let Err(e) = built {
                        store.inner.stop_index(&e);
                        break;
                    }
                }
            }
            _ => {}
        }
    }
}
