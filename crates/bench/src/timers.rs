//! `timers`: schedules `--messages` timers due over the next few seconds and
//! consumes what they fire. Fire lateness is the fired message's creation
//! time minus its promised `deliverAt`; delivery lateness is when a consumer
//! got it minus `deliverAt` (one host, one clock).

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use serde_json::{json, Value};

use crate::args::Args;
use crate::scenarios::client;
use crate::stats::Samples;

/// Timers are spread over this window after scheduling.
const SPREAD_MS: u64 = 5_000;

/// Milliseconds since the epoch of a wire timestamp.
fn parse_ms(iso: &str) -> Option<i64> {
    regina_types::time::parse_iso(iso).map(|ms| ms as i64)
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

pub async fn run(a: &Args) -> Result<Value, String> {
    let http = client();
    let queue = format!("{}-timers", a.queue);
    let n = a.messages.min(100_000) as usize;
    let mut promised: HashMap<String, i64> = HashMap::with_capacity(n);
    let payload = base64::engine::general_purpose::STANDARD.encode(b"{\"t\":1}");
    for chunk_start in (0..n).step_by(256) {
        let ops: Vec<Value> = (chunk_start..(chunk_start + 256).min(n))
            .map(|i| {
                let delay = (i as u64 * 7919) % SPREAD_MS;
                json!({"op": "schedule", "queue": queue, "timerKey": format!("k{i}"), "payload": payload,
                       "delayMs": delay, "txn": format!("timer-{i}")})
            })
            .collect();
        let r: Value = http
            .post(format!("{}/api/v1/timers", a.url))
            .json(&json!({ "operations": ops }))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        for res in r["results"].as_array().ok_or(format!("schedule answered {r}"))? {
            let at = res["deliverAt"].as_str().and_then(parse_ms).ok_or(format!("no deliverAt in {res}"))?;
            promised.insert(res["txn"].as_str().unwrap_or_default().to_string(), at);
        }
    }
    let mut fire = Samples::default();
    let mut deliver = Samples::default();
    let mut early = 0u64;
    let deadline = Instant::now() + Duration::from_millis(SPREAD_MS) + Duration::from_secs_f64(a.seconds);
    let pop_url =
        format!("{}/api/v1/pop/queue/{queue}?batch=1000&partitions=64&wait=true&timeout=1000&autoAck=true", a.url);
    while promised.len() > fire.len() && Instant::now() < deadline {
        let r: Value =
            http.get(&pop_url).send().await.map_err(|e| e.to_string())?.json().await.map_err(|e| e.to_string())?;
        let got = now_ms();
        for m in r["messages"].as_array().cloned().unwrap_or_default() {
            let Some(at) = m["transactionId"].as_str().and_then(|t| promised.get(t)) else { continue };
            let created = m["createdAt"].as_str().and_then(parse_ms).unwrap_or(got);
            if created < *at {
                early += 1;
            }
            fire.record((created - at).max(0) as u64 * 1000);
            deliver.record((got - at).max(0) as u64 * 1000);
        }
    }
    Ok(json!({
        "scenario": "timers",
        "timers": n,
        "fired": fire.len(),
        "firedEarly": early,
        "fireLatenessMs": {"p50": fire.quantile_ms(0.5), "p99": fire.quantile_ms(0.99), "max": fire.quantile_ms(1.0)},
        "deliveryLatenessMs": {"p50": deliver.quantile_ms(0.5), "p99": deliver.quantile_ms(0.99), "max": deliver.quantile_ms(1.0)},
    }))
}
