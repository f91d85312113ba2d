//! The safe API of `cpython/mod.rs` over raw CPython (feature `cpython-internals`): GC untracking, member
//! descriptors' C getter and setter reached through `PyType_GetSlot`, a type's `tp_alloc`, CPython's UTF-8 decoder.
//! Each `unsafe` block names the assumption of the table in `mod.rs` it rests on.
//!
//! Thread-safety: every function is called with the GIL held (a `Python` token or a `Bound` proves it).

use std::ffi::{c_char, c_int, c_void};

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyType};

pub use super::message_type::message_class;

/// Takes `obj` out of the cycle collector's tracking when its type is a GC type (A8); anything else is left alone.
#[inline]
pub fn untrack(obj: &Bound<'_, PyAny>) {
    // SAFETY: reading a live type's flags; untracking a live object of a GC type, tracked or not, is allowed and
    // only changes what the collector traverses (A8).
    unsafe {
        if ffi::PyType_GetFlags(obj.get_type_ptr()) & ffi::Py_TPFLAGS_HAVE_GC != 0 {
            ffi::PyObject_GC_UnTrack(obj.as_ptr().cast());
        }
    }
}

type DescrGetFn = unsafe extern "C" fn(
    *mut ffi::PyObject,
    *mut ffi::PyObject,
    *mut ffi::PyObject,
) -> *mut ffi::PyObject;
type DescrSetFn =
    unsafe extern "C" fn(*mut ffi::PyObject, *mut ffi::PyObject, *mut ffi::PyObject) -> c_int;
type AllocFn = unsafe extern "C" fn(*mut ffi::PyTypeObject, ffi::Py_ssize_t) -> *mut ffi::PyObject;

/// A class's slots (`member_descriptor`s, checked by the caller) read and written through `member_descriptor`'s
/// C getter and setter (A9), and its instances allocated by its `tp_alloc` (A10): no attribute lookup, no
/// `__init__`.
pub struct Slots {
    cls: Py<PyType>,
    descrs: Vec<Py<PyAny>>,
    get: DescrGetFn,
    set: DescrSetFn,
    alloc: AllocFn,
}

impl Slots {
    /// `cls`'s slots `names`, each already checked to be a `member_descriptor` by the caller.
    pub fn new(cls: &Bound<'_, PyType>, names: &[&str]) -> PyResult<Slots> {
        let descrs = names
            .iter()
            .map(|n| cls.getattr(*n).map(Bound::unbind))
            .collect::<PyResult<Vec<_>>>()?;
        let member_descriptor = cls.getattr(names[0])?.get_type();
        // SAFETY: a live static type object; PyType_GetSlot accepts static types since 3.10 (A9); member_descriptor's
        // tp_descr_get / tp_descr_set are its C getter and setter, a heap type's Py_tp_alloc its allocator (A10).
        let (get, set, alloc) = unsafe {
            (
                ffi::PyType_GetSlot(member_descriptor.as_type_ptr(), ffi::Py_tp_descr_get),
                ffi::PyType_GetSlot(member_descriptor.as_type_ptr(), ffi::Py_tp_descr_set),
                ffi::PyType_GetSlot(cls.as_type_ptr(), ffi::Py_tp_alloc),
            )
        };
        if get.is_null() || set.is_null() || alloc.is_null() {
            return Err(PyTypeError::new_err(
                "member_descriptor has no getter or setter, or the class no tp_alloc",
            ));
        }
        Ok(Slots {
            cls: cls.clone().unbind(),
            descrs,
            // SAFETY: the slots' documented signatures are descrgetfunc, descrsetfunc and allocfunc.
            get: unsafe { std::mem::transmute::<*mut c_void, DescrGetFn>(get) },
            set: unsafe { std::mem::transmute::<*mut c_void, DescrSetFn>(set) },
            alloc: unsafe { std::mem::transmute::<*mut c_void, AllocFn>(alloc) },
        })
    }

    /// Slot `i` of `obj`, an instance of the class or of a subclass that did not replace the slot (the caller
    /// checks the type); an unset slot raises AttributeError, as getattr does.
    #[inline]
    pub fn get<'py>(&self, obj: &Bound<'py, PyAny>, i: usize) -> PyResult<Bound<'py, PyAny>> {
        // SAFETY: the member descriptor's getter on an instance of its class (the caller's check); it returns a
        // new reference, or NULL with an error set (A9).
        unsafe {
            Bound::from_owned_ptr_or_err(
                obj.py(),
                (self.get)(
                    self.descrs[i].as_ptr(),
                    obj.as_ptr(),
                    obj.get_type_ptr().cast(),
                ),
            )
        }
    }

    /// A new instance of the class, its slots unset, no `__init__` run (A10).
    #[inline]
    pub fn alloc<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        // SAFETY: `cls` is a live type object; tp_alloc returns a new reference (zeroed slots) or NULL with an
        // error (A10).
        unsafe {
            Bound::from_owned_ptr_or_err(py, (self.alloc)(self.cls.bind(py).as_type_ptr(), 0))
        }
    }

    /// Sets slot `i` of `obj` (made by `alloc`, or an instance of the class) to `v`.
    #[inline]
    pub fn set(&self, obj: &Bound<'_, PyAny>, i: usize, v: &Bound<'_, PyAny>) -> PyResult<()> {
        // SAFETY: the member descriptor's setter on an instance of its class; it takes its own reference to `v` and
        // returns -1 with an error set on failure (A9).
        if unsafe { (self.set)(self.descrs[i].as_ptr(), obj.as_ptr(), v.as_ptr()) } != 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        Ok(())
    }
}

/// `str` from UTF-8 with U+FFFD for what does not decode: CPython's decoder with errors="replace" (a stable-ABI
/// call, one pass), exactly what the Python twin calls.
#[inline]
pub fn utf8_replace<'py>(py: Python<'py>, raw: &[u8]) -> PyResult<Bound<'py, PyString>> {
    // SAFETY: pointer and length of a live slice; the error handler name is a NUL-terminated literal.
    unsafe {
        let p = ffi::PyUnicode_DecodeUTF8(
            raw.as_ptr() as *const c_char,
            raw.len() as ffi::Py_ssize_t,
            c"replace".as_ptr(),
        );
        Ok(Bound::from_owned_ptr_or_err(py, p)?.cast_into_unchecked::<PyString>())
    }
}

/// The assumptions' compiled-in values, for `cpython_assumptions()` and tests/store/test_cpython_layout.py.
pub fn assumptions(py: Python<'_>) -> PyResult<Bound<'_, pyo3::types::PyDict>> {
    let d = pyo3::types::PyDict::new(py);
    let (size, offsets) = super::message_type::layout();
    d.set_item("object_header_size", std::mem::size_of::<ffi::PyObject>())?;
    d.set_item("pointer_size", std::mem::size_of::<*mut ffi::PyObject>())?;
    d.set_item("message_basicsize", size)?;
    d.set_item("message_offsets", offsets.into_iter().collect::<Vec<_>>())?;
    d.set_item("message_flags", super::message_type::FLAGS)?;
    d.set_item("tpflags_have_gc", ffi::Py_TPFLAGS_HAVE_GC)?;
    d.set_item("tpflags_basetype", ffi::Py_TPFLAGS_BASETYPE)?;
    d.set_item("tpflags_heaptype", ffi::Py_TPFLAGS_HEAPTYPE)?;
    d.set_item("member_type_object_ex", ffi::Py_T_OBJECT_EX)?;
    Ok(d)
}
