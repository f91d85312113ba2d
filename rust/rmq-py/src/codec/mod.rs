//! Module functions of `rmq_core._core` (contract §0) and the conversions the engine bindings share, one concern a
//! module: `properties` (the properties dict ⇄ bytes, the tags hash, Java's HashMap order), `uniq_keys` (UNIQ_KEY
//! ids), `batch` (batch bodies), `hosts` (`(ip, port)` ⇄ `Host`, offset message ids), `message_fields` (what a put
//! reads from a `Message`), `message_ext` (records → `MessageExt`), `columns` (`decode_columns`, `gather_runs`,
//! `ColumnBuffer`). Each converts its arguments, calls `rmq_store` and converts the result; the decisions where the
//! contract is silent are in each module's header (the Python twin matches them).

pub mod batch;
pub mod columns;
pub mod hosts;
pub mod message_ext;
pub mod message_fields;
pub mod properties;
pub mod uniq_keys;
