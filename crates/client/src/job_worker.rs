//! A worker loop over one job queue: long-poll a claim, run the caller's
//! handler while the lease is renewed in the background, then complete the
//! job with the handler's `Ok` or fail it with its `Err` (the queue's retry
//! policy schedules the next attempt, with its backoff).
//!
//! The lease is renewed every third of its length, so two renewals may fail
//! in a row before it lapses. A renewal the broker refuses (`LEASE_LOST`:
//! the lease lapsed and the job may be someone else's now) marks the job
//! lost: renewals stop, the handler can see it ([`WorkerJob::is_lost`]),
//! and its outcome is not sent, since the broker would refuse it.
//!
//! The worker stops on its [`Shutdown`] (or on a watch channel given with
//! [`JobWorker::stop_on`]): a job in hand is finished and settled first; a
//! claim still waiting is abandoned, and whatever it claimed is given back.

use std::future::Future;
use std::ops::Deref;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::client::{Error, Result};
use crate::job_answers::{Claim, Job, JobRenewal, JobState, JobWrite};
use crate::job_ops::JobOp;
use crate::jobs::JobQueue;

/// The lease a worker asks for unless told otherwise.
pub const DEFAULT_WORKER_LEASE: Duration = Duration::from_secs(30);
/// How long one claim waits for a job unless told otherwise.
pub const DEFAULT_WORKER_WAIT: Duration = Duration::from_secs(10);
/// The first pause after a failed call; it doubles up to [`ERROR_PAUSE_MAX`].
const ERROR_PAUSE_MIN: Duration = Duration::from_millis(100);
const ERROR_PAUSE_MAX: Duration = Duration::from_secs(2);
/// The pause after an empty claim that did not wait, so such a worker
/// polls rather than spins.
const IDLE_PAUSE: Duration = Duration::from_millis(100);
/// The shortest pause between two renew attempts after a failed one.
const RENEW_RETRY_FLOOR: Duration = Duration::from_millis(50);

/// Tells a worker (or several) to stop once their job in hand is settled.
/// Clones share one signal.
#[derive(Debug, Clone)]
pub struct Shutdown(Arc<watch::Sender<bool>>);

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown::new()
    }
}

impl Shutdown {
    pub fn new() -> Shutdown {
        Shutdown(Arc::new(watch::Sender::new(false)))
    }

    pub fn stop(&self) {
        self.0.send_replace(true);
    }

    pub fn is_stopped(&self) -> bool {
        *self.0.borrow()
    }

    /// A channel that turns `true` when stopped.
    pub fn signal(&self) -> watch::Receiver<bool> {
        self.0.subscribe()
    }
}

/// A handler's failure: what the job's `error` records, and whether the
/// queue's retry policy may try it again.
#[derive(Debug, Clone, PartialEq)]
pub struct JobError {
    pub error: Value,
    pub retry: bool,
    /// A delay before the next attempt instead of the policy's backoff.
    pub delay: Option<Duration>,
}

impl JobError {
    pub fn new(error: impl Into<Value>) -> JobError {
        JobError { error: error.into(), retry: true, delay: None }
    }

    /// Fails the job for good.
    pub fn fatal(error: impl Into<Value>) -> JobError {
        JobError { retry: false, ..JobError::new(error) }
    }

    pub fn delay(mut self, d: Duration) -> JobError {
        self.delay = Some(d);
        self
    }

    fn op(&self, claim: &Claim) -> JobOp {
        let mut op = JobOp::fail(claim, self.error.clone());
        if !self.retry {
            op = op.no_retry();
        }
        if let Some(d) = self.delay {
            op = op.delay(d);
        }
        op
    }
}

/// Any error a handler meets with `?` fails the job, to be retried.
impl<E: std::error::Error> From<E> for JobError {
    fn from(e: E) -> JobError {
        JobError::new(e.to_string())
    }
}

/// What a worker did, answered when it stops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerReport {
    pub claimed: u64,
    pub completed: u64,
    /// Jobs failed (retried or not, as the queue's policy decided).
    pub failed: u64,
    /// Jobs whose lease was lost before they were settled.
    pub lost: u64,
    /// Jobs claimed while stopping and given back unstarted.
    pub released: u64,
    /// Calls that failed and were tried again (broker down, timeouts).
    pub errors: u64,
}

/// The lease of the job in hand, shared by the handler and the renewals.
struct Lease {
    queue: JobQueue,
    length: Duration,
    /// The claim as last renewed: the token the next write must send.
    claim: Mutex<Claim>,
    lost: watch::Sender<bool>,
    /// When the last successful renewal (or the claim) was sent.
    renewed_at: Mutex<Instant>,
    /// One renewal at a time, and none while the outcome is being sent.
    renewing: tokio::sync::Mutex<()>,
}

impl Lease {
    fn claim(&self) -> Claim {
        self.claim.lock().expect("claim lock").clone()
    }

    fn is_lost(&self) -> bool {
        *self.lost.borrow()
    }

    /// When the lease lapses if no renewal lands before then.
    fn deadline(&self) -> Instant {
        *self.renewed_at.lock().expect("renewed_at lock") + self.length
    }
}

/// The job a handler works on: derefs to its [`Claim`] as it was claimed.
pub struct WorkerJob {
    claim: Claim,
    lease: Arc<Lease>,
}

impl Deref for WorkerJob {
    type Target = Claim;
    fn deref(&self) -> &Claim {
        &self.claim
    }
}

impl WorkerJob {
    /// The claim as last renewed (its token is the one the broker expects now).
    pub fn current_claim(&self) -> Claim {
        self.lease.claim()
    }

    /// True once a renewal was refused: the job may be someone else's now.
    pub fn is_lost(&self) -> bool {
        self.lease.is_lost()
    }

    /// Waits until the lease is lost, for a handler that would rather stop early.
    pub async fn lost(&self) {
        let mut rx = self.lease.lost.subscribe();
        let _ = rx.wait_for(|l| *l).await;
    }
}

/// A worker over one (queue, scope). Build it with [`JobQueue::worker`],
/// then [`JobWorker::run`] it.
pub struct JobWorker {
    queue: JobQueue,
    owner: String,
    lease: Duration,
    wait: Duration,
    shutdown: Shutdown,
    stop_on: Vec<watch::Receiver<bool>>,
}

impl JobWorker {
    pub(crate) fn new(queue: JobQueue) -> JobWorker {
        let hex = uuid::Uuid::new_v4().simple().to_string();
        JobWorker {
            queue,
            owner: format!("{}:{}", std::process::id(), &hex[..12]),
            lease: DEFAULT_WORKER_LEASE,
            wait: DEFAULT_WORKER_WAIT,
            shutdown: Shutdown::new(),
            stop_on: Vec::new(),
        }
    }

    /// The owner its claims name (`<pid>:<12 hex>` unless set).
    pub fn owner(mut self, owner: impl Into<String>) -> JobWorker {
        self.owner = owner.into();
        self
    }

    pub fn owner_name(&self) -> &str {
        &self.owner
    }

    /// The lease every claim asks for; it is renewed every third of it.
    pub fn lease(mut self, lease: Duration) -> JobWorker {
        self.lease = lease.max(Duration::from_millis(3));
        self
    }

    /// How long one claim waits for a job (zero: poll).
    pub fn wait(mut self, wait: Duration) -> JobWorker {
        self.wait = wait;
        self
    }

    /// Stops with this shutdown handle (shared with other workers) instead
    /// of the worker's own.
    pub fn shutdown_with(mut self, shutdown: &Shutdown) -> JobWorker {
        self.shutdown = shutdown.clone();
        self
    }

    /// The handle that stops this worker.
    pub fn shutdown(&self) -> Shutdown {
        self.shutdown.clone()
    }

    /// Also stops when `signal` turns `true` (or its sender is dropped).
    pub fn stop_on(mut self, signal: watch::Receiver<bool>) -> JobWorker {
        self.stop_on.push(signal);
        self
    }

    /// One signal for the run that fires on the shutdown handle or on any
    /// `stop_on` channel, so the loop waits on a single receiver. The
    /// forwarding tasks end with the run.
    fn merged_signal(&self) -> (watch::Receiver<bool>, Vec<tokio::task::JoinHandle<()>>) {
        let merged = Shutdown::new();
        let mut sources = self.stop_on.clone();
        sources.push(self.shutdown.signal());
        let tasks = sources
            .into_iter()
            .map(|mut rx| {
                let merged = merged.clone();
                tokio::spawn(async move {
                    // A dropped sender also means stop.
                    let _ = rx.wait_for(|s| *s).await;
                    merged.stop();
                })
            })
            .collect();
        (merged.signal(), tasks)
    }

    /// Claims and works jobs until stopped. Each job gets `handler`; its
    /// `Ok(result)` completes the job, its `Err` fails it. Calls that fail
    /// for want of a broker are tried again with a growing pause; a call the
    /// broker refuses as malformed (an HTTP 4xx) ends the run with its error.
    pub async fn run<H, F>(self, mut handler: H) -> Result<WorkerReport>
    where
        H: FnMut(WorkerJob) -> F,
        F: Future<Output = std::result::Result<Value, JobError>>,
    {
        let (mut stop, forwarders) = self.merged_signal();
        let ran = self.claim_loop(&mut handler, &mut stop).await;
        forwarders.iter().for_each(|t| t.abort());
        ran
    }

    async fn claim_loop<H, F>(&self, handler: &mut H, stop: &mut watch::Receiver<bool>) -> Result<WorkerReport>
    where
        H: FnMut(WorkerJob) -> F,
        F: Future<Output = std::result::Result<Value, JobError>>,
    {
        let mut report = WorkerReport::default();
        let mut pause = ERROR_PAUSE_MIN;
        while !is_set(stop) {
            let request_id = uuid::Uuid::now_v7().to_string();
            let op = self.claim_op(&request_id).wait(self.wait);
            let sent = Instant::now();
            let claimed = tokio::select! {
                biased;
                r = self.queue.jobs().claim(op) => r,
                _ = wait_set(stop) => {
                    self.give_back_abandoned(&request_id, &mut report).await;
                    break;
                }
            };
            match claimed {
                Ok(Some(claim)) => {
                    pause = ERROR_PAUSE_MIN;
                    report.claimed += 1;
                    self.work(claim, sent, handler, &mut report).await;
                }
                Ok(None) => {
                    pause = ERROR_PAUSE_MIN;
                    if self.wait.is_zero() {
                        sleep_unless_stopped(IDLE_PAUSE, stop).await;
                    }
                }
                Err(e) if retryable(&e) => {
                    report.errors += 1;
                    sleep_unless_stopped(pause, stop).await;
                    pause = (pause * 2).min(ERROR_PAUSE_MAX);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(report)
    }

    fn claim_op(&self, request_id: &str) -> JobOp {
        JobOp::claim(self.queue.name(), &self.owner)
            .scope(self.queue.scope_name())
            .lease(self.lease)
            .request_id(request_id)
    }

    /// A waiting claim was abandoned when the stop came: it may have
    /// claimed a job whose answer nobody read. The same request id sent
    /// again without a wait answers that claim (or claims one now); either
    /// way the job goes back at once rather than when its lease lapses.
    async fn give_back_abandoned(&self, request_id: &str, report: &mut WorkerReport) {
        if let Ok(Some(claim)) = self.queue.jobs().claim(self.claim_op(request_id)).await {
            report.claimed += 1;
            if matches!(self.queue.release(&claim).await, Ok(JobWrite { applied: true, .. })) {
                report.released += 1;
            }
        }
    }

    /// Runs the handler on one claimed job under a renewing lease, then
    /// settles the job.
    async fn work<H, F>(&self, claim: Claim, sent: Instant, handler: &mut H, report: &mut WorkerReport)
    where
        H: FnMut(WorkerJob) -> F,
        F: Future<Output = std::result::Result<Value, JobError>>,
    {
        let lease = Arc::new(Lease {
            queue: self.queue.clone(),
            length: self.lease,
            claim: Mutex::new(claim.clone()),
            lost: watch::Sender::new(false),
            renewed_at: Mutex::new(sent),
            renewing: tokio::sync::Mutex::new(()),
        });
        let renewals = tokio::spawn(renew_loop(lease.clone()));
        let outcome = handler(WorkerJob { claim, lease: lease.clone() }).await;
        {
            // Waits out a renewal in flight, so the token read next is final.
            let _one = lease.renewing.lock().await;
            renewals.abort();
        }
        if lease.is_lost() {
            report.lost += 1;
            return;
        }
        let current = lease.claim();
        let op = match &outcome {
            Ok(result) => JobOp::complete(&current, result.clone()),
            Err(e) => e.op(&current),
        };
        let mut completing = outcome.is_ok();
        let verdict = match self.settle(&lease, op).await {
            // A result the queue's schema refuses: the attempt failed.
            Err(Error::Broker { status: 400, message, .. }) if completing => {
                completing = false;
                self.settle(&lease, JobOp::fail(&current, format!("the result was refused: {message}"))).await
            }
            v => v,
        };
        match verdict {
            Ok(JobWrite { applied: true, .. }) if completing => report.completed += 1,
            Ok(JobWrite { applied: true, .. }) => report.failed += 1,
            // Refused (LEASE_LOST), or not answered while the lease held.
            _ => report.lost += 1,
        }
    }

    /// Sends a job's outcome, again after failures for want of a broker, as
    /// long as the lease may still hold.
    async fn settle(&self, lease: &Lease, op: JobOp) -> Result<JobWrite> {
        let mut pause = ERROR_PAUSE_MIN;
        let mut resent = false;
        loop {
            match self.queue.jobs().write(op.clone()).await {
                Err(e) if retryable(&e) && Instant::now() + pause < lease.deadline() => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(ERROR_PAUSE_MAX);
                    resent = true;
                }
                // A resend refused because an earlier send (whose answer was
                // lost) already settled the job: that earlier send applied.
                Ok(w) if resent && !w.applied && w.job.as_ref().is_some_and(|j| settled_by(&op, j)) => {
                    return Ok(JobWrite { applied: true, code: None, ..w });
                }
                v => return v,
            }
        }
    }
}

/// True when `job` is what `op` (a complete or a fail) leaves behind.
fn settled_by(op: &JobOp, job: &Job) -> bool {
    let sent = &op.0;
    match op.name() {
        "complete" => job.state == JobState::Completed && sent.get("result").unwrap_or(&Value::Null) == &job.result,
        "fail" => job.state != JobState::Leased && sent.get("error") == Some(&job.error),
        _ => false,
    }
}

fn is_set(rx: &watch::Receiver<bool>) -> bool {
    *rx.borrow()
}

/// Resolves when `rx` turns `true` (or its sender is gone), holding no
/// borrow of it afterwards.
async fn wait_set(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await.map(|_| ());
}

async fn sleep_unless_stopped(d: Duration, stop: &mut watch::Receiver<bool>) {
    tokio::select! {
        _ = tokio::time::sleep(d) => {}
        _ = wait_set(stop) => {}
    }
}

/// True for failures a later attempt may not meet: no answer, or the
/// broker failing (5xx) or asking to slow down (429).
fn retryable(e: &Error) -> bool {
    match e {
        Error::Transport(_) => true,
        Error::Broker { status, .. } => *status >= 500 || *status == 429,
        Error::Decode(_) | Error::Invalid(_) => false,
    }
}

/// Renews every third of the lease. After a failed attempt it retries
/// sooner, and gives up (reporting loss) once the lease measured from the
/// last successful send has run out.
async fn renew_loop(lease: Arc<Lease>) {
    let every = lease.length / 3;
    let mut delay = every;
    loop {
        tokio::time::sleep(delay).await;
        let _one = lease.renewing.lock().await;
        let sent = Instant::now();
        let op = JobOp::renew(&lease.claim()).lease(lease.length);
        match lease.queue.jobs().renew(op).await {
            Ok(JobRenewal::Renewed(c)) => {
                {
                    let mut held = lease.claim.lock().expect("claim lock");
                    held.token = c.token;
                    held.expires_at = c.expires_at;
                }
                *lease.renewed_at.lock().expect("renewed_at lock") = sent;
                delay = every;
            }
            Ok(JobRenewal::Lost(_)) => {
                lease.lost.send_replace(true);
                return;
            }
            Err(_) => {
                let left = lease.deadline().saturating_duration_since(Instant::now());
                if left.is_zero() {
                    lease.lost.send_replace(true);
                    return;
                }
                delay = (left / 4).clamp(RENEW_RETRY_FLOOR, every.max(RENEW_RETRY_FLOOR));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::job_answers::JobToken;

    fn claim() -> Claim {
        Claim {
            queue: "q".into(),
            scope: String::new(),
            id: "j".into(),
            payload: Value::Null,
            attempt: 1,
            owner: "w".into(),
            token: JobToken(json!(3)),
            expires_at: String::new(),
        }
    }

    fn job(state: JobState, result: Value, error: Value) -> Job {
        Job {
            queue: "q".into(),
            scope: String::new(),
            id: "j".into(),
            payload: Value::Null,
            state,
            available_at: None,
            lease_expires_at: None,
            lease: None,
            attempts: 1,
            created_at: String::new(),
            updated_at: String::new(),
            result,
            error,
        }
    }

    #[test]
    fn a_resent_outcome_recognises_its_own_earlier_send() {
        let done = JobOp::complete(&claim(), json!({"ok": 1}));
        assert!(settled_by(&done, &job(JobState::Completed, json!({"ok": 1}), Value::Null)));
        assert!(!settled_by(&done, &job(JobState::Completed, json!({"ok": 2}), Value::Null)), "someone else's result");
        assert!(!settled_by(&done, &job(JobState::Leased, Value::Null, Value::Null)));
        let failed = JobError::new("down").op(&claim());
        assert!(settled_by(&failed, &job(JobState::Pending, Value::Null, json!("down"))), "failed and requeued");
        assert!(!settled_by(&failed, &job(JobState::Leased, Value::Null, json!("down"))), "claimed again since");
        assert!(!settled_by(&JobOp::release(&claim()), &job(JobState::Pending, Value::Null, Value::Null)));
    }

    #[test]
    fn job_errors_become_fail_operations() {
        let op = JobError::fatal(json!({"code": 7})).delay(Duration::from_secs(1)).op(&claim());
        assert_eq!(
            (op.0["error"].clone(), op.0["retry"].clone(), op.0["delayMs"].clone()),
            (json!({"code": 7}), json!(false), json!(1000))
        );
        let op = JobError::from(std::fmt::Error).op(&claim());
        assert_eq!(
            (op.0["error"].clone(), op.0.get("retry")),
            (json!("an error occurred when formatting an argument"), None)
        );
    }

    #[test]
    fn only_transient_failures_are_retried() {
        let broker = |status| Error::Broker { status, code: String::new(), reason: None, message: String::new() };
        assert!(retryable(&broker(503)) && retryable(&broker(500)) && retryable(&broker(429)));
        assert!(!retryable(&broker(400)) && !retryable(&broker(404)));
        assert!(!retryable(&Error::Decode(String::new())));
    }
}
