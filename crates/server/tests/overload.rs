//! Limits that protect the node: per-caller request rates (429
//! `rate_limited` with `Retry-After`), a bound on concurrent long polls and
//! on the proposer's queue (429 `overloaded`).

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;
#[path = "support/tokens.rs"]
mod tokens;

use std::time::Duration;

use serde_json::{json, Value};

use support::client;
use support::paused::{self, PausedNode};
use tokens::{token, SECRET};

async fn get(
    c: &reqwest::Client,
    url: &str,
    bearer: Option<&str>,
    tenant: Option<&str>,
) -> (u16, Option<String>, Value) {
    let mut r = c.get(url);
    if let Some(t) = bearer {
        r = r.bearer_auth(t);
    }
    if let Some(t) = tenant {
        r = r.header("x-queen-tenant", t);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    let retry = resp.headers().get("retry-after").map(|v| v.to_str().unwrap().to_string());
    (status, retry, resp.json().await.unwrap_or(Value::Null))
}

#[test]
fn each_token_has_its_own_rate() {
    paused::run(async {
        let env =
            [("JWT_ENABLED", "true"), ("JWT_SECRET", SECRET), ("REGINA_RATE_LIMIT", "2"), ("REGINA_RATE_BURST", "5")];
        let b = PausedNode::start_env(&env).await;
        let c = client();
        let (alice, bob) = (token("alice", "read-only"), token("bob", "read-only"));
        let url = b.url("/api/v1/resources/queues");
        let mut answers = Vec::new();
        for _ in 0..8 {
            answers.push(get(&c, &url, Some(&alice), None).await);
        }
        // No virtual time passes between them: exactly the burst.
        let ok = answers.iter().filter(|(s, _, _)| *s == 200).count();
        assert_eq!(ok, 5, "a burst of 5: {answers:?}");
        let (s, retry, body) = answers.last().unwrap().clone();
        assert_eq!((s, body["code"].as_str()), (429, Some("rate_limited")), "{body}");
        assert!(retry.unwrap().parse::<u64>().unwrap() >= 1);
        // Bob's budget is his own; health checks are not counted.
        assert_eq!(get(&c, &url, Some(&bob), None).await.0, 200);
        for _ in 0..10 {
            assert_eq!(get(&c, &b.url("/health"), None, None).await.0, 200);
        }
        // The budget refills at the rate: one more after half a second.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(get(&c, &url, Some(&alice), None).await.0, 200);
        assert_eq!(get(&c, &url, Some(&alice), None).await.0, 429, "only one refilled in 500 ms at 2/s");
    });
}

#[test]
fn without_tokens_each_tenant_has_its_own_rate() {
    paused::run(async {
        let b =
            PausedNode::start_env(&[("REGINA_TENANCY", "on"), ("REGINA_RATE_LIMIT", "1"), ("REGINA_RATE_BURST", "3")])
                .await;
        let c = client();
        let url = b.url("/api/v1/resources/queues");
        let mut statuses = Vec::new();
        for _ in 0..5 {
            statuses.push(get(&c, &url, None, Some("t1")).await.0);
        }
        assert_eq!(&statuses[..3], &[200, 200, 200]);
        assert_eq!(statuses[4], 429, "{statuses:?}");
        assert_eq!(get(&c, &url, None, Some("t2")).await.0, 200);
    });
}

#[test]
fn long_polls_and_queued_writes_are_bounded() {
    paused::run(async {
        let b = PausedNode::start_env(&[("REGINA_MAX_LONG_POLLS", "2"), ("REGINA_MAX_QUEUED_PROPOSALS", "1")]).await;
        let c = client();
        let poll = b.url("/api/v1/pop/queue/idle?wait=true&timeout=2500");
        let parked: Vec<_> = (0..2)
            .map(|_| {
                let (c, poll) = (c.clone(), poll.clone());
                tokio::spawn(async move { c.get(&poll).send().await.unwrap().status().as_u16() })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (s, retry, body) = get(&c, &poll, None, None).await;
        assert_eq!((s, body["code"].as_str(), retry.as_deref()), (429, Some("overloaded"), Some("1")), "{body}");
        // A pop that does not wait is still served.
        let (s, _, _) = get(&c, &b.url("/api/v1/pop/queue/idle?wait=false"), None, None).await;
        assert!(s == 200 || s == 204, "{s}");
        for p in parked {
            let s = p.await.unwrap();
            assert!(s == 200 || s == 204, "the parked polls time out empty: {s}");
        }
        let (s, _, _) = get(&c, &b.url("/api/v1/pop/queue/idle?wait=true&timeout=100"), None, None).await;
        assert!(s == 200 || s == 204, "room again once they answered: {s}");
        // With room for one waiting write, a burst of writes sees some refused,
        // each with nothing written; the rest are stored.
        let pushes: Vec<_> = (0..64)
            .map(|i| {
                let c = c.clone();
                let url = b.url("/api/v1/push");
                tokio::spawn(async move {
                    let body =
                        json!({ "items": [{ "queue": "burst", "transactionId": format!("t{i}"), "payload": { "i": i } }] });
                    let resp = c.post(url).json(&body).send().await.unwrap();
                    let status = resp.status().as_u16();
                    (status, resp.json::<Value>().await.unwrap())
                })
            })
            .collect();
        let mut stored = 0;
        let mut refused = 0;
        for p in pushes {
            match p.await.unwrap() {
                (201, _) => stored += 1,
                (429, body) => {
                    assert_eq!(body["code"], "overloaded", "{body}");
                    refused += 1;
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(refused > 0 && stored > 0, "stored {stored}, refused {refused}");
        let (_, _, v) = get(&c, &b.url("/api/v1/resources/queues/burst"), None, None).await;
        let total = v["totals"]["total"].as_u64();
        assert_eq!(total, Some(stored), "exactly the answered pushes were stored: {v}");
    });
}
