//! A reference model of job queues, written from the contract rather than
//! from the implementation's structure: jobs sit in one plain map, the next
//! job to claim is found by scanning them all, a call is judged on a copy
//! that replaces the model only when nothing refuses the whole call, and a
//! lease that ran out is settled as soon as time passes it (with the queue's
//! configuration of that moment) instead of when someone looks.
//!
//! The model borrows the state crate's plain data types (configurations and
//! views) to state its expectations, but none of their methods.

use std::collections::BTreeMap;

use regina_state::jobs::apply::{JobCode, JobRefusal, JobResult, JobsOutcome};
use regina_state::jobs::view::{ClaimView, JobCounts, JobPage, JobStats, JobView, LeaseView};
use regina_state::jobs::{
    Availability, JobConfig, JobConfigPatch, JobOp, JobState, JobTarget, LeaseProof, RetryPolicy,
};

/// The contract's defaults, written out rather than read from the code.
pub fn default_config() -> JobConfig {
    JobConfig {
        lease_default_ms: 30_000,
        lease_max_ms: 300_000,
        retry: Some(RetryPolicy { max_attempts: 5, initial_delay_ms: 1_000, max_delay_ms: 60_000 }),
        payload_schema: None,
        result_schema: None,
        completed_retention_ms: None,
    }
}

/// A remembered claim is answered again while `now < at + this`.
pub const REQUEST_WINDOW_MS: u64 = 600_000;

pub const LEASE_EXPIRED: &[u8] = br#"{"code":"LEASE_EXPIRED"}"#;

#[derive(Debug, Clone, PartialEq)]
pub struct MLease {
    pub owner: String,
    pub token: u64,
    pub expires: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MJob {
    pub state: JobState,
    pub payload: Vec<u8>,
    pub available: u64,
    /// Entry order of the event that last set when the job becomes
    /// available: an enqueue, a requeue, or a claim or renew (which set the
    /// instant its lease runs out). Breaks ties between equal instants.
    pub order: u64,
    pub lease: Option<MLease>,
    pub attempts: u32,
    pub created: u64,
    pub updated: u64,
    pub finished: Option<u64>,
    pub result: Option<Vec<u8>>,
    pub error: Option<Vec<u8>>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct MScope {
    pub jobs: BTreeMap<String, MJob>,
    pub last_token: u64,
    /// Request id to (the claim answered, when).
    pub requests: BTreeMap<String, (ClaimView, u64)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    pub now: u64,
    pub configs: BTreeMap<String, JobConfig>,
    pub scopes: BTreeMap<(String, String), MScope>,
    order: u64,
}

fn patched(c: &JobConfig, p: &JobConfigPatch) -> JobConfig {
    let mut c = c.clone();
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

/// `min(maxDelay, initialDelay * 2^(attempts-1))`, by repeated doubling.
pub fn backoff(p: &RetryPolicy, attempts: u32) -> u64 {
    let mut d = p.initial_delay_ms;
    for _ in 1..attempts {
        if d >= p.max_delay_ms {
            break;
        }
        d = d.saturating_mul(2);
    }
    d.min(p.max_delay_ms)
}

fn resolve(when: Availability, now: u64) -> u64 {
    match when {
        Availability::Now => now,
        Availability::AfterMs(d) => now + d,
        Availability::AtMs(at) => {
            if at > now {
                at
            } else {
                now
            }
        }
    }
}

impl Model {
    pub fn new(now: u64) -> Model {
        Model { now, configs: BTreeMap::new(), scopes: BTreeMap::new(), order: 0 }
    }

    pub fn config(&self, queue: &str) -> JobConfig {
        self.configs.get(queue).cloned().unwrap_or_else(default_config)
    }

    fn stamp(&mut self) -> u64 {
        self.order += 1;
        self.order
    }

    /// Time moves to `now`: every lease that ran out by then is a failed
    /// attempt, judged under the configuration in force when it ran out
    /// (configurations change only at entries, so that is the current one).
    pub fn advance(&mut self, now: u64) {
        self.now = self.now.max(now);
        let now = self.now;
        let configs = self.configs.clone();
        for ((queue, _), scope) in self.scopes.iter_mut() {
            let retry = configs.get(queue).cloned().unwrap_or_else(default_config).retry;
            for job in scope.jobs.values_mut() {
                let Some(l) = job.lease.clone() else { continue };
                if l.expires > now {
                    continue;
                }
                job.lease = None;
                job.updated = job.updated.max(l.expires);
                if retry.is_some_and(|r| job.attempts >= r.max_attempts) {
                    job.state = JobState::Failed;
                    job.error = Some(LEASE_EXPIRED.to_vec());
                    job.finished = Some(l.expires);
                } else {
                    job.state = JobState::Pending;
                    job.available = l.expires;
                }
            }
        }
    }

    /// A finished job past its queue's retention is gone for readers.
    fn visible<'a>(&self, queue: &str, job: &'a MJob) -> Option<&'a MJob> {
        let retention = self.config(queue).completed_retention_ms;
        match (job.finished, retention) {
            (Some(f), Some(r)) if f + r <= self.now => None,
            _ => Some(job),
        }
    }

    pub fn job(&self, at: &JobTarget, id: &str) -> Option<&MJob> {
        let job = self.scopes.get(&(at.queue.clone(), at.scope.clone()))?.jobs.get(id)?;
        self.visible(&at.queue, job)
    }

    pub fn view(&self, at: &JobTarget, id: &str) -> Option<JobView> {
        self.job(at, id).map(|j| view_of(at, id, j))
    }

    fn scope(&mut self, at: &JobTarget) -> &mut MScope {
        self.scopes.entry((at.queue.clone(), at.scope.clone())).or_default()
    }

    fn put(&mut self, at: &JobTarget, id: &str, job: MJob) {
        self.scope(at).jobs.insert(id.to_string(), job);
    }

    /// The job when `proof` names its lease and the lease has not run out.
    fn leased(&self, at: &JobTarget, proof: &LeaseProof) -> Option<MJob> {
        let job = self.job(at, &proof.id)?;
        let l = job.lease.as_ref()?;
        (job.state == JobState::Leased && l.owner == proof.owner && l.token == proof.token && self.now < l.expires)
            .then(|| job.clone())
    }

    fn lease_length(&self, queue: &str, asked: Option<u64>) -> Result<u64, JobCode> {
        let c = self.config(queue);
        match asked {
            Some(ms) if ms > c.lease_max_ms => Err(JobCode::LeaseTooLong),
            Some(ms) => Ok(ms),
            None => Ok(c.lease_default_ms),
        }
    }

    fn refused(&self, code: JobCode, at: &JobTarget, id: &str) -> JobResult {
        JobResult::Refused { code, job: self.view(at, id) }
    }

    fn requeue(&mut self, at: &JobTarget, id: &str, mut job: MJob, available: u64) -> JobResult {
        job.state = JobState::Pending;
        job.lease = None;
        job.available = available;
        job.order = self.stamp();
        job.updated = self.now;
        self.put(at, id, job);
        JobResult::Applied { job: self.view(at, id), existed: true }
    }

    fn finish(&mut self, at: &JobTarget, id: &str, mut job: MJob, state: JobState) -> JobResult {
        job.state = state;
        job.lease = None;
        job.finished = Some(self.now);
        job.updated = self.now;
        self.put(at, id, job);
        JobResult::Applied { job: self.view(at, id), existed: true }
    }

    /// Applies a call at the model's time: every op in order; a refusal
    /// that is required (or an invalid request) leaves the model as it was.
    pub fn call(&mut self, ops: &[JobOp]) -> JobsOutcome {
        let before = self.clone();
        let mut results = Vec::new();
        for (index, op) in ops.iter().enumerate() {
            let r = self.op(op);
            if let JobResult::Refused { code, job } = &r {
                if *code == JobCode::LeaseTooLong || op.is_required() {
                    let refusal = JobRefusal { index, code: *code, job: job.clone() };
                    *self = before;
                    return JobsOutcome::Refused(refusal);
                }
            }
            results.push(r);
        }
        JobsOutcome::Done(results)
    }

    fn op(&mut self, op: &JobOp) -> JobResult {
        let now = self.now;
        match op {
            JobOp::Configure { queue, patch } => {
                let c = patched(&self.config(queue), patch);
                self.configs.insert(queue.clone(), c.clone());
                JobResult::Configured(c)
            }
            JobOp::Enqueue { at, id, payload, when, replace, .. } => {
                let existing = self.job(at, id).cloned();
                if let Some(j) = &existing {
                    if !*replace || !matches!(j.state, JobState::Completed | JobState::Failed) {
                        return self.refused(JobCode::Exists, at, id);
                    }
                }
                let job = MJob {
                    state: JobState::Pending,
                    payload: payload.clone(),
                    available: resolve(*when, now),
                    order: self.stamp(),
                    lease: None,
                    attempts: 0,
                    created: now,
                    updated: now,
                    finished: None,
                    result: None,
                    error: None,
                };
                self.put(at, id, job);
                JobResult::Applied { job: self.view(at, id), existed: existing.is_some() }
            }
            JobOp::Claim { at, owner, lease_ms, request_id } => {
                let lease_ms = match self.lease_length(&at.queue, *lease_ms) {
                    Ok(ms) => ms,
                    Err(code) => return JobResult::Refused { code, job: None },
                };
                if let Some(rid) = request_id {
                    if let Some((claim, when)) = self.scope(at).requests.get(rid) {
                        if now < when + REQUEST_WINDOW_MS {
                            return JobResult::Claimed(Some(claim.clone()));
                        }
                    }
                }
                // The longest-waiting ready job: a linear scan.
                let scope = self.scope(at);
                let next = scope
                    .jobs
                    .iter()
                    .filter(|(_, j)| j.state == JobState::Pending && j.available <= now)
                    .min_by_key(|(_, j)| (j.available, j.order))
                    .map(|(id, j)| (id.clone(), j.clone()));
                let Some((id, mut job)) = next else { return JobResult::Claimed(None) };
                scope.last_token += 1;
                let token = scope.last_token;
                job.state = JobState::Leased;
                job.attempts += 1;
                job.lease = Some(MLease { owner: owner.clone(), token, expires: now + lease_ms });
                job.updated = now;
                job.order = self.stamp();
                let claim = ClaimView {
                    scope: at.scope.clone(),
                    id: id.clone(),
                    payload: job.payload.clone(),
                    attempt: job.attempts,
                    owner: owner.clone(),
                    token,
                    expires_ms: now + lease_ms,
                };
                self.put(at, &id, job);
                if let Some(rid) = request_id {
                    self.scope(at).requests.insert(rid.clone(), (claim.clone(), now));
                }
                JobResult::Claimed(Some(claim))
            }
            JobOp::Renew { at, proof, lease_ms, .. } => {
                let lease_ms = match self.lease_length(&at.queue, *lease_ms) {
                    Ok(ms) => ms,
                    Err(code) => return JobResult::Refused { code, job: None },
                };
                let Some(mut job) = self.leased(at, proof) else {
                    return self.refused(JobCode::LeaseLost, at, &proof.id);
                };
                let lease = job.lease.as_mut().expect("leased");
                lease.expires = now + lease_ms;
                let claim = ClaimView {
                    scope: at.scope.clone(),
                    id: proof.id.clone(),
                    payload: job.payload.clone(),
                    attempt: job.attempts,
                    owner: lease.owner.clone(),
                    token: lease.token,
                    expires_ms: lease.expires,
                };
                job.updated = now;
                job.order = self.stamp();
                self.put(at, &proof.id, job);
                JobResult::Renewed(claim)
            }
            JobOp::Complete { at, proof, result, .. } => {
                let Some(mut job) = self.leased(at, proof) else {
                    return self.refused(JobCode::LeaseLost, at, &proof.id);
                };
                job.result = Some(result.clone());
                self.finish(at, &proof.id, job, JobState::Completed)
            }
            JobOp::Fail { at, proof, error, retry, delay_ms, .. } => {
                let Some(mut job) = self.leased(at, proof) else {
                    return self.refused(JobCode::LeaseLost, at, &proof.id);
                };
                job.error = Some(error.clone());
                match self.config(&at.queue).retry {
                    Some(p) if *retry && job.attempts < p.max_attempts => {
                        let delay = delay_ms.unwrap_or_else(|| backoff(&p, job.attempts));
                        self.requeue(at, &proof.id, job, now + delay)
                    }
                    _ => self.finish(at, &proof.id, job, JobState::Failed),
                }
            }
            JobOp::Release { at, proof, delay_ms, .. } => {
                let Some(job) = self.leased(at, proof) else {
                    return self.refused(JobCode::LeaseLost, at, &proof.id);
                };
                self.requeue(at, &proof.id, job, now + delay_ms.unwrap_or(0))
            }
            JobOp::Retry { at, id, delay_ms, .. } => {
                let Some(mut job) = self.job(at, id).filter(|j| j.state == JobState::Failed).cloned() else {
                    return self.refused(JobCode::NotFailed, at, id);
                };
                job.attempts = 0;
                job.error = None;
                job.finished = None;
                self.requeue(at, id, job, now + delay_ms.unwrap_or(0))
            }
            JobOp::Cancel { at, id, .. } => {
                let existed = self.job(at, id).is_some();
                self.scope(at).jobs.remove(id);
                JobResult::Applied { job: None, existed }
            }
            JobOp::Get { at, id } => JobResult::Got(self.view(at, id)),
            JobOp::Scan { at, state, after, limit } => JobResult::Page(self.scan(at, *state, after.as_deref(), *limit)),
            JobOp::Stats { at } => JobResult::Stats(self.stats(at)),
        }
    }

    pub fn scan(&self, at: &JobTarget, state: Option<JobState>, after: Option<&str>, limit: u32) -> JobPage {
        let mut rows: Vec<JobView> = Vec::new();
        if let Some(s) = self.scopes.get(&(at.queue.clone(), at.scope.clone())) {
            for (id, j) in &s.jobs {
                if after.is_some_and(|a| id.as_str() <= a) {
                    continue;
                }
                let Some(j) = self.visible(&at.queue, j) else { continue };
                if state.is_none_or(|st| st == j.state) {
                    rows.push(view_of(at, id, j));
                }
            }
        }
        let truncated = rows.len() > limit as usize;
        rows.truncate(limit as usize);
        let next_after = if truncated { rows.last().map(|r| r.id.clone()) } else { None };
        JobPage { rows, truncated, next_after }
    }

    pub fn stats(&self, at: &JobTarget) -> JobStats {
        let mut st = JobStats { ready: false, ready_count: 0, counts: JobCounts::default(), ..Default::default() };
        let Some(s) = self.scopes.get(&(at.queue.clone(), at.scope.clone())) else { return st };
        let now = self.now;
        for j in s.jobs.values().filter_map(|j| self.visible(&at.queue, j)) {
            match j.state {
                JobState::Pending => {
                    st.counts.pending += 1;
                    if j.available <= now {
                        st.ready_count += 1;
                        st.oldest_ready_ms = Some(st.oldest_ready_ms.map_or(j.available, |o| o.min(j.available)));
                    } else {
                        st.next_available_ms = Some(st.next_available_ms.map_or(j.available, |n| n.min(j.available)));
                    }
                }
                JobState::Leased => {
                    st.counts.leased += 1;
                    let e = j.lease.as_ref().expect("leased").expires;
                    st.next_available_ms = Some(st.next_available_ms.map_or(e, |n| n.min(e)));
                }
                JobState::Completed => st.counts.completed += 1,
                JobState::Failed => st.counts.failed += 1,
            }
        }
        st.ready = st.ready_count > 0;
        st
    }

    /// A sweep drops finished jobs past their queue's retention.
    pub fn sweep(&mut self) {
        let now = self.now;
        let configs = self.configs.clone();
        for ((queue, _), s) in self.scopes.iter_mut() {
            let Some(r) = configs.get(queue).and_then(|c| c.completed_retention_ms) else { continue };
            s.jobs.retain(|_, j| j.finished.is_none_or(|f| f + r > now));
        }
    }
}

pub fn view_of(at: &JobTarget, id: &str, j: &MJob) -> JobView {
    JobView {
        queue: at.queue.clone(),
        scope: at.scope.clone(),
        id: id.to_string(),
        payload: j.payload.clone(),
        state: j.state,
        available_ms: j.available,
        lease: j.lease.as_ref().map(|l| LeaseView { owner: l.owner.clone(), token: l.token, expires_ms: l.expires }),
        attempts: j.attempts,
        created_ms: j.created,
        updated_ms: j.updated,
        result: j.result.clone(),
        error: j.error.clone(),
    }
}
