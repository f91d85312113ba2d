//! rmq-store: Apache RocketMQ's CommitLog/ConsumeQueue store, byte-for-byte, in pure Rust (no Python).
//!
//! Owns: the module tree and the public API re-exports. The contract is `docs/CORE_API.md`.
//!
//! Format: see `format` (every magic number and layout lives there).
//!
//! Invariants: big-endian everywhere; files are RocketMQ's (a RocketMQ 4.9 broker can read them).
//!
//! Thread-safety: `MessageStore` is `Send + Sync`: one write mutex, lock-free readers.

pub mod build_index_service;
pub mod checkpoint;
pub mod commit_log;
pub mod config;
pub mod consume_queue;
pub mod error;
pub mod flush;
pub mod format;
pub mod get_message;
pub mod index_service;
pub mod mapped_file;
pub mod mapped_file_queue;
pub mod message_store;
mod put_message;
pub mod recovery;
pub mod replica;
pub mod store_reader;
pub mod warm_mapped_file_service;
mod warm_pacing;

pub use config::{FlushDiskType, StoreConfig};
pub use error::{Error, Result};
pub use format::message::Host;
pub use get_message::{GetMessageResult, GetMessageStatus, MessageFilter, TagCodeFilter};
pub use message_store::{
    BatchPutResult, MessageStore, OwnFields, PutContext, PutMessage, PutMessageStatus, PutResult,
    QueryMessageResult,
};
pub use recovery::RecoveryReport;
pub use replica::DispatchedQueue;
pub use store_reader::{ReadRange, StoreReader};

#[cfg(test)]
mod tests;

#[allow(dead_code)]
fn assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<MessageStore>();
}
