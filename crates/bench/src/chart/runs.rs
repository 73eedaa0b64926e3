//! The `chart` subcommand: draws collected scenario reports as SVG charts.
//!
//! `regina-bench chart --input results.json --out docs/charts`
//!
//! The input is JSON, `{"runs": [report, ...]}` (a bare array of reports is
//! accepted too), where each report is the object a scenario printed on
//! stdout. The keys read are the ones those reports carry:
//!
//! - `"scenario": "push"`: `partitions` (x), `messagesPerSecond` and
//!   `latencyMs.p99` (milliseconds).
//! - `"scenario": "e2e"`: `offeredRate` (x; `rate` also accepted) and
//!   `latencyMs.p99`.
//! - `"scenario": "scale"`: its `steps`, see `chart::scale`.
//! - any run may add `"label": "..."`: runs sharing a label form one line,
//!   so two labels (two brokers, two builds) compare on the same chart.
//!   Runs without a label form one line named after the scenario.
//! - a run marked `"fsync": "off"` is left out of every chart: the charts
//!   show the durable broker, and a line without fsync beside them would
//!   read as the same broker doing better. Those runs stay in the input for
//!   the tables.
//!
//! Other scenarios are ignored. A push or e2e run lacking a key it needs
//! is an error naming the run, so a typo does not silently drop a point.
//!
//! Written into `--out` (created if missing), each only when the input
//! holds runs for it:
//!
//! - `push-throughput.svg`: messages/s against partitions, log x.
//! - `push-p99.svg`: push request p99 against partitions, log x.
//! - `e2e-p99.svg`: end-to-end p99 against offered rate; log x when the
//!   rates span a factor of 100 or more.
//! - `scale-pop-p99.svg`, `scale-memory.svg`: see `chart::scale`.

use std::path::Path;

use serde_json::{json, Value};

use super::{line_chart, scale, Series};
use crate::args::Args;

pub const WIDTH: u32 = 800;
pub const HEIGHT: u32 = 450;

/// One chart to draw: file name, title, axis labels and its series.
pub struct Chart {
    pub file: &'static str,
    pub title: &'static str,
    pub x_label: &'static str,
    pub y_label: &'static str,
    pub log_x: bool,
    pub series: Vec<Series>,
}

impl Chart {
    pub fn svg(&self) -> Result<String, String> {
        line_chart(self.title, self.x_label, self.y_label, &self.series, self.log_x, WIDTH, HEIGHT)
            .map_err(|e| format!("drawing {}: {e}", self.file))
    }
}

/// Whether a run belongs on the charts: every run except those marked as
/// measured with fsync off.
pub fn headline(run: &Value) -> bool {
    run["fsync"] != "off"
}

fn number(run: &Value, pointer: &str) -> Option<f64> {
    run.pointer(pointer).and_then(Value::as_f64)
}

/// Groups the `scenario` runs into series by label, in order of first
/// appearance, with `(x, y)` taken by `point`.
fn series(
    runs: &[Value],
    scenario: &str,
    point: impl Fn(&Value) -> Result<(f64, f64), String>,
) -> Result<Vec<Series>, String> {
    let mut out: Vec<Series> = Vec::new();
    for (i, run) in runs.iter().enumerate().filter(|(_, r)| r["scenario"] == scenario && headline(r)) {
        let p = point(run).map_err(|missing| format!("run {i} ({scenario}) has no numeric {missing}"))?;
        let name = run["label"].as_str().unwrap_or(scenario);
        match out.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push(p),
            None => out.push(Series { name: name.to_string(), points: vec![p] }),
        }
    }
    Ok(out)
}

fn need(run: &Value, pointer: &'static str) -> Result<f64, String> {
    number(run, pointer).ok_or_else(|| pointer.trim_start_matches('/').replace('/', "."))
}

/// The charts the input has data for.
pub fn charts(input: &Value) -> Result<Vec<Chart>, String> {
    let runs = match input {
        Value::Array(runs) => runs,
        _ => input["runs"].as_array().ok_or("the input needs a \"runs\" array of scenario reports")?,
    };
    let push_rate = series(runs, "push", |r| Ok((need(r, "/partitions")?, need(r, "/messagesPerSecond")?)))?;
    let push_p99 = series(runs, "push", |r| Ok((need(r, "/partitions")?, need(r, "/latencyMs/p99")?)))?;
    let e2e = series(runs, "e2e", |r| {
        let rate = number(r, "/offeredRate").or_else(|| number(r, "/rate")).ok_or("offeredRate")?;
        Ok((rate, need(r, "/latencyMs/p99")?))
    })?;
    let rates = e2e.iter().flat_map(|s| &s.points).map(|p| p.0).filter(|x| *x > 0.0);
    let (lo, hi) = rates.fold((f64::INFINITY, 0f64), |(lo, hi), x| (lo.min(x), hi.max(x)));

    let mut out = Vec::new();
    if !push_rate.is_empty() {
        out.push(Chart {
            file: "push-throughput.svg",
            title: "Push throughput",
            x_label: "partitions",
            y_label: "messages/s",
            log_x: true,
            series: push_rate,
        });
        out.push(Chart {
            file: "push-p99.svg",
            title: "Push latency p99",
            x_label: "partitions",
            y_label: "p99 latency (ms)",
            log_x: true,
            series: push_p99,
        });
    }
    if !e2e.is_empty() {
        out.push(Chart {
            file: "e2e-p99.svg",
            title: "End-to-end latency p99",
            x_label: "offered rate (messages/s)",
            y_label: "p99 latency (ms)",
            log_x: hi >= lo * 100.0,
            series: e2e,
        });
    }
    out.extend(scale::charts(runs)?);
    if out.is_empty() {
        return Err("the input holds no push, e2e or scale runs (runs with fsync off are not charted)".into());
    }
    Ok(out)
}

/// Reads `--input`, writes the charts into `--out`, reports what it wrote.
pub fn run(a: &Args) -> Result<Value, String> {
    let input = a.input.as_deref().ok_or("chart needs --input FILE")?;
    let text = std::fs::read_to_string(input).map_err(|e| format!("{input}: {e}"))?;
    let parsed: Value = serde_json::from_str(&text).map_err(|e| format!("{input}: {e}"))?;
    let charts = charts(&parsed)?;
    let dir = Path::new(&a.out);
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut written = Vec::new();
    for chart in &charts {
        let path = dir.join(chart.file);
        std::fs::write(&path, chart.svg()?).map_err(|e| format!("{}: {e}", path.display()))?;
        written.push(path.display().to_string());
    }
    Ok(json!({ "scenario": "chart", "input": input, "written": written }))
}
