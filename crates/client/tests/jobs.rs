//! Job queues against a real broker: every operation round trips with the
//! typed answers, a required operation that loses rolls its call back,
//! malformed calls are errors with the broker's code, a lapsed lease is
//! lost for good, a waiting claim wakes up for a job, and job riders commit
//! (or are refused) with the rest of a step.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::time::Duration;

use regina_client::{Error, JobBatch, JobConfig, JobOp, JobRenewal, JobState, RetryPolicy, StepOutcome};
use serde_json::json;
use tokio::time::{sleep, Instant};

use support::{all_messages, Broker};

const LEASE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_round_trips() {
    let broker = Broker::start().await;
    let client = broker.client();
    let q = client.jobs().queue("emails");

    let config = q
        .configure(
            &JobConfig::new()
                .lease(Duration::from_secs(20), Duration::from_secs(120))
                .retry(RetryPolicy {
                    max_attempts: 3,
                    initial_delay: Duration::from_millis(100),
                    max_delay: Duration::from_secs(1),
                })
                .completed_retention(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    assert_eq!(config["lease"], json!({"defaultMs": 20000, "maxMs": 120000}), "{config}");
    assert_eq!(config["retry"]["maxAttempts"], 3);

    // Enqueue; the same id again is refused and shows the job as it is.
    let w = q.enqueue("j1", json!({"to": "ada"})).await.unwrap();
    assert!(w.applied, "{w:?}");
    let job = w.job.unwrap();
    assert_eq!((job.id.as_str(), job.state, job.attempts), ("j1", JobState::Pending, 0));
    assert_eq!(job.payload, json!({"to": "ada"}));
    let again = q.enqueue("j1", json!({"to": "bob"})).await.unwrap();
    assert_eq!((again.applied, again.code.as_deref()), (false, Some("JOB_EXISTS")));
    assert_eq!(again.job.unwrap().payload, json!({"to": "ada"}), "the refused enqueue changed nothing");
    let unfinished = client.jobs().write(JobOp::enqueue("emails", "j1", json!({"to": "eve"})).replace()).await;
    assert_eq!(unfinished.unwrap().code.as_deref(), Some("JOB_EXISTS"), "replace takes only a finished job's id");

    // Claim, renew, complete.
    let claim = q.claim("w1").await.unwrap().expect("a ready job");
    assert_eq!((claim.id.as_str(), claim.attempt, claim.owner.as_str()), ("j1", 1, "w1"));
    assert!(claim.token.as_u64().is_some(), "{claim:?}");
    let leased = q.get("j1").await.unwrap().unwrap();
    assert_eq!(leased.state, JobState::Leased);
    assert_eq!(leased.lease.as_ref().unwrap().token, claim.token);
    assert_eq!(q.claim("w2").await.unwrap(), None, "the only job is leased");
    let renewed = match q.renew(&claim).await.unwrap() {
        JobRenewal::Renewed(c) => c,
        lost => panic!("a fresh lease renews: {lost:?}"),
    };
    assert_eq!(renewed.token, claim.token);
    let done = q.complete(&claim, json!({"sent": true})).await.unwrap();
    assert!(done.applied, "{done:?}");
    let job = done.job.unwrap();
    assert_eq!((job.state, job.result.clone()), (JobState::Completed, json!({"sent": true})));
    let twice = q.complete(&claim, json!({"sent": 2})).await.unwrap();
    assert_eq!((twice.applied, twice.code.as_deref()), (false, Some("LEASE_LOST")));

    // Fail for good, retry, release, cancel.
    q.enqueue("j2", json!(2)).await.unwrap();
    let c2 = q.claim("w1").await.unwrap().unwrap();
    let failed = client.jobs().write(JobOp::fail(&c2, json!({"why": "smtp"})).no_retry()).await.unwrap();
    let job = failed.job.unwrap();
    assert_eq!((job.state, job.error), (JobState::Failed, json!({"why": "smtp"})));
    let not_failed = q.retry("j1").await.unwrap();
    assert_eq!((not_failed.applied, not_failed.code.as_deref()), (false, Some("JOB_NOT_FAILED")));
    let retried = q.retry("j2").await.unwrap();
    assert_eq!(retried.job.unwrap().state, JobState::Pending);
    let c2 = q.claim("w1").await.unwrap().unwrap();
    let released = q.release(&c2).await.unwrap();
    assert_eq!(released.job.unwrap().state, JobState::Pending);
    assert_eq!(q.claim("w3").await.unwrap().unwrap().id, "j2", "a released job is ready at once");
    assert!(q.cancel("j2").await.unwrap());
    assert!(!q.cancel("j2").await.unwrap());
    assert_eq!(q.get("j2").await.unwrap(), None);

    // A delayed job: counted, not claimable yet.
    q.enqueue_after("later", json!(null), Duration::from_secs(600)).await.unwrap();
    assert_eq!(q.claim("w1").await.unwrap(), None);
    let stats = q.stats().await.unwrap();
    assert_eq!((stats.counts.pending, stats.counts.completed, stats.ready_count), (1, 1, 0), "{stats:?}");
    assert!(!stats.ready);
    assert!(stats.next_available_at.is_some());
    assert_eq!(q.read_stats().await.unwrap(), stats, "the read route gives the same figures");

    // A finished job's id is taken until replaced.
    assert_eq!(q.enqueue("j1", json!({"to": "eve"})).await.unwrap().code.as_deref(), Some("JOB_EXISTS"));
    let replaced = client.jobs().write(JobOp::enqueue("emails", "j1", json!({"to": "eve"})).replace()).await.unwrap();
    assert!(replaced.applied, "{replaced:?}");
    let fresh = q.get("j1").await.unwrap().unwrap();
    assert_eq!((fresh.state, fresh.payload, fresh.attempts), (JobState::Pending, json!({"to": "eve"}), 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scans_page_by_id_by_operation_and_by_read_route() {
    let broker = Broker::start().await;
    let client = broker.client();
    let q = client.jobs().queue("reports").scope("tenant-a");
    let ids: Vec<String> = (0..7).map(|i| format!("r{i}")).collect();
    let jobs: Vec<(&str, serde_json::Value)> = ids.iter().map(|i| (i.as_str(), json!(i))).collect();
    let writes = q.enqueue_many(&jobs).await.unwrap();
    assert!(writes.iter().all(|w| w.applied));
    let c = q.claim("w").await.unwrap().unwrap();
    q.complete(&c, json!(null)).await.unwrap();

    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = q.scan(None, after.as_deref(), 3).await.unwrap();
        let listed = q.list(None, after.as_deref(), 3).await.unwrap();
        assert_eq!(page, listed, "the operation and the read route agree");
        seen.extend(page.rows.iter().map(|j| j.id.clone()));
        match page.next_after {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(seen, ids, "every job once, in id order");
    let done = q.scan(Some(JobState::Completed), None, 100).await.unwrap();
    assert_eq!(done.rows.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(), ["r0"]);
    assert_eq!(q.list(Some(JobState::Pending), None, 100).await.unwrap().rows.len(), 6);
    assert!(done.rows.iter().all(|j| j.scope == "tenant-a" && j.queue == "reports"));
    // Another scope of the same queue is another set of jobs.
    assert!(client.jobs().queue("reports").scan(None, None, 100).await.unwrap().rows.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_refusal_rolls_the_call_back() {
    let broker = Broker::start().await;
    let client = broker.client();
    let jobs = client.jobs();
    jobs.queue("q").enqueue("taken", json!(1)).await.unwrap();
    let answer = jobs
        .batch(&[JobOp::enqueue("q", "fresh", json!(2)), JobOp::enqueue("q", "taken", json!(3)).required()])
        .await
        .unwrap();
    let JobBatch::Refused(r) = answer else { panic!("the required enqueue loses: {answer:?}") };
    assert_eq!((r.failed_index, r.code.as_str()), (1, "JOB_EXISTS"));
    assert_eq!(r.job.map(|j| j.payload), Some(json!(1)), "the refusal shows the job that is there");
    assert_eq!(jobs.queue("q").get("fresh").await.unwrap(), None, "nothing of the call was written");

    let done = jobs.batch(&[JobOp::enqueue("q", "fresh", json!(2)), JobOp::get("q", "taken")]).await.unwrap();
    let JobBatch::Done(results) = done else { panic!("{done:?}") };
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["applied"], true);
    assert_eq!(results[1]["found"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_calls_are_errors_with_the_broker_code() {
    let broker = Broker::start().await;
    let client = broker.client();
    let q = client.jobs().queue("strict");
    q.configure(
        &JobConfig::new()
            .lease(Duration::from_secs(10), Duration::from_secs(60))
            .payload_schema(json!({"type": "object", "required": ["to"]})),
    )
    .await
    .unwrap();
    let e = q.enqueue("bad", json!({"from": "x"})).await.unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(400), Some("INVALID_ARGUMENT")), "{e}");
    assert!(q.enqueue("good", json!({"to": "x"})).await.unwrap().applied);
    let e = q.claim_wait("w", Duration::from_secs(120), Duration::ZERO).await.unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(400), Some("LEASE_TOO_LONG")), "{e}");
    let e = client.jobs().batch(&[]).await.unwrap_err();
    assert!(matches!(e, Error::Invalid(_)), "an empty call is refused before sending: {e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_lease_is_lost_to_the_next_claim() {
    let broker = Broker::start().await;
    let client = broker.client();
    let q = client.jobs().queue("slow");
    q.enqueue("j", json!(null)).await.unwrap();
    let first = q.claim_wait("a", Duration::from_millis(300), Duration::ZERO).await.unwrap().unwrap();
    sleep(Duration::from_millis(700)).await;
    let second = q.claim_wait("b", LEASE, Duration::ZERO).await.unwrap().expect("the lapsed job is claimable");
    assert_eq!((second.id.as_str(), second.attempt), ("j", 2));
    assert_ne!(second.token, first.token);
    assert!(
        matches!(q.renew(&first).await.unwrap(), JobRenewal::Lost(Some(j)) if j.lease.as_ref().unwrap().owner == "b")
    );
    let late = q.complete(&first, json!("late")).await.unwrap();
    assert_eq!(late.code.as_deref(), Some("LEASE_LOST"));
    assert!(q.complete(&second, json!("on time")).await.unwrap().applied);
    assert_eq!(q.get("j").await.unwrap().unwrap().result, json!("on time"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_claim_wakes_up_for_a_new_job() {
    let broker = Broker::start().await;
    let client = broker.client();
    let q = client.jobs().queue("wake");
    let waiter = {
        let q = q.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let c = q.claim_wait("w", LEASE, Duration::from_secs(10)).await.unwrap();
            (c, started.elapsed())
        })
    };
    sleep(Duration::from_millis(300)).await;
    q.enqueue("j", json!("now")).await.unwrap();
    let (claim, took) = waiter.await.unwrap();
    assert_eq!(claim.map(|c| c.payload), Some(json!("now")));
    assert!(took < Duration::from_secs(5), "woken by the enqueue, not the end of the wait: {took:?}");
    let started = Instant::now();
    assert_eq!(q.claim_wait("w", LEASE, Duration::from_millis(400)).await.unwrap(), None);
    assert!(started.elapsed() >= Duration::from_millis(350), "an empty queue holds the claim for its wait");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_riders_commit_with_a_push_or_not_at_all() {
    let broker = Broker::start().await;
    let client = broker.client();
    let q = client.jobs().queue("orders");
    q.enqueue("o1", json!({"order": 1})).await.unwrap();
    let claim = q.claim("w").await.unwrap().unwrap();

    let outcome = client
        .step()
        .push("receipts", "Default", json!({"order": 1}))
        .complete_job(&claim, json!({"receipt": "r1"}))
        .enqueue_job("orders", "o1-followup", json!({"after": 1}))
        .commit()
        .await
        .unwrap();
    let StepOutcome::Committed(c) = outcome else { panic!("the step commits: {outcome:?}") };
    assert_eq!(c.jobs.len(), 2, "{c:?}");
    assert_eq!(c.results.len(), 3, "the push, then the riders: {c:?}");
    assert_eq!((c.jobs[0]["applied"].clone(), c.jobs[1]["op"].clone()), (json!(true), json!("enqueue")));
    let done = q.get("o1").await.unwrap().unwrap();
    assert_eq!((done.state, done.result), (JobState::Completed, json!({"receipt": "r1"})));
    assert_eq!(q.get("o1-followup").await.unwrap().unwrap().state, JobState::Pending);
    assert_eq!(all_messages(&client, "receipts").await.len(), 1);

    // The same step again: the claim's lease is gone, so nothing is pushed.
    let again = client
        .step()
        .push("receipts", "Default", json!({"order": 1}))
        .complete_job(&claim, json!({"receipt": "r2"}))
        .commit()
        .await
        .unwrap();
    let r = again.refused().expect("a rider with a lost lease refuses the step");
    assert_eq!(r.reason, "job_precondition");
    assert_eq!((r.failed_index, r.job_index, r.code.as_deref()), (1, Some(0), Some("LEASE_LOST")), "after the push");
    assert_eq!(all_messages(&client, "receipts").await.len(), 1, "the refused step pushed nothing");
    assert_eq!(q.get("o1").await.unwrap().unwrap().result, json!({"receipt": "r1"}));
}
