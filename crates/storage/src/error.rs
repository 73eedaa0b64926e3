//! Errors of the write-ahead log.
//!
//! Body segments and snapshot files report plain `std::io::Error`s (with the
//! path folded into the message): their callers only ever propagate them.
//! The log needs a richer type because callers must tell a poisoned log
//! (stop serving) from corruption found at recovery (refuse to start) from a
//! caller mistake (record too large).

use std::io;

/// What went wrong in the write-ahead log.
#[derive(Debug, thiserror::Error)]
pub enum WalError {
    /// An I/O call failed outside the append path (open, recovery, read,
    /// segment release). `context` names the operation and the file.
    #[error("wal i/o error while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },

    /// Recovery found a damaged record that is followed by valid records in
    /// a later segment, so cutting the log there would silently drop data
    /// that was acknowledged. Also returned by `Wal::read` for a record
    /// whose checksum no longer matches.
    #[error("wal segment {segment} is corrupt at offset {offset}: {reason}")]
    Corrupt { segment: u64, offset: u64, reason: String },

    /// A write or fsync failed earlier. After a failed fsync the kernel may
    /// have dropped the dirty pages, so the log can no longer promise what is
    /// on disk; it refuses all further appends with the original error text.
    #[error("wal is poisoned by an earlier write failure and accepts no more appends: {0}")]
    Poisoned(String),

    /// A record exceeds `WalOptions::max_record_bytes`.
    #[error("wal record of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge { len: u64, max: u64 },

    /// `Wal::read` was given a position that holds no record.
    #[error("no wal record at segment {segment} offset {offset}: {reason}")]
    NoRecord { segment: u64, offset: u64, reason: String },

    /// The options passed to `Wal::open` cannot work.
    #[error("invalid wal options: {0}")]
    InvalidOptions(String),

    /// The caller of `Wal::open_visiting` refused a recovered record; the
    /// text is the caller's own.
    #[error("{0}")]
    Refused(String),

    /// The log's writer thread is gone (the log is being dropped).
    #[error("wal is closed")]
    Closed,
}

impl WalError {
    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        WalError::Io { context: context.into(), source }
    }
}

/// Wraps an I/O error with the operation and path it came from, keeping the
/// kind so callers can still match on `NotFound` and friends.
pub(crate) fn io_context(context: impl std::fmt::Display, err: io::Error) -> io::Error {
    io::Error::new(err.kind(), format!("{context}: {err}"))
}
