//! The charts of `scale` runs: how pop latency and memory per partition
//! change as one queue grows. Each report holds a `steps` array; every step
//! is one point at x = `partitions`, on a log axis because the counts grow
//! by factors of ten.
//!
//! - `scale-pop-p99.svg`: `popLatencyMs.p99`, `popAckLatencyMs.p99` and
//!   `namedPopLatencyMs.p99` (when present) per step, one line each.
//! - `scale-memory.svg`: `rssBytesPerPartition` per step; steps without it
//!   (a run without `--pid`) add no point, and runs without any add no line.
//!
//! A run's lines are named after its `label` when it has one, so labelled
//! runs (two builds, two brokers) compare on the same chart.

use serde_json::Value;

use super::runs::{headline, Chart};
use super::Series;

/// The scale charts the headline runs in `runs` have data for (none when
/// there is no scale run). A step lacking a latency is an error naming the
/// run and the step.
pub fn charts(runs: &[Value]) -> Result<Vec<Chart>, String> {
    let mut latency: Vec<Series> = Vec::new();
    let mut memory: Vec<Series> = Vec::new();
    for (i, run) in runs.iter().enumerate().filter(|(_, r)| r["scenario"] == "scale" && headline(r)) {
        let steps = run["steps"].as_array().ok_or_else(|| format!("run {i} (scale) has no steps array"))?;
        let prefix = run["label"].as_str().map(|l| format!("{l}: ")).unwrap_or_default();
        for (s, step) in steps.iter().enumerate() {
            let num = |key: &str| step.pointer(key).and_then(Value::as_f64);
            let need = |key: &str| {
                let what = key.trim_start_matches('/').replace('/', ".");
                num(key).ok_or_else(|| format!("run {i} (scale) step {s} has no numeric {what}"))
            };
            let x = need("/partitions")?;
            add(&mut latency, format!("{prefix}pop p99"), (x, need("/popLatencyMs/p99")?));
            add(&mut latency, format!("{prefix}pop+ack p99"), (x, need("/popAckLatencyMs/p99")?));
            if let Some(y) = num("/namedPopLatencyMs/p99") {
                add(&mut latency, format!("{prefix}named pop p99"), (x, y));
            }
            if let Some(y) = num("/rssBytesPerPartition") {
                let name = run["label"].as_str().unwrap_or("scale").to_string();
                add(&mut memory, name, (x, y));
            }
        }
    }
    let mut out = Vec::new();
    if !latency.is_empty() {
        out.push(Chart {
            file: "scale-pop-p99.svg",
            title: "Pop latency p99 by partition count",
            x_label: "partitions in the queue",
            y_label: "p99 latency (ms)",
            log_x: true,
            series: latency,
        });
    }
    if !memory.is_empty() {
        out.push(Chart {
            file: "scale-memory.svg",
            title: "Broker memory per partition",
            x_label: "partitions in the queue",
            y_label: "RSS bytes per partition",
            log_x: true,
            series: memory,
        });
    }
    Ok(out)
}

/// Appends `point` to the series called `name`, creating it at the end.
fn add(series: &mut Vec<Series>, name: String, point: (f64, f64)) {
    match series.iter_mut().find(|s| s.name == name) {
        Some(s) => s.points.push(point),
        None => series.push(Series { name, points: vec![point] }),
    }
}
