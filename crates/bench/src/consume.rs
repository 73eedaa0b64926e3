//! `consume`: preloads `--messages` across `--partitions`, then `--consumers`
//! workers per group (`--groups`) pop (`--batch`, long poll) and batch-ack.
//! Reports messages consumed per second, pop and ack latency, and verifies
//! every delivery (see `check`); a failed check fails the run.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::args::Args;
use crate::check::{self, Expected};
use crate::consumer::{self, Shared};
use crate::progress::Progress;
use crate::scenarios::client;

/// Items per preload push; preloading is not what is measured.
const PRELOAD_BATCH: usize = 1000;

/// Pushes one batch and fails unless every item was newly queued.
pub async fn push_items(http: &reqwest::Client, url: &str, items: Vec<Value>) -> Result<(), String> {
    let n = items.len();
    let r = http
        .post(format!("{url}/api/v1/push"))
        .json(&json!({ "items": items }))
        .send()
        .await
        .map_err(|e| format!("push failed: {e}"))?;
    let status = r.status().as_u16();
    let body = r.bytes().await.map_err(|e| format!("push answer: {e}"))?;
    check_queued(status, &body, n)
}

/// Checks a push answer: a success, one result per item, each queued.
pub fn check_queued(status: u16, body: &[u8], n: usize) -> Result<(), String> {
    #[derive(serde::Deserialize)]
    struct Item<'a> {
        #[serde(borrow)]
        status: &'a str,
    }
    if !(200..300).contains(&status) {
        return Err(format!("push answered {status}: {}", String::from_utf8_lossy(body)));
    }
    let results: Vec<Item> =
        serde_json::from_slice(body).map_err(|e| format!("push answer is not the expected JSON: {e}"))?;
    if results.len() != n {
        return Err(format!("push of {n} items answered {} results", results.len()));
    }
    match results.iter().find(|r| r.status != "queued") {
        Some(bad) => Err(format!("push item not queued: {}", bad.status)),
        None => Ok(()),
    }
}

/// Writes `messages` across `partitions`. Each partition is written by one
/// producer only, so its sequence numbers follow its write order.
pub async fn preload(a: &Args, queue: &str, progress: &Progress) -> Result<Expected, String> {
    let http = client();
    let producers = a.producers.min(a.partitions).max(1);
    let mut tasks = Vec::new();
    for p in 0..producers {
        let (http, url, queue, progress) = (http.clone(), a.url.clone(), queue.to_string(), progress.clone());
        let owned: Vec<usize> = (p..a.partitions).step_by(producers).collect();
        // Spread the messages evenly; partition i gets one extra while i < rem.
        let (base, rem) = (a.messages / a.partitions as u64, a.messages % a.partitions as u64);
        let payload = "x".repeat(a.payload.saturating_sub(24));
        tasks.push(tokio::spawn(async move {
            let mut expected = Expected::new();
            let quota = |part: usize| base + u64::from((part as u64) < rem);
            let mut next_seq = vec![0u64; owned.len()];
            let mut items = Vec::with_capacity(PRELOAD_BATCH);
            let mut progressed = true;
            // Round-robin over owned partitions so pushes mix partitions.
            while progressed {
                progressed = false;
                for (i, &part) in owned.iter().enumerate() {
                    if next_seq[i] >= quota(part) {
                        continue;
                    }
                    progressed = true;
                    let seq = next_seq[i];
                    next_seq[i] += 1;
                    let txn = format!("c{part}-{seq}");
                    let name = format!("p{part}");
                    items.push(json!({"queue": queue, "partition": name, "transactionId": txn,
                                      "payload": {"s": seq, "d": payload}}));
                    expected.insert(txn, (name, seq));
                    if items.len() == PRELOAD_BATCH {
                        push_items(&http, &url, std::mem::take(&mut items)).await?;
                        progress.add(1, PRELOAD_BATCH as u64);
                    }
                }
            }
            let n = items.len() as u64;
            if n > 0 {
                push_items(&http, &url, items).await?;
                progress.add(1, n);
            }
            Ok::<_, String>(expected)
        }));
    }
    let mut all = Expected::new();
    for t in tasks {
        all.extend(t.await.map_err(|e| e.to_string())??);
    }
    Ok(all)
}

pub async fn run(a: &Args) -> Result<Value, String> {
    let queue = consumer::run_queue(&a.queue, "consume");
    let progress = Progress::start("consume", &["consumed", "preloaded"]);
    let t0 = Instant::now();
    let expected = preload(a, &queue, &progress).await?;
    let preload_secs = t0.elapsed().as_secs_f64();
    eprintln!("consume: preloaded {} messages into {queue} in {preload_secs:.1}s", expected.len());

    let shared = Shared::new(a.groups, expected.len() as u64, expected.len() * a.groups);
    let started = Instant::now();
    let started_us = consumer::now_micros();
    let deadline = started + Duration::from_secs_f64(a.seconds);
    let tasks = consumer::spawn_groups(&a.url, &queue, a.groups, a.consumers, a.batch, deadline, &shared, &progress);
    let stats = consumer::join(tasks).await;
    progress.finish();
    let stats = stats?;
    // The rate runs to the last delivery, not to when idle workers noticed
    // the end (they may sit out one long poll).
    let last_us = shared.last_progress.iter().map(|t| t.load(std::sync::atomic::Ordering::Relaxed)).max().unwrap_or(0);
    let secs = (last_us.saturating_sub(started_us) as f64 / 1e6).max(1e-6);
    let wall_secs = started.elapsed().as_secs_f64();

    let records = std::mem::take(&mut *shared.records.lock().expect("records lock"));
    let redelivery = shared.redelivery_seen.load(std::sync::atomic::Ordering::Relaxed);
    let verdict = check::check(&expected, a.groups, &records, redelivery);
    let report = json!({
        "scenario": "consume",
        "queue": queue,
        "partitions": a.partitions, "groups": a.groups, "consumersPerGroup": a.consumers, "batch": a.batch,
        "preloaded": expected.len(), "preloadSeconds": preload_secs,
        "seconds": secs,
        "wallSeconds": wall_secs,
        "consumed": records.len(),
        "messagesPerSecond": records.len() as f64 / secs,
        "pops": stats.pop.len(),
        "popLatencyMs": stats.pop.report(),
        "ackLatencyMs": stats.ack.report(),
        "acksRefused": shared.ack_refused.load(std::sync::atomic::Ordering::Relaxed),
        "check": verdict.report(),
    });
    finish(report, &verdict)
}

/// Prints a failed report before failing, so the numbers are not lost.
pub fn finish(report: Value, verdict: &check::Verdict) -> Result<Value, String> {
    if verdict.ok() {
        Ok(report)
    } else {
        println!("{}", serde_json::to_string_pretty(&report).expect("reports encode"));
        Err(verdict.failure())
    }
}
