//! The simulated cluster and the loop that drives it.
//!
//! A run boots three nodes, each running `groups` Raft groups over one
//! shared WAL, then takes `steps` steps: each performs one seeded action (a
//! client request to a seeded group, or a fault, see `faults`), lets a
//! little virtual time pass, starts elections where a group's replica has
//! not heard from that group's leader for its (seeded) timeout, and checks
//! every invariant, group by group. Then the faults are healed and every
//! group must converge: one leader, every node at the same applied index
//! with the same state, every acknowledged write in it.
//!
//! Group `g` first elects node `g % 3 + 1`, as the server prefers its
//! leaders spread, so a node's crash costs several groups their leader at
//! once.
//!
//! Elections are driven from here because openraft draws its election
//! timeouts from a generator no seed reaches; every replica runs with
//! `enable_elect: false` and campaigns when this loop says so.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use openraft::{BasicNode, Config, ServerState, SnapshotPolicy};
use parking_lot::Mutex;
use regina_consensus::types::LogId;
use regina_state::{Command, Entry, Outcome};
use tokio::time::{sleep, Instant};

use crate::client::{self, summary, Clients, Reply};
use crate::drivers::AckedTimer;
use crate::history::{History, Registry};
use crate::invariants::{acked_pushes, acked_timers, AckedPush, Checker};
use crate::network::{Net, Peer, Weather};
use crate::node::{Ctx, Node};
use crate::rng::Rng;
use crate::settle::Settler;
use crate::sim::{Failure, Report, Sabotage, SimConfig};
use crate::trace::Trace;
use crate::workload::Workload;
use crate::NodeId;

pub const NODES: u64 = 3;
/// Entry times start here: a plausible wall clock, moved by virtual time.
const EPOCH_MS: u64 = 1_700_000_000_000;
/// How long the healed cluster gets to converge (virtual).
const CONVERGE_WITHIN: Duration = Duration::from_secs(60);
const TRACE_TAIL: usize = 80;

/// What the simulator keeps of one Raft group.
pub(crate) struct Book {
    workload: Workload,
    pub(crate) checker: Checker,
    pub(crate) acked: Vec<AckedPush>,
    /// Every acknowledged request by log index: (op, its log id).
    pub(crate) acked_ops: BTreeMap<u64, (u64, LogId)>,
    /// The drivers' op in flight, if any: timers, then sweeps.
    pub(crate) driving: [Option<u64>; 2],
    /// Acknowledged timers, to be fired once each.
    pub(crate) timers: Vec<AckedTimer>,
}

pub struct World {
    pub(crate) cfg: SimConfig,
    /// Faults, their timing and election timeouts.
    pub(crate) rng: Rng,
    /// Which group each client request goes to.
    route: Rng,
    pub(crate) ctx: Ctx,
    pub(crate) nodes: Vec<Node>,
    pub(crate) clients: Arc<Mutex<Clients>>,
    /// By group.
    pub(crate) books: Vec<Book>,
    pub(crate) trace: Trace,
    pub(crate) step: u32,
    start: Instant,
    elect_after: BTreeMap<(NodeId, u16), Duration>,
    /// Down nodes and the step at which they come back.
    pub(crate) restart_at: BTreeMap<NodeId, u32>,
    pub(crate) heal_at: Option<u32>,
    pub(crate) calm_at: Option<u32>,
    pub(crate) stats: Stats,
    booted: bool,
}

#[derive(Default, Debug, Clone, Copy)]
pub struct Stats {
    pub acked: u64,
    pub unknown: u64,
    pub crashes: u64,
    pub lost_bytes: u64,
    pub lost_body_bytes: u64,
    pub wal_crashes: u64,
    pub elections: u64,
    /// Leader moves (targeted elections of a caught-up follower).
    pub moves: u64,
    /// Acknowledged requests the proposer packed into a batch entry with
    /// others.
    pub batched: u64,
    /// Entries the drivers proposed (fire timers, sweep).
    pub driven: u64,
    /// Crashes of a node that led two groups or more.
    pub multi_leader_crashes: u64,
}

fn raft_config() -> Result<Arc<Config>, String> {
    let config = Config {
        cluster_name: "regina-sim".into(),
        heartbeat_interval: 20,
        election_timeout_min: 60,
        election_timeout_max: 120,
        // Elections are the simulator's call (see the module docs).
        enable_elect: false,
        // Snapshots are a seeded fault too; purging right behind them makes
        // lagging followers catch up by snapshot.
        snapshot_policy: SnapshotPolicy::Never,
        max_in_snapshot_log_to_keep: 5,
        max_payload_entries: 16,
        install_snapshot_timeout: 1000,
        ..Default::default()
    };
    config.validate().map(Arc::new).map_err(|e| format!("invalid raft config: {e}"))
}

impl World {
    pub fn new(cfg: SimConfig, settler: Arc<Settler>) -> Result<World, String> {
        if cfg.groups == 0 {
            return Err("a node runs at least one Raft group".into());
        }
        let root = Rng::new(cfg.seed);
        let ctx = Ctx {
            config: raft_config()?,
            clock: Arc::new(regina_node::clock::TokioClock::starting_at(EPOCH_MS)),
            net: Net::new(root.fork(1).next_u64(), cfg.sabotage == Some(Sabotage::AckWithoutDelivery)),
            settler,
            groups: cfg.groups,
            history: (0..cfg.groups).map(|_| Arc::new(Mutex::new(History::default()))).collect(),
            registry: Arc::new(Mutex::new(Registry::default())),
            swap_groups: cfg.sabotage == Some(Sabotage::SwapGroupsOnRecovery),
            forget_syncs: cfg.sabotage == Some(Sabotage::ForgetSyncs),
            truncations: Default::default(),
            joint_batches: Default::default(),
            disk_seed: root.fork(5).next_u64(),
        };
        let nodes = (1..=NODES).map(Node::new).collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
        // Group 0 draws the workload stream a one-group run always drew.
        let books = (0..cfg.groups)
            .map(|g| Book {
                workload: Workload::new(if g == 0 { root.fork(3) } else { root.fork(100 + u64::from(g)) }, g),
                checker: Checker::default(),
                acked: Vec::new(),
                acked_ops: BTreeMap::new(),
                driving: [None, None],
                timers: Vec::new(),
            })
            .collect();
        Ok(World {
            rng: root.fork(2),
            route: root.fork(4),
            cfg,
            ctx,
            nodes,
            clients: Arc::new(Mutex::new(Clients::default())),
            books,
            trace: Trace::default(),
            step: 0,
            start: Instant::now(),
            elect_after: BTreeMap::new(),
            restart_at: BTreeMap::new(),
            heal_at: None,
            calm_at: None,
            stats: Stats::default(),
            booted: false,
        })
    }

    /// The groups, in order.
    pub(crate) fn groups(&self) -> std::ops::Range<u16> {
        0..self.cfg.groups
    }

    /// The node group `group` first elects, and the server's balancer
    /// prefers: leaders spread over the nodes.
    pub(crate) fn preferred(group: u16) -> NodeId {
        u64::from(group) % NODES + 1
    }

    pub(crate) fn elapsed_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    pub(crate) fn note(&mut self, text: impl Into<String>) {
        let at = self.elapsed_ms();
        self.trace.push(self.step, at, text);
    }

    pub(crate) fn fail(&self, message: impl Into<String>) -> Failure {
        Failure {
            seed: self.cfg.seed,
            replay: self.cfg.replay_env(),
            step: self.booted.then_some(self.step),
            message: message.into(),
            trace_tail: self.trace.render_tail(TRACE_TAIL),
        }
    }

    pub(crate) fn node(&mut self, id: NodeId) -> &mut Node {
        &mut self.nodes[(id - 1) as usize]
    }

    pub(crate) fn up(&self) -> Vec<NodeId> {
        self.nodes.iter().filter(|n| n.is_up()).map(|n| n.id).collect()
    }

    /// The node that leads group `group` in the highest term, as the nodes
    /// report.
    pub(crate) fn leader(&self, group: u16) -> Option<(NodeId, u64)> {
        self.nodes
            .iter()
            .filter(|n| n.is_up())
            .filter_map(|n| {
                let m = n.raft(group)?.metrics().borrow().clone();
                (m.state == ServerState::Leader).then_some((n.id, m.current_term))
            })
            .max_by_key(|(id, term)| (*term, std::cmp::Reverse(*id)))
    }

    /// How many groups each node leads (by node).
    pub(crate) fn leaders(&self) -> BTreeMap<NodeId, u64> {
        let mut led: BTreeMap<NodeId, u64> = (1..=NODES).map(|id| (id, 0)).collect();
        for g in self.groups() {
            if let Some((id, _)) = self.leader(g) {
                *led.entry(id).or_default() += 1;
            }
        }
        led
    }

    pub async fn run(&mut self) -> Result<Report, Failure> {
        self.boot().await?;
        for step in 0..self.cfg.steps {
            self.step = step;
            self.scheduled().await?;
            self.act().await?;
            let dt = self.rng.range(1, 30);
            sleep(Duration::from_millis(dt)).await;
            self.end_step().await?;
        }
        self.step = self.cfg.steps;
        self.converge().await?;
        self.final_check()
    }

    async fn boot(&mut self) -> Result<(), Failure> {
        for i in 0..self.nodes.len() {
            let r = self.nodes[i].start(&self.ctx).await;
            r.map_err(|e| self.fail(e))?;
        }
        for id in 1..=NODES {
            for g in self.groups() {
                let after = self.election_timeout();
                self.elect_after.insert((id, g), after);
            }
        }
        let members: BTreeMap<NodeId, BasicNode> =
            (1..=NODES).map(|id| (id, BasicNode::new(format!("n{id}")))).collect();
        for g in self.groups() {
            let first = Self::preferred(g);
            let raft = self.node(first).raft(g).expect("just started");
            raft.initialize(members.clone()).await.map_err(|e| self.fail(format!("initialize group {g}: {e}")))?;
            self.note(format!("boot: n{first} initializes group {g} of n1, n2, n3"));
        }
        self.booted = true;
        Ok(())
    }

    fn election_timeout(&mut self) -> Duration {
        // Above openraft's leader lease (election_timeout_max), so a vote
        // request is not refused only because the lease still runs.
        Duration::from_millis(self.rng.range(150, 400))
    }

    /// The bookkeeping every step ends with.
    async fn end_step(&mut self) -> Result<(), Failure> {
        self.elections().await;
        self.reap().await?;
        self.absorb()?;
        self.drive();
        self.status_line();
        self.check()?;
        self.check_acked_durable().await
    }

    /// Campaigns for every replica that has not heard from its group's
    /// leader within its timeout, node by node, group by group.
    async fn elections(&mut self) {
        for id in self.up() {
            for g in self.groups() {
                let Some(raft) = self.node(id).raft(g) else { continue };
                let m = raft.metrics().borrow().clone();
                if m.state == ServerState::Leader {
                    self.ctx.net.hear(id, g);
                    continue;
                }
                let timeout = self.elect_after[&(id, g)];
                if self.ctx.net.heard(id, g).elapsed() < timeout {
                    continue;
                }
                let _ = raft.trigger().elect().await;
                self.ctx.net.hear(id, g);
                let next = self.election_timeout();
                self.elect_after.insert((id, g), next);
                self.stats.elections += 1;
                self.note(format!("n{id} campaigns in g{g} (term {} -> {})", m.current_term, m.current_term + 1));
            }
        }
    }

    /// Sends a client request to a seeded group, to the node that seems to
    /// lead it; now and then one to each of several groups at once, as
    /// clients of different tenants would, so that the groups' appends meet
    /// in the nodes' shared WAL batches.
    pub(crate) fn client_request(&mut self) {
        let groups = u64::from(self.cfg.groups);
        let burst = if groups > 1 && self.route.chance(300) { self.route.range(2, groups + 1) } else { 1 };
        let first = self.route.below(groups);
        for k in 0..burst {
            self.request_to(((first + k) % groups) as u16);
        }
    }

    fn request_to(&mut self, g: u16) {
        let planned = self.books[usize::from(g)].workload.request();
        let target = match self.leader(g) {
            Some((id, _)) => Some(id),
            None => {
                let up = self.up();
                (!up.is_empty()).then(|| *self.rng.pick(&up))
            }
        };
        let Some(id) = target else {
            self.note(format!("no node up for g{g}: {}", planned.label));
            return;
        };
        let peer = self.node(id).peer(g).expect("an up node runs");
        self.send((id, g), peer, planned.label, planned.command);
    }

    pub(crate) fn send(&mut self, (id, g): (NodeId, u16), peer: Peer, label: String, command: Command) -> u64 {
        self.ctx.registry.lock().sent(&command, g);
        let op = client::submit(&self.clients, peer, (id, g), self.step, label.clone(), command);
        self.note(format!("op{op} -> n{id} g{g}: {label}"));
        op
    }

    /// Takes in the answers that arrived: acknowledged ones must match the
    /// common history, and the workload learns from all of them.
    fn absorb(&mut self) -> Result<(), Failure> {
        let finished = self.clients.lock().take_finished();
        for op_id in finished {
            let mut op = self.clients.lock().ops[&op_id].clone();
            let reply = op.reply.clone().expect("finished ops have a reply");
            let g = op.group;
            match &reply {
                Reply::Acked { log_id, outcome, .. } => {
                    self.stats.acked += 1;
                    let seen = self.ctx.history[usize::from(g)].lock().entries.get(&log_id.index).cloned();
                    match seen {
                        Some(a) if a.log_id == *log_id && carries(&a, &op.entry.command, outcome) => {
                            // The proposer stamped it: the op now knows its time.
                            op.entry.now_ms = a.entry.as_ref().map_or(0, |e| e.now_ms);
                            self.stats.batched += u64::from(matches!(
                                (&a.entry, &op.entry.command),
                                (Some(Entry { command: Command::Batch(_), .. }), c) if !matches!(c, Command::Batch(_))
                            ));
                        }
                        Some(a) => {
                            return Err(self.fail(format!(
                                "op{op_id} was acknowledged at {log_id} of g{g} with {outcome:?}, but the history \
                                 has {} there with {:?}",
                                a.log_id, a.outcome
                            )))
                        }
                        None => {
                            return Err(self.fail(format!(
                                "op{op_id} was acknowledged at {log_id} of g{g}, which no state machine applied"
                            )))
                        }
                    }
                    let book = &mut self.books[usize::from(g)];
                    book.acked.extend(acked_pushes(log_id.index, &op.entry.command, outcome));
                    book.timers.extend(acked_timers(&op.entry.command, outcome));
                    // Ops the proposer packed into one entry share its index.
                    book.acked_ops.insert(log_id.index, (op_id, *log_id));
                    self.note(format!("op{op_id} ok at g{g} {}: {}", log_id.index, summary(outcome)));
                }
                Reply::Unknown(why) => {
                    self.stats.unknown += 1;
                    self.note(format!("op{op_id} unknown: {why}"));
                }
            }
            self.books[usize::from(g)].workload.learn(&op.entry, &reply);
        }
        Ok(())
    }

    /// One line per step with each node's role, term and applied index in
    /// each group.
    fn status_line(&mut self) {
        let mut parts = Vec::new();
        for n in &self.nodes {
            match &n.running {
                Some(r) if !r.gate.crashed() => {
                    let mut groups = Vec::new();
                    for g in &r.groups {
                        let m = g.raft.metrics().borrow().clone();
                        let role = match m.state {
                            ServerState::Leader => "L",
                            ServerState::Candidate => "C",
                            ServerState::Follower => "F",
                            ServerState::Learner => "l",
                            ServerState::Shutdown => "S",
                        };
                        let applied = m.last_applied.map_or("-".to_string(), |l| l.index.to_string());
                        groups.push(format!("{role} t{} @{applied}", m.current_term));
                    }
                    parts.push(format!("n{} {}", n.id, groups.join(", ")));
                }
                _ => parts.push(format!("n{} down", n.id)),
            }
        }
        let cut = self.ctx.net.cut();
        let cut = if cut.is_empty() {
            String::new()
        } else {
            format!(" | cut {}", cut.iter().map(|(a, b)| format!("{a}>{b}")).collect::<Vec<_>>().join(","))
        };
        self.note(format!("· {}{cut}", parts.join(" | ")));
    }

    /// Heals every fault, brings every node back, and waits until the
    /// cluster agrees on everything.
    async fn converge(&mut self) -> Result<(), Failure> {
        self.ctx.net.set_cut(BTreeSet::new());
        self.ctx.net.set_weather(Weather::CALM);
        self.heal_at = None;
        self.calm_at = None;
        for n in &self.nodes {
            if let Some(r) = &n.running {
                r.gate.disarm();
            }
        }
        self.note("heal: no partitions, no loss, every node up");
        let down: Vec<NodeId> = self.nodes.iter().filter(|n| !n.is_up()).map(|n| n.id).collect();
        for id in down {
            self.restart(id).await?;
        }
        let deadline = Instant::now() + CONVERGE_WITHIN;
        // Per group: the term of the leader a marker went to, and the marker.
        let mut markers: BTreeMap<u16, (u64, u64)> = BTreeMap::new();
        loop {
            sleep(Duration::from_millis(25)).await;
            self.end_step().await?;
            for g in self.groups() {
                if let Some((leader, term)) = self.leader(g) {
                    if markers.get(&g).is_none_or(|(t, _)| *t != term) {
                        let peer = self.node(leader).peer(g).expect("the leader runs");
                        let op = self.send((leader, g), peer, format!("final noop in term {term}"), Command::Noop);
                        markers.insert(g, (term, op));
                    }
                }
            }
            let all = markers.len() == usize::from(self.cfg.groups);
            if all && self.clients.lock().in_flight() == 0 && markers.iter().all(|(g, (_, op))| self.converged(*g, *op))
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(self.fail(format!("the healed cluster did not converge within {CONVERGE_WITHIN:?}")));
            }
        }
    }

    /// Shuts every node down at the end of a run (passed or not).
    pub async fn stop(&mut self) {
        self.ctx.settler.close_all();
        for n in &mut self.nodes {
            if let Some(r) = n.running.take() {
                for g in &r.groups {
                    let _ = tokio::time::timeout(Duration::from_secs(10), g.raft.shutdown()).await;
                }
            }
        }
    }
}

/// Whether the applied entry `a` carries `command` with `outcome`: as the
/// whole entry, or as one part of a batch the proposer packed.
fn carries(a: &crate::history::Applied, command: &Command, outcome: &Outcome) -> bool {
    let Some(entry) = &a.entry else { return false };
    if entry.command == *command && a.outcome == *outcome {
        return true;
    }
    match (&entry.command, &a.outcome) {
        (Command::Batch(parts), Outcome::Batch(outcomes)) => {
            parts.iter().zip(outcomes).any(|(c, o)| c == command && o == outcome)
        }
        _ => false,
    }
}
