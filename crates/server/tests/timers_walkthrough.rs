//! The walkthrough of docs/timers.md, step by step against a real broker:
//! a payment timeout that must not vanish because its queue was full.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};
use support::paused::PausedNode;
use support::*;
use tokio::time::Instant;

const Q: &str = "payment-timeouts";

async fn timer_row(c: &reqwest::Client, base: &str) -> Value {
    let (status, v) = get_json(c, &format!("{base}/api/v1/timers/{Q}/order-1042")).await;
    assert_eq!(status, 200, "{v}");
    v
}

/// Polls until `done` holds, failing after `within` with the last value.
async fn until<F: std::future::Future<Output = Value>>(
    within: Duration,
    mut read: impl FnMut() -> F,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let start = Instant::now();
    loop {
        let v = read().await;
        if done(&v) {
            return v;
        }
        assert!(start.elapsed() < within, "gave up waiting; last: {v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn a_payment_timeout_survives_a_full_queue_and_fires_once_retried() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let (c, base) = (client(), broker.base());

        // 1. A bounded queue; consumed messages go a second after; quick retries.
        configure(
            &c,
            &base,
            Q,
            json!({ "maxSize": 2, "retentionEnabled": true, "completedRetentionSeconds": 1,
                    "timerMaxAttempts": 3, "timerRetryDelayMs": 100, "timerMaxRetryDelayMs": 200 }),
        )
        .await;

        // 2. The worker is down; the backlog fills the queue.
        let backlog = push(
            &c,
            &base,
            vec![
                json!({ "queue": Q, "payload": { "order": 1040 }, "transactionId": "b1" }),
                json!({ "queue": Q, "payload": { "order": 1041 }, "transactionId": "b2" }),
            ],
        )
        .await;
        assert!(backlog.iter().all(|r| r["status"] == "queued"), "{backlog:?}");

        // 3. The checkout schedules the timeout.
        let payload = json!({ "order": 1042, "action": "cancel-if-unpaid" });
        let op = json!({ "op": "schedule", "queue": Q, "timerKey": "order-1042", "delayMs": 200,
                         "txn": "timeout-order-1042",
                         "payload": base64::engine::general_purpose::STANDARD.encode(payload.to_string()) });
        let (status, v) = post_json(&c, &format!("{base}/api/v1/timers"), &json!({ "operations": [op] })).await;
        assert_eq!((status, &v["results"][0]["status"]), (200, &json!("scheduled")), "{v}");

        // 4. The push is refused: the timer stays, retries, then fails.
        let first = until(Duration::from_secs(5), || timer_row(&c, &base), |r| r["attempts"] == json!(1)).await;
        assert_eq!((&first["state"], &first["error"]["code"]), (&json!("pending"), &json!("QUEUE_FULL")), "{first}");
        let ms = |v: &Value| regina_types::time::parse_iso(v.as_str().unwrap()).unwrap();
        assert_eq!(ms(&first["deliverAt"]) - ms(&first["updatedAt"]), 100, "{first}");
        let failed = until(Duration::from_secs(5), || timer_row(&c, &base), |r| r["state"] == json!("failed")).await;
        assert_eq!(failed["attempts"], json!(3), "{failed}");

        // 5. The operator sees it in the metrics and in the list of failed timers.
        let (_, m) = get_json(&c, &format!("{base}/metrics")).await;
        assert_eq!(m["timers"], json!({ "pending": 0, "failed": 1 }), "{m}");
        let text =
            c.get(format!("{base}/metrics")).header("accept", "text/plain").send().await.unwrap().text().await.unwrap();
        assert!(text.contains("regina_timers{state=\"failed\"} 1"), "{text}");
        let (_, list) = get_json(&c, &format!("{base}/api/v1/timers/{Q}?state=failed&order=due")).await;
        assert_eq!(list["rows"][0]["timerKey"], json!("order-1042"), "{list}");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(timer_row(&c, &base).await["state"], json!("failed"), "nothing fires by itself while failed");

        // 6. The worker drains the backlog; the sweep drops the consumed messages.
        let drained =
            messages(&pop(&c, &base, &format!("/api/v1/pop/queue/{Q}?batch=10&wait=false&autoAck=true")).await);
        assert_eq!(drained.len(), 2);
        until(
            Duration::from_secs(10),
            || async { get_json(&c, &format!("{base}/metrics")).await.1 },
            |m| m["messages"]["total"] == json!(0),
        )
        .await;

        // 7. The operator retries the timer.
        let retry = json!({ "op": "retry", "queue": Q, "timerKey": "order-1042" });
        let (status, v) = post_json(&c, &format!("{base}/api/v1/timers"), &json!({ "operations": [retry] })).await;
        assert_eq!(status, 200, "{v}");
        let r = &v["results"][0];
        assert_eq!(
            (&r["ok"], &r["status"], &r["txn"]),
            (&json!(true), &json!("retried"), &json!("timeout-order-1042")),
            "{r}"
        );

        // 8. It fires: the worker gets the cancellation, once.
        let fired = until(
            Duration::from_secs(5),
            || async { pop(&c, &base, &format!("/api/v1/pop/queue/{Q}?batch=10&wait=false&autoAck=true")).await },
            |p| !messages(p).is_empty(),
        )
        .await;
        let fired = messages(&fired);
        assert_eq!(fired.len(), 1, "{fired:?}");
        assert_eq!((&fired[0]["data"], &fired[0]["transactionId"]), (&payload, &json!("timeout-order-1042")));
        assert_eq!(timer_row(&c, &base).await["found"], json!(false));
        let (_, m) = get_json(&c, &format!("{base}/metrics")).await;
        assert_eq!(m["timers"], json!({ "pending": 0, "failed": 0 }), "{m}");
    });
}
