//! `jobs` end to end against a small in-process fake job broker (127.0.0.1
//! only): every job is enqueued once in batched calls of at most the
//! broker's operation limit, every claim and every complete is its own
//! call, each complete names the token its claim handed out, the queue is
//! drained, and memory per job comes from `GET /metrics`. No timing is
//! asserted.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use regina_bench::args::Args;
use regina_bench::jobs::ENQUEUE_BATCH_MAX;

/// Resident bytes the fake reports per stored job, on top of a base.
const BYTES_PER_JOB: u64 = 512;
const BASE_BYTES: u64 = 10 * 1024 * 1024;

#[derive(Default)]
struct Broker {
    /// id -> (leased token, completed)
    jobs: BTreeMap<String, (Option<u64>, bool)>,
    queues: HashMap<String, u64>,
    tokens: u64,
    enqueue_calls: Vec<usize>,
    enqueued_twice: u64,
    mixed_calls: u64,
    bad_completes: u64,
    completes: u64,
}

type Shared = Arc<Mutex<Broker>>;

async fn jobs(State(s): State<Shared>, Json(body): Json<Value>) -> Response {
    let mut b = s.lock().unwrap();
    let ops = body["operations"].as_array().cloned().unwrap_or_default();
    if ops.is_empty() || ops.len() > ENQUEUE_BATCH_MAX {
        return (StatusCode::BAD_REQUEST, Json(json!({"error": "operations", "code": "INVALID_ARGUMENT"})))
            .into_response();
    }
    let kinds: Vec<&str> = ops.iter().map(|o| o["op"].as_str().unwrap_or_default()).collect();
    if kinds.iter().any(|k| *k != kinds[0]) || (kinds[0] != "enqueue" && ops.len() > 1) {
        b.mixed_calls += 1;
    }
    let mut results = Vec::new();
    for op in &ops {
        *b.queues.entry(op["queue"].as_str().unwrap().to_string()).or_default() += 1;
        let id = op["id"].as_str().unwrap_or_default().to_string();
        match op["op"].as_str().unwrap() {
            "enqueue" => {
                if let std::collections::btree_map::Entry::Vacant(e) = b.jobs.entry(id) {
                    e.insert((None, false));
                    results.push(json!({"applied": true, "job": {}}));
                } else {
                    b.enqueued_twice += 1;
                    results.push(json!({"applied": false, "code": "JOB_EXISTS"}));
                }
            }
            "claim" => {
                b.tokens += 1;
                let token = b.tokens;
                let next = b.jobs.iter_mut().find(|(_, (lease, done))| lease.is_none() && !done);
                let claim = next.map(|(id, job)| {
                    job.0 = Some(token);
                    json!({"scope": "", "id": id, "payload": {}, "attempt": 1, "owner": op["owner"],
                        "token": token, "expiresAt": "2026-12-01T00:00:00.000Z"})
                });
                results.push(json!({ "claim": claim }));
            }
            "complete" => {
                let ok = matches!(b.jobs.get(&id), Some((Some(t), false)) if op["token"] == json!(t));
                if ok {
                    b.jobs.get_mut(&id).unwrap().1 = true;
                    b.completes += 1;
                } else {
                    b.bad_completes += 1;
                }
                results.push(json!({"applied": ok, "job": {}}));
            }
            other => panic!("the scenario sends no {other}"),
        }
    }
    if kinds[0] == "enqueue" {
        b.enqueue_calls.push(ops.len());
    }
    Json(json!({ "results": results })).into_response()
}

async fn metrics(State(s): State<Shared>) -> Json<Value> {
    let b = s.lock().unwrap();
    Json(json!({"memory": {"residentBytes": BASE_BYTES + BYTES_PER_JOB * b.jobs.len() as u64}}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_enqueues_in_batches_then_claims_and_completes_each_job_once() {
    let shared: Shared = Arc::default();
    let app =
        Router::new().route("/api/v1/jobs", post(jobs)).route("/metrics", get(metrics)).with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    // A batch above the broker's limit is clamped to it.
    let argv = ["jobs", "--url", &url, "--pending", "1_000", "--workers", "4", "--batch", "300", "--seconds", "60"];
    let a = Args::parse(argv.iter().map(|s| s.to_string())).unwrap();
    let r = tokio::time::timeout(Duration::from_secs(60), regina_bench::run(&a)).await.expect("jobs finishes").unwrap();

    assert_eq!(r["scenario"], "jobs");
    assert_eq!((r["pending"].as_u64(), r["workers"].as_u64()), (Some(1000), Some(4)));
    assert_eq!(r["enqueueBatch"], ENQUEUE_BATCH_MAX);
    assert_eq!(r["completed"], 1000);
    assert_eq!(r["drained"], true);
    assert!(r["jobsPerSecond"].as_f64().unwrap() > 0.0);
    for key in ["claimLatencyMs", "completeLatencyMs", "enqueueLatencyMs"] {
        assert!(r[key]["p999"].as_f64().unwrap() > 0.0, "{key}: {r}");
    }
    // 1000 claims that got a job, then one empty claim per worker: a worker
    // stops at its first.
    assert_eq!(r["claims"], 1004, "{r}");
    assert_eq!(r["memorySource"], "metrics");
    assert_eq!(r["rssBytesPerJob"], BYTES_PER_JOB as f64);

    let b = shared.lock().unwrap();
    let mut calls = b.enqueue_calls.clone();
    calls.sort_unstable();
    assert_eq!(calls, [232, 256, 256, 256], "1000 jobs in calls of at most {ENQUEUE_BATCH_MAX}");
    assert_eq!(b.enqueued_twice, 0);
    assert_eq!(b.mixed_calls, 0, "every claim and every complete is its own call");
    assert_eq!(b.bad_completes, 0, "each complete names its claim's token");
    assert_eq!(b.completes, 1000);
    assert!(b.jobs.values().all(|(_, done)| *done));
    assert_eq!(b.queues.len(), 1, "one fresh queue");
}
