//! Module functions of `rmq_core._core` (contract §0) and the conversions the engine bindings share:
//! properties dict ⇄ bytes, `(ip, port)` ⇄ `Host`, record → `MessageExt` (allocated and its slots filled here,
//! through the slot descriptors' C setters: no `__init__`, no attribute lookup, no intermediate tuple).
//!
//! Decisions (the Python twin matches them):
//!   * `encode_properties`: keys and non-None values must be `str` (else TypeError); no escaping.
//!   * `decode_messages(buf, decompress=True)`: `decompress` is accepted and ignored (the engine returns the
//!     stored body; `rmq_core.message.decode_messages` inflates). Any record that does not decode (BLANK,
//!     bad magic, truncated, inconsistent lengths) raises `CorruptRecordError(offset=<its index in buf>)`.
//!   * `assign_uniq_keys(msgs, prefix, counter)`: `in`, `next` (PyIter_Next) and item assignment through the generic
//!     protocols, so errors are Python's own.
//!   * `put_messages` (store.rs) reads the slots of exact `Message`/`MessageExt` instances
//!     through the member descriptors' C getter (`MessageFields`), other types through getattr.
//!   * hosts: `ip` must be an IPv4/IPv6 literal (no name lookup), port must fit an int32; else ValueError.
//!   * `MessageExt.topic` and properties decode UTF-8 with replacement characters.
//!   * `decode_columns(buf, tag_filter=None, min_queue_offset=None)`: `buf` any C-contiguous byte buffer (`bytes`,
//!     a `ColumnBuffer` from `gather_runs`); the walk (`rmq_store::format::columns`) runs
//!     with the GIL released; the result is a dict of Arrow buffers as `ColumnBuffer`s (the Rust vectors themselves,
//!     handed over without a copy through the buffer protocol; they compare equal to `bytes` of the same content):
//!     `num_rows` int; fixed-width columns (`queue_id`, `reconsume_times` i32; `queue_offset`, `commitlog_offset`,
//!     `born_timestamp`, `store_timestamp` i64 ms) little-endian `bytes`; utf8/binary columns (`topic`, `msg_id`,
//!     `tags`, `keys`, `body`) `(validity bytes | None, i32 offsets bytes, data bytes)`; `properties`
//!     `(list offsets, key offsets, key data, value offsets, value data)`. Errors: `CorruptRecordError(offset)` for
//!     a bad record or a body that does not inflate, ValueError for an unsupported compression type.
//!   * `gather_runs(src, starts, ends)`: `src` any C-contiguous byte buffer (a read-only `mmap`), `starts`/`ends`
//!     C-contiguous int64 buffers (numpy arrays); returns a `ColumnBuffer` (equal to the `bytes` of the runs),
//!     copied with the GIL released; ValueError (nothing copied) when the counts differ or a run is outside `src`,
//!     TypeError/BufferError for unusable buffers.

use std::borrow::Cow;

use std::os::raw::{c_int, c_void};

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyBufferError, PyStopIteration, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple, PyType};
use rmq_store::format::batch;
use rmq_store::format::columns::{self, ColumnFilter, VarColumn};
use rmq_store::format::gather;
use rmq_store::format::message::{self, decode_record, Host};

use crate::errors;
use crate::uniq_counter::UniqCounter;

/// Java `String.hashCode` of `tags` (UTF-16 code units, int32 wrap).
#[pyfunction]
pub fn tags_hash(tags: &str) -> i32 {
    message::tags_hash(tags)
}

/// `rmq_store`'s `java_hash_map_order` of the names' `String.hashCode`: their indexes in the order a Java `HashMap`
/// filled in that order iterates them, and whether that order is exact (false: a bin Java would treeify).
#[pyfunction]
pub fn java_hash_map_order(names: Vec<String>) -> (Vec<usize>, bool) {
    let hashes: Vec<i32> = names.iter().map(|n| message::tags_hash(n)).collect();
    let mut order = vec![0usize; hashes.len()];
    let exact = message::java_hash_map_order(&hashes, &mut order);
    (order, exact)
}

/// Appends `name\x01value\x02` for every entry of `props` whose value is not None.
pub fn encode_properties_into(props: &Bound<'_, PyDict>, out: &mut Vec<u8>) -> PyResult<()> {
    for (k, v) in props.iter() {
        if v.is_none() {
            continue;
        }
        let k = k
            .cast::<PyString>()
            .map_err(|_| PyTypeError::new_err("property names must be str"))?;
        let v = v
            .cast::<PyString>()
            .map_err(|_| PyTypeError::new_err("property values must be str"))?;
        message::encode_property_into(out, k.to_str()?.as_bytes(), v.to_str()?.as_bytes());
    }
    Ok(())
}

#[pyfunction]
pub fn encode_properties<'py>(
    py: Python<'py>,
    props: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyBytes>> {
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

/// The ids `assign_uniq_keys` gives: `prefix + "%04X" % (next(counter) & 0xFFFF)`, `next` through the iterator
/// protocol (a counter that is not an iterator raises TypeError, as the Python twin's `next` does).
pub struct UniqIds<'a, 'py> {
    prefix: &'a str,
    counter: &'a Bound<'py, PyAny>,
    /// The counter when it is the native one (`uniq_counter`): no Python `int` per id.
    native: Option<&'a UniqCounter>,
}

impl<'a, 'py> UniqIds<'a, 'py> {
    pub fn new(prefix: &'a str, counter: &'a Bound<'py, PyAny>) -> PyResult<Self> {
        // SAFETY: PyIter_Check only reads the type's tp_iternext slot.
        if unsafe { ffi::PyIter_Check(counter.as_ptr()) } == 0 {
            return Err(PyTypeError::new_err(format!(
                "'{}' object is not an iterator",
                counter.get_type().name()?
            )));
        }
        let native = counter.cast::<UniqCounter>().ok().map(|c| c.get());
        Ok(UniqIds {
            prefix,
            counter,
            native,
        })
    }

    /// The next id, written into `id` (cleared first).
    pub fn next_into(&self, py: Python<'py>, id: &mut String) -> PyResult<()> {
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        let c = match self.native {
            Some(n) => (n.take() & 0xFFFF) as u16,
            None => self.next_from_iterator(py)?,
        };
        id.clear();
        id.push_str(self.prefix);
        for shift in [12u16, 8, 4, 0] {
            id.push(HEX[((c >> shift) & 0xF) as usize] as char);
        }
        Ok(())
    }

    /// `next(counter) & 0xFFFF` through the iterator protocol (any iterator of ints).
    fn next_from_iterator(&self, py: Python<'py>) -> PyResult<u16> {
        // SAFETY: `counter` is a live object PyIter_Check accepted (`new`); PyIter_Next returns a new reference, or
        // NULL at the end (no error set) or on an error (set).
        let c = unsafe { ffi::PyIter_Next(self.counter.as_ptr()) };
        let c = if c.is_null() {
            return Err(PyErr::take(py).unwrap_or_else(|| PyStopIteration::new_err(())));
        } else {
            // SAFETY: a new reference from PyIter_Next
            unsafe { Bound::from_owned_ptr(py, c) }
        };
        match c.extract::<u64>() {
            Ok(v) => Ok((v & 0xFFFF) as u16),
            Err(_) => c.bitand(0xFFFF)?.extract(),
        }
    }
}

/// For every message of `msgs` whose `properties` lack `UNIQ_KEY`: `properties["UNIQ_KEY"] = prefix + "%04X" %
/// (next(counter) & 0xFFFF)`, in list order; returns how many were assigned. `in`, `next` and item assignment go
/// through the generic protocols, so a message that is not what it should be raises what the Python twin raises.
#[pyfunction]
pub fn assign_uniq_keys(
    py: Python<'_>,
    msgs: &Bound<'_, PyList>,
    prefix: &str,
    counter: &Bound<'_, PyAny>,
) -> PyResult<usize> {
    let (a_props, key) = (intern!(py, "properties"), intern!(py, "UNIQ_KEY"));
    let ids = UniqIds::new(prefix, counter)?;
    let mut id = String::with_capacity(prefix.len() + 4);
    let mut assigned = 0usize;
    for m in msgs.iter() {
        let props = m.getattr(a_props)?;
        if props.contains(key)? {
            continue;
        }
        ids.next_into(py, &mut id)?;
        props.set_item(key, PyString::new(py, &id))?;
        assigned += 1;
    }
    Ok(assigned)
}

/// A producer's batch body in one call (`Producer.batch`): for each message in order, its block as
/// `message_encoding.encode_message` writes it, after the message's UNIQ_KEY (`uniq_key`) is set as
/// `assign_uniq_keys` sets it (`prefix + "%04X" % (next(counter) & 0xFFFF)`, appended to its dict) when absent.
/// `None` — the caller takes the general way, which checks and encodes each message itself and names the error —
/// at the first message outside the shape: a `body` not exact `bytes` of 1 to `max_body_size` bytes, a `flag` not an
/// exact int of 32 bits, `properties` not an exact dict of exact str names and values (None values skipped) that
/// `properties_to_string` writes as they are (`property_encodable`), a missing attribute; checked before the
/// message's UNIQ_KEY is set, as `check_message` runs before the id is assigned. The one check after it: the
/// properties written (the new id included) within `MAX_PROPERTIES_SIZE`, as `encode_message` checks them after.
/// Messages before the refused one keep the ids they were given (the general way keeps them too).
/// Twin: `python/rmq_core/_reference/format/batch.py`.
#[pyfunction]
pub fn encode_batch_messages<'py>(
    py: Python<'py>,
    msgs: &Bound<'py, PyList>,
    uniq_key: &Bound<'py, PyString>,
    prefix: &str,
    counter: &Bound<'py, PyAny>,
    max_body_size: i64,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let (a_body, a_flag, a_props) = (
        intern!(py, "body"),
        intern!(py, "flag"),
        intern!(py, "properties"),
    );
    let key = uniq_key.to_str()?.as_bytes();
    let ids = UniqIds::new(prefix, counter)?;
    let mut id = String::with_capacity(prefix.len() + 4);
    let mut out: Vec<u8> = Vec::with_capacity(msgs.len() * 256);
    let mut props_buf: Vec<u8> = Vec::with_capacity(256);
    for m in msgs.iter() {
        let (Ok(body), Ok(flag), Ok(props)) =
            (m.getattr(a_body), m.getattr(a_flag), m.getattr(a_props))
        else {
            return Ok(None);
        };
        let Ok(body) = body.cast_exact::<PyBytes>() else {
            return Ok(None);
        };
        let body = body.as_bytes();
        if body.is_empty() || body.len() as i64 > max_body_size || body.len() > i32::MAX as usize {
            return Ok(None);
        }
        if !flag.is_exact_instance_of::<pyo3::types::PyInt>() {
            return Ok(None);
        }
        let Ok(flag) = flag.extract::<i32>() else {
            return Ok(None);
        };
        let Ok(props) = props.cast_exact::<PyDict>() else {
            return Ok(None);
        };
        props_buf.clear();
        let mut has_uniq = false;
        for (k, v) in props.iter() {
            let Ok(k) = k.cast_exact::<PyString>() else {
                return Ok(None);
            };
            let Ok(k) = k.to_str() else {
                return Ok(None);
            };
            if k.as_bytes() == key {
                has_uniq = true; // present, whatever its value (`UNIQ_KEY not in properties`)
            }
            if v.is_none() {
                continue;
            }
            let Ok(v) = v.cast_exact::<PyString>() else {
                return Ok(None);
            };
            let Ok(v) = v.to_str() else {
                return Ok(None);
            };
            if !message::property_encodable(k.as_bytes(), v.as_bytes()) {
                return Ok(None);
            }
            message::encode_property_into(&mut props_buf, k.as_bytes(), v.as_bytes());
        }
        if !has_uniq {
            ids.next_into(py, &mut id)?;
            props.set_item(uniq_key, PyString::new(py, &id))?;
            message::encode_property_into(&mut props_buf, key, id.as_bytes());
        }
        if props_buf.len() > message::MAX_PROPERTIES_SIZE {
            return Ok(None);
        }
        batch::append_block(&mut out, flag, body, &props_buf);
    }
    Ok(Some(PyBytes::new(py, &out)))
}

/// Takes `msg` out of the cyclic garbage collector's tracking when its type is exactly `rmq_core.message.Message`
/// (anything else is left as it is). A Message refers only to its str topic, bytes body, int flag and str → str
/// properties dict, so it cannot be part of a reference cycle the collector would have to find; untracked, the
/// hundreds of thousands a caller builds for one `put_messages` cost the collector nothing (each tracked one is
/// traversed again by every full collection while the batch is being built). Called by `Message.__init__`.
#[pyfunction]
pub fn untrack_message(py: Python<'_>, msg: &Bound<'_, PyAny>) -> PyResult<()> {
    let fields = MessageFields::get(py)?;
    let tp = msg.get_type_ptr();
    // the Rust engine's Message class is not a GC type at all (message_class.rs): nothing to untrack then
    if tp == fields.classes[0].as_ptr() as *mut ffi::PyTypeObject
        && crate::message_class::is_gc_type(tp)
    {
        // SAFETY: a live GC object (every instance of a Python class is one); untracking a tracked or an untracked
        // object is allowed and only changes what the collector traverses.
        unsafe { ffi::PyObject_GC_UnTrack(msg.as_ptr().cast()) };
    }
    Ok(())
}

type DescrGetFn = unsafe extern "C" fn(
    *mut ffi::PyObject,
    *mut ffi::PyObject,
    *mut ffi::PyObject,
) -> *mut ffi::PyObject;

/// `Message`'s `topic`, `body`, `flag`, `properties` slot descriptors (inherited unchanged by `MessageExt`) and
/// `member_descriptor`'s C getter: what `put_messages` reads from each message without an attribute lookup.
pub struct MessageFields {
    classes: [Py<PyType>; 2],
    get: DescrGetFn,
    descrs: [Py<PyAny>; 4],
}

static MESSAGE_FIELDS: PyOnceLock<MessageFields> = PyOnceLock::new();

impl MessageFields {
    pub fn get(py: Python<'_>) -> PyResult<&MessageFields> {
        MESSAGE_FIELDS.get_or_try_init(py, || {
            let module = py.import("rmq_core.message")?;
            let message = module.getattr("Message")?.cast_into::<PyType>()?;
            let ext = module.getattr("MessageExt")?.cast_into::<PyType>()?;
            let mut descrs = Vec::with_capacity(4);
            let mut get = None;
            for name in ["topic", "body", "flag", "properties"] {
                let d = message.getattr(name)?;
                if !ext.getattr(name)?.is(&d) || d.get_type().name()? != "member_descriptor" {
                    return Err(PyTypeError::new_err(format!(
                        "Message.{name} is not a slot shared with MessageExt"
                    )));
                }
                // SAFETY: a live static type object; Py_tp_descr_get of member_descriptor is its C getter.
                let f = unsafe {
                    ffi::PyType_GetSlot(d.get_type().as_type_ptr(), ffi::Py_tp_descr_get)
                };
                if f.is_null() {
                    return Err(PyTypeError::new_err("member_descriptor has no getter"));
                }
                // SAFETY: the slot's documented signature is descrgetfunc.
                get = Some(unsafe { std::mem::transmute::<*mut c_void, DescrGetFn>(f) });
                descrs.push(d.unbind());
            }
            let descrs: [Py<PyAny>; 4] = descrs.try_into().expect("four descriptors");
            Ok(MessageFields {
                classes: [message.unbind(), ext.unbind()],
                get: get.expect("four descriptors"),
                descrs,
            })
        })
    }

    /// `[topic, body, flag, properties]` of `m` when its type is exactly Message or MessageExt (an unset slot
    /// raises AttributeError, as getattr does); None for any other type.
    #[inline]
    pub fn read<'py>(&self, m: &Bound<'py, PyAny>) -> PyResult<Option<[Bound<'py, PyAny>; 4]>> {
        let py = m.py();
        let tp = m.get_type_ptr();
        if !self
            .classes
            .iter()
            .any(|c| c.as_ptr() as *mut ffi::PyTypeObject == tp)
        {
            return Ok(None);
        }
        let one = |d: &Py<PyAny>| -> PyResult<Bound<'py, PyAny>> {
            // SAFETY: the member descriptor's getter on an instance of its class (checked above); it returns a
            // new reference, or NULL with an error set.
            unsafe {
                Bound::from_owned_ptr_or_err(py, (self.get)(d.as_ptr(), m.as_ptr(), tp.cast()))
            }
        };
        Ok(Some([
            one(&self.descrs[0])?,
            one(&self.descrs[1])?,
            one(&self.descrs[2])?,
            one(&self.descrs[3])?,
        ]))
    }
}

/// `(ip, port)` → `Host`.
pub fn host_from_py(host: &Bound<'_, PyAny>) -> PyResult<Host> {
    let (ip, port): (String, i64) = host.extract()?;
    Host::parse(&ip, port).ok_or_else(|| {
        PyValueError::new_err(format!(
            "not an (ip literal, int32 port) host: ({ip:?}, {port})"
        ))
    })
}

pub fn host_to_py<'py>(py: Python<'py>, host: &Host) -> PyResult<Bound<'py, PyTuple>> {
    (host.ip.to_string(), host.port).into_pyobject(py)
}

/// One block of a batch body: `(flag, body, properties)`.
type PyBatchBlock<'py> = (i32, Bound<'py, PyBytes>, Bound<'py, PyBytes>);

/// The blocks of a SEND_BATCH_MESSAGE body as `(flag, body, properties)` (`rmq_store::format::batch::split_batch`);
/// ValueError naming the block when the body is malformed.
#[pyfunction]
pub fn split_batch<'py>(py: Python<'py>, body: &[u8]) -> PyResult<Vec<PyBatchBlock<'py>>> {
    let blocks = rmq_store::format::batch::split_batch(body).map_err(PyValueError::new_err)?;
    Ok(blocks
        .iter()
        .map(|b| {
            (
                b.flag,
                PyBytes::new(py, b.body),
                PyBytes::new(py, b.properties),
            )
        })
        .collect())
}

#[pyfunction]
pub fn create_offset_msg_id(
    store_host: &Bound<'_, PyAny>,
    commitlog_offset: i64,
) -> PyResult<String> {
    Ok(message::create_offset_msg_id(
        &host_from_py(store_host)?,
        commitlog_offset,
    ))
}

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

type AllocFn = unsafe extern "C" fn(*mut ffi::PyTypeObject, ffi::Py_ssize_t) -> *mut ffi::PyObject;
type DescrSetFn =
    unsafe extern "C" fn(*mut ffi::PyObject, *mut ffi::PyObject, *mut ffi::PyObject) -> c_int;

/// `rmq_core.message.MessageExt`, its allocator, and the slot descriptors with their setter (`member_descriptor`'s
/// `tp_descr_set`, reached through `PyType_GetSlot`, which the limited API allows for static types since 3.10):
/// one allocation and 18 direct slot stores per message, no attribute lookup, no `__init__`, no row tuple.
struct MessageExtType {
    cls: Py<PyType>,
    alloc: AllocFn,
    set: DescrSetFn,
    descrs: Vec<Py<PyAny>>,
}

static MESSAGE_EXT: PyOnceLock<MessageExtType> = PyOnceLock::new();

impl MessageExtType {
    fn load(py: Python<'_>) -> PyResult<MessageExtType> {
        let cls = py
            .import("rmq_core.message")?
            .getattr("MessageExt")?
            .cast_into::<PyType>()?;
        let mut descrs = Vec::with_capacity(MESSAGE_EXT_SLOTS.len());
        let mut set: Option<DescrSetFn> = None;
        for name in MESSAGE_EXT_SLOTS {
            let d = cls.getattr(name)?;
            let dt = d.get_type();
            if dt.name()? != "member_descriptor" {
                return Err(PyTypeError::new_err(format!(
                    "MessageExt.{name} is a {}, not a slot: the decoder fills slots",
                    dt.name()?
                )));
            }
            // SAFETY: a live static type object; Py_tp_descr_set of member_descriptor is its C setter (or NULL).
            let f = unsafe { ffi::PyType_GetSlot(dt.as_type_ptr(), ffi::Py_tp_descr_set) };
            if f.is_null() {
                return Err(PyTypeError::new_err("member_descriptor has no setter"));
            }
            // SAFETY: the slot's documented signature is descrsetfunc.
            set = Some(unsafe { std::mem::transmute::<*mut c_void, DescrSetFn>(f) });
            descrs.push(d.unbind());
        }
        // SAFETY: a live heap type; Py_tp_alloc is always set (PyType_GenericAlloc for a Python class).
        let a = unsafe { ffi::PyType_GetSlot(cls.as_type_ptr(), ffi::Py_tp_alloc) };
        if a.is_null() {
            return Err(PyTypeError::new_err("MessageExt has no tp_alloc"));
        }
        Ok(MessageExtType {
            cls: cls.unbind(),
            // SAFETY: the slot's documented signature is allocfunc.
            alloc: unsafe { std::mem::transmute::<*mut c_void, AllocFn>(a) },
            set: set.expect("18 slots"),
            descrs,
        })
    }
}

/// `str` from UTF-8 with U+FFFD for what does not decode: CPython's own decoder with errors="replace", exactly
/// what the Python twin calls (one pass; no Rust-side validation first).
#[inline]
fn utf8_replace<'py>(py: Python<'py>, raw: &[u8]) -> PyResult<Bound<'py, PyString>> {
    // SAFETY: pointer and length of a live slice; the error handler name is a NUL-terminated literal.
    unsafe {
        let p = ffi::PyUnicode_DecodeUTF8(
            raw.as_ptr() as *const std::os::raw::c_char,
            raw.len() as ffi::Py_ssize_t,
            c"replace".as_ptr(),
        );
        Ok(Bound::from_owned_ptr_or_err(py, p)?.cast_into_unchecked::<PyString>())
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
                None => match utf8_replace(py, k) {
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
            if let Err(e) = utf8_replace(py, v).and_then(|v| d.set_item(key, v)) {
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
                let v = utf8_replace(py, rec.topic)?;
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
        let ty = self.ty;
        // SAFETY: `cls` is a live type object; tp_alloc returns a new reference (zeroed slots) or NULL with an error.
        let obj = unsafe {
            Bound::from_owned_ptr_or_err(py, (ty.alloc)(ty.cls.bind(py).as_type_ptr(), 0))?
        };
        for (descr, v) in ty.descrs.iter().zip(items.iter()) {
            // SAFETY: the member descriptor's setter on an instance of its class; it takes its own reference to
            // `v` (ours is dropped with `items`) and returns -1 with an error set on failure.
            if unsafe { (ty.set)(descr.as_ptr(), obj.as_ptr(), v.as_ptr()) } != 0 {
                return Err(PyErr::fetch(py));
            }
        }
        // A consumer keeps tens of thousands of these alive (its ProcessQueues' cache); tracked, each full collection
        // walks them all and halves the decode rate. Their slots hold no container of their own making (strs,
        // bytes, ints, host tuples, a properties dict of strs), so they cannot be part of a cycle unless a caller
        // builds one through them; untracked, the collector never visits them (a caller's cycle through one would
        // be freed only when broken by hand: documented on MessageExt).
        // SAFETY: `obj` is a live, fully built instance of a GC type; untracking a tracked object is allowed, and
        // its dealloc (subtype_dealloc) untracks only what is still tracked.
        unsafe { ffi::PyObject_GC_UnTrack(obj.as_ptr() as *mut std::ffi::c_void) };
        Ok(obj)
    }
}

/// Decodes concatenated records (a pull body) into `MessageExt` objects.
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

/// Read-only bytes owned by Rust (a column buffer of `decode_columns`), exposed through the buffer protocol so
/// `pyarrow.py_buffer` / `memoryview` wrap them without a copy. Equal to `bytes` (and other ColumnBuffers) with the
/// same content; `bytes(buf)` copies.
#[pyclass(frozen, module = "rmq_core._core")]
pub struct ColumnBuffer {
    data: Vec<u8>,
}

#[pymethods]
impl ColumnBuffer {
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("ColumnBuffer is read-only"));
        }
        let data = &slf.get().data;
        // SAFETY: `view` comes from the interpreter; the data lives (unmoved: the class is frozen) as long as the
        // object, which the view holds a reference to (set by PyBuffer_FillInfo).
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                data.as_ptr() as *mut c_void,
                data.len() as ffi::Py_ssize_t,
                1,
                flags,
            )
        };
        if rc == -1 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}

    fn __len__(&self) -> usize {
        self.data.len()
    }

    fn __bytes__<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.data)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = other.py();
        if let Ok(b) = other.cast::<PyBytes>() {
            return Ok((b.as_bytes() == self.data.as_slice())
                .into_pyobject(py)?
                .to_owned()
                .into_any()
                .unbind());
        }
        if let Ok(o) = other.cast::<ColumnBuffer>() {
            return Ok((o.get().data == self.data)
                .into_pyobject(py)?
                .to_owned()
                .into_any()
                .unbind());
        }
        Ok(py.NotImplemented())
    }

    fn __repr__(&self) -> String {
        format!("<ColumnBuffer {} bytes>", self.data.len())
    }
}

pub(crate) fn buffer<'py>(py: Python<'py>, data: Vec<u8>) -> PyResult<Bound<'py, ColumnBuffer>> {
    Bound::new(py, ColumnBuffer { data })
}

fn le_buffer<'py, T: Copy, const N: usize>(
    py: Python<'py>,
    v: &[T],
    to_le: fn(T) -> [u8; N],
) -> PyResult<Bound<'py, ColumnBuffer>> {
    let mut out = Vec::with_capacity(v.len() * N);
    for &x in v {
        out.extend_from_slice(&to_le(x));
    }
    buffer(py, out)
}

fn offsets_buffer<'py>(py: Python<'py>, v: &[i32]) -> PyResult<Bound<'py, ColumnBuffer>> {
    le_buffer(py, v, i32::to_le_bytes)
}

fn var_column<'py>(py: Python<'py>, c: VarColumn) -> PyResult<Bound<'py, PyTuple>> {
    let validity = match c.validity {
        Some(b) => Some(buffer(py, b)?),
        None => None,
    };
    (
        validity,
        offsets_buffer(py, &c.offsets)?,
        buffer(py, c.data)?,
    )
        .into_pyobject(py)
}

/// Concatenated records → Arrow-layout column buffers (see the module header and `rmq_store::format::columns`).
#[pyfunction]
#[pyo3(signature = (buf, tag_filter = None, min_queue_offset = None))]
pub fn decode_columns<'py>(
    py: Python<'py>,
    buf: PyBuffer<u8>,
    tag_filter: Option<Vec<String>>,
    min_queue_offset: Option<i64>,
) -> PyResult<Bound<'py, PyDict>> {
    let buf = contiguous(&buf, "buf")?;
    let filter = ColumnFilter {
        tags: tag_filter.map(|t| t.into_iter().map(String::into_bytes).collect()),
        min_queue_offset,
    };
    let c = py
        .detach(|| columns::decode_columns(buf, &filter))
        .map_err(|e| errors::to_py(py, e))?;
    let d = PyDict::new(py);
    d.set_item("num_rows", c.num_rows)?;
    d.set_item("topic", var_column(py, c.topic)?)?;
    d.set_item("queue_id", le_buffer(py, &c.queue_id, i32::to_le_bytes)?)?;
    d.set_item(
        "queue_offset",
        le_buffer(py, &c.queue_offset, i64::to_le_bytes)?,
    )?;
    d.set_item(
        "commitlog_offset",
        le_buffer(py, &c.commitlog_offset, i64::to_le_bytes)?,
    )?;
    d.set_item("msg_id", var_column(py, c.msg_id)?)?;
    d.set_item("tags", var_column(py, c.tags)?)?;
    d.set_item("keys", var_column(py, c.keys)?)?;
    d.set_item("body", var_column(py, c.body)?)?;
    let p = c.properties;
    d.set_item(
        "properties",
        (
            offsets_buffer(py, &p.offsets)?,
            offsets_buffer(py, &p.keys.offsets)?,
            buffer(py, p.keys.data)?,
            offsets_buffer(py, &p.values.offsets)?,
            buffer(py, p.values.data)?,
        ),
    )?;
    d.set_item(
        "born_timestamp",
        le_buffer(py, &c.born_timestamp, i64::to_le_bytes)?,
    )?;
    d.set_item(
        "store_timestamp",
        le_buffer(py, &c.store_timestamp, i64::to_le_bytes)?,
    )?;
    d.set_item(
        "reconsume_times",
        le_buffer(py, &c.reconsume_times, i32::to_le_bytes)?,
    )?;
    Ok(d)
}

/// A C-contiguous buffer's items as a slice, or BufferError.
fn contiguous<'a, T: pyo3::buffer::Element>(buf: &'a PyBuffer<T>, what: &str) -> PyResult<&'a [T]> {
    if !buf.is_c_contiguous() {
        return Err(PyBufferError::new_err(format!(
            "{what} must be a C-contiguous buffer"
        )));
    }
    // SAFETY: C-contiguous with item_count items of T (PyBuffer<T> checked the item format and size); the exporter
    // keeps the memory alive and unmoved while `buf` (the view) exists, and nothing here writes to it.
    Ok(unsafe { std::slice::from_raw_parts(buf.buf_ptr() as *const T, buf.item_count()) })
}

/// `src[starts[i]:ends[i]]` for every i, concatenated (see the module header).
#[pyfunction]
pub fn gather_runs(
    py: Python<'_>,
    src: PyBuffer<u8>,
    starts: &Bound<'_, PyAny>,
    ends: &Bound<'_, PyAny>,
) -> PyResult<ColumnBuffer> {
    let (starts, ends) = (run_bounds(starts)?, run_bounds(ends)?);
    let (s, a, b) = (
        contiguous(&src, "src")?,
        starts
            .as_ref()
            .map_or(Ok(&[][..]), |v| contiguous(v, "starts"))?,
        ends.as_ref()
            .map_or(Ok(&[][..]), |v| contiguous(v, "ends"))?,
    );
    let data = py
        .detach(|| gather::gather_runs(s, a, b))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(ColumnBuffer { data })
}

/// An int64 buffer of run bounds; None for an empty one, whose exporter may hand out a pointer that is not aligned
/// for i64 (`array.array("q")` does), which PyO3 refuses although no item is ever read (found by fuzz/gather_runs).
fn run_bounds(obj: &Bound<'_, PyAny>) -> PyResult<Option<PyBuffer<i64>>> {
    match PyBuffer::<i64>::get(obj) {
        Ok(buf) => Ok(Some(buf)),
        Err(e) => match PyBuffer::<u8>::get(obj).map(|raw| raw.len_bytes()) {
            Ok(0) => Ok(None),
            _ if obj.len().ok() == Some(0) => Ok(None),
            _ => Err(e),
        },
    }
}
