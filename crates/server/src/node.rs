//! The node: opens the log and the state machine, runs the Raft group, and
//! turns requests into log entries stamped with the leader's time.
//!
//! A single node is a one-voter Raft group. On first start it initialises
//! the group with itself as the only voter; on later starts openraft elects
//! it again from its own vote and log.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use openraft::{BasicNode, Config as RaftConfig, SnapshotPolicy};
use regina_consensus::network::NoPeers;
use regina_consensus::{LogStore, Raft, SharedState, StateMachineStore};
use regina_state::{Command, Outcome};
use regina_storage::{RealIo, WalOptions};

pub use crate::proposer::ProposeError;
use crate::proposer::{LeaderClock, Proposer};

pub const NODE_ID: u64 = 1;
/// Entries between snapshots (openraft's own trigger).
const SNAPSHOT_EVERY_ENTRIES: u64 = 20_000;
/// WAL bytes that also trigger a snapshot, so large payloads do not let the
/// log grow unbounded between entry-count triggers.
const SNAPSHOT_EVERY_WAL_BYTES: u64 = 256 * 1024 * 1024;
/// How often the leader checks for due timers.
const TIMER_CHECK: Duration = Duration::from_millis(50);
/// How often the leader proposes a retention sweep.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// How a node opens its data directory.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// Key sealing payloads of encrypted queues; default `<data>/encryption.key`.
    pub encryption_key_file: Option<std::path::PathBuf>,
    /// Whether group commits wait for fdatasync (off only for measurements).
    pub fsync: bool,
}

impl Default for NodeOptions {
    fn default() -> Self {
        NodeOptions { encryption_key_file: None, fsync: true }
    }
}

pub struct Node {
    pub raft: Raft,
    pub shared: Arc<SharedState>,
    pub log: LogStore,
    /// Ephemeral queues: this node's memory only, never in the log.
    pub ephemeral: crate::ephemeral::Store,
    clock: Arc<LeaderClock>,
    proposer: Proposer,
    /// Raised once when the node starts to stop: parked long polls answer
    /// at once and background chores end.
    stopping: tokio::sync::watch::Sender<bool>,
    /// Seals payloads of queues with `encryptionEnabled`.
    pub sealer: crate::sealing::Sealer,
}

impl Node {
    pub async fn open(data_dir: &Path, http_addr: String, options: &NodeOptions) -> Result<Arc<Node>, String> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| format!("cannot create data directory {}: {e}", data_dir.display()))?;
        let wal = WalOptions { fsync: options.fsync, ..WalOptions::default() };
        let log = LogStore::open(&data_dir.join("raft"), wal, Arc::new(RealIo))?;
        let sm = StateMachineStore::open(data_dir)?;
        let shared = sm.shared();
        let config = RaftConfig {
            cluster_name: "regina".into(),
            heartbeat_interval: 100,
            election_timeout_min: 200,
            election_timeout_max: 400,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(SNAPSHOT_EVERY_ENTRIES),
            max_in_snapshot_log_to_keep: 1_000,
            max_payload_entries: 1_000,
            ..Default::default()
        };
        let config = Arc::new(config.validate().map_err(|e| e.to_string())?);
        let raft = Raft::new(NODE_ID, config, NoPeers, log.clone(), sm).await.map_err(|e| e.to_string())?;
        if !raft.is_initialized().await.map_err(|e| e.to_string())? {
            let members = BTreeMap::from([(NODE_ID, BasicNode { addr: http_addr })]);
            raft.initialize(members).await.map_err(|e| format!("cannot initialise the Raft group: {e}"))?;
        }
        let (stopping, _) = tokio::sync::watch::channel(false);
        let key_path = options.encryption_key_file.clone().unwrap_or_else(|| data_dir.join("encryption.key"));
        let sealer = crate::sealing::Sealer::load_or_create(&key_path)?;
        let ephemeral = crate::ephemeral::Store::new();
        let clock = Arc::new(LeaderClock::default());
        let proposer = Proposer::start(raft.clone(), log.clone(), clock.clone());
        let node = Arc::new(Node { raft, shared, log, ephemeral, clock, proposer, stopping, sealer });
        node.wait_for_leader(Duration::from_secs(10)).await?;
        Ok(node)
    }

    async fn wait_for_leader(&self, within: Duration) -> Result<(), String> {
        let mut m = self.raft.metrics();
        let res = tokio::time::timeout(within, async {
            loop {
                if m.borrow().current_leader == Some(NODE_ID) {
                    return;
                }
                if m.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        res.map_err(|_| "no leader elected within 10 s".to_string())?;
        // Apply everything the log already holds before serving, so the first
        // read sees every write acknowledged before the restart.
        self.propose(Command::Noop).await.map_err(|e| e.to_string())?;
        Ok(())
    }

    /// The leader's clock for a new entry.
    pub fn stamp(&self) -> u64 {
        self.clock.stamp()
    }

    /// Appends a command to the log and answers once it is durable and
    /// applied (batched with whatever else is being proposed).
    pub async fn propose(&self, command: Command) -> Result<Outcome, ProposeError> {
        self.proposer.propose(command).await
    }

    /// Starts stopping: long polls answer now, chores end.
    pub fn begin_stop(&self) {
        self.stopping.send_replace(true);
    }

    /// Resolves once the node starts stopping.
    pub async fn stopped(&self) {
        let mut rx = self.stopping.subscribe();
        let _ = rx.wait_for(|s| *s).await;
    }

    /// Fires due timers: every [`TIMER_CHECK`] the leader looks at the
    /// earliest due time and, when it has passed, proposes one entry that
    /// fires everything due at that entry's time.
    pub fn spawn_timer_driver(self: &Arc<Self>) {
        let node = self.clone();
        let mut stop = self.stopping.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(TIMER_CHECK) => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
                let due = node.shared.machine.read().state.timers.next_due_ms();
                if due.is_some_and(|at| at <= node.stamp()) {
                    if let Err(e) = node.propose(Command::FireTimers).await {
                        tracing::warn!("firing timers: {e}");
                    }
                }
            }
        });
    }

    /// The leader's chores: retention sweeps and snapshots by log volume.
    pub fn spawn_background(self: &Arc<Self>) {
        let node = self.clone();
        let mut stop = self.stopping.subscribe();
        tokio::spawn(async move {
            let mut last_snapshot_bytes = 0u64;
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(SWEEP_INTERVAL) => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
                if node.needs_sweep() {
                    let _ = node.propose(Command::Sweep).await;
                }
                let written = node.log.wal_bytes_written();
                if written - last_snapshot_bytes > SNAPSHOT_EVERY_WAL_BYTES {
                    last_snapshot_bytes = written;
                    let _ = node.raft.trigger().snapshot().await;
                }
            }
        });
    }

    fn needs_sweep(&self) -> bool {
        let now = self.stamp();
        let m = self.shared.machine.read();
        // Expired KV rows and lapsed lock permits are already invisible;
        // the sweep only gives their memory back.
        m.state.kv.first_expiry().is_some_and(|e| e <= now)
            || m.state
                .queues
                .values()
                .any(|q| q.options.retention_seconds > 0 || q.options.completed_retention_seconds > 0)
    }

    pub async fn shutdown(&self) {
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!("raft shutdown: {e}");
        }
    }
}
