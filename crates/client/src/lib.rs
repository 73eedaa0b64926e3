//! `regina-client`: the Rust SDK of Regina, a durable message broker that
//! speaks the Queen MQ HTTP API.
//!
//! # Map
//!
//! | module | what |
//! |---|---|
//! | [`Client`] | one broker: `Client::new(url)`, [`Client::with_tenant`], [`Client::with_token`], and [`Error`] with the broker's `code` and `reason` |
//! | queues | [`Client::push`], [`Client::pop`] ([`Pop`]: group, batch, wait, partition, lease), [`Client::extend_lease`] |
//! | acks | [`Client::ack`], [`Client::nack`], [`Client::settle`], [`Client::ack_batch`] ([`Ack`]) |
//! | steps | [`Client::step`]: acks, pushes, KV writes, `once` markers, timers and lock guards committed together ([`StepOutcome`]) |
//! | KV | [`Client::kv`]: get, get_many, get_prefix, scan, put, put_if_absent, touch, delete, incr, check, configure (a namespace's default lifetime); every write names its [`Lifetime`] (seconds, an instant, after creation, after update, forever, or the namespace default) |
//! | timers | [`Client::timers`]: schedule (after a delay or at a time), reschedule, cancel, peek, list by state or due order, retry a failed timer ([`Timer`]) |
//! | locks | [`Client::locks`]: raw acquire/renew/release/get of a lock or a semaphore, and [`LockHandle`], which renews itself |
//! | jobs | [`Client::jobs`]: job queues by id; [`JobQueue`] has configure, enqueue, claim, renew, complete, fail, release, retry, cancel, get, scan and stats, [`Jobs::batch`] sends any [`JobOp`]s as one call, [`Step::job`] rides them on a step |
//! | admin | [`Client::queues`], [`Client::queue_detail`], [`Client::consumer_groups`], [`Client::status`], [`Client::health`], [`Client::messages`] (kept messages, [`MessageQuery`]), the dead letters: [`Client::dead_letters`], [`Client::replay_dead_letter`], [`Client::delete_dead_letter`] |
//! | workers | [`JobWorker`]: claim (long poll), renew in the background, complete on `Ok`, fail on `Err`, stop on a [`Shutdown`] |
//!
//! Refusals the broker answers as verdicts (a refused ack, a held lock, a
//! lost precondition, a refused step) come back as values; only malformed
//! calls, broker failures and transport errors are [`Error`]s. Nothing is
//! retried behind the caller's back.
//!
//! # A worker's step
//!
//! ```no_run
//! use std::time::Duration;
//! use regina_client::{Client, Lifetime, StepOutcome, Timer};
//! use serde_json::json;
//!
//! # async fn run() -> regina_client::Result<()> {
//! let client = Client::new("http://127.0.0.1:6632")?;
//! let batch = client.pop("payments").group("billing").wait(Duration::from_secs(10)).send().await?;
//! for payment in &batch {
//!     let outcome = client
//!         .step()
//!         .ack(payment)
//!         .push("receipts", "customer-42", json!({ "payment": payment.transaction_id }))
//!         .put("orders", "9137", json!({ "status": "paid" }), Lifetime::days(30))
//!         .once("paid", &payment.transaction_id, Lifetime::days(30))
//!         .schedule(Timer::new("reminders", "order-9137", Duration::from_secs(86_400)))
//!         .commit()
//!         .await?;
//!     match outcome {
//!         StepOutcome::Committed(_) => {}
//!         // Already done (a resend, or the same event twice): nothing was written.
//!         StepOutcome::Refused(r) => eprintln!("skipped: {} {:?}", r.reason, r.kv_reason),
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # A job worker
//!
//! ```no_run
//! use std::time::Duration;
//! use regina_client::{Client, JobConfig, JobError, RetryPolicy};
//! use serde_json::json;
//!
//! # async fn run() -> regina_client::Result<()> {
//! let client = Client::new("http://127.0.0.1:6632")?;
//! let emails = client.jobs().queue("emails");
//! emails
//!     .configure(&JobConfig::new().retry(RetryPolicy {
//!         max_attempts: 5,
//!         initial_delay: Duration::from_secs(1),
//!         max_delay: Duration::from_secs(60),
//!     }))
//!     .await?;
//! // The id names the work: enqueuing "welcome-42" again is refused (JOB_EXISTS).
//! emails.enqueue("welcome-42", json!({ "to": "ada@example.com" })).await?;
//!
//! let worker = emails.worker().lease(Duration::from_secs(30)).wait(Duration::from_secs(10));
//! let shutdown = worker.shutdown();
//! tokio::spawn(async move {
//!     let _ = tokio::signal::ctrl_c().await;
//!     shutdown.stop(); // the job in hand is finished first
//! });
//! let report = worker
//!     .run(|job| async move {
//!         let to = job.payload["to"].as_str().ok_or_else(|| JobError::fatal("no recipient"))?;
//!         // ... send the email; an Err is retried with the queue's backoff ...
//!         Ok(json!({ "sentTo": to }))
//!     })
//!     .await?;
//! eprintln!("{} completed, {} failed", report.completed, report.failed);
//! # Ok(())
//! # }
//! ```
//!
//! A handler that writes elsewhere can settle its job in the same step:
//! `client.step().push(..).complete_job(&claim, result).commit()` completes
//! the job exactly when the push is written (see [`Step::job`]).
//!
//! # Work under a lock
//!
//! ```no_run
//! use std::time::Duration;
//! use regina_client::Client;
//! use serde_json::json;
//!
//! # async fn run() -> regina_client::Result<()> {
//! let client = Client::new("http://127.0.0.1:6632")?;
//! let Some(lock) = client.locks().lock("daily-report", Duration::from_secs(30)).hold().await? else {
//!     return Ok(()); // somebody else is on it
//! };
//! let outcome = client.step().guard(&lock).push("reports", "Default", json!({ "day": "2026-10-08" })).commit().await?;
//! if !outcome.is_committed() {
//!     // The permit changed hands while we worked: nothing was pushed.
//! }
//! lock.release().await?;
//! # Ok(())
//! # }
//! ```

mod ack;
mod admin;
mod base64;
mod client;
mod handle;
mod job_answers;
mod job_ops;
mod job_worker;
mod jobs;
mod kv;
mod locks;
mod queue;
mod step;
mod timers;

pub use ack::{Ack, AckResult, AckStatus};
pub use admin::{DeadLetter, DeadLetterPage, MessageQuery, StoredMessage, DLQ_PAGE_MAX, MESSAGES_PAGE_MAX};
pub use client::{Client, Error, Result, LEADER_HEADER, TENANT_HEADER};
pub use handle::LockHandle;
pub use job_answers::{
    Claim, Job, JobCounts, JobLease, JobPage, JobRefusal, JobRenewal, JobState, JobStats, JobToken, JobWrite,
};
pub use job_ops::{JobConfig, JobOp, RetryPolicy};
pub use job_worker::{
    JobError, JobWorker, Shutdown, WorkerJob, WorkerReport, DEFAULT_WORKER_LEASE, DEFAULT_WORKER_WAIT,
};
pub use jobs::{JobBatch, JobQueue, Jobs};
pub use kv::{Kv, KvBatch, KvOp, Lifetime, Page, Precondition, Row, Write};
pub use locks::{Acquire, Holder, LockSpec, Locks, Permit, Renewal, LOCK_NAMESPACE};
pub use queue::{LeaseExtension, Message, Pop, PushItem, Pushed, Subscription, DEFAULT_PARTITION};
pub use step::{Committed, Guard, Refused, Step, StepOutcome};
pub use timers::{Retried, Scheduled, Timer, TimerOrder, TimerPage, TimerQuery, TimerRow, TimerState, Timers};
