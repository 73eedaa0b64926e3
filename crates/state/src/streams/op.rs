//! What a streams call carries in the log. The edge has parsed and checked
//! every field against its limits; ids (the query's, a claim's lease, the
//! sink messages') are minted by the leader before the entry is proposed.

use serde::{Deserialize, Serialize};

use crate::command::PushItem;

/// One streams call. New variants go at the end: this enum is logged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StreamCmd {
    Register(RegisterCmd),
    Cycle(CycleCmd),
    Claim(ClaimCmd),
}

/// `POST /streams/v1/queries`: a query by name over a source queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterCmd {
    pub name: String,
    pub source_queue: String,
    pub sink_queue: Option<String>,
    pub config_hash: String,
    /// Clears the query's state and takes the new hash and queues.
    pub reset: bool,
    /// The id a new query gets (minted by the leader); an existing query
    /// keeps its own.
    pub new_id: String,
}

/// One change to a query's state, applied in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StateOp {
    Upsert {
        key: String,
        /// Compact JSON text.
        #[serde(with = "serde_bytes")]
        value: Vec<u8>,
        /// `value.windowEnd` when it is a number (ms): what
        /// `ripe_at_or_before` judges, read once at the edge.
        window_end: Option<i64>,
    },
    Delete {
        key: String,
    },
}

impl StateOp {
    pub fn key(&self) -> &str {
        match self {
            StateOp::Upsert { key, .. } | StateOp::Delete { key } => key,
        }
    }
}

/// The source ack a cycle carries: commit through `transaction_id` under
/// `lease_id`. `transaction_id` empty (and `count` 0) settles an empty
/// batch: a claim's, or a batch the cycle hands back whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CycleAck {
    pub transaction_id: String,
    pub lease_id: String,
    /// `completed` (or a spelling of it); anything else hands the batch
    /// back: the lease goes, the cursor stays.
    pub ok: bool,
    pub count: u64,
}

/// `POST /streams/v1/cycle`: state changes, sink pushes and the source ack,
/// all or nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CycleCmd {
    pub query_id: String,
    pub partition_id: u64,
    pub group: String,
    pub state_ops: Vec<StateOp>,
    pub pushes: Vec<PushItem>,
    pub ack: Option<CycleAck>,
    /// False keeps the source lease after the ack (a gate's held tail).
    pub release_lease: bool,
    /// A hash of the request as the client sent it (before any id was
    /// minted): a cycle equal to the last one committed on its partition is
    /// a resend and changes nothing.
    pub digest: u128,
}

impl CycleCmd {
    pub fn approx_bytes(&self) -> usize {
        let state: usize = self
            .state_ops
            .iter()
            .map(|op| match op {
                StateOp::Upsert { key, value, .. } => key.len() + value.len() + 16,
                StateOp::Delete { key } => key.len() + 8,
            })
            .sum();
        let pushes: usize = self
            .pushes
            .iter()
            .map(|p| p.queue.len() + p.partition.len() + p.transaction_id.len() + p.payload.len() + 64)
            .sum();
        state + pushes + 256
    }
}

/// `POST /streams/v1/claim`: lease idle partitions of the query's source
/// with an empty batch, so a cycle may close their windows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimCmd {
    pub query_id: String,
    pub partition_ids: Vec<u64>,
    /// `None`: `streams.<query name>`.
    pub group: Option<String>,
    /// Minted by the leader; shared by every partition claimed.
    pub lease_id: String,
    pub lease_ms: u64,
}
