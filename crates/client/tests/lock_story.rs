//! Why a lock needs a guard: a holder that stalls past its permit's
//! lifetime keeps running, but its guarded step commits nothing once
//! someone else holds the lock; and a handle that renews itself keeps its
//! lock as long as it lives, and says so when it no longer does.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::time::Duration;

use regina_client::{Acquire, Client, Renewal};
use serde_json::json;
use tokio::time::{sleep, timeout, Instant};

use support::{all_messages, Broker};

/// Past a 2 s permit's lifetime, with room for a busy machine.
const PAST_TWO_SECONDS: Duration = Duration::from_millis(2600);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_holder_commits_nothing() {
    let broker = Broker::start().await;
    let client = broker.client();
    let locks = client.locks();

    // Worker A takes the lock for 2 s with the raw call: nothing renews it.
    let a = locks.lock("daily-report", Duration::from_secs(2)).owner("worker-a").acquire().await.unwrap();
    let Acquire::Granted(permit_a) = a else { panic!("A gets the free lock: {a:?}") };
    let refused = locks.lock("daily-report", Duration::from_secs(2)).owner("worker-b").acquire().await.unwrap();
    assert!(matches!(&refused, Acquire::Held(h) if h[0].owner.as_deref() == Some("worker-a")), "{refused:?}");

    // A stalls past its lifetime; B takes the lock.
    sleep(PAST_TWO_SECONDS).await;
    let b = locks.lock("daily-report", Duration::from_secs(30)).owner("worker-b").hold().await.unwrap();
    let b = b.expect("B gets the lapsed lock");
    assert!(b.token() > permit_a.token, "a later holder has a higher token");

    // A wakes up and finishes its report: refused, nothing pushed.
    let outcome = report(&client, &permit_a, "worker-a").await;
    let r = outcome.refused().expect("A's step is refused");
    assert_eq!(r.reason, "kv_precondition");
    assert_eq!(r.kv_reason.as_deref(), Some("version"));
    assert_eq!(r.failed_index, 1, "the push is index 0, the guard the first kv op");
    assert!(r.lost_guard);
    assert_eq!(r.value["owner"], "worker-b", "the row names who holds it now");

    // B's report commits.
    let outcome = report(&client, &b, "worker-b").await;
    assert!(outcome.is_committed(), "{outcome:?}");
    let reports = all_messages(&client, "reports").await;
    assert_eq!(reports.len(), 1, "only B's report: {reports:?}");
    assert_eq!(reports[0].data["by"], "worker-b");

    // A's raw permit is gone for good.
    assert!(matches!(locks.renew(&permit_a).await.unwrap(), Renewal::Lost(_)));
    assert!(!locks.release(&permit_a).await.unwrap());
    assert!(b.release().await.unwrap());
    assert!(locks.get("daily-report").await.unwrap().is_empty());
}

async fn report(client: &Client, lock: impl Into<regina_client::Guard>, by: &str) -> regina_client::StepOutcome {
    client
        .step()
        .push("reports", "Default", json!({ "day": "2026-10-08", "by": by }))
        .guard(lock)
        .commit()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewing_handle_keeps_its_lock() {
    let broker = Broker::start().await;
    let client = broker.client();
    let handle = client.locks().lock("nightly-compaction", Duration::from_secs(2)).hold().await.unwrap();
    let handle = handle.expect("the lock is free");
    let first_token = handle.token();

    // Guarded commits for 5 s, more than twice the permit's lifetime: the
    // background renewals keep every one of them valid.
    let started = Instant::now();
    let mut commits = 0;
    while started.elapsed() < Duration::from_secs(5) {
        let outcome = client
            .step()
            .guard(&handle)
            .push("compactions", "Default", json!({ "n": commits }))
            .commit()
            .await
            .unwrap();
        assert!(outcome.is_committed(), "commit {commits} at {:?}: {outcome:?}", started.elapsed());
        commits += 1;
        sleep(Duration::from_millis(50)).await;
    }
    assert!(commits >= 10, "only {commits} commits in 5 s");
    assert!(!handle.is_lost());
    assert!(handle.token() > first_token, "renewals replaced the token");
    assert_eq!(all_messages(&client, "compactions").await.len(), commits);

    // Nobody else gets it meanwhile, and it is free once released.
    let other = client.locks().lock("nightly-compaction", Duration::from_secs(2)).acquire().await.unwrap();
    assert!(matches!(other, Acquire::Held(_)), "{other:?}");
    assert!(handle.release().await.unwrap());
    let other = client.locks().lock("nightly-compaction", Duration::from_secs(2)).acquire().await.unwrap();
    assert!(matches!(other, Acquire::Granted(_)), "{other:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_reports_loss_when_its_renewal_is_refused() {
    let broker = Broker::start().await;
    let client = broker.client();
    let locks = client.locks();
    let handle = locks.lock("ledger-rollup", Duration::from_secs(2)).hold().await.unwrap().expect("free");
    let mut lost = handle.lost_signal();

    // The holder stalls: no renewals go out, the permit lapses, and another
    // owner takes the lock.
    handle.pause_renewal();
    sleep(PAST_TWO_SECONDS).await;
    let other = locks.lock("ledger-rollup", Duration::from_secs(30)).owner("rescuer").acquire().await.unwrap();
    let Acquire::Granted(rescuer) = other else { panic!("the lapsed lock is free: {other:?}") };
    assert!(!handle.is_lost(), "nothing has told the handle yet");

    // Its next renewal is refused, and the handle says so.
    handle.resume_renewal();
    timeout(Duration::from_secs(5), lost.wait_for(|l| *l)).await.expect("loss reported in time").unwrap();
    assert!(handle.is_lost());
    assert!(!handle.renew().await.unwrap(), "a lost handle stays lost");

    // A guarded step of the lost holder writes nothing.
    let outcome = client.step().guard(&handle).push("ledger", "Default", json!({})).commit().await.unwrap();
    let r = outcome.refused().expect("refused");
    assert!(r.lost_guard && r.reason == "kv_precondition", "{r:?}");
    assert!(all_messages(&client, "ledger").await.is_empty());

    // Dropping the lost handle leaves the new holder's permit alone.
    drop(handle);
    sleep(Duration::from_millis(200)).await;
    let holders = locks.get("ledger-rollup").await.unwrap();
    assert_eq!(holders.len(), 1);
    assert_eq!(holders[0].owner.as_deref(), Some("rescuer"));
    assert_eq!(holders[0].token, Some(rescuer.token));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_handle_frees_its_lock() {
    let broker = Broker::start().await;
    let client = broker.client();
    let locks = client.locks();
    let handle = locks.lock("cache-warmup", Duration::from_secs(60)).hold().await.unwrap().expect("free");
    drop(handle);
    // The release goes out in the background; wait for it, bounded.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !locks.get("cache-warmup").await.unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the dropped handle did not release its permit");
        sleep(Duration::from_millis(50)).await;
    }
}
