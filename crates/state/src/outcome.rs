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
    Changed {
        count: u64,
    },
    /// Whether the addressed row existed (and was acted on).
    Found(bool),
    Kv(KvOutcome),
    /// One answer per lock operation, in order.
    Locks(Vec<LockResult>),
    Timers(Vec<crate::timers::TimerOutcome>),
    Jobs(crate::jobs::apply::JobsOutcome),
    /// One outcome per command of a `Command::Batch`, in order.
    Batch(Vec<Outcome>),
    Stream(crate::streams::StreamOutcome),
}

/// What a transaction did: everything, or nothing and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnOutcome {
    Committed(Vec<TxnResult>),
    /// `failed_index` is flat: pushed items and acks first, then the KV
    /// riders. `kv` is set when a required KV precondition was lost.
    Refused {
        reason: String,
        failed_index: usize,
        error: String,
        kv: Option<KvRefusal>,
        /// Set when a job rider was refused.
        job: Option<crate::jobs::apply::JobRefusal>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnResult {
    Push(PushResult),
    Ack(AckResult),
    Kv(KvResult),
    Timer(crate::timers::TimerOutcome),
    Job(crate::jobs::apply::JobResult),
}

/// A KV row as a reader sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvRowView {
    pub key: String,
    /// JSON text; `None` only in a keys-only listing.
    pub value: Option<Vec<u8>>,
    pub version: u64,
    pub expires_ms: Option<u64>,
    pub updated_ms: u64,
    /// When the row was created: kept by writes while it is live.
    pub created_ms: u64,
}

/// Why a KV write or check did not apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvReason {
    /// `expect: 0` met a live row.
    Exists,
    /// `expect: N > 0` (or a delete) met no live row.
    Absent,
    /// `expect: N` met another version.
    Version,
    /// An incr would cross its `min` or `max`.
    Limit,
    /// An incr met a live value that is not an integer.
    Type,
    /// A write named no lifetime and its namespace has no default
    /// expiration. Always refuses the whole call, `required` or not.
    NoLifetime,
}

impl KvReason {
    pub fn as_str(self) -> &'static str {
        match self {
            KvReason::Exists => "exists",
            KvReason::Absent => "absent",
            KvReason::Version => "version",
            KvReason::Limit => "limit",
            KvReason::Type => "type",
            KvReason::NoLifetime => "no_lifetime",
        }
    }
}

/// The answer to one KV operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvResult {
    Got(Option<KvRowView>),
    Many {
        rows: Vec<KvRowView>,
        missing: Vec<String>,
        truncated: bool,
    },
    Prefix {
        rows: Vec<KvRowView>,
        truncated: bool,
        next_after: Option<String>,
    },
    /// A put or incr applied (`row` is what is stored now), or a delete
    /// applied (`row` is `None`).
    Written {
        row: Option<KvRowView>,
    },
    Checked {
        version: u64,
    },
    /// A namespace's default expiration is now this (`None`: cleared).
    Configured {
        expiration: Option<crate::command::Lifetime>,
    },
    /// A write or check lost its precondition; `current` is the live row.
    NotApplied {
        reason: KvReason,
        current: Option<KvRowView>,
    },
}

/// A required KV operation lost its precondition, so nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvRefusal {
    /// Index inside the KV operations of the call.
    pub index: usize,
    pub reason: KvReason,
    pub current: Option<KvRowView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvOutcome {
    Done(Vec<KvResult>),
    Refused(KvRefusal),
}

/// Somebody holding a permit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockHolder {
    pub slot: u32,
    pub owner: Option<String>,
    pub token: u64,
    pub since_ms: Option<u64>,
    pub expires_ms: Option<u64>,
    pub renewed_ms: u64,
}

/// The answer to one lock operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockResult {
    /// `already`: the owner held this permit before the call.
    Acquired {
        slot: u32,
        token: u64,
        owner: Option<String>,
        already: bool,
    },
    /// Every permit is held.
    Held {
        holders: Vec<LockHolder>,
    },
    Renewed {
        slot: u32,
        token: u64,
    },
    Released {
        slot: u32,
    },
    /// A renew or release whose token is no longer the permit's.
    Lost {
        slot: u32,
        holders: Vec<LockHolder>,
    },
    Holders(Vec<LockHolder>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PushStatus {
    Queued,
    Duplicate,
    /// Refused: the queue holds `maxSize` messages already.
    Full,
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
    /// For a pop that asked for conflation: whether the group conflates
    /// (its stored policy wins over the request).
    #[serde(default)]
    pub conflation: Option<bool>,
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
        AckResult { success: false, error: Some(error.to_string()), ..Default::default() }
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
pub const ERR_UNRESOLVABLE: &str = "transaction is unresolvable, already committed, or acknowledgment is stale";
