//! UNIQ_KEY ids as `rmq_core.message.assign_uniq_keys` gives them (`prefix + "%04X" % (next(counter) & 0xFFFF)`):
//! `UniqIds` for the engine's put (`store.rs`), the send requests (`send_request.rs`) and batch bodies (`batch`), and
//! the `assign_uniq_keys` module function.
//!
//! Decisions (the Python twin matches them): `in`, `next` (the iterator protocol) and item assignment go through the
//! generic protocols, so errors are Python's own; the native counter (`uniq_counter`) is read without a Python `int`.

use pyo3::exceptions::{PyStopIteration, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyIterator, PyList, PyString};

use crate::uniq_counter::UniqCounter;

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
        if counter.cast::<PyIterator>().is_err() {
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
        let c = match self.counter.cast::<PyIterator>()?.clone().next() {
            Some(c) => c?,
            None => return Err(PyErr::take(py).unwrap_or_else(|| PyStopIteration::new_err(()))),
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
