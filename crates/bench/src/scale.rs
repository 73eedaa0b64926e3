//! `scale`: grows ONE queue through the partition counts of `--steps`
//! (each partition holding one message) and, at every step, measures what
//! the count must not change: the creation rate of the step's new
//! partitions, broker resident memory per partition (with `--pid`), and the
//! latency of a pop and of a pop followed by its ack. Wildcard pops (the
//! broker picks the partition) are measured `--pops` times by
//! `--consumers` consumers; a few hundred pops on named, still full
//! partitions are measured for comparison, since they need no search.
//!
//! One broker and one queue throughout, so a step only adds partitions and
//! a large count is reached once rather than rebuilt for every step.

pub mod plan;
pub mod pops;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::args::Args;
use crate::consumer::run_queue;
use crate::grow::{self, partition_name, partition_number, Target};
use crate::partitions::rss_kib;
use crate::progress::Progress;
use crate::scenarios::client;

/// Progress counters.
const CREATED: usize = 0;
const POPPED: usize = 1;

/// Slowest creation rate a step may fall to (partitions per second) before
/// it is judged stuck, on top of the usual ten minutes.
const SLOWEST_CREATION: f64 = 5_000.0;

pub async fn run(a: &Args) -> Result<Value, String> {
    let queue = run_queue(&a.queue, "scale");
    let rss_start = a.pid.map(rss_kib).transpose()?;
    let progress = Progress::start("scale", &["partitions", "popped"]);
    let steps = steps(a, &queue, rss_start, &progress).await;
    progress.finish();
    let mut report = json!({
        "scenario": "scale",
        "queue": queue,
        "consumerGroup": pops::GROUP,
        "producers": a.producers,
        "consumers": a.consumers,
        "payloadBytes": a.payload,
        "steps": steps?,
    });
    if let Some(kib) = rss_start {
        report["rssBeforeKiB"] = json!(kib);
    }
    Ok(report)
}

/// Runs every step in order and returns their reports.
async fn steps(a: &Args, queue: &str, rss_start: Option<u64>, progress: &Progress) -> Result<Vec<Value>, String> {
    let http = client();
    let target = Target { url: &a.url, queue, producers: a.producers, payload: a.payload };
    let mut have = 0u64;
    // Partitions whose one message a pop took; never popped again.
    let mut drained: HashSet<u64> = HashSet::new();
    let mut out = Vec::new();
    for &count in &a.steps {
        let new = have..count.max(have);
        let started = Instant::now();
        let allowed = a.seconds.max(600.0) + (new.end - new.start) as f64 / SLOWEST_CREATION;
        grow::create(&target, new.clone(), progress, CREATED, started + Duration::from_secs_f64(allowed)).await?;
        let create_secs = started.elapsed().as_secs_f64();
        have = new.end;
        let mut step = json!({
            "partitions": have,
            "newPartitions": new.end - new.start,
            "createSeconds": create_secs,
            "createdPerSecond": (new.end - new.start) as f64 / create_secs.max(1e-9),
        });
        // Memory right after growing, before the pops add group cursors.
        if let (Some(pid), Some(before)) = (a.pid, rss_start) {
            let now = rss_kib(pid)?;
            step["rssKiB"] = json!(now);
            step["rssBytesPerPartition"] = json!((now as f64 - before as f64) * 1024.0 / have as f64);
        }

        let n = plan::wildcard_pops(have, drained.len() as u64, a.pops);
        let urls = vec![pops::wildcard_url(&a.url, queue); n];
        let wild = pops::measure(&http, &a.url, urls, a.consumers, progress, POPPED).await?;
        drained.extend(wild.drained.iter().filter_map(|p| partition_number(p)));

        let aims = plan::unconsumed(new.clone(), plan::named_pops(&new, &drained), &drained);
        let urls = aims.iter().map(|&p| pops::named_url(&a.url, queue, &partition_name(p))).collect();
        let named = pops::measure(&http, &a.url, urls, a.consumers, progress, POPPED).await?;
        drained.extend(named.drained.iter().filter_map(|p| partition_number(p)));

        step["pops"] = json!(wild.pop.len());
        step["emptyPops"] = json!(wild.empty);
        step["popLatencyMs"] = wild.pop.report();
        step["popAckLatencyMs"] = wild.pop_ack.report();
        step["namedPops"] = json!(named.pop.len());
        step["namedEmptyPops"] = json!(named.empty);
        step["namedPopLatencyMs"] = named.pop.report();
        step["namedPopAckLatencyMs"] = named.pop_ack.report();
        step["acksRefused"] = json!(wild.refused + named.refused);
        eprintln!("{}", summary(&step));
        out.push(step);
    }
    Ok(out)
}

/// One line per finished step on stderr, so a long run shows its figures as
/// they come instead of only in the final report.
fn summary(step: &Value) -> String {
    let f = |p: &str| step.pointer(p).and_then(Value::as_f64).unwrap_or(f64::NAN);
    let mut line = format!("scale: {} partitions, created {:.0}/s", step["partitions"], f("/createdPerSecond"));
    if step.get("rssBytesPerPartition").is_some() {
        line.push_str(&format!(", {:.0} B RSS/partition", f("/rssBytesPerPartition")));
    }
    line.push_str(&format!(
        "; pop p50 {:.2} p99 {:.2} ms, pop+ack p99 {:.2} ms, named pop p99 {:.2} ms",
        f("/popLatencyMs/p50"),
        f("/popLatencyMs/p99"),
        f("/popAckLatencyMs/p99"),
        f("/namedPopLatencyMs/p99")
    ));
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_names_the_figures() {
        let step = json!({"partitions": 1000, "createdPerSecond": 12345.6, "rssBytesPerPartition": 512.0,
                          "popLatencyMs": {"p50": 0.5, "p99": 1.25}, "popAckLatencyMs": {"p99": 3.0},
                          "namedPopLatencyMs": {"p99": 0.75}});
        let s = summary(&step);
        assert!(s.contains("1000 partitions") && s.contains("12346/s") && s.contains("512 B"), "{s}");
        assert!(s.contains("p99 1.25 ms") && s.contains("pop+ack p99 3.00") && s.contains("named pop p99 0.75"), "{s}");
        let s = summary(&json!({"partitions": 5}));
        assert!(!s.contains("RSS"), "{s}");
    }
}
