//! One simulated machine: a data directory that outlives its processes, and
//! the process currently running on it, if any.
//!
//! Starting opens the real stores from the directory as the server lays
//! them out (`regina_node::raft_groups::open`): the log of every Raft group in
//! one shared WAL under `raft/` (`LogStore::open_groups`, over the node's one
//! simulated disk), group 0's state machine at the top, group `g`'s under
//! `groups/{g}`, and a real `Raft` per group. Before a group's Raft starts,
//! its recovered log is checked to hold only entries clients sent to that
//! group. Crashing kills the process mid-flight: the disk refuses every
//! further write, an append in flight fails, every group's Raft core stops,
//! and once everything holding the stores is gone the disk loses what no
//! fsync covered, of every group at once.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use openraft::Config;
use openraft::{EntryPayload, RaftLogReader};
use parking_lot::Mutex;
use regina_consensus::{LogStore, Raft, SharedState, StateMachineStore};
use regina_node::clock::{Clock, LeaderClock};
use regina_node::proposer::Proposer;
use regina_storage::WalOptions;
use regina_types::limits::PROPOSER_QUEUE_REQUESTS_MAX;
use tempfile::TempDir;
use tokio::time::sleep;

use crate::disk::{Loss, SimIo};
use crate::gate::Gate;
use crate::history::{History, Registry};
use crate::log::SimLog;
use crate::machine::SimSm;
use crate::network::{Net, Peer, SimNetwork};
use crate::rng::{mix, Rng};
use crate::settle::Settler;
use crate::NodeId;

/// Small WAL segments: cheap to preallocate, and a run crosses several.
pub const WAL_SEGMENT_BYTES: u64 = 16 << 10;

/// What every node shares.
pub struct Ctx {
    pub config: Arc<Config>,
    /// Virtual time from the run's epoch: what every node's leader clock
    /// reads (the server's `TokioClock`).
    pub clock: Arc<dyn Clock>,
    pub net: Arc<Net>,
    pub settler: Arc<Settler>,
    /// Raft groups per node.
    pub groups: u16,
    /// What each group applied, by group.
    pub history: Vec<Arc<Mutex<History>>>,
    /// Which group every client entry was sent to.
    pub registry: Arc<Mutex<Registry>>,
    /// A restart hands group 0's log to group 1's Raft and back (checker
    /// test only).
    pub swap_groups: bool,
    /// The disk acknowledges syncs it does not perform (checker test only).
    pub forget_syncs: bool,
    /// Conflicting log tails dropped, all nodes together.
    pub truncations: Arc<AtomicU64>,
    /// Seeds how long each node's disk holds a WAL batch.
    pub disk_seed: u64,
    /// WAL batches that covered appends of several groups with one fsync.
    pub joint_batches: Arc<AtomicU64>,
}

/// One Raft group on a running node.
pub struct Replica {
    pub raft: Raft,
    /// The server's own batching proposer over this replica's Raft, with
    /// the leader's clock on virtual time: client requests and the timer
    /// and sweep drivers go through it, as they do in the server.
    pub proposer: Arc<Proposer>,
    /// A handle on the group's log, to look into it.
    pub log: LogStore,
    pub shared: Arc<SharedState>,
}

pub struct Running {
    /// By group.
    pub groups: Vec<Replica>,
    pub io: Arc<SimIo>,
    /// Bodies' and snapshots' disk, ungated.
    pub files: Arc<SimIo>,
    /// The Raft meta files' (votes) disk, ungated and apart from the
    /// bodies': a file's identity is its inode, and a vote file's temp can
    /// reuse the inode of a deleted body segment whose writes are pending.
    pub votes: Arc<SimIo>,
    /// The node's one WAL writer's.
    pub gate: Arc<Gate>,
}

pub struct Node {
    pub id: NodeId,
    dir: TempDir,
    pub incarnation: u32,
    pub running: Option<Running>,
}

/// Prefer memory-backed space for the data directories when there is some:
/// the real metadata and snapshot fsyncs then cost nothing.
fn temp_root() -> Option<&'static Path> {
    let shm = Path::new("/dev/shm");
    shm.is_dir().then_some(shm)
}

impl Node {
    pub fn new(id: NodeId) -> std::io::Result<Node> {
        let prefix = format!("regina-sim-n{id}-");
        let mut b = tempfile::Builder::new();
        b.prefix(&prefix);
        let dir = match temp_root() {
            Some(root) => b.tempdir_in(root).or_else(|_| b.tempdir())?,
            None => b.tempdir()?,
        };
        Ok(Node { id, dir, incarnation: 0, running: None })
    }

    pub fn peer(&self, group: u16) -> Option<Peer> {
        let r = self.running.as_ref()?;
        let g = &r.groups[usize::from(group)];
        Some(Peer {
            raft: g.raft.clone(),
            shared: g.shared.clone(),
            gate: r.gate.clone(),
            proposer: Some(g.proposer.clone()),
        })
    }

    /// Group `group`'s Raft, if the node runs.
    pub fn raft(&self, group: u16) -> Option<Raft> {
        self.running.as_ref().map(|r| r.groups[usize::from(group)].raft.clone())
    }

    pub fn is_up(&self) -> bool {
        self.running.as_ref().is_some_and(|r| !r.gate.crashed())
    }

    /// Where group `group` keeps its state machine, as the server has it.
    fn state_dir(&self, group: u16) -> PathBuf {
        match group {
            0 => self.dir.path().to_path_buf(),
            g => self.dir.path().join("groups").join(g.to_string()),
        }
    }

    /// Opens the stores and starts a Raft per group on them.
    pub async fn start(&mut self, ctx: &Ctx) -> Result<(), String> {
        assert!(self.running.is_none(), "node {} is already running", self.id);
        self.incarnation += 1;
        let rng = Rng::new(mix(ctx.disk_seed, self.id << 16 | u64::from(self.incarnation)));
        let gate = Gate::new(self.id, ctx.joint_batches.clone(), rng);
        let io = SimIo::new(gate.clone(), ctx.forget_syncs);
        let files = SimIo::ungated(ctx.forget_syncs);
        let votes = SimIo::ungated(ctx.forget_syncs);
        // No batch cap (a run's batches are far below the real one): the
        // gate then knows that a batch is everything queued (see `gate`).
        let options =
            WalOptions { segment_bytes: WAL_SEGMENT_BYTES, max_batch_bytes: u64::MAX, ..WalOptions::default() };
        let raft_dir = self.dir.path().join("raft");
        let mut logs = LogStore::open_groups_with_meta_io(&raft_dir, ctx.groups, options, io.clone(), votes.clone())
            .map_err(|e| format!("node {} cannot open its log: {e}", self.id))?;
        if ctx.swap_groups && self.incarnation > 1 && logs.len() > 1 {
            logs.swap(0, 1);
        }
        ctx.settler.register(self.id, gate.clone());
        let mut groups = Vec::with_capacity(logs.len());
        for (g, log) in logs.into_iter().enumerate() {
            let group = g as u16;
            recovered_own(self.id, group, &log, &ctx.registry).await?;
            let dir = self.state_dir(group);
            std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            let sm = StateMachineStore::open_with_io(&dir, files.clone())
                .map_err(|e| format!("node {} cannot open group {group}'s state machine: {e}", self.id))?;
            let shared = sm.shared();
            let network = SimNetwork { from: self.id, group, net: ctx.net.clone(), shared: shared.clone() };
            let raft = Raft::new(
                self.id,
                ctx.config.clone(),
                network,
                SimLog::new(log.clone(), gate.clone(), ctx.truncations.clone()),
                SimSm::new(sm, self.id, group, ctx.history[g].clone(), ctx.registry.clone()),
            )
            .await
            .map_err(|e| format!("node {} cannot start group {group}'s Raft: {e}", self.id))?;
            ctx.net.attach(
                self.id,
                group,
                Peer { raft: raft.clone(), shared: shared.clone(), gate: gate.clone(), proposer: None },
            );
            let stamps = Arc::new(LeaderClock::new(ctx.clock.clone()));
            let proposer =
                Arc::new(Proposer::start(raft.clone(), log.clone(), &shared, stamps, PROPOSER_QUEUE_REQUESTS_MAX));
            groups.push(Replica { raft, proposer, log, shared });
        }
        self.running = Some(Running { groups, io, files, votes, gate });
        Ok(())
    }

    /// Kills the running process and lets the disk lose what no fsync
    /// covered, as `rng` decides.
    pub async fn crash(&mut self, ctx: &Ctx, rng: &mut Rng) -> Result<Loss, String> {
        let Some(run) = self.running.take() else {
            return Ok(Loss::default());
        };
        // From here every disk call fails. An append in flight fails when
        // the runtime next runs out of work (see `settle`), as every flush
        // completes: the core may sit in the run queue right now, and its
        // wake would then not be seen.
        run.gate.crash();
        ctx.net.detach(self.id);
        for g in &run.groups {
            let _ = g.raft.shutdown().await;
        }
        let Running { groups, io, files, votes, gate } = run;
        let shared: Vec<_> = groups.iter().map(|g| Arc::downgrade(&g.shared)).collect();
        drop(groups);
        // Tasks still holding the stores (replication waiting out a lost
        // message, a client) let go within a few RPC deadlines.
        let mut waited = Duration::ZERO;
        while Arc::strong_count(&io) > 1 || shared.iter().any(|s| s.strong_count() > 0) {
            if waited > Duration::from_secs(60) {
                return Err(format!(
                    "node {}: its stores were still held 60 s (virtual) after the crash ({} holders of the disk)",
                    self.id,
                    Arc::strong_count(&io) - 1
                ));
            }
            sleep(Duration::from_millis(5)).await;
            waited += Duration::from_millis(5);
        }
        ctx.settler.unregister(self.id);
        gate.close();
        let wal = io.crash(rng).map_err(|e| format!("node {}: undoing unsynced WAL writes failed: {e}", self.id))?;
        // Every holder of the bodies' disk (the state machines) is gone.
        let bodies =
            files.crash(rng).map_err(|e| format!("node {}: undoing unsynced body writes failed: {e}", self.id))?;
        let meta =
            votes.crash(rng).map_err(|e| format!("node {}: undoing unsynced vote writes failed: {e}", self.id))?;
        Ok(Loss {
            writes: wal.writes + bodies.writes + meta.writes,
            bytes_lost: wal.bytes_lost + bodies.bytes_lost + meta.bytes_lost,
            bytes_kept: wal.bytes_kept + bodies.bytes_kept + meta.bytes_kept,
            body_bytes_lost: bodies.bytes_lost,
        })
    }
}

/// WAL recovery keeps groups apart: every client entry in the log handed to
/// group `group` was sent to that group.
async fn recovered_own(node: NodeId, group: u16, log: &LogStore, registry: &Mutex<Registry>) -> Result<(), String> {
    let entries = log.clone().try_get_log_entries(..).await.map_err(|e| format!("node {node}: {e}"))?;
    for e in entries {
        let EntryPayload::Normal(proposed) = &e.payload else { continue };
        let entry = &proposed.entry;
        let sent = registry.lock().groups_of_entry(entry);
        if !sent.contains(&group) {
            return Err(format!(
                "node {node} recovered group {group}'s log with {} in it, an entry sent to group(s) {sent:?}: \
                 the WAL mixed groups up",
                e.log_id
            ));
        }
    }
    Ok(())
}
