//! What a put reads from a `rmq_core.message.Message`: the `topic`, `body`, `flag` and `properties` slots of exact
//! `Message`/`MessageExt` instances through the member descriptors' C getter (`MessageFields`; `store.rs` reads other
//! types through getattr), and `untrack_message`, which takes a Message out of the cycle collector's tracking.

use std::os::raw::c_void;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// Takes `msg` out of the cyclic garbage collector's tracking when its type is exactly `rmq_core.message.Message`
/// (anything else is left as it is). A Message refers only to its str topic, bytes body, int flag and str → str
/// properties dict, so it cannot be part of a reference cycle the collector would have to find; untracked, the
/// hundreds of thousands a caller builds for one `put_messages` cost the collector nothing (each tracked one is
/// traversed again by every full collection while the batch is being built). Called by `Message.__init__`.
#[pyfunction]
pub fn untrack_message(py: Python<'_>, msg: &Bound<'_, PyAny>) -> PyResult<()> {
    let fields = MessageFields::get(py)?;
    let tp = msg.get_type_ptr();
    // the Rust engine's Message class is not a GC type at all (message_class.rs): nothing to untrack then
    if tp == fields.classes[0].as_ptr() as *mut ffi::PyTypeObject
        && crate::message_class::is_gc_type(tp)
    {
        // SAFETY: a live GC object (every instance of a Python class is one); untracking a tracked or an untracked
        // object is allowed and only changes what the collector traverses.
        unsafe { ffi::PyObject_GC_UnTrack(msg.as_ptr().cast()) };
    }
    Ok(())
}

type DescrGetFn = unsafe extern "C" fn(
    *mut ffi::PyObject,
    *mut ffi::PyObject,
    *mut ffi::PyObject,
) -> *mut ffi::PyObject;

/// `Message`'s `topic`, `body`, `flag`, `properties` slot descriptors (inherited unchanged by `MessageExt`) and
/// `member_descriptor`'s C getter: what `put_messages` reads from each message without an attribute lookup.
pub struct MessageFields {
    classes: [Py<PyType>; 2],
    get: DescrGetFn,
    descrs: [Py<PyAny>; 4],
}

static MESSAGE_FIELDS: PyOnceLock<MessageFields> = PyOnceLock::new();

impl MessageFields {
    pub fn get(py: Python<'_>) -> PyResult<&MessageFields> {
        MESSAGE_FIELDS.get_or_try_init(py, || {
            let module = py.import("rmq_core.message")?;
            let message = module.getattr("Message")?.cast_into::<PyType>()?;
            let ext = module.getattr("MessageExt")?.cast_into::<PyType>()?;
            let mut descrs = Vec::with_capacity(4);
            let mut get = None;
            for name in ["topic", "body", "flag", "properties"] {
                let d = message.getattr(name)?;
                if !ext.getattr(name)?.is(&d) || d.get_type().name()? != "member_descriptor" {
                    return Err(PyTypeError::new_err(format!(
                        "Message.{name} is not a slot shared with MessageExt"
                    )));
                }
                // SAFETY: a live static type object; Py_tp_descr_get of member_descriptor is its C getter.
                let f = unsafe {
                    ffi::PyType_GetSlot(d.get_type().as_type_ptr(), ffi::Py_tp_descr_get)
                };
                if f.is_null() {
                    return Err(PyTypeError::new_err("member_descriptor has no getter"));
                }
                // SAFETY: the slot's documented signature is descrgetfunc.
                get = Some(unsafe { std::mem::transmute::<*mut c_void, DescrGetFn>(f) });
                descrs.push(d.unbind());
            }
            let descrs: [Py<PyAny>; 4] = descrs.try_into().expect("four descriptors");
            Ok(MessageFields {
                classes: [message.unbind(), ext.unbind()],
                get: get.expect("four descriptors"),
                descrs,
            })
        })
    }

    /// `[topic, body, flag, properties]` of `m` when its type is exactly Message or MessageExt (an unset slot
    /// raises AttributeError, as getattr does); None for any other type.
    #[inline]
    pub fn read<'py>(&self, m: &Bound<'py, PyAny>) -> PyResult<Option<[Bound<'py, PyAny>; 4]>> {
        let py = m.py();
        let tp = m.get_type_ptr();
        if !self
            .classes
            .iter()
            .any(|c| c.as_ptr() as *mut ffi::PyTypeObject == tp)
        {
            return Ok(None);
        }
        let one = |d: &Py<PyAny>| -> PyResult<Bound<'py, PyAny>> {
            // SAFETY: the member descriptor's getter on an instance of its class (checked above); it returns a
            // new reference, or NULL with an error set.
            unsafe {
                Bound::from_owned_ptr_or_err(py, (self.get)(d.as_ptr(), m.as_ptr(), tp.cast()))
            }
        };
        Ok(Some([
            one(&self.descrs[0])?,
            one(&self.descrs[1])?,
            one(&self.descrs[2])?,
            one(&self.descrs[3])?,
        ]))
    }
}
