//! The properties string (4.9's `messageProperties2String` / `string2messageProperties`, `name\x01value\x02`…)
//! ⇄ a Python dict, the tags hash and the order a Java `HashMap` writes property names in.
//!
//! Decisions (the Python twin matches them): `encode_properties`: keys and non-None values must be `str` (else
//! TypeError); no escaping. Decoded names and values are UTF-8 with replacement characters; a later duplicate name
//! overwrites an earlier one.

use std::borrow::Cow;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use rmq_store::format::message;

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
