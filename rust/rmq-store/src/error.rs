//! The one error type of the store core.
//!
//! Owns: `Error` (every failure the engine reports) and `Result`.
//!
//! Format: none (in-memory only).
//!
//! Invariants:
//!   1. I/O failures always carry the path of the file involved, so the message names the file.
//!   2. `Corrupt.offset` is the global CommitLog offset (or the index in a decoded buffer) where the bad record starts.
//!   3. Non-fatal put outcomes (MESSAGE_ILLEGAL, PROPERTIES_SIZE_EXCEEDED, CREATE_MAPPED_FILE_FAILED, …) are
//!      `PutMessageStatus` values, never errors; errors are for misuse, a closed/locked store and unreadable data.
//!
//! Thread-safety: plain data, `Send + Sync`.

use std::fmt;
use std::io;
use std::path::PathBuf;

#[derive(Debug)]
pub enum Error {
    /// An OS call on `path` failed.
    Io { path: PathBuf, source: io::Error },
    /// A topic RocketMQ would refuse (empty, > 127 chars, chars outside `[A-Za-z0-9%|_-]`).
    IllegalTopic(String),
    /// Bytes that should be a record (or a store file) are not one.
    Corrupt { offset: i64, reason: String },
    /// The engine was closed.
    Closed,
    /// Another process (or engine) holds `<root>/lock`.
    Locked(PathBuf),
    /// A bad argument (negative queue id, unparsable ip, bad config value, …).
    InvalidArgument(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub fn corrupt(offset: i64, reason: impl Into<String>) -> Self {
        Error::Corrupt {
            offset,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "I/O error on {}: {}", path.display(), source),
            Error::IllegalTopic(topic) => write!(
                f,
                "illegal topic '{topic}': must be 1..=127 chars of [A-Za-z0-9%|_-]"
            ),
            Error::Corrupt { offset, reason } => {
                write!(f, "corrupt record at offset {offset}: {reason}")
            }
            Error::Closed => write!(f, "the message store is closed"),
            Error::Locked(path) => write!(
                f,
                "the store is locked by another process or engine: {}",
                path.display()
            ),
            Error::InvalidArgument(msg) => write!(f, "invalid argument: {msg}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
