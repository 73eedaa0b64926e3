//! Job queues by id: jobs a worker claims under a lease, renews while it
//! works, and completes, fails (to be retried by the queue's policy) or
//! releases.
//!
//! A job is named by (queue, scope, id), so enqueuing the same id twice is
//! refused (`JOB_EXISTS`) rather than doing the work twice. A claim hands
//! out an owner and a fencing token; every later write on the job names
//! both, and is refused with `LEASE_LOST` once the lease lapsed or the job
//! was claimed again. Refusals are verdicts ([`JobWrite`], [`JobRenewal`]),
//! not errors.
//!
//! [`Jobs`] sends any operations ([`JobOp`]) as one call; [`JobQueue`]
//! has one method per operation on one (queue, scope); a
//! [`JobWorker`](crate::JobWorker) runs the claim/renew/complete loop.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::client::{bool_of, results, segment, Client, Error, Request, Result, REQUEST_TIMEOUT};
use crate::job_answers::{Claim, Job, JobPage, JobRefusal, JobRenewal, JobState, JobStats, JobWrite};
use crate::job_ops::{JobConfig, JobOp};
use crate::job_worker::JobWorker;

/// The answer to [`Jobs::batch`].
#[derive(Debug, Clone, PartialEq)]
pub enum JobBatch {
    /// One raw result per operation, in order.
    Done(Vec<Value>),
    /// A `required` operation did not apply; nothing of the call was written.
    Refused(Box<JobRefusal>),
}

/// The jobs of one broker.
#[derive(Debug, Clone)]
pub struct Jobs {
    client: Client,
}

impl Client {
    pub fn jobs(&self) -> Jobs {
        Jobs { client: self.clone() }
    }
}

impl Jobs {
    /// One (queue, scope) of jobs, in the empty scope.
    pub fn queue(&self, queue: impl Into<String>) -> JobQueue {
        JobQueue { jobs: self.clone(), queue: queue.into(), scope: String::new() }
    }

    /// Runs operations in order as one call: its writes are one durable
    /// entry. A waiting claim must be alone in its call.
    pub async fn batch(&self, ops: &[JobOp]) -> Result<JobBatch> {
        if ops.is_empty() {
            return Err(Error::Invalid("a jobs call needs at least one operation".into()));
        }
        let body = json!({ "operations": ops.iter().map(|o| &o.0).collect::<Vec<_>>() });
        let wait = Duration::from_millis(ops.iter().map(JobOp::wait_ms).max().unwrap_or(0));
        // A long poll may hold the answer for the whole wait.
        let req = Request::new(Method::POST, "/api/v1/jobs").body(&body).timeout(REQUEST_TIMEOUT + wait);
        let (status, answer) = self.client.exchange(req).await?;
        // A refused call names the operation that lost (the contract says
        // with HTTP 409; the verdict is read from the body whatever the status).
        if answer.get("reason").and_then(Value::as_str) == Some("job_precondition") {
            return Ok(JobBatch::Refused(Box::new(JobRefusal::from_wire(&answer)?)));
        }
        if !status.is_success() {
            return Err(Error::from_answer(status, &answer));
        }
        Ok(JobBatch::Done(results(&answer, ops.len())?))
    }

    /// Sends one operation and answers its result. A lone `required` write
    /// that lost answers what a plain refusal does: `applied: false`, its
    /// `code` and the job as it is.
    pub async fn one(&self, op: JobOp) -> Result<Value> {
        match self.batch(std::slice::from_ref(&op)).await? {
            JobBatch::Done(mut r) => Ok(r.remove(0)),
            JobBatch::Refused(r) => Ok(json!({ "applied": false, "code": r.code, "job": r.job_wire })),
        }
    }

    /// Sends a configure operation; answers the configuration now in force.
    pub async fn configure(&self, op: JobOp) -> Result<Value> {
        let r = self.one(op).await?;
        Ok(r.get("config").cloned().unwrap_or(Value::Null))
    }

    /// Sends an enqueue, complete, fail, release or retry.
    pub async fn write(&self, op: JobOp) -> Result<JobWrite> {
        JobWrite::from_wire(&self.one(op).await?)
    }

    /// Sends a claim; `None` when nothing was ready (within its wait).
    pub async fn claim(&self, op: JobOp) -> Result<Option<Claim>> {
        let queue = op.queue().to_string();
        Claim::field_of(&queue, &self.one(op).await?)
    }

    /// Sends a renew.
    pub async fn renew(&self, op: JobOp) -> Result<JobRenewal> {
        let queue = op.queue().to_string();
        JobRenewal::from_wire(&queue, &self.one(op).await?)
    }
}

/// The jobs of one (queue, scope).
#[derive(Debug, Clone)]
pub struct JobQueue {
    jobs: Jobs,
    queue: String,
    scope: String,
}

impl JobQueue {
    /// The same queue in another scope.
    pub fn scope(mut self, scope: impl Into<String>) -> JobQueue {
        self.scope = scope.into();
        self
    }

    pub fn name(&self) -> &str {
        &self.queue
    }

    pub fn scope_name(&self) -> &str {
        &self.scope
    }

    pub fn client(&self) -> &Client {
        &self.jobs.client
    }

    /// The broker-wide handle, for operations built with [`JobOp`].
    pub fn jobs(&self) -> &Jobs {
        &self.jobs
    }

    /// A worker claiming from this queue (see [`JobWorker`]).
    pub fn worker(&self) -> JobWorker {
        JobWorker::new(self.clone())
    }

    fn op(&self, op: JobOp) -> JobOp {
        op.scope(&self.scope)
    }

    pub async fn configure(&self, config: &JobConfig) -> Result<Value> {
        // Configuration is per queue, not per scope.
        self.jobs.configure(JobOp::configure(&self.queue, config)).await
    }

    /// Adds a job ready at once; refused (`JOB_EXISTS`) when the id is taken.
    pub async fn enqueue(&self, id: &str, payload: Value) -> Result<JobWrite> {
        self.jobs.write(self.op(JobOp::enqueue(&self.queue, id, payload))).await
    }

    /// Adds a job ready after `delay`.
    pub async fn enqueue_after(&self, id: &str, payload: Value, delay: Duration) -> Result<JobWrite> {
        self.jobs.write(self.op(JobOp::enqueue(&self.queue, id, payload)).delay(delay)).await
    }

    /// Enqueues many jobs as one call (one durable entry); one verdict per job.
    pub async fn enqueue_many(&self, jobs: &[(&str, Value)]) -> Result<Vec<JobWrite>> {
        let ops: Vec<JobOp> =
            jobs.iter().map(|(id, payload)| self.op(JobOp::enqueue(&self.queue, id, payload.clone()))).collect();
        match self.jobs.batch(&ops).await? {
            JobBatch::Done(rs) => rs.iter().map(JobWrite::from_wire).collect(),
            JobBatch::Refused(r) => Err(Error::Decode(format!("no enqueue was required, yet {r:?}"))),
        }
    }

    /// One ready job for `owner` under the queue's default lease, or `None`.
    pub async fn claim(&self, owner: &str) -> Result<Option<Claim>> {
        self.jobs.claim(self.op(JobOp::claim(&self.queue, owner))).await
    }

    /// Claims with a lease of `lease`, long-polling up to `wait` for a job.
    pub async fn claim_wait(&self, owner: &str, lease: Duration, wait: Duration) -> Result<Option<Claim>> {
        self.jobs.claim(self.op(JobOp::claim(&self.queue, owner)).lease(lease).wait(wait)).await
    }

    /// Extends the lease by the queue's default lease, from now.
    pub async fn renew(&self, claim: &Claim) -> Result<JobRenewal> {
        self.jobs.renew(JobOp::renew(claim)).await
    }

    pub async fn complete(&self, claim: &Claim, result: Value) -> Result<JobWrite> {
        self.jobs.write(JobOp::complete(claim, result)).await
    }

    /// Records a failed attempt; the queue's retry policy decides what next.
    pub async fn fail(&self, claim: &Claim, error: impl Into<Value>) -> Result<JobWrite> {
        self.jobs.write(JobOp::fail(claim, error)).await
    }

    /// Gives the job back unfinished, ready at once.
    pub async fn release(&self, claim: &Claim) -> Result<JobWrite> {
        self.jobs.write(JobOp::release(claim)).await
    }

    /// Makes a failed job pending again; refused (`JOB_NOT_FAILED`) otherwise.
    pub async fn retry(&self, id: &str) -> Result<JobWrite> {
        self.jobs.write(self.op(JobOp::retry(&self.queue, id))).await
    }

    /// Removes a job; false when there was none.
    pub async fn cancel(&self, id: &str) -> Result<bool> {
        let r = self.jobs.one(self.op(JobOp::cancel(&self.queue, id))).await?;
        Ok(bool_of(&r, "existed"))
    }

    pub async fn get(&self, id: &str) -> Result<Option<Job>> {
        let r = self.jobs.one(self.op(JobOp::get(&self.queue, id))).await?;
        if !bool_of(&r, "found") {
            return Ok(None);
        }
        Job::field_of(&r)
    }

    /// One page of jobs (of one state, when given) after `after`, by the operation.
    pub async fn scan(&self, state: Option<JobState>, after: Option<&str>, limit: u32) -> Result<JobPage> {
        let r = self.jobs.one(self.op(JobOp::scan(&self.queue, state, after, Some(limit)))).await?;
        JobPage::from_wire(&r)
    }

    /// The queue's figures, by the operation.
    pub async fn stats(&self) -> Result<JobStats> {
        JobStats::from_wire(&self.jobs.one(self.op(JobOp::stats(&self.queue))).await?)
    }

    /// The same page as [`JobQueue::scan`], by `GET /api/v1/jobs/{queue}`.
    pub async fn list(&self, state: Option<JobState>, after: Option<&str>, limit: u32) -> Result<JobPage> {
        let mut req = Request::new(Method::GET, format!("/api/v1/jobs/{}", segment(&self.queue, false)))
            .query("scope", &self.scope)
            .query("limit", limit);
        if let Some(s) = state {
            req = req.query("state", s.as_str());
        }
        if let Some(a) = after {
            req = req.query("after", a);
        }
        JobPage::from_wire(&self.jobs.client.call(req).await?)
    }

    /// The same figures as [`JobQueue::stats`], by `GET /api/v1/jobs/{queue}/stats`.
    pub async fn read_stats(&self) -> Result<JobStats> {
        let req = Request::new(Method::GET, format!("/api/v1/jobs/{}/stats", segment(&self.queue, false)))
            .query("scope", &self.scope);
        JobStats::from_wire(&self.jobs.client.call(req).await?)
    }
}
