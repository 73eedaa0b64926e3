//! What applying an entry answers. The HTTP layer renders these; message
//! bodies are referenced by position and read from the body files there.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Done,
    Push(Vec<PushResult>),
    Pop(PopResult),
    Ack(Vec<AckResult>),
    Extend(ExtendResult),
    Configured {
        created: bool,
    },
    Deleted {
        existed: bool,
    },
    /// The command was refused as a whole; the text says why.
    Refused(String),
    Txn(TxnOutcome),
    /// How many (partition, group) cursors or registrations changed.
    Changed { count: u64 },
    /// Whether the addressed row existed (and was acted on).
    Found(bool),
}

/// What a transaction did: everything, or nothing and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnOutcome {
    Committed(Vec<TxnResult>),
    Refused { reason: String, failed_index: usize, error: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnResult {
    Push(PushResult),
    Ack(AckResult),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PushStatus {
    Queued,
    Duplicate,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushResult {
    pub status: PushStatus,
    pub partition_id: u64,
    pub offset: u64,
    /// Where the message's body is; for a duplicate, the original's.
    pub pos: u64,
    pub len: u32,
    /// Known without a read for a new message or an in-request duplicate.
    pub message_id: Option<[u8; 16]>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PopResult {
    /// Empty when nothing was claimed or the pop committed at delivery.
    pub lease_id: String,
    pub lease_expires_ms: Option<u64>,
    pub claims: Vec<Claim>,
}

impl PopResult {
    pub fn message_count(&self) -> usize {
        self.claims.iter().map(|c| c.messages.len()).sum()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    pub queue: String,
    pub partition: String,
    pub partition_id: u64,
    pub messages: Vec<Delivered>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivered {
    pub offset: u64,
    pub pos: u64,
    pub len: u32,
    pub attempt: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AckResult {
    pub success: bool,
    pub error: Option<String>,
    pub lease_released: bool,
    pub dlq: bool,
    pub noop: bool,
}

impl AckResult {
    pub fn refused(error: &str) -> Self {
        AckResult {
            success: false,
            error: Some(error.to_string()),
            ..Default::default()
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExtendResult {
    pub renewed: u32,
    pub expires_ms: Option<u64>,
}

/// Refusal texts. Clients match substrings of these (`lease`, `unresolv`,
/// `committed`), so they are part of the wire.
pub const ERR_LEASE: &str = "invalid or expired lease";
pub const ERR_UNRESOLVABLE: &str =
    "transaction is unresolvable, already committed, or acknowledgment is stale";
