//! The node: opens the log and the state machine, runs the Raft group, and
//! turns requests into log entries stamped with the leader's time.
//!
//! A single node is a one-voter Raft group. On first start it initialises
//! the group with itself as the only voter; on later starts openraft elects
//! it again from its own vote and log. A cluster is the same group with
//! more voters: given `peers`, the node with the lowest id initialises it
//! with all of them on first start (see [`crate::membership`] for leadership,
//! reads and membership changes).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use openraft::{BasicNode, Config as RaftConfig, SnapshotPolicy};
use parking_lot::{MappedRwLockReadGuard, RwLockReadGuard};
use regina_consensus::network::HttpNetwork;
use regina_consensus::{LogStore, Raft, SharedState, StateMachineStore};
use regina_state::{Command, Outcome, State};

use crate::clock::LeaderClock;
use crate::options::NodeOptions;
pub use crate::proposer::ProposeError;
use crate::proposer::Proposer;

pub struct Replica {
    /// This node's id in its Raft group.
    pub(crate) id: u64,
    pub(crate) raft: Raft,
    pub(crate) shared: Arc<SharedState>,
    pub(crate) log: LogStore,
    /// Ephemeral queues of the default tenant: this node's memory only,
    /// never in the log. Other tenants' are in `tenant_ephemeral`.
    pub(crate) ephemeral: Arc<crate::ephemeral::Store>,
    pub(crate) tenant_ephemeral: parking_lot::Mutex<std::collections::HashMap<String, Arc<crate::ephemeral::Store>>>,
    pub(crate) clock: Arc<LeaderClock>,
    pub(crate) proposer: Proposer,
    /// Raised once when the node starts to stop: parked long polls answer
    /// at once and background chores end.
    pub(crate) stopping: tokio::sync::watch::Sender<bool>,
    /// Seals payloads of queues with `encryptionEnabled`.
    pub(crate) sealer: Arc<crate::sealing::Sealer>,
    /// The node's disk watermark, shared by its groups.
    pub(crate) disk: Arc<crate::disk::DiskWatch>,
    /// This replica's Raft group among the node's groups (0 when alone).
    pub(crate) group: u16,
    /// Every group of this node, this one included (set once all are open).
    pub(crate) groups: std::sync::OnceLock<Vec<std::sync::Weak<Replica>>>,
    /// Carries requests a follower forwards to the leader (to its Raft
    /// address, with the cluster token).
    pub(crate) forwarder: reqwest::Client,
    /// A hand-over of this group's leadership in progress (`crate::balance`).
    pub(crate) handoff: crate::balance::Handoff,
    /// The group's write load while this node leads it.
    pub(crate) load: crate::balance::LoadMeter,
    /// Tenants the operator placed in this group (`--tenant-groups`).
    pub(crate) pinned_tenants: Vec<String>,
    /// Whether peers can reach this node's internal routes (see
    /// [`NodeOptions::internal_port`]).
    pub(crate) internal_port: bool,
    /// Pops that may long-poll at once on this node.
    pub(crate) max_long_polls: usize,
    /// How peers are reached: `http`, or `https` with TLS between nodes.
    pub(crate) peer_scheme: &'static str,
    /// Where this node serves clients (`HOST:PORT`): what a leader names in
    /// its hint to clients.
    pub(crate) client_addr: String,
}

impl Replica {
    /// Opens group `group`'s replica on its opened state machine `sm`,
    /// its log `log` (one of the node's shared WAL).
    pub async fn open_group(
        sm: StateMachineStore,
        group: u16,
        log: LogStore,
        (sealer, disk): (Arc<crate::sealing::Sealer>, Arc<crate::disk::DiskWatch>),
        http_addr: String,
        options: &NodeOptions,
    ) -> Result<Arc<Replica>, String> {
        let shared = sm.shared();
        let config = raft_config()?;
        let id = options.node_id;
        let peer_scheme = if options.peer_tls { "https" } else { "http" };
        let peers =
            regina_consensus::network::peer_client(options.cluster_token.as_deref(), options.tls_ca.as_deref())?;
        let network = HttpNetwork::new(shared.clone(), group, peers.clone(), peer_scheme);
        // `Raft::new` re-applies the entries after the snapshot: decoded
        // ahead on another thread while it applies (a restart's longest
        // step after the snapshot's load).
        let reading_ahead = log.read_ahead();
        // The bodies the re-apply rewrites are written back once the node
        // is up: their writeback delayed the new leader's first fdatasync.
        let _writeback_held = WritebackHeld::hold(&shared);
        let raft = Raft::new(id, config, network, log.clone(), sm).await.map_err(|e| e.to_string())?;
        drop(reading_ahead);
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
        let proposer = Proposer::start(raft.clone(), log.clone(), &shared, clock.clone(), options.max_queued_proposals);
        let forwarder = peers;
        let node = Arc::new(Replica {
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
            disk,
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
            let replaying = std::time::Instant::now();
            node.lead_alone(Duration::from_secs(10)).await?;
            tracing::info!(group, replay_ms = replaying.elapsed().as_millis() as u64, "log applied");
            // The no-op applied last: every entry recovered from the log is
            // applied too. A state that breaks an invariant is never served
            // (the snapshot it started from was checked as it was read).
            node.shared.machine.read().state.check_invariants().map_err(|e| {
                format!("the state replayed from group {group}'s log breaks an invariant, refusing to serve it: {e}")
            })?;
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

    /// This node's id in the group.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The Raft group this replica belongs to.
    pub fn group(&self) -> u16 {
        self.group
    }

    /// The group's openraft instance: Raft messages from peers are handed
    /// to it, and its metrics say who leads.
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// Raised after every applied entry (long polls wait on it).
    pub fn applied_signal(&self) -> &tokio::sync::Notify {
        &self.shared.applied
    }

    /// A message body from the group's body files.
    pub fn read_body(&self, pos: u64, len: u32) -> std::io::Result<Vec<u8>> {
        self.shared.read_body(pos, len)
    }

    /// Where the body segments of an incoming snapshot are staged.
    pub fn staging_dir(&self, snapshot_id: &str) -> Option<std::path::PathBuf> {
        self.shared.staging_dir(snapshot_id)
    }

    /// Stages one body segment of an incoming snapshot, durably. Blocks.
    pub fn stage_body_segment(&self, snapshot_id: &str, segment: u64, bytes: &[u8]) -> std::io::Result<()> {
        self.shared.stage_body_segment(snapshot_id, segment, bytes)
    }

    /// The last applied index and the whole applied state, encoded (for the
    /// state dump peers and tests compare). Blocks: call off the runtime.
    pub fn encode_applied_state(&self) -> (u64, Vec<u8>) {
        let m = self.shared.machine.read();
        (m.last_applied.map_or(0, |l| l.index), m.state.encode())
    }

    /// Seals payloads of encrypted queues and opens them again.
    pub fn sealer(&self) -> &crate::sealing::Sealer {
        &self.sealer
    }

    /// The disk watermark's reading.
    pub fn disk(&self) -> crate::disk::DiskState {
        self.disk.state()
    }

    /// Why the node's WAL refuses writes, if it does.
    pub fn storage_poisoned(&self) -> Option<String> {
        self.log.poisoned()
    }

    /// Why a write found no space on the disk and waits to be tried again,
    /// if one does (the WAL's writer, or message bodies kept in memory).
    /// Writes that grow storage are refused meanwhile.
    pub fn storage_short(&self) -> Option<String> {
        if let Some(reason) = self.log.waiting_for_space() {
            return Some(reason);
        }
        let (count, reason) = self.shared.bodies.unwritten()?;
        Some(format!("{count} message bodies wait for space: {reason}"))
    }

    /// The log store of this group (a handle on the node's shared WAL).
    pub fn log(&self) -> &LogStore {
        &self.log
    }

    /// The client used to reach peers (forwarding, membership changes).
    pub fn forwarder(&self) -> &reqwest::Client {
        &self.forwarder
    }

    /// `http` or `https`: how peers are reached.
    pub fn peer_scheme(&self) -> &'static str {
        self.peer_scheme
    }

    /// Where this node serves clients (`HOST:PORT`).
    pub fn client_addr(&self) -> &str {
        &self.client_addr
    }

    /// Whether the node has a Raft address apart from its client port.
    pub fn has_internal_port(&self) -> bool {
        self.internal_port
    }

    /// Pops that may long-poll at once on the node.
    pub fn max_long_polls(&self) -> usize {
        self.max_long_polls
    }

    /// The leadership hand-over in progress on this group, if any.
    pub fn handoff(&self) -> &crate::balance::Handoff {
        &self.handoff
    }

    /// The group's write rates as the balancer last measured them.
    pub fn load_rates(&self) -> crate::balance::Load {
        self.load.rates()
    }

    /// Tenants the operator placed in this group.
    pub fn pinned_tenants(&self) -> &[String] {
        &self.pinned_tenants
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
        if command.grows_storage() {
            if self.disk.is_full() {
                let d = self.disk.state();
                return Err(ProposeError::StorageFull(format!(
                    "{:.1}% of the data directory's filesystem is in use (writes resume under {}%)",
                    d.used_pct, d.low_pct
                )));
            }
            if let Some(reason) = self.storage_short() {
                return Err(ProposeError::StorageFull(format!(
                    "the disk is full ({reason}); writes resume once space is back"
                )));
            }
        }
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

/// Every group's Raft settings.
fn raft_config() -> Result<Arc<RaftConfig>, String> {
    let config = RaftConfig {
        cluster_name: "regina".into(),
        heartbeat_interval: 100,
        // Wide enough that a busy 2-core machine does not call
        // elections while the leader is alive.
        election_timeout_min: 500,
        election_timeout_max: 1000,
        // Snapshots are triggered by `drivers::snapshot_due`, which
        // spaces them by the size of the last one.
        snapshot_policy: SnapshotPolicy::Never,
        max_in_snapshot_log_to_keep: 1_000,
        // Entries can be batches of up to 8 MiB; bounds one RPC's size.
        max_payload_entries: 64,
        ..Default::default()
    };
    config.validate().map(Arc::new).map_err(|e| e.to_string())
}

/// Holds the body store's writeback back while it lives
/// (`BodyStore::hold_writeback`), and releases it however the opening
/// ends.
struct WritebackHeld(Arc<SharedState>);

impl WritebackHeld {
    fn hold(shared: &Arc<SharedState>) -> WritebackHeld {
        shared.bodies.hold_writeback();
        WritebackHeld(shared.clone())
    }
}

impl Drop for WritebackHeld {
    fn drop(&mut self) {
        let next_free = self.0.machine.read().state.next_body_pos;
        // Fails only where the mark lay past the replayed bodies and could
        // not be lowered: the bodies written from now on would be trusted
        // by the next restart before they are durable. The node must not
        // serve on.
        if let Err(e) = self.0.bodies.release_writeback(next_free) {
            panic!("the body store's durable mark lies past the replayed bodies and cannot be lowered: {e}");
        }
    }
}
