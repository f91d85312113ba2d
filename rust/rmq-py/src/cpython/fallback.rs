//! The safe API of `cpython/mod.rs` in plain PyO3 (built without the feature `cpython-internals`): no object
//! layout, type slot or GC call of CPython's is assumed. The results are the same as `raw.rs`'s, slower: `Message`
//! stays the class written in message.py (a GC type, its `__init__` in Python), slots are read and set through
//! attribute access, objects are made by `object.__new__`, nothing is untracked.
//!
//! Thread-safety: every function is called with the GIL held (a `Python` token or a `Bound` proves it).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyType};

/// `message_class(cls, python_init)`: `cls` itself, unchanged (the class written in message.py).
#[pyfunction]
pub fn message_class<'py>(
    cls: &Bound<'py, PyType>,
    python_init: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyType>> {
    let _ = python_init; // the class keeps its own __init__
    Ok(cls.clone())
}

/// Nothing: an object stays as tracked as Python made it.
#[inline]
pub fn untrack(obj: &Bound<'_, PyAny>) {
    let _ = obj;
}

/// A class's slots read and written as attributes, its instances made by `object.__new__(cls)`.
pub struct Slots {
    cls: Py<PyType>,
    names: Vec<Py<PyString>>,
    new: Py<PyAny>,
}

impl Slots {
    /// `cls`'s slots `names`, each already checked to be a `member_descriptor` by the caller.
    pub fn new(cls: &Bound<'_, PyType>, names: &[&str]) -> PyResult<Slots> {
        let py = cls.py();
        Ok(Slots {
            cls: cls.clone().unbind(),
            names: names
                .iter()
                .map(|n| PyString::intern(py, n).unbind())
                .collect(),
            new: py
                .import("builtins")?
                .getattr("object")?
                .getattr("__new__")?
                .unbind(),
        })
    }

    /// Slot `i` of `obj` (getattr: an unset slot raises AttributeError).
    #[inline]
    pub fn get<'py>(&self, obj: &Bound<'py, PyAny>, i: usize) -> PyResult<Bound<'py, PyAny>> {
        obj.getattr(self.names[i].bind(obj.py()))
    }

    /// A new instance of the class, its slots unset, no `__init__` run (`object.__new__(cls)`).
    #[inline]
    pub fn alloc<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.new.bind(py).call1((self.cls.bind(py),))
    }

    /// Sets slot `i` of `obj` to `v` (setattr).
    #[inline]
    pub fn set(&self, obj: &Bound<'_, PyAny>, i: usize, v: &Bound<'_, PyAny>) -> PyResult<()> {
        obj.setattr(self.names[i].bind(obj.py()), v)
    }
}

/// `str` from UTF-8 with U+FFFD for what does not decode: valid UTF-8 directly, anything else through
/// `bytes.decode("utf-8", "replace")` (what the Python twin calls).
#[inline]
pub fn utf8_replace<'py>(py: Python<'py>, raw: &[u8]) -> PyResult<Bound<'py, PyString>> {
    match std::str::from_utf8(raw) {
        Ok(s) => Ok(PyString::new(py, s)),
        Err(_) => Ok(pyo3::types::PyBytes::new(py, raw)
            .call_method1("decode", ("utf-8", "replace"))?
            .cast_into::<PyString>()?),
    }
}

/// Nothing is assumed: `{"enabled": False}` alone is added by `cpython_assumptions()`.
pub fn assumptions(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    Ok(PyDict::new(py))
}
