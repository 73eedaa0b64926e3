//! `jobs`: enqueues `--pending` jobs into a fresh job queue (batched
//! enqueue calls from `--producers` tasks), then `--workers` workers each
//! loop claim, complete for `--seconds` (or until the queue is empty), every
//! claim and every complete its own request. Reports jobs completed per
//! second, claim and complete latency, and the broker's resident memory per
//! pending job: read before and after the enqueue from `GET /metrics`
//! (`memory.residentBytes`), or, when the broker does not give it, from
//! /proc/PID/status of `--pid`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::args::Args;
use crate::consumer::run_queue;
use crate::partitions::rss_kib;
use crate::progress::Progress;
use crate::scenarios::{client, join_all};
use crate::stats::Samples;

/// Most operations one jobs call may carry.
pub const ENQUEUE_BATCH_MAX: usize = regina_types::limits::JOB_OPS_MAX;
/// Progress counters.
const ENQUEUED: usize = 0;
const COMPLETED: usize = 1;
/// The lease each claim asks for: far longer than a claim-complete round
/// trip, so no lease runs out during a run.
const LEASE_MS: u64 = 60_000;

/// The id of the `i`th job: zero-padded so ids sort in enqueue order.
pub fn job_id(i: u64) -> String {
    format!("j{i:010}")
}

/// Resident memory of the broker in bytes, and where the figure came from.
async fn resident_bytes(http: &reqwest::Client, a: &Args) -> Result<Option<(u64, &'static str)>, String> {
    if let Ok(r) = http.get(format!("{}/metrics", a.url)).header("accept", "application/json").send().await {
        if r.status().is_success() {
            if let Ok(v) = r.json::<Value>().await {
                if let Some(b) = v["memory"]["residentBytes"].as_u64() {
                    return Ok(Some((b, "metrics")));
                }
            }
        }
    }
    a.pid.map(|pid| rss_kib(pid).map(|k| (k * 1024, "pid"))).transpose()
}

/// Posts one jobs call and answers its `results`.
async fn call(http: &reqwest::Client, url: &str, ops: Vec<Value>) -> Result<Vec<Value>, String> {
    let n = ops.len();
    let r = http
        .post(format!("{url}/api/v1/jobs"))
        .json(&json!({ "operations": ops }))
        .send()
        .await
        .map_err(|e| format!("jobs call failed: {e}"))?;
    let status = r.status();
    let body: Value = r.json().await.map_err(|e| format!("jobs answer is not JSON ({status}): {e}"))?;
    if !status.is_success() {
        return Err(format!("jobs answered {status}: {body}"));
    }
    match body["results"].as_array() {
        Some(rs) if rs.len() == n => Ok(rs.clone()),
        _ => Err(format!("jobs answered {} results for {n} operations: {body}", body["results"])),
    }
}

/// Enqueues jobs `0..pending` in calls of `batch`; answers the call latencies.
async fn enqueue(
    http: &reqwest::Client,
    a: &Args,
    queue: &str,
    batch: usize,
    progress: &Progress,
) -> Result<Samples, String> {
    let payload = "x".repeat(a.payload.saturating_sub(16));
    let calls = a.pending.div_ceil(batch as u64);
    let next = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..a.producers)
        .map(|_| {
            let (http, url, queue, payload, next, progress) =
                (http.clone(), a.url.clone(), queue.to_string(), payload.clone(), next.clone(), progress.clone());
            let pending = a.pending;
            tokio::spawn(async move {
                let mut lat = Samples::default();
                loop {
                    let c = next.fetch_add(1, Ordering::Relaxed);
                    if c >= calls {
                        return Ok(lat);
                    }
                    let ids = c * batch as u64..((c + 1) * batch as u64).min(pending);
                    let n = ids.end - ids.start;
                    let ops = ids
                        .map(|i| json!({"op": "enqueue", "queue": queue, "id": job_id(i), "payload": {"i": i, "d": payload}}))
                        .collect();
                    let t = Instant::now();
                    let rs = call(&http, &url, ops).await?;
                    lat.record(t.elapsed().as_micros() as u64);
                    if let Some(r) = rs.iter().find(|r| r["applied"] != json!(true)) {
                        return Err(format!("an enqueue into a fresh queue was refused: {r}"));
                    }
                    progress.add(ENQUEUED, n);
                }
            })
        })
        .collect();
    let mut all = Samples::default();
    join_all(tasks, |s| all.merge(s)).await?;
    Ok(all)
}

#[derive(Default)]
struct Tally {
    claim: Samples,
    complete: Samples,
    completed: u64,
    empty_claims: u64,
}

/// One worker: claim, complete, until the deadline or an empty claim (every
/// job was enqueued before the workers started, so empty means drained).
async fn worker(
    http: reqwest::Client,
    url: String,
    queue: String,
    w: usize,
    deadline: Instant,
    progress: Progress,
) -> Result<Tally, String> {
    let owner = format!("bench-w{w}");
    let mut t = Tally::default();
    while Instant::now() < deadline {
        let op = json!({"op": "claim", "queue": queue, "owner": owner, "leaseMs": LEASE_MS});
        let started = Instant::now();
        let r = call(&http, &url, vec![op]).await?;
        t.claim.record(started.elapsed().as_micros() as u64);
        let claim = &r[0]["claim"];
        if claim.is_null() {
            t.empty_claims += 1;
            break;
        }
        let op = json!({"op": "complete", "queue": queue, "id": claim["id"], "owner": owner, "token": claim["token"],
            "result": {"by": w}});
        let started = Instant::now();
        let r = call(&http, &url, vec![op]).await?;
        t.complete.record(started.elapsed().as_micros() as u64);
        if r[0]["applied"] != json!(true) {
            return Err(format!("completing a job just claimed was refused: {}", r[0]));
        }
        t.completed += 1;
        progress.add(COMPLETED, 1);
    }
    Ok(t)
}

pub async fn run(a: &Args) -> Result<Value, String> {
    let http = client();
    let queue = run_queue(&a.queue, "jobs");
    let batch = a.batch.clamp(1, ENQUEUE_BATCH_MAX);
    let progress = Progress::start("jobs", &["enqueued", "completed"]);
    let measured = measure(&http, a, &queue, batch, &progress).await;
    progress.finish();
    let mut report = measured?;
    report["queue"] = json!(queue);
    Ok(report)
}

async fn measure(
    http: &reqwest::Client,
    a: &Args,
    queue: &str,
    batch: usize,
    progress: &Progress,
) -> Result<Value, String> {
    let rss_before = resident_bytes(http, a).await?;
    let started = Instant::now();
    let enqueue_lat = enqueue(http, a, queue, batch, progress).await?;
    let enqueue_secs = started.elapsed().as_secs_f64();
    let rss_after = resident_bytes(http, a).await?;

    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(a.seconds);
    let tasks: Vec<_> = (0..a.workers)
        .map(|w| {
            let (http, url, queue) = (http.clone(), a.url.clone(), queue.to_string());
            tokio::spawn(worker(http, url, queue, w, deadline, progress.clone()))
        })
        .collect();
    let mut all = Tally::default();
    join_all(tasks, |t: Tally| {
        all.claim.merge(t.claim);
        all.complete.merge(t.complete);
        all.completed += t.completed;
        all.empty_claims += t.empty_claims;
    })
    .await?;
    let secs = started.elapsed().as_secs_f64();
    if all.completed > a.pending {
        return Err(format!("{} jobs completed but only {} were enqueued", all.completed, a.pending));
    }
    let mut report = json!({
        "scenario": "jobs",
        "pending": a.pending,
        "workers": a.workers,
        "enqueueBatch": batch,
        "payloadBytes": a.payload,
        "enqueueSeconds": enqueue_secs,
        "enqueuedPerSecond": a.pending as f64 / enqueue_secs.max(1e-9),
        "enqueueLatencyMs": enqueue_lat.report(),
        "seconds": secs,
        "completed": all.completed,
        "jobsPerSecond": all.completed as f64 / secs.max(1e-9),
        "drained": all.empty_claims > 0,
        "claims": all.claim.len(),
        "claimLatencyMs": all.claim.report(),
        "completeLatencyMs": all.complete.report(),
    });
    if let (Some((before, source)), Some((after, again))) = (rss_before, rss_after) {
        if source != again {
            return Err(format!("memory was read from {source} before the enqueue and from {again} after"));
        }
        report["memorySource"] = json!(source);
        report["rssBeforeKiB"] = json!(before / 1024);
        report["rssAfterKiB"] = json!(after / 1024);
        report["rssBytesPerJob"] = json!((after as f64 - before as f64) / a.pending.max(1) as f64);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_sort_in_enqueue_order() {
        assert_eq!(super::job_id(7), "j0000000007");
        assert!(super::job_id(999_999) < super::job_id(1_000_000));
    }
}
