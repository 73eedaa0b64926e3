//! One simulated machine: a data directory that outlives its processes, and
//! the process currently running on it, if any.
//!
//! Starting opens the real stores from the directory (the log under `raft/`,
//! the state machine at the top, as the server lays it out) and a real
//! `Raft` on them. Crashing kills the process mid-flight: the disk refuses
//! every further write, an append in flight fails, the Raft core stops, and
//! once everything holding the stores is gone the disk loses what no fsync
//! covered.

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use openraft::Config;
use parking_lot::Mutex;
use regina_consensus::{LogStore, Raft, SharedState, StateMachineStore};
use regina_storage::WalOptions;
use tempfile::TempDir;
use tokio::time::sleep;

use crate::disk::{Loss, SimIo};
use crate::gate::Gate;
use crate::history::History;
use crate::log::SimLog;
use crate::machine::SimSm;
use crate::network::{Net, Peer, SimNetwork};
use crate::rng::Rng;
use crate::settle::Settler;
use crate::NodeId;

/// Small WAL segments: cheap to preallocate, and a run crosses several.
pub const WAL_SEGMENT_BYTES: u64 = 16 << 10;

/// What every node shares.
pub struct Ctx {
    pub config: Arc<Config>,
    pub net: Arc<Net>,
    pub settler: Arc<Settler>,
    pub history: Arc<Mutex<History>>,
    /// The disk acknowledges syncs it does not perform (checker test only).
    pub forget_syncs: bool,
    /// Conflicting log tails dropped, all nodes together.
    pub truncations: Arc<AtomicU64>,
}

pub struct Running {
    pub raft: Raft,
    /// A handle on the log, to look into it.
    pub log: LogStore,
    pub shared: Arc<SharedState>,
    pub io: Arc<SimIo>,
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

    pub fn peer(&self) -> Option<Peer> {
        self.running.as_ref().map(|r| Peer { raft: r.raft.clone(), shared: r.shared.clone(), gate: r.gate.clone() })
    }

    pub fn is_up(&self) -> bool {
        self.running.as_ref().is_some_and(|r| !r.gate.crashed())
    }

    /// Opens the stores and starts a Raft on them.
    pub async fn start(&mut self, ctx: &Ctx) -> Result<(), String> {
        assert!(self.running.is_none(), "node {} is already running", self.id);
        self.incarnation += 1;
        let gate = Gate::new(self.id);
        let io = SimIo::new(gate.clone(), ctx.forget_syncs);
        let options = WalOptions { segment_bytes: WAL_SEGMENT_BYTES, ..WalOptions::default() };
        let log = LogStore::open(&self.dir.path().join("raft"), options, io.clone())
            .map_err(|e| format!("node {} cannot open its log: {e}", self.id))?;
        let sm = StateMachineStore::open(self.dir.path())
            .map_err(|e| format!("node {} cannot open its state machine: {e}", self.id))?;
        let shared = sm.shared();
        let network = SimNetwork { from: self.id, net: ctx.net.clone(), shared: shared.clone() };
        ctx.settler.register(self.id, gate.clone());
        let raft = Raft::new(
            self.id,
            ctx.config.clone(),
            network,
            SimLog::new(log.clone(), gate.clone(), ctx.truncations.clone()),
            SimSm::new(sm, self.id, ctx.history.clone()),
        )
        .await
        .map_err(|e| format!("node {} cannot start Raft: {e}", self.id))?;
        ctx.net.attach(self.id, Peer { raft: raft.clone(), shared: shared.clone(), gate: gate.clone() });
        self.running = Some(Running { raft, log, shared, io, gate });
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
        let _ = run.raft.shutdown().await;
        let Running { raft, log, shared: held, io, gate } = run;
        drop((raft, log));
        let shared = Arc::downgrade(&held);
        drop(held);
        // Tasks still holding the stores (replication waiting out a lost
        // message, a client) let go within a few RPC deadlines.
        let mut waited = Duration::ZERO;
        while Arc::strong_count(&io) > 1 || shared.strong_count() > 0 {
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
        io.crash(rng).map_err(|e| format!("node {}: undoing unsynced writes failed: {e}", self.id))
    }
}
