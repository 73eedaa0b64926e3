//! The entry point: one seed, one run, a report or a failure.

use std::fmt;
use std::sync::Arc;

use crate::network::NetStats;
use crate::settle::{runtime, Settler};
use crate::world::World;

/// A deliberately broken component, to prove the checks can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sabotage {
    /// The network answers every append "success" without delivering it.
    AckWithoutDelivery,
    /// The disk acknowledges fsyncs without making anything durable, so a
    /// crash loses acknowledged log entries.
    ForgetSyncs,
    /// A restarting node hands group 0's recovered log to group 1's Raft
    /// and group 1's to group 0's: recovery mixing groups up.
    SwapGroupsOnRecovery,
}

#[derive(Debug, Clone)]
pub struct SimConfig {
    pub seed: u64,
    /// Steps of the faulty phase; each is one action and a little time.
    pub steps: u32,
    /// Per mille of steps that crash a node.
    pub crash_per_mille: u64,
    /// Raft groups per node, all logging into the node's one WAL.
    pub groups: u16,
    pub sabotage: Option<Sabotage>,
}

/// Groups per node unless told otherwise: several, so that every run
/// exercises the shared WAL and leaders spread over the nodes.
pub const DEFAULT_GROUPS: u16 = 3;

impl SimConfig {
    pub fn new(seed: u64) -> SimConfig {
        SimConfig { seed, steps: 500, crash_per_mille: 12, groups: DEFAULT_GROUPS, sabotage: None }
    }

    /// The environment variables that make the test harness run this.
    pub fn replay_env(&self) -> String {
        let base = SimConfig::new(self.seed);
        let mut env = format!("SIM_SEED={}", self.seed);
        if self.steps != base.steps {
            env += &format!(" SIM_STEPS={}", self.steps);
        }
        if self.crash_per_mille != base.crash_per_mille {
            env += &format!(" SIM_CRASH={}", self.crash_per_mille);
        }
        if self.groups != base.groups {
            env += &format!(" SIM_GROUPS={}", self.groups);
        }
        if let Some(s) = self.sabotage {
            env += &format!(" (with {s:?}: a checker test)");
        }
        env
    }
}

/// What a passing run did, and a digest of all of it: two runs of one seed
/// must produce the same digest.
#[derive(Debug, Clone)]
pub struct Report {
    pub seed: u64,
    pub digest: u64,
    pub steps: u32,
    pub groups: u16,
    pub virtual_ms: u64,
    pub acked: u64,
    pub unknown: u64,
    pub crashes: u64,
    /// Crashes of a node that led two groups or more.
    pub multi_leader_crashes: u64,
    pub lost_unsynced_bytes: u64,
    /// Of those, bytes of message bodies and snapshots.
    pub lost_body_bytes: u64,
    /// Crashes that hit a disk write or fsync of the WAL.
    pub wal_crashes: u64,
    /// Conflicting log tails dropped.
    pub truncations: u64,
    /// WAL batches whose one fsync covered appends of several groups.
    pub joint_batches: u64,
    pub elections: u64,
    /// Leader moves: a caught-up follower campaigned while the leader lived.
    pub moves: u64,
    /// Acknowledged requests the proposer packed with others into one entry.
    pub batched: u64,
    /// Entries the timer and sweep drivers proposed.
    pub driven: u64,
    /// Timers checked to have fired exactly once, on time.
    pub timers_fired: u64,
    pub snapshots: u64,
    /// Each group's applied index at the end.
    pub applied: Vec<u64>,
    /// How many groups each node leads at the end.
    pub leaders: std::collections::BTreeMap<crate::NodeId, u64>,
    pub applications: u64,
    pub net: NetStats,
    /// What the job-queue fencing rules were checked on.
    pub jobs: crate::jobs::JobFigures,
    /// The whole trace, one event a line.
    pub trace: Vec<String>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let applied: Vec<String> = self.applied.iter().map(u64::to_string).collect();
        let leaders: Vec<String> = self.leaders.iter().map(|(n, c)| format!("n{n}:{c}")).collect();
        write!(
            f,
            "seed {}: {} steps, {} groups, {} ms virtual, {} acked / {} unknown, {} crashes ({} of a leader of \
             several groups, {} in a WAL write, {} unsynced bytes lost, {} of bodies), {} truncations, {} elections ({} leader \
             moves), {} requests batched, {} driver entries, {} timers fired once, {} snapshots sent, {} fsyncs shared by groups, logs at [{}], leaders at the end {}, {} messages ({} lost, {} twice), \
             jobs: {} claims ({} resent), {} renews, {} completes, {} fails, {} releases, {} lease lost, digest \
             {:016x}",
            self.seed,
            self.steps,
            self.groups,
            self.virtual_ms,
            self.acked,
            self.unknown,
            self.crashes,
            self.multi_leader_crashes,
            self.wal_crashes,
            self.lost_unsynced_bytes,
            self.lost_body_bytes,
            self.truncations,
            self.elections,
            self.moves,
            self.batched,
            self.driven,
            self.timers_fired,
            self.snapshots,
            self.joint_batches,
            applied.join(" "),
            leaders.join(" "),
            self.net.sent,
            self.net.lost,
            self.net.duplicated,
            self.jobs.claims,
            self.jobs.replays,
            self.jobs.renews,
            self.jobs.completes,
            self.jobs.fails,
            self.jobs.releases,
            self.jobs.lease_lost,
            self.digest
        )
    }
}

/// A violated invariant (or a run that could not go on), where, and the
/// trace leading to it.
#[derive(Debug, Clone)]
pub struct Failure {
    pub seed: u64,
    /// The environment that replays this run (`SIM_SEED=…` and, when not
    /// the defaults, `SIM_STEPS=…` and `SIM_CRASH=…`).
    pub replay: String,
    /// `None` when it happened at the end, in the fault-free phase.
    pub step: Option<u32>,
    pub message: String,
    pub trace_tail: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.step {
            Some(s) => writeln!(f, "seed {} failed at step {s}: {}", self.seed, self.message)?,
            None => writeln!(f, "seed {} failed after the faults were healed: {}", self.seed, self.message)?,
        }
        writeln!(f, "replay with: {} cargo nextest run -p regina-sim simulate_seeds", self.replay)?;
        write!(f, "trace (last lines):\n{}", self.trace_tail)
    }
}

/// Closes every gate when the run ends, even by a panic, so that dropping
/// the runtime (and with it the stores) never waits on a parked writer.
struct CloseGates(Arc<Settler>);

impl Drop for CloseGates {
    fn drop(&mut self) {
        self.0.close_all();
    }
}

/// Runs one seed to the end.
pub fn run(cfg: SimConfig) -> Result<Report, Failure> {
    let seed = cfg.seed;
    let replay = cfg.replay_env();
    let settler = Arc::new(Settler::default());
    let rt = runtime(settler.clone()).map_err(|e| Failure {
        seed,
        replay: replay.clone(),
        step: None,
        message: format!("cannot build the runtime: {e}"),
        trace_tail: String::new(),
    })?;
    let _close = CloseGates(settler.clone());
    let _panics = crate::panics::record();
    rt.block_on(async move {
        let mut world = World::new(cfg, settler).map_err(|e| Failure {
            seed,
            replay,
            step: None,
            message: e,
            trace_tail: String::new(),
        })?;
        let result = world.run().await;
        world.stop().await;
        result
    })
}
