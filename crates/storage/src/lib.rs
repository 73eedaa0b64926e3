//! Regina's disk formats. This crate stores opaque bytes; what they mean is
//! up to the crates above it.
//!
//! * [`wal`]: the write-ahead log. Records are appended by one writer
//!   thread that groups concurrent appends into a single fsync, into
//!   preallocated, zeroed segment files (`{seq:020}.wal`). Each record is
//!   framed as `[u32 len][u32 crc32c][payload]`, the checksum covering the
//!   length too. Recovery returns every record in order, cuts a torn tail,
//!   and refuses to start over real corruption. A write or fsync refused
//!   for lack of space is retried until space is back; any other failed
//!   write or fsync poisons the log for good.
//! * [`bodies`]: message bodies in `{segment:020}.body` files, addressed by
//!   a global byte position chosen by the caller. Written without fsync,
//!   because replaying the log rewrites them; segments the writes have
//!   left 512 MiB behind are fsynced later, and the [`durable_mark`] says
//!   how far, so a replay skips those. The newest are also kept in memory for reads
//!   (`recent_bodies`).
//! * [`snapshot`]: atomically replaced, checksummed snapshot files; holed
//!   ones ([`snapshot_holes`]) name records kept in [`chunk_packs`]
//!   instead of writing them again.
//! * [`io`]: the seam through which the log, the bodies and the snapshots
//!   write and fsync, so tests can inject failures ([`FaultyIo`]) and the
//!   simulation can lose unsynced writes.
//! * [`page_cache`]: dropping complete body segments and full WAL segments
//!   from the page cache in the background, so a sustained write does not
//!   grow it without end.
//! * [`space`]: retrying writes refused for lack of space until space is
//!   back ([`SpaceWait`]), instead of failing for good.
//! * [`error`]: [`WalError`], the log's error type.

pub mod bodies;
pub mod chunk_packs;
pub mod direct;
pub mod durable_mark;
pub mod error;
pub mod io;
pub mod page_cache;
mod recent_bodies;
pub mod snapshot;
pub mod snapshot_holes;
pub mod snapshot_stream;
pub mod space;
pub mod wal;

pub use bodies::{place, BodyStore};
pub use error::WalError;
pub use io::{FaultyIo, Io, RealIo};
pub use recent_bodies::RECENT_BODY_BYTES;
pub use snapshot::{Saved, SnapshotStore};
pub use snapshot_stream::SnapshotStream;
pub use space::{is_out_of_space, SpaceWait};
pub use wal::{AppendDone, RecordPos, RecordVisitor, Wal, WalOptions};
