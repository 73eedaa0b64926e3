//! The SDK's timers against a real broker: `at`, the row's state, attempts
//! and error, listing by state and in due order, and retrying a timer that
//! failed because its queue was full.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::time::{Duration, SystemTime};

use regina_client::{PushItem, Retried, Timer, TimerOrder, TimerQuery, TimerState};
use serde_json::json;
use tokio::time::{sleep, Instant};

use support::{all_messages, Broker};

async fn configure(broker: &Broker, queue: &str, options: serde_json::Value) {
    let resp = reqwest::Client::new()
        .post(format!("{}/api/v1/configure", broker.url()))
        .json(&json!({ "queue": queue, "options": options }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200, "{}", resp.text().await.unwrap_or_default());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timer_that_met_a_full_queue_fails_lists_and_retries() {
    let broker = Broker::start().await;
    let client = broker.client();
    let timers = client.timers();
    configure(&broker, "pay", json!({ "maxSize": 1, "timerMaxAttempts": 2, "timerRetryDelayMs": 30 })).await;
    client.push(&[PushItem::new("pay", json!("backlog"))]).await.unwrap();

    let hour = SystemTime::now() + Duration::from_secs(3600);
    let later = timers.schedule(&Timer::at("pay", "later", hour).payload(json!(2))).await.unwrap();
    let soon = timers.schedule(&Timer::at("pay", "soon", hour - Duration::from_secs(60))).await.unwrap();
    assert!(soon.deliver_at < later.deliver_at, "{soon:?} {later:?}");
    timers.schedule(&Timer::at("pay", "timeout", SystemTime::UNIX_EPOCH).payload(json!({ "order": 7 }))).await.unwrap();

    let deadline = Instant::now() + Duration::from_secs(5);
    let row = loop {
        let row = timers.peek("pay", "timeout").await.unwrap().expect("a refused fire keeps the timer");
        if row.state == TimerState::Failed {
            break row;
        }
        assert!(Instant::now() < deadline, "never failed: {row:?}");
        sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(row.attempts, 2, "{row:?}");
    assert_eq!(row.error.as_ref().map(|e| e["code"].clone()), Some(json!("QUEUE_FULL")), "{row:?}");
    assert!(row.updated_at > row.created_at, "{row:?}");

    let failed =
        timers.query("pay", &TimerQuery { state: Some(TimerState::Failed), ..TimerQuery::default() }).await.unwrap();
    assert_eq!(failed.rows.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(), ["timeout"]);
    let first = timers
        .query(
            "pay",
            &TimerQuery { state: Some(TimerState::Pending), order: TimerOrder::Due, limit: 1, ..Default::default() },
        )
        .await
        .unwrap();
    assert_eq!(first.rows[0].key, "soon", "due order puts the earlier one first");
    let next = timers
        .query(
            "pay",
            &TimerQuery { order: TimerOrder::Due, after: first.next_after.clone(), limit: 5, ..Default::default() },
        )
        .await
        .unwrap();
    assert_eq!(next.rows.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(), ["later"], "{next:?}");
    // A failed timer sorts by when it was last tried: before both.
    let all = timers.query("pay", &TimerQuery { order: TimerOrder::Due, ..Default::default() }).await.unwrap();
    assert_eq!(all.rows.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(), ["timeout", "soon", "later"]);

    assert_eq!(timers.retry("pay", "later", None).await.unwrap(), Retried::NotFailed { exists: true });
    assert_eq!(timers.retry("pay", "nobody", None).await.unwrap(), Retried::NotFailed { exists: false });
    configure(&broker, "pay", json!({ "maxSize": 0 })).await;
    let Retried::Retried { txn, .. } = timers.retry("pay", "timeout", Some(Duration::from_millis(10))).await.unwrap()
    else {
        panic!("a failed timer is retried")
    };
    assert_eq!(txn, row.txn);
    let deadline = Instant::now() + Duration::from_secs(5);
    while timers.peek("pay", "timeout").await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "the retried timer never fired");
        sleep(Duration::from_millis(20)).await;
    }
    let data: Vec<_> = all_messages(&client, "pay").await.into_iter().map(|m| m.data).collect();
    assert_eq!(data, [json!("backlog"), json!({ "order": 7 })]);
}
