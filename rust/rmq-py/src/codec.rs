//! Module functions of `rmq_core._core` (contract §0) and the conversions the engine bindings share:
//! properties dict ⇄ bytes, `(ip, port)` ⇄ `Host`, record → `MessageExt`.
//!
//! Decisions (the Python twin matches them):
//!   * `encode_properties`: keys and non-None values must be `str` (else TypeError); no escaping.
//!   * `decode_messages(buf, decompress=True)`: `decompress` is accepted and ignored (the engine returns the
//!     stored body; `rmq_core.message.decode_messages` inflates). Any record that does not decode (BLANK,
//!     bad magic, truncated, inconsistent lengths) raises `CorruptRecordError(offset=<its index in buf>)`.
//!   * hosts: `ip` must be an IPv4/IPv6 literal (no name lookup), port must fit an int32; else ValueError.
//!   * `MessageExt.topic` and properties decode UTF-8 with replacement characters.

use std::borrow::Cow;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple, PyType};
use pyo3::intern;
use rmq_store::format::message::{self, decode_record, Host};

use crate::errors;

static MESSAGE_EXT: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static OBJECT_NEW: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Java `String.hashCode` of `tags` (UTF-16 code units, int32 wrap).
#[pyfunction]
pub fn tags_hash(tags: &str) -> i32 {
    message::tags_hash(tags)
}

/// Appends `name\x01value\x02` for every entry of `props` whose value is not None.
pub fn encode_properties_into(props: &Bound<'_, PyDict>, out: &mut Vec<u8>) -> PyResult<()> {
    for (k, v) in props.iter() {
        if v.is_none() {
            continue;
        }
        let k = k.cast::<PyString>().map_err(|_| PyTypeError::new_err("property names must be str"))?;
        let v = v.cast::<PyString>().map_err(|_| PyTypeError::new_err("property values must be str"))?;
        message::encode_property_into(out, k.to_str()?.as_bytes(), v.to_str()?.as_bytes());
    }
    Ok(())
}

#[pyfunction]
pub fn encode_properties<'py>(py: Python<'py>, props: &Bound<'py, PyDict>) -> PyResult<Bound<'py, PyBytes>> {
    let mut out = Vec::new();
    encode_properties_into(props, &mut out)?;
    Ok(PyBytes::new(py, &out))
}

#[inline]
fn lossy_str<'py>(py: Python<'py>, raw: &[u8]) -> Bound<'py, PyString> {
    match String::from_utf8_lossy(raw) {
        Cow::Borrowed(s) => PyString::new(py, s),
        Cow::Owned(s) => PyString::new(py, &s),
    }
}

/// `string2messageProperties` into a dict (later duplicates overwrite).
pub fn properties_dict<'py>(py: Python<'py>, raw: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let mut err = None;
    message::for_each_property(raw, |k, v| {
        if err.is_none() {
            if let Err(e) = d.set_item(lossy_str(py, k), lossy_str(py, v)) {
                err = Some(e);
            }
        }
    });
    match err {
        Some(e) => Err(e),
        None => Ok(d),
    }
}

#[pyfunction]
pub fn decode_properties<'py>(py: Python<'py>, raw: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    properties_dict(py, raw)
}

/// `(ip, port)` → `Host`.
pub fn host_from_py(host: &Bound<'_, PyAny>) -> PyResult<Host> {
    let (ip, port): (String, i64) = host.extract()?;
    Host::parse(&ip, port).ok_or_else(|| PyValueError::new_err(format!("not an (ip literal, int32 port) host: ({ip:?}, {port})")))
}

pub fn host_to_py<'py>(py: Python<'py>, host: &Host) -> PyResult<Bound<'py, PyTuple>> {
    (host.ip.to_string(), host.port).into_pyobject(py)
}

#[pyfunction]
pub fn create_offset_msg_id(store_host: &Bound<'_, PyAny>, commitlog_offset: i64) -> PyResult<String> {
    Ok(message::create_offset_msg_id(&host_from_py(store_host)?, commitlog_offset))
}

/// Builds `MessageExt` objects without `__init__`, caching host tuples and topics that repeat.
pub struct MessageExtBuilder<'py> {
    py: Python<'py>,
    cls: Bound<'py, PyType>,
    new: Bound<'py, PyAny>,
    born: Option<(Host, Bound<'py, PyTuple>)>,
    store: Option<(Host, Bound<'py, PyTuple>)>,
    topic: Option<(Vec<u8>, Bound<'py, PyString>)>,
    /// property names repeat across records (TAGS, KEYS, UNIQ_KEY…): reuse their str objects
    keys: Vec<(Vec<u8>, Bound<'py, PyString>)>,
}

impl<'py> MessageExtBuilder<'py> {
    pub fn new(py: Python<'py>) -> PyResult<Self> {
        let cls = MESSAGE_EXT.import(py, "rmq_core.message", "MessageExt")?.clone();
        let new = OBJECT_NEW
            .get_or_try_init(py, || -> PyResult<Py<PyAny>> { Ok(cls.getattr("__new__")?.unbind()) })?
            .bind(py)
            .clone();
        Ok(MessageExtBuilder { py, cls, new, born: None, store: None, topic: None, keys: Vec::new() })
    }

    fn host(py: Python<'py>, cache: &mut Option<(Host, Bound<'py, PyTuple>)>, h: &Host) -> PyResult<Bound<'py, PyTuple>> {
        if let Some((k, v)) = cache {
            if k == h {
                return Ok(v.clone());
            }
        }
        let t = host_to_py(py, h)?;
        *cache = Some((*h, t.clone()));
        Ok(t)
    }

    fn properties(&mut self, raw: &[u8]) -> PyResult<Bound<'py, PyDict>> {
        let py = self.py;
        let d = PyDict::new(py);
        let mut err = None;
        let keys = &mut self.keys;
        message::for_each_property(raw, |k, v| {
            if err.is_some() {
                return;
            }
            let key = match keys.iter().find(|(kb, _)| kb.as_slice() == k) {
                Some((_, s)) => s.clone(),
                None => {
                    let s = lossy_str(py, k);
                    if keys.len() < 32 {
                        keys.push((k.to_vec(), s.clone()));
                    }
                    s
                }
            };
            if let Err(e) = d.set_item(key, lossy_str(py, v)) {
                err = Some(e);
            }
        });
        match err {
            Some(e) => Err(e),
            None => Ok(d),
        }
    }

    pub fn build(&mut self, rec: &message::Record<'_>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let obj = self.new.call1((&self.cls,))?;
        let topic = match &self.topic {
            Some((k, v)) if k.as_slice() == rec.topic => v.clone(),
            _ => {
                let v = lossy_str(py, rec.topic);
                self.topic = Some((rec.topic.to_vec(), v.clone()));
                v
            }
        };
        let born = Self::host(py, &mut self.born, &rec.born_host)?;
        let store = Self::host(py, &mut self.store, &rec.store_host)?;
        let msg_id = message::create_offset_msg_id(&rec.store_host, rec.physical_offset);
        obj.setattr(intern!(py, "topic"), topic)?;
        obj.setattr(intern!(py, "body"), PyBytes::new(py, rec.body))?;
        obj.setattr(intern!(py, "flag"), rec.flag)?;
        obj.setattr(intern!(py, "properties"), self.properties(rec.properties)?)?;
        obj.setattr(intern!(py, "queue_id"), rec.queue_id)?;
        obj.setattr(intern!(py, "queue_offset"), rec.queue_offset)?;
        obj.setattr(intern!(py, "commitlog_offset"), rec.physical_offset)?;
        obj.setattr(intern!(py, "store_size"), rec.total_size)?;
        obj.setattr(intern!(py, "body_crc"), rec.body_crc)?;
        obj.setattr(intern!(py, "sys_flag"), rec.sys_flag)?;
        obj.setattr(intern!(py, "born_timestamp"), rec.born_timestamp)?;
        obj.setattr(intern!(py, "born_host"), born)?;
        obj.setattr(intern!(py, "store_timestamp"), rec.store_timestamp)?;
        obj.setattr(intern!(py, "store_host"), store)?;
        obj.setattr(intern!(py, "reconsume_times"), rec.reconsume_times)?;
        obj.setattr(intern!(py, "prepared_transaction_offset"), rec.prepared_transaction_offset)?;
        obj.setattr(intern!(py, "msg_id"), PyString::new(py, &msg_id))?;
        obj.setattr(intern!(py, "broker_name"), py.None())?;
        Ok(obj)
    }
}

/// Decodes concatenated records (a pull body) into `MessageExt` objects.
#[pyfunction]
#[pyo3(signature = (buf, decompress = true))]
pub fn decode_messages<'py>(py: Python<'py>, buf: &[u8], decompress: bool) -> PyResult<Bound<'py, PyList>> {
    let _ = decompress; // see the module header: the Python wrapper inflates
    let mut builder = MessageExtBuilder::new(py)?;
    let list = PyList::empty(py);
    let mut pos = 0usize;
    while pos < buf.len() {
        match decode_record(&buf[pos..]) {
            Ok(rec) => {
                list.append(builder.build(&rec)?)?;
                pos += rec.total_size as usize;
            }
            Err(reason) => {
                return Err(errors::corrupt(py, format!("corrupt record at offset {pos}: {reason}"), pos as i64));
            }
        }
    }
    Ok(list)
}
