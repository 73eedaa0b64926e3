//! What a job-queue call carries in the log. Times travel as amounts
//! relative to the entry's time, or as absolute instants the client named,
//! so every replica computes the same deadlines.
//!
//! Encoded with bincode inside `Command`: variant and field order are part
//! of the on-disk format, so new variants go at the end.

use serde::{Deserialize, Serialize};

/// Which job queue and scope an operation addresses.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct JobTarget {
    pub queue: String,
    /// `""` is the default scope; each scope has its own fencing tokens.
    pub scope: String,
}

/// When an enqueued (or requeued) job becomes available.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Availability {
    Now,
    /// This long after the entry's time.
    AfterMs(u64),
    /// At this instant (epoch ms); a past instant is now.
    AtMs(u64),
}

impl Availability {
    pub fn resolve(self, now_ms: u64) -> u64 {
        match self {
            Availability::Now => now_ms,
            Availability::AfterMs(d) => now_ms.saturating_add(d),
            Availability::AtMs(at) => at.max(now_ms),
        }
    }
}

/// Retry policy of a job queue; `None` in [`JobConfig::retry`] is
/// `retry: false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub initial_delay_ms: u64,
    pub max_delay_ms: u64,
}

impl RetryPolicy {
    /// The backoff after the `attempts`-th failed attempt:
    /// `min(max_delay, initial * 2^(attempts-1))`.
    pub fn backoff_ms(&self, attempts: u32) -> u64 {
        let doublings = attempts.saturating_sub(1).min(63);
        self.initial_delay_ms.saturating_mul(1u64 << doublings).min(self.max_delay_ms)
    }
}

/// A job queue's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobConfig {
    pub lease_default_ms: u64,
    pub lease_max_ms: u64,
    pub retry: Option<RetryPolicy>,
    /// JSON Schema texts; checked at the edge on enqueue and complete.
    pub payload_schema: Option<String>,
    pub result_schema: Option<String>,
    /// Completed and failed jobs are dropped this long after they ended.
    pub completed_retention_ms: Option<u64>,
}

impl Default for JobConfig {
    fn default() -> Self {
        use regina_types::limits::*;
        JobConfig {
            lease_default_ms: JOB_LEASE_MS_DEFAULT,
            lease_max_ms: JOB_LEASE_MAX_MS_DEFAULT,
            retry: Some(RetryPolicy {
                max_attempts: JOB_MAX_ATTEMPTS_DEFAULT,
                initial_delay_ms: JOB_RETRY_INITIAL_DELAY_MS_DEFAULT,
                max_delay_ms: JOB_RETRY_MAX_DELAY_MS_DEFAULT,
            }),
            payload_schema: None,
            result_schema: None,
            completed_retention_ms: None,
        }
    }
}

/// A configure call: fields named replace the queue's, the rest stay.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobConfigPatch {
    pub lease_default_ms: Option<u64>,
    pub lease_max_ms: Option<u64>,
    /// `Some(None)`: `retry: false`.
    pub retry: Option<Option<RetryPolicy>>,
    /// `Some(None)` clears a schema.
    pub payload_schema: Option<Option<String>>,
    pub result_schema: Option<Option<String>>,
    pub completed_retention_ms: Option<Option<u64>>,
}

impl JobConfig {
    pub fn patched(&self, p: &JobConfigPatch) -> JobConfig {
        let mut c = self.clone();
        if let Some(v) = p.lease_default_ms {
            c.lease_default_ms = v;
        }
        if let Some(v) = p.lease_max_ms {
            c.lease_max_ms = v;
        }
        if let Some(v) = p.retry {
            c.retry = v;
        }
        if let Some(v) = &p.payload_schema {
            c.payload_schema = v.clone();
        }
        if let Some(v) = &p.result_schema {
            c.result_schema = v.clone();
        }
        if let Some(v) = p.completed_retention_ms {
            c.completed_retention_ms = v;
        }
        c
    }
}

/// The lease identity a worker proves on renew, complete, fail, release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseProof {
    pub id: String,
    pub owner: String,
    pub token: u64,
}

/// One job operation. Write operations carry `required`: refused, it rolls
/// the whole call back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobOp {
    Configure {
        queue: String,
        patch: JobConfigPatch,
    },
    Enqueue {
        at: JobTarget,
        id: String,
        #[serde(with = "serde_bytes")]
        payload: Vec<u8>,
        when: Availability,
        replace: bool,
        required: bool,
    },
    Claim {
        at: JobTarget,
        owner: String,
        lease_ms: Option<u64>,
        request_id: Option<String>,
    },
    Renew {
        at: JobTarget,
        proof: LeaseProof,
        lease_ms: Option<u64>,
        required: bool,
    },
    Complete {
        at: JobTarget,
        proof: LeaseProof,
        #[serde(with = "serde_bytes")]
        result: Vec<u8>,
        required: bool,
    },
    Fail {
        at: JobTarget,
        proof: LeaseProof,
        #[serde(with = "serde_bytes")]
        error: Vec<u8>,
        /// `false`: final now, whatever attempts are left.
        retry: bool,
        delay_ms: Option<u64>,
        required: bool,
    },
    Release {
        at: JobTarget,
        proof: LeaseProof,
        delay_ms: Option<u64>,
        required: bool,
    },
    Retry {
        at: JobTarget,
        id: String,
        delay_ms: Option<u64>,
        required: bool,
    },
    Cancel {
        at: JobTarget,
        id: String,
        required: bool,
    },
    Get {
        at: JobTarget,
        id: String,
    },
    Scan {
        at: JobTarget,
        state: Option<crate::jobs::JobState>,
        after: Option<String>,
        limit: u32,
    },
    Stats {
        at: JobTarget,
    },
}

impl JobOp {
    /// Whether the op changes the store (reads alone are served without a
    /// log entry).
    pub fn is_write(&self) -> bool {
        !matches!(self, JobOp::Get { .. } | JobOp::Scan { .. } | JobOp::Stats { .. })
    }

    pub fn is_required(&self) -> bool {
        match self {
            JobOp::Enqueue { required, .. }
            | JobOp::Renew { required, .. }
            | JobOp::Complete { required, .. }
            | JobOp::Fail { required, .. }
            | JobOp::Release { required, .. }
            | JobOp::Retry { required, .. }
            | JobOp::Cancel { required, .. } => *required,
            _ => false,
        }
    }

    pub fn approx_bytes(&self) -> usize {
        let body = match self {
            JobOp::Enqueue { id, payload, .. } => id.len() + payload.len(),
            JobOp::Complete { proof, result, .. } => proof.id.len() + result.len(),
            JobOp::Fail { proof, error, .. } => proof.id.len() + error.len(),
            JobOp::Configure { patch, .. } => {
                let len = |s: &Option<Option<String>>| s.as_ref().and_then(|s| s.as_ref()).map_or(0, String::len);
                len(&patch.payload_schema) + len(&patch.result_schema)
            }
            _ => 0,
        };
        body + 128
    }
}

/// A job-queue call: its operations in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobsCmd {
    pub ops: Vec<JobOp>,
}
