//! What the consensus integration tests share: opening the stores the way
//! the node lays out its data directory (the log under `raft/`, the state
//! machine at the top), and a store builder for openraft's test suite.

#![allow(dead_code)]

pub mod no_peers;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::storage::{LogState, RaftLogStorage};
use openraft::testing::{StoreBuilder, Suite};
use openraft::{Config, RaftLogReader, SnapshotPolicy};
use regina_consensus::types::{RaftEntry, StorageError};
use regina_consensus::{LogStore, StateMachineStore, TypeConfig};
use regina_storage::{RealIo, WalOptions};
use tempfile::TempDir;

/// Small segments keep each fresh WAL cheap to zero-fill and let a modest
/// log span several segment files.
pub const SEGMENT_BYTES: u64 = 1 << 20;

pub fn wal_options(segment_bytes: u64) -> WalOptions {
    WalOptions { segment_bytes, ..WalOptions::default() }
}

pub fn log_dir(data: &Path) -> PathBuf {
    data.join("raft")
}

pub fn wal_dir(data: &Path) -> PathBuf {
    log_dir(data).join("wal")
}

pub fn open_log(data: &Path, segment_bytes: u64) -> LogStore {
    LogStore::open(&log_dir(data), wal_options(segment_bytes), Arc::new(RealIo)).expect("open the log store")
}

/// Opens the log of `groups` Raft groups sharing one WAL.
pub fn open_groups(data: &Path, groups: u16, segment_bytes: u64) -> Vec<LogStore> {
    LogStore::open_groups(&log_dir(data), groups, wal_options(segment_bytes), Arc::new(RealIo))
        .expect("open the log store's groups")
}

pub fn open_sm(data: &Path) -> StateMachineStore {
    StateMachineStore::open(data).expect("open the state machine")
}

/// Sequence numbers of the WAL segment files on disk, ascending.
pub fn wal_segments(data: &Path) -> Vec<u64> {
    let mut seqs: Vec<u64> = std::fs::read_dir(wal_dir(data))
        .expect("list the WAL directory")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".wal")?.parse().ok()
        })
        .collect();
    seqs.sort_unstable();
    seqs
}

/// Builds both stores in a fresh temporary directory, which is returned as
/// the guard so it outlives them.
pub struct TempStores {
    pub segment_bytes: u64,
}

impl Default for TempStores {
    fn default() -> Self {
        TempStores { segment_bytes: SEGMENT_BYTES }
    }
}

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore, TempDir> for TempStores {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachineStore), StorageError> {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let log = open_log(dir.path(), self.segment_bytes);
        let sm = open_sm(dir.path());
        Ok((dir, log, sm))
    }
}

/// Like [`TempStores`], but hands out group `group` of a log of `groups`
/// groups, after every other group has written the suite's ten entries and
/// vote: the group under test shares its WAL, and its segments, with
/// neighbours that hold entries.
pub struct TempGroupStores {
    pub groups: u16,
    pub group: u16,
    pub segment_bytes: u64,
}

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore, TempDir> for TempGroupStores {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachineStore), StorageError> {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let mut logs = open_groups(dir.path(), self.groups, self.segment_bytes);
        for other in logs.iter_mut().filter(|l| l.group() != self.group) {
            OurSuite::feed_10_logs_vote_self(other).await?;
        }
        let log = logs.swap_remove(usize::from(self.group));
        let sm = open_sm(dir.path());
        Ok((dir, log, sm))
    }
}

/// openraft's suite over our stores; its public cases and helpers (such as
/// `feed_10_logs_vote_self`) are the only way to append outside a running
/// Raft, since openraft builds the append callback internally.
pub type OurSuite = Suite<TypeConfig, LogStore, StateMachineStore, TempStores, TempDir>;

/// Everything a log store answers about its contents.
#[derive(Debug, PartialEq)]
pub struct LogView {
    pub state: LogState<TypeConfig>,
    pub entries: Vec<RaftEntry>,
    pub vote: Option<openraft::Vote<u64>>,
}

pub async fn view(log: &mut LogStore) -> LogView {
    LogView {
        state: log.get_log_state().await.expect("log state"),
        entries: log.try_get_log_entries(..).await.expect("read entries"),
        vote: log.read_vote().await.expect("read vote"),
    }
}

/// Raft settings for tests that snapshot only when they ask, with the log
/// behind a snapshot purged at once so that segment release is observable.
pub fn manual_snapshot_config() -> Arc<Config> {
    let config = Config {
        cluster_name: "regina-test".into(),
        heartbeat_interval: 50,
        election_timeout_min: 150,
        election_timeout_max: 300,
        snapshot_policy: SnapshotPolicy::Never,
        max_in_snapshot_log_to_keep: 0,
        purge_batch_size: 1,
        ..Default::default()
    };
    Arc::new(config.validate().expect("a valid Raft config"))
}
