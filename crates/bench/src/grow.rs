//! Creates partitions of one queue, one message each, in pushes of 1,000
//! items that each name their own partition. Shared by `partitions` (one
//! batch of new partitions) and `scale` (a queue grown step by step), so
//! both measure creation the same way.

use std::io::Write as _;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::consume::check_queued;
use crate::http1::Http1;
use crate::progress::Progress;
use crate::scenarios::join_all;
use crate::stats::Samples;

pub const ITEMS_PER_PUSH: u64 = 1000;

/// The name of partition number `i`; `scale` reads it back from pops.
pub fn partition_name(i: u64) -> String {
    format!("p{i}")
}

/// Where and how to push. (Each producer sends through one keep-alive
/// connection of its own, `crate::http1`, with bodies written straight to
/// bytes: the load generator shares the machine with the broker.)
pub struct Target<'a> {
    pub url: &'a str,
    pub queue: &'a str,
    /// Concurrent pushes in flight.
    pub producers: usize,
    /// Approximate size of each message's payload.
    pub payload: usize,
}

/// Creates partitions `range` (numbered as [`partition_name`]) with one
/// message each, adding every created partition to `progress` counter
/// `counter`. Fails once `deadline` passes so a stalled broker cannot hang
/// the run. Returns the latency of each push.
pub async fn create(
    t: &Target<'_>,
    range: Range<u64>,
    progress: &Progress,
    counter: usize,
    deadline: Instant,
) -> Result<Samples, String> {
    let pushes = (range.end.saturating_sub(range.start)).div_ceil(ITEMS_PER_PUSH);
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let payload = "x".repeat(t.payload.saturating_sub(10));
    let mut tasks = Vec::new();
    for _ in 0..t.producers.max(1) {
        let (url, queue, next, progress, payload, range) = (
            t.url.to_string(),
            Value::from(t.queue).to_string(),
            next.clone(),
            progress.clone(),
            payload.clone(),
            range.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut lat = Samples::default();
            let mut conn = Http1::new(&url)?;
            let mut body = Vec::with_capacity(ITEMS_PER_PUSH as usize * (payload.len() + queue.len() + 64));
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= pushes {
                    break;
                }
                if Instant::now() >= deadline {
                    return Err(format!("partition creation still running after {:?}", deadline - started));
                }
                let first = range.start + i * ITEMS_PER_PUSH;
                let last = (first + ITEMS_PER_PUSH).min(range.end);
                write_body(&mut body, &queue, first..last, &payload);
                let t = Instant::now();
                let r = conn.post("/api/v1/push", &[], &body).await.map_err(|e| format!("push failed: {e}"))?;
                check_queued(r.status, &r.body, (last - first) as usize)?;
                lat.record(t.elapsed().as_micros() as u64);
                progress.add(counter, last - first);
            }
            Ok::<_, String>(lat)
        }));
    }
    let mut lat = Samples::default();
    join_all(tasks, |l| lat.merge(l)).await?;
    Ok(lat)
}

/// The push body creating partitions `range` of the queue named by the
/// JSON string `queue`, one message each.
fn write_body(body: &mut Vec<u8>, queue: &str, range: Range<u64>, payload: &str) {
    body.clear();
    body.extend_from_slice(b"{\"items\":[");
    for p in range.clone() {
        let comma = if p == range.start { "" } else { "," };
        let _ = write!(
            body,
            "{comma}{{\"queue\":{queue},\"partition\":\"{}\",\"transactionId\":\"n{p}\",\"payload\":{{\"d\":\"{payload}\"}}}}",
            partition_name(p)
        );
    }
    body.extend_from_slice(b"]}");
}

/// The number in a name [`partition_name`] made, `None` for any other name.
pub fn partition_number(name: &str) -> Option<u64> {
    let digits = name.strip_prefix('p')?;
    // Only the canonical spelling, so "p007" is not taken for "p7".
    let n: u64 = digits.parse().ok()?;
    (partition_name(n) == name).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_names_each_partition_once() {
        let mut body = Vec::new();
        write_body(&mut body, &Value::from("q\"1").to_string(), 7..10, "xx");
        let v: Value = serde_json::from_slice(&body).unwrap();
        let expect: Vec<Value> = (7..10)
            .map(|p| serde_json::json!({"queue": "q\"1", "partition": partition_name(p), "transactionId": format!("n{p}"), "payload": {"d": "xx"}}))
            .collect();
        assert_eq!(v, serde_json::json!({ "items": expect }));
    }

    #[test]
    fn names_round_trip() {
        for i in [0, 7, 999, 10_000_000] {
            assert_eq!(partition_number(&partition_name(i)), Some(i));
        }
        for other in ["", "p", "q7", "p007", "p-1", "p1x", "Default"] {
            assert_eq!(partition_number(other), None, "{other:?}");
        }
    }
}
