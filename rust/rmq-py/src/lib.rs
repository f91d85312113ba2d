//! `rmq_core._core`: thin PyO3 bindings over `rmq-store` (the only crate that uses pyo3).
//!
//! Owns: the module definition. `store` holds `StoreEngine`, `store_reader` the read-only `StoreReader`, `codec`
//! the module functions (one concern a module), `cpython` every use of CPython's internals (the native `Message`
//! class, slot access, GC untracking; feature `cpython-internals`, a plain-PyO3 fallback), `uniq_counter` the
//! default UNIQ_KEY generator's counter, `grpc_front` the native gRPC front (rmq-grpc), `remoting` the remoting frame codec's fast path, `errors` the one error
//! table. Bindings borrow arguments, release the GIL
//! (`py.detach`) around disk work, scans and waits, call the core, and convert results; no store logic lives here.

mod codec;
mod cpython;
mod errors;
mod grpc_front;
mod remoting;
mod send_request;
mod store;
mod store_reader;
mod uniq_counter;

/// Rust-side allocations of the extension (column buffers, gathered records, store results) come from mimalloc:
/// with glibc's malloc a multi-MiB buffer was a fresh mmap each time in a Python process, so a Spark task decoding
/// 8,192-row chunks spent more time in page faults than in the decode (one chunk of benches/bench_spark.py's store,
/// in-process: read_records 3.9 → 0.85 ms, decode_columns 3.8 → 1.0 ms). mimalloc v2: v3 returned the freed pages
/// sooner (decode_columns 3.5 ms). Python objects still come from Python's allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<store::StoreEngine>()?;
    m.add_class::<codec::columns::ColumnBuffer>()?;
    m.add_class::<store_reader::StoreReader>()?;
    m.add_class::<send_request::SendRequestParser>()?;
    m.add_class::<send_request::SendRequestColumns>()?;
    m.add_class::<send_request::SendAnswerSpec>()?;
    m.add_function(wrap_pyfunction!(store_reader::mapped_file_size, m)?)?;
    m.add_function(wrap_pyfunction!(codec::properties::tags_hash, m)?)?;
    m.add_function(wrap_pyfunction!(codec::properties::java_hash_map_order, m)?)?;
    m.add_function(wrap_pyfunction!(codec::properties::encode_properties, m)?)?;
    m.add_function(wrap_pyfunction!(codec::properties::decode_properties, m)?)?;
    m.add_function(wrap_pyfunction!(codec::message_ext::decode_messages, m)?)?;
    m.add_function(wrap_pyfunction!(
        codec::message_ext::last_store_timestamp,
        m
    )?)?;
    m.add_function(wrap_pyfunction!(codec::uniq_keys::assign_uniq_keys, m)?)?;
    m.add_function(wrap_pyfunction!(codec::batch::encode_batch_messages, m)?)?;
    m.add_class::<uniq_counter::UniqCounter>()?;
    m.add_class::<grpc_front::GrpcFront>()?;
    m.add("GRPC_CALL", grpc_front::GRPC_CALL)?;
    m.add("GRPC_MESSAGE", grpc_front::GRPC_MESSAGE)?;
    m.add("GRPC_HALF_CLOSE", grpc_front::GRPC_HALF_CLOSE)?;
    m.add("GRPC_CANCELLED", grpc_front::GRPC_CANCELLED)?;
    m.add_function(wrap_pyfunction!(uniq_counter::uniq_counter, m)?)?;
    m.add_function(wrap_pyfunction!(codec::message_fields::untrack_message, m)?)?;
    m.add_function(wrap_pyfunction!(cpython::message_class, m)?)?;
    m.add_function(wrap_pyfunction!(cpython::cpython_assumptions, m)?)?;
    m.add_function(wrap_pyfunction!(codec::hosts::create_offset_msg_id, m)?)?;
    m.add_function(wrap_pyfunction!(codec::batch::split_batch, m)?)?;
    m.add_function(wrap_pyfunction!(codec::columns::decode_columns, m)?)?;
    m.add_function(wrap_pyfunction!(codec::columns::gather_runs, m)?)?;
    m.add_function(wrap_pyfunction!(remoting::split_frames, m)?)?;
    m.add_function(wrap_pyfunction!(remoting::split_client_frames, m)?)?;
    m.add_function(wrap_pyfunction!(remoting::encode_frames, m)?)?;
    m.add_function(wrap_pyfunction!(remoting::encode_send_request, m)?)?;
    Ok(())
}
