//! What one log entry carries. Everything the state machine needs to decide
//! is in here: the leader's clock reading, minted ids, and the request.
//! Entries are encoded with bincode; the enum's variant order is part of the
//! on-disk format, so new variants go at the end (pinned by
//! `crates/consensus/tests/formats.rs` and its fixtures).

use std::sync::Arc;

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
    /// Shared: the log keeps each entry it appends and hands a copy of it
    /// to the state machine, and a push is most of the log's bytes. Encoded
    /// as the `PushCmd` itself (the `Arc` adds no bytes).
    Push(Arc<PushCmd>),
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
    /// Sets a queue's timer retry options (creating the queue like a
    /// configure does). The configure route proposes it with the
    /// `Configure` of the same request, in one `Batch`, after it.
    ConfigureTimerPolicy {
        queue: String,
        policy: crate::options::TimerPolicyPatch,
    },
    /// Extends a lease by a length the caller names (Queen's
    /// `{"seconds": N}`) instead of the lease's own duration.
    ExtendLeaseFor {
        lease_id: String,
        duration_ms: u64,
    },
    /// A streams call: a query's registration, a cycle (state changes,
    /// sink pushes and the source ack, all or nothing) or a claim of idle
    /// partitions (see `streams`).
    Stream(crate::streams::StreamCmd),
    /// [`Command::Seek`] on one partition of the queue: only that
    /// partition's cursor moves, and only the group's lease on it ends.
    SeekPartition {
        group: String,
        queue: String,
        partition: String,
        target: SeekTarget,
    },
}

impl Command {
    /// A push of `items`.
    pub fn push(items: Vec<PushItem>) -> Command {
        Command::Push(Arc::new(PushCmd { items }))
    }

    /// Whether applying it can make the state or the body files grow:
    /// pushes (steps, timer schedules, dead-letter retries, stream cycles
    /// and traces among them), KV writes and job enqueues. With the disk
    /// past its high watermark these are refused; what only settles or
    /// removes (pops, acks, deletes, seeks, sweeps, lock calls, firing
    /// timers already accepted) still runs.
    pub fn grows_storage(&self) -> bool {
        match self {
            Command::Push(_)
            | Command::Transaction(_)
            | Command::Step { .. }
            | Command::RecordTrace(_)
            | Command::RetryDeadLetter { .. }
            | Command::Stream(_) => true,
            Command::Kv(k) => k.ops.iter().any(|op| {
                matches!(op, KvOp::Put { .. } | KvOp::PutWith { .. } | KvOp::Incr { .. } | KvOp::IncrWith { .. })
            }),
            Command::Timers(ops) => ops
                .iter()
                .any(|op| matches!(op, crate::timers::TimerOp::Schedule(_) | crate::timers::TimerOp::ScheduleAt(_))),
            Command::Jobs(j) => j.ops.iter().any(|op| matches!(op, crate::jobs::JobOp::Enqueue { .. })),
            Command::Batch(cs) => cs.iter().any(Command::grows_storage),
            Command::ForTenant { command, .. } => command.grows_storage(),
            Command::Noop
            | Command::Pop(_)
            | Command::Ack(_)
            | Command::ExtendLease { .. }
            | Command::ExtendLeaseFor { .. }
            | Command::Configure(_)
            | Command::DeleteQueue { .. }
            | Command::Sweep
            | Command::DeleteGroup { .. }
            | Command::Seek { .. }
            | Command::SeekPartition { .. }
            | Command::SetSubscription { .. }
            | Command::DeleteDeadLetter { .. }
            | Command::Locks(_)
            | Command::FireTimers
            | Command::ConfigureTimerPolicy { .. } => false,
        }
    }

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
            Command::Stream(crate::streams::StreamCmd::Cycle(c)) => c.approx_bytes(),
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

/// One KV operation. Lifetimes travel as amounts relative to the entry's
/// time (or as an absolute instant), so every replica computes the same
/// expiry. The parser emits `PutWith` and `IncrWith`; `Put` and `Incr`
/// (seconds, `None` forever) stay for entries already in logs.
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
    /// A put naming its lifetime as a [`Lifetime`]; `None` takes the
    /// namespace's default expiration (and refuses the call without one).
    PutWith {
        ns: String,
        key: String,
        #[serde(with = "serde_bytes")]
        value: Vec<u8>,
        lifetime: Option<Lifetime>,
        expect: Option<u64>,
        required: bool,
    },
    /// An incr naming its lifetime as a [`Lifetime`] (`None`: the
    /// namespace default).
    IncrWith {
        ns: String,
        key: String,
        delta: i64,
        min: Option<i64>,
        max: Option<i64>,
        lifetime: Option<Lifetime>,
        required: bool,
    },
    /// Sets (`Some`) or clears (`None`) the lifetime a write of `ns` that
    /// names none takes.
    Configure {
        ns: String,
        expiration: Option<Lifetime>,
    },
    /// Every live row of a namespace in key order, one page after `after`.
    Scan {
        ns: String,
        after: Option<String>,
        limit: u32,
        keys_only: bool,
    },
    /// Gives a live row a new deadline from its lifetime (`None`: the
    /// namespace default) without changing its value; a write otherwise.
    Touch {
        ns: String,
        key: String,
        lifetime: Option<Lifetime>,
        expect: Option<u64>,
        required: bool,
    },
}

/// How long a written KV row lives. Relative kinds travel as amounts, never
/// as instants computed at the edge: the state turns them into a deadline
/// from the entry's time (and the row's creation), so every replica agrees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Lifetime {
    Forever,
    /// `ttlSeconds`: the write's time plus this many seconds.
    Seconds(u64),
    /// `expiresAt`: this instant, ms since the epoch.
    At(u64),
    /// `afterCreationMs`: the row's creation plus this many ms; a write to
    /// a live row keeps its creation, so it keeps the deadline.
    AfterCreation(u64),
    /// `afterUpdateMs`: the write's time plus this many ms, renewed by
    /// every write.
    AfterUpdate(u64),
}

impl KvOp {
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            KvOp::Put { .. }
                | KvOp::Delete { .. }
                | KvOp::Incr { .. }
                | KvOp::PutWith { .. }
                | KvOp::IncrWith { .. }
                | KvOp::Configure { .. }
                | KvOp::Touch { .. }
        )
    }

    fn approx_bytes(&self) -> usize {
        let keys = match self {
            KvOp::Get { key, .. }
            | KvOp::Delete { key, .. }
            | KvOp::Incr { key, .. }
            | KvOp::IncrWith { key, .. }
            | KvOp::Touch { key, .. }
            | KvOp::Check { key, .. } => key.len(),
            KvOp::Put { key, value, .. } | KvOp::PutWith { key, value, .. } => key.len() + value.len(),
            KvOp::GetMany { keys, .. } => keys.iter().map(String::len).sum(),
            KvOp::GetPrefix { prefix, .. } => prefix.len(),
            KvOp::Configure { ns, .. } => ns.len(),
            KvOp::Scan { after, .. } => after.as_ref().map_or(0, String::len),
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

    /// A KV put as logs written before lifetimes held it: variant 3 of
    /// `KvOp`, then its fields in order. It must still decode to the same
    /// operation, so the variants that came later went at the end.
    #[test]
    fn an_old_kv_put_entry_still_decodes_as_a_put() {
        use super::KvOp;
        let mut old = 3u32.to_le_bytes().to_vec();
        for text in ["ns", "k", "1"] {
            old.extend((text.len() as u64).to_le_bytes());
            old.extend(text.as_bytes());
        }
        old.push(1); // ttl_seconds: Some(
        old.extend(60u64.to_le_bytes()); // 60)
        old.push(0); // expect: None
        old.push(1); // required: true
        let op: KvOp = bincode::deserialize(&old).unwrap();
        let want = KvOp::Put {
            ns: "ns".into(),
            key: "k".into(),
            value: b"1".to_vec(),
            ttl_seconds: Some(60),
            expect: None,
            required: true,
        };
        assert_eq!(op, want);
        assert_eq!(bincode::serialize(&want).unwrap(), old);
    }
}
