//! `StoreReader`: thin bindings over `rmq_store::StoreReader` (a read-only view of a store directory, no lock, no
//! recovery, no writes; the rules are in `rmq-store/src/store_reader.rs`), and `mapped_file_size`.
//!
//! Decisions (the Python twin `_reference/store_reader.py` matches them):
//!   * a root without `commitlog/` and `consumequeue/` → FileNotFoundError; a file size ≤ 0 → ValueError.
//!   * `read_records` returns `(ColumnBuffer, count, next_offset)`: the records without a copy into `bytes`
//!     (`decode_columns`, `decode_messages` and `gather_runs` take it as is; it equals its `bytes`).
//!   * tag codes are compared as int32 (`tags_code as i32`): a code outside the int32 range is wrapped.
//!
//! Thread-safety: the class is frozen and `Sync`; every call releases the GIL around the file work.

use std::path::PathBuf;

use pyo3::exceptions::{PyFileNotFoundError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::codec;
use crate::errors::to_py;

#[pyclass(frozen, module = "rmq_core._core")]
pub struct StoreReader {
    reader: rmq_store::StoreReader,
}

fn size_arg(name: &str, v: Option<i64>) -> PyResult<Option<u64>> {
    match v {
        None => Ok(None),
        Some(s) if s > 0 => Ok(Some(s as u64)),
        Some(_) => Err(PyValueError::new_err(format!(
            "invalid argument: {name} must be positive"
        ))),
    }
}

#[pymethods]
impl StoreReader {
    #[new]
    #[pyo3(signature = (root, commit_log_file_size=None, consume_queue_file_size=None))]
    fn new(
        py: Python<'_>,
        root: PathBuf,
        commit_log_file_size: Option<i64>,
        consume_queue_file_size: Option<i64>,
    ) -> PyResult<Self> {
        let cl = size_arg("commit_log_file_size", commit_log_file_size)?;
        let cq = size_arg("consume_queue_file_size", consume_queue_file_size)?;
        match py.detach(|| rmq_store::StoreReader::open(&root, cl, cq)) {
            Ok(reader) => Ok(StoreReader { reader }),
            Err(rmq_store::Error::Io { path, source })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Err(PyFileNotFoundError::new_err(format!(
                    "I/O error on {}: {source}",
                    path.display()
                )))
            }
            Err(e) => Err(to_py(py, e)),
        }
    }

    #[getter]
    fn root(&self) -> String {
        self.reader.root().to_string_lossy().into_owned()
    }

    #[getter]
    fn commit_log_file_size(&self, py: Python<'_>) -> Option<u64> {
        py.detach(|| self.reader.commit_log_file_size())
    }

    #[getter]
    fn consume_queue_file_size(&self, py: Python<'_>) -> Option<u64> {
        py.detach(|| self.reader.consume_queue_file_size())
    }

    #[getter]
    fn min_physical_offset(&self, py: Python<'_>) -> i64 {
        py.detach(|| self.reader.min_physical_offset())
    }

    fn topics(&self, py: Python<'_>) -> Vec<String> {
        py.detach(|| self.reader.topics())
    }

    fn queues(&self, py: Python<'_>) -> Vec<(String, i32)> {
        py.detach(|| self.reader.queues())
    }

    fn max_offset(&self, py: Python<'_>, topic: &str, queue_id: i32) -> i64 {
        py.detach(|| self.reader.max_offset(topic, queue_id))
    }

    fn min_offset(&self, py: Python<'_>, topic: &str, queue_id: i32) -> i64 {
        py.detach(|| self.reader.min_offset(topic, queue_id))
    }

    #[pyo3(signature = (topic, queue_id, start, end, tag_codes=None))]
    fn read_records<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        queue_id: i32,
        start: i64,
        end: i64,
        tag_codes: Option<Vec<i64>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let codes: Option<Vec<i32>> = tag_codes.map(|c| c.into_iter().map(|v| v as i32).collect());
        let (data, range) = py.detach(|| {
            let mut out = Vec::new();
            let range =
                self.reader
                    .read_records(topic, queue_id, start, end, codes.as_deref(), &mut out);
            (out, range)
        });
        let buf = codec::columns::buffer(py, data)?;
        (buf, range.count, range.next_offset).into_pyobject(py)
    }

    fn record_at<'py>(&self, py: Python<'py>, phy_offset: i64) -> Option<Bound<'py, PyBytes>> {
        py.detach(|| self.reader.record_at(phy_offset))
            .map(|r| PyBytes::new(py, &r))
    }

    /// Drops the CommitLog maps (a later read maps again).
    fn close(&self) {
        self.reader.close()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) {
        self.reader.close()
    }
}

/// The mapped file size of one directory of store files (from the files' names and lengths); None when nothing tells.
#[pyfunction]
pub fn mapped_file_size(py: Python<'_>, dir: PathBuf) -> Option<u64> {
    py.detach(|| rmq_store::store_reader::mapped_file_size(&dir))
}
