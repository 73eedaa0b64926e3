//! One scope of a job queue: its jobs by id, the indexes that find the next
//! claimable job without a walk, and the fencing-token counter.
//!
//! Every change of a job goes through [`Scope::put`] and [`Scope::take`],
//! which keep the indexes equal to what the jobs say (checked by
//! [`Scope::check`]).

use std::collections::{BTreeMap, BTreeSet};

use regina_types::limits::JOB_REQUEST_ID_WINDOW_MS;
use serde::{Deserialize, Serialize};

use super::{exhausted, Job, JobState, RetryPolicy, LEASE_EXPIRED_ERROR};

/// A claim remembered by its `requestId`, so a resent claim answers the
/// same lease instead of taking a second job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RememberedClaim {
    pub job_id: String,
    pub token: u64,
    pub attempt: u32,
    pub owner: String,
    pub expires_ms: u64,
    pub at_ms: u64,
    /// The payload as it was claimed: a resent claim answers the original
    /// claim even when the job was cancelled or replaced since.
    #[serde(with = "serde_bytes")]
    pub payload: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Scope {
    jobs: BTreeMap<String, Job>,
    /// The last fencing token handed out; tokens only rise.
    last_token: u64,
    last_seq: u64,
    /// (available at, seq, id) of every stored-pending job.
    pending: BTreeSet<(u64, u64, String)>,
    /// (lease expiry, seq, id) of every stored-leased job.
    leased: BTreeSet<(u64, u64, String)>,
    /// (finished at, id) of every completed or failed job.
    finished: BTreeSet<(u64, String)>,
    /// Claims by request id, and the same keyed by when they were made.
    requests: BTreeMap<String, RememberedClaim>,
    request_order: BTreeSet<(u64, String)>,
}

impl RememberedClaim {
    pub fn of(claim: &super::view::ClaimView, at_ms: u64) -> RememberedClaim {
        RememberedClaim {
            job_id: claim.id.clone(),
            token: claim.token,
            attempt: claim.attempt,
            owner: claim.owner.clone(),
            expires_ms: claim.expires_ms,
            at_ms,
            payload: claim.payload.clone(),
        }
    }
}

impl Scope {
    pub fn get(&self, id: &str) -> Option<&Job> {
        self.jobs.get(id)
    }

    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    pub fn last_token(&self) -> u64 {
        self.last_token
    }

    /// Jobs after `after` (exclusive), in id order.
    pub fn after<'a>(&'a self, after: Option<&'a str>) -> impl Iterator<Item = (&'a String, &'a Job)> + 'a {
        use std::ops::Bound;
        let lower = after.map_or(Bound::Unbounded, Bound::Excluded);
        self.jobs.range::<str, _>((lower, Bound::Unbounded))
    }

    /// Pending jobs by availability, earliest first.
    pub fn pending_by_time(&self) -> impl Iterator<Item = &(u64, u64, String)> {
        self.pending.iter()
    }

    /// Leased jobs by lease expiry, earliest first.
    pub fn leased_by_expiry(&self) -> impl Iterator<Item = &(u64, u64, String)> {
        self.leased.iter()
    }

    /// Completed and failed jobs by when they ended, earliest first.
    pub fn finished_by_time(&self) -> impl Iterator<Item = &(u64, String)> {
        self.finished.iter()
    }

    /// Jobs as stored: pending, leased (a lapsed lease still counts until
    /// something settles it) and finished.
    pub fn stored_counts(&self) -> (usize, usize, usize) {
        (self.pending.len(), self.leased.len(), self.finished.len())
    }

    pub fn first_finished_ms(&self) -> Option<u64> {
        self.finished.first().map(|(at, _)| *at)
    }

    pub fn first_lease_expiry_ms(&self) -> Option<u64> {
        self.leased.first().map(|(at, _, _)| *at)
    }

    pub(crate) fn mint_token(&mut self) -> u64 {
        self.last_token += 1;
        self.last_token
    }

    /// Puts the token counter back when the call that minted past
    /// `before` is rolled back.
    pub(crate) fn reset_token(&mut self, before: u64) {
        self.last_token = before;
    }

    pub(crate) fn mint_seq(&mut self) -> u64 {
        self.last_seq += 1;
        self.last_seq
    }

    /// Stores `job` under `id`, replacing any job of that id.
    pub(crate) fn put(&mut self, id: &str, job: Job) {
        self.take(id);
        match job.state {
            JobState::Pending => {
                self.pending.insert((job.available_ms, job.seq, id.to_string()));
            }
            JobState::Leased => {
                let l = job.lease.as_ref().expect("a leased job holds a lease");
                self.leased.insert((l.expires_ms, job.seq, id.to_string()));
            }
            JobState::Completed | JobState::Failed => {
                let at = job.finished_ms.expect("a finished job knows when it ended");
                self.finished.insert((at, id.to_string()));
            }
        }
        self.jobs.insert(id.to_string(), job);
    }

    pub(crate) fn take(&mut self, id: &str) -> Option<Job> {
        let job = self.jobs.remove(id)?;
        let key = id.to_string();
        match job.state {
            JobState::Pending => self.pending.remove(&(job.available_ms, job.seq, key)),
            JobState::Leased => {
                let exp = job.lease.as_ref().map_or(0, |l| l.expires_ms);
                self.leased.remove(&(exp, job.seq, key))
            }
            _ => self.finished.remove(&(job.finished_ms.unwrap_or(0), key)),
        };
        Some(job)
    }

    /// The id of the job a claim at `now_ms` would take: the one that has
    /// been available longest, a job whose lease ran out counting as
    /// available from its expiry. May name a job whose last lease ran out
    /// (not claimable): the caller settles it and asks again.
    pub fn next_ready(&self, now_ms: u64) -> Option<&str> {
        let p = self.pending.first().filter(|(at, _, _)| *at <= now_ms);
        let l = self.leased.first().filter(|(at, _, _)| *at <= now_ms);
        let first = match (p, l) {
            (Some(p), Some(l)) => (p.0, p.1).min((l.0, l.1)),
            (Some(p), None) => (p.0, p.1),
            (None, Some(l)) => (l.0, l.1),
            (None, None) => return None,
        };
        [p, l].into_iter().flatten().find(|k| (k.0, k.1) == first).map(|k| k.2.as_str())
    }

    /// Settles up to `max` jobs whose lease ran out by `now_ms`: pending
    /// from the expiry, or failed when their attempts are spent.
    pub(crate) fn settle_expired(&mut self, now_ms: u64, retry: Option<&RetryPolicy>, max: usize) -> usize {
        let due: Vec<String> =
            self.leased.iter().take_while(|(at, _, _)| *at <= now_ms).take(max).map(|k| k.2.clone()).collect();
        for id in &due {
            self.settle(id, now_ms, retry);
        }
        due.len()
    }

    /// Stores what [`Job::effective`] says of one job.
    pub(crate) fn settle(&mut self, id: &str, now_ms: u64, retry: Option<&RetryPolicy>) {
        let Some(job) = self.jobs.get(id) else { return };
        let settled = job.effective(now_ms, retry);
        if settled != *job {
            assert!(settled.state != JobState::Failed || exhausted(settled.attempts, retry));
            assert!(settled.state != JobState::Failed || settled.error.as_deref() == Some(LEASE_EXPIRED_ERROR));
            self.put(id, settled);
        }
    }

    /// Drops up to `max` finished jobs that ended at or before `cutoff_ms`.
    pub(crate) fn drop_finished_before(&mut self, cutoff_ms: u64, max: usize) -> usize {
        let old: Vec<String> =
            self.finished.iter().take_while(|(at, _)| *at <= cutoff_ms).take(max).map(|(_, id)| id.clone()).collect();
        for id in &old {
            self.take(id);
        }
        old.len()
    }

    /// The claim made under `request_id` within the window before `now_ms`.
    /// The window is checked here too: forgetting is bounded per claim, so
    /// an older entry may still be held.
    pub fn recall(&self, request_id: &str, now_ms: u64) -> Option<&RememberedClaim> {
        self.requests.get(request_id).filter(|c| now_ms < c.at_ms.saturating_add(JOB_REQUEST_ID_WINDOW_MS))
    }

    pub(crate) fn remember(&mut self, request_id: &str, claim: RememberedClaim) {
        self.request_order.insert((claim.at_ms, request_id.to_string()));
        self.requests.insert(request_id.to_string(), claim);
    }

    pub(crate) fn forget_request(&mut self, request_id: &str) {
        if let Some(c) = self.requests.remove(request_id) {
            self.request_order.remove(&(c.at_ms, request_id.to_string()));
        }
    }

    /// Forgets up to `max` request ids remembered at or before `cutoff_ms`.
    pub(crate) fn forget_requests_before(&mut self, cutoff_ms: u64, max: usize) {
        let old: Vec<String> = self
            .request_order
            .iter()
            .take_while(|(at, _)| *at <= cutoff_ms)
            .take(max)
            .map(|(_, r)| r.clone())
            .collect();
        for r in &old {
            self.forget_request(r);
        }
    }

    /// The indexes hold exactly the jobs' keys; no lease carries a token
    /// that was never handed out.
    pub fn check(&self) -> Result<(), String> {
        let (mut p, mut l, mut f) = (0, 0, 0);
        for (id, j) in &self.jobs {
            let k = id.clone();
            let indexed = match j.state {
                JobState::Pending => {
                    p += 1;
                    j.lease.is_none() && self.pending.contains(&(j.available_ms, j.seq, k))
                }
                JobState::Leased => {
                    l += 1;
                    let Some(lease) = &j.lease else { return Err(format!("job {id} leased without a lease")) };
                    if lease.token == 0 || lease.token > self.last_token {
                        return Err(format!("job {id} holds token {} past the counter", lease.token));
                    }
                    self.leased.contains(&(lease.expires_ms, j.seq, k))
                }
                JobState::Completed | JobState::Failed => {
                    f += 1;
                    j.lease.is_none() && j.finished_ms.is_some_and(|at| self.finished.contains(&(at, k)))
                }
            };
            if !indexed {
                return Err(format!("job {id} ({:?}) is not indexed as its state says", j.state));
            }
        }
        if (p, l, f) != (self.pending.len(), self.leased.len(), self.finished.len()) {
            return Err("job indexes hold jobs that do not exist".into());
        }
        if self.requests.len() != self.request_order.len() {
            return Err("request-id index and its time order disagree".into());
        }
        Ok(())
    }
}
