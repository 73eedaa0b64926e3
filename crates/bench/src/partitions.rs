//! `partitions`: creates `--partitions` new partitions holding one message
//! each, in pushes of 1,000 items that each name their own partition, and
//! reports the creation rate. With `--pid P` (the broker's process, on this
//! host) it also reports resident memory per partition from
//! /proc/P/status VmRSS before and after.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::args::Args;
use crate::consume::push_items;
use crate::consumer::run_queue;
use crate::progress::Progress;
use crate::scenarios::client;
use crate::stats::Samples;

const ITEMS_PER_PUSH: u64 = 1000;

/// VmRSS of process `pid` in KiB.
pub fn rss_kib(pid: u32) -> Result<u64, String> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
    parse_vmrss(&status).ok_or_else(|| format!("no VmRSS line in {path}"))
}

fn parse_vmrss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

pub async fn run(a: &Args) -> Result<Value, String> {
    let http = client();
    let queue = run_queue(&a.queue, "parts");
    let total = a.partitions as u64;
    let pushes = total.div_ceil(ITEMS_PER_PUSH);
    let rss_before = a.pid.map(rss_kib).transpose()?;
    let progress = Progress::start("partitions", &["created"]);
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    // Creating partitions is not time-boxed by --seconds (the count is the
    // point), but a stuck broker must not hang the run forever.
    let deadline = started + Duration::from_secs_f64(a.seconds.max(600.0));
    let payload = "x".repeat(a.payload.saturating_sub(10));
    let mut tasks = Vec::new();
    for _ in 0..a.producers {
        let (http, url, queue, next, progress, payload) =
            (http.clone(), a.url.clone(), queue.clone(), next.clone(), progress.clone(), payload.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Samples::default();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= pushes {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(format!("partition creation still running after {:?}", deadline - started));
                }
                let first = i * ITEMS_PER_PUSH;
                let last = (first + ITEMS_PER_PUSH).min(total);
                let items: Vec<Value> = (first..last)
                    .map(|p| {
                        json!({"queue": queue, "partition": format!("p{p}"), "transactionId": format!("n{p}"),
                                    "payload": {"d": payload}})
                    })
                    .collect();
                let t = Instant::now();
                push_items(&http, &url, items).await?;
                lat.record(t.elapsed().as_micros() as u64);
                progress.add(0, last - first);
            }
            Ok::<_, String>(lat)
        }));
    }
    let mut lat = Samples::default();
    let mut err = None;
    for t in tasks {
        match t.await.map_err(|e| e.to_string()).and_then(|r| r) {
            Ok(l) => lat.merge(l),
            Err(e) => err = Some(e),
        }
    }
    progress.finish();
    if let Some(e) = err {
        return Err(e);
    }
    let secs = started.elapsed().as_secs_f64();
    let rss_after = a.pid.map(rss_kib).transpose()?;
    let mut report = json!({
        "scenario": "partitions",
        "queue": queue,
        "partitions": total,
        "seconds": secs,
        "partitionsPerSecond": total as f64 / secs,
        "pushes": lat.len(),
        "pushLatencyMs": lat.report(),
    });
    if let (Some(b), Some(af)) = (rss_before, rss_after) {
        report["rssBeforeKiB"] = json!(b);
        report["rssAfterKiB"] = json!(af);
        report["rssBytesPerPartition"] = json!((af as f64 - b as f64) * 1024.0 / total as f64);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_vmrss() {
        let s = "Name:\tregina\nVmPeak:\t  9000 kB\nVmRSS:\t  12345 kB\nThreads:\t4\n";
        assert_eq!(super::parse_vmrss(s), Some(12345));
        assert!(super::rss_kib(std::process::id()).unwrap() > 0);
    }
}
