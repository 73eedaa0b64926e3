//! Job queues: work addressed by id. A job lives in a (queue, scope) and is
//! pending, leased, completed or failed. A claim leases the job that has
//! waited longest since it became available, under the scope's next fencing
//! token; renew, complete, fail and release must prove that lease.
//!
//! Nothing happens by itself. A lease that ran out is judged when something
//! looks at the job ([`Job::effective`]): it counts as a failed attempt, so
//! the job is pending again from the lease's expiry, or failed with
//! `LEASE_EXPIRED` when its attempts are spent. Claims and sweeps settle
//! such jobs in the store as they meet them.
//!
//! Map of the module:
//! - [`op`]: what a call carries in the log.
//! - [`scope`]: one scope's jobs, their indexes and its token counter.
//! - [`apply`]: a call judged and applied as one, with its undo log.
//! - [`view`]: what readers see: jobs, claims, stats.

pub mod apply;
pub mod op;
pub mod scope;
pub mod view;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use op::{Availability, JobConfig, JobConfigPatch, JobOp, JobTarget, JobsCmd, LeaseProof, RetryPolicy};
pub use scope::Scope;

/// The error a job gets when its last lease ran out.
pub const LEASE_EXPIRED_ERROR: &[u8] = br#"{"code":"LEASE_EXPIRED"}"#;

/// A job's state as readers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum JobState {
    Pending,
    Leased,
    Completed,
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
        Some(match s {
            "pending" => JobState::Pending,
            "leased" => JobState::Leased,
            "completed" => JobState::Completed,
            "failed" => JobState::Failed,
            _ => return None,
        })
    }

    pub fn is_finished(self) -> bool {
        matches!(self, JobState::Completed | JobState::Failed)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub owner: String,
    pub token: u64,
    pub expires_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// As stored: a leased job whose lease ran out is still `Leased` here
    /// until a claim or sweep settles it; [`Job::effective`] judges it.
    pub state: JobState,
    #[serde(with = "serde_bytes")]
    pub payload: Vec<u8>,
    /// When a pending job becomes (or became) claimable.
    pub available_ms: u64,
    /// Breaks ties between jobs available at the same instant: the one
    /// that became available first goes first.
    pub seq: u64,
    pub lease: Option<Lease>,
    /// Claims counted since the job was enqueued or retried.
    pub attempts: u32,
    pub created_ms: u64,
    pub updated_ms: u64,
    /// When it completed or failed; drives retention.
    pub finished_ms: Option<u64>,
    pub result: Option<Vec<u8>>,
    pub error: Option<Vec<u8>>,
}

impl Job {
    /// The job as it stands at `now_ms`: a lease that ran out is a failed
    /// attempt, so the job is pending from the lease's expiry, or failed
    /// when `retry` allows no more attempts.
    pub fn effective(&self, now_ms: u64, retry: Option<&RetryPolicy>) -> Job {
        match &self.lease {
            Some(l) if self.state == JobState::Leased && l.expires_ms <= now_ms => {
                let mut j = self.clone();
                j.lease = None;
                if exhausted(self.attempts, retry) {
                    j.state = JobState::Failed;
                    j.error = Some(LEASE_EXPIRED_ERROR.to_vec());
                    j.finished_ms = Some(l.expires_ms);
                } else {
                    j.state = JobState::Pending;
                    j.available_ms = l.expires_ms;
                }
                j.updated_ms = self.updated_ms.max(l.expires_ms);
                j
            }
            _ => self.clone(),
        }
    }

    /// The lease, when `proof` names it and it has not run out at `now_ms`.
    pub fn current_lease(&self, proof: &LeaseProof, now_ms: u64) -> Option<&Lease> {
        self.lease
            .as_ref()
            .filter(|l| self.state == JobState::Leased && l.token == proof.token && l.owner == proof.owner)
            .filter(|l| l.expires_ms > now_ms)
    }
}

/// Whether `attempts` spent every attempt `retry` allows. Without retries
/// (`retry: false`) a run-out lease requeues without limit.
pub fn exhausted(attempts: u32, retry: Option<&RetryPolicy>) -> bool {
    retry.is_some_and(|r| attempts >= r.max_attempts)
}

/// One job queue: its configuration and its scopes.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct JobQueue {
    pub config: JobConfig,
    pub scopes: BTreeMap<String, Scope>,
}

/// Every job queue, by name. BTreeMaps: listings walk them in order.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct JobStore {
    pub queues: BTreeMap<String, JobQueue>,
}

impl JobStore {
    pub fn queue(&self, name: &str) -> Option<&JobQueue> {
        self.queues.get(name)
    }

    /// The configuration of `queue`, the defaults when never configured.
    pub fn config(&self, queue: &str) -> &JobConfig {
        static DEFAULT: std::sync::OnceLock<JobConfig> = std::sync::OnceLock::new();
        self.queues.get(queue).map_or_else(|| DEFAULT.get_or_init(JobConfig::default), |q| &q.config)
    }

    pub fn scope(&self, at: &JobTarget) -> Option<&Scope> {
        self.queues.get(&at.queue)?.scopes.get(&at.scope)
    }

    /// Jobs held in every queue and scope, in any state.
    pub fn len(&self) -> usize {
        self.queues.values().flat_map(|q| q.scopes.values()).map(Scope::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Jobs across every queue and scope as stored: (pending, leased,
    /// finished), for metrics; cheap, unlike judged [`JobStore::stats`].
    pub fn stored_totals(&self) -> (u64, u64, u64) {
        self.queues
            .values()
            .flat_map(|q| q.scopes.values())
            .map(Scope::stored_counts)
            .fold((0, 0, 0), |a, c| (a.0 + c.0 as u64, a.1 + c.1 as u64, a.2 + c.2 as u64))
    }

    /// Whether a sweep would drop a finished job past its queue's retention
    /// or settle a lease that ran out on its last attempt.
    pub fn wants_sweep(&self, now_ms: u64) -> bool {
        self.queues.values().any(|q| {
            let Some(r) = q.config.completed_retention_ms else { return false };
            q.scopes.values().any(|s| {
                s.first_finished_ms().is_some_and(|f| f.saturating_add(r) <= now_ms)
                    || s.first_lease_expiry_ms().is_some_and(|e| e <= now_ms)
            })
        })
    }

    /// Drops up to `max_rows` finished jobs past retention and settles
    /// leases that ran out, oldest first.
    pub(crate) fn sweep(&mut self, now_ms: u64, max_rows: usize) -> usize {
        let mut done = 0;
        for q in self.queues.values_mut() {
            let retry = q.config.retry;
            for s in q.scopes.values_mut() {
                done += s.settle_expired(now_ms, retry.as_ref(), max_rows - done);
                if let Some(r) = q.config.completed_retention_ms {
                    done += s.drop_finished_before(now_ms.saturating_sub(r), max_rows - done);
                }
                if done >= max_rows {
                    return done;
                }
            }
        }
        done
    }

    pub fn check(&self) -> Result<(), String> {
        for (name, q) in &self.queues {
            for (scope, s) in &q.scopes {
                s.check().map_err(|e| format!("job queue {name} scope {scope:?}: {e}"))?;
            }
        }
        Ok(())
    }
}
