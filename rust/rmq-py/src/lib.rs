//! `rmq_core._core`: thin PyO3 bindings over `rmq-store` (the only crate that uses pyo3).
//!
//! Owns: the module definition. `store` holds `StoreEngine`, `codec` the module functions, `errors` the one
//! error table. Bindings borrow arguments, release the GIL (`py.detach`) around disk work, scans and waits,
//! call the core, and convert results; no store logic lives here.

mod codec;
mod errors;
mod store;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<store::StoreEngine>()?;
    m.add_class::<codec::ColumnBuffer>()?;
    m.add_function(wrap_pyfunction!(codec::tags_hash, m)?)?;
    m.add_function(wrap_pyfunction!(codec::encode_properties, m)?)?;
    m.add_function(wrap_pyfunction!(codec::decode_properties, m)?)?;
    m.add_function(wrap_pyfunction!(codec::decode_messages, m)?)?;
    m.add_function(wrap_pyfunction!(codec::create_offset_msg_id, m)?)?;
    m.add_function(wrap_pyfunction!(codec::decode_columns, m)?)?;
    Ok(())
}
