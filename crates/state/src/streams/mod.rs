//! Streams: the state the official clients' stream SDKs keep on the broker.
//! The windowing runs in the client; the broker keeps, per query, state rows
//! for each source partition and commits each cycle (state changes, sink
//! pushes, the source ack) as one entry, all or nothing.
//!
//! A query is registered by name over a source queue with a `config_hash`
//! (the shape of the client's operator chain); a new hash is refused until
//! the registration asks for `reset`, which clears the query's state.
//! State rows live per (query, source partition id) and are isolated per
//! tenant like everything else in [`crate::State`].
//!
//! Map of the module:
//! - [`op`]: what a call carries in the log.
//! - [`register`]: registration and reset.
//! - [`cycle`]: a cycle judged whole, then applied.
//! - [`claim`]: empty-batch leases on idle partitions, so windows close.
//! - [`read`]: state rows and the partitions holding them.

pub mod claim;
pub mod cycle;
pub mod op;
pub mod read;
pub mod register;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use op::{ClaimCmd, CycleAck, CycleCmd, RegisterCmd, StateOp, StreamCmd};

/// One state row of a query on one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    /// Compact JSON text.
    #[serde(with = "serde_bytes")]
    pub value: Vec<u8>,
    /// `value.windowEnd` when it was a number.
    pub window_end: Option<i64>,
    pub updated_ms: u64,
}

/// A query's state on one source partition.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PartitionState {
    /// By key: reads by prefix are range reads.
    pub rows: BTreeMap<String, Row>,
    /// When a cycle last wrote a row here.
    pub updated_ms: u64,
    /// The digest of the last cycle committed here: the same cycle again
    /// is a resend. Kept without rows only when that cycle was not fenced
    /// by a lease it released (a resend of a fenced one is refused by the
    /// fence).
    pub last_cycle: Option<u128>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Query {
    pub id: String,
    pub name: String,
    pub source_queue: String,
    pub sink_queue: Option<String>,
    pub config_hash: String,
    pub created_ms: u64,
    pub updated_ms: u64,
    /// By source partition id.
    pub partitions: BTreeMap<u64, PartitionState>,
}

impl Query {
    /// The consumer group a claim uses when it names none.
    pub fn default_group(&self) -> String {
        format!("streams.{}", self.name)
    }

    /// State rows across partitions.
    pub fn row_count(&self) -> usize {
        self.partitions.values().map(|p| p.rows.len()).sum()
    }
}

/// Every stream query of a tenant. BTreeMaps: listings walk them in order.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StreamStore {
    /// By query id.
    pub queries: BTreeMap<String, Query>,
    /// Query name to id.
    pub names: BTreeMap<String, String>,
}

impl StreamStore {
    pub fn query(&self, id: &str) -> Option<&Query> {
        self.queries.get(id)
    }

    /// (queries, state rows) across the store, for metrics.
    pub fn totals(&self) -> (usize, usize) {
        (self.queries.len(), self.queries.values().map(Query::row_count).sum())
    }

    /// Drops the state every query over `queue` keeps for `partition_ids`
    /// (the queue is being deleted; partition ids are never reused).
    pub(crate) fn forget_partitions(&mut self, queue: &str, partition_ids: &[u64]) {
        for q in self.queries.values_mut().filter(|q| q.source_queue == queue) {
            for id in partition_ids {
                q.partitions.remove(id);
            }
        }
    }

    pub fn check(&self) -> Result<(), String> {
        if self.names.len() != self.queries.len() {
            return Err("stream query names and ids disagree".into());
        }
        for (name, id) in &self.names {
            let q = self.queries.get(id).ok_or(format!("stream query {name} indexed but missing"))?;
            if &q.name != name || &q.id != id {
                return Err(format!("stream query {name} indexed under the wrong id"));
            }
            for (pid, p) in &q.partitions {
                if p.rows.len() > regina_types::limits::STREAM_STATE_ROWS_PER_PARTITION_MAX {
                    return Err(format!("stream query {name} holds too many rows on partition {pid}"));
                }
                if p.rows.is_empty() && p.last_cycle.is_none() {
                    return Err(format!("stream query {name} keeps an empty partition {pid}"));
                }
            }
        }
        Ok(())
    }
}

/// What a streams call answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StreamOutcome {
    Register(register::RegisterOutcome),
    Cycle(cycle::CycleOutcome),
    Claim(claim::ClaimOutcome),
}

impl crate::state::State {
    pub(crate) fn stream_call(&mut self, cmd: &StreamCmd, writes: &mut Vec<crate::body::BodyWrite>) -> StreamOutcome {
        match cmd {
            StreamCmd::Register(c) => StreamOutcome::Register(self.stream_register(c)),
            StreamCmd::Cycle(c) => StreamOutcome::Cycle(self.stream_cycle(c, writes)),
            StreamCmd::Claim(c) => StreamOutcome::Claim(self.stream_claim(c)),
        }
    }
}
