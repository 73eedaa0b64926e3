//! openraft's log storage over Regina's WAL.
//!
//! `append` hands the encoded entries to the WAL's single writer and returns
//! at once; the writer covers them, together with everything else pending,
//! with one fdatasync and only then tells openraft they are flushed. That
//! callback is what lets openraft commit, so no write is answered before the
//! disk has it. The vote and the purge point live in a small meta file that
//! is replaced atomically.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader, StorageIOError};
use parking_lot::Mutex;
use regina_storage::{Io, RecordPos, Wal, WalOptions};
use serde::{Deserialize, Serialize};

use crate::log_index::LogIndex;
use crate::meta_file::{Meta, MetaFile};
use crate::types::{LogId, RaftEntry, StorageError, TypeConfig, Vote};

/// One record of the WAL, as this crate writes it.
#[derive(Serialize, Deserialize)]
enum WalRecord {
    Entry(RaftEntry),
    /// Entries at and after `since` were dropped (a conflicting tail).
    Truncate {
        since: u64,
    },
}

struct Inner {
    wal: Wal,
    index: Mutex<LogIndex>,
    meta_file: MetaFile,
    meta: Mutex<Meta>,
}

/// The log store; cheap to clone (clones share one WAL).
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Inner>,
}

impl LogStore {
    /// Opens (or creates) the log under `dir`, recovering the WAL.
    pub fn open(dir: &Path, options: WalOptions, io: Arc<dyn Io>) -> Result<LogStore, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let meta_file = MetaFile::new(dir);
        let meta = meta_file.load().map_err(|e| e.to_string())?;
        let (wal, records) = Wal::open(&dir.join("wal"), options, io).map_err(|e| e.to_string())?;
        let mut index = LogIndex::default();
        if let Some(p) = meta.last_purged {
            index.purge(p);
        }
        for (pos, bytes) in records {
            let record: WalRecord =
                bincode::deserialize(&bytes).map_err(|e| format!("undecodable WAL record at {pos:?}: {e}"))?;
            match record {
                WalRecord::Entry(e) => {
                    if meta.last_purged.is_some_and(|p| e.log_id.index <= p.index) {
                        continue;
                    }
                    if e.log_id.index > index.end() && !index.locs.is_empty() {
                        return Err(format!("WAL has a gap: entry {} follows {}", e.log_id.index, index.end() - 1));
                    }
                    index.push(e.log_id, Some(pos), None);
                }
                WalRecord::Truncate { since } => index.truncate(since),
            }
        }
        let inner = Inner { wal, index: Mutex::new(index), meta_file, meta: Mutex::new(meta) };
        Ok(LogStore { inner: Arc::new(inner) })
    }

    /// Bytes appended to the WAL since it was opened.
    pub fn wal_bytes_written(&self) -> u64 {
        self.inner.wal.bytes_written()
    }

    /// Why the WAL refuses writes, if it does.
    pub fn poisoned(&self) -> Option<String> {
        self.inner.wal.poisoned()
    }

    fn read_entry(&self, index: u64) -> Result<Option<RaftEntry>, StorageError> {
        let (id, pos) = {
            let idx = self.inner.index.lock();
            if let Some(e) = idx.cached(index) {
                return Ok(Some(e.clone()));
            }
            match idx.get(index) {
                Some(x) => x,
                None => return Ok(None),
            }
        };
        let Some(pos) = pos else {
            return Err(
                StorageIOError::read_log_at_index(index, &std::io::Error::other("entry not yet written")).into()
            );
        };
        let bytes = self.inner.wal.read(pos).map_err(|e| StorageIOError::read_log_entry(id, &e))?;
        match bincode::deserialize(&bytes) {
            Ok(WalRecord::Entry(e)) if e.log_id == id => Ok(Some(e)),
            Ok(_) => Err(StorageIOError::read_log_entry(id, &std::io::Error::other("record is not that entry")).into()),
            Err(e) => Err(StorageIOError::read_log_entry(id, &e).into()),
        }
    }

    fn store_meta(&self, change: impl FnOnce(&mut Meta)) -> Result<(), std::io::Error> {
        let mut meta = self.inner.meta.lock();
        let mut next = meta.clone();
        change(&mut next);
        self.inner.meta_file.store(&next)?;
        *meta = next;
        Ok(())
    }
}

fn encode(record: &WalRecord) -> Vec<u8> {
    bincode::serialize(record).expect("WAL records always encode")
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<RaftEntry>, StorageError> {
        let (first, end) = {
            let idx = self.inner.index.lock();
            (idx.first, idx.end())
        };
        let start = match range.start_bound() {
            Bound::Included(s) => *s,
            Bound::Excluded(s) => s + 1,
            Bound::Unbounded => first,
        }
        .max(first);
        let stop = match range.end_bound() {
            Bound::Included(e) => e + 1,
            Bound::Excluded(e) => *e,
            Bound::Unbounded => end,
        }
        .min(end);
        let mut out = Vec::with_capacity(stop.saturating_sub(start) as usize);
        for i in start..stop {
            match self.read_entry(i)? {
                Some(e) => out.push(e),
                None => break,
            }
        }
        Ok(out)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let idx = self.inner.index.lock();
        Ok(LogState { last_purged_log_id: idx.last_purged, last_log_id: idx.last_log_id() })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let v = *vote;
        self.store_meta(|m| m.vote = Some(v)).map_err(|e| StorageIOError::write_vote(&e).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.inner.meta.lock().vote)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = RaftEntry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut records = Vec::new();
        let mut ids = Vec::new();
        {
            let mut idx = self.inner.index.lock();
            for e in entries {
                let record = encode(&WalRecord::Entry(e.clone()));
                let bytes = record.len();
                records.push(record);
                ids.push(e.log_id);
                idx.push(e.log_id, None, Some((e, bytes)));
            }
        }
        let inner = self.inner.clone();
        self.inner.wal.append(
            records,
            Box::new(move |res| match res {
                Ok(positions) => {
                    let mut idx = inner.index.lock();
                    for (id, pos) in ids.iter().zip(positions) {
                        idx.set_pos(id.index, *id, pos);
                    }
                    drop(idx);
                    callback.log_io_completed(Ok(()));
                }
                Err(e) => callback.log_io_completed(Err(std::io::Error::other(e.to_string()))),
            }),
        );
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.inner.index.lock().truncate(log_id.index);
        let rec = encode(&WalRecord::Truncate { since: log_id.index });
        // Ordered before any later append by the WAL's single queue; the next
        // group commit makes it durable.
        self.inner.wal.append(vec![rec], Box::new(|_| {}));
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.store_meta(|m| {
            if m.last_purged.is_none_or(|p| p.index < log_id.index) {
                m.last_purged = Some(log_id)
            }
        })
        .map_err(|e| StorageIOError::write_logs(&e))?;
        let release_before = {
            let mut idx = self.inner.index.lock();
            idx.purge(log_id);
            if idx.locs.is_empty() {
                // Nothing is kept, so every record in the segments before
                // the one being written is purged. Read under the index lock:
                // an entry appended after this lands in that segment or a
                // later one.
                Some(RecordPos { segment: self.inner.wal.current_segment(), offset: 0 })
            } else {
                idx.get(idx.first).and_then(|(_, pos)| pos)
            }
        };
        if let Some(pos) = release_before {
            self.inner.wal.release_segments_before(pos).map_err(|e| StorageIOError::write_logs(&e))?;
        }
        Ok(())
    }
}
