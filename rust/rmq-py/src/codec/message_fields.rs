//! What a put reads from a `rmq_core.message.Message`: the `topic`, `body`, `flag` and `properties` slots of exact
//! `Message`/`MessageExt` instances (`MessageFields`, through `cpython::Slots`; `store.rs` reads other types through
//! getattr), and `untrack_message`, which takes a Message out of the cycle collector's tracking.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

use crate::cpython;

/// Takes `msg` out of the cyclic garbage collector's tracking when its type is exactly `rmq_core.message.Message`
/// (anything else is left as it is). A Message refers only to its str topic, bytes body, int flag and str → str
/// properties dict, so it cannot be part of a reference cycle the collector would have to find; untracked, the
/// hundreds of thousands a caller builds for one `put_messages` cost the collector nothing (each tracked one is
/// traversed again by every full collection while the batch is being built). Called by `Message.__init__`. The
/// native Message class is not a GC type (nothing to untrack); the plain-PyO3 build untracks nothing.
#[pyfunction]
pub fn untrack_message(py: Python<'_>, msg: &Bound<'_, PyAny>) -> PyResult<()> {
    let fields = MessageFields::get(py)?;
    if msg.get_type().is(fields.classes[0].bind(py)) {
        cpython::untrack(msg);
    }
    Ok(())
}

/// `Message`'s `topic`, `body`, `flag`, `properties` slots (inherited unchanged by `MessageExt`): what
/// `put_messages` reads from each message without an attribute lookup.
pub struct MessageFields {
    classes: [Py<PyType>; 2],
    slots: cpython::Slots,
}

static MESSAGE_FIELDS: PyOnceLock<MessageFields> = PyOnceLock::new();

/// The fields `read` returns, in its order.
const FIELDS: [&str; 4] = ["topic", "body", "flag", "properties"];

impl MessageFields {
    pub fn get(py: Python<'_>) -> PyResult<&MessageFields> {
        MESSAGE_FIELDS.get_or_try_init(py, || {
            let module = py.import("rmq_core.message")?;
            let message = module.getattr("Message")?.cast_into::<PyType>()?;
            let ext = module.getattr("MessageExt")?.cast_into::<PyType>()?;
            for name in FIELDS {
                let d = message.getattr(name)?;
                if !ext.getattr(name)?.is(&d) || d.get_type().name()? != "member_descriptor" {
                    return Err(PyTypeError::new_err(format!(
                        "Message.{name} is not a slot shared with MessageExt"
                    )));
                }
            }
            Ok(MessageFields {
                slots: cpython::Slots::new(&message, &FIELDS)?,
                classes: [message.unbind(), ext.unbind()],
            })
        })
    }

    /// `[topic, body, flag, properties]` of `m` when its type is exactly Message or MessageExt (an unset slot
    /// raises AttributeError, as getattr does); None for any other type.
    #[inline]
    pub fn read<'py>(&self, m: &Bound<'py, PyAny>) -> PyResult<Option<[Bound<'py, PyAny>; 4]>> {
        let tp = m.get_type_ptr();
        if !self.classes.iter().any(|c| c.as_ptr() == tp.cast()) {
            return Ok(None);
        }
        let s = &self.slots;
        Ok(Some([
            s.get(m, 0)?,
            s.get(m, 1)?,
            s.get(m, 2)?,
            s.get(m, 3)?,
        ]))
    }
}
