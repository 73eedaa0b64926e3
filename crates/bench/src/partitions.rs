//! `partitions`: creates `--partitions` new partitions holding one message
//! each (see `grow`) and reports the creation rate. With `--pid P` (the
//! broker's process, on this host) it also reports resident memory per
//! partition from /proc/P/status VmRSS before and after.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::args::Args;
use crate::consumer::run_queue;
use crate::grow::{self, Target};
use crate::progress::Progress;

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
    let queue = run_queue(&a.queue, "parts");
    let total = a.partitions as u64;
    let rss_before = a.pid.map(rss_kib).transpose()?;
    let progress = Progress::start("partitions", &["created"]);
    let started = Instant::now();
    // Creating partitions is not time-boxed by --seconds (the count is the
    // point), but a stuck broker must not hang the run forever.
    let deadline = started + Duration::from_secs_f64(a.seconds.max(600.0));
    let target = Target { url: &a.url, queue: &queue, producers: a.producers, payload: a.payload };
    let lat = grow::create(&target, 0..total, &progress, 0, deadline).await;
    progress.finish();
    let lat = lat?;
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
