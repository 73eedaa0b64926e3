//! Regina's state machine: the one place where broker state changes.
//!
//! [`State::apply`] takes a log [`Entry`] and returns what happened. It reads
//! nothing but the entry and the state: no I/O, no clock (the leader stamps
//! `now_ms` into each entry), no randomness (ids are minted by the leader and
//! carried in the entry), and it never iterates a hash map where the order
//! could leak into an outcome. Every replica and every replay of the same log
//! therefore reaches the same state.
//!
//! Message payloads do not live here. A push is given a position in the body
//! segment files and the apply returns [`BodyWrite`] effects; the caller
//! writes them. The state keeps per message only its position, length and
//! creation time.
//!
//! Map of the crate:
//! - [`command`]: what a log entry carries.
//! - [`outcome`]: what applying it answers.
//! - [`options`]: queue options and their defaults.
//! - [`partition`], [`cursor`], [`queue`]: the data.
//! - [`txn_index`]: the transaction-id indexes, a cache kept beside it.
//! - [`push`], [`pop`], [`ack`], [`lease`], [`admin`]: the transitions.
//! - [`txn`]: a step of acks, pushes and KV riders committed as one.
//! - [`kv`], [`kv_apply`]: the key/value store and a KV call judged as one.
//! - [`locks`]: locks and semaphores, whose permits are KV rows.
//! - [`jobs`]: job queues by id: claims under fencing tokens, retries, results.
//! - [`streams`]: stream queries: state rows per source partition, cycles
//!   that commit state, sink pushes and the source ack as one.
//! - [`body`]: the on-disk layout of one message body.
//! - [`snapshot_holes`]: the state encoded with its sealed message chunks
//!   left out as holes, for snapshots that store each chunk once.

pub mod ack;
pub mod admin;
pub mod body;
pub mod bulk;
pub mod command;
pub mod consumer_groups;
pub mod cursor;
pub mod hash;
pub mod jobs;
pub mod kv;
pub mod kv_apply;
pub mod lease;
pub mod length_checked;
pub mod locks;
pub mod msg_table;
pub mod name_index;
pub mod options;
pub mod outcome;
pub mod partition;
pub mod partition_ids;
pub mod partitions;
pub mod pop;
pub mod push;
pub mod queue;
pub mod ready_set;
pub mod snapshot_holes;
pub mod state;
mod state_encode;
pub mod state_v5;
pub mod streams;
pub mod tenants;
pub mod timer_fire;
pub mod timers;
pub mod traces;
pub mod txn;
pub mod txn_index;
pub mod txn_table;
pub mod views;

pub use body::{BodyRecord, BodyWrite, Unreadable};
pub use command::{Command, Entry};
pub use length_checked::BytesLeft;
pub use outcome::Outcome;
pub use state::State;
