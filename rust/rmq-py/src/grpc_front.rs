//! `GrpcFront`: the bindings of `rmq_grpc::Front` (HTTP/2 + gRPC framing of one port on the extension's own
//! threads: rust/rmq-grpc/src/lib.rs). Converts events to the tuples
//! `drain()` returns, `(kind, call_id, payload)` with kinds `GRPC_CALL`, `GRPC_MESSAGE`, `GRPC_HALF_CLOSE`,
//! `GRPC_CANCELLED`; releases the GIL around bind and close. With `tls_cert_pem` / `tls_key_pem` the port serves
//! TLS beside plaintext (the first byte picks: rust/rmq-grpc/src/tls.rs).
//!
//! Thread-safety: a frozen class over a `Sync` front; any thread may drain or answer.

use std::collections::HashSet;
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use rmq_grpc::{Event, Front, FrontConfig, MetaValue, TlsConfig, TlsError};

pub const GRPC_CALL: u8 = 0;
pub const GRPC_MESSAGE: u8 = 1;
pub const GRPC_HALF_CLOSE: u8 = 2;
pub const GRPC_CANCELLED: u8 = 3;

#[pyclass(module = "rmq_core._core", frozen)]
pub struct GrpcFront {
    front: Front,
}

#[pymethods]
impl GrpcFront {
    #[new]
    #[pyo3(signature = (host, port, *, client_streaming, max_concurrent_streams = 256,
                        max_message_bytes = 8388608, worker_threads = 1, tls_cert_pem = None,
                        tls_key_pem = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        host: &str,
        port: u16,
        client_streaming: Vec<String>,
        max_concurrent_streams: u32,
        max_message_bytes: usize,
        worker_threads: usize,
        tls_cert_pem: Option<&[u8]>,
        tls_key_pem: Option<&[u8]>,
    ) -> PyResult<Self> {
        if max_concurrent_streams == 0 || max_message_bytes == 0 || worker_threads == 0 {
            return Err(PyValueError::new_err(
                "max_concurrent_streams, max_message_bytes and worker_threads must be positive",
            ));
        }
        let tls = match (tls_cert_pem, tls_key_pem) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some(TlsConfig::from_pem(cert, key).map_err(|e| {
                PyValueError::new_err(match e {
                    TlsError::Cert(why) => format!("tls_cert_pem: {why}"),
                    TlsError::Key(why) => format!("tls_key_pem: {why}"),
                    TlsError::Mismatch => {
                        "tls_key_pem is not the private key of tls_cert_pem".to_owned()
                    }
                })
            })?),
            _ => {
                return Err(PyValueError::new_err(
                    "TLS needs both tls_cert_pem and tls_key_pem",
                ))
            }
        };
        let config = FrontConfig {
            client_streaming: client_streaming.into_iter().collect::<HashSet<_>>(),
            max_concurrent_streams,
            max_message_bytes,
            worker_threads,
            handshake_timeout: rmq_grpc::HANDSHAKE_TIMEOUT,
            tls,
        };
        match py.detach(|| Front::bind(host, port, config)) {
            Ok(front) => Ok(GrpcFront { front }),
            Err(e) => {
                let text = format!("gRPC port {host}:{port} could not be bound: {e}");
                Err(match e.raw_os_error() {
                    Some(errno) => PyOSError::new_err((errno, text)),
                    None => PyOSError::new_err(text),
                })
            }
        }
    }

    #[getter]
    fn port(&self) -> u16 {
        self.front.port()
    }

    fn fileno(&self) -> i64 {
        self.front.event_fd()
    }

    #[pyo3(signature = (max_events = 1024))]
    fn drain<'py>(&self, py: Python<'py>, max_events: usize) -> PyResult<Bound<'py, PyList>> {
        if max_events == 0 {
            return Err(PyValueError::new_err("max_events must be positive"));
        }
        let events = self.front.drain(max_events);
        let out = PyList::empty(py);
        for event in events {
            let item = match event {
                Event::Call(id, start) => {
                    let metadata = PyList::empty(py);
                    for (key, value) in start.metadata {
                        let value = match value {
                            MetaValue::Text(s) => s.into_pyobject(py)?.into_any(),
                            MetaValue::Binary(b) => PyBytes::new(py, &b).into_any(),
                        };
                        metadata.append((key, value))?;
                    }
                    let request = start.request.map(|r| PyBytes::new(py, &r));
                    let payload = (start.method, metadata, start.peer, start.timeout_s, request);
                    (GRPC_CALL, id, payload).into_pyobject(py)?
                }
                Event::Message(id, data) => {
                    (GRPC_MESSAGE, id, PyBytes::new(py, &data)).into_pyobject(py)?
                }
                Event::HalfClose(id) => (GRPC_HALF_CLOSE, id, py.None()).into_pyobject(py)?,
                Event::Cancelled(id) => (GRPC_CANCELLED, id, py.None()).into_pyobject(py)?,
            };
            out.append::<Bound<'py, PyTuple>>(item)?;
        }
        Ok(out)
    }

    fn send_message(&self, call_id: u64, data: &[u8]) -> bool {
        self.front.send_message(call_id, data)
    }

    #[pyo3(signature = (call_id, code, message = "", data = None))]
    fn finish(&self, call_id: u64, code: u32, message: &str, data: Option<&[u8]>) -> bool {
        self.front.finish(call_id, code, message, data)
    }

    /// Calls delivered and neither finished nor cancelled (a leak check for tests).
    fn live_calls(&self) -> usize {
        self.front.live_calls()
    }

    #[pyo3(signature = (grace_s = 1.0))]
    fn close(&self, py: Python<'_>, grace_s: f64) -> PyResult<()> {
        if !grace_s.is_finite() || grace_s < 0.0 {
            return Err(PyValueError::new_err(
                "grace_s must be a non-negative number of seconds",
            ));
        }
        let grace = Duration::from_secs_f64(grace_s.min(3600.0));
        py.detach(|| self.front.close(grace));
        Ok(())
    }
}
