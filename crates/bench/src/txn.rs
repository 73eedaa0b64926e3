//! `txn`: each step acks one message, pushes one message and puts one KV
//! key, as one transaction. Workers pop a batch from their own partition and
//! commit one step per message; the figure is committed steps per second and
//! the latency of the step call.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::args::Args;
use crate::http1::Http1;
use crate::scenarios::client;
use crate::stats::Samples;

pub async fn run(a: &Args) -> Result<Value, String> {
    let http = client();
    let input = format!("{}-txn-in", a.queue);
    let workers = a.producers.max(1);
    // One partition per worker, each with enough messages for the run.
    let per_worker = (a.messages / workers as u64).max(1);
    for w in 0..workers {
        let mut left = per_worker;
        while left > 0 {
            let n = left.min(1000);
            let items: Vec<Value> = (0..n)
                .map(|i| json!({ "queue": input, "partition": format!("w{w}"), "payload": {"i": i, "w": w} }))
                .collect();
            let r = http.post(format!("{}/api/v1/push", a.url)).json(&json!({ "items": items })).send().await;
            r.map_err(|e| format!("setup push failed: {e}"))?;
            left -= n;
        }
    }
    let committed = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(a.seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (url, input, committed) = (a.url.clone(), input.clone(), committed.clone());
        tasks.push(tokio::spawn(async move { worker(&url, &input, w, committed, deadline).await }));
    }
    let mut all = Samples::default();
    for t in tasks {
        all.merge(t.await.map_err(|e| e.to_string())??);
    }
    let secs = started.elapsed().as_secs_f64();
    let steps = committed.load(Ordering::Relaxed);
    Ok(json!({
        "scenario": "txn",
        "workers": workers,
        "seconds": secs,
        "steps": steps,
        "stepsPerSecond": steps as f64 / secs,
        "latencyMs": all.report(),
    }))
}

/// A popped message, as much of it as a step needs.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Popped {
    #[serde(default)]
    messages: Vec<Message>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Message {
    transaction_id: String,
    partition_id: String,
    lease_id: Option<String>,
    offset: u64,
    data: Box<RawValue>,
}

/// The step a worker commits for one message: ack it, push its payload on,
/// put it under a key of its own.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Step<'a> {
    operations: (AckOp<'a>, PushOp<'a>),
    required_leases: [&'a Option<String>; 1],
    kv: [KvPut<'a>; 1],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AckOp<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    transaction_id: &'a str,
    partition_id: &'a str,
    lease_id: &'a Option<String>,
    status: &'static str,
}

#[derive(Serialize)]
struct PushOp<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    items: [PushItem<'a>; 1],
}

#[derive(Serialize)]
struct PushItem<'a> {
    queue: &'a str,
    partition: &'a str,
    payload: &'a RawValue,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct KvPut<'a> {
    op: &'static str,
    ns: &'static str,
    key: &'a str,
    value: &'a RawValue,
    ttl_seconds: u32,
}

#[derive(Deserialize)]
struct StepAnswer {
    success: bool,
}

/// Pops a batch of its own partition and commits one step per message, each
/// its own call. (Through one keep-alive connection of its own,
/// `crate::http1`: the load generator shares the machine with the broker.)
async fn worker(
    url: &str,
    input: &str,
    w: usize,
    committed: Arc<AtomicU64>,
    deadline: Instant,
) -> Result<Samples, String> {
    let mut samples = Samples::default();
    let mut conn = Http1::new(url)?;
    let pop_path = format!("/api/v1/pop/queue/{input}/partition/w{w}?batch=50&wait=false");
    let (out_queue, partition) = (format!("{input}-out"), format!("w{w}"));
    let (mut body, mut key) = (Vec::with_capacity(1024), String::new());
    while Instant::now() < deadline {
        let r = conn.get(&pop_path).await.map_err(|e| format!("pop failed: {e}"))?;
        if r.status == 204 {
            break;
        }
        if !(200..300).contains(&r.status) {
            return Err(format!("pop answered {}: {}", r.status, String::from_utf8_lossy(&r.body)));
        }
        let popped: Popped = serde_json::from_slice(&r.body).map_err(|e| format!("pop answer: {e}"))?;
        if popped.messages.is_empty() {
            break;
        }
        for m in &popped.messages {
            if Instant::now() >= deadline {
                break;
            }
            key.clear();
            let _ = write!(key, "{partition}/{}", m.offset);
            let step = Step {
                operations: (
                    AckOp {
                        kind: "ack",
                        transaction_id: &m.transaction_id,
                        partition_id: &m.partition_id,
                        lease_id: &m.lease_id,
                        status: "completed",
                    },
                    PushOp {
                        kind: "push",
                        items: [PushItem { queue: &out_queue, partition: &partition, payload: &m.data }],
                    },
                ),
                required_leases: [&m.lease_id],
                kv: [KvPut { op: "put", ns: "bench", key: &key, value: &m.data, ttl_seconds: 3600 }],
            };
            body.clear();
            serde_json::to_writer(&mut body, &step).map_err(|e| e.to_string())?;
            let t = Instant::now();
            let r = conn.post("/api/v1/transaction", &[], &body).await.map_err(|e| format!("step failed: {e}"))?;
            let answer: Option<StepAnswer> = serde_json::from_slice(&r.body).ok();
            if r.status != 200 || !answer.is_some_and(|a| a.success) {
                return Err(format!("a step was refused ({}): {}", r.status, String::from_utf8_lossy(&r.body)));
            }
            samples.record(t.elapsed().as_micros() as u64);
            committed.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(samples)
}
