//! Batch bodies (SEND_BATCH_MESSAGE; the layout is `rmq_store::format::batch`): a producer's body encoded in one
//! call (`encode_batch_messages`, or None for the general way) and a received body split into its blocks
//! (`split_batch`). Twin: `python/rmq_core/format/batch.py`.

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use rmq_store::format::batch;
use rmq_store::format::message;

use super::uniq_keys::UniqIds;

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
/// Twin: `python/rmq_core/format/batch.py`.
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
