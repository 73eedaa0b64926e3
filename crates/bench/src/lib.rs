//! The scenarios of `regina-bench` as a library, so tests can drive them
//! against a fake broker and call the delivery checks directly.

pub mod args;
pub mod chart;
pub mod check;
pub mod consume;
pub mod consumer;
pub mod e2e;
pub mod kv;
pub mod partitions;
pub mod progress;
pub mod scenarios;
pub mod stats;
pub mod timers;
pub mod txn;

use serde_json::Value;

/// Runs the scenario `a.scenario` names and returns its report.
pub async fn run(a: &args::Args) -> Result<Value, String> {
    match a.scenario.as_str() {
        "push" => scenarios::push(a).await,
        "consume" => consume::run(a).await,
        "e2e" => e2e::run(a).await,
        "kv" => kv::run(a).await,
        "partitions" => partitions::run(a).await,
        "fill" => scenarios::fill(a).await,
        "wait-ready" => scenarios::wait_ready(a).await,
        "txn" => txn::run(a).await,
        "timers" => timers::run(a).await,
        "chart" => chart::runs::run(a),
        other => Err(format!("unknown scenario {other:?}")),
    }
}
