//! `scale` end to end against a small in-process fake broker (127.0.0.1
//! only): the partitions are created once each, wildcard and named pops use
//! the URL forms and consumer group the scenario promises, every popped
//! message is acked, and no named pop is aimed at a drained partition.
//! No timing is asserted.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use regina_bench::args::Args;

#[derive(Default)]
struct Broker {
    /// Per queue, partitions in creation order: (name, popped).
    parts: HashMap<String, Vec<(String, bool)>>,
    /// Where the next wildcard pop starts looking, per queue.
    next: HashMap<String, usize>,
    /// Leases handed out and not yet acked: lease id -> partition.
    leases: HashMap<String, String>,
    lease_seq: u64,
    pushed_twice: u64,
    bad_pops: u64,
    acks: u64,
}

type Shared = Arc<Mutex<Broker>>;

async fn push(State(s): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    let mut b = s.lock().unwrap();
    let mut answer = Vec::new();
    for (i, item) in body["items"].as_array().unwrap().iter().enumerate() {
        let queue = item["queue"].as_str().unwrap().to_string();
        let name = item["partition"].as_str().unwrap().to_string();
        let parts = b.parts.entry(queue).or_default();
        let twice = parts.iter().any(|(n, _)| *n == name);
        if twice {
            b.pushed_twice += 1;
        } else {
            parts.push((name, false));
        }
        answer.push(json!({"index": i, "status": "queued"}));
    }
    Json(Value::Array(answer))
}

/// Takes the message of partition `idx` of `queue` and answers it.
fn take(b: &mut Broker, queue: &str, idx: usize) -> Response {
    let name = {
        let p = &mut b.parts.get_mut(queue).unwrap()[idx];
        p.1 = true;
        p.0.clone()
    };
    b.lease_seq += 1;
    let lease = format!("lease-{}", b.lease_seq);
    b.leases.insert(lease.clone(), name.clone());
    let msg = json!({"transactionId": format!("t-{name}"), "partitionId": format!("id-{name}"),
                     "partition": name, "leaseId": lease, "offset": 0, "data": {}});
    Json(json!({"success": true, "messages": [msg]})).into_response()
}

fn check_query(b: &mut Broker, q: &HashMap<String, String>) {
    let ok = q.get("batch").map(String::as_str) == Some("1")
        && q.get("wait").map(String::as_str) == Some("false")
        && q.get("consumerGroup").map(String::as_str) == Some("scale")
        && q.get("subscriptionMode").map(String::as_str) == Some("all");
    if !ok {
        b.bad_pops += 1;
    }
}

async fn pop_any(
    State(s): State<Shared>,
    Path(queue): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let mut b = s.lock().unwrap();
    check_query(&mut b, &q);
    let n = b.parts.get(&queue).map_or(0, Vec::len);
    let start = b.next.get(&queue).copied().unwrap_or(0);
    for k in 0..n {
        let idx = (start + k) % n;
        if !b.parts[&queue][idx].1 {
            b.next.insert(queue.clone(), idx + 1);
            return take(&mut b, &queue, idx);
        }
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn pop_named(
    State(s): State<Shared>,
    Path((queue, name)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let mut b = s.lock().unwrap();
    check_query(&mut b, &q);
    match b.parts.get(&queue).and_then(|p| p.iter().position(|(n, taken)| *n == name && !taken)) {
        Some(idx) => take(&mut b, &queue, idx),
        None => StatusCode::NO_CONTENT.into_response(),
    }
}

async fn ack(State(s): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    let mut b = s.lock().unwrap();
    let lease = body["leaseId"].as_str().unwrap_or_default();
    let ok = body["consumerGroup"] == "scale"
        && body["status"] == "completed"
        && b.leases.get(lease).is_some_and(|p| body["transactionId"] == json!(format!("t-{p}")));
    if ok {
        b.leases.remove(lease);
        b.acks += 1;
    }
    Json(json!([{"index": 0, "success": ok, "error": if ok { Value::Null } else { json!("lease") }}]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_grows_one_queue_and_pops_every_step() {
    let shared: Shared = Arc::default();
    let app = Router::new()
        .route("/api/v1/push", post(push))
        .route("/api/v1/pop/queue/{queue}", get(pop_any))
        .route("/api/v1/pop/queue/{queue}/partition/{partition}", get(pop_named))
        .route("/api/v1/ack", post(ack))
        .with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let argv = ["scale", "--url", &url, "--steps", "10,100,2500", "--pops", "60", "--consumers", "3"];
    let mut argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    argv.extend(["--producers", "2", "--tag", "fsync=on"].iter().map(|s| s.to_string()));
    let a = Args::parse(argv).unwrap();
    let r =
        tokio::time::timeout(Duration::from_secs(60), regina_bench::run(&a)).await.expect("scale finishes").unwrap();

    assert_eq!(r["scenario"], "scale");
    assert_eq!(r["fsync"], "on", "--tag adds its field");
    assert!(r.get("rssBeforeKiB").is_none(), "no --pid, no memory figures");
    let steps = r["steps"].as_array().unwrap();
    let counts: Vec<u64> = steps.iter().map(|s| s["partitions"].as_u64().unwrap()).collect();
    assert_eq!(counts, [10, 100, 2500]);
    let new: Vec<u64> = steps.iter().map(|s| s["newPartitions"].as_u64().unwrap()).collect();
    assert_eq!(new, [10, 90, 2400]);
    // Pops never take more than half of what is full. Step 1: 10 full, 5
    // wildcard pops (the fake takes p0..p4), 2 named of the 5 left. Step 2:
    // 93 full, 46 wildcard (p7..p52), then half of the 47 still full in
    // p10..p99. Step 3 has plenty: all 60, and 200 named.
    let pops: Vec<u64> = steps.iter().map(|s| s["pops"].as_u64().unwrap()).collect();
    assert_eq!(pops, [5, 46, 60]);
    let named: Vec<u64> = steps.iter().map(|s| s["namedPops"].as_u64().unwrap()).collect();
    assert_eq!(named, [2, 23, 200]);
    for s in steps {
        assert_eq!(s["emptyPops"], 0, "{s}");
        assert_eq!(s["namedEmptyPops"], 0, "named pops aim at full partitions: {s}");
        assert_eq!(s["acksRefused"], 0, "{s}");
        for key in ["popLatencyMs", "popAckLatencyMs", "namedPopLatencyMs"] {
            assert!(s[key]["p99"].as_f64().unwrap() > 0.0, "{key}: {s}");
        }
        assert!(s["createdPerSecond"].as_f64().unwrap() > 0.0, "{s}");
    }

    let b = shared.lock().unwrap();
    assert_eq!(b.pushed_twice, 0, "each step creates only its new partitions");
    assert_eq!(b.parts.values().map(Vec::len).sum::<usize>(), 2500);
    assert_eq!(b.parts.len(), 1, "one queue throughout");
    assert_eq!(b.bad_pops, 0, "every pop uses the promised query");
    assert_eq!(b.acks, 5 + 2 + 46 + 23 + 60 + 200);
    assert!(b.leases.is_empty(), "every popped message was acked");
}
