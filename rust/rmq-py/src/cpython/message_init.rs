//! `Message.__init__`, natively (python/rmq_core/message.py invariant 5; feature `cpython-internals`, assumption A7
//! of `cpython/mod.rs`): the `tp_init` of the Rust engine's `Message` class (`message_type.rs`).
//!
//! Owns: the common call — an instance of exactly `Message`, `topic`, a `body` of exact `bytes`, `tags` None or an
//! exact `str`, `flag` anything, `keys`/`properties`/`deliver_time_ms` absent or None and `delay_time_level` absent or
//! the int 0, positionally or by keyword, each once — run here: the four fields set in the object's own layout,
//! `properties` = `{"TAGS": tags}` when `tags` is non-empty else `{}`; what the `__init__` written in message.py does
//! for those arguments, without a Python frame, an argument unpacking or a bound method. Every other call (keys,
//! properties, delay level, timer fields, a body to convert, a subclass, an unknown or repeated keyword, a bad
//! argument) goes to `python_init`, that `__init__`, so its results and errors are that function's by construction.
//!
//! Thread-safety: called with the GIL held (a type slot); the state is set once, when the class is made, before any
//! instance exists, and only read afterwards.

use std::ffi::c_int;
use std::ptr;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyString, PyType};

use super::message_type;

/// What the native `__init__` needs: the class, the Python `__init__` for every other call, the interned parameter
/// names (`PARAMS` order), the property name and the int 0 (the delay level's default).
struct InitState {
    message: Py<PyType>,
    python_init: Py<PyAny>,
    params: [Py<PyString>; 8],
    tags_key: Py<PyString>,
    zero: Py<PyAny>,
}

/// `Message.__init__`'s parameters after `self`, in order.
const PARAMS: [&str; 8] = [
    "topic",
    "body",
    "tags",
    "keys",
    "properties",
    "flag",
    "delay_time_level",
    "deliver_time_ms",
];

static STATE: PyOnceLock<InitState> = PyOnceLock::new();

/// Records the class served and its Python `__init__`; false (nothing changed) when a class was recorded already
/// (rmq_core.message reloaded: that class keeps its Python `__init__`).
pub fn set_state(
    py: Python<'_>,
    message: &Bound<'_, PyType>,
    python_init: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    if STATE.get(py).is_some() {
        return Ok(false);
    }
    let state = InitState {
        message: message.clone().unbind(),
        python_init: python_init.clone().unbind(),
        params: PARAMS.map(|p| PyString::intern(py, p).unbind()),
        tags_key: PyString::intern(py, "TAGS").unbind(),
        zero: 0i64.into_pyobject(py)?.into_any().unbind(),
    };
    Ok(STATE.set(py, state).is_ok())
}

/// The `tp_init` slot: `slf` an instance of the class or of a subclass, `args` a tuple, `kwds` a dict or NULL.
pub unsafe extern "C" fn init(
    slf: *mut ffi::PyObject,
    args: *mut ffi::PyObject,
    kwds: *mut ffi::PyObject,
) -> c_int {
    // SAFETY: CPython calls a type slot with the GIL held.
    let py = unsafe { Python::assume_attached() };
    let Some(st) = STATE.get(py) else {
        // unreachable: the slot's class exists only after the state is set
        PyTypeError::new_err("Message.__init__ used before message_class set it up").restore(py);
        return -1;
    };
    // SAFETY: `args` is a tuple and `kwds` a dict or NULL, borrowed for the call.
    unsafe {
        if let Some(r) = fast(st, slf, args, kwds) {
            return r;
        }
        slow(st, slf, args, kwds)
    }
}

/// The common call, or None when it is not one (nothing was set then).
#[inline]
unsafe fn fast(
    st: &InitState,
    slf: *mut ffi::PyObject,
    args: *mut ffi::PyObject,
    kwds: *mut ffi::PyObject,
) -> Option<c_int> {
    let nargs = ffi::PyTuple_Size(args);
    if ffi::Py_TYPE(slf) != st.message.as_ptr() as *mut ffi::PyTypeObject
        || !(0..=8).contains(&nargs)
    {
        return None;
    }
    let mut given: [*mut ffi::PyObject; 8] = [ptr::null_mut(); 8];
    for (i, g) in given.iter_mut().enumerate().take(nargs as usize) {
        *g = ffi::PyTuple_GetItem(args, i as ffi::Py_ssize_t);
    }
    if !kwds.is_null() {
        let (mut pos, mut name, mut value) = (0, ptr::null_mut(), ptr::null_mut());
        while ffi::PyDict_Next(kwds, &mut pos, &mut name, &mut value) != 0 {
            // keyword names of a call are interned: another object is another name (the Python __init__ answers)
            let k = st.params.iter().position(|p| p.as_ptr() == name)?;
            if !given[k].is_null() {
                return None; // given twice
            }
            given[k] = value;
        }
    }
    let none = ffi::Py_None();
    let absent_or =
        |p: *mut ffi::PyObject, default: *mut ffi::PyObject| p.is_null() || p == default;
    let [topic, body, tags, keys, properties, flag, delay, deliver] = given;
    if topic.is_null()
        || body.is_null()
        || ffi::PyBytes_CheckExact(body) == 0
        || !(absent_or(tags, none) || ffi::PyUnicode_CheckExact(tags) != 0)
        || !absent_or(keys, none)
        || !absent_or(properties, none)
        || !absent_or(delay, st.zero.as_ptr())
        || !absent_or(deliver, none)
    {
        return None;
    }
    let flag = if flag.is_null() {
        st.zero.as_ptr()
    } else {
        flag
    };
    let props = ffi::PyDict_New();
    if props.is_null() {
        return Some(-1);
    }
    if !absent_or(tags, none)
        && ffi::PyUnicode_GetLength(tags) > 0
        && ffi::PyDict_SetItem(props, st.tags_key.as_ptr(), tags) < 0
    {
        ffi::Py_DecRef(props);
        return Some(-1);
    }
    // exactly the class (checked above): its layout is message_class's; `props`' reference passes to the field
    message_type::set_fields(slf, topic, body, flag, props);
    Some(0)
}

/// Any other call: `python_init(slf, *args, **kwds)`.
unsafe fn slow(
    st: &InitState,
    slf: *mut ffi::PyObject,
    args: *mut ffi::PyObject,
    kwds: *mut ffi::PyObject,
) -> c_int {
    let nargs = ffi::PyTuple_Size(args);
    let tuple = ffi::PyTuple_New(nargs + 1);
    if tuple.is_null() {
        return -1;
    }
    // PyTuple_SetItem steals a reference: hand it new ones
    ffi::PyTuple_SetItem(tuple, 0, ffi::Py_NewRef(slf));
    for i in 0..nargs {
        ffi::PyTuple_SetItem(tuple, i + 1, ffi::Py_NewRef(ffi::PyTuple_GetItem(args, i)));
    }
    let r = ffi::PyObject_Call(st.python_init.as_ptr(), tuple, kwds);
    ffi::Py_DecRef(tuple);
    if r.is_null() {
        return -1;
    }
    ffi::Py_DecRef(r);
    0
}
