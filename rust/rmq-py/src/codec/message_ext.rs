//! Records → `rmq_core.message.MessageExt` (`decode_messages`): each object allocated and its slots filled here
//! through `cpython::Slots` (the slot descriptors' C setters with the feature `cpython-internals`: no `__init__`, no
//! attribute lookup, no intermediate tuple).
//!
//! Decisions (the Python twin matches them):
//!   * `decode_messages(buf, decompress=True)`: `decompress` is accepted and ignored (the engine returns the stored
//!     body; `rmq_core.message.decode_messages` inflates). Any record that does not decode (BLANK, bad magic,
//!     truncated, inconsistent lengths) raises `CorruptRecordError(offset=<its index in buf>)`.
//!   * `MessageExt.topic` and properties decode UTF-8 with replacement characters.
//!   * `last_store_timestamp(buf)`: `rmq_store`'s walk of a pull body (0 when no whole record), no object built.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple, PyType};
use rmq_store::format::message::{self, decode_record, Host};

use super::hosts::host_to_py;
use crate::cpython;
use crate::errors;

/// `MessageExt`'s slots in the order `MessageExtBuilder::build` fills them (every slot of the class and its base).
const MESSAGE_EXT_SLOTS: [&str; 18] = [
    "topic",
    "body",
    "flag",
    "properties",
    "queue_id",
    "queue_offset",
    "commitlog_offset",
    "store_size",
    "body_crc",
    "sys_flag",
    "born_timestamp",
    "born_host",
    "store_timestamp",
    "store_host",
    "reconsume_times",
    "prepared_transaction_offset",
    "msg_id",
    "broker_name",
];

/// `rmq_core.message.MessageExt` and its slots (`cpython::Slots`): one allocation and 18 direct slot stores per
/// message, no attribute lookup, no `__init__`, no row tuple.
struct MessageExtType {
    slots: cpython::Slots,
}

static MESSAGE_EXT: PyOnceLock<MessageExtType> = PyOnceLock::new();

impl MessageExtType {
    fn load(py: Python<'_>) -> PyResult<MessageExtType> {
        let cls = py
            .import("rmq_core.message")?
            .getattr("MessageExt")?
            .cast_into::<PyType>()?;
        for name in MESSAGE_EXT_SLOTS {
            let dt = cls.getattr(name)?.get_type();
            if dt.name()? != "member_descriptor" {
                return Err(PyTypeError::new_err(format!(
                    "MessageExt.{name} is a {}, not a slot: the decoder fills slots",
                    dt.name()?
                )));
            }
        }
        Ok(MessageExtType {
            slots: cpython::Slots::new(&cls, &MESSAGE_EXT_SLOTS)?,
        })
    }
}

/// Builds `MessageExt` objects without `__init__`, caching host tuples, topics and property names that repeat.
pub struct MessageExtBuilder<'py> {
    py: Python<'py>,
    ty: &'py MessageExtType,
    born: Option<(Host, Bound<'py, PyTuple>)>,
    store: Option<(Host, Bound<'py, PyTuple>)>,
    topic: Option<(Vec<u8>, Bound<'py, PyString>)>,
    /// property names repeat across records (TAGS, KEYS, UNIQ_KEY…): reuse their str objects
    keys: Vec<(Vec<u8>, Bound<'py, PyString>)>,
}

impl<'py> MessageExtBuilder<'py> {
    pub fn new(py: Python<'py>) -> PyResult<Self> {
        Ok(MessageExtBuilder {
            py,
            ty: MESSAGE_EXT.get_or_try_init(py, || MessageExtType::load(py))?,
            born: None,
            store: None,
            topic: None,
            keys: Vec::new(),
        })
    }

    fn host(
        py: Python<'py>,
        cache: &mut Option<(Host, Bound<'py, PyTuple>)>,
        h: &Host,
    ) -> PyResult<Bound<'py, PyTuple>> {
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
                None => match cpython::utf8_replace(py, k) {
                    Ok(s) => {
                        if keys.len() < 32 {
                            keys.push((k.to_vec(), s.clone()));
                        }
                        s
                    }
                    Err(e) => {
                        err = Some(e);
                        return;
                    }
                },
            };
            if let Err(e) = cpython::utf8_replace(py, v).and_then(|v| d.set_item(key, v)) {
                err = Some(e);
            }
        });
        match err {
            Some(e) => Err(e),
            None => Ok(d),
        }
    }

    /// One record as a `MessageExt`, every slot set (MESSAGE_EXT_SLOTS order).
    pub fn build(&mut self, rec: &message::Record<'_>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        let topic = match &self.topic {
            Some((k, v)) if k.as_slice() == rec.topic => v.clone(),
            _ => {
                let v = cpython::utf8_replace(py, rec.topic)?;
                self.topic = Some((rec.topic.to_vec(), v.clone()));
                v
            }
        };
        let born = Self::host(py, &mut self.born, &rec.born_host)?;
        let store = Self::host(py, &mut self.store, &rec.store_host)?;
        let msg_id = message::create_offset_msg_id(&rec.store_host, rec.physical_offset);
        let items: [Bound<'py, PyAny>; 18] = [
            topic.into_any(),
            PyBytes::new(py, rec.body).into_any(),
            rec.flag.into_pyobject(py)?.into_any(),
            self.properties(rec.properties)?.into_any(),
            rec.queue_id.into_pyobject(py)?.into_any(),
            rec.queue_offset.into_pyobject(py)?.into_any(),
            rec.physical_offset.into_pyobject(py)?.into_any(),
            rec.total_size.into_pyobject(py)?.into_any(),
            rec.body_crc.into_pyobject(py)?.into_any(),
            rec.sys_flag.into_pyobject(py)?.into_any(),
            rec.born_timestamp.into_pyobject(py)?.into_any(),
            born.into_any(),
            rec.store_timestamp.into_pyobject(py)?.into_any(),
            store.into_any(),
            rec.reconsume_times.into_pyobject(py)?.into_any(),
            rec.prepared_transaction_offset
                .into_pyobject(py)?
                .into_any(),
            PyString::new(py, &msg_id).into_any(),
            py.None().into_bound(py),
        ];
        let slots = &self.ty.slots;
        let obj = slots.alloc(py)?;
        for (i, v) in items.iter().enumerate() {
            slots.set(&obj, i, v)?;
        }
        // A consumer keeps tens of thousands of these alive (its ProcessQueues' cache); tracked, each full collection
        // walks them all and halves the decode rate. Their slots hold no container of their own making (strs,
        // bytes, ints, host tuples, a properties dict of strs), so they cannot be part of a cycle unless a caller
        // builds one through them; untracked, the collector never visits them (a caller's cycle through one would
        // be freed only when broken by hand: documented on MessageExt).
        cpython::untrack(&obj);
        Ok(obj)
    }
}

/// Decodes concatenated records (a pull body) into `MessageExt` objects.
/// The STORETIMESTAMP of the last whole record of a pull body (0 when there is none): the broker reads it per pull.
#[pyfunction]
pub fn last_store_timestamp(buf: &[u8]) -> i64 {
    message::last_store_timestamp(buf)
}

#[pyfunction]
#[pyo3(signature = (buf, decompress = true))]
pub fn decode_messages<'py>(
    py: Python<'py>,
    buf: &[u8],
    decompress: bool,
) -> PyResult<Bound<'py, PyList>> {
    let _ = decompress; // see the module header: the Python wrapper inflates
    let mut builder = MessageExtBuilder::new(py)?;
    let out = PyList::empty(py);
    let mut pos = 0usize;
    while pos < buf.len() {
        match decode_record(&buf[pos..]) {
            Ok(rec) => {
                out.append(builder.build(&rec)?)?;
                pos += rec.total_size as usize;
            }
            Err(reason) => {
                return Err(errors::corrupt(
                    py,
                    format!("corrupt record at offset {pos}: {reason}"),
                    pos as i64,
                ));
            }
        }
    }
    Ok(out)
}
