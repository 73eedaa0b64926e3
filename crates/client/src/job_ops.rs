//! Jobs operations in their wire form: what [`Jobs::batch`](crate::Jobs::batch)
//! sends and what a step carries as riders.
//!
//! Every operation names its queue and scope (the empty scope unless
//! [`JobOp::scope`] says otherwise). Operations on a claimed job take the
//! [`Claim`], so the owner and token sent are the ones the broker handed out.

use std::time::Duration;

use serde_json::{json, Value};

use crate::job_answers::{Claim, JobState};

fn millis(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

/// One jobs operation.
#[derive(Debug, Clone, PartialEq)]
pub struct JobOp(pub(crate) Value);

impl JobOp {
    fn new(op: &str, queue: &str) -> JobOp {
        JobOp(json!({ "op": op, "queue": queue }))
    }

    fn on(op: &str, queue: &str, id: &str) -> JobOp {
        let mut o = JobOp::new(op, queue);
        o.0["id"] = json!(id);
        o
    }

    /// An operation on a claimed job: its queue, scope, id, owner and token.
    fn leased(op: &str, c: &Claim) -> JobOp {
        JobOp(json!({
            "op": op, "queue": c.queue, "scope": c.scope, "id": c.id, "owner": c.owner, "token": c.token.0,
        }))
    }

    /// The operation name (`enqueue`, `claim`, ...).
    pub fn name(&self) -> &str {
        self.0.get("op").and_then(Value::as_str).unwrap_or_default()
    }

    /// The queue the operation names.
    pub fn queue(&self) -> &str {
        self.0.get("queue").and_then(Value::as_str).unwrap_or_default()
    }

    /// The operation as sent.
    pub fn to_value(&self) -> Value {
        self.0.clone()
    }

    /// Sets the queue's configuration.
    pub fn configure(queue: &str, config: &JobConfig) -> JobOp {
        let mut o = JobOp::new("configure", queue);
        config.apply(&mut o.0);
        o
    }

    /// Adds a job, ready at once unless delayed. Refused with `JOB_EXISTS`
    /// when the id is taken, unless [`JobOp::replace`].
    pub fn enqueue(queue: &str, id: &str, payload: Value) -> JobOp {
        let mut o = JobOp::on("enqueue", queue, id);
        o.0["payload"] = payload;
        o
    }

    /// Asks for one ready job for `owner`.
    pub fn claim(queue: &str, owner: &str) -> JobOp {
        let mut o = JobOp::new("claim", queue);
        o.0["owner"] = json!(owner);
        o
    }

    /// Extends a claim's lease from now.
    pub fn renew(claim: &Claim) -> JobOp {
        JobOp::leased("renew", claim)
    }

    /// Finishes a claimed job with `result`.
    pub fn complete(claim: &Claim, result: Value) -> JobOp {
        let mut o = JobOp::leased("complete", claim);
        if !result.is_null() {
            o.0["result"] = result;
        }
        o
    }

    /// Records a failed attempt. The queue's retry policy decides whether
    /// (and when) the job is tried again; [`JobOp::no_retry`] fails it for good.
    pub fn fail(claim: &Claim, error: impl Into<Value>) -> JobOp {
        let mut o = JobOp::leased("fail", claim);
        o.0["error"] = error.into();
        o
    }

    /// Gives a claimed job back unfinished, without counting a failure.
    pub fn release(claim: &Claim) -> JobOp {
        JobOp::leased("release", claim)
    }

    /// Makes a failed job pending again.
    pub fn retry(queue: &str, id: &str) -> JobOp {
        JobOp::on("retry", queue, id)
    }

    /// Removes a job in any state.
    pub fn cancel(queue: &str, id: &str) -> JobOp {
        JobOp::on("cancel", queue, id)
    }

    pub fn get(queue: &str, id: &str) -> JobOp {
        JobOp::on("get", queue, id)
    }

    /// One page of the queue's jobs in id order, after `after` (exclusive).
    pub fn scan(queue: &str, state: Option<JobState>, after: Option<&str>, limit: Option<u32>) -> JobOp {
        let mut o = JobOp::new("scan", queue);
        if let Some(s) = state {
            o.0["state"] = json!(s.as_str());
        }
        if let Some(a) = after {
            o.0["after"] = json!(a);
        }
        if let Some(l) = limit {
            o.0["limit"] = json!(l);
        }
        o
    }

    pub fn stats(queue: &str) -> JobOp {
        JobOp::new("stats", queue)
    }

    /// The scope inside the queue (the empty one by default).
    pub fn scope(mut self, scope: &str) -> JobOp {
        self.0["scope"] = json!(scope);
        self
    }

    /// For enqueue, fail, release and retry: ready only after `d`.
    pub fn delay(mut self, d: Duration) -> JobOp {
        self.0["delayMs"] = json!(millis(d));
        if let Some(o) = self.0.as_object_mut() {
            o.remove("at");
        }
        self
    }

    /// For enqueue: ready at this epoch millisecond.
    pub fn at_ms(mut self, epoch_ms: u64) -> JobOp {
        self.0["at"] = json!(epoch_ms);
        if let Some(o) = self.0.as_object_mut() {
            o.remove("delayMs");
        }
        self
    }

    /// For enqueue: ready at this ISO-8601 time (`2026-12-01T09:00:00.000Z`).
    pub fn at(mut self, iso: &str) -> JobOp {
        self.0["at"] = json!(iso);
        if let Some(o) = self.0.as_object_mut() {
            o.remove("delayMs");
        }
        self
    }

    /// For enqueue: a finished (completed or failed) job of the same id is
    /// replaced by the new one instead of refusing it; a pending or leased
    /// one still refuses it (`JOB_EXISTS`).
    pub fn replace(mut self) -> JobOp {
        self.0["replace"] = json!(true);
        self
    }

    /// For claim and renew: a lease of this length instead of the queue's default.
    pub fn lease(mut self, d: Duration) -> JobOp {
        self.0["leaseMs"] = json!(millis(d));
        self
    }

    /// For claim: long-polls up to `d` when nothing is ready. A waiting
    /// claim must be the only operation of its call.
    pub fn wait(mut self, d: Duration) -> JobOp {
        self.0["waitMs"] = json!(millis(d));
        self
    }

    /// For claim: the caller's id of this claim attempt.
    pub fn request_id(mut self, id: &str) -> JobOp {
        self.0["requestId"] = json!(id);
        self
    }

    /// For complete: the result to store (replaces the one given at construction).
    pub fn result(mut self, result: Value) -> JobOp {
        self.0["result"] = result;
        self
    }

    /// For fail: the job fails for good, whatever the retry policy.
    pub fn no_retry(mut self) -> JobOp {
        self.0["retry"] = json!(false);
        self
    }

    /// For a write: when it does not apply, nothing in its call applies
    /// (the call answers HTTP 409 naming it). Step riders always are.
    pub fn required(mut self) -> JobOp {
        self.0["required"] = json!(true);
        self
    }

    /// The wait a claim asks for, to size the request's timeout.
    pub(crate) fn wait_ms(&self) -> u64 {
        self.0.get("waitMs").and_then(Value::as_u64).unwrap_or(0)
    }
}

/// How failed attempts are retried: after `initial_delay`, doubling up to
/// `max_delay`, until `max_attempts` claims in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub initial_delay: Duration,
    pub max_delay: Duration,
}

/// A queue's configuration; unset fields keep the broker's value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobConfig {
    /// The lease a claim gets when it names none, and the longest it may name.
    pub lease: Option<(Duration, Duration)>,
    /// `Some(None)`: never retry.
    pub retry: Option<Option<RetryPolicy>>,
    pub payload_schema: Option<Value>,
    pub result_schema: Option<Value>,
    /// How long completed jobs are kept.
    pub completed_retention: Option<Duration>,
}

impl JobConfig {
    pub fn new() -> JobConfig {
        JobConfig::default()
    }

    pub fn lease(mut self, default: Duration, max: Duration) -> JobConfig {
        self.lease = Some((default, max));
        self
    }

    pub fn retry(mut self, policy: RetryPolicy) -> JobConfig {
        self.retry = Some(Some(policy));
        self
    }

    /// A failed attempt fails the job for good.
    pub fn no_retry(mut self) -> JobConfig {
        self.retry = Some(None);
        self
    }

    /// A JSON Schema every enqueued payload must match.
    pub fn payload_schema(mut self, schema: Value) -> JobConfig {
        self.payload_schema = Some(schema);
        self
    }

    /// A JSON Schema every completed result must match.
    pub fn result_schema(mut self, schema: Value) -> JobConfig {
        self.result_schema = Some(schema);
        self
    }

    pub fn completed_retention(mut self, d: Duration) -> JobConfig {
        self.completed_retention = Some(d);
        self
    }

    fn apply(&self, op: &mut Value) {
        if let Some((default, max)) = self.lease {
            op["lease"] = json!({ "defaultMs": millis(default), "maxMs": millis(max) });
        }
        match self.retry {
            Some(Some(p)) => {
                op["retry"] = json!({
                    "maxAttempts": p.max_attempts,
                    "initialDelayMs": millis(p.initial_delay),
                    "maxDelayMs": millis(p.max_delay),
                })
            }
            Some(None) => op["retry"] = json!(false),
            None => {}
        }
        if let Some(s) = &self.payload_schema {
            op["payloadSchema"] = s.clone();
        }
        if let Some(s) = &self.result_schema {
            op["resultSchema"] = s.clone();
        }
        if let Some(d) = self.completed_retention {
            op["completedRetentionMs"] = json!(millis(d));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job_answers::JobToken;

    fn claim() -> Claim {
        Claim {
            queue: "emails".into(),
            scope: "tenant-a".into(),
            id: "j-1".into(),
            payload: Value::Null,
            attempt: 1,
            owner: "w1".into(),
            token: JobToken(json!(41)),
            expires_at: String::new(),
        }
    }

    #[test]
    fn enqueue_options() {
        let op = JobOp::enqueue("emails", "j-1", json!({"to": "a"})).scope("s").delay(Duration::from_millis(1500));
        assert_eq!(
            op.0,
            json!({"op": "enqueue", "queue": "emails", "id": "j-1", "payload": {"to": "a"}, "scope": "s", "delayMs": 1500})
        );
        // The last of delay and at wins; the broker takes only one.
        let op = op.at_ms(99).replace().required();
        assert_eq!(op.0.get("delayMs"), None);
        assert_eq!(
            (op.0["at"].clone(), op.0["replace"].clone(), op.0["required"].clone()),
            (json!(99), json!(true), json!(true))
        );
        assert_eq!(
            JobOp::enqueue("q", "i", Value::Null).at("2026-12-01T09:00:00.000Z").delay(Duration::ZERO).0["delayMs"],
            0
        );
        assert_eq!(op.name(), "enqueue");
        assert_eq!(op.queue(), "emails");
    }

    #[test]
    fn leased_ops_carry_the_claim() {
        let c = claim();
        let want = |op: &str| json!({"op": op, "queue": "emails", "scope": "tenant-a", "id": "j-1", "owner": "w1", "token": 41});
        assert_eq!(JobOp::renew(&c).0, want("renew"));
        assert_eq!(JobOp::release(&c).0, want("release"));
        let mut done = want("complete");
        done["result"] = json!({"sent": true});
        assert_eq!(JobOp::complete(&c, json!({"sent": true})).0, done);
        assert_eq!(JobOp::complete(&c, Value::Null).0, want("complete"), "no result sends none");
        let f = JobOp::fail(&c, "smtp down").no_retry().delay(Duration::from_secs(2));
        assert_eq!(
            (f.0["error"].clone(), f.0["retry"].clone(), f.0["delayMs"].clone()),
            (json!("smtp down"), json!(false), json!(2000))
        );
    }

    #[test]
    fn claim_and_reads() {
        let c =
            JobOp::claim("emails", "w1").lease(Duration::from_secs(30)).wait(Duration::from_secs(5)).request_id("r1");
        assert_eq!(
            c.0,
            json!({"op": "claim", "queue": "emails", "owner": "w1", "leaseMs": 30000, "waitMs": 5000, "requestId": "r1"})
        );
        assert_eq!(c.wait_ms(), 5000);
        assert_eq!(JobOp::claim("q", "o").wait_ms(), 0);
        assert_eq!(
            JobOp::scan("q", Some(JobState::Failed), Some("j-9"), Some(50)).0,
            json!({"op": "scan", "queue": "q", "state": "failed", "after": "j-9", "limit": 50})
        );
        assert_eq!(JobOp::scan("q", None, None, None).0, json!({"op": "scan", "queue": "q"}));
        assert_eq!(JobOp::stats("q").scope("").0, json!({"op": "stats", "queue": "q", "scope": ""}));
    }

    #[test]
    fn config_wire_form() {
        let cfg = JobConfig::new()
            .lease(Duration::from_secs(30), Duration::from_secs(300))
            .retry(RetryPolicy {
                max_attempts: 5,
                initial_delay: Duration::from_millis(200),
                max_delay: Duration::from_secs(10),
            })
            .payload_schema(json!({"type": "object"}))
            .completed_retention(Duration::from_secs(3600));
        assert_eq!(
            JobOp::configure("q", &cfg).0,
            json!({"op": "configure", "queue": "q",
                "lease": {"defaultMs": 30000, "maxMs": 300000},
                "retry": {"maxAttempts": 5, "initialDelayMs": 200, "maxDelayMs": 10000},
                "payloadSchema": {"type": "object"}, "completedRetentionMs": 3600000})
        );
        assert_eq!(JobOp::configure("q", &JobConfig::new().no_retry()).0["retry"], json!(false));
        assert_eq!(JobOp::configure("q", &JobConfig::new()).0, json!({"op": "configure", "queue": "q"}));
    }
}
