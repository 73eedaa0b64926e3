//! Ephemeral queues: in-memory queues behind `/api/v1/ephemeral/*`.
//!
//! NOT DURABLE, AND NOT IN THE RAFT LOG. Everything here — messages, leases,
//! group positions and the options given to `configure` — lives in the
//! memory of the node that serves the request, and is lost when that node
//! stops, crashes or restarts. Nothing is proposed, written to the WAL or
//! snapshotted; the state machine does not know these queues exist, and a
//! durable queue and an ephemeral queue of the same name are unrelated.
//! That is the contract of the class (a queue for presence, typing
//! indicators, reply inboxes), not a shortcut: it is why a push is answered
//! without an fsync and a long poll wakes in transport time.
//!
//! What it does keep while the node runs: FIFO per (queue, partition);
//! per-group cursors (the same group competes, another group fans out, no
//! group is the queue mode); leases that hand a message back when they lapse;
//! deliveries counted per group, a message dropped (no DLQ) once a failure
//! spends `retryLimit` deliveries; byte and length bounds per queue and a
//! byte budget per node; idle implicit queues collected.
//!
//! Time is the node's wall clock, read in exactly one place ([`Store::now`])
//! through the [`Clock`] seam, never behind an earlier reading; tests inject
//! a clock of their own. One mutex guards the whole store: every operation
//! is a short walk over in-memory maps, and the node-wide byte budget needs
//! one consistent total anyway.

mod gauges;
mod options;
mod partition;
mod queue;
#[cfg(test)]
mod tests;
mod types;

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{json, Map, Value};

use regina_types::limits::{EPHEMERAL_NODE_BYTES_MAX, EPHEMERAL_QUEUES_MAX, EPHEMERAL_SWEEP_INTERVAL_MS};

pub use options::{Options, Policy, Window};
use partition::Settle;
use queue::Queue;
use types::parse_id;
pub use types::{check_name, AckOutcome, AckStatus, Clock, Delivered, EphemeralError, ErrorKind, PopRequest, Popped};

/// Partition of a push or pop that names none.
pub const DEFAULT_PARTITION: &str = "Default";
/// The group of a pop or ack that names none (the queue mode).
pub const QUEUE_MODE_GROUP: &str = "__QUEUE_MODE__";

pub struct Store {
    clock: Arc<dyn Clock>,
    /// This incarnation, in every message id, so an ack from before a
    /// restart answers `stale` instead of settling a stranger's message.
    epoch: String,
    /// Payload bytes all queues may hold together.
    budget: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    queues: BTreeMap<String, Queue>,
    /// Payload bytes of every queue together.
    bytes: usize,
    next_seq: u64,
    now_ms: u64,
    swept_ms: u64,
}

impl Inner {
    /// Runs `f` on a queue, keeping the node's byte total in step.
    fn with<R>(&mut self, name: &str, f: impl FnOnce(&mut Queue, &mut u64) -> R) -> Option<R> {
        let q = self.queues.get_mut(name)?;
        let before = q.bytes();
        let r = f(q, &mut self.next_seq);
        self.bytes = self.bytes - before + q.bytes();
        Some(r)
    }

    /// Makes sure `name` exists (an implicit queue when new).
    fn ensure(&mut self, name: &str, now: u64) -> Result<(), EphemeralError> {
        if !self.queues.contains_key(name) {
            if self.queues.len() >= EPHEMERAL_QUEUES_MAX {
                let message = format!("this node already holds {EPHEMERAL_QUEUES_MAX} ephemeral queues");
                return Err(EphemeralError { kind: ErrorKind::Unavailable, message });
            }
            self.queues.insert(name.to_string(), Queue::new(Options::default(), false, now));
        }
        Ok(())
    }

    fn sweep(&mut self, now: u64) {
        self.swept_ms = now;
        let names: Vec<String> = self.queues.keys().cloned().collect();
        for name in names {
            self.with(&name, |q, _| q.housekeep(now));
        }
        self.queues.retain(|_, q| !q.is_collectable(now));
    }
}

impl Default for Store {
    fn default() -> Self {
        Store::new()
    }
}

impl Store {
    pub fn new() -> Store {
        Store::with_clock(crate::clock::system())
    }

    pub fn with_clock(clock: Arc<dyn Clock>) -> Store {
        let epoch = format!("{:x}", uuid::Uuid::new_v4().as_u128() as u32);
        Store { clock, epoch, budget: EPHEMERAL_NODE_BYTES_MAX, inner: Mutex::new(Inner::default()) }
    }

    /// A store whose node budget is `bytes` instead of the limit, so tests
    /// can reach it without allocating it.
    #[cfg(test)]
    fn with_budget(clock: Arc<dyn Clock>, bytes: usize) -> Store {
        Store { budget: bytes, ..Store::with_clock(clock) }
    }

    /// The store's time: the clock, never behind an earlier reading. The
    /// only place the clock is read.
    fn now(&self, inner: &mut Inner) -> u64 {
        let t = self.clock.now_ms().max(inner.now_ms);
        inner.now_ms = t;
        t
    }

    /// Locks the store, reads the time, and sweeps every queue when the
    /// last sweep is old enough: housekeeping rides on traffic, so an idle
    /// node does no work.
    fn begin(&self) -> (parking_lot::MutexGuard<'_, Inner>, u64) {
        let mut g = self.inner.lock();
        let now = self.now(&mut g);
        if now >= g.swept_ms + EPHEMERAL_SWEEP_INTERVAL_MS {
            g.sweep(now);
        }
        (g, now)
    }

    /// Declares `queue` (creating it when absent) with `given` options on
    /// top of its current ones.
    pub fn configure(&self, queue: &str, given: &Map<String, Value>) -> Result<Value, EphemeralError> {
        check_name("queue", queue)?;
        let (mut g, now) = self.begin();
        let existed = g.queues.contains_key(queue);
        let base = g.queues.get(queue).map(|q| q.options.clone()).unwrap_or_default();
        let options = base.merged(given)?;
        g.ensure(queue, now)?;
        let q = g.queues.get_mut(queue).expect("ensured");
        q.options = options;
        q.declared = true;
        q.last_active_ms = now;
        Ok(json!({ "queue": queue, "declared": true, "created": !existed, "options": q.options.to_json() }))
    }

    /// Empties `queue`; answers how many messages were dropped.
    pub fn reset(&self, queue: &str) -> Result<usize, EphemeralError> {
        check_name("queue", queue)?;
        let (mut g, now) = self.begin();
        Ok(g.with(queue, |q, _| {
            q.last_active_ms = now;
            q.reset()
        })
        .unwrap_or(0))
    }

    /// Removes `queue` with its options; answers (deleted, declared).
    pub fn delete(&self, queue: &str) -> Result<(bool, bool), EphemeralError> {
        check_name("queue", queue)?;
        let (mut g, _) = self.begin();
        let Some(q) = g.queues.remove(queue) else { return Ok((false, false)) };
        g.bytes -= q.bytes();
        // Parked pops look again and find (or re-create) the queue.
        q.notify.notify_waiters();
        Ok((true, q.declared))
    }

    /// Appends payloads (JSON texts) to one partition, all or nothing.
    pub fn push(&self, queue: &str, partition: Option<&str>, payloads: Vec<Arc<str>>) -> Result<usize, EphemeralError> {
        check_name("queue", queue)?;
        let partition = partition.unwrap_or(DEFAULT_PARTITION);
        check_name("partition", partition)?;
        let (mut g, now) = self.begin();
        g.ensure(queue, now)?;
        let others = g.bytes - g.queues[queue].bytes();
        let room = self.budget.saturating_sub(others);
        g.with(queue, |q, seq| {
            q.housekeep(now);
            q.push(partition, payloads, now, seq, room)
        })
        .expect("ensured")
    }

    /// Claims what a pop may take now, or holds for the queue's window.
    pub fn pop(&self, req: &PopRequest) -> Result<Popped, EphemeralError> {
        check_name("queue", &req.queue)?;
        if let Some(p) = &req.partition {
            check_name("partition", p)?;
        }
        let group = req.group.as_deref().unwrap_or(QUEUE_MODE_GROUP);
        check_name("group", group)?;
        let (mut g, now) = self.begin();
        g.ensure(&req.queue, now)?;
        let epoch = &self.epoch;
        g.with(&req.queue, |q, _| {
            q.housekeep(now);
            q.meet_group(group, now)?;
            q.last_active_ms = now;
            let part = req.partition.as_deref();
            let ready = q.ready(group, part).0;
            let ready_since = (ready > 0).then(|| req.ready_since_ms.unwrap_or(now));
            let hold = match ready_since {
                Some(since) if req.hold => q.window_holds(ready, req.batch, since, now),
                _ => None,
            };
            let claimed = if hold.is_some() { Vec::new() } else { q.claim(group, part, req.batch, req.auto_ack, now) };
            let messages: Vec<Delivered> = claimed
                .into_iter()
                .map(|(p, c)| Delivered {
                    id: format!("e:{epoch}:{p}:{}", c.seq),
                    partition: p,
                    attempts: c.attempts,
                    payload: c.payload,
                })
                .collect();
            Ok(Popped {
                ready_since_ms: if messages.is_empty() { ready_since } else { None },
                messages,
                notify: q.notify.clone(),
                wake_at_ms: q.ready(group, part).1.into_iter().chain(hold.flatten()).min(),
                now_ms: now,
            })
        })
        .expect("ensured")
    }

    /// Settles deliveries of `group` (none = queue mode); one outcome per
    /// ack, in order.
    pub fn ack(
        &self,
        queue: &str,
        group: Option<&str>,
        acks: &[(String, AckStatus)],
    ) -> Result<Vec<AckOutcome>, EphemeralError> {
        check_name("queue", queue)?;
        let group = group.unwrap_or(QUEUE_MODE_GROUP);
        check_name("group", group)?;
        let (mut g, now) = self.begin();
        let epoch = self.epoch.clone();
        let outcomes = g.with(queue, |q, _| {
            q.housekeep(now);
            let out = acks
                .iter()
                .map(|(id, status)| match parse_id(&epoch, id) {
                    None => AckOutcome::Stale,
                    Some((p, seq)) => match q.settle(group, p, seq, *status == AckStatus::Completed, now) {
                        Settle::Done | Settle::Dropped => AckOutcome::Acked,
                        Settle::Again => AckOutcome::Redelivered,
                        Settle::NoLease => AckOutcome::Unknown,
                    },
                })
                .collect();
            q.settled();
            out
        });
        Ok(outcomes.unwrap_or_else(|| {
            acks.iter()
                .map(|(id, _)| if parse_id(&epoch, id).is_some() { AckOutcome::Unknown } else { AckOutcome::Stale })
                .collect()
        }))
    }

    /// Every queue of this node, with its gauges.
    pub fn queues(&self) -> Value {
        let (g, _) = self.begin();
        let queues: Vec<Value> = g.queues.iter().map(|(name, q)| q.summary(name)).collect();
        json!({ "queues": queues, "bytes": g.bytes, "bytesMax": self.budget })
    }

    /// One queue's gauges, or 404 `ephemeral_queue_not_found`.
    pub fn depth(&self, queue: &str) -> Result<Value, EphemeralError> {
        check_name("queue", queue)?;
        let (g, _) = self.begin();
        match g.queues.get(queue) {
            Some(q) => Ok(q.depth(queue)),
            None => Err(EphemeralError {
                kind: ErrorKind::QueueNotFound,
                message: format!("no ephemeral queue named {queue:?} exists on this node"),
            }),
        }
    }
}
