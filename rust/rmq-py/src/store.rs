//! `StoreEngine`: the contract's engine (docs/CORE_API.md §2–§5) over `rmq_store::MessageStore`.
//!
//! Every method borrows its arguments, releases the GIL around disk work/scans/waits, and maps errors through
//! `errors::to_py`. Decisions (the Python twin matches them):
//!   * config keys missing from the dict take RocketMQ defaults; unknown keys are ignored.
//!   * `put_messages`: `len(queue_ids) != len(msgs)` → ValueError; `body` must be `bytes`, `topic` a `str`.
//!   * `get_message`'s `property_filter` result is tested for truthiness; if it raises, the scan stops and the
//!     exception propagates.

use std::path::PathBuf;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use rmq_store::format::batch::{join_offset_msg_ids, BatchRecords};
use rmq_store::{
    FlushDiskType, GetMessageResult, MessageFilter, MessageStore, OwnFields, PutContext,
    PutMessage, PutMessageStatus, PutResult, StoreConfig,
};

use crate::codec;
use crate::errors::IntoPyResult;

#[pyclass(frozen, module = "rmq_core._core")]
pub struct StoreEngine {
    store: MessageStore,
}

fn config_from_dict(config: &Bound<'_, PyDict>) -> PyResult<StoreConfig> {
    let mut c = StoreConfig::default();
    macro_rules! take {
        ($key:literal, $field:ident) => {
            if let Some(v) = config.get_item($key)? {
                c.$field = v.extract()?;
            }
        };
    }
    take!("mapped_file_size_commit_log", mapped_file_size_commit_log);
    take!(
        "mapped_file_size_consume_queue",
        mapped_file_size_consume_queue
    );
    take!("max_message_size", max_message_size);
    take!("flush_interval_commit_log", flush_interval_commit_log_ms);
    take!("flush_commit_log_timed", flush_commit_log_timed);
    take!("sync_flush_timeout", sync_flush_timeout_ms);
    take!("check_crc_on_recover", check_crc_on_recover);
    take!(
        "max_transfer_bytes_on_message_in_memory",
        max_transfer_bytes_on_message_in_memory
    );
    take!(
        "max_transfer_count_on_message_in_memory",
        max_transfer_count_on_message_in_memory
    );
    take!(
        "max_transfer_bytes_on_message_in_disk",
        max_transfer_bytes_on_message_in_disk
    );
    take!(
        "max_transfer_count_on_message_in_disk",
        max_transfer_count_on_message_in_disk
    );
    take!(
        "access_message_in_memory_max_ratio",
        access_message_in_memory_max_ratio
    );
    take!("total_physical_memory", total_physical_memory);
    take!("max_filter_message_size", max_filter_message_size);
    take!("message_index_enable", message_index_enable);
    take!("max_hash_slot_num", max_hash_slot_num);
    take!("max_index_num", max_index_num);
    take!("max_msgs_num_batch", max_msgs_num_batch);
    take!("warm_mapped_file_enable", warm_mapped_file_enable);
    if let Some(v) = config.get_item("flush_disk_type")? {
        let s: String = v.extract()?;
        c.flush_disk_type =
            FlushDiskType::parse(&s).map_err(|e| PyValueError::new_err(e.to_string()))?;
    }
    if let Some(v) = config.get_item("store_host")? {
        c.store_host = codec::hosts::host_from_py(&v)?;
    }
    Ok(c)
}

/// Tag codes + an optional Python `(properties) -> bool` callback.
struct PyFilter {
    codes: Option<Vec<i32>>,
    callback: Option<Py<PyAny>>,
    error: Option<PyErr>,
}

impl MessageFilter for PyFilter {
    #[inline]
    fn is_matched_by_consume_queue(&self, tags_code: i64) -> bool {
        match &self.codes {
            None => true,
            Some(c) => c.contains(&(tags_code as i32)),
        }
    }

    fn is_matched_by_commit_log(&mut self, properties: &[u8]) -> bool {
        let Some(cb) = &self.callback else {
            return true;
        };
        let res = Python::attach(|py| -> PyResult<bool> {
            let d = codec::properties::properties_dict(py, properties)?;
            cb.call1(py, (d,))?.bind(py).is_truthy()
        });
        match res {
            Ok(b) => b,
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }

    fn has_commit_log_filter(&self) -> bool {
        self.callback.is_some()
    }

    fn aborted(&self) -> bool {
        self.error.is_some()
    }
}

impl StoreEngine {
    fn check_open(&self, py: Python<'_>) -> PyResult<()> {
        if self.store.is_closed() {
            return Err(crate::errors::to_py(py, rmq_store::Error::Closed));
        }
        Ok(())
    }
}

/// `m, q = pair` as Python unpacks it: an exact 2-tuple directly; any other iterable through the iterator protocol
/// with Python's errors (not iterable, too few, too many values).
fn unpack_pair<'py>(pair: &Bound<'py, PyAny>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    if let Ok(t) = pair.cast_exact::<PyTuple>() {
        if t.len() == 2 {
            return Ok((t.get_item(0)?, t.get_item(1)?));
        }
    }
    let mut it = pair.try_iter().map_err(|_| {
        let name = pair
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        PyTypeError::new_err(format!("cannot unpack non-iterable {name} object"))
    })?;
    let mut got = Vec::with_capacity(2);
    for v in it.by_ref() {
        got.push(v?);
        if got.len() > 2 {
            return Err(PyValueError::new_err(
                "too many values to unpack (expected 2)",
            ));
        }
    }
    if got.len() < 2 {
        return Err(PyValueError::new_err(format!(
            "not enough values to unpack (expected 2, got {})",
            got.len()
        )));
    }
    let q = got.pop().expect("two values");
    let m = got.pop().expect("two values");
    Ok((m, q))
}

#[pymethods]
impl StoreEngine {
    #[new]
    fn new(py: Python<'_>, root_dir: PathBuf, config: &Bound<'_, PyDict>) -> PyResult<Self> {
        let cfg = config_from_dict(config)?;
        let store = py
            .detach(|| MessageStore::open(&root_dir, cfg))
            .py_err(py)?;
        Ok(StoreEngine { store })
    }

    #[pyo3(signature = (msgs, queue_ids, sys_flag, born_timestamp, born_host, reconsume_times, store_timestamp, wait_flush=true, own_fields=None, prepared_transaction_offset=0, uniq_prefix="", uniq_counter=None, trailing_separator=true))]
    #[allow(clippy::too_many_arguments)]
    fn put_messages<'py>(
        &self,
        py: Python<'py>,
        msgs: &Bound<'py, PyList>,
        queue_ids: Option<&Bound<'py, PyAny>>,
        sys_flag: i32,
        born_timestamp: i64,
        born_host: &Bound<'py, PyAny>,
        reconsume_times: i32,
        store_timestamp: i64,
        wait_flush: bool,
        own_fields: Option<Vec<(i64, i32, i32)>>,
        prepared_transaction_offset: i64,
        uniq_prefix: &str,
        uniq_counter: Option<&Bound<'py, PyAny>>,
        trailing_separator: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        // `queue_ids` None: `msgs` is the caller's batch of (message, queue id) pairs, unpacked here as Python's
        // `for m, q in batch` would unpack them (the facade's split, without its two lists)
        let (items, queue_objs): (Vec<Bound<'py, PyAny>>, Option<Vec<Bound<'py, PyAny>>>) =
            match queue_ids {
                Some(_) => (msgs.iter().collect(), None),
                None => {
                    let mut ms = Vec::with_capacity(msgs.len());
                    let mut qs = Vec::with_capacity(msgs.len());
                    for pair in msgs.iter() {
                        let (m, q) = unpack_pair(&pair)?;
                        ms.push(m);
                        qs.push(q);
                    }
                    (ms, Some(qs))
                }
            };
        let n = items.len();
        let queue_ids: Vec<i32> = match queue_ids {
            Some(q) => {
                let v: Vec<i32> = q.extract()?;
                if v.len() != n {
                    return Err(PyValueError::new_err(format!(
                        "{n} messages but {} queue ids",
                        v.len()
                    )));
                }
                v
            }
            None => Vec::with_capacity(n),
        };
        if let Some(own) = &own_fields {
            if own.len() != n {
                return Err(PyValueError::new_err(format!(
                    "{n} messages but {} own fields",
                    own.len()
                )));
            }
        }
        let ctx = PutContext {
            sys_flag,
            born_timestamp,
            born_host: codec::hosts::host_from_py(born_host)?,
            reconsume_times,
            store_timestamp,
            prepared_transaction_offset,
        };
        let (a_topic, a_body, a_flag, a_props, uniq_key) = (
            intern!(py, "topic"),
            intern!(py, "body"),
            intern!(py, "flag"),
            intern!(py, "properties"),
            intern!(py, "UNIQ_KEY"),
        );
        // UNIQ_KEY assigned in this pass, as `assign_uniq_keys(msgs, uniq_prefix, uniq_counter)` over the whole batch
        // before the put would assign it: a message whose fields this pass rejects stops the reading, not the
        // assignment (the rest still get theirs, then the first rejection is raised); an assignment error is raised
        // at once
        let ids = uniq_counter
            .map(|c| codec::uniq_keys::UniqIds::new(uniq_prefix, c))
            .transpose()?;
        let mut id = String::with_capacity(uniq_prefix.len() + 4);
        let mut rejected: Option<PyErr> = None;
        let mut topics: Vec<Bound<'py, PyString>> = Vec::with_capacity(n);
        let mut bodies: Vec<Bound<'py, PyBytes>> = Vec::with_capacity(n);
        let mut flags: Vec<i32> = Vec::with_capacity(n);
        let mut prop_ends: Vec<usize> = Vec::with_capacity(n);
        let mut queue_ids = queue_ids;
        let mut arena: Vec<u8> = Vec::with_capacity(n * 32);
        let fields = codec::message_fields::MessageFields::get(py)?;
        for (i, m) in items.iter().enumerate() {
            // Message / MessageExt: their four slots read through the descriptors directly; anything else
            // (a subclass, a duck-typed object) through getattr
            let fast = if rejected.is_none() {
                match fields.read(m) {
                    Ok(v) => v,
                    Err(e) => {
                        rejected = Some(e);
                        None
                    }
                }
            } else {
                None
            };
            if let Some(ids) = &ids {
                let props = match &fast {
                    Some([_, _, _, p]) => p.clone(),
                    None => m.getattr(a_props)?,
                };
                if !props.contains(uniq_key)? {
                    ids.next_into(py, &mut id)?;
                    props.set_item(uniq_key, PyString::new(py, &id))?;
                }
            }
            if rejected.is_some() {
                continue;
            }
            let read = (|| -> PyResult<()> {
                let [topic, body, flag, props] = match fast {
                    Some(v) => v,
                    None => [
                        m.getattr(a_topic)?,
                        m.getattr(a_body)?,
                        m.getattr(a_flag)?,
                        m.getattr(a_props)?,
                    ],
                };
                let topic = topic
                    .cast_into::<PyString>()
                    .map_err(|_| PyTypeError::new_err("message topic must be str"))?;
                let body = body
                    .cast_into::<PyBytes>()
                    .map_err(|_| PyTypeError::new_err("message body must be bytes"))?;
                let flag: i32 = flag.extract()?;
                if let Some(qs) = &queue_objs {
                    queue_ids.push(qs[i].extract()?);
                }
                if !props.is_none() {
                    let d = props
                        .cast::<PyDict>()
                        .map_err(|_| PyTypeError::new_err("message properties must be a dict"))?;
                    let start = arena.len();
                    codec::properties::encode_properties_into(d, &mut arena)?;
                    if !trailing_separator && arena.len() > start {
                        arena.pop(); // the last entry's `\x02`: 4.9.7's `messageProperties2String` writes none
                    }
                }
                topics.push(topic);
                bodies.push(body);
                flags.push(flag);
                prop_ends.push(arena.len());
                Ok(())
            })();
            if let Err(e) = read {
                rejected = Some(e);
            }
        }
        if let Some(e) = rejected {
            return Err(e);
        }
        let mut put = Vec::with_capacity(n);
        let mut start = 0usize;
        for i in 0..n {
            put.push(PutMessage {
                topic: topics[i].to_str()?,
                body: bodies[i].as_bytes(),
                flag: flags[i],
                properties: &arena[start..prop_ends[i]],
                queue_id: queue_ids[i],
                own: own_fields.as_ref().map(|o| OwnFields {
                    born_timestamp: o[i].0,
                    sys_flag: o[i].1,
                    reconsume_times: o[i].2,
                }),
            });
            start = prop_ends[i];
        }
        let store = &self.store;
        let results = py
            .detach(|| store.put_messages_with(&put, &ctx, wait_flush))
            .py_err(py)?;
        // columns, not a tuple per message: one bytes object each for the statuses (one byte, the ordinal), the
        // CommitLog offsets and queue offsets (int64) and the wrote bytes (int32), native byte order
        let n = results.len();
        let statuses = PyBytes::new_with(py, n, |b| {
            for (d, r) in b.iter_mut().zip(&results) {
                *d = r.status as u8;
            }
            Ok(())
        })?;
        let i64_column = |f: fn(&PutResult) -> i64| {
            PyBytes::new_with(py, n * 8, |b| {
                for (d, r) in b.chunks_exact_mut(8).zip(&results) {
                    d.copy_from_slice(&f(r).to_ne_bytes());
                }
                Ok(())
            })
        };
        let commitlog_offsets = i64_column(|r| r.commitlog_offset)?;
        let queue_offsets = i64_column(|r| r.queue_offset)?;
        let wrote_bytes = PyBytes::new_with(py, n * 4, |b| {
            for (d, r) in b.chunks_exact_mut(4).zip(&results) {
                d.copy_from_slice(&r.wrote_bytes.to_ne_bytes());
            }
            Ok(())
        })?;
        PyTuple::new(
            py,
            [statuses, commitlog_offsets, queue_offsets, wrote_bytes],
        )
    }

    /// Stores the plain sends `[start, end)` of `sends` (a `SendRequestColumns`) in one call, as `put_messages` with
    /// each send's own fields would: `sys_flag_or[key]` or-ed into the sys flag of each send of that key, a send
    /// without a UNIQ_KEY given the next id of (`uniq_prefix`, `uniq_counter`) as `assign_uniq_keys` gives them.
    /// Results as `put_messages`'.
    #[pyo3(signature = (sends, start, end, sys_flag_or, born_host, store_timestamp, wait_flush=true, uniq_prefix="", uniq_counter=None))]
    #[allow(clippy::too_many_arguments)]
    fn put_send_requests<'py>(
        &self,
        py: Python<'py>,
        sends: &Bound<'py, crate::send_request::SendRequestColumns>,
        start: usize,
        end: usize,
        sys_flag_or: Vec<i32>,
        born_host: &Bound<'py, PyAny>,
        store_timestamp: i64,
        wait_flush: bool,
        uniq_prefix: &str,
        uniq_counter: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let cols = sends.get();
        let rows = cols.plain_rows(start, end)?;
        let ids = match uniq_counter {
            Some(c) => Some(codec::uniq_keys::UniqIds::new(uniq_prefix, c)?),
            None => None,
        };
        let assigned = cols.assign_uniq_keys(py, start, &rows, ids.as_ref())?;
        let put = cols.put_messages(py, start, &rows, &assigned, &sys_flag_or)?;
        let ctx = PutContext {
            sys_flag: 0,
            born_timestamp: 0,
            born_host: codec::hosts::host_from_py(born_host)?,
            reconsume_times: 0,
            store_timestamp,
            prepared_transaction_offset: 0,
        };
        let store = &self.store;
        let results = py
            .detach(|| store.put_messages_with(&put, &ctx, wait_flush))
            .py_err(py)?;
        drop(put);
        cols.keep_assigned(assigned);
        results_list(py, &results)
    }

    /// SEND_BATCH_MESSAGE's put: the blocks of `body` (`rmq_store::format::batch`) read and stored here, each as a
    /// record of `topic`/`queue_id` whose properties are the block's followed by `batch_properties` (4.9.7's batch
    /// encoder), a block with no UNIQ_KEY given `uniq_id()` when a generator is passed, all under one write mutex
    /// (GIL released). Answers `(status, stored, queue_offset, msg_ids, wrote_bytes, end_offset, malformed,
    /// properties)`: the first status that is not PUT_OK (else PUT_OK); how many records were appended; the
    /// first one's queue offset (-1: none); their offset msg ids joined with ','; the bytes written; where the last
    /// one ends (-1: none); why the body is malformed (then MESSAGE_ILLEGAL and nothing stored), else None; with
    /// `keep_properties`, each appended record's properties as stored (the arrival listeners'), else None.
    #[pyo3(signature = (topic, queue_id, body, batch_properties, sys_flag, born_timestamp, born_host, reconsume_times, store_timestamp, wait_flush=true, uniq_id=None, keep_properties=false))]
    #[allow(clippy::too_many_arguments)]
    fn put_batch<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        queue_id: i32,
        body: &Bound<'py, PyBytes>,
        batch_properties: &[u8],
        sys_flag: i32,
        born_timestamp: i64,
        born_host: &Bound<'py, PyAny>,
        reconsume_times: i32,
        store_timestamp: i64,
        wait_flush: bool,
        uniq_id: Option<&Bound<'py, PyAny>>,
        keep_properties: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        self.check_open(py)?;
        let ctx = PutContext {
            sys_flag,
            born_timestamp,
            born_host: codec::hosts::host_from_py(born_host)?,
            reconsume_times,
            store_timestamp,
            prepared_transaction_offset: 0,
        };
        let built = BatchRecords::build(body.as_bytes(), batch_properties, |id: &mut String| {
            let Some(f) = uniq_id else {
                return Ok(false);
            };
            id.clear();
            id.push_str(f.call0()?.cast::<PyString>()?.to_str()?);
            Ok::<bool, PyErr>(true)
        })?;
        let records = match built {
            Ok(r) => r,
            Err(reason) => {
                let illegal = PutMessageStatus::MessageIllegal as i32;
                return (illegal, 0usize, -1i64, "", 0i64, -1i64, reason, py.None())
                    .into_pyobject(py);
            }
        };
        let store = &self.store;
        let r = py
            .detach(|| store.put_batch(topic, queue_id, &records, &ctx, wait_flush))
            .py_err(py)?;
        let host = &store.config().store_host;
        let msg_ids = join_offset_msg_ids(host, r.commitlog_offsets.iter().copied());
        let properties = if keep_properties {
            let list = PyList::empty(py);
            for i in 0..r.stored {
                list.append(PyBytes::new(py, records.properties(i)))?;
            }
            list.into_any()
        } else {
            py.None().into_bound(py)
        };
        (
            r.status as i32,
            r.stored,
            r.queue_offset,
            msg_ids,
            r.wrote_bytes,
            r.end_offset,
            py.None(),
            properties,
        )
            .into_pyobject(py)
    }

    /// Waits, GIL released, until a CommitLog flush covers `upto` (a `wait_flush=False` put's end offset).
    fn wait_flushed(&self, py: Python<'_>, upto: i64) -> bool {
        let store = &self.store;
        py.detach(|| store.wait_flushed(upto))
    }

    #[pyo3(signature = (topic, queue_id, offset, max_msg_nums, tag_codes, property_filter))]
    #[allow(clippy::too_many_arguments)]
    fn get_message<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msg_nums: i32,
        tag_codes: Option<Vec<i32>>,
        property_filter: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let mut filter = PyFilter {
            codes: tag_codes,
            callback: property_filter,
            error: None,
        };
        let store = &self.store;
        let r: GetMessageResult = py
            .detach(|| store.get_message(topic, queue_id, offset, max_msg_nums, &mut filter))
            .py_err(py)?;
        if let Some(e) = filter.error.take() {
            return Err(e);
        }
        (
            r.status as i32,
            r.next_begin_offset,
            r.min_offset,
            r.max_offset,
            r.message_count,
            r.buffer_total_size,
            r.suggest_pulling_from_slave,
            PyBytes::new(py, &r.body),
            r.max_phy_offset_pulling,
        )
            .into_pyobject(py)
    }

    fn is_the_batch_full(
        &self,
        py: Python<'_>,
        size: i64,
        max_msg_nums: i64,
        buffer_total: i64,
        msg_total: i64,
        in_disk: bool,
    ) -> PyResult<bool> {
        self.check_open(py)?;
        Ok(self
            .store
            .is_the_batch_full(size, max_msg_nums, buffer_total, msg_total, in_disk))
    }

    fn get_max_offset_in_queue(&self, py: Python<'_>, topic: &str, queue_id: i32) -> PyResult<i64> {
        self.store
            .get_max_offset_in_queue(topic, queue_id)
            .py_err(py)
    }

    fn get_min_offset_in_queue(&self, py: Python<'_>, topic: &str, queue_id: i32) -> PyResult<i64> {
        self.store
            .get_min_offset_in_queue(topic, queue_id)
            .py_err(py)
    }

    fn get_offset_in_queue_by_time(
        &self,
        py: Python<'_>,
        topic: &str,
        queue_id: i32,
        ts_ms: i64,
    ) -> PyResult<i64> {
        let store = &self.store;
        py.detach(|| store.get_offset_in_queue_by_time(topic, queue_id, ts_ms))
            .py_err(py)
    }

    fn get_earliest_message_time(
        &self,
        py: Python<'_>,
        topic: &str,
        queue_id: i32,
    ) -> PyResult<i64> {
        let store = &self.store;
        py.detach(|| store.get_earliest_message_time(topic, queue_id))
            .py_err(py)
    }

    #[getter]
    fn max_physical_offset(&self, py: Python<'_>) -> PyResult<i64> {
        self.store.max_physical_offset().py_err(py)
    }

    #[getter]
    fn min_physical_offset(&self, py: Python<'_>) -> PyResult<i64> {
        self.store.min_physical_offset().py_err(py)
    }

    fn read_commit_log<'py>(
        &self,
        py: Python<'py>,
        offset: i64,
        size: i64,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let sel = self.store.read_commit_log(offset, size).py_err(py)?;
        Ok(sel.map(|s| PyBytes::new(py, s.as_slice())))
    }

    fn look_message_by_offset<'py>(
        &self,
        py: Python<'py>,
        offset: i64,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let sel = self.store.look_message_by_offset(offset).py_err(py)?;
        Ok(sel.map(|s| PyBytes::new(py, s.as_slice())))
    }

    #[pyo3(signature = (topic, queue_id, start, max_units, tag_codes))]
    fn scan_consume_queue<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        queue_id: i32,
        start: i64,
        max_units: i64,
        tag_codes: Option<Vec<i32>>,
    ) -> PyResult<(i64, Bound<'py, PyBytes>)> {
        let store = &self.store;
        let (next, matched) = py
            .detach(|| {
                store.scan_consume_queue(topic, queue_id, start, max_units, tag_codes.as_deref())
            })
            .py_err(py)?;
        Ok((next, PyBytes::new(py, &matched)))
    }

    fn consume_queue_units<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        queue_id: i32,
        start: i64,
        count: i64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let store = &self.store;
        let units = py
            .detach(|| store.consume_queue_units(topic, queue_id, start, count))
            .py_err(py)?;
        Ok(PyBytes::new(py, &units))
    }

    /// `getCommitLogData` (rmq_store::replica): up to `max_size` published bytes from `offset`, not crossing a
    /// file end; None when nothing is written there.
    fn get_commit_log_data<'py>(
        &self,
        py: Python<'py>,
        offset: i64,
        max_size: i64,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let sel = self
            .store
            .get_commit_log_data(offset, max_size)
            .py_err(py)?;
        Ok(sel.map(|s| PyBytes::new(py, s.as_slice())))
    }

    /// `appendToCommitLog` + the slave's dispatch (rmq_store::replica): `[(topic, queue_id, max_offset)]` of
    /// the queues that got units.
    fn append_commit_log(
        &self,
        py: Python<'_>,
        offset: i64,
        data: &[u8],
    ) -> PyResult<Vec<(String, i32, i64)>> {
        let store = &self.store;
        let out = py
            .detach(|| store.append_commit_log(offset, data))
            .py_err(py)?;
        Ok(out
            .into_iter()
            .map(|d| (d.topic, d.queue_id, d.max_offset))
            .collect())
    }

    fn topics(&self, py: Python<'_>) -> PyResult<Vec<(String, i32)>> {
        self.store.topics().py_err(py)
    }

    fn flush(&self, py: Python<'_>) -> PyResult<i64> {
        let store = &self.store;
        py.detach(|| store.flush()).py_err(py)
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let store = &self.store;
        py.detach(|| store.close()).py_err(py)
    }

    fn delete_commit_log_files_before(&self, py: Python<'_>, offset: i64) -> PyResult<usize> {
        let store = &self.store;
        py.detach(|| store.delete_commit_log_files_before(offset))
            .py_err(py)
    }

    fn correct_min_offsets(&self, py: Python<'_>) -> PyResult<()> {
        let store = &self.store;
        py.detach(|| store.correct_min_offsets()).py_err(py)
    }

    fn recovery_report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.check_open(py)?;
        let r = self.store.recovery_report();
        let d = PyDict::new(py);
        d.set_item("abnormal", r.abnormal)?;
        d.set_item("commit_log_end", r.commit_log_end)?;
        d.set_item("truncated_bytes", r.truncated_bytes)?;
        d.set_item("redispatched", r.redispatched)?;
        d.set_item("cq_truncated_units", r.cq_truncated_units)?;
        d.set_item("index_rebuilt", r.index_rebuilt)?;
        d.set_item("index_files_refused", r.index_files_refused)?;
        d.set_item("index_files_dropped", r.index_files_dropped)?;
        Ok(d)
    }

    /// What open did to `index/` (refused or deleted files), one sentence each; the GIL is released while it waits
    /// for the index builder thread.
    fn index_notes(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.check_open(py)?;
        let store = &self.store;
        Ok(py.detach(|| store.index_notes()))
    }

    /// `(records, count, index_last_update_timestamp, index_last_update_phyoffset)`; the GIL is released
    /// around the index walk and the reads.
    fn query_message<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        key: &str,
        max_num: i32,
        begin_timestamp: i64,
        end_timestamp: i64,
    ) -> PyResult<(Bound<'py, PyBytes>, usize, i64, i64)> {
        let store = &self.store;
        let r = py
            .detach(|| store.query_message(topic, key, max_num, begin_timestamp, end_timestamp))
            .py_err(py)?;
        Ok((
            PyBytes::new(py, &r.records),
            r.count,
            r.index_last_update_timestamp,
            r.index_last_update_phyoffset,
        ))
    }
}

/// A put's results as `[(status, commitlog_offset, queue_offset, wrote_bytes)]`.
fn results_list<'py>(
    py: Python<'py>,
    results: &[rmq_store::PutResult],
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for r in results {
        let t = (
            r.status as i32,
            r.commitlog_offset,
            r.queue_offset,
            r.wrote_bytes,
        )
            .into_pyobject(py)?;
        // A tuple of ints cannot be part of a cycle (CPython untracks such tuples itself, lazily): untracked
        // now, a 100,000-message batch's results do not set off collections of everything the caller holds.
        crate::cpython::untrack(t.as_any());
        out.append(t)?;
    }
    Ok(out)
}
