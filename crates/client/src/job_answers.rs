//! What the jobs routes answer, read into types: a stored [`Job`], a
//! [`Claim`] handed to a worker, the verdict on a write, a page of a scan
//! and the counts of a queue.
//!
//! Readers are lenient the way the rest of the crate is: a missing optional
//! field reads as absent, but an answer without the object it must carry
//! (a claim without its token, a write without its verdict) is a decode
//! error rather than a guess.

use std::fmt;

use serde_json::Value;

use crate::client::{bool_of, field, opt_str, str_of, u64_of, Error, Result};

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Waiting for its `availableAt`, or ready to be claimed.
    Pending,
    /// Claimed by a worker whose lease has not lapsed.
    Leased,
    Completed,
    /// Failed with no retry left (or failed with `retry: false`).
    Failed,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Leased => "leased",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<JobState> {
        match s {
            "pending" => Some(JobState::Pending),
            "leased" => Some(JobState::Leased),
            "completed" => Some(JobState::Completed),
            "failed" => Some(JobState::Failed),
            _ => None,
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A lease's fencing token, sent back exactly as the broker wrote it (the
/// crate does not assume whether it is a number or a string).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobToken(pub(crate) Value);

impl JobToken {
    pub fn as_u64(&self) -> Option<u64> {
        self.0.as_u64()
    }

    pub fn as_str(&self) -> Option<&str> {
        self.0.as_str()
    }

    /// The token's wire form.
    pub fn to_value(&self) -> Value {
        self.0.clone()
    }

    /// A token as another process wrote it down (a number or a string).
    pub fn from_value(v: Value) -> JobToken {
        JobToken(v)
    }
}

impl fmt::Display for JobToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Value::String(s) => f.write_str(s),
            other => write!(f, "{other}"),
        }
    }
}

/// The lease of a leased job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobLease {
    pub owner: String,
    pub token: JobToken,
    pub expires_at: String,
}

/// A job as the broker stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub queue: String,
    pub scope: String,
    pub id: String,
    pub payload: Value,
    pub state: JobState,
    pub available_at: Option<String>,
    /// Set only while leased.
    pub lease_expires_at: Option<String>,
    pub lease: Option<JobLease>,
    /// Claims so far, the current one included.
    pub attempts: u32,
    pub created_at: String,
    pub updated_at: String,
    /// What `complete` stored (`null` until then).
    pub result: Value,
    /// What the last `fail` stored (`null` until then).
    pub error: Value,
}

impl Job {
    pub(crate) fn from_wire(v: &Value) -> Result<Job> {
        let state = str_of(v, "state");
        let state = JobState::parse(&state)
            .ok_or_else(|| Error::Decode(format!("a job has the unknown state {state:?}: {v}")))?;
        let lease = match v.get("lease") {
            Some(l) if l.is_object() => Some(JobLease {
                owner: str_of(l, "owner"),
                token: JobToken(field(l, "token")?.clone()),
                expires_at: str_of(l, "expiresAt"),
            }),
            _ => None,
        };
        Ok(Job {
            queue: str_of(v, "queue"),
            scope: str_of(v, "scope"),
            id: str_of(v, "id"),
            payload: v.get("payload").cloned().unwrap_or(Value::Null),
            state,
            available_at: opt_str(v, "availableAt"),
            lease_expires_at: opt_str(v, "leaseExpiresAt"),
            lease,
            attempts: u64_of(v, "attempts") as u32,
            created_at: str_of(v, "createdAt"),
            updated_at: str_of(v, "updatedAt"),
            result: v.get("result").cloned().unwrap_or(Value::Null),
            error: v.get("error").cloned().unwrap_or(Value::Null),
        })
    }

    /// The `job` field of an answer: `None` when absent or `null`.
    pub(crate) fn field_of(v: &Value) -> Result<Option<Job>> {
        match v.get("job") {
            Some(j) if j.is_object() => Job::from_wire(j).map(Some),
            _ => Ok(None),
        }
    }
}

/// A job handed to a worker: what to do and the lease to do it under.
/// Keep it to renew, complete, fail or release the job.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub queue: String,
    pub scope: String,
    pub id: String,
    pub payload: Value,
    /// 1 on the first claim, then one more per claim.
    pub attempt: u32,
    pub owner: String,
    pub token: JobToken,
    pub expires_at: String,
}

impl Claim {
    /// Reads a `claim` object; `queue` is the queue the call named (the
    /// claim itself does not repeat it).
    pub(crate) fn from_wire(queue: &str, v: &Value) -> Result<Claim> {
        Ok(Claim {
            queue: queue.to_string(),
            scope: str_of(v, "scope"),
            id: field(v, "id")?
                .as_str()
                .ok_or_else(|| Error::Decode(format!("a claim's id is not a string: {v}")))?
                .to_string(),
            payload: v.get("payload").cloned().unwrap_or(Value::Null),
            attempt: u64_of(v, "attempt") as u32,
            owner: str_of(v, "owner"),
            token: JobToken(field(v, "token")?.clone()),
            expires_at: str_of(v, "expiresAt"),
        })
    }

    /// The `claim` field of an answer: `None` when `null` (nothing ready).
    pub(crate) fn field_of(queue: &str, v: &Value) -> Result<Option<Claim>> {
        match field(v, "claim")? {
            Value::Null => Ok(None),
            c => Claim::from_wire(queue, c).map(Some),
        }
    }
}

/// The verdict on enqueue, complete, fail, release and retry.
#[derive(Debug, Clone, PartialEq)]
pub struct JobWrite {
    pub applied: bool,
    /// The job after the write; when refused, the job as it is.
    pub job: Option<Job>,
    /// Why it did not apply: `JOB_EXISTS`, `LEASE_LOST`, `JOB_NOT_FAILED`, ...
    pub code: Option<String>,
}

impl JobWrite {
    pub(crate) fn from_wire(v: &Value) -> Result<JobWrite> {
        let applied = field(v, "applied")?.as_bool().unwrap_or(false);
        Ok(JobWrite { applied, job: Job::field_of(v)?, code: opt_str(v, "code") })
    }
}

/// The answer to a renew.
#[derive(Debug, Clone, PartialEq)]
pub enum JobRenewal {
    /// The lease runs again from now; the claim carries its new expiry (and
    /// token, should the broker replace it).
    Renewed(Claim),
    /// The lease lapsed or the job is somebody else's: stop working on it.
    Lost(Option<Job>),
}

impl JobRenewal {
    pub(crate) fn from_wire(queue: &str, v: &Value) -> Result<JobRenewal> {
        if bool_of(v, "applied") {
            let claim = Claim::field_of(queue, v)?.ok_or_else(|| Error::Decode(format!("renew answered {v}")))?;
            Ok(JobRenewal::Renewed(claim))
        } else {
            Ok(JobRenewal::Lost(Job::field_of(v)?))
        }
    }
}

/// One page of a queue's jobs, in id order.
#[derive(Debug, Clone, PartialEq)]
pub struct JobPage {
    pub rows: Vec<Job>,
    /// Where the next page starts; `None` on the last page.
    pub next_after: Option<String>,
}

impl JobPage {
    pub(crate) fn from_wire(v: &Value) -> Result<JobPage> {
        let rows = field(v, "rows")?
            .as_array()
            .ok_or_else(|| Error::Decode(format!("a scan's rows are not a list: {v}")))?
            .iter()
            .map(Job::from_wire)
            .collect::<Result<Vec<_>>>()?;
        let next_after = if bool_of(v, "truncated") { opt_str(v, "nextAfter") } else { None };
        Ok(JobPage { rows, next_after })
    }
}

/// Jobs per state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JobCounts {
    pub pending: u64,
    pub leased: u64,
    pub completed: u64,
    pub failed: u64,
}

/// The figures of one (queue, scope).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobStats {
    /// True when a claim now would get a job.
    pub ready: bool,
    pub ready_count: u64,
    pub counts: JobCounts,
    pub oldest_ready_at: Option<String>,
    /// When the next delayed job becomes ready.
    pub next_available_at: Option<String>,
}

impl JobStats {
    pub(crate) fn from_wire(v: &Value) -> Result<JobStats> {
        let c = field(v, "counts")?;
        Ok(JobStats {
            ready: bool_of(v, "ready"),
            ready_count: u64_of(v, "readyCount"),
            counts: JobCounts {
                pending: u64_of(c, "pending"),
                leased: u64_of(c, "leased"),
                completed: u64_of(c, "completed"),
                failed: u64_of(c, "failed"),
            },
            oldest_ready_at: opt_str(v, "oldestReadyAt"),
            next_available_at: opt_str(v, "nextAvailableAt"),
        })
    }
}

/// The broker's answer to a jobs call that a `required` operation lost:
/// nothing of the call was written.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRefusal {
    /// The losing operation's index in the call.
    pub failed_index: usize,
    /// The losing operation's code (`JOB_EXISTS`, `LEASE_LOST`, ...).
    pub code: String,
    /// The job the losing operation named, as it is (when it exists).
    pub job: Option<Job>,
    pub error: String,
    pub(crate) job_wire: Value,
}

impl JobRefusal {
    pub(crate) fn from_wire(v: &Value) -> Result<JobRefusal> {
        // `jobIndex` is the index among job operations; in a jobs call it
        // equals `failedIndex`.
        let index = v.get("jobIndex").or_else(|| v.get("failedIndex")).and_then(Value::as_u64).unwrap_or(0);
        Ok(JobRefusal {
            failed_index: index as usize,
            code: str_of(v, "code"),
            job: Job::field_of(v)?,
            error: str_of(v, "error"),
            job_wire: v.get("job").cloned().unwrap_or(Value::Null),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn job_wire() -> Value {
        json!({
            "queue": "emails", "scope": "", "id": "j-1", "payload": {"to": "a@b"}, "state": "leased",
            "availableAt": "2026-12-01T08:00:00.000Z", "leaseExpiresAt": "2026-12-01T08:00:30.000Z",
            "lease": {"owner": "w1", "token": 7, "expiresAt": "2026-12-01T08:00:30.000Z"},
            "attempts": 2, "createdAt": "2026-12-01T07:59:00.000Z", "updatedAt": "2026-12-01T08:00:00.000Z",
            "result": null, "error": "boom",
        })
    }

    #[test]
    fn a_job_reads_every_field() {
        let j = Job::from_wire(&job_wire()).unwrap();
        assert_eq!(j.id, "j-1");
        assert_eq!(j.state, JobState::Leased);
        assert_eq!(j.attempts, 2);
        let lease = j.lease.unwrap();
        assert_eq!((lease.owner.as_str(), lease.token.as_u64()), ("w1", Some(7)));
        assert_eq!(j.error, json!("boom"));
        assert_eq!(j.result, Value::Null);
        let mut bad = job_wire();
        bad["state"] = json!("sleeping");
        assert!(matches!(Job::from_wire(&bad), Err(Error::Decode(_))));
    }

    #[test]
    fn a_claim_keeps_its_token_as_written() {
        let c = json!({"scope": "s", "id": "j-1", "payload": 1, "attempt": 1, "owner": "w", "token": "t-9",
            "expiresAt": "x"});
        let claim = Claim::field_of("q", &json!({ "claim": c })).unwrap().unwrap();
        assert_eq!(claim.token.as_str(), Some("t-9"));
        assert_eq!(claim.token.to_value(), json!("t-9"));
        assert_eq!(claim.queue, "q");
        assert_eq!(Claim::field_of("q", &json!({ "claim": null })).unwrap(), None);
        assert!(Claim::field_of("q", &json!({})).is_err(), "no claim field at all is not 'nothing ready'");
        assert!(Claim::field_of("q", &json!({"claim": {"id": "x"}})).is_err(), "a claim needs its token");
    }

    #[test]
    fn renewals_and_writes() {
        let lost = JobRenewal::from_wire("q", &json!({"applied": false, "code": "LEASE_LOST", "job": job_wire()}));
        assert!(matches!(lost.unwrap(), JobRenewal::Lost(Some(j)) if j.id == "j-1"));
        let w = JobWrite::from_wire(&json!({"applied": false, "code": "JOB_EXISTS", "job": job_wire()})).unwrap();
        assert_eq!((w.applied, w.code.as_deref()), (false, Some("JOB_EXISTS")));
        assert!(JobWrite::from_wire(&json!({"job": null})).is_err(), "a verdict needs applied");
    }

    #[test]
    fn pages_and_stats() {
        let p = JobPage::from_wire(&json!({"rows": [job_wire()], "truncated": true, "nextAfter": "j-1"})).unwrap();
        assert_eq!((p.rows.len(), p.next_after.as_deref()), (1, Some("j-1")));
        let last = JobPage::from_wire(&json!({"rows": [], "truncated": false, "nextAfter": "j-1"})).unwrap();
        assert_eq!(last.next_after, None);
        let s = JobStats::from_wire(&json!({"ready": true, "readyCount": 3,
            "counts": {"pending": 3, "leased": 1, "completed": 4, "failed": 0},
            "oldestReadyAt": "t", "nextAvailableAt": null}))
        .unwrap();
        assert_eq!(s.counts, JobCounts { pending: 3, leased: 1, completed: 4, failed: 0 });
        assert_eq!((s.ready, s.ready_count, s.next_available_at), (true, 3, None));
    }
}
