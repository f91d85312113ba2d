//! The Rust engine's `Message` class (python/rmq_core/message.py invariants 4 and 5; feature `cpython-internals`,
//! assumptions A1-A6 of `cpython/mod.rs`): `message_class(cls, python_init)` makes a native copy of the class
//! written in message.py that is NOT a garbage-collected type.
//!
//! Owns: the class's object layout — Python's object header, then `body`, `flag`, `properties`, `topic` (NULL =
//! unset) as member descriptors (`Py_T_OBJECT_EX`: an unset field raises AttributeError on reading, as an unset
//! `__slots__` entry does), `__slots__` the same four names as a class attribute (for `copyreg`/`pickle`/`copy` and
//! message.py's `_all_slots`); its `tp_dealloc`; its `tp_init`, `message_init.rs`. Every other attribute of the class
//! (methods, properties, `__eq__`, `__repr__`, `__hash__ = None`, the docstring, annotations) is copied from `cls`,
//! so the class behaves as the one written in Python; `__signature__` is `python_init`'s without `self`.
//!
//! Why not a GC type: every class written in Python is one (CPython gives each a GC header, counts each allocation
//! towards a collection, and keeps a tuple tracked while it holds any object of a GC type, tracked or not). A Message
//! refers only to str, bytes, an int and its str → str properties, so it is never in a reference cycle the collector
//! would have to find (a cycle through one — a property value referring back to it, the class holding an instance —
//! is never collected). Not being one, the `(message, queue_id)` tuples a caller builds by the hundred thousand for
//! `put_messages` are untracked at the collector's first look, and building the messages triggers fewer
//! collections: the store API bench's build, 475 → ~280 ns per message (docs/CORE_API.md). Subclasses written in
//! Python (`MessageExt`, a user's) are GC types again; the collector does not see these four fields of theirs (this
//! class has no traverse), only their own.
//!
//! Thread-safety: the class is made once, at message.py's import, with the GIL held; instances follow Python's
//! rules (GIL).

use std::ffi::{c_int, c_void, CString};
use std::mem::offset_of;
use std::ptr;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple, PyType};

use super::message_init;

/// The object layout.
#[repr(C)]
struct MessageObject {
    ob_base: ffi::PyObject,
    body: *mut ffi::PyObject,
    flag: *mut ffi::PyObject,
    properties: *mut ffi::PyObject,
    topic: *mut ffi::PyObject,
}

/// The field names in layout order (`__slots__`).
const FIELDS: [&str; 4] = ["body", "flag", "properties", "topic"];

/// What is not copied from the Python class: the fields (its own slot descriptors), what only a class written in
/// Python has, what the spec sets, and `__init__` (the `tp_init` slot).
const NOT_COPIED: [&str; 9] = [
    "body",
    "flag",
    "properties",
    "topic",
    "__slots__",
    "__dict__",
    "__weakref__",
    "__module__",
    "__init__",
];

/// Sets the four fields of `obj` (an instance of exactly the class), taking a new reference to `topic`, `body`,
/// `flag` and passing `props`' reference into the object; the values they replace (a second `__init__`) are dropped.
///
/// # Safety
/// `obj` is an instance of exactly the class `message_class` made, the arguments live objects, the GIL held.
pub unsafe fn set_fields(
    obj: *mut ffi::PyObject,
    topic: *mut ffi::PyObject,
    body: *mut ffi::PyObject,
    flag: *mut ffi::PyObject,
    props: *mut ffi::PyObject,
) {
    // SAFETY: the caller's contract (the layout above).
    unsafe {
        let o = obj.cast::<MessageObject>();
        let old = [
            ptr::replace(&raw mut (*o).topic, ffi::Py_NewRef(topic)),
            ptr::replace(&raw mut (*o).body, ffi::Py_NewRef(body)),
            ptr::replace(&raw mut (*o).flag, ffi::Py_NewRef(flag)),
            ptr::replace(&raw mut (*o).properties, props),
        ];
        for v in old {
            if !v.is_null() {
                ffi::Py_DecRef(v);
            }
        }
    }
}

/// `tp_dealloc`: drops the four fields, frees the object with its type's `tp_free` (PyObject_Free; PyObject_GC_Del
/// for a GC subclass, which `subtype_dealloc` untracked before calling here) and drops the reference every instance
/// of a heap type holds on its type (`subtype_dealloc` leaves that to a heap base's dealloc).
unsafe extern "C" fn dealloc(obj: *mut ffi::PyObject) {
    // SAFETY: `obj` is an instance of the class or of a subclass (the layout above), being deallocated, GIL held.
    unsafe {
        let o = obj.cast::<MessageObject>();
        for field in [
            &raw mut (*o).body,
            &raw mut (*o).flag,
            &raw mut (*o).properties,
            &raw mut (*o).topic,
        ] {
            let v = ptr::replace(field, ptr::null_mut());
            if !v.is_null() {
                ffi::Py_DecRef(v);
            }
        }
        let tp = ffi::Py_TYPE(obj);
        // Py_tp_free is set on every ready type; its signature is freefunc
        let free = std::mem::transmute::<*mut c_void, unsafe extern "C" fn(*mut c_void)>(
            ffi::PyType_GetSlot(tp, ffi::Py_tp_free),
        );
        free(obj.cast());
        ffi::Py_DecRef(tp.cast());
    }
}

/// `message_class(cls, python_init)`: the native copy of `cls` described in the module header, its `__init__` the
/// native one falling back to `python_init`. `cls` must have the four fields as slots, else TypeError. Called again
/// (rmq_core.message reloaded), it returns `cls` itself, unchanged.
#[pyfunction]
pub fn message_class<'py>(
    py: Python<'py>,
    cls: &Bound<'py, PyType>,
    python_init: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyType>> {
    for name in FIELDS {
        if cls.getattr(name)?.get_type().name()? != "member_descriptor" {
            return Err(PyTypeError::new_err(format!(
                "{}.{name} is not a slot",
                cls.name()?
            )));
        }
    }
    let module: String = cls.getattr("__module__")?.extract()?;
    let qualname: String = cls.getattr("__qualname__")?.extract()?;
    // the names and arrays below live for the process (one class per process, leaked once)
    let name = Box::leak(CString::new(format!("{module}.{qualname}"))?.into_boxed_c_str());
    let offsets = [
        offset_of!(MessageObject, body),
        offset_of!(MessageObject, flag),
        offset_of!(MessageObject, properties),
        offset_of!(MessageObject, topic),
    ];
    let mut members = Vec::with_capacity(5);
    for (field, offset) in FIELDS.iter().zip(offsets) {
        members.push(ffi::PyMemberDef {
            name: Box::leak(CString::new(*field)?.into_boxed_c_str()).as_ptr(),
            type_code: ffi::Py_T_OBJECT_EX,
            offset: offset as ffi::Py_ssize_t,
            flags: 0,
            doc: ptr::null(),
        });
    }
    members.push(ffi::PyMemberDef::default()); // the sentinel
    let members = Box::leak(members.into_boxed_slice());
    let slots = Box::leak(Box::new([
        ffi::PyType_Slot {
            slot: ffi::Py_tp_dealloc,
            pfunc: dealloc as *mut c_void,
        },
        ffi::PyType_Slot {
            slot: ffi::Py_tp_init,
            pfunc: message_init::init as *mut c_void,
        },
        ffi::PyType_Slot {
            slot: ffi::Py_tp_members,
            pfunc: members.as_mut_ptr().cast(),
        },
        ffi::PyType_Slot {
            slot: 0,
            pfunc: ptr::null_mut(),
        },
    ]));
    let spec = Box::leak(Box::new(ffi::PyType_Spec {
        name: name.as_ptr(),
        basicsize: std::mem::size_of::<MessageObject>() as c_int,
        itemsize: 0,
        flags: FLAGS as _,
        slots: slots.as_mut_ptr(),
    }));
    // SAFETY: a complete spec whose arrays live for the process; a new reference or NULL with an error.
    let native = unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyType_FromSpec(spec))? }
        .cast_into::<PyType>()?;
    if !message_init::set_state(py, &native, python_init)? {
        return Ok(cls.clone()); // a second class (module reloaded): left as written
    }
    native.setattr("__slots__", PyTuple::new(py, FIELDS)?)?;
    // tp_name is the spec's dotted name until set: as a class written in Python, C-level messages say "Message"
    native.setattr("__name__", cls.getattr("__name__")?)?;
    native.setattr("__qualname__", &qualname)?;
    let namespace = cls.getattr("__dict__")?;
    let items: Vec<Bound<'py, PyAny>> = namespace
        .call_method0("items")?
        .try_iter()?
        .collect::<PyResult<_>>()?;
    for item in items {
        let (key, value): (String, Bound<'py, PyAny>) = item.extract()?;
        if !NOT_COPIED.contains(&key.as_str()) {
            native.setattr(key.as_str(), value)?;
        }
    }
    let signature = py
        .import("inspect")?
        .call_method1("signature", (python_init,))?;
    let params: Vec<Bound<'py, PyAny>> = signature
        .getattr("parameters")?
        .call_method0("values")?
        .try_iter()?
        .skip(1) // self
        .collect::<PyResult<_>>()?;
    let params = PyList::new(py, params)?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("parameters", params)?;
    native.setattr(
        "__signature__",
        signature.call_method("replace", (), Some(&kwargs))?,
    )?;
    Ok(native)
}

/// What the layout assumes, for `cpython_assumptions()`: the object's size and each field's offset (A1).
pub fn layout() -> (usize, [(&'static str, usize); 4]) {
    (
        std::mem::size_of::<MessageObject>(),
        [
            ("body", offset_of!(MessageObject, body)),
            ("flag", offset_of!(MessageObject, flag)),
            ("properties", offset_of!(MessageObject, properties)),
            ("topic", offset_of!(MessageObject, topic)),
        ],
    )
}

/// The type flags the class is made with (A4: no `Py_TPFLAGS_HAVE_GC`).
pub const FLAGS: std::ffi::c_ulong = ffi::Py_TPFLAGS_DEFAULT | ffi::Py_TPFLAGS_BASETYPE;
