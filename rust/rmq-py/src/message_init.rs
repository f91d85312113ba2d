//! `Message.__init__`'s native fast path (python/rmq_core/message.py invariant 5).
//!
//! Owns: the method descriptor `message_init(Message, python_init)` returns, which message.py installs as
//! `Message.__init__`. It runs the common call itself — an instance of exactly `Message`, `topic`, a `body` of exact
//! `bytes`, `tags` None or an exact `str`, `flag` anything, `keys`/`properties`/`deliver_time_ms` absent or None and
//! `delay_time_level` absent or 0, positionally or by keyword — and sets the four slots through their member
//! descriptors' C setter, `properties` = `{"TAGS": tags}` when `tags` is non-empty else `{}`, then untracks the
//! message (invariant 4): what the Python `__init__` does for those arguments, without a Python frame. Every other call (keys, properties, delay level, timer fields, a body to convert, a subclass, a bad
//! argument) goes to `python_init`, the `__init__` written in message.py, so its results and errors are that
//! function's by construction. The Python twin's `message_init` returns `python_init` itself.
//!
//! Thread-safety: called with the GIL held (a method of a Python class); the state is set once, before the
//! descriptor exists, and only read afterwards.

use std::ffi::{c_char, c_int};
use std::ptr;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyString, PyType};

type DescrSetFn =
    unsafe extern "C" fn(*mut ffi::PyObject, *mut ffi::PyObject, *mut ffi::PyObject) -> c_int;

/// What the fast path needs: the class, the Python `__init__` for every other call, the interned parameter names
/// (`PARAMS` order) and property name, and the slot descriptors of `topic`, `body`, `flag`, `properties` with their
/// C setter.
struct InitState {
    message: Py<PyType>,
    python_init: Py<PyAny>,
    params: [Py<PyString>; 8],
    tags_key: Py<PyString>,
    zero: Py<PyAny>,
    set: DescrSetFn,
    slots: [Py<PyAny>; 4],
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

const DOC: &[u8] = b"__init__($self, /, topic, body, tags=None, keys=None, properties=None, flag=0, \
delay_time_level=0, deliver_time_ms=None)\n--\n\nMessage.__init__ (native fast path, rust/rmq-py/src/message_init.rs)\0";

/// `message_init(cls, python_init)`: the method descriptor to install as `cls.__init__` (see the module header).
/// `cls`'s four slots must be member descriptors, else TypeError. The first class it is called with is the one served:
/// for any other class (the module reloaded) it returns `python_init` itself.
#[pyfunction]
pub fn message_init<'py>(
    py: Python<'py>,
    cls: &Bound<'py, PyType>,
    python_init: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let state = STATE.get_or_try_init(py, || -> PyResult<InitState> {
        let mut set = None;
        let mut slots = Vec::with_capacity(4);
        for name in ["topic", "body", "flag", "properties"] {
            let d = cls.getattr(name)?;
            if d.get_type().name()? != "member_descriptor" {
                return Err(PyTypeError::new_err(format!(
                    "{}.{name} is not a slot",
                    cls.name()?
                )));
            }
            // SAFETY: a live static type object; Py_tp_descr_set of member_descriptor is its C setter.
            let f =
                unsafe { ffi::PyType_GetSlot(d.get_type().as_type_ptr(), ffi::Py_tp_descr_set) };
            if f.is_null() {
                return Err(PyTypeError::new_err("member_descriptor has no setter"));
            }
            // SAFETY: the slot's documented signature is descrsetfunc.
            set = Some(unsafe { std::mem::transmute::<*mut std::ffi::c_void, DescrSetFn>(f) });
            slots.push(d.unbind());
        }
        Ok(InitState {
            message: cls.clone().unbind(),
            python_init: python_init.clone().unbind(),
            params: PARAMS.map(|p| PyString::intern(py, p).unbind()),
            tags_key: PyString::intern(py, "TAGS").unbind(),
            zero: 0i64.into_pyobject(py)?.into_any().unbind(),
            set: set.expect("four slots"),
            slots: slots.try_into().expect("four slots"),
        })
    })?;
    if !state.message.bind(py).is(cls) {
        // another class (rmq_core.message reloaded): no fast path for it, its own __init__ stays
        return Ok(python_init);
    }
    let def = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: c"__init__".as_ptr(),
        ml_meth: ffi::PyMethodDefPointer {
            PyCFunctionFastWithKeywords: init,
        },
        ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
        ml_doc: DOC.as_ptr() as *const c_char,
    }));
    // SAFETY: `cls` is a live type; `def` lives for the rest of the process.
    unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyDescr_NewMethod(cls.as_type_ptr(), def)) }
}

/// The descriptor's C function: `slf` an instance of `Message` (or a subclass; the descriptor checks), `args` the
/// positional arguments then the keyword values, `kwnames` the keyword names (a tuple) or NULL.
unsafe extern "C" fn init(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython calls a method with the GIL held.
    let py = unsafe { Python::assume_attached() };
    let Some(st) = STATE.get(py) else {
        // unreachable: the descriptor is made after the state
        PyTypeError::new_err("Message.__init__ used before message_init set it up").restore(py);
        return ptr::null_mut();
    };
    // SAFETY: `args` holds `nargs` positional arguments and one value per name of `kwnames`, borrowed for the call.
    unsafe {
        let nkw = if kwnames.is_null() {
            0
        } else {
            ffi::PyTuple_Size(kwnames)
        };
        if let Some(r) = fast(st, slf, args, nargs, kwnames, nkw) {
            return r;
        }
        slow(st, slf, args, nargs, kwnames, nkw)
    }
}

/// The common call, or None when it is not one (nothing was set then): `topic`, a `bytes` body, `tags` None or a
/// str, `flag` anything, and the other parameters absent or at their defaults (None, or the int 0 for the delay
/// level), given positionally or by keyword, each once.
#[inline]
unsafe fn fast(
    st: &InitState,
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
    nkw: ffi::Py_ssize_t,
) -> Option<*mut ffi::PyObject> {
    if ffi::Py_TYPE(slf) != st.message.as_ptr() as *mut ffi::PyTypeObject || nargs > 8 {
        return None;
    }
    let mut given: [*mut ffi::PyObject; 8] = [ptr::null_mut(); 8];
    for (i, g) in given.iter_mut().enumerate().take(nargs as usize) {
        *g = *args.add(i);
    }
    for i in 0..nkw {
        let name = ffi::PyTuple_GetItem(kwnames, i);
        let k = st.params.iter().position(|p| p.as_ptr() == name)?; // another name: the Python __init__ answers
        if !given[k].is_null() {
            return None; // given twice
        }
        given[k] = *args.add((nargs + i) as usize);
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
        return Some(ptr::null_mut());
    }
    if !absent_or(tags, none)
        && ffi::PyUnicode_GetLength(tags) > 0
        && ffi::PyDict_SetItem(props, st.tags_key.as_ptr(), tags) < 0
    {
        ffi::Py_DecRef(props);
        return Some(ptr::null_mut());
    }
    let set = st.set;
    let ok = set(st.slots[0].as_ptr(), slf, topic) == 0
        && set(st.slots[1].as_ptr(), slf, body) == 0
        && set(st.slots[2].as_ptr(), slf, flag) == 0
        && set(st.slots[3].as_ptr(), slf, props) == 0;
    ffi::Py_DecRef(props); // the slot holds its own reference
    if !ok {
        return Some(ptr::null_mut());
    }
    ffi::PyObject_GC_UnTrack(slf.cast()); // invariant 4 (exactly Message: checked above)
    Some(ffi::Py_NewRef(none))
}

/// Any other call: `python_init(slf, *args, **kwargs)`.
unsafe fn slow(
    st: &InitState,
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
    nkw: ffi::Py_ssize_t,
) -> *mut ffi::PyObject {
    let tuple = ffi::PyTuple_New(nargs + 1);
    if tuple.is_null() {
        return ptr::null_mut();
    }
    // PyTuple_SetItem steals a reference: hand it new ones
    ffi::PyTuple_SetItem(tuple, 0, ffi::Py_NewRef(slf));
    for i in 0..nargs {
        ffi::PyTuple_SetItem(tuple, i + 1, ffi::Py_NewRef(*args.add(i as usize)));
    }
    let mut kwargs = ptr::null_mut();
    if nkw > 0 {
        kwargs = ffi::PyDict_New();
        if kwargs.is_null() {
            ffi::Py_DecRef(tuple);
            return ptr::null_mut();
        }
        for i in 0..nkw {
            let value = *args.add((nargs + i) as usize);
            if ffi::PyDict_SetItem(kwargs, ffi::PyTuple_GetItem(kwnames, i), value) < 0 {
                ffi::Py_DecRef(tuple);
                ffi::Py_DecRef(kwargs);
                return ptr::null_mut();
            }
        }
    }
    let r = ffi::PyObject_Call(st.python_init.as_ptr(), tuple, kwargs);
    ffi::Py_DecRef(tuple);
    if !kwargs.is_null() {
        ffi::Py_DecRef(kwargs);
    }
    r
}
