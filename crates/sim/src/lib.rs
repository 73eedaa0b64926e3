//! A seeded, deterministic simulation of a three-node Regina cluster.
//!
//! Real parts: `regina_consensus::LogStore` over the real WAL,
//! `regina_consensus::StateMachineStore` over the real state machine, each
//! node in its own temporary directory, and real `openraft::Raft` instances.
//! Simulated parts: the network (RPCs are calls into the target's `Raft`,
//! through seeded loss, delay and partitions), the disk under the WAL (it
//! forgets unsynced writes at a crash), time (tokio's paused clock), and
//! elections (openraft's own timers draw from an unseeded generator, so the
//! simulator decides when a node campaigns).
//!
//! One seed is one run, and replays exactly: every choice comes from the
//! seed, all tasks share one thread, and the WAL's writer threads are kept
//! in lockstep with it (see [`gate`] and [`settle`]).
//!
//! Map of the crate:
//! - [`sim`]: the entry point, [`run`] a [`SimConfig`] to a [`Report`] or a
//!   [`Failure`] with the trace that led to it.
//! - [`world`]: the cluster and the step loop; [`faults`]: the fault
//!   schedule; [`checks`]: the checks run after every step and at the end.
//! - [`node`]: one machine (directory, process, crash and restart).
//! - [`log`], [`machine`]: the real stores, wrapped to observe them.
//! - [`network`]: the simulated transport.
//! - [`disk`]: the `Io` that loses unsynced writes; [`gate`]: the WAL
//!   writer's lockstep with the runtime; [`settle`]: the runtime.
//! - [`client`], [`workload`]: requests and what they ask for.
//! - [`history`], [`invariants`]: what was applied, and what must hold;
//!   [`jobs`]: the job-queue fencing rules over the history.
//! - [`canon`]: state digests that do not depend on hash-map order.
//! - [`rng`], [`trace`]: seeded randomness and the run's account;
//!   [`panics`]: a panicking task fails the run.
//!
//! What is not simulated: a crash lands at a WAL write or fsync or between
//! two tasks, never inside a synchronous store call (the meta file, a
//! snapshot, body files, which bypass the `Io` seam and survive a crash as
//! written); each node runs one Raft group; and openraft's own election
//! timer, with its longer wait for a node that saw a longer log, is
//! replaced by the simulator's.
//!
//! Entry points for people: `cargo nextest run -p regina-sim` runs the CI
//! seeds; `SIM_SEEDS=500` runs more, `SIM_SEED=1234` replays one (a failure
//! prints the exact command), `SIM_STEPS` and `SIM_CRASH` make runs longer
//! or harsher, and `SIM_TRACE=1` prints the whole trace of passing runs.

pub mod canon;
pub mod checks;
pub mod client;
pub mod disk;
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

pub use sim::{run, Failure, Report, Sabotage, SimConfig};

pub type NodeId = regina_consensus::NodeId;
