//! Column decoding for Spark (`decode_columns`), the run gather of a store read (`gather_runs`), and `ColumnBuffer`,
//! the Rust-owned bytes both return.
//!
//! Decisions (the Python twin matches them):
//!   * `decode_columns(buf, tag_filter=None, min_queue_offset=None)`: `buf` any C-contiguous byte buffer (`bytes`,
//!     a `ColumnBuffer` from `gather_runs`); the walk (`rmq_store::format::columns`) runs
//!     with the GIL released; the result is a dict of Arrow buffers as `ColumnBuffer`s (the Rust vectors themselves,
//!     handed over without a copy through the buffer protocol; they compare equal to `bytes` of the same content):
//!     `num_rows` int; fixed-width columns (`queue_id`, `reconsume_times` i32; `queue_offset`, `commitlog_offset`,
//!     `born_timestamp`, `store_timestamp` i64 ms) little-endian `bytes`; utf8/binary columns (`topic`, `msg_id`,
//!     `tags`, `keys`, `body`) `(validity bytes | None, i32 offsets bytes, data bytes)`; `properties`
//!     `(list offsets, key offsets, key data, value offsets, value data)`. Errors: `CorruptRecordError(offset)` for
//!     a bad record or a body that does not inflate, ValueError for an unsupported compression type.
//!   * `gather_runs(src, starts, ends)`: `src` any C-contiguous byte buffer (a read-only `mmap`), `starts`/`ends`
//!     C-contiguous int64 buffers (numpy arrays); returns a `ColumnBuffer` (equal to the `bytes` of the runs),
//!     copied with the GIL released; ValueError (nothing copied) when the counts differ or a run is outside `src`,
//!     TypeError/BufferError for unusable buffers.

use std::os::raw::c_int;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use rmq_store::format::columns::{self, ColumnFilter, VarColumn};
use rmq_store::format::gather;

use crate::errors;

/// Read-only bytes owned by Rust (a column buffer of `decode_columns`), exposed through the buffer protocol so
/// `pyarrow.py_buffer` / `memoryview` wrap them without a copy. Equal to `bytes` (and other ColumnBuffers) with the
/// same content; `bytes(buf)` copies.
#[pyclass(frozen, module = "rmq_core._core")]
pub struct ColumnBuffer {
    data: Vec<u8>,
}

#[pymethods]
impl ColumnBuffer {
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("ColumnBuffer is read-only"));
        }
        // SAFETY: `view` comes from the interpreter; the data lives (unmoved: the class is frozen) as long as the
        // object.
        unsafe { crate::cpython::fill_read_only_buffer(view, slf.as_any(), &slf.get().data, flags) }
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}

    fn __len__(&self) -> usize {
        self.data.len()
    }

    fn __bytes__<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.data)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = other.py();
        if let Ok(b) = other.cast::<PyBytes>() {
            return Ok((b.as_bytes() == self.data.as_slice())
                .into_pyobject(py)?
                .to_owned()
                .into_any()
                .unbind());
        }
        if let Ok(o) = other.cast::<ColumnBuffer>() {
            return Ok((o.get().data == self.data)
                .into_pyobject(py)?
                .to_owned()
                .into_any()
                .unbind());
        }
        Ok(py.NotImplemented())
    }

    fn __repr__(&self) -> String {
        format!("<ColumnBuffer {} bytes>", self.data.len())
    }
}

pub(crate) fn buffer<'py>(py: Python<'py>, data: Vec<u8>) -> PyResult<Bound<'py, ColumnBuffer>> {
    Bound::new(py, ColumnBuffer { data })
}

fn le_buffer<'py, T: Copy, const N: usize>(
    py: Python<'py>,
    v: &[T],
    to_le: fn(T) -> [u8; N],
) -> PyResult<Bound<'py, ColumnBuffer>> {
    let mut out = Vec::with_capacity(v.len() * N);
    for &x in v {
        out.extend_from_slice(&to_le(x));
    }
    buffer(py, out)
}

fn offsets_buffer<'py>(py: Python<'py>, v: &[i32]) -> PyResult<Bound<'py, ColumnBuffer>> {
    le_buffer(py, v, i32::to_le_bytes)
}

fn var_column<'py>(py: Python<'py>, c: VarColumn) -> PyResult<Bound<'py, PyTuple>> {
    let validity = match c.validity {
        Some(b) => Some(buffer(py, b)?),
        None => None,
    };
    (
        validity,
        offsets_buffer(py, &c.offsets)?,
        buffer(py, c.data)?,
    )
        .into_pyobject(py)
}

/// Concatenated records → Arrow-layout column buffers (see the module header and `rmq_store::format::columns`).
#[pyfunction]
#[pyo3(signature = (buf, tag_filter = None, min_queue_offset = None))]
pub fn decode_columns<'py>(
    py: Python<'py>,
    buf: PyBuffer<u8>,
    tag_filter: Option<Vec<String>>,
    min_queue_offset: Option<i64>,
) -> PyResult<Bound<'py, PyDict>> {
    let buf = contiguous(&buf, "buf")?;
    let filter = ColumnFilter {
        tags: tag_filter.map(|t| t.into_iter().map(String::into_bytes).collect()),
        min_queue_offset,
    };
    let c = py
        .detach(|| columns::decode_columns(buf, &filter))
        .map_err(|e| errors::to_py(py, e))?;
    let d = PyDict::new(py);
    d.set_item("num_rows", c.num_rows)?;
    d.set_item("topic", var_column(py, c.topic)?)?;
    d.set_item("queue_id", le_buffer(py, &c.queue_id, i32::to_le_bytes)?)?;
    d.set_item(
        "queue_offset",
        le_buffer(py, &c.queue_offset, i64::to_le_bytes)?,
    )?;
    d.set_item(
        "commitlog_offset",
        le_buffer(py, &c.commitlog_offset, i64::to_le_bytes)?,
    )?;
    d.set_item("msg_id", var_column(py, c.msg_id)?)?;
    d.set_item("tags", var_column(py, c.tags)?)?;
    d.set_item("keys", var_column(py, c.keys)?)?;
    d.set_item("body", var_column(py, c.body)?)?;
    let p = c.properties;
    d.set_item(
        "properties",
        (
            offsets_buffer(py, &p.offsets)?,
            offsets_buffer(py, &p.keys.offsets)?,
            buffer(py, p.keys.data)?,
            offsets_buffer(py, &p.values.offsets)?,
            buffer(py, p.values.data)?,
        ),
    )?;
    d.set_item(
        "born_timestamp",
        le_buffer(py, &c.born_timestamp, i64::to_le_bytes)?,
    )?;
    d.set_item(
        "store_timestamp",
        le_buffer(py, &c.store_timestamp, i64::to_le_bytes)?,
    )?;
    d.set_item(
        "reconsume_times",
        le_buffer(py, &c.reconsume_times, i32::to_le_bytes)?,
    )?;
    Ok(d)
}

/// A C-contiguous buffer's items as a slice, or BufferError.
fn contiguous<'a, T: pyo3::buffer::Element>(buf: &'a PyBuffer<T>, what: &str) -> PyResult<&'a [T]> {
    if !buf.is_c_contiguous() {
        return Err(PyBufferError::new_err(format!(
            "{what} must be a C-contiguous buffer"
        )));
    }
    // SAFETY: C-contiguous with item_count items of T (PyBuffer<T> checked the item format and size); the exporter
    // keeps the memory alive and unmoved while `buf` (the view) exists, and nothing here writes to it.
    Ok(unsafe { std::slice::from_raw_parts(buf.buf_ptr() as *const T, buf.item_count()) })
}

/// `src[starts[i]:ends[i]]` for every i, concatenated (see the module header).
#[pyfunction]
pub fn gather_runs(
    py: Python<'_>,
    src: PyBuffer<u8>,
    starts: &Bound<'_, PyAny>,
    ends: &Bound<'_, PyAny>,
) -> PyResult<ColumnBuffer> {
    let (starts, ends) = (run_bounds(starts)?, run_bounds(ends)?);
    let (s, a, b) = (
        contiguous(&src, "src")?,
        starts
            .as_ref()
            .map_or(Ok(&[][..]), |v| contiguous(v, "starts"))?,
        ends.as_ref()
            .map_or(Ok(&[][..]), |v| contiguous(v, "ends"))?,
    );
    let data = py
        .detach(|| gather::gather_runs(s, a, b))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(ColumnBuffer { data })
}

/// An int64 buffer of run bounds; None for an empty one, whose exporter may hand out a pointer that is not aligned
/// for i64 (`array.array("q")` does), which PyO3 refuses although no item is ever read (found by fuzz/gather_runs).
fn run_bounds(obj: &Bound<'_, PyAny>) -> PyResult<Option<PyBuffer<i64>>> {
    match PyBuffer::<i64>::get(obj) {
        Ok(buf) => Ok(Some(buf)),
        Err(e) => match PyBuffer::<u8>::get(obj).map(|raw| raw.len_bytes()) {
            Ok(0) => Ok(None),
            _ if obj.len().ok() == Some(0) => Ok(None),
            _ => Err(e),
        },
    }
}
