//! The JobWorker against a real broker: it completes jobs with its
//! handler's result, fails them on `Err` so the queue retries them with its
//! backoff, keeps a long job's lease alive, notices a lost lease, and stops
//! on its signal once the job in hand is settled.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use regina_client::{JobConfig, JobError, JobQueue, JobState, RetryPolicy, Shutdown, WorkerReport};
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{sleep, timeout, Instant};

use support::Broker;

/// Longest a test waits for the broker to reach a state.
const PATIENCE: Duration = Duration::from_secs(20);

async fn wait_for_completed(q: &JobQueue, n: u64) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let s = q.stats().await.unwrap();
        if s.counts.completed >= n {
            return;
        }
        assert!(Instant::now() < deadline, "only {} of {n} completed: {s:?}", s.counts.completed);
        sleep(Duration::from_millis(50)).await;
    }
}

async fn stopped(run: JoinHandle<regina_client::Result<WorkerReport>>) -> WorkerReport {
    timeout(PATIENCE, run).await.expect("the worker stops").unwrap().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completes_every_job_with_the_handler_result() {
    let broker = Broker::start().await;
    let q = broker.client().jobs().queue("thumbnails");
    for i in 0..20 {
        q.enqueue(&format!("img-{i:02}"), json!({"n": i})).await.unwrap();
    }
    let worker = q.worker().owner("thumb-1").wait(Duration::from_secs(2));
    let shutdown = worker.shutdown();
    let run = tokio::spawn(worker.run(|job| async move {
        assert_eq!(job.owner, "thumb-1");
        Ok(json!({"n2": job.payload["n"].as_u64().unwrap() * 2}))
    }));
    wait_for_completed(&q, 20).await;
    shutdown.stop();
    let report = stopped(run).await;
    assert_eq!((report.claimed, report.completed, report.failed, report.lost), (20, 20, 0, 0), "{report:?}");
    let j = q.get("img-07").await.unwrap().unwrap();
    assert_eq!((j.state, j.result, j.attempts), (JobState::Completed, json!({"n2": 14}), 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_handler_is_retried_with_backoff() {
    let broker = Broker::start().await;
    let q = broker.client().jobs().queue("flaky");
    let initial = Duration::from_millis(300);
    q.configure(&JobConfig::new().retry(RetryPolicy {
        max_attempts: 5,
        initial_delay: initial,
        max_delay: Duration::from_secs(5),
    }))
    .await
    .unwrap();
    q.enqueue("charge-1", json!({"amount": 5})).await.unwrap();

    let attempts: Arc<Mutex<Vec<(u32, Instant)>>> = Arc::default();
    let worker = q.worker().wait(Duration::from_millis(200));
    let shutdown = worker.shutdown();
    let seen = attempts.clone();
    let run = tokio::spawn(worker.run(move |job| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().push((job.attempt, Instant::now()));
            if job.attempt < 3 {
                Err(JobError::new(json!({"declined": job.attempt})))
            } else {
                Ok(json!("charged"))
            }
        }
    }));
    wait_for_completed(&q, 1).await;
    shutdown.stop();
    let report = stopped(run).await;
    assert_eq!((report.claimed, report.failed, report.completed), (3, 2, 1), "{report:?}");

    let seen = attempts.lock().unwrap().clone();
    assert_eq!(seen.iter().map(|a| a.0).collect::<Vec<_>>(), [1, 2, 3]);
    // The queue's backoff: 300 ms after the first failure, 600 ms after the second.
    let first_gap = seen[1].1 - seen[0].1;
    let second_gap = seen[2].1 - seen[1].1;
    assert!(first_gap >= initial - Duration::from_millis(20), "{first_gap:?}");
    assert!(second_gap >= initial * 2 - Duration::from_millis(20), "{second_gap:?}");
    let j = q.get("charge-1").await.unwrap().unwrap();
    assert_eq!((j.state, j.attempts, j.result), (JobState::Completed, 3, json!("charged")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fatal_error_fails_the_job_for_good() {
    let broker = Broker::start().await;
    let q = broker.client().jobs().queue("fatal");
    q.enqueue("j", json!(null)).await.unwrap();
    let worker = q.worker().wait(Duration::from_millis(200));
    let shutdown = worker.shutdown();
    let run = tokio::spawn(worker.run(|_job| async { Err::<Value, _>(JobError::fatal("no such account")) }));
    let deadline = Instant::now() + PATIENCE;
    while q.stats().await.unwrap().counts.failed == 0 {
        assert!(Instant::now() < deadline, "the job never failed");
        sleep(Duration::from_millis(50)).await;
    }
    shutdown.stop();
    let report = stopped(run).await;
    assert_eq!((report.claimed, report.failed), (1, 1), "{report:?}");
    let j = q.get("j").await.unwrap().unwrap();
    assert_eq!((j.state, j.error), (JobState::Failed, json!("no such account")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_keep_a_long_job_and_a_lost_lease_is_noticed() {
    let broker = Broker::start().await;
    let client = broker.client();
    let q = client.jobs().queue("long");
    q.enqueue("long", json!(null)).await.unwrap();
    q.enqueue("stolen", json!(null)).await.unwrap();
    // A 900 ms lease renewed every 300 ms; the long job takes 2.5 s.
    let worker = q.worker().lease(Duration::from_millis(900)).wait(Duration::from_millis(200));
    let shutdown = worker.shutdown();
    let qq = q.clone();
    let run = tokio::spawn(worker.run(move |job| {
        let q = qq.clone();
        async move {
            if job.id == "long" {
                sleep(Duration::from_millis(2500)).await;
                assert!(!job.is_lost());
                return Ok(json!("done"));
            }
            // Someone cancels the job under the worker: the next renewal is refused.
            assert!(q.cancel(&job.id).await.unwrap());
            timeout(Duration::from_secs(5), job.lost()).await.expect("the lost lease is noticed");
            Ok(json!("ignored"))
        }
    }));
    let deadline = Instant::now() + PATIENCE;
    loop {
        let s = q.stats().await.unwrap();
        if s.counts.completed == 1 && s.counts.pending + s.counts.leased == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{s:?}");
        sleep(Duration::from_millis(50)).await;
    }
    sleep(Duration::from_millis(300)).await;
    shutdown.stop();
    let report = stopped(run).await;
    assert_eq!((report.claimed, report.completed, report.lost), (2, 1, 1), "{report:?}");
    let j = q.get("long").await.unwrap().unwrap();
    assert_eq!((j.state, j.attempts), (JobState::Completed, 1), "one claim kept through the renewals");
    assert_eq!(q.get("stolen").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stops_on_its_signal_after_settling_the_job_in_hand() {
    let broker = Broker::start().await;
    let q = broker.client().jobs().queue("stop");
    q.enqueue("slow", json!(null)).await.unwrap();
    q.enqueue("next", json!(null)).await.unwrap();
    let shutdown = Shutdown::new();
    let started = Arc::new(tokio::sync::Notify::new());
    let worker = q.worker().wait(Duration::from_secs(10)).shutdown_with(&shutdown);
    let began = started.clone();
    let run = tokio::spawn(worker.run(move |job| {
        let began = began.clone();
        async move {
            began.notify_one();
            sleep(Duration::from_millis(800)).await;
            Ok(json!(job.id.clone()))
        }
    }));
    started.notified().await;
    shutdown.stop();
    let report = stopped(run).await;
    assert_eq!((report.claimed, report.completed), (1, 1), "the job in hand is finished, no other: {report:?}");
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.counts.completed, stats.counts.pending), (1, 1), "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_worker_stops_at_once_and_leaves_no_job_leased() {
    let broker = Broker::start().await;
    let q = broker.client().jobs().queue("idle");
    let (tx, rx) = watch::channel(false);
    let worker = q.worker().wait(Duration::from_secs(30)).stop_on(rx);
    let run = tokio::spawn(worker.run(|_job| async { Ok(Value::Null) }));
    sleep(Duration::from_millis(500)).await;
    let asked = Instant::now();
    tx.send_replace(true);
    let report = stopped(run).await;
    assert!(asked.elapsed() < Duration::from_secs(5), "the 30 s wait was abandoned: {:?}", asked.elapsed());
    assert_eq!(report.completed, 0);
    // A job enqueued now is not held by a claim the stop abandoned.
    q.enqueue("after", json!(null)).await.unwrap();
    assert!(q.claim("other").await.unwrap().is_some(), "the job is free for the next worker");
}
