//! The node: opens the log and the state machine, runs the Raft group, and
//! turns requests into log entries stamped with the leader's time.
//!
//! A single node is a one-voter Raft group. On first start it initialises
//! the group with itself as the only voter; on later starts openraft elects
//! it again from its own vote and log. A cluster is the same group with
//! more voters: given `peers`, the node with the lowest id initialises it
//! with all of them on first start (see [`crate::cluster`] for leadership,
//! reads and membership changes).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use openraft::{BasicNode, Config as RaftConfig, SnapshotPolicy};
use parking_lot::{MappedRwLockReadGuard, RwLockReadGuard};
use regina_consensus::network::HttpNetwork;
use regina_consensus::{LogStore, Raft, SharedState, StateMachineStore};
use regina_state::{Command, Outcome, State};

use crate::clock::LeaderClock;
pub use crate::proposer::ProposeError;
use crate::proposer::Proposer;

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
    /// This node's id in its Raft group.
    pub node_id: u64,
    /// The address peers reach this node's Raft routes at; `None`: the
    /// HTTP address.
    pub raft_addr: Option<String>,
    /// The voters of a new cluster (id, Raft address), this node included;
    /// empty for a node that starts alone.
    pub peers: Vec<(u64, String)>,
    /// Whether `x-queen-tenant` selects a tenant (off: every request acts
    /// for the default tenant).
    pub tenancy: bool,
    /// Raft groups this node runs (see `crate::groups`).
    pub raft_groups: u16,
    /// Tenants the operator placed in a given group instead of the hashed
    /// one (Queen's `QUEEN_TENANT_GROUPS`); the same on every node.
    pub tenant_groups: BTreeMap<String, u16>,
    /// Sent with every request to a peer's Raft address, and required on
    /// this node's own (see `crate::internal`).
    pub cluster_token: Option<String>,
    /// Whether this node listens on a Raft address apart from its HTTP
    /// port: without one it serves no internal routes and cannot have peers.
    pub internal_port: bool,
    /// Bearer-token checks; `None`: authentication is off.
    pub auth: Option<Arc<crate::auth::Auth>>,
    /// TLS on both doors; with it, peers are reached over `https` and
    /// trusted through `tls_ca` (PEM).
    pub tls: Option<Arc<crate::tls::Tls>>,
    pub tls_ca: Option<Vec<u8>>,
    /// Requests that may wait for the proposer at once, per Raft group.
    pub max_queued_proposals: usize,
    /// Pops that may wait (long-poll) at once on the node.
    pub max_long_polls: usize,
    /// Requests per second each caller may send (0: no limit); see
    /// `crate::throttle`.
    pub rate_limit: u32,
    /// Requests a caller may send at once beyond its rate (default: one
    /// second's worth).
    pub rate_burst: Option<u32>,
    /// Where the leader's stamps, minted ids and reads take their time
    /// (the wall clock; tests give a `TokioClock` on a paused runtime).
    pub clock: Arc<dyn crate::clock::Clock>,
}

impl Default for NodeOptions {
    fn default() -> Self {
        NodeOptions {
            encryption_key_file: None,
            fsync: true,
            node_id: 1,
            raft_addr: None,
            peers: Vec::new(),
            tenancy: false,
            raft_groups: 1,
            tenant_groups: BTreeMap::new(),
            cluster_token: None,
            internal_port: false,
            auth: None,
            tls: None,
            tls_ca: None,
            max_queued_proposals: regina_types::limits::PROPOSER_QUEUE_REQUESTS_MAX,
            max_long_polls: regina_types::limits::LONG_POLLS_MAX,
            rate_limit: 0,
            rate_burst: None,
            clock: crate::clock::system(),
        }
    }
}

pub struct Node {
    /// This node's id in its Raft group.
    pub id: u64,
    pub raft: Raft,
    pub shared: Arc<SharedState>,
    pub log: LogStore,
    /// Ephemeral queues of the default tenant: this node's memory only,
    /// never in the log. Other tenants' are in `tenant_ephemeral`.
    ephemeral: Arc<crate::ephemeral::Store>,
    tenant_ephemeral: parking_lot::Mutex<std::collections::HashMap<String, Arc<crate::ephemeral::Store>>>,
    clock: Arc<LeaderClock>,
    proposer: Proposer,
    /// Raised once when the node starts to stop: parked long polls answer
    /// at once and background chores end.
    stopping: tokio::sync::watch::Sender<bool>,
    /// Seals payloads of queues with `encryptionEnabled`.
    pub sealer: Arc<crate::sealing::Sealer>,
    /// This replica's Raft group among the node's groups (0 when alone).
    pub group: u16,
    /// Every group of this node, this one included (set once all are open).
    pub groups: std::sync::OnceLock<Vec<std::sync::Weak<Node>>>,
    /// Carries requests a follower forwards to the leader (to its Raft
    /// address, with the cluster token).
    pub forwarder: reqwest::Client,
    /// A hand-over of this group's leadership in progress (`crate::balance`).
    pub handoff: crate::balance::Handoff,
    /// The group's write load while this node leads it.
    pub load: crate::balance::LoadMeter,
    /// Tenants the operator placed in this group (`--tenant-groups`).
    pub pinned_tenants: Vec<String>,
    /// Whether peers can reach this node's internal routes (see
    /// [`NodeOptions::internal_port`]).
    pub internal_port: bool,
    /// Pops that may long-poll at once on this node.
    pub max_long_polls: usize,
    /// How peers are reached: `http`, or `https` with TLS between nodes.
    pub peer_scheme: &'static str,
    /// Where this node serves clients (`HOST:PORT`): what a leader names in
    /// its hint to clients.
    pub client_addr: String,
}

impl Node {
    /// Opens group `group`'s replica: its state machine under `state_dir`,
    /// its log `log` (one of the node's shared WAL).
    pub async fn open_group(
        state_dir: &Path,
        group: u16,
        log: LogStore,
        sealer: Arc<crate::sealing::Sealer>,
        http_addr: String,
        options: &NodeOptions,
    ) -> Result<Arc<Node>, String> {
        let sm = StateMachineStore::open(state_dir)?;
        let shared = sm.shared();
        let config = RaftConfig {
            cluster_name: "regina".into(),
            heartbeat_interval: 100,
            // Wide enough that a busy 2-core machine does not call
            // elections while the leader is alive.
            election_timeout_min: 500,
            election_timeout_max: 1000,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(SNAPSHOT_EVERY_ENTRIES),
            max_in_snapshot_log_to_keep: 1_000,
            // Entries can be batches of up to 8 MiB; bounds one RPC's size.
            max_payload_entries: 64,
            ..Default::default()
        };
        let config = Arc::new(config.validate().map_err(|e| e.to_string())?);
        let id = options.node_id;
        let peer_scheme = if options.tls.is_some() { "https" } else { "http" };
        let peers =
            regina_consensus::network::peer_client(options.cluster_token.as_deref(), options.tls_ca.as_deref())?;
        let network = HttpNetwork::new(shared.clone(), group, peers.clone(), peer_scheme);
        let raft = Raft::new(id, config, network, log.clone(), sm).await.map_err(|e| e.to_string())?;
        let client_addr = http_addr.clone();
        let raft_addr = options.raft_addr.clone().unwrap_or(http_addr);
        if !raft.is_initialized().await.map_err(|e| e.to_string())? {
            let first = options.peers.iter().map(|(id, _)| *id).min();
            let members: Option<BTreeMap<u64, BasicNode>> = match first {
                None => Some(BTreeMap::from([(id, BasicNode { addr: raft_addr })])),
                Some(first) if first == id => {
                    Some(options.peers.iter().map(|(id, addr)| (*id, BasicNode { addr: addr.clone() })).collect())
                }
                // Another peer forms the group and brings this node in.
                Some(_) => None,
            };
            if let Some(members) = members {
                raft.initialize(members).await.map_err(|e| format!("cannot initialise the Raft group: {e}"))?;
            }
        }
        let (stopping, _) = tokio::sync::watch::channel(false);
        let ephemeral = Arc::new(crate::ephemeral::Store::with_clock(options.clock.clone()));
        let tenant_ephemeral = Default::default();
        let clock = Arc::new(LeaderClock::new(options.clock.clone()));
        let proposer = Proposer::start(raft.clone(), log.clone(), clock.clone(), options.max_queued_proposals);
        let forwarder = peers;
        let node = Arc::new(Node {
            id,
            raft,
            shared,
            log,
            ephemeral,
            tenant_ephemeral,
            clock,
            proposer,
            stopping,
            sealer,
            group,
            groups: std::sync::OnceLock::new(),
            forwarder,
            handoff: Default::default(),
            load: Default::default(),
            pinned_tenants: options
                .tenant_groups
                .iter()
                .filter(|(_, g)| **g == group)
                .map(|(t, _)| t.clone())
                .collect(),
            internal_port: options.internal_port,
            max_long_polls: options.max_long_polls,
            peer_scheme,
            client_addr,
        });
        if node.is_sole_voter() {
            node.lead_alone(Duration::from_secs(10)).await?;
        }
        Ok(node)
    }

    /// A node that is its group's only voter leads it: it calls the
    /// election at once (not after a timeout) and applies everything the
    /// log holds before serving, so the first read sees every write
    /// acknowledged before the restart. A cluster node serves at once
    /// instead; its reads wait for the leader's read index.
    async fn lead_alone(&self, within: Duration) -> Result<(), String> {
        if self.raft.metrics().borrow().current_leader != Some(self.id) {
            let _ = self.raft.trigger().elect().await;
        }
        let mut m = self.raft.metrics();
        let res = tokio::time::timeout(within, async {
            loop {
                if m.borrow().current_leader == Some(self.id) {
                    return;
                }
                if m.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        res.map_err(|_| format!("no leader elected within {within:?}"))?;
        self.propose(Command::Noop).await.map_err(|e| e.to_string())?;
        Ok(())
    }

    /// The leader's clock for a new entry.
    pub fn stamp(&self) -> u64 {
        self.clock.stamp()
    }

    /// The time a read judges leases and lifetimes against: the node's
    /// clock, never behind the newest applied entry.
    pub fn read_time(&self, state_now_ms: u64) -> u64 {
        self.clock.read_time(state_now_ms)
    }

    /// Appends a command to the log and answers once it is durable and
    /// applied (batched with whatever else is being proposed).
    /// A command proposed while handling a request acts for the request's
    /// tenant.
    pub async fn propose(&self, command: Command) -> Result<Outcome, ProposeError> {
        let command = match crate::tenant::current() {
            Some(tenant) => Command::ForTenant { tenant, command: Box::new(command) },
            None => command,
        };
        self.proposer.propose(command).await
    }

    /// Keeps new entries out of the log until the hold is dropped, once
    /// every entry in flight is answered (a leadership hand-over).
    pub async fn hold_proposals(&self) -> Option<crate::proposer::Hold> {
        self.proposer.hold().await
    }

    /// The group's load counters so far: log entries and their bytes as
    /// this replica appended them (every replica sees the same), and the
    /// requests this node proposed while it led.
    pub fn written(&self) -> [u64; 3] {
        let (entries, bytes) = self.log.appended();
        [entries, self.proposer.load.commands.load(std::sync::atomic::Ordering::Relaxed), bytes]
    }

    /// The applied state of the request's tenant (an empty state for a
    /// tenant that never wrote), under the state's read lock.
    pub fn tenant_state(&self) -> MappedRwLockReadGuard<'_, State> {
        let tenant = crate::tenant::current();
        RwLockReadGuard::map(self.shared.machine.read(), |m| match &tenant {
            None => &m.state,
            Some(t) => m.state.tenant(t).unwrap_or_else(|| empty_state()),
        })
    }

    /// The ephemeral queues of the request's tenant.
    pub fn ephemeral(&self) -> Arc<crate::ephemeral::Store> {
        match crate::tenant::current() {
            None => self.ephemeral.clone(),
            Some(t) => self
                .tenant_ephemeral
                .lock()
                .entry(t)
                .or_insert_with(|| Arc::new(crate::ephemeral::Store::with_clock(self.clock.source())))
                .clone(),
        }
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
    /// fires everything due at that entry's time. The earliest due time
    /// counts pending timers only, retries of refused fires among them (at
    /// their retry time): a failed timer never makes the driver propose.
    pub fn spawn_timer_driver(self: &Arc<Self>) {
        let node = self.clone();
        let mut stop = self.stopping.subscribe();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(TIMER_CHECK) => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
                if !node.is_leader() {
                    continue;
                }
                let due = node.shared.machine.read().state.next_timer_due_ms();
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
                if node.is_leader() && node.needs_sweep() {
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
        // Expired KV rows and lapsed lock permits are already invisible;
        // the sweep only gives their memory back.
        self.shared.machine.read().state.wants_sweep(self.stamp())
    }

    pub async fn shutdown(&self) {
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!("raft shutdown: {e}");
        }
    }
}

/// What a tenant that never wrote reads.
fn empty_state() -> &'static State {
    static EMPTY: std::sync::OnceLock<State> = std::sync::OnceLock::new();
    EMPTY.get_or_init(State::new)
}
