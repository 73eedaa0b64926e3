//! openraft's log storage over Regina's WAL.
//!
//! `append` hands the encoded entries to the WAL's single writer and returns
//! at once; the writer covers them, together with everything else pending,
//! with one fdatasync and only then tells openraft they are flushed. That
//! callback is what lets openraft commit, so no write is answered before the
//! disk has it. The vote and the purge point live in a small meta file per
//! group that is replaced atomically; the last committed log id, a
//! restart's shortcut, in a file of its own ([`crate::committed_file`]).
//!
//! Several Raft groups can share one WAL ([`LogStore::open_groups`]); each
//! `LogStore` is then one group's log and sees only that group's records.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader, StorageIOError};
use regina_storage::{Io, RecordPos, WalOptions};

use crate::meta_file::Meta;
use crate::shared_wal::{Group, SharedWal};
use crate::types::{LogId, RaftEntry, StorageError, TypeConfig, Vote};
use crate::wal_record::{self, Record};

/// One Raft group's log store; cheap to clone (clones share one WAL, and
/// so do the stores of the other groups opened with it).
#[derive(Clone)]
pub struct LogStore {
    shared: Arc<SharedWal>,
    group: u16,
}

impl LogStore {
    /// Opens (or creates) a single-group log under `dir`, recovering the
    /// WAL: group 0 of [`LogStore::open_groups`].
    pub fn open(dir: &Path, options: WalOptions, io: Arc<dyn Io>) -> Result<LogStore, String> {
        let mut stores = Self::open_groups(dir, 1, options, io)?;
        Ok(stores.swap_remove(0))
    }

    /// Opens (or creates) the log of `groups` Raft groups under `dir`, all
    /// sharing one WAL in `dir/wal`; store `i` is group `i`. A log written
    /// by [`LogStore::open`] is group 0's. Fails if the directory holds a
    /// group numbered `groups` or above.
    pub fn open_groups(dir: &Path, groups: u16, options: WalOptions, io: Arc<dyn Io>) -> Result<Vec<LogStore>, String> {
        Self::open_groups_with_meta_io(dir, groups, options, io, Arc::new(regina_storage::RealIo))
    }

    /// [`LogStore::open_groups`], with the groups' meta files (votes) written
    /// through `meta_io` rather than straight to the disk.
    pub fn open_groups_with_meta_io(
        dir: &Path,
        groups: u16,
        options: WalOptions,
        io: Arc<dyn Io>,
        meta_io: Arc<dyn Io>,
    ) -> Result<Vec<LogStore>, String> {
        let shared = Arc::new(SharedWal::open(dir, groups, options, io, meta_io)?);
        Ok((0..groups).map(|group| LogStore { shared: Arc::clone(&shared), group }).collect())
    }

    /// The Raft group this store is the log of.
    pub fn group(&self) -> u16 {
        self.group
    }

    /// Blocks until the files of the WAL segments released so far (by any
    /// group's purge) are deleted; a purge only queues their deletion.
    pub fn wait_for_released_deletions(&self) {
        self.shared.wal.wait_for_released_deletions();
    }

    /// Bytes appended to the shared WAL since it was opened, by all groups.
    pub fn wal_bytes_written(&self) -> u64 {
        self.shared.wal.bytes_written()
    }

    /// Entries and record bytes this group appended since the WAL was
    /// opened.
    pub fn appended(&self) -> (u64, u64) {
        let [entries, bytes] = &self.this().appended;
        (entries.load(std::sync::atomic::Ordering::Relaxed), bytes.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Returns once this group has appended more than `appended_before`
    /// entries and every entry it appended is durable (or its write
    /// failed). The leader's proposer waits on it between entries, so that
    /// everything arriving while one entry is fsynced rides the next.
    pub async fn flushed_past(&self, appended_before: u64) {
        use std::sync::atomic::Ordering;
        let group = self.this();
        loop {
            let signal = group.flushed.signal.notified();
            tokio::pin!(signal);
            signal.as_mut().enable();
            let appended = group.appended[0].load(Ordering::Acquire);
            if appended > appended_before && group.flushed.entries.load(Ordering::Acquire) >= appended {
                return;
            }
            signal.await;
        }
    }

    /// Appends to the shared WAL whose completion has not returned yet (all
    /// groups together).
    pub fn unfinished_appends(&self) -> u64 {
        self.shared.wal.unfinished_appends()
    }

    /// Why the shared WAL refuses writes, if it does.
    pub fn poisoned(&self) -> Option<String> {
        self.shared.wal.poisoned()
    }

    /// Why the shared WAL's appends wait for space, if they do.
    pub fn waiting_for_space(&self) -> Option<String> {
        self.shared.wal.waiting_for_space()
    }

    fn this(&self) -> &Group {
        self.shared.group(self.group)
    }

    fn read_entry(&self, index: u64) -> Result<Option<RaftEntry>, StorageError> {
        let (id, pos) = {
            let idx = self.this().index.lock();
            if let Some(e) = idx.cached(index) {
                return Ok(Some(e.clone()));
            }
            match idx.get(index) {
                Some(x) => x,
                None => return Ok(None),
            }
        };
        if let Some(e) = self.this().read_ahead.take(index).filter(|e| e.log_id == id) {
            return Ok(Some(e));
        }
        let Some(pos) = pos else {
            return Err(
                StorageIOError::read_log_at_index(index, &std::io::Error::other("entry not yet written")).into()
            );
        };
        read_from_wal(&self.shared, self.group, id, pos).map(|(e, _)| Some(e))
    }

    /// While the guard lives, the first range read starts a thread that
    /// decodes the entries after it ahead of the reader
    /// ([`crate::read_ahead`]). A node holds it across `Raft::new`, which
    /// re-applies the entries after the snapshot in order.
    pub fn read_ahead(&self) -> ReadAhead {
        self.this().read_ahead.arm();
        ReadAhead(self.clone())
    }

    /// Starts the armed read-ahead at `from`, up to `end` (one past the
    /// last entry the index holds). The decoder holds the WAL only weakly:
    /// a log dropped while it runs stops it.
    fn start_read_ahead(&self, from: u64, end: u64) {
        let (shared, group) = (Arc::downgrade(&self.shared), self.group);
        self.this().read_ahead.start(from, end, move |index| {
            let shared = shared.upgrade()?;
            let (id, pos) = shared.group(group).index.lock().get(index)?;
            read_from_wal(&shared, group, id, pos?).ok()
        });
    }

    fn store_meta(&self, change: impl FnOnce(&mut Meta)) -> Result<(), std::io::Error> {
        let group = self.this();
        let mut meta = group.meta.lock();
        let mut next = meta.clone();
        change(&mut next);
        group.meta_file.store(&next)?;
        *meta = next;
        Ok(())
    }
}

/// Entry `id` from its WAL record at `pos`, with the record's size.
fn read_from_wal(
    shared: &SharedWal,
    group: u16,
    id: LogId,
    pos: RecordPos,
) -> Result<(RaftEntry, usize), StorageError> {
    let bytes = shared.wal.read(pos).map_err(|e| StorageIOError::read_log_entry(id, &e))?;
    match wal_record::decode(&bytes) {
        Ok((g, Record::Entry(e))) if g == group && e.log_id == id => Ok((e, bytes.len())),
        Ok(_) => Err(StorageIOError::read_log_entry(id, &std::io::Error::other("record is not that entry")).into()),
        Err(e) => Err(StorageIOError::read_log_entry(id, &e).into()),
    }
}

/// Reads ahead while it lives ([`LogStore::read_ahead`]); dropped, the
/// decoder stops and what it held is freed.
pub struct ReadAhead(LogStore);

impl Drop for ReadAhead {
    fn drop(&mut self) {
        self.0.this().read_ahead.disarm();
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<RaftEntry>, StorageError> {
        let (first, end) = {
            let idx = self.this().index.lock();
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
        self.start_read_ahead(start, end);
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
        let idx = self.this().index.lock();
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
        Ok(self.this().meta.lock().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        if let Some(committed) = committed {
            self.this().committed.save(committed);
        }
        Ok(())
    }

    /// The committed log id saved last, if the log holds its very entry
    /// ([`crate::committed_file`] says why that makes it safe).
    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        let latest = self.this().committed.latest();
        let index = self.this().index.lock();
        Ok(latest.filter(|c| index.get(c.index).is_some_and(|(id, _)| id == *c)))
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = RaftEntry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut records = Vec::new();
        let mut ids = Vec::new();
        let index = Arc::clone(&self.this().index);
        {
            let mut idx = index.lock();
            for e in entries {
                let record = wal_record::encode_entry(self.group, &e);
                let bytes = record.len();
                records.push(record);
                ids.push(e.log_id);
                idx.push(e.log_id, None, Some((e, bytes)));
            }
        }
        let flushed = Arc::clone(&self.this().flushed);
        let [entries, bytes] = &self.this().appended;
        entries.fetch_add(ids.len() as u64, std::sync::atomic::Ordering::AcqRel);
        bytes.fetch_add(records.iter().map(|r| r.len() as u64).sum(), std::sync::atomic::Ordering::Relaxed);
        self.shared.wal.append(
            records,
            Box::new(move |res| match res {
                Ok(positions) => {
                    let mut idx = index.lock();
                    for (id, pos) in ids.iter().zip(positions) {
                        idx.set_pos(id.index, *id, pos);
                    }
                    drop(idx);
                    callback.log_io_completed(Ok(()));
                    flushed.add(ids.len() as u64);
                }
                Err(e) => {
                    callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
                    flushed.add(ids.len() as u64);
                }
            }),
        );
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.this().index.lock().truncate(log_id.index);
        let rec = wal_record::encode_truncate(self.group, log_id.index);
        // Ordered before any later append by the WAL's single queue; the next
        // group commit makes it durable.
        self.shared.wal.append(vec![rec], Box::new(|_| {}));
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.store_meta(|m| {
            if m.last_purged.is_none_or(|p| p.index < log_id.index) {
                m.last_purged = Some(log_id)
            }
        })
        .map_err(|e| StorageIOError::write_logs(&e))?;
        let purged = self.this().index.lock().purge(log_id);
        crate::background_drop::drop_in_background(purged);
        // The segments behind this group's purge point may still hold
        // entries another group keeps; the shared WAL decides.
        self.shared.release_unneeded_segments();
        Ok(())
    }
}
