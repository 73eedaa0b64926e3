//! The scenarios. Each returns a JSON report.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::args::Args;
use crate::http1::Http1;
use crate::stats::Samples;

/// The HTTP client every scenario uses. `REGINA_TOKEN`, when set, is sent
/// as the bearer token of every request (for brokers that check tokens).
pub fn client() -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Ok(token) = std::env::var("REGINA_TOKEN") {
        let value = format!("Bearer {token}").parse().expect("REGINA_TOKEN is a header value");
        headers.insert(reqwest::header::AUTHORIZATION, value);
    }
    reqwest::Client::builder()
        .default_headers(headers)
        .pool_max_idle_per_host(256)
        // Long polls last at most a few seconds; a minute means the broker is stuck.
        .timeout(Duration::from_secs(60))
        .build()
        .expect("an HTTP client")
}

/// Joins every task, even after one failed (so none keeps loading the
/// broker behind the caller's back), hands each result to `fold`, and
/// returns the last error if any task failed.
pub async fn join_all<T>(
    tasks: Vec<tokio::task::JoinHandle<Result<T, String>>>,
    mut fold: impl FnMut(T),
) -> Result<(), String> {
    let mut err = None;
    for task in tasks {
        match task.await.map_err(|e| e.to_string()).and_then(|r| r) {
            Ok(t) => fold(t),
            Err(e) => err = Some(e),
        }
    }
    err.map_or(Ok(()), Err)
}

/// One push body of `--batch` items, written straight into one string (the
/// bytes serde_json renders for the same items): a JSON tree built per item
/// cost the load generator, which shares the machine with the broker, more
/// than the broker spent reading it.
fn batch_body(a: &Args, producer: usize, seq: &mut u64, payload: &str) -> String {
    use std::fmt::Write;
    let (queue, payload) = (Value::from(a.queue.as_str()).to_string(), Value::from(payload).to_string());
    let mut body = String::with_capacity(16 + a.batch * (payload.len() + queue.len() + 80));
    body.push_str("{\"items\":[");
    for i in 0..a.batch {
        *seq += 1;
        let part = (*seq as usize * 7919 + producer) % a.partitions;
        let comma = if i == 0 { "" } else { "," };
        let _ = write!(
            body,
            "{comma}{{\"partition\":\"p{part}\",\"payload\":{{\"d\":{payload}}},\"queue\":{queue},\"transactionId\":\"b{producer}-{seq}\"}}"
        );
    }
    body.push_str("]}");
    body
}

/// Closed-loop push: each producer sends its next batch when the last one
/// is answered. With `--tenants N`, each batch acts for one of N tenants
/// (`x-queen-tenant`, round robin per producer), so the load spreads over
/// the broker's Raft groups; with several `--url`s (comma list), producer
/// `p` starts at the `p % n`th; with `--follow-leader on`, each producer
/// sends a tenant's next batch to the leader the last answer named
/// (`x-regina-leader`), as the Rust SDK does. Requests go through a
/// minimal HTTP/1.1 connection per node (`crate::http1`), not `client()`.
pub async fn push(a: &Args) -> Result<Value, String> {
    let payload = "x".repeat(a.payload.saturating_sub(10));
    let sent = Arc::new(AtomicU64::new(0));
    let forwarded = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(a.seconds);
    let started = Instant::now();
    let per_second = crate::progress::PerSecond::start(sent.clone());
    let urls: Vec<String> = a.url.split(',').map(|u| u.trim().trim_end_matches('/').to_string()).collect();
    let mut tasks = Vec::new();
    for p in 0..a.producers {
        let (a, payload, sent, forwarded) = (a.clone(), payload.clone(), sent.clone(), forwarded.clone());
        let base = urls[p % urls.len()].clone();
        tasks.push(tokio::spawn(async move {
            let mut samples = Samples::default();
            let mut seq = 0u64;
            let mut leaders: std::collections::HashMap<String, String> = Default::default();
            // One keep-alive connection per node this producer sends to.
            let mut conns: std::collections::HashMap<String, Http1> = Default::default();
            let mut round = 0usize;
            while Instant::now() < deadline {
                let body = batch_body(&a, p, &mut seq, &payload);
                let tenant = (a.tenants > 0).then(|| format!("t{}", (p * 7 + round) % a.tenants));
                round += 1;
                let key = tenant.clone().unwrap_or_default();
                let to = leaders.get(&key).cloned().unwrap_or_else(|| base.clone());
                if !conns.contains_key(&to) {
                    conns.insert(to.clone(), Http1::new(&to).map_err(|e| format!("push failed: {e}"))?);
                }
                let conn = conns.get_mut(&to).expect("inserted above");
                let headers: Vec<(&str, &str)> = tenant.iter().map(|t| ("x-queen-tenant", t.as_str())).collect();
                let t = Instant::now();
                match conn.post("/api/v1/push", &headers, body.as_bytes()).await {
                    Ok(r) if (200..300).contains(&r.status) => {
                        if let Some(leader) = r.leader.map(|l| format!("http://{l}")) {
                            if leader != to {
                                forwarded.fetch_add(1, Ordering::Relaxed);
                            }
                            if a.follow_leader {
                                leaders.insert(key, leader);
                            }
                        }
                        samples.record(t.elapsed().as_micros() as u64);
                        sent.fetch_add(a.batch as u64, Ordering::Relaxed);
                    }
                    Ok(r) => return Err(format!("push answered {}", r.status)),
                    Err(e) => return Err(format!("push failed: {e}")),
                }
            }
            Ok(samples)
        }));
    }
    let mut all = Samples::default();
    for t in tasks {
        all.merge(t.await.map_err(|e| e.to_string())??);
    }
    let secs = started.elapsed().as_secs_f64();
    let msgs = sent.load(Ordering::Relaxed);
    Ok(json!({
        "scenario": "push",
        "producers": a.producers, "batch": a.batch, "payloadBytes": a.payload, "partitions": a.partitions,
        "tenants": a.tenants, "urls": urls.len(), "followLeader": a.follow_leader,
        "seconds": secs,
        "messages": msgs,
        "messagesPerSecond": msgs as f64 / secs,
        "requests": all.len(),
        // Requests answered by a node that forwarded them to the leader.
        "forwardedRequests": forwarded.load(Ordering::Relaxed),
        "latencyMs": all.report(),
        // Messages answered in each whole second of the run.
        "perSecond": per_second.finish(),
    }))
}

/// Pushes `--messages` messages across `--partitions` partitions.
pub async fn fill(a: &Args) -> Result<Value, String> {
    let http = client();
    let payload = "x".repeat(a.payload.saturating_sub(10));
    let total_batches = a.messages.div_ceil(a.batch as u64);
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for p in 0..a.producers {
        let (http, a, payload, next) = (http.clone(), a.clone(), payload.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let url = format!("{}/api/v1/push", a.url);
            let mut seq = 0u64;
            while next.fetch_add(1, Ordering::Relaxed) < total_batches {
                let body = batch_body(&a, p, &mut seq, &payload);
                let r = http.post(&url).header("content-type", "application/json").body(body).send().await;
                match r {
                    Ok(r) if r.status().is_success() => {
                        let _ = r.bytes().await;
                    }
                    Ok(r) => return Err(format!("push answered {}", r.status())),
                    Err(e) => return Err(format!("push failed: {e}")),
                }
            }
            Ok(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    let secs = started.elapsed().as_secs_f64();
    Ok(json!({
        "scenario": "fill", "messages": total_batches * a.batch as u64, "partitions": a.partitions,
        "seconds": secs, "messagesPerSecond": (total_batches * a.batch as u64) as f64 / secs,
    }))
}

/// Polls until a pop is answered; reports the time it took.
pub async fn wait_ready(a: &Args) -> Result<Value, String> {
    let http = client();
    let started = Instant::now();
    let url = format!("{}/api/v1/pop/queue/{}?wait=false&batch=1&autoAck=true", a.url, a.queue);
    let deadline = started + Duration::from_secs_f64(a.seconds);
    while Instant::now() < deadline {
        if let Ok(r) = http.get(&url).send().await {
            if r.status().is_success() {
                let body: Value = r.json().await.map_err(|e| e.to_string())?;
                let got = body["messages"].as_array().map_or(0, |m| m.len());
                return Ok(json!({
                    "scenario": "wait-ready",
                    "secondsUntilServing": started.elapsed().as_secs_f64(),
                    "messagesInFirstPop": got,
                }));
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Err(format!("not serving after {} s", a.seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_body_is_what_serde_renders_for_its_items() {
        let mut a = Args::parse(["push", "--batch", "3", "--partitions", "10"].map(String::from)).unwrap();
        a.queue = "q\"1".into();
        let (mut seq, mut again) = (5, 5);
        let body = batch_body(&a, 2, &mut seq, "xy\\z");
        let items: Vec<Value> = (0..a.batch)
            .map(|_| {
                again += 1;
                let part = (again as usize * 7919 + 2) % a.partitions;
                json!({"queue": a.queue, "partition": format!("p{part}"), "transactionId": format!("b2-{again}"),
                       "payload": {"d": "xy\\z"}})
            })
            .collect();
        assert_eq!(body, json!({ "items": items }).to_string());
        assert_eq!(seq, 8);
    }
}
