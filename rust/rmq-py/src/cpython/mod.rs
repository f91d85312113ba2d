//! Every use of CPython's internals in `rmq_core._core`, behind the cargo feature `cpython-internals` (default on):
//! the rest of rmq-py calls only this safe API — `message_class`, `untrack`, `Slots` (a class's slots read, set,
//! its instances allocated), `utf8_replace`, `fill_read_only_buffer`, `cpython_assumptions`. With the feature,
//! `raw.rs`, `message_type.rs` and `message_init.rs` implement it on the assumptions below; without it
//! (`--no-default-features`), `fallback.rs` does in plain PyO3: the same results, slower (docs/FAST_PATHS.md S2-S5).
//! tests/store/test_cpython_layout.py checks every assumption in the running interpreter; compat/wheel/
//! check_wheel.sh runs it under 3.11, 3.12 and 3.13 (the abi3 wheel).
//!
//! Thread-safety: everything here runs with the GIL held.

#[cfg(feature = "cpython-internals")]
mod message_init;
#[cfg(feature = "cpython-internals")]
mod message_type;
#[cfg(feature = "cpython-internals")]
mod raw;
#[cfg(feature = "cpython-internals")]
pub use raw::{message_class, untrack, utf8_replace, Slots};

#[cfg(not(feature = "cpython-internals"))]
mod fallback;
#[cfg(not(feature = "cpython-internals"))]
pub use fallback::{message_class, untrack, utf8_replace, Slots};

use std::ffi::{c_int, c_void};

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyDict;

// The assumptions (the feature's; the fallback makes none). Versions: CPython 3.11, 3.12, 3.13, the default
// (GIL) build, 64-bit; the abi3 wheel cannot load into a free-threaded (3.13t) interpreter. Each check is a test of
// tests/store/test_cpython_layout.py, against the values `cpython_assumptions()` reports.
//
// | #   | what is assumed                      | why                        | CPython   | how it is checked          |
// |-----|--------------------------------------|----------------------------|-----------|----------------------------|
// | A1  | an object starts with a 16-byte      | the native Message's       | 3.11-3.13 | `object.__basicsize__` =   |
// |     | header (ob_refcnt, ob_type; 3.12+: a | layout (`MessageObject`: 4 |           | the header; Message's and  |
// |     | refcount union with the immortal     | object pointers at 16, 24, |           | a slots class's basicsize  |
// |     | bit, the same size), the fields      | 32, 40; size 48) is the    |           | 48; ctypes reads id(field) |
// |     | after it; a `__slots__` class        | Python class's             |           | at each offset             |
// |     | written in Python lays its (sorted)  |                            |           |                            |
// |     | slots out the same way               |                            |           |                            |
// | A2  | a `Py_T_OBJECT_EX` member reads as   | an unset field behaves as  | 3.11-3.13 | a blank instance's fields  |
// |     | AttributeError while NULL; set and   | an unset slot              |           | raise, are set, deleted    |
// |     | del go through the descriptor        |                            |           |                            |
// | A3  | a heap type's instance holds a       | `tp_dealloc` drops the     | 3.11-3.13 | the type's and the fields' |
// |     | reference to its type (3.8+);        | fields and the type, frees |           | refcounts unchanged after  |
// |     | `tp_free` of a non-GC type is        | with the type's `tp_free`  |           | 1,000 instances and 1,000  |
// |     | PyObject_Free, of a Python subclass  |                            |           | of a subclass              |
// |     | PyObject_GC_Del (subtype_dealloc     |                            |           |                            |
// |     | untracks first)                      |                            |           |                            |
// | A4  | Py_TPFLAGS_HAVE_GC = 1<<14, BASETYPE | the class is made without  | 3.11-3.13 | the bits of a Python       |
// |     | = 1<<10, HEAPTYPE = 1<<9; a Python   | HAVE_GC; its subclasses    |           | class, `int`, Message, a   |
// |     | subclass of a non-GC heap type gets  | are GC types again         |           | subclass; gc.is_tracked    |
// |     | HAVE_GC                              |                            |           |                            |
// | A5  | `PyType_FromSpec`, then setattr on   | methods, properties,       | 3.11-3.13 | Message's attributes are   |
// |     | the new (mutable) heap type, copies  | `__slots__` of the written |           | the Python class's         |
// |     | a namespace                          | class copied               |           |                            |
// | A6  | `member_descriptor` is the type of   | `message_class`, `Slots`   | 3.11-3.13 | `type(Message.body)`, each |
// |     | every slot descriptor                | refuse other attributes    |           | MessageExt slot's type     |
// | A7  | a call's keyword names are interned  | the native `__init__`      | 3.11-3.13 | a non-interned keyword     |
// |     | strs; another str of a name goes to  | matches names by identity  |           | gives the same Message     |
// |     | the Python `__init__`                | (speed, not results)       |           |                            |
// | A8  | PyObject_GC_UnTrack of a GC object,  | decoded MessageExt, put    | 3.11-3.13 | gc.is_tracked of each;     |
// |     | tracked or not, is allowed; an       | results, a reloaded        |           | freed with the last        |
// |     | untracked object is freed by         | class's Message cost the   |           | reference                  |
// |     | reference counting                   | collector nothing          |           |                            |
// | A9  | PyType_GetSlot reads a static type's | `Slots`: MessageExt        | 3.11-3.13 | decoded slots are the      |
// |     | slots (3.10+ limited API);           | filled, Message read       |           | twin's; put parity (S2,    |
// |     | member_descriptor's tp_descr_get /   | without an attribute       |           | S3)                        |
// |     | tp_descr_set are its C getter and    | lookup                     |           |                            |
// |     | setter                               |                            |           |                            |
// | A10 | a heap type's `tp_alloc`             | MessageExt made without    | 3.11-3.13 | the 18 decoded slots are   |
// |     | (PyType_GenericAlloc) returns a      | `__init__`                 |           | the twin's; a blank one's  |
// |     | zeroed instance, tracked if a GC     |                            |           | raise                      |
// |     | type                                 |                            |           |                            |

/// `cpython_assumptions()`: `{"enabled": bool}` and, with the feature, the values the build compiled in (A1, A4):
/// `object_header_size`, `pointer_size`, `message_basicsize`, `message_offsets` [(field, offset)],
/// `message_flags`, `tpflags_have_gc`, `tpflags_basetype`, `tpflags_heaptype`, `member_type_object_ex`.
#[pyfunction]
pub fn cpython_assumptions(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    #[cfg(feature = "cpython-internals")]
    let d = raw::assumptions(py)?;
    #[cfg(not(feature = "cpython-internals"))]
    let d = fallback::assumptions(py)?;
    d.set_item("enabled", cfg!(feature = "cpython-internals"))?;
    Ok(d)
}

/// Fills `view` for a read-only export of `data`, owned by `owner` (PyBuffer_FillInfo: the stable ABI's buffer
/// protocol, the same in both builds; no layout assumed). An error is returned as set by CPython.
///
/// # Safety
/// `view` comes from the interpreter's `__getbuffer__` call; `data` lives, unmoved, as long as `owner`.
pub unsafe fn fill_read_only_buffer(
    view: *mut ffi::Py_buffer,
    owner: &Bound<'_, PyAny>,
    data: &[u8],
    flags: c_int,
) -> PyResult<()> {
    // SAFETY: the caller's contract; the view holds a reference to `owner` (set by PyBuffer_FillInfo).
    let rc = unsafe {
        ffi::PyBuffer_FillInfo(
            view,
            owner.as_ptr(),
            data.as_ptr() as *mut c_void,
            data.len() as ffi::Py_ssize_t,
            1,
            flags,
        )
    };
    if rc == -1 {
        return Err(PyErr::fetch(owner.py()));
    }
    Ok(())
}
