//! What one log entry carries. Everything the state machine needs to decide
//! is in here: the leader's clock reading, minted ids, and the request.
//! Entries are encoded with bincode; the enum's variant order is part of the
//! on-disk format, so new variants go at the end.

use serde::{Deserialize, Serialize};

use crate::options::OptionsPatch;

/// One log entry: a command and the leader's time when it was proposed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub now_ms: u64,
    pub command: Command,
}

impl Entry {
    pub fn encode(&self) -> Vec<u8> {
        bincode::serialize(self).expect("entries always encode")
    }

    pub fn decode(bytes: &[u8]) -> Result<Entry, String> {
        bincode::deserialize(bytes).map_err(|e| format!("undecodable log entry: {e}"))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Command {
    /// Nothing to do; used to commit a new leader's term and as a read barrier.
    Noop,
    Push(PushCmd),
    Pop(PopCmd),
    Ack(AckCmd),
    ExtendLease {
        lease_id: String,
    },
    Configure(ConfigureCmd),
    DeleteQueue {
        queue: String,
    },
    /// Drops messages past their queue's retention and leases past expiry.
    Sweep,
    /// One step: acks and pushes that commit together or not at all.
    Transaction(TxnCmd),
    /// Forgets a group's cursors on one queue or all; with `delete_metadata`
    /// also its registration, so its next pop subscribes afresh.
    DeleteGroup {
        group: String,
        queue: Option<String>,
        delete_metadata: bool,
    },
    /// Moves a group's cursors on a queue to the end or to a time. The one
    /// way a cursor moves back: an operator's explicit request.
    Seek {
        group: String,
        queue: String,
        target: SeekTarget,
    },
    /// Re-seeds a group from a time on every queue where it exists.
    SetSubscription {
        group: String,
        from_ms: u64,
    },
    /// Drops one dead-letter row.
    DeleteDeadLetter {
        partition_id: u64,
        transaction_id: String,
    },
    /// Replays one dead-letter row as a new message of its partition.
    RetryDeadLetter {
        partition_id: u64,
        transaction_id: String,
        item: PushItem,
    },
    /// Records a processing trace event for a message.
    RecordTrace(crate::traces::TraceEvent),
    /// A KV call: its operations in order, all or nothing when one that is
    /// `required` loses its precondition.
    Kv(KvCmd),
    /// A locks call: independent operations, each on a different lock.
    Locks(LocksCmd),
    /// Schedules and cancels timers.
    Timers(Vec<crate::timers::TimerOp>),
    /// Fires every timer due at the entry's time (proposed by the leader).
    FireTimers,
    /// Independent requests that arrived together, applied in order at the
    /// entry's time. Each keeps its own all-or-nothing rule; one refused
    /// request does not undo another. The leader batches them so that one
    /// log entry (and one fsync) carries many requests.
    Batch(Vec<Command>),
    /// A command applied to one tenant's isolated state (see `tenants`).
    ForTenant {
        tenant: String,
        command: Box<Command>,
    },
    /// A job-queue call: its operations in order, all or nothing when one
    /// that is `required` is refused (see `jobs`).
    Jobs(crate::jobs::JobsCmd),
    /// A step that also carries job riders: every rider is required, and
    /// the step commits with them or not at all.
    Step {
        txn: TxnCmd,
        jobs: Vec<crate::jobs::JobOp>,
    },
}

impl Command {
    /// A rough size of the command's encoding, enough to keep batches well
    /// under the log's record limit without encoding them twice.
    pub fn approx_bytes(&self) -> usize {
        const SMALL: usize = 256;
        match self {
            Command::Push(p) => p.items.iter().map(PushItem::approx_bytes).sum::<usize>() + SMALL,
            Command::Transaction(t) => t.approx_bytes(),
            Command::Step { txn, jobs } => txn.approx_bytes() + jobs.iter().map(|j| j.approx_bytes()).sum::<usize>(),
            Command::Jobs(j) => j.ops.iter().map(|j| j.approx_bytes()).sum::<usize>() + SMALL,
            Command::Kv(k) => k.ops.iter().map(KvOp::approx_bytes).sum::<usize>() + SMALL,
            Command::RetryDeadLetter { item, .. } => item.approx_bytes() + SMALL,
            Command::Batch(cmds) => cmds.iter().map(Command::approx_bytes).sum(),
            Command::ForTenant { tenant, command } => tenant.len() + command.approx_bytes(),
            _ => SMALL,
        }
    }
}

impl TxnCmd {
    fn approx_bytes(&self) -> usize {
        const SMALL: usize = 256;
        let pushes: usize = self
            .ops
            .iter()
            .map(|op| match op {
                TxnOp::Push(item) => item.approx_bytes(),
                TxnOp::Ack { .. } => SMALL,
            })
            .sum();
        let kv: usize = self.kv.iter().map(KvOp::approx_bytes).sum();
        pushes + kv + self.timers.len() * SMALL + SMALL
    }
}

impl PushItem {
    fn approx_bytes(&self) -> usize {
        self.queue.len() + self.partition.len() + self.transaction_id.len() + self.payload.len() + 64
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SeekTarget {
    End,
    Time(u64),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushItem {
    pub queue: String,
    pub partition: String,
    pub transaction_id: String,
    pub trace_id: Option<[u8; 16]>,
    /// Minted by the leader, so every replica stores the same id.
    pub message_id: [u8; 16],
    /// The payload's JSON text, exactly as received. Encoded as bytes (the
    /// same layout bincode gives a `Vec<u8>`, decoded in one copy instead
    /// of byte by byte, which dominated log replay).
    #[serde(with = "serde_bytes")]
    pub payload: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushCmd {
    pub items: Vec<PushItem>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PopTarget {
    /// Any partition of a queue, or one named partition.
    Queue { queue: String, partition: Option<String> },
    /// Any queue labelled with this namespace and/or task.
    Discovery { namespace: Option<String>, task: Option<String> },
}

/// How a consumer group that meets a queue for the first time is seeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Subscription {
    /// From the oldest kept message.
    All,
    /// Only messages pushed after the group's first contact.
    New,
    /// From the first message created at or after this instant (ms).
    From(u64),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PopCmd {
    pub target: PopTarget,
    /// `__QUEUE_MODE__` for queue mode.
    pub group: String,
    /// Most messages in total across claimed partitions.
    pub batch: u32,
    /// Most partitions one pop claims.
    pub max_partitions: u32,
    /// Minted by the leader; shared by every partition this pop claims.
    pub lease_id: String,
    /// Lease length override in ms (`leaseSeconds`); else the queue's.
    pub lease_ms: Option<u64>,
    /// Commit at delivery: no lease, cursor moves at once.
    pub auto_ack: bool,
    /// Seeding of a group that meets a queue for the first time.
    pub subscription: Subscription,
    /// Ask for last-value delivery; stored with the group at registration.
    #[serde(default)]
    pub conflation: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AckStatus {
    Completed,
    Failed,
    Retry,
    Dlq,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AckItem {
    pub partition_id: u64,
    pub transaction_id: String,
    pub status: AckStatus,
    pub error: Option<String>,
    pub lease_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AckCmd {
    pub group: String,
    pub items: Vec<AckItem>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigureCmd {
    pub queue: String,
    /// `Some(None)` clears the label; `None` leaves it.
    pub namespace: Option<Option<String>>,
    pub task: Option<Option<String>>,
    pub options: OptionsPatch,
    /// `mode: replace`: options not named go back to their defaults.
    pub replace: bool,
}

/// One operation of a transaction, in request order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TxnOp {
    Push(PushItem),
    Ack { group: String, item: AckItem },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TxnCmd {
    pub ops: Vec<TxnOp>,
    /// KV riders, judged after the acks and applied with the rest.
    #[serde(default)]
    pub kv: Vec<KvOp>,
    /// Timer riders: applied only if the step commits.
    #[serde(default)]
    pub timers: Vec<crate::timers::TimerOp>,
}

/// One KV operation. Lifetimes travel as seconds from the entry's time
/// (`None` is forever), so every replica computes the same expiry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvOp {
    Get {
        ns: String,
        key: String,
    },
    GetMany {
        ns: String,
        keys: Vec<String>,
    },
    GetPrefix {
        ns: String,
        prefix: String,
        after: Option<String>,
        limit: u32,
        keys_only: bool,
    },
    /// `putIfAbsent` is a put with `expect: Some(0)`.
    Put {
        ns: String,
        key: String,
        #[serde(with = "serde_bytes")]
        value: Vec<u8>,
        ttl_seconds: Option<u64>,
        expect: Option<u64>,
        required: bool,
    },
    Delete {
        ns: String,
        key: String,
        expect: Option<u64>,
        required: bool,
    },
    Incr {
        ns: String,
        key: String,
        delta: i64,
        min: Option<i64>,
        max: Option<i64>,
        ttl_seconds: Option<u64>,
        required: bool,
    },
    /// Asserts a version (`0`: must not exist) and writes nothing.
    Check {
        ns: String,
        key: String,
        expect: u64,
        required: bool,
    },
}

impl KvOp {
    pub fn is_write(&self) -> bool {
        matches!(self, KvOp::Put { .. } | KvOp::Delete { .. } | KvOp::Incr { .. })
    }

    fn approx_bytes(&self) -> usize {
        let keys = match self {
            KvOp::Get { key, .. } | KvOp::Delete { key, .. } | KvOp::Incr { key, .. } | KvOp::Check { key, .. } => {
                key.len()
            }
            KvOp::Put { key, value, .. } => key.len() + value.len(),
            KvOp::GetMany { keys, .. } => keys.iter().map(String::len).sum(),
            KvOp::GetPrefix { prefix, .. } => prefix.len(),
        };
        keys + 64
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvCmd {
    pub ops: Vec<KvOp>,
}

/// One lock operation. A lock is a semaphore of one permit; slot 0 is the
/// only slot a lock has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockOp {
    Acquire { name: String, ttl_seconds: u64, owner: Option<String>, limit: u32 },
    Renew { name: String, token: u64, ttl_seconds: u64, slot: u32, owner: Option<String> },
    Release { name: String, token: u64, slot: u32 },
    Get { name: String },
}

impl LockOp {
    pub fn name(&self) -> &str {
        match self {
            LockOp::Acquire { name, .. }
            | LockOp::Renew { name, .. }
            | LockOp::Release { name, .. }
            | LockOp::Get { name } => name,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocksCmd {
    pub ops: Vec<LockOp>,
}

#[cfg(test)]
mod tests {
    use serde::Serialize;

    #[derive(Serialize)]
    struct Plain {
        a: u8,
        payload: Vec<u8>,
    }

    #[derive(Serialize)]
    struct AsBytes {
        a: u8,
        #[serde(with = "serde_bytes")]
        payload: Vec<u8>,
    }

    /// Logs and snapshots written before payloads were marked as bytes
    /// must still decode: the two encodings are the same bytes.
    #[test]
    fn bytes_fields_keep_the_encoding_of_a_byte_vector() {
        let payload = b"{\"k\":[1,2,3]}".to_vec();
        let plain = bincode::serialize(&Plain { a: 7, payload: payload.clone() }).unwrap();
        let bytes = bincode::serialize(&AsBytes { a: 7, payload }).unwrap();
        assert_eq!(plain, bytes);
    }
}
