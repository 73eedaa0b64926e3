//! The Regina node core: everything a node does below HTTP.
//!
//! A node runs one or more Raft groups; each is a [`Replica`] with its own
//! openraft instance, state machine, body files and snapshots, all logging
//! into the node's one shared WAL. This crate knows no request, header or
//! HTTP error: the server crate turns requests into commands and calls
//! [`Replica::propose`], and renders what comes back.
//!
//! Map of the crate:
//! - [`options`]: how a node opens its data directory and reaches peers.
//! - [`raft_groups`]: opening every group on one WAL, and which group holds
//!   a tenant ([`raft_groups::Placement`]).
//! - [`replica`]: one group's replica: propose, the tenant's state, stop.
//! - [`proposer`]: the leader's batching of proposals into log entries.
//! - [`clock`]: where time comes from ([`clock::Clock`]), and the leader's
//!   never-going-back stamps; [`ids`]: time-ordered ids on that clock.
//! - [`disk`]: the disk watermark that refuses growing writes when full.
//! - [`drivers`]: the leader's time-driven entries (timers, sweeps) and
//!   snapshot chores.
//! - [`membership`]: who leads, linearizable reads, membership changes.
//! - [`balance`]: spreading leadership over the nodes, and hand-overs.
//! - [`tenant`]: the tenant a task acts for.
//! - [`sealing`]: payload encryption for encrypted queues.
//! - [`ephemeral`]: the in-memory queues that never reach the log.
//!
//! Invariants kept here: only a group's leader proposes; every entry is
//! stamped by the leader's clock, never behind the last stamp; a request
//! is answered only once its entry is durable and applied; ids minted by a
//! process rise strictly.

pub mod backup;
pub mod balance;
pub mod clock;
pub mod disk;
pub mod drivers;
pub mod ephemeral;
pub mod ids;
pub mod membership;
pub mod options;
pub mod proposer;
pub mod raft_groups;
pub mod replica;
pub mod sealing;
pub mod tenant;

pub use options::NodeOptions;
pub use proposer::ProposeError;
pub use replica::Replica;
