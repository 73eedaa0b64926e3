//! What a Queen user reaches for that Regina serves under Queen's names:
//! DLQ purge and replay by id, a seek of one partition, offsets by time,
//! the membership routes, Queen's `/health` block and Prometheus series,
//! and JSON logs on `QUEEN_LOG_JSON`.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use serde_json::{json, Value};

use support::{Broker, Workspace};

struct Node {
    _ws: Workspace,
    broker: Broker,
    c: reqwest::Client,
}

impl Node {
    fn start(env: &[(&str, &str)]) -> Node {
        let ws = Workspace::new();
        let broker = Broker::start_with(&ws, env);
        Node { _ws: ws, broker, c: reqwest::Client::new() }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self.c.request(method, self.broker.url(path));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    async fn push(&self, queue: &str, partition: &str, txn: &str) {
        let item = json!({"queue": queue, "partition": partition, "transactionId": txn, "payload": {"t": txn}});
        let (s, b) = self.call(reqwest::Method::POST, "/api/v1/push", Some(json!({"items": [item]}))).await;
        assert_eq!((s, b[0]["status"].clone()), (201, json!("queued")), "{b}");
    }

    /// Pops everything `group` is given on `queue` and acks it with `status`.
    async fn pop_and_ack(&self, queue: &str, group: &str, status: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            let path = format!("/api/v1/pop/queue/{queue}?consumerGroup={group}&batch=100&subscriptionMode=all");
            let resp = self.c.get(self.broker.url(&path)).send().await.unwrap();
            if resp.status() == 204 {
                return seen;
            }
            let body: Value = resp.json().await.unwrap();
            let msgs = body["messages"].as_array().cloned().unwrap_or_default();
            if msgs.is_empty() {
                return seen;
            }
            let acks: Vec<Value> = msgs
                .iter()
                .map(|m| {
                    seen.push(m["transactionId"].as_str().unwrap().to_string());
                    json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                           "leaseId": m["leaseId"], "status": status, "error": "boom"})
                })
                .collect();
            let (s, b) = self
                .call(
                    reqwest::Method::POST,
                    "/api/v1/ack/batch",
                    Some(json!({"acknowledgments": acks, "consumerGroup": group})),
                )
                .await;
            assert_eq!(s, 200, "{b}");
        }
    }
}

#[tokio::test]
async fn dead_letters_are_purged_and_replayed_by_id() {
    let n = Node::start(&[]);
    let (s, _) = n
        .call(reqwest::Method::POST, "/api/v1/configure", Some(json!({"queue": "jobs", "options": {"retryLimit": 0}})))
        .await;
    assert_eq!(s, 200);
    for i in 0..4 {
        n.push("jobs", &format!("p{}", i % 2), &format!("t{i}")).await;
    }
    assert_eq!(n.pop_and_ack("jobs", "workers", "dlq").await.len(), 4);
    let (_, dlq) = n.call(reqwest::Method::GET, "/api/v1/dlq?queue=jobs", None).await;
    assert_eq!(dlq["total"], 4, "{dlq}");

    // Replay one by the id the list shows: it leaves the DLQ and is pushed again.
    let first = dlq["messages"][0].clone();
    let id = first["id"].as_str().unwrap();
    let (s, r) = n.call(reqwest::Method::POST, &format!("/api/v1/dlq/{id}/replay"), None).await;
    assert_eq!(s, 200, "{r}");
    let (s, r) = n.call(reqwest::Method::POST, &format!("/api/v1/dlq/{id}/replay"), None).await;
    assert_eq!((s, r["code"].clone()), (404, json!("not_found")), "a replayed row is gone: {r}");
    let (s, r) = n.call(reqwest::Method::POST, "/api/v1/dlq/not-an-id/replay", None).await;
    assert_eq!((s, r["field"].clone()), (400, json!("id")), "{r}");
    let again = n.pop_and_ack("jobs", "workers", "completed").await;
    assert_eq!(again, vec![first["transactionId"].as_str().unwrap().to_string()], "the replayed message comes back");

    // Purge needs a queue, and takes every matching row.
    let (s, r) = n.call(reqwest::Method::DELETE, "/api/v1/dlq", None).await;
    assert_eq!((s, r["field"].clone()), (400, json!("queue")), "{r}");
    let (s, r) = n.call(reqwest::Method::DELETE, "/api/v1/dlq?queue=nope", None).await;
    assert_eq!(s, 404, "{r}");
    let (s, r) = n.call(reqwest::Method::DELETE, "/api/v1/dlq?queue=jobs&partition=p1", None).await;
    assert_eq!((s, r["purged"].clone()), (200, json!(2)), "{r}");
    let (_, dlq) = n.call(reqwest::Method::GET, "/api/v1/dlq?queue=jobs", None).await;
    assert_eq!(dlq["total"], 1, "{dlq}");
    let (s, r) = n.call(reqwest::Method::DELETE, "/api/v1/dlq?queue=jobs", None).await;
    assert_eq!((s, r["purged"].clone()), (200, json!(1)), "{r}");
    let (_, dlq) = n.call(reqwest::Method::GET, "/api/v1/dlq?queue=jobs", None).await;
    assert_eq!(dlq["total"], 0, "{dlq}");
}

#[tokio::test]
async fn a_partition_seek_moves_only_that_partition_and_offsets_are_found_by_time() {
    let n = Node::start(&[]);
    for i in 0..3 {
        n.push("orders", "a", &format!("a{i}")).await;
        n.push("orders", "b", &format!("b{i}")).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let between = regina_types::time::format_iso(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64,
    );
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    n.push("orders", "a", "a3").await;
    assert_eq!(n.pop_and_ack("orders", "g", "completed").await.len(), 7);

    let seek = "/api/v1/consumer-groups/g/queues/orders/partitions/a/seek";
    let (s, r) = n.call(reqwest::Method::POST, seek, Some(json!({"timestamp": "1970-01-01T00:00:00Z"}))).await;
    assert_eq!((s, r["partitionName"].clone(), r["partitionsUpdated"].clone()), (200, json!("a"), json!(1)), "{r}");
    let mut again = n.pop_and_ack("orders", "g", "completed").await;
    again.sort();
    assert_eq!(again, ["a0", "a1", "a2", "a3"], "only partition a is read again");
    let (s, r) =
        n.call(reqwest::Method::POST, "/api/v1/consumer-groups/g/queues/orders/partitions/zz/seek", None).await;
    assert_eq!(s, 404, "{r}");
    let (s, r) = n.call(reqwest::Method::POST, seek, Some(json!({"timestamp": "soon"}))).await;
    assert_eq!((s, r["field"].clone()), (400, json!("timestamp")), "{r}");

    let body = json!({"entries": [
        {"queue": "orders", "partition": "a", "timestamp": between},
        {"queue": "orders", "partition": "b", "timestamp": between},
        {"queue": "orders", "partition": "a", "timestamp": "1970-01-01T00:00:00Z"},
        {"queue": "nope", "partition": "a", "timestamp": between},
    ]});
    let (s, r) = n.call(reqwest::Method::POST, "/api/v1/fetch/offsets", Some(body)).await;
    assert_eq!(s, 200, "{r}");
    let e = &r["entries"];
    assert_eq!((e[0]["offset"].clone(), e[0]["highWatermark"].clone()), (json!(3), json!(4)), "{r}");
    assert_eq!(e[1]["offset"], Value::Null, "every message of b is older: {r}");
    assert_eq!(e[2]["offset"], 0, "{r}");
    assert_eq!(e[3]["error"], "UNKNOWN_TOPIC_OR_PARTITION", "{r}");
    let bad = json!({"entries": [{"queue": "orders", "timestamp": "never"}]});
    let (s, r) = n.call(reqwest::Method::POST, "/api/v1/fetch/offsets", Some(bad)).await;
    assert_eq!((s, r["field"].clone()), (400, json!("entries[0].timestamp")), "{r}");
}

#[tokio::test]
async fn health_metrics_and_membership_speak_queen() {
    let n = Node::start(&[("QUEEN_LOG_JSON", "true")]);
    n.push("q", "p", "x").await;
    assert_eq!(n.pop_and_ack("q", "g", "completed").await.len(), 1);

    let (s, h) = n.call(reqwest::Method::GET, "/health", None).await;
    assert_eq!(s, 200, "{h}");
    assert_eq!(h["status"], "healthy", "{h}");
    let raft = &h["raft"];
    assert_eq!(
        (raft["role"].clone(), raft["leader"].clone(), raft["storageReady"].clone()),
        (json!("leader"), json!(true), json!(true)),
        "{h}"
    );
    assert!(raft["applied"].as_u64().unwrap() >= 2 && raft["commit"].as_u64().is_some(), "{h}");

    let text = n.c.get(n.broker.url("/metrics/prometheus")).send().await.unwrap().text().await.unwrap();
    for series in [
        "queen_raft_storage_full 0",
        "queen_raft_index{kind=\"committed\"}",
        "queen_raft_index{kind=\"applied\"}",
        "queen_dlq_depth_by_queue{queue=\"q\"} 0",
        "queen_queue_pop_lag_milliseconds{queue=\"q\",stat=\"max\"}",
        "queen_uptime_seconds",
        "regina_queues 1",
    ] {
        assert!(text.contains(series), "{series} missing from:\n{text}");
    }

    let (s, m) = n.call(reqwest::Method::GET, "/api/v1/system/raft/membership", None).await;
    assert_eq!(s, 200, "{m}");
    assert_eq!(
        (m["membership"]["voters"].clone(), m["membership"]["source"].clone()),
        (json!([1]), json!("leader")),
        "{m}"
    );
    let (s, r) = n.call(reqwest::Method::DELETE, "/api/v1/system/raft/membership/members/1", None).await;
    assert_eq!((s, r["code"].clone()), (409, json!("membership_refused")), "the last voter stays: {r}");
    let (s, r) =
        n.call(reqwest::Method::POST, "/api/v1/system/raft/membership/promote", Some(json!({"ids": [9]}))).await;
    assert_eq!(s, 409, "{r}");
    let (s, r) =
        n.call(reqwest::Method::PUT, "/api/v1/system/raft/membership/voters", Some(json!({"nodes": []}))).await;
    assert_eq!(s, 400, "{r}");

    // QUEEN_LOG_JSON: one JSON object per log line.
    let log = n.broker.log_tail(20_000);
    let json_lines: Vec<Value> =
        log.lines().filter(|l| l.starts_with('{')).filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert!(
        json_lines.iter().any(|l| l["level"].is_string() && l["fields"].is_object()),
        "no JSON log line in:\n{log}"
    );
}
