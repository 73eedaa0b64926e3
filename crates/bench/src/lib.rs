//! The scenarios of `regina-bench` as a library, so tests can drive them
//! against a fake broker and call the delivery checks directly.

pub mod args;
pub mod chart;
pub mod check;
pub mod consume;
pub mod consumer;
pub mod e2e;
pub mod grow;
pub mod http1;
pub mod jobs;
pub mod kv;
pub mod partitions;
pub mod progress;
pub mod redis;
pub mod resp;
pub mod scale;
pub mod scenarios;
pub mod stats;
pub mod timers;
pub mod txn;

use serde_json::Value;

/// Runs the scenario `a.scenario` names and returns its report, with the
/// `--tag` fields added.
pub async fn run(a: &args::Args) -> Result<Value, String> {
    let mut report = scenario(a).await?;
    tag(&mut report, &a.tags);
    Ok(report)
}

/// Adds each `(key, value)` to a report object as a string field.
pub fn tag(report: &mut Value, tags: &[(String, String)]) {
    if let Value::Object(fields) = report {
        for (k, v) in tags {
            fields.insert(k.clone(), Value::String(v.clone()));
        }
    }
}

async fn scenario(a: &args::Args) -> Result<Value, String> {
    match a.scenario.as_str() {
        "push" => scenarios::push(a).await,
        "consume" => consume::run(a).await,
        "e2e" => e2e::run(a).await,
        "kv" => kv::run(a).await,
        "partitions" => partitions::run(a).await,
        "scale" => scale::run(a).await,
        "fill" => scenarios::fill(a).await,
        "wait-ready" => scenarios::wait_ready(a).await,
        "txn" => txn::run(a).await,
        "timers" => timers::run(a).await,
        "jobs" => jobs::run(a).await,
        "redis-push" => redis::push(a).await,
        "redis-consume" => redis::consume(a).await,
        "chart" => chart::runs::run(a),
        other => Err(format!("unknown scenario {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn tags_become_string_fields() {
        let mut r = json!({"scenario": "push", "fsync": "on"});
        super::tag(&mut r, &[("fsync".into(), "off".into()), ("build".into(), "b1".into())]);
        assert_eq!(r, json!({"scenario": "push", "fsync": "off", "build": "b1"}));
        // Only objects take fields.
        let mut not_object = json!([1]);
        super::tag(&mut not_object, &[("k".into(), "v".into())]);
        assert_eq!(not_object, json!([1]));
    }
}
