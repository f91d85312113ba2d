//! Bindings of a plain send (`rmq_store::format::send_request`): `SendRequestParser.parse` reads the send requests of
//! one received chunk (decoded `RemotingCommand`s) into `SendRequestColumns`: per request its key (topic, queue id,
//! unit mode, default topic, default topic queue nums) or -1 when it must take the processor's general path, and for
//! the others the columns of the record to store. The processor checks each distinct key once, `StoreEngine.
//! put_send_requests` stores a run of them in one call, and `answer` writes their response frames. Twin:
//! `python/rmq_core/_reference/send_requests.py`.
//!
//! Invariants: a request is plain only when every field the general path reads decodes the same here (the format
//! module's invariants); the answers are the bytes `RemotingCommand.encode` writes for the general path's answer.
//!
//! Thread-safety: `SendRequestParser` and `SendRequestColumns` are immutable once built; every method holds the GIL.

use std::sync::Mutex;

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyInt, PyList, PyString};
use rmq_store::format::message::{append_property, create_offset_msg_id, Host};
use rmq_store::format::remoting::write_json_header;
use rmq_store::format::send_request::{
    parse_decimal, parse_java_bool, rewrite_plain_properties, PlainPropertyRules,
};

use crate::codec;

/// The header fields read, in `SendMessageRequestHeader`'s order (its first eight are required).
const FIELDS: usize = 13;
const REQUIRED: usize = 8;
const SERIALIZE_JSON: i64 = 0;

/// How a plain send is recognised and answered; every name comes from the caller (see the format module).
#[pyclass(frozen, module = "rmq_core._core")]
pub struct SendRequestParser {
    codes: [i64; 2],
    names: [Vec<Py<PyString>>; 2],
    rules: PlainPropertyRules,
    assign_uniq: bool,
    oneway_bit: i64,
    answer_language: String,
    answer_flag: i64,
    answer_keys: [String; 5],
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    topic: String,
    queue_id: i32,
    unit_mode: bool,
    default_topic: String,
    default_topic_queue_nums: i32,
}

#[derive(Debug)]
pub struct Row {
    key: usize,
    body: Option<Py<PyBytes>>,
    flag: i32,
    sys_flag: i32,
    born_timestamp: i64,
    reconsume_times: i32,
    properties: (usize, usize),
    needs_uniq: bool,
    opaque: i64,
    version: i64,
    oneway: bool,
}

/// The sends of one chunk, as columns (see the module header).
#[pyclass(frozen, module = "rmq_core._core")]
pub struct SendRequestColumns {
    keys: Vec<Key>,
    rows: Vec<Option<Row>>,
    arena: Vec<u8>,
    /// The properties stored for the rows the store gave a UNIQ_KEY (`put_send_requests`), by row.
    assigned: Mutex<Vec<(usize, Vec<u8>)>>,
    uniq_key: String,
    answer_language: String,
    answer_flag: i64,
    answer_keys: [String; 5],
}

/// An int (an IntEnum code too), not a bool, that fits i64.
fn exact_int(v: &Bound<'_, PyAny>) -> Option<i64> {
    if v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>() {
        v.extract::<i64>().ok()
    } else {
        None
    }
}

#[pymethods]
impl SendRequestParser {
    #[new]
    #[pyo3(signature = (codes, v1_names, v2_names, general, wait, cluster, uniq_key, assign_uniq, oneway_bit, answer_language, answer_flag, answer_keys))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        codes: (i64, i64),
        v1_names: Vec<String>,
        v2_names: Vec<String>,
        general: Vec<String>,
        wait: String,
        cluster: String,
        uniq_key: String,
        assign_uniq: bool,
        oneway_bit: i64,
        answer_language: String,
        answer_flag: i64,
        answer_keys: Vec<String>,
    ) -> PyResult<Self> {
        if v1_names.len() != FIELDS || v2_names.len() != FIELDS {
            return Err(PyValueError::new_err(format!(
                "a send header has {FIELDS} field names"
            )));
        }
        let answer_keys: [String; 5] = answer_keys
            .try_into()
            .map_err(|_| PyValueError::new_err("an answer has 5 extFields names"))?;
        let intern = |v: Vec<String>| v.iter().map(|s| PyString::new(py, s).unbind()).collect();
        Ok(SendRequestParser {
            codes: [codes.0, codes.1],
            names: [intern(v1_names), intern(v2_names)],
            rules: PlainPropertyRules {
                general,
                wait,
                cluster,
                uniq_key,
            },
            assign_uniq,
            oneway_bit,
            answer_language,
            answer_flag,
            answer_keys,
        })
    }

    /// The columns of `requests` (a list of `RemotingCommand`), properties rewritten for `cluster_name`.
    fn parse(
        &self,
        py: Python<'_>,
        requests: &Bound<'_, PyList>,
        cluster_name: &str,
    ) -> PyResult<SendRequestColumns> {
        let mut cols = SendRequestColumns {
            keys: Vec::new(),
            rows: Vec::with_capacity(requests.len()),
            arena: Vec::with_capacity(requests.len() * 96),
            assigned: Mutex::new(Vec::new()),
            uniq_key: self.rules.uniq_key.clone(),
            answer_language: self.answer_language.clone(),
            answer_flag: self.answer_flag,
            answer_keys: self.answer_keys.clone(),
        };
        for req in requests.iter() {
            let row = self.parse_one(py, &req, cluster_name, &mut cols)?;
            cols.rows.push(row);
        }
        Ok(cols)
    }
}

impl SendRequestParser {
    fn parse_one(
        &self,
        py: Python<'_>,
        req: &Bound<'_, PyAny>,
        cluster_name: &str,
        cols: &mut SendRequestColumns,
    ) -> PyResult<Option<Row>> {
        let Some(code) = exact_int(&req.getattr(intern!(py, "code"))?) else {
            return Ok(None);
        };
        let which = match self.codes.iter().position(|&c| c == code) {
            Some(w) => w,
            None => return Ok(None),
        };
        if exact_int(&req.getattr(intern!(py, "serialize_type"))?) != Some(SERIALIZE_JSON) {
            return Ok(None);
        }
        let ext = req.getattr(intern!(py, "ext_fields"))?;
        let Ok(ext) = ext.cast_exact::<PyDict>() else {
            return Ok(None);
        };
        let mut held: Vec<Option<Bound<'_, PyString>>> = Vec::with_capacity(FIELDS);
        for name in &self.names[which] {
            match ext.get_item(name.bind(py))? {
                None => held.push(None),
                Some(v) => match v.cast_exact::<PyString>() {
                    Ok(s) => held.push(Some(s.clone())),
                    Err(_) => return Ok(None),
                },
            }
        }
        let mut f: [Option<&str>; FIELDS] = [None; FIELDS];
        for (slot, v) in f.iter_mut().zip(&held) {
            if let Some(s) = v {
                match s.to_str() {
                    Ok(s) => *slot = Some(s),
                    Err(_) => return Ok(None), // a lone surrogate: the general path names it
                }
            }
        }
        if f[..REQUIRED].iter().any(Option::is_none) {
            return Ok(None);
        }
        let (topic, default_topic) = (f[1].unwrap(), f[2].unwrap());
        let parsed = (|| {
            Some((
                parse_decimal::<i32>(f[3]?)?,
                parse_decimal::<i32>(f[4]?)?,
                parse_decimal::<i32>(f[5]?)?,
                parse_decimal::<i64>(f[6]?)?,
                parse_decimal::<i32>(f[7]?)?,
            ))
        })();
        let Some((dtqn, queue_id, sys_flag, born_timestamp, flag)) = parsed else {
            return Ok(None);
        };
        let reconsume_times = match f[9] {
            None => 0,
            Some(s) => match parse_decimal::<i32>(s) {
                Some(v) => v,
                None => return Ok(None),
            },
        };
        let unit_mode = match f[10] {
            None => false,
            Some(s) => match parse_java_bool(s) {
                Some(v) => v,
                None => return Ok(None),
            },
        };
        if f[11].is_some_and(|s| parse_decimal::<i32>(s).is_none()) {
            return Ok(None); // maxReconsumeTimes: decoded (and refused when not a number) on the general path
        }
        if f[12].is_some_and(|s| parse_java_bool(s) != Some(false)) {
            return Ok(None); // a batch, or a flag the general decoder reads its own way
        }
        if queue_id < 0 {
            return Ok(None); // a random queue: chosen per send on the general path
        }
        let body = req.getattr(intern!(py, "body"))?;
        let body = if body.is_none() {
            None
        } else {
            match body.cast_exact::<PyBytes>() {
                Ok(b) => Some(b.clone().unbind()),
                Err(_) => return Ok(None),
            }
        };
        let (Some(opaque), Some(version), Some(cmd_flag)) = (
            exact_int(&req.getattr(intern!(py, "opaque"))?),
            exact_int(&req.getattr(intern!(py, "version"))?),
            exact_int(&req.getattr(intern!(py, "flag"))?),
        ) else {
            return Ok(None);
        };
        let start = cols.arena.len();
        let raw = f[8].unwrap_or("").as_bytes();
        let Some(needs_uniq) = rewrite_plain_properties(
            raw,
            &self.rules,
            cluster_name,
            self.assign_uniq,
            &mut cols.arena,
        ) else {
            return Ok(None);
        };
        let key = Key {
            topic: topic.to_owned(),
            queue_id,
            unit_mode,
            default_topic: default_topic.to_owned(),
            default_topic_queue_nums: dtqn,
        };
        let key = match cols.keys.iter().rposition(|k| *k == key) {
            Some(i) => i,
            None => {
                cols.keys.push(key);
                cols.keys.len() - 1
            }
        };
        Ok(Some(Row {
            key,
            body,
            flag,
            sys_flag,
            born_timestamp,
            reconsume_times,
            properties: (start, cols.arena.len()),
            needs_uniq,
            opaque,
            version,
            oneway: cmd_flag & self.oneway_bit != 0,
        }))
    }
}

type Raw = (i32, i64, i64, i64);
/// Per key: `(key, sends, bytes written)`.
type Totals = Vec<(usize, i64, i64)>;
/// `(topic, queue_id, status, queue_offset, properties as stored)`.
type Arrival<'py> = (String, i32, i32, i64, Bound<'py, PyBytes>);

impl SendRequestColumns {
    /// The rows of `[start, end)`, every one plain (ValueError otherwise).
    pub fn plain_rows(&self, start: usize, end: usize) -> PyResult<Vec<&Row>> {
        if start > end || end > self.rows.len() {
            return Err(PyValueError::new_err(format!(
                "rows [{start}, {end}) outside 0..{}",
                self.rows.len()
            )));
        }
        self.rows[start..end]
            .iter()
            .map(|r| {
                r.as_ref()
                    .ok_or_else(|| PyValueError::new_err("a general request in a plain run"))
            })
            .collect()
    }

    /// The properties to store for the rows of `rows` (the run starting at row `start`) that lack a UNIQ_KEY: the
    /// rewritten ones with `UNIQ_KEY` = the next of `ids` appended, as the store appends it on the general path.
    pub fn assign_uniq_keys(
        &self,
        py: Python<'_>,
        start: usize,
        rows: &[&Row],
        ids: Option<&codec::uniq_keys::UniqIds<'_, '_>>,
    ) -> PyResult<Vec<(usize, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut id = String::new();
        for (i, r) in rows.iter().enumerate() {
            if !r.needs_uniq {
                continue;
            }
            let ids = ids.ok_or_else(|| {
                PyValueError::new_err("a send without UNIQ_KEY and no id generator")
            })?;
            ids.next_into(py, &mut id)?;
            let mut props = self.arena[r.properties.0..r.properties.1].to_vec();
            append_property(&mut props, 0, self.uniq_key.as_bytes(), id.as_bytes());
            out.push((start + i, props));
        }
        Ok(out)
    }

    /// Remembers what `assign_uniq_keys` gave, for `arrivals`.
    pub fn keep_assigned(&self, assigned: Vec<(usize, Vec<u8>)>) {
        if !assigned.is_empty() {
            self.assigned.lock().unwrap().extend(assigned);
        }
    }

    /// The `PutMessage`s of `rows` (the run starting at row `start`), with each key's sys flag bits
    /// (`sys_flag_or[key]`) or-ed in and the properties of `assigned` where a row has them.
    pub fn put_messages<'a>(
        &'a self,
        py: Python<'a>,
        start: usize,
        rows: &[&'a Row],
        assigned: &'a [(usize, Vec<u8>)],
        sys_flag_or: &[i32],
    ) -> PyResult<Vec<rmq_store::PutMessage<'a>>> {
        let mut next = assigned.iter().peekable();
        rows.iter()
            .enumerate()
            .map(|(i, r)| {
                let key = &self.keys[r.key];
                let or = *sys_flag_or
                    .get(r.key)
                    .ok_or_else(|| PyValueError::new_err("sys_flag_or has no entry for a key"))?;
                let properties = match next.peek() {
                    Some((row, props)) if *row == start + i => {
                        next.next();
                        &props[..]
                    }
                    _ => &self.arena[r.properties.0..r.properties.1],
                };
                Ok(rmq_store::PutMessage {
                    topic: &key.topic,
                    body: r.body.as_ref().map_or(&[][..], |b| b.as_bytes(py)),
                    flag: r.flag,
                    properties,
                    queue_id: key.queue_id,
                    own: Some(rmq_store::OwnFields {
                        born_timestamp: r.born_timestamp,
                        sys_flag: r.sys_flag | or,
                        reconsume_times: r.reconsume_times,
                    }),
                })
            })
            .collect()
    }

    /// The answer frames of `rows` (see `answer`).
    #[allow(clippy::too_many_arguments)]
    fn answer_frames<'py>(
        &self,
        py: Python<'py>,
        rows: &[&Row],
        raw: &[Raw],
        codes: &[i64],
        region: &str,
        trace_on: &str,
        host: &Host,
    ) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        let mut buf: Vec<u8> = Vec::with_capacity(320);
        let k = &self.answer_keys;
        for (r, &(status, clo, qo, _)) in rows.iter().zip(raw) {
            let code = usize::try_from(status)
                .ok()
                .and_then(|s| codes.get(s).copied())
                .unwrap_or(-1);
            if r.oneway || code < 0 {
                out.append(py.None())?;
                continue;
            }
            let msg_id = create_offset_msg_id(host, clo);
            let queue_id = self.keys[r.key].queue_id.to_string();
            let queue_offset = qo.to_string();
            buf.clear();
            buf.extend_from_slice(&[0u8; 8]);
            write_json_header(
                &mut buf,
                code,
                &self.answer_language,
                r.version,
                r.opaque,
                self.answer_flag,
                None,
                &[
                    (&k[0], region),
                    (&k[1], trace_on),
                    (&k[2], &msg_id),
                    (&k[3], &queue_id),
                    (&k[4], &queue_offset),
                ],
            );
            let header_length = buf.len() - 8;
            buf[..4].copy_from_slice(&((4 + header_length) as i32).to_be_bytes());
            buf[4..8].copy_from_slice(&(header_length as i32).to_be_bytes());
            out.append(PyBytes::new(py, &buf))?;
        }
        Ok(out)
    }
}

/// Per key with a counted status (`counted[status]`): `(key, sends, bytes written)` (see `answer`).
fn count_totals(rows: &[&Row], raw: &[Raw], counted: &[bool]) -> Totals {
    let mut out: Totals = Vec::new();
    for (r, &(status, _, _, wrote)) in rows.iter().zip(raw) {
        let ok = usize::try_from(status)
            .ok()
            .and_then(|s| counted.get(s).copied())
            .unwrap_or(false);
        if !ok {
            continue;
        }
        match out.iter_mut().find(|t| t.0 == r.key) {
            Some(t) => {
                t.1 += 1;
                t.2 += wrote;
            }
            None => out.push((r.key, 1, wrote)),
        }
    }
    out
}

/// The broker's settings of a plain send's answer, built once (and again when the broker's region or trace switch
/// changes): the answer code of each put status (< 0: the caller answers it), whether a status counts in the put
/// stats, the region and trace extFields, and the store host the msgId is made of.
#[pyclass(frozen, module = "rmq_core._core")]
pub struct SendAnswerSpec {
    codes: Vec<i64>,
    counted: Vec<bool>,
    region: String,
    trace_on: String,
    store_host: Host,
}

#[pymethods]
impl SendAnswerSpec {
    #[new]
    fn new(
        codes: Vec<i64>,
        counted: Vec<bool>,
        region: String,
        trace_on: String,
        store_host: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        Ok(SendAnswerSpec {
            codes,
            counted,
            region,
            trace_on,
            store_host: codec::hosts::host_from_py(store_host)?,
        })
    }
}

fn check_raw(rows: usize, raw: &[Raw]) -> PyResult<()> {
    if rows != raw.len() {
        return Err(PyValueError::new_err(format!(
            "{rows} rows but {} results",
            raw.len()
        )));
    }
    Ok(())
}

#[pymethods]
impl SendRequestColumns {
    fn __len__(&self) -> usize {
        self.rows.len()
    }

    /// Whether a plain send lacks a UNIQ_KEY (the store assigns it: `put_send_requests` then needs an id generator).
    #[getter]
    fn needs_uniq_keys(&self) -> bool {
        self.rows.iter().flatten().any(|r| r.needs_uniq)
    }

    /// Whether every request is a plain send (no request for the general path).
    #[getter]
    fn all_plain(&self) -> bool {
        self.rows.iter().all(Option::is_some)
    }

    /// Per request: the index of its key in `keys`, or -1 (the general path).
    #[getter]
    fn key_of(&self) -> Vec<i64> {
        self.rows
            .iter()
            .map(|r| r.as_ref().map_or(-1, |r| r.key as i64))
            .collect()
    }

    /// The distinct keys: `(topic, queue_id, unit_mode, default_topic, default_topic_queue_nums)`, first seen first.
    #[getter]
    fn keys(&self) -> Vec<(String, i32, bool, String, i32)> {
        self.keys
            .iter()
            .map(|k| {
                (
                    k.topic.clone(),
                    k.queue_id,
                    k.unit_mode,
                    k.default_topic.clone(),
                    k.default_topic_queue_nums,
                )
            })
            .collect()
    }

    /// The runs of requests in order: `(start, end, plain)`, plain when the request's key is in `plain_keys`
    /// (a list of bools, one per key).
    fn segments(&self, plain_keys: Vec<bool>) -> PyResult<Vec<(usize, usize, bool)>> {
        if plain_keys.len() != self.keys.len() {
            return Err(PyValueError::new_err("one bool per key"));
        }
        let mut out: Vec<(usize, usize, bool)> = Vec::new();
        for (i, r) in self.rows.iter().enumerate() {
            let plain = r.as_ref().is_some_and(|r| plain_keys[r.key]);
            match out.last_mut() {
                Some(last) if last.2 == plain => last.1 = i + 1,
                _ => out.push((i, i + 1, plain)),
            }
        }
        Ok(out)
    }

    /// What the broker answers for `[start, end)` once stored (`raw`: the put's results), with its answer settings
    /// in `spec`: `(answers, totals)`. `answers`: per request the bytes of its answer frame when
    /// `spec.codes[status] >= 0` (code, then extFields region, trace, msgId, queueId, queueOffset), None for a oneway
    /// request or a status the caller answers itself (`codes[status] < 0`); `totals`: per key with a counted status
    /// (`spec.counted[status]`), `(key, sends, bytes written)`.
    fn answer<'py>(
        &self,
        py: Python<'py>,
        start: usize,
        end: usize,
        raw: Vec<Raw>,
        spec: &SendAnswerSpec,
    ) -> PyResult<(Bound<'py, PyList>, Totals)> {
        let rows = self.plain_rows(start, end)?;
        check_raw(rows.len(), &raw)?;
        let answers = self.answer_frames(
            py,
            &rows,
            &raw,
            &spec.codes,
            &spec.region,
            &spec.trace_on,
            &spec.store_host,
        )?;
        Ok((answers, count_totals(&rows, &raw, &spec.counted)))
    }

    /// What the store's arrival listeners hear of `[start, end)`: `(topic, queue_id, status, queue_offset,
    /// properties as stored)` per request; with `topics` (a collection of topic names), only the requests to those.
    #[pyo3(signature = (start, end, raw, topics=None))]
    fn arrivals<'py>(
        &self,
        py: Python<'py>,
        start: usize,
        end: usize,
        raw: Vec<Raw>,
        topics: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Vec<Arrival<'py>>> {
        let rows = self.plain_rows(start, end)?;
        check_raw(rows.len(), &raw)?;
        // per key: whether `topics` takes it (asked once per key)
        let mut wanted: Vec<Option<bool>> = vec![None; self.keys.len()];
        let assigned = self.assigned.lock().unwrap();
        let mut out = Vec::new();
        for (i, (r, &(status, _, qo, _))) in rows.iter().zip(&raw).enumerate() {
            let key = &self.keys[r.key];
            if let Some(topics) = topics {
                let takes = match wanted[r.key] {
                    Some(t) => t,
                    None => {
                        let t = topics.contains(&key.topic)?;
                        wanted[r.key] = Some(t);
                        t
                    }
                };
                if !takes {
                    continue;
                }
            }
            let props = match assigned.iter().find(|(row, _)| *row == start + i) {
                Some((_, p)) => &p[..],
                None => &self.arena[r.properties.0..r.properties.1],
            };
            out.push((
                key.topic.clone(),
                key.queue_id,
                status,
                qo,
                PyBytes::new(py, props),
            ));
        }
        Ok(out)
    }
}
