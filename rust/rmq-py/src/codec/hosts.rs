//! Hosts: `(ip, port)` ⇄ `Host` for the bindings, and the offset message id of a store host and CommitLog offset.
//!
//! Decisions (the Python twin matches them): `ip` must be an IPv4/IPv6 literal (no name lookup), port must fit an
//! int32; else ValueError.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use rmq_store::format::message::{self, Host};

/// `(ip, port)` → `Host`.
pub fn host_from_py(host: &Bound<'_, PyAny>) -> PyResult<Host> {
    let (ip, port): (String, i64) = host.extract()?;
    Host::parse(&ip, port).ok_or_else(|| {
        PyValueError::new_err(format!(
            "not an (ip literal, int32 port) host: ({ip:?}, {port})"
        ))
    })
}

pub fn host_to_py<'py>(py: Python<'py>, host: &Host) -> PyResult<Bound<'py, PyTuple>> {
    (host.ip.to_string(), host.port).into_pyobject(py)
}

#[pyfunction]
pub fn create_offset_msg_id(
    store_host: &Bound<'_, PyAny>,
    commitlog_offset: i64,
) -> PyResult<String> {
    Ok(message::create_offset_msg_id(
        &host_from_py(store_host)?,
        commitlog_offset,
    ))
}
