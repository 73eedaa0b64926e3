//! A job call applied as one. Operations run in order against the store
//! itself (a later one sees an earlier one's change); every change is first
//! written to an undo log, so an operation that must refuse the whole call
//! (`required` and refused, or invalid) puts back everything before it.

use regina_types::limits::{JOB_REQUEST_ID_WINDOW_MS, JOB_SWEEP_ROWS_MAX};
use serde::{Deserialize, Serialize};

use super::scope::RememberedClaim;
use super::view::{ClaimView, JobPage, JobStats, JobView};
use super::{
    exhausted, Availability, Job, JobConfig, JobConfigPatch, JobOp, JobState, JobStore, JobTarget, Lease, LeaseProof,
};

/// Why a write did not apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobCode {
    /// Enqueue of an id that is pending or leased.
    Exists,
    /// The lease named is not the job's current, unexpired lease.
    LeaseLost,
    /// Retry of a job that is not failed.
    NotFailed,
    /// A lease longer than the queue's `lease.maxMs`.
    LeaseTooLong,
}

impl JobCode {
    pub fn as_str(self) -> &'static str {
        match self {
            JobCode::Exists => "JOB_EXISTS",
            JobCode::LeaseLost => "LEASE_LOST",
            JobCode::NotFailed => "JOB_NOT_FAILED",
            JobCode::LeaseTooLong => "LEASE_TOO_LONG",
        }
    }

    /// Invalid requests refuse their whole call (a 400), whether required
    /// or not; the others are verdicts on one operation.
    pub fn is_invalid(self) -> bool {
        self == JobCode::LeaseTooLong
    }
}

/// The answer to one job operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobResult {
    Configured(JobConfig),
    /// A write applied; `job` is the job after it (`None`: cancelled).
    Applied {
        job: Option<JobView>,
        existed: bool,
    },
    /// A write refused; `job` is the job as it is.
    Refused {
        code: JobCode,
        job: Option<JobView>,
    },
    Claimed(Option<ClaimView>),
    Renewed(ClaimView),
    Got(Option<JobView>),
    Page(JobPage),
    Stats(JobStats),
}

/// A call refused whole: nothing it did stays.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRefusal {
    pub index: usize,
    pub code: JobCode,
    pub job: Option<JobView>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum JobsOutcome {
    Done(Vec<JobResult>),
    Refused(JobRefusal),
}

/// One change, and how to put it back.
enum Undo {
    Job {
        at: JobTarget,
        id: String,
        before: Option<Job>,
    },
    Config {
        queue: String,
        before: JobConfig,
    },
    Request {
        at: JobTarget,
        request_id: String,
    },
    /// A claim minted a token: a call refused whole hands none out, so the
    /// next claim's token is the last one handed out plus one.
    Token {
        at: JobTarget,
        before: u64,
    },
}

impl JobStore {
    /// Applies `ops` at `now_ms`, all or nothing when one must refuse.
    pub(crate) fn call(&mut self, ops: &[JobOp], now_ms: u64) -> JobsOutcome {
        let mut undo = Vec::new();
        let mut results = Vec::with_capacity(ops.len());
        for (index, op) in ops.iter().enumerate() {
            let r = self.op(op, now_ms, &mut undo);
            if let JobResult::Refused { code, job } = &r {
                if op.is_required() || code.is_invalid() {
                    let refusal = JobRefusal { index, code: *code, job: job.clone() };
                    self.roll_back(undo);
                    return JobsOutcome::Refused(refusal);
                }
            }
            results.push(r);
        }
        JobsOutcome::Done(results)
    }

    fn roll_back(&mut self, undo: Vec<Undo>) {
        for u in undo.into_iter().rev() {
            match u {
                Undo::Job { at, id, before } => {
                    let s = self.scope_mut(&at);
                    match before {
                        Some(job) => s.put(&id, job),
                        None => {
                            s.take(&id);
                        }
                    }
                }
                Undo::Config { queue, before } => self.queues.entry(queue).or_default().config = before,
                Undo::Request { at, request_id } => self.scope_mut(&at).forget_request(&request_id),
                Undo::Token { at, before } => self.scope_mut(&at).reset_token(before),
            }
        }
    }

    fn scope_mut(&mut self, at: &JobTarget) -> &mut super::Scope {
        self.queues.entry(at.queue.clone()).or_default().scopes.entry(at.scope.clone()).or_default()
    }

    /// Stores `job` (or removes the id), logging what was there.
    fn write(&mut self, at: &JobTarget, id: &str, job: Option<Job>, undo: &mut Vec<Undo>) {
        let s = self.scope_mut(at);
        let before = match job {
            Some(j) => {
                let before = s.get(id).cloned();
                s.put(id, j);
                before
            }
            None => s.take(id),
        };
        undo.push(Undo::Job { at: at.clone(), id: id.to_string(), before });
    }

    /// The job judged at `now_ms`, as stored after settling a run-out lease.
    /// A finished job past its queue's retention is gone for writers as it
    /// is for readers, whether or not a sweep has dropped it yet.
    fn current(&self, at: &JobTarget, id: &str, now_ms: u64) -> Option<Job> {
        let job = self.scope(at)?.get(id)?.effective(now_ms, self.config(&at.queue).retry.as_ref());
        (!self.retired(&at.queue, job.state, job.updated_ms, now_ms)).then_some(job)
    }

    fn op(&mut self, op: &JobOp, now: u64, undo: &mut Vec<Undo>) -> JobResult {
        match op {
            JobOp::Configure { queue, patch } => self.configure(queue, patch, now, undo),
            JobOp::Enqueue { at, id, payload, when, replace, .. } => {
                self.enqueue(at, id, payload, when, *replace, now, undo)
            }
            JobOp::Claim { at, owner, lease_ms, request_id } => self.claim(at, owner, *lease_ms, request_id, now, undo),
            JobOp::Renew { at, proof, lease_ms, .. } => self.renew(at, proof, *lease_ms, now, undo),
            JobOp::Complete { at, proof, result, .. } => {
                let Some(mut job) = self.leased(at, proof, now) else {
                    return self.refuse(JobCode::LeaseLost, at, &proof.id, now);
                };
                job.result = Some(result.clone());
                self.finish(at, &proof.id, &mut job, JobState::Completed, now, undo)
            }
            JobOp::Fail { at, proof, error, retry, delay_ms, .. } => {
                let Some(mut job) = self.leased(at, proof, now) else {
                    return self.refuse(JobCode::LeaseLost, at, &proof.id, now);
                };
                job.error = Some(error.clone());
                let policy = self.config_retry(&at.queue);
                match policy.filter(|p| *retry && !exhausted(job.attempts, Some(p))) {
                    None => self.finish(at, &proof.id, &mut job, JobState::Failed, now, undo),
                    Some(p) => {
                        let delay = delay_ms.unwrap_or_else(|| p.backoff_ms(job.attempts));
                        self.requeue(at, &proof.id, job, now.saturating_add(delay), now, undo)
                    }
                }
            }
            JobOp::Release { at, proof, delay_ms, .. } => {
                let Some(job) = self.leased(at, proof, now) else {
                    return self.refuse(JobCode::LeaseLost, at, &proof.id, now);
                };
                self.requeue(at, &proof.id, job, now.saturating_add(delay_ms.unwrap_or(0)), now, undo)
            }
            JobOp::Retry { at, id, delay_ms, .. } => {
                let Some(mut job) = self.current(at, id, now).filter(|j| j.state == JobState::Failed) else {
                    return self.refuse(JobCode::NotFailed, at, id, now);
                };
                job.attempts = 0;
                job.error = None;
                job.finished_ms = None;
                self.requeue(at, id, job, now.saturating_add(delay_ms.unwrap_or(0)), now, undo)
            }
            JobOp::Cancel { at, id, .. } => {
                let existed = self.view(at, id, now).is_some();
                if self.scope(at).is_some_and(|s| s.get(id).is_some()) {
                    self.write(at, id, None, undo);
                }
                JobResult::Applied { job: None, existed }
            }
            JobOp::Get { at, id } => JobResult::Got(self.view(at, id, now)),
            JobOp::Scan { at, state, after, limit } => {
                JobResult::Page(self.scan(at, *state, after.as_deref(), *limit, now))
            }
            JobOp::Stats { at } => JobResult::Stats(self.stats(at, now)),
        }
    }

    /// Patches a queue's config. A lease that ran out was judged when it
    /// ran out, under the retry policy of that time: such jobs are settled
    /// before the policy changes, or a job read as failed could turn pending
    /// (or the reverse) without anything done to it. Settling stores what
    /// readers already see, so it needs no undo.
    fn configure(&mut self, queue: &str, patch: &JobConfigPatch, now: u64, undo: &mut Vec<Undo>) -> JobResult {
        let q = self.queues.entry(queue.to_string()).or_default();
        let retry = q.config.retry;
        for s in q.scopes.values_mut() {
            s.settle_expired(now, retry.as_ref(), usize::MAX);
        }
        let config = q.config.patched(patch);
        let before = std::mem::replace(&mut q.config, config.clone());
        undo.push(Undo::Config { queue: queue.to_string(), before });
        JobResult::Configured(config)
    }

    /// Stores a new pending job; over a finished one only with `replace`.
    #[allow(clippy::too_many_arguments)] // one op's fields, passed as they are
    fn enqueue(
        &mut self,
        at: &JobTarget,
        id: &str,
        payload: &[u8],
        when: &Availability,
        replace: bool,
        now: u64,
        undo: &mut Vec<Undo>,
    ) -> JobResult {
        let existing = self.current(at, id, now);
        if let Some(j) = &existing {
            if !j.state.is_finished() || !replace {
                return self.refuse(JobCode::Exists, at, id, now);
            }
        }
        let seq = self.scope_mut(at).mint_seq();
        let job = Job {
            state: JobState::Pending,
            payload: payload.to_vec(),
            available_ms: when.resolve(now),
            seq,
            lease: None,
            attempts: 0,
            created_ms: now,
            updated_ms: now,
            finished_ms: None,
            result: None,
            error: None,
        };
        self.write(at, id, Some(job), undo);
        self.applied(at, id, now, existing.is_some())
    }

    /// Extends a current lease from now, keeping its token.
    fn renew(
        &mut self,
        at: &JobTarget,
        proof: &LeaseProof,
        lease_ms: Option<u64>,
        now: u64,
        undo: &mut Vec<Undo>,
    ) -> JobResult {
        let lease_ms = match self.lease_length(&at.queue, lease_ms) {
            Ok(ms) => ms,
            Err(code) => return JobResult::Refused { code, job: None },
        };
        let Some(mut job) = self.leased(at, proof, now) else {
            return self.refuse(JobCode::LeaseLost, at, &proof.id, now);
        };
        let lease = job.lease.as_mut().expect("a current lease");
        lease.expires_ms = now.saturating_add(lease_ms);
        // A new expiry is a new instant of availability: it ties after the
        // ones set by earlier entries.
        job.seq = self.scope_mut(at).mint_seq();
        let lease = job.lease.as_ref().expect("a current lease");
        let claim = ClaimView {
            scope: at.scope.clone(),
            id: proof.id.clone(),
            payload: job.payload.clone(),
            attempt: job.attempts,
            owner: lease.owner.clone(),
            token: lease.token,
            expires_ms: lease.expires_ms,
        };
        job.updated_ms = now;
        self.write(at, &proof.id, Some(job), undo);
        JobResult::Renewed(claim)
    }

    fn config_retry(&self, queue: &str) -> Option<super::RetryPolicy> {
        self.config(queue).retry
    }

    /// A lease length: the one asked for, else the queue's default; above
    /// the queue's maximum it is refused.
    fn lease_length(&self, queue: &str, asked: Option<u64>) -> Result<u64, JobCode> {
        let c = self.config(queue);
        match asked {
            Some(ms) if ms > c.lease_max_ms => Err(JobCode::LeaseTooLong),
            Some(ms) => Ok(ms),
            None => Ok(c.lease_default_ms.min(c.lease_max_ms)),
        }
    }

    /// The job, when `proof` names its current unexpired lease.
    fn leased(&self, at: &JobTarget, proof: &LeaseProof, now: u64) -> Option<Job> {
        let job = self.scope(at)?.get(&proof.id)?;
        job.current_lease(proof, now)?;
        Some(job.clone())
    }

    fn refuse(&self, code: JobCode, at: &JobTarget, id: &str, now: u64) -> JobResult {
        JobResult::Refused { code, job: self.view(at, id, now) }
    }

    fn applied(&self, at: &JobTarget, id: &str, now: u64, existed: bool) -> JobResult {
        JobResult::Applied { job: self.view(at, id, now), existed }
    }

    fn finish(
        &mut self,
        at: &JobTarget,
        id: &str,
        job: &mut Job,
        state: JobState,
        now: u64,
        undo: &mut Vec<Undo>,
    ) -> JobResult {
        job.state = state;
        job.lease = None;
        job.finished_ms = Some(now);
        job.updated_ms = now;
        self.write(at, id, Some(job.clone()), undo);
        self.applied(at, id, now, true)
    }

    fn requeue(
        &mut self,
        at: &JobTarget,
        id: &str,
        mut job: Job,
        available_ms: u64,
        now: u64,
        undo: &mut Vec<Undo>,
    ) -> JobResult {
        job.state = JobState::Pending;
        job.lease = None;
        job.available_ms = available_ms;
        job.seq = self.scope_mut(at).mint_seq();
        job.updated_ms = now;
        self.write(at, id, Some(job), undo);
        self.applied(at, id, now, true)
    }

    fn claim(
        &mut self,
        at: &JobTarget,
        owner: &str,
        lease_ms: Option<u64>,
        request_id: &Option<String>,
        now: u64,
        undo: &mut Vec<Undo>,
    ) -> JobResult {
        let lease_ms = match self.lease_length(&at.queue, lease_ms) {
            Ok(ms) => ms,
            Err(code) => return JobResult::Refused { code, job: None },
        };
        let retry = self.config_retry(&at.queue);
        let s = self.scope_mut(at);
        s.forget_requests_before(now.saturating_sub(JOB_REQUEST_ID_WINDOW_MS), 64);
        if let Some(rid) = request_id {
            if let Some(c) = s.recall(rid, now) {
                return JobResult::Claimed(Some(ClaimView::of(&at.scope, c)));
            }
        }
        // Jobs whose last lease ran out are settled as failed on the way;
        // that is what readers already see, so it needs no undo.
        let mut settled = 0;
        let id = loop {
            let Some(id) = s.next_ready(now).map(str::to_string) else { return JobResult::Claimed(None) };
            let job = s.get(&id).expect("indexed jobs exist");
            if job.state == JobState::Leased && exhausted(job.attempts, retry.as_ref()) && settled < JOB_SWEEP_ROWS_MAX
            {
                s.settle(&id, now, retry.as_ref());
                settled += 1;
                continue;
            }
            break id;
        };
        let stored = s.get(&id).expect("indexed jobs exist");
        if stored.state == JobState::Leased && exhausted(stored.attempts, retry.as_ref()) {
            return JobResult::Claimed(None);
        }
        // A job whose lease ran out is claimed as readers see it: pending
        // since the expiry, whether or not a sweep has settled it.
        let mut job = stored.effective(now, retry.as_ref());
        undo.push(Undo::Token { at: at.clone(), before: s.last_token() });
        let token = s.mint_token();
        // The lease's expiry is when the job may become available again;
        // ties at that instant go by the entry that set it.
        job.seq = s.mint_seq();
        job.attempts = job.attempts.saturating_add(1);
        job.state = JobState::Leased;
        job.lease = Some(Lease { owner: owner.to_string(), token, expires_ms: now.saturating_add(lease_ms) });
        job.updated_ms = now;
        let view = ClaimView {
            scope: at.scope.clone(),
            id: id.clone(),
            payload: job.payload.clone(),
            attempt: job.attempts,
            owner: owner.to_string(),
            token,
            expires_ms: now.saturating_add(lease_ms),
        };
        self.write(at, &id, Some(job), undo);
        if let Some(rid) = request_id {
            self.scope_mut(at).remember(rid, RememberedClaim::of(&view, now));
            undo.push(Undo::Request { at: at.clone(), request_id: rid.clone() });
        }
        JobResult::Claimed(Some(view))
    }
}
