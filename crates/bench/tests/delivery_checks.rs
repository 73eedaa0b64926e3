//! The delivery checks must catch a bad broker. A small in-process fake
//! broker (127.0.0.1 only) serves push, pop and batch ack, optionally with
//! one fault: a dropped message, a message delivered twice, or two messages
//! of one partition delivered out of order. `consume` and `e2e` run against
//! it end to end; the faulty ones must fail the run, the correct one pass.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use regina_bench::args::Args;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Fault {
    None,
    Drop,
    Duplicate,
    Reorder,
}

/// The sixth message written is the one a fault hits.
const VICTIM: usize = 5;

#[derive(Default)]
struct Broker {
    /// Per queue, the delivery order (what a pop walks).
    log: HashMap<String, Vec<Value>>,
    /// Per (queue, partition), the next offset.
    offsets: HashMap<(String, String), i64>,
    /// Per (queue, group), how far pops have read `log`.
    cursors: HashMap<(String, String), usize>,
    /// Groups holding an unacked batch. Like a real lease, it keeps other
    /// workers of the group off until the batch is acked, which is what
    /// keeps a partition's deliveries in order across workers.
    leased: std::collections::HashSet<String>,
    written: usize,
}

type Shared = Arc<(Mutex<Broker>, Fault)>;

async fn push(State(s): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    let (broker, fault) = (&s.0, s.1);
    let mut b = broker.lock().unwrap();
    let mut answer = Vec::new();
    for (i, item) in body["items"].as_array().unwrap().iter().enumerate() {
        let queue = item["queue"].as_str().unwrap().to_string();
        let partition = item["partition"].as_str().unwrap_or("Default").to_string();
        let offset = {
            let o = b.offsets.entry((queue.clone(), partition.clone())).or_insert(0);
            *o += 1;
            *o - 1
        };
        let msg = json!({
            "transactionId": item["transactionId"], "partitionId": partition, "partition": partition,
            "offset": offset, "data": item["payload"], "leaseId": "lease-1", "deliveryAttempt": 1,
        });
        let victim = b.written == VICTIM;
        b.written += 1;
        let log = b.log.entry(queue).or_default();
        match fault {
            Fault::Drop if victim => {}
            Fault::Duplicate if victim => {
                log.push(msg.clone());
                log.push(msg);
            }
            Fault::Reorder if offset == 1 => {
                // Deliver this partition's offset 1 ahead of its offset 0.
                let before = log.iter().rposition(|m| m["partition"] == msg["partition"]).unwrap();
                log.insert(before, msg);
            }
            _ => log.push(msg),
        }
        answer.push(json!({"index": i, "transactionId": item["transactionId"], "status": "queued", "offset": offset}));
    }
    Json(Value::Array(answer))
}

async fn pop(
    State(s): State<Shared>,
    Path(queue): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Json<Value> {
    let batch: usize = q.get("batch").and_then(|b| b.parse().ok()).unwrap_or(100);
    let group = q.get("consumerGroup").cloned().unwrap_or_default();
    let wait = q.get("wait").is_some_and(|w| w == "true");
    // Bounded long poll: a few short looks, then an empty answer.
    for _ in 0..10 {
        {
            let mut b = s.0.lock().unwrap();
            let len = b.log.get(&queue).map_or(0, |l| l.len());
            let free = !b.leased.contains(&group);
            let cursor = b.cursors.entry((queue.clone(), group.clone())).or_insert(0);
            if free && *cursor < len {
                let end = (*cursor + batch).min(len);
                let start = std::mem::replace(cursor, end);
                let msgs = b.log[&queue][start..end].to_vec();
                b.leased.insert(group);
                return Json(json!({"success": true, "leaseId": "lease-1", "messages": msgs}));
            }
        }
        if !wait {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Json(json!({"success": true, "messages": []}))
}

async fn ack(State(s): State<Shared>, Json(body): Json<Value>) -> Json<Value> {
    let group = body["consumerGroup"].as_str().unwrap_or_default().to_string();
    s.0.lock().unwrap().leased.remove(&group);
    let n = body["acknowledgments"].as_array().map_or(0, |a| a.len());
    Json(Value::Array((0..n).map(|i| json!({"index": i, "success": true, "error": null})).collect()))
}

async fn start(fault: Fault) -> String {
    let shared: Shared = Arc::new((Mutex::new(Broker::default()), fault));
    let app = Router::new()
        .route("/api/v1/push", post(push))
        .route("/api/v1/pop/queue/{queue}", get(pop))
        .route("/api/v1/ack/batch", post(ack))
        .with_state(shared);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn args(scenario: &str, url: String, extra: &[&str]) -> Args {
    let mut v: Vec<String> = [
        scenario,
        "--url",
        &url,
        "--seconds",
        "10",
        "--producers",
        "2",
        "--consumers",
        "2",
        "--partitions",
        "4",
        "--messages",
        "200",
        "--batch",
        "10",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    Args::parse(v).unwrap()
}

async fn consume(fault: Fault, groups: &str) -> Result<Value, String> {
    let url = start(fault).await;
    let a = args("consume", url, &["--groups", groups]);
    tokio::time::timeout(Duration::from_secs(30), regina_bench::run(&a)).await.expect("consume finishes")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn correct_broker_passes_consume() {
    for groups in ["1", "2"] {
        let r = consume(Fault::None, groups).await.unwrap();
        assert_eq!(r["check"]["ok"], json!(true), "{r}");
        assert_eq!(r["consumed"], json!(200 * groups.parse::<u64>().unwrap()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_message_fails_consume() {
    let e = consume(Fault::Drop, "1").await.unwrap_err();
    assert!(e.contains("FAILED") && e.contains("lost=1"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicated_message_fails_consume() {
    let e = consume(Fault::Duplicate, "2").await.unwrap_err();
    assert!(e.contains("FAILED") && e.contains("duplicates=2"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reordered_messages_fail_consume() {
    let e = consume(Fault::Reorder, "1").await.unwrap_err();
    assert!(e.contains("FAILED") && e.contains("out_of_order=4"), "{e}");
}

async fn e2e(fault: Fault) -> Result<Value, String> {
    let url = start(fault).await;
    let a = args("e2e", url, &["--rate", "200", "--seconds", "1"]);
    tokio::time::timeout(Duration::from_secs(30), regina_bench::run(&a)).await.expect("e2e finishes")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_passes_correct_broker_and_catches_faults() {
    let r = e2e(Fault::None).await.unwrap();
    assert_eq!(r["check"]["ok"], json!(true), "{r}");
    assert_eq!(r["sent"], json!(200), "{r}");
    assert!(r["latencyMs"]["p50"].as_f64().unwrap() > 0.0, "{r}");
    for fault in [Fault::Drop, Fault::Duplicate, Fault::Reorder] {
        let e = e2e(fault).await.unwrap_err();
        assert!(e.contains("FAILED"), "{fault:?}: {e}");
    }
}
