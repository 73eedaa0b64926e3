//! A step: the acks, pushes, KV writes, timers and job operations of one
//! unit of work, committed as one durable write or not at all.
//!
//! The broker judges a step in a fixed order: every ack first (a step whose
//! ack was already committed is refused, so a step sent twice never pushes
//! twice), then the KV operations (a `required` one that loses, a `once`
//! marker that exists, a lock guard that no longer holds), then the job
//! riders (every one must apply: a lost lease, an id already taken), and
//! only then writes anything. A refusal is an answer ([`StepOutcome::Refused`]), not
//! an error.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::ack::Ack;
use crate::client::{bool_of, opt_str, str_of, u64_of, Client, Error, Result};
use crate::handle::{LockHandle, Shared};
use crate::job_answers::Claim;
use crate::job_ops::JobOp;
use crate::kv::{KvOp, Lifetime};
use crate::locks::Permit;
use crate::queue::{Message, PushItem};
use crate::timers::{cancel_wire, Timer};

/// Times a step is sent again because the caller's own lock renewal moved
/// the token between reading it and the broker judging it.
const GUARD_RESENDS: usize = 3;
/// How long a resend waits for a renewal already on its way.
const RENEWAL_WAIT: Duration = Duration::from_millis(500);

/// A lock whose permit a step requires: the step commits only while the
/// permit is still the one named here.
pub struct Guard(GuardKind);

enum GuardKind {
    /// A raw permit: its token is fixed.
    Fixed(Value),
    /// A renewing handle: the token is read at each send.
    Live(Arc<Shared>),
}

impl From<&Permit> for Guard {
    fn from(p: &Permit) -> Guard {
        Guard(GuardKind::Fixed(Permit::guard_op(&p.name, p.slot, p.token)))
    }
}

impl From<&LockHandle> for Guard {
    fn from(h: &LockHandle) -> Guard {
        Guard(GuardKind::Live(h.shared()))
    }
}

/// A step being built. Building sends nothing; [`Step::commit`] does, and
/// may be called again to send the very same step (same transaction ids).
pub struct Step {
    client: Client,
    operations: Vec<Value>,
    leases: Vec<String>,
    guards: Vec<Guard>,
    kv: Vec<Value>,
    timers: Vec<Value>,
    jobs: Vec<Value>,
}

impl Client {
    pub fn step(&self) -> Step {
        Step {
            client: self.clone(),
            operations: Vec::new(),
            leases: Vec::new(),
            guards: Vec::new(),
            kv: Vec::new(),
            timers: Vec::new(),
            jobs: Vec::new(),
        }
    }
}

impl Step {
    /// Acks a popped message as completed.
    pub fn ack(self, m: &Message) -> Step {
        self.settle(Ack::completed(m))
    }

    /// Nacks a popped message.
    pub fn nack(self, m: &Message, error: impl Into<String>) -> Step {
        self.settle(Ack::failed(m, error))
    }

    /// Adds an acknowledgement of any status. An ack naming a lease is
    /// fenced by it: a lapsed lease refuses the whole step.
    pub fn settle(mut self, a: Ack) -> Step {
        let mut op = a.wire();
        op["type"] = json!("ack");
        if let Some(g) = &a.consumer_group {
            op["consumerGroup"] = json!(g);
        }
        if let Some(l) = a.lease_id.filter(|l| !self.leases.contains(l)) {
            self.leases.push(l);
        }
        self.operations.push(op);
        self
    }

    /// Pushes `payload` to `queue`/`partition` with a fresh transaction id.
    pub fn push(self, queue: impl Into<String>, partition: impl Into<String>, payload: Value) -> Step {
        self.push_item(PushItem::new(queue, payload).partition(partition))
    }

    pub fn push_item(mut self, item: PushItem) -> Step {
        self.operations.push(json!({ "type": "push", "items": [item.wire()] }));
        self
    }

    pub fn put(self, ns: &str, key: &str, value: Value, lifetime: Lifetime) -> Step {
        self.kv(KvOp::put(ns, key, value, lifetime))
    }

    /// Writes only when absent; when present, the rest of the step still commits.
    pub fn put_if_absent(self, ns: &str, key: &str, value: Value, lifetime: Lifetime) -> Step {
        self.kv(KvOp::put_if_absent(ns, key, value, lifetime))
    }

    /// A marker that must not exist yet: the step commits only if it writes
    /// it, so the same work is done once even when its input arrives twice.
    pub fn once(self, ns: &str, key: &str, lifetime: Lifetime) -> Step {
        self.kv(KvOp::put_if_absent(ns, key, json!(true), lifetime).required())
    }

    /// Any KV operation except a prefix scan.
    pub fn kv(mut self, op: KvOp) -> Step {
        self.kv.push(op.0);
        self
    }

    pub fn schedule(mut self, timer: Timer) -> Step {
        self.timers.push(timer.wire("schedule"));
        self
    }

    pub fn cancel_timer(mut self, queue: &str, key: &str) -> Step {
        self.timers.push(cancel_wire(queue, key));
        self
    }

    /// A job operation riding on the step: enqueue, complete, fail,
    /// release, retry or cancel. Every rider must apply, or nothing of the
    /// step is written (the refusal says `job_precondition` and its code).
    pub fn job(mut self, op: JobOp) -> Step {
        self.jobs.push(op.0);
        self
    }

    /// Enqueues a job in the queue's empty scope, ready at once.
    pub fn enqueue_job(self, queue: &str, id: &str, payload: Value) -> Step {
        self.job(JobOp::enqueue(queue, id, payload))
    }

    /// Completes a claimed job with `result`: the job is done exactly when
    /// the step's other writes are.
    pub fn complete_job(self, claim: &Claim, result: Value) -> Step {
        self.job(JobOp::complete(claim, result))
    }

    /// Commits only while the lock's permit is still this holder's. Guards
    /// are judged before the step's other KV operations, in the order added.
    pub fn guard(mut self, lock: impl Into<Guard>) -> Step {
        self.guards.push(lock.into());
        self
    }

    fn body(&self) -> (Value, Vec<u64>) {
        let mut tokens = Vec::new();
        let mut kv: Vec<Value> = self
            .guards
            .iter()
            .map(|g| match &g.0 {
                GuardKind::Fixed(op) => {
                    tokens.push(u64_of(op, "expect"));
                    op.clone()
                }
                GuardKind::Live(s) => {
                    let (p, token) = (s.permit(), *s.token.borrow());
                    tokens.push(token);
                    Permit::guard_op(&p.name, p.slot, token)
                }
            })
            .collect();
        kv.extend(self.kv.iter().cloned());
        let mut body = json!({ "operations": self.operations, "requiredLeases": self.leases });
        if !kv.is_empty() {
            body["kv"] = json!(kv);
        }
        if !self.timers.is_empty() {
            body["timers"] = json!(self.timers);
        }
        if !self.jobs.is_empty() {
            body["jobs"] = json!(self.jobs);
        }
        (body, tokens)
    }

    /// Sends the step. When a renewing handle's guard lost only because the
    /// handle's own renewal replaced the token, the step is sent again with
    /// the new token (up to three times); any other lost guard marks the
    /// handle lost.
    pub async fn commit(&self) -> Result<StepOutcome> {
        let nothing = self.operations.is_empty() && self.guards.is_empty() && self.kv.is_empty();
        if nothing && self.timers.is_empty() && self.jobs.is_empty() {
            return Err(Error::Invalid("a step needs at least one operation".into()));
        }
        let mut resends = 0;
        loop {
            let (body, tokens) = self.body();
            let answer = self.client.post("/api/v1/transaction", &body).await?;
            if bool_of(&answer, "success") {
                let results = answer.get("results").and_then(Value::as_array).cloned().unwrap_or_default();
                // Job riders answer last in the flat list, marked `type: job`.
                let jobs = results.iter().filter(|r| r.get("type").and_then(Value::as_str) == Some("job")).cloned();
                return Ok(StepOutcome::Committed(Committed {
                    transaction_id: str_of(&answer, "transactionId"),
                    jobs: jobs.collect(),
                    results,
                }));
            }
            let mut refused = Refused::from_wire(&answer);
            let guard_at = (refused.reason == "kv_precondition")
                .then(|| refused.failed_index.checked_sub(self.operations.len()))
                .flatten()
                .filter(|i| *i < self.guards.len());
            let Some(gi) = guard_at else { return Ok(StepOutcome::Refused(refused)) };
            refused.lost_guard = true;
            if let GuardKind::Live(shared) = &self.guards[gi].0 {
                let owner = shared.permit().owner;
                let ours = refused.kv_reason.as_deref() == Some("version")
                    && refused.value.get("owner").and_then(Value::as_str) == Some(owner.as_str());
                if !ours {
                    shared.mark_lost();
                } else if resends < GUARD_RESENDS && !shared.is_lost() {
                    resends += 1;
                    await_new_token(shared, tokens[gi]).await;
                    continue;
                }
            }
            return Ok(StepOutcome::Refused(refused));
        }
    }
}

/// Waits briefly for a renewal on its way; when none lands, renews now (a
/// renewal by the row's owner succeeds even with a stale token).
async fn await_new_token(shared: &Shared, sent: u64) {
    let mut rx = shared.token.subscribe();
    if *rx.borrow_and_update() == sent {
        let _ = tokio::time::timeout(RENEWAL_WAIT, rx.changed()).await;
    }
    if *shared.token.borrow() == sent {
        let _ = shared.renew().await;
    }
}

/// What happened to a step.
#[derive(Debug, Clone, PartialEq)]
pub enum StepOutcome {
    Committed(Committed),
    Refused(Refused),
}

impl StepOutcome {
    pub fn is_committed(&self) -> bool {
        matches!(self, StepOutcome::Committed(_))
    }

    pub fn refused(&self) -> Option<&Refused> {
        match self {
            StepOutcome::Refused(r) => Some(r),
            StepOutcome::Committed(_) => None,
        }
    }
}

/// A committed step.
#[derive(Debug, Clone, PartialEq)]
pub struct Committed {
    pub transaction_id: String,
    /// One raw result per pushed item and ack (in the order added), then per
    /// KV operation (guards first), then per timer, then per job rider.
    pub results: Vec<Value>,
    /// The job riders' results alone, in the order added (each also in `results`).
    pub jobs: Vec<Value>,
}

/// A refused step: nothing of it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    /// `rejected_ack` (an ack was stale, already committed or unknown),
    /// `kv_precondition` (a guard, `once` or `required` operation lost) or
    /// `job_precondition` (a job rider did not apply).
    pub reason: String,
    /// Index of the refused operation in the flat space of [`Committed::results`].
    pub failed_index: usize,
    /// For `job_precondition`: the rider's index among the job riders.
    pub job_index: Option<usize>,
    /// For `job_precondition`: the rider's code (`LEASE_LOST`, `JOB_EXISTS`, ...).
    pub code: Option<String>,
    /// For `kv_precondition`: `exists`, `version` or `absent`.
    pub kv_reason: Option<String>,
    /// For `kv_precondition`: the row's current version (0: absent) and value.
    pub version: Option<u64>,
    pub value: Value,
    /// True when the operation that lost was a lock guard.
    pub lost_guard: bool,
    pub error: String,
}

impl Refused {
    fn from_wire(v: &Value) -> Refused {
        Refused {
            reason: str_of(v, "reason"),
            failed_index: u64_of(v, "failedIndex") as usize,
            kv_reason: v.get("kvReason").and_then(Value::as_str).map(str::to_string),
            version: v.get("version").and_then(Value::as_u64),
            value: v.get("value").cloned().unwrap_or(Value::Null),
            lost_guard: false,
            job_index: v.get("jobIndex").and_then(Value::as_u64).map(|i| i as usize),
            code: opt_str(v, "code"),
            error: str_of(v, "error"),
        }
    }
}
