//! The one table from `rmq_store::Error` to Python exceptions (classes imported once from `rmq_core.errors`).
//!
//! | core error            | Python                                   |
//! |-----------------------|------------------------------------------|
//! | Io{path,source}       | StoreError("I/O error on <path>: …")     |
//! | IllegalTopic          | IllegalTopicError (a ValueError)         |
//! | Corrupt{offset,reason}| CorruptRecordError(message, offset)      |
//! | Closed, Locked        | StoreError                               |
//! | InvalidArgument       | ValueError                               |

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use rmq_store::Error;

static STORE_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static ILLEGAL_TOPIC_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static CORRUPT_RECORD_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

const ERRORS_MODULE: &str = "rmq_core.errors";

fn class<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyType>>,
    name: &str,
) -> PyResult<Bound<'py, PyType>> {
    Ok(cell.import(py, ERRORS_MODULE, name)?.clone())
}

/// `CorruptRecordError(message, offset)`.
pub fn corrupt(py: Python<'_>, message: String, offset: i64) -> PyErr {
    match class(py, &CORRUPT_RECORD_ERROR, "CorruptRecordError") {
        Ok(cls) => PyErr::from_type(cls, (message, offset)),
        Err(e) => e,
    }
}

pub fn store_error(py: Python<'_>, message: String) -> PyErr {
    match class(py, &STORE_ERROR, "StoreError") {
        Ok(cls) => PyErr::from_type(cls, (message,)),
        Err(e) => e,
    }
}

pub fn to_py(py: Python<'_>, err: Error) -> PyErr {
    let message = err.to_string();
    match err {
        Error::Io { .. } | Error::Closed | Error::Locked(_) => store_error(py, message),
        Error::IllegalTopic(_) => match class(py, &ILLEGAL_TOPIC_ERROR, "IllegalTopicError") {
            Ok(cls) => PyErr::from_type(cls, (message,)),
            Err(e) => e,
        },
        Error::Corrupt { offset, .. } => corrupt(py, message, offset),
        Error::InvalidArgument(_) => PyValueError::new_err(message),
    }
}

/// `result.map_err(to_py)` with the GIL.
pub trait IntoPyResult<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for rmq_store::Result<T> {
    #[inline]
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}
