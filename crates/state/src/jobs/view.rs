//! What readers see of job queues: a job judged at the time of the read, a
//! claim, a page of a scan, a scope's stats. Reads change nothing, so they
//! are served from the applied state as well as inside a call.

use serde::{Deserialize, Serialize};

use super::scope::RememberedClaim;
use super::{Job, JobState, JobStore, JobTarget, RetryPolicy};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseView {
    pub owner: String,
    pub token: u64,
    pub expires_ms: u64,
}

/// A job as it stands at the time it was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobView {
    pub queue: String,
    pub scope: String,
    pub id: String,
    pub payload: Vec<u8>,
    pub state: JobState,
    pub available_ms: u64,
    pub lease: Option<LeaseView>,
    pub attempts: u32,
    pub created_ms: u64,
    pub updated_ms: u64,
    pub result: Option<Vec<u8>>,
    pub error: Option<Vec<u8>>,
}

impl JobView {
    pub fn of(at: &JobTarget, id: &str, job: &Job, now_ms: u64, retry: Option<&RetryPolicy>) -> JobView {
        let j = job.effective(now_ms, retry);
        JobView {
            queue: at.queue.clone(),
            scope: at.scope.clone(),
            id: id.to_string(),
            payload: j.payload,
            state: j.state,
            available_ms: j.available_ms,
            lease: j.lease.map(|l| LeaseView { owner: l.owner, token: l.token, expires_ms: l.expires_ms }),
            attempts: j.attempts,
            created_ms: j.created_ms,
            updated_ms: j.updated_ms,
            result: j.result,
            error: j.error,
        }
    }
}

/// A lease a claim handed out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimView {
    pub scope: String,
    pub id: String,
    pub payload: Vec<u8>,
    pub attempt: u32,
    pub owner: String,
    pub token: u64,
    pub expires_ms: u64,
}

impl ClaimView {
    pub fn of(scope: &str, c: &RememberedClaim) -> ClaimView {
        ClaimView {
            scope: scope.to_string(),
            id: c.job_id.clone(),
            payload: c.payload.clone(),
            attempt: c.attempt,
            owner: c.owner.clone(),
            token: c.token,
            expires_ms: c.expires_ms,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct JobCounts {
    pub pending: u64,
    pub leased: u64,
    pub completed: u64,
    pub failed: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct JobStats {
    /// Would a claim succeed now.
    pub ready: bool,
    pub ready_count: u64,
    pub counts: JobCounts,
    /// When the longest-waiting ready job became available.
    pub oldest_ready_ms: Option<u64>,
    /// When a delayed job or a running lease next makes work available.
    pub next_available_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobPage {
    pub rows: Vec<JobView>,
    pub truncated: bool,
    pub next_after: Option<String>,
}

impl JobStore {
    pub fn view(&self, at: &JobTarget, id: &str, now_ms: u64) -> Option<JobView> {
        let q = self.queues.get(&at.queue)?;
        let job = q.scopes.get(&at.scope)?.get(id)?;
        let v = JobView::of(at, id, job, now_ms, q.config.retry.as_ref());
        (!self.retired(&at.queue, v.state, v.updated_ms, now_ms)).then_some(v)
    }

    /// A finished job past its queue's retention is gone for readers (and
    /// writers), whether or not a sweep has dropped it yet.
    pub(crate) fn retired(&self, queue: &str, state: JobState, updated_ms: u64, now_ms: u64) -> bool {
        let Some(r) = self.config(queue).completed_retention_ms else { return false };
        state.is_finished() && updated_ms.saturating_add(r) <= now_ms
    }

    /// Jobs of a scope by id after `after`, optionally in one state.
    pub fn scan(
        &self,
        at: &JobTarget,
        state: Option<JobState>,
        after: Option<&str>,
        limit: u32,
        now_ms: u64,
    ) -> JobPage {
        let mut page = JobPage { rows: Vec::new(), truncated: false, next_after: None };
        let Some(q) = self.queues.get(&at.queue) else { return page };
        let Some(s) = q.scopes.get(&at.scope) else { return page };
        for (id, job) in s.after(after) {
            let v = JobView::of(at, id, job, now_ms, q.config.retry.as_ref());
            if state.is_some_and(|st| st != v.state) || self.retired(&at.queue, v.state, v.updated_ms, now_ms) {
                continue;
            }
            if page.rows.len() == limit as usize {
                page.truncated = true;
                break;
            }
            page.rows.push(v);
        }
        if page.truncated {
            page.next_after = page.rows.last().map(|r| r.id.clone());
        }
        page
    }

    /// Whether a claim at `now_ms` would take a job (or answer a claim
    /// remembered by `request_id`), read without changing anything.
    pub fn claimable(&self, at: &JobTarget, request_id: Option<&str>, now_ms: u64) -> bool {
        let Some(s) = self.scope(at) else { return false };
        if request_id.is_some_and(|r| s.recall(r, now_ms).is_some()) {
            return true;
        }
        if s.pending_by_time().next().is_some_and(|(t, _, _)| *t <= now_ms) {
            return true;
        }
        let retry = self.queues.get(&at.queue).and_then(|q| q.config.retry);
        // Leases that ran out on their last attempt are not claimable; past
        // a few of them, let the claim entry settle the rest.
        s.leased_by_expiry()
            .take_while(|(t, _, _)| *t <= now_ms)
            .take(64)
            .enumerate()
            .any(|(i, (_, _, id))| i == 63 || !super::exhausted(s.get(id).map_or(0, |j| j.attempts), retry.as_ref()))
    }

    /// Counts by state as readers see them, and when work is available.
    pub fn stats(&self, at: &JobTarget, now_ms: u64) -> JobStats {
        let mut st = JobStats::default();
        let Some(q) = self.queues.get(&at.queue) else { return st };
        let Some(s) = q.scopes.get(&at.scope) else { return st };
        let retry = q.config.retry.as_ref();
        let note_ready = |st: &mut JobStats, since: u64| {
            st.ready_count += 1;
            st.oldest_ready_ms = Some(st.oldest_ready_ms.map_or(since, |o| o.min(since)));
        };
        for (at_ms, _, _) in s.pending_by_time() {
            st.counts.pending += 1;
            if *at_ms <= now_ms {
                note_ready(&mut st, *at_ms);
            } else if st.next_available_ms.is_none() {
                st.next_available_ms = Some(*at_ms);
            }
        }
        let mut next_lease = None;
        for (exp, _, id) in s.leased_by_expiry() {
            if *exp > now_ms {
                st.counts.leased += 1;
                next_lease.get_or_insert(*exp);
                continue;
            }
            let attempts = s.get(id).map_or(0, |j| j.attempts);
            if super::exhausted(attempts, retry) {
                // Failed when the lease ran out; retention counts from then.
                let retired = q.config.completed_retention_ms.is_some_and(|r| exp.saturating_add(r) <= now_ms);
                if !retired {
                    st.counts.failed += 1;
                }
            } else {
                st.counts.pending += 1;
                note_ready(&mut st, *exp);
            }
        }
        st.next_available_ms = [st.next_available_ms, next_lease].into_iter().flatten().min();
        let retention = q.config.completed_retention_ms;
        for (ended, id) in s.finished_by_time() {
            if retention.is_some_and(|r| ended.saturating_add(r) <= now_ms) {
                continue;
            }
            match s.get(id).map(|j| j.state) {
                Some(JobState::Completed) => st.counts.completed += 1,
                _ => st.counts.failed += 1,
            }
        }
        st.ready = st.ready_count > 0;
        st
    }
}
