//! The in-process harness keeps time virtual: a node on tokio's paused
//! clock lets a lease lapse and a timer fall due without the test waiting
//! for either in real time.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::paused::{self, PausedNode};

async fn post(c: &reqwest::Client, url: String, body: Value) -> Value {
    let r = c.post(&url).json(&body).send().await.unwrap();
    assert!(r.status().is_success(), "{url}: {}", r.status());
    r.json().await.unwrap()
}

async fn pop(c: &reqwest::Client, node: &PausedNode, queue: &str) -> Vec<Value> {
    let r = c.get(node.url(&format!("/api/v1/pop/queue/{queue}?wait=false"))).send().await.unwrap();
    if r.status() == 204 {
        return Vec::new();
    }
    let v: Value = r.json().await.unwrap();
    v["messages"].as_array().cloned().unwrap_or_default()
}

#[test]
fn a_lease_lapses_in_virtual_time() {
    let real = Instant::now();
    paused::run(async {
        let node = PausedNode::start().await;
        let c = reqwest::Client::new();
        post(&c, node.url("/api/v1/configure"), json!({ "queue": "slow", "options": { "leaseTime": 300 } })).await;
        let item = json!({ "queue": "slow", "partition": "Default", "payload": { "n": 1 } });
        post(&c, node.url("/api/v1/push"), json!({ "items": [item] })).await;
        let first = pop(&c, &node, "slow").await;
        assert_eq!(first.len(), 1, "{first:?}");
        tokio::time::sleep(Duration::from_secs(299)).await;
        assert!(pop(&c, &node, "slow").await.is_empty(), "the lease lapsed early");
        tokio::time::sleep(Duration::from_secs(2)).await;
        let again = pop(&c, &node, "slow").await;
        assert_eq!(again.len(), 1, "the lease did not lapse after 301 s");
        assert_eq!(again[0]["transactionId"], first[0]["transactionId"]);
        node.stop().await;
    });
    assert!(real.elapsed() < Duration::from_secs(60), "five virtual minutes took {:?}", real.elapsed());
}
