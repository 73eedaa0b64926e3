//! The last committed log id, remembered beside the log (openraft's
//! optional `save_committed` / `read_committed`).
//!
//! Why: with it, openraft's start applies the committed entries after the
//! snapshot first, and its search for the last membership change then
//! covers only the entries after them. Without it, that search read every
//! entry after the snapshot in full before any was applied, and the apply
//! read them all again: 1.7 s of a restart at 10,000,000 partitions.
//!
//! It is a shortcut, never a promise, so it is cheap:
//! * written only when the committed index has moved
//!   [`PERSIST_EVERY_ENTRIES`] past the value on disk, and never fsynced. A
//!   stale or lost value only leaves more entries to the search.
//! * read back only if the recovered log holds an entry with exactly that
//!   log id. By Raft's log matching, that entry and every one before it are
//!   then the entries that were committed; a value whose entry was lost to
//!   a crash, or replaced after a truncation, is ignored.
//!
//! Group 0's file is `raft-committed`; group `g > 0`'s is
//! `raft-committed-{g}`, beside the meta files.

use std::fs;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::types::LogId;

/// Entries the committed index moves between two writes of the file.
pub const PERSIST_EVERY_ENTRIES: u64 = 256;

const NAME: &str = "raft-committed";

pub struct CommittedFile {
    path: PathBuf,
    /// The newest value saved (in memory), and the index last written.
    state: Mutex<(Option<LogId>, Option<u64>)>,
}

impl CommittedFile {
    /// Group `group`'s file in `dir`, with the value it holds (not yet
    /// checked against the log: see [`CommittedFile::latest`]).
    pub fn open(dir: &Path, group: u16) -> CommittedFile {
        let name = if group == 0 { NAME.to_string() } else { format!("{NAME}-{group}") };
        let path = dir.join(name);
        let stored = read(&path);
        CommittedFile { path, state: Mutex::new((stored, stored.map(|id| id.index))) }
    }

    /// The newest committed log id saved, stored or not.
    pub fn latest(&self) -> Option<LogId> {
        self.state.lock().0
    }

    /// Notes `committed`, writing it to the file when it has moved far
    /// enough past the value there. A failed write is only logged: the
    /// value is a shortcut, and the next write tries again.
    pub fn save(&self, committed: LogId) {
        let mut state = self.state.lock();
        state.0 = Some(committed);
        if state.1.is_some_and(|written| committed.index < written.saturating_add(PERSIST_EVERY_ENTRIES)) {
            return;
        }
        state.1 = Some(committed.index);
        if let Err(e) = write(&self.path, committed) {
            tracing::warn!(file = %self.path.display(), error = %e, "cannot remember the committed log id");
        }
    }
}

/// `crc32c(body) | body`, the body bincode's encoding of the log id.
fn write(path: &Path, committed: LogId) -> std::io::Result<()> {
    let body = bincode::serialize(&committed).map_err(std::io::Error::other)?;
    let mut bytes = crc32c::crc32c(&body).to_le_bytes().to_vec();
    bytes.extend_from_slice(&body);
    fs::write(path, bytes)
}

/// The stored value; `None` if there is none or it does not read whole
/// (a write torn by a crash).
fn read(path: &Path) -> Option<LogId> {
    let bytes = fs::read(path).ok()?;
    let (crc, body) = bytes.split_at_checked(4)?;
    (u32::from_le_bytes(crc.try_into().ok()?) == crc32c::crc32c(body)).then_some(())?;
    bincode::deserialize(body).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    fn id(term: u64, index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(term, 1), index)
    }

    #[test]
    fn written_every_so_many_entries_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let file = CommittedFile::open(dir.path(), 0);
        assert_eq!(file.latest(), None);
        file.save(id(1, 3));
        assert_eq!(CommittedFile::open(dir.path(), 0).latest(), Some(id(1, 3)), "the first value is written");
        file.save(id(1, 3 + PERSIST_EVERY_ENTRIES - 1));
        assert_eq!(file.latest(), Some(id(1, 3 + PERSIST_EVERY_ENTRIES - 1)));
        assert_eq!(CommittedFile::open(dir.path(), 0).latest(), Some(id(1, 3)), "too close to be written");
        file.save(id(2, 3 + PERSIST_EVERY_ENTRIES));
        assert_eq!(CommittedFile::open(dir.path(), 0).latest(), Some(id(2, 3 + PERSIST_EVERY_ENTRIES)));
        assert_eq!(CommittedFile::open(dir.path(), 5).latest(), None, "each group has its own");
    }

    #[test]
    fn a_torn_or_foreign_file_reads_as_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = CommittedFile::open(dir.path(), 2);
        file.save(id(4, 9));
        let path = dir.path().join("raft-committed-2");
        let mut bytes = fs::read(&path).unwrap();
        for cut in 0..bytes.len() {
            fs::write(&path, &bytes[..cut]).unwrap();
            assert_eq!(CommittedFile::open(dir.path(), 2).latest(), None, "cut at {cut}");
        }
        bytes[6] ^= 1;
        fs::write(&path, &bytes).unwrap();
        assert_eq!(CommittedFile::open(dir.path(), 2).latest(), None);
    }
}
