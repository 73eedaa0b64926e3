//! The real `LogStore` of one Raft group under openraft, with what the
//! simulation needs around it: it tells the node's gate (shared by all
//! groups of the node, as their WAL writer is) about every request it hands
//! to the WAL, so that the writer's batches are what the simulator expects,
//! and when a truncation marker makes up a batch of its own it drives it
//! through the disk before returning (openraft does not wait for those, so
//! the simulator does, to keep the writer thread out of the runtime's way).
//! After a crash every call fails, as a dead machine's disk would.

use std::fmt::Debug;
use std::ops::RangeBounds;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader, StorageIOError};
use regina_consensus::types::{LogId, RaftEntry, StorageError, Vote};
use regina_consensus::{wal_record, LogStore, TypeConfig};
use regina_storage::wal::HEADER_LEN;

use crate::gate::{Gate, Sub};

pub struct SimLog {
    inner: LogStore,
    gate: Arc<Gate>,
    truncations: Arc<AtomicU64>,
}

impl SimLog {
    pub fn new(inner: LogStore, gate: Arc<Gate>, truncations: Arc<AtomicU64>) -> SimLog {
        SimLog { inner, gate, truncations }
    }

    fn dead(&self) -> Option<std::io::Error> {
        self.gate.crashed().then(|| std::io::Error::other("simulated crash: this node's disk is gone"))
    }
}

impl RaftLogReader<TypeConfig> for SimLog {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<RaftEntry>, StorageError> {
        self.inner.try_get_log_entries(range).await
    }
}

impl RaftLogStorage<TypeConfig> for SimLog {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        self.inner.get_log_state().await
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.inner.get_log_reader().await
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        if let Some(e) = self.dead() {
            return Err(StorageIOError::write_vote(&e).into());
        }
        self.inner.save_vote(vote).await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        self.inner.read_vote().await
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = RaftEntry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        if let Some(e) = self.dead() {
            return Err(StorageIOError::write_logs(&e).into());
        }
        let entries: Vec<RaftEntry> = entries.into_iter().collect();
        if entries.is_empty() {
            // Nothing for the writer: the store would only call back, and
            // from its thread; answer here instead.
            callback.log_io_completed(Ok(()));
            return Ok(());
        }
        self.gate.submit(Sub { append: true, bytes: 0 });
        let handed = self.inner.append(entries, callback).await;
        self.gate.handed();
        handed
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        if let Some(e) = self.dead() {
            return Err(StorageIOError::write_logs(&e).into());
        }
        let bytes = HEADER_LEN + wal_record::encode_truncate(self.inner.group(), log_id.index).len() as u64;
        self.gate.submit(Sub { append: false, bytes });
        self.inner.truncate(log_id).await?;
        if self.gate.handed() {
            self.gate.complete_markers();
        }
        self.truncations.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        if let Some(e) = self.dead() {
            return Err(StorageIOError::write_logs(&e).into());
        }
        self.inner.purge(log_id).await
    }
}
