//! The routes, one module per family. Each module's `routes()` lists its
//! paths; `http::routes()` puts them together. Every path must also be in
//! the class table (`http::classes`).

pub(crate) mod ack;
pub(crate) mod admin;
pub(crate) mod backup;
pub(crate) mod binary;
pub(crate) mod cluster;
pub(crate) mod consumer_groups;
pub(crate) mod dashboard;
pub(crate) mod dlq;
pub(crate) mod ephemeral;
pub(crate) mod health;
pub(crate) mod jobs;
pub(crate) mod kv;
pub(crate) mod locks;
pub(crate) mod pop;
pub(crate) mod push;
pub(crate) mod queues;
pub(crate) mod raft;
pub(crate) mod raft_membership;
pub(crate) mod streams;
pub(crate) mod timer_ops;
pub(crate) mod timers;
pub(crate) mod traces;
pub(crate) mod transaction;
