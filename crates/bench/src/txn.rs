//! `txn`: each step acks one message, pushes one message and puts one KV
//! key, as one transaction. Workers pop a batch from their own partition and
//! commit one step per message; the figure is committed steps per second and
//! the latency of the step call.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::args::Args;
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
        let (http, a, input, committed) = (http.clone(), a.clone(), input.clone(), committed.clone());
        tasks.push(tokio::spawn(async move { worker(&http, &a, &input, w, committed, deadline).await }));
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

async fn worker(
    http: &reqwest::Client,
    a: &Args,
    input: &str,
    w: usize,
    committed: Arc<AtomicU64>,
    deadline: Instant,
) -> Result<Samples, String> {
    let mut samples = Samples::default();
    let pop_url = format!("{}/api/v1/pop/queue/{input}/partition/w{w}?batch=50&wait=false", a.url);
    let txn_url = format!("{}/api/v1/transaction", a.url);
    while Instant::now() < deadline {
        let popped: Value =
            http.get(&pop_url).send().await.map_err(|e| e.to_string())?.json().await.map_err(|e| e.to_string())?;
        let msgs = popped["messages"].as_array().cloned().unwrap_or_default();
        if msgs.is_empty() {
            break;
        }
        for m in msgs {
            if Instant::now() >= deadline {
                break;
            }
            let step = json!({
                "operations": [
                    {"type": "ack", "transactionId": m["transactionId"], "partitionId": m["partitionId"],
                     "leaseId": m["leaseId"], "status": "completed"},
                    {"type": "push", "items": [{"queue": format!("{input}-out"), "partition": format!("w{w}"), "payload": m["data"]}]},
                ],
                "requiredLeases": [m["leaseId"]],
                "kv": [{"op": "put", "ns": "bench", "key": format!("w{w}/{}", m["offset"]), "value": m["data"], "ttlSeconds": 3600}],
            });
            let t = Instant::now();
            let r: Value = http
                .post(&txn_url)
                .json(&step)
                .send()
                .await
                .map_err(|e| e.to_string())?
                .json()
                .await
                .map_err(|e| e.to_string())?;
            if r["success"] != Value::Bool(true) {
                return Err(format!("a step was refused: {r}"));
            }
            samples.record(t.elapsed().as_micros() as u64);
            committed.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(samples)
}
