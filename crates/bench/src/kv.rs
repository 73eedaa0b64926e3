//! `kv`: `--producers` workers run a get/write mix on `--keys` keys for
//! `--seconds`; `--ratio` of operations are reads. Writes alternate between
//! a compare-and-set `put` (`expect` = the version this worker last saw)
//! and an `incr` of a shared counter, the two write shapes that need the
//! broker to serialise per key. Reports operations per second, latency per
//! kind, and how many conditional writes lost a race.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::args::Args;
use crate::progress::Progress;
use crate::scenarios::{client, join_all};
use crate::stats::Samples;

const NS: &str = "bench";
/// Counters are few so `incr`s contend, as real quota counters do.
const COUNTERS: u64 = 16;

/// xorshift64*: enough randomness for key choice without a dependency.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

#[derive(Default)]
struct Tally {
    get: Samples,
    put: Samples,
    incr: Samples,
    conflicts: u64,
}

async fn worker(
    http: reqwest::Client,
    a: Args,
    id: u64,
    deadline: Instant,
    progress: Progress,
    incr_applied: Arc<AtomicU64>,
) -> Result<Tally, String> {
    let url = format!("{}/api/v1/kv", a.url);
    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (id + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let mut versions: HashMap<u64, u64> = HashMap::new();
    let mut t = Tally::default();
    let mut writes = 0u64;
    while Instant::now() < deadline {
        let key = next(&mut rng) % a.keys as u64;
        let read = (next(&mut rng) % 1_000_000) as f64 / 1_000_000.0 < a.ratio;
        let (op, kind) = if read {
            (json!({"op": "get", "ns": NS, "key": format!("k{key}")}), 0)
        } else {
            writes += 1;
            if writes & 1 == 0 {
                let expect = versions.get(&key).copied().unwrap_or(0);
                (
                    json!({"op": "put", "ns": NS, "key": format!("k{key}"), "value": {"w": id, "n": writes},
                        "forever": true, "expect": expect}),
                    1,
                )
            } else {
                (json!({"op": "incr", "ns": NS, "key": format!("c{}", key % COUNTERS), "delta": 1, "forever": true}), 2)
            }
        };
        let started = Instant::now();
        let r =
            http.post(&url).json(&json!({"operations": [op]})).send().await.map_err(|e| format!("kv failed: {e}"))?;
        if !r.status().is_success() {
            let status = r.status();
            return Err(format!("kv answered {status}: {}", r.text().await.unwrap_or_default()));
        }
        let body: Value = r.json().await.map_err(|e| format!("kv answer is not JSON: {e}"))?;
        let micros = started.elapsed().as_micros() as u64;
        let res = &body["results"][0];
        if res.is_null() {
            return Err(format!("kv answer has no result: {body}"));
        }
        match kind {
            0 => {
                t.get.record(micros);
                if let Some(v) = res["version"].as_u64() {
                    versions.insert(key, v);
                }
            }
            1 => {
                t.put.record(micros);
                // Applied or not, the answer carries the current version.
                versions.insert(key, res["version"].as_u64().unwrap_or(0));
                if res["applied"] != json!(true) {
                    t.conflicts += 1;
                }
            }
            _ => {
                t.incr.record(micros);
                if res["applied"] != json!(true) {
                    return Err(format!("an unbounded incr was refused: {res}"));
                }
                incr_applied.fetch_add(1, Ordering::Relaxed);
            }
        }
        progress.add(0, 1);
    }
    Ok(t)
}

pub async fn run(a: &Args) -> Result<Value, String> {
    let http = client();
    let progress = Progress::start("kv", &["ops"]);
    let incr_applied = Arc::new(AtomicU64::new(0));
    // Counters start from whatever earlier runs left; read them first so the
    // sum can be checked afterwards.
    let before = counter_sum(&http, &a.url).await?;
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(a.seconds);
    let tasks: Vec<_> = (0..a.producers as u64)
        .map(|id| tokio::spawn(worker(http.clone(), a.clone(), id, deadline, progress.clone(), incr_applied.clone())))
        .collect();
    let mut all = Tally::default();
    let joined = join_all(tasks, |t: Tally| {
        all.get.merge(t.get);
        all.put.merge(t.put);
        all.incr.merge(t.incr);
        all.conflicts += t.conflicts;
    })
    .await;
    progress.finish();
    joined?;
    let secs = started.elapsed().as_secs_f64();
    let after = counter_sum(&http, &a.url).await?;
    let incrs = incr_applied.load(Ordering::Relaxed);
    if after - before != incrs as f64 {
        return Err(format!("counters moved by {} but {incrs} incrs were applied", after - before));
    }
    let ops = (all.get.len() + all.put.len() + all.incr.len()) as u64;
    Ok(json!({
        "scenario": "kv",
        "workers": a.producers, "keys": a.keys, "readRatio": a.ratio,
        "seconds": secs,
        "ops": ops,
        "opsPerSecond": ops as f64 / secs,
        "gets": all.get.len(), "puts": all.put.len(), "incrs": all.incr.len(),
        "putConflicts": all.conflicts,
        "latencyMs": {"get": all.get.report(), "put": all.put.report(), "incr": all.incr.report()},
    }))
}

/// Sum of the shared counters, to check no applied `incr` was lost.
async fn counter_sum(http: &reqwest::Client, url: &str) -> Result<f64, String> {
    let keys: Vec<String> = (0..COUNTERS).map(|i| format!("c{i}")).collect();
    let r = http
        .post(format!("{url}/api/v1/kv"))
        .json(&json!({"operations": [{"op": "getMany", "ns": NS, "keys": keys}]}))
        .send()
        .await
        .map_err(|e| format!("kv failed: {e}"))?;
    let body: Value = r.json().await.map_err(|e| format!("kv answer is not JSON: {e}"))?;
    let rows = body["results"][0]["rows"].as_array().ok_or_else(|| format!("getMany answered {body}"))?;
    Ok(rows.iter().filter_map(|r| r["value"].as_f64()).sum())
}
