//! A seeded, deterministic simulation of a three-node Regina cluster.
//!
//! Real parts: every node runs several Raft groups (three by default, as
//! [`SimConfig::groups`] says) the way the server does: one
//! `regina_consensus::LogStore` per group, all opened with
//! `LogStore::open_groups` over one real WAL per node (one record names its
//! group, one fdatasync covers every group's pending appends, a segment goes
//! only when no group needs it), one `regina_consensus::StateMachineStore`
//! per group in its own directory, and a real `openraft::Raft` per group;
//! each node in its own temporary directory. Simulated parts: the network
//! (RPCs are calls into the target's `Raft` of the same group, through
//! seeded loss, delay and partitions of the nodes' links), the disk under
//! the WAL (it forgets unsynced writes at a crash, of every group at once),
//! time (tokio's paused clock), and elections (openraft's own timers draw
//! from an unseeded generator, so the simulator decides when a replica
//! campaigns). Leaders start spread (group `g` first elects node
//! `g % 3 + 1`), so one crash sends several groups into elections at once.
//!
//! The server's own node core drives the log: every request goes through
//! `regina_node::proposer::Proposer` on the node the simulator believes
//! leads (stamped by the leader's clock, `TokioClock` on virtual time, and
//! packed with whatever else waits into one batch entry), and after every
//! step the leader asks `regina_node::drivers` whether timers are due or a
//! sweep is wanted and proposes what they answer ([`drivers`]). Every
//! acknowledged timer must fire exactly once, never early.
//!
//! One seed is one run, and replays exactly: every choice comes from the
//! seed, all tasks share one thread, and the WAL's writer threads are kept
//! in lockstep with it (see [`gate`] and [`settle`]).
//!
//! Map of the crate:
//! - [`sim`]: the entry point, [`run`] a [`SimConfig`] to a [`Report`] or a
//!   [`Failure`] with the trace that led to it.
//! - [`world`]: the cluster and the step loop; [`faults`]: the fault
//!   schedule; [`checks`]: the checks run after every step and at the end,
//!   group by group and across groups.
//! - [`node`]: one machine (directory, process with its groups, crash and
//!   restart, and the check that recovery kept the groups apart).
//! - [`log`], [`machine`]: the real stores, wrapped to observe them.
//! - [`network`]: the simulated transport, routing by (node, group).
//! - [`disk`]: the `Io` that loses unsynced writes; [`gate`]: the shared
//!   WAL writer's lockstep with the runtime; [`settle`]: the runtime.
//! - [`client`], [`workload`]: requests and what they ask for, per group;
//!   [`drivers`]: the leader's timer and sweep entries, and the timer check.
//! - [`history`], [`invariants`]: what each group applied, which group
//!   each entry was sent to, and what must hold; [`jobs`]: the job-queue
//!   fencing rules over a group's history.
//! - [`canon`]: state digests that do not depend on hash-map order.
//! - [`rng`], [`trace`]: seeded randomness and the run's account;
//!   [`panics`]: a panicking task fails the run.
//!
//! What is not simulated: a crash lands at a WAL write or fsync or between
//! two tasks, never inside a synchronous store call (the meta file, a
//! snapshot, body files, which bypass the `Io` seam and survive a crash as
//! written); the groups of a node all have the same three members (as in
//! the server) and tenants are not placed by name: the workload picks a
//! group per request; and openraft's own election timer, with its longer
//! wait for a node that saw a longer log, is replaced by the simulator's.
//!
//! Entry points for people: `cargo nextest run -p regina-sim` runs the CI
//! seeds; `SIM_SEEDS=500` runs more, `SIM_SEED=1234` replays one (a failure
//! prints the exact command), `SIM_STEPS` and `SIM_CRASH` make runs longer
//! or harsher, `SIM_GROUPS` sets the groups per node (`SIM_GROUPS=1` for
//! one), and `SIM_TRACE=1` prints the whole trace of passing runs.

pub mod canon;
pub mod checks;
pub mod client;
pub mod disk;
pub mod drivers;
pub mod faults;
pub mod gate;
pub mod history;
pub mod invariants;
pub mod jobs;
pub mod log;
pub mod machine;
pub mod network;
pub mod node;
pub mod panics;
pub mod rng;
pub mod settle;
pub mod sim;
pub mod trace;
pub mod workload;
pub mod world;

pub use sim::{run, Failure, Report, Sabotage, SimConfig, DEFAULT_GROUPS};

pub type NodeId = regina_consensus::NodeId;
