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
// (GIL) build, 64-bit; the abi3 wheel cannot load into a free-threaded (3.13t) interpreter.
//
// | #   | what is assumed                                   | why                                  | checked by test_cpython_layout.py |
// |-----|---------------------------------------------------|--------------------------------------|-----------------------------------|
// | A1  | an object starts with a 16-byte header (ob_refcnt,| the native Message's layout          | `object.__basicsize__` == the     |
// |     | ob_type; 3.12+ a refcount union, same size), then | (`MessageObject`: 4 object pointers  | header; `Message.__basicsize__`,  |
// |     | the fields; a `__slots__` class written in Python | at 16, 24, 32, 40; size 48) is the   | and a slots class's, == 48; ctypes|
// |     | lays its sorted slots out the same way            | Python class's                       | reads id(field) at each offset    |
// | A2  | a `Py_T_OBJECT_EX` member reads as AttributeError | unset fields behave as unset slots   | a blank instance's fields raise,  |
// |     | when NULL; set/del through the descriptor         |                                      | set, delete                       |
// | A3  | a heap type's instance holds a reference to its   | `tp_dealloc` drops it and frees with | the type's and the fields'        |
// |     | type (3.8+); `tp_free` of a non-GC type is        | the type's `tp_free` (also for a GC  | refcounts unchanged after 1,000   |
// |     | PyObject_Free, of a Python subclass PyObject_GC_Del| subclass: subtype_dealloc untracks) | instances and subclass instances  |
// | A4  | type flags: Py_TPFLAGS_HAVE_GC = 1<<14, BASETYPE =| the class is made without HAVE_GC;   | the bits of a Python class, of    |
// |     | 1<<10, HEAPTYPE = 1<<9; a Python subclass of a    | its subclasses are GC types again    | `int`, of Message, of a subclass  |
// |     | non-GC heap type gets HAVE_GC                     |                                      |                                   |
// | A5  | PyType_FromSpec + setattr on the new heap type    | the class namespace (methods,        | Message's attributes are the      |
// |     | (not immutable) copies a namespace                | properties, `__slots__`) is copied   | Python class's                    |
// | A6  | `member_descriptor` is the type of every slot     | `message_class` refuses a class      | `type(Message.body)` and each     |
// |     | descriptor                                        | whose fields are not slots           | MessageExt slot's type            |
// | A7  | keyword names of a call are interned strs         | native `__init__` matches them by    | a non-interned keyword gives the  |
// |     | (identity); if not, the Python `__init__` runs    | identity (speed only, not results)   | same Message                      |
// | A8  | PyObject_GC_UnTrack of a GC object, tracked or    | decoded MessageExt, put results,     | gc.is_tracked of each; untracked  |
// |     | not, is allowed; an untracked object is freed by  | Message of a reloaded class cost the | objects freed with their last     |
// |     | reference counting                                | collector nothing                    | reference                         |
// | A9  | PyType_GetSlot reads a static type's slots (3.10+ | slots read/set without a lookup      | a decoded MessageExt's slots and  |
// |     | limited API); member_descriptor's tp_descr_get/set| (`Slots`: MessageExt filled,         | a put's records are the twin's    |
// |     | are its C getter/setter (descrget/descrsetfunc)   | Message read)                        | (S2, S3 parity)                   |
// | A10 | a heap type's tp_alloc (PyType_GenericAlloc)      | MessageExt made without `__init__`   | a decoded MessageExt's slots are  |
// |     | returns a zeroed instance, tracked if GC          |                                      | the twin's; unset ones raise      |

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
