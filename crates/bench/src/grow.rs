//! Creates partitions of one queue, one message each, in pushes of 1,000
//! items that each name their own partition. Shared by `partitions` (one
//! batch of new partitions) and `scale` (a queue grown step by step), so
//! both measure creation the same way.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Value};

use crate::consume::push_items;
use crate::progress::Progress;
use crate::scenarios::join_all;
use crate::stats::Samples;

pub const ITEMS_PER_PUSH: u64 = 1000;

/// The name of partition number `i`; `scale` reads it back from pops.
pub fn partition_name(i: u64) -> String {
    format!("p{i}")
}

/// Where and how to push.
pub struct Target<'a> {
    pub http: &'a reqwest::Client,
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
        let (http, url, queue, next, progress, payload, range) = (
            t.http.clone(),
            t.url.to_string(),
            t.queue.to_string(),
            next.clone(),
            progress.clone(),
            payload.clone(),
            range.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut lat = Samples::default();
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
                let items: Vec<Value> = (first..last)
                    .map(|p| {
                        json!({"queue": queue, "partition": partition_name(p), "transactionId": format!("n{p}"),
                               "payload": {"d": payload}})
                    })
                    .collect();
                let t = Instant::now();
                push_items(&http, &url, items).await?;
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
    fn names_round_trip() {
        for i in [0, 7, 999, 10_000_000] {
            assert_eq!(partition_number(&partition_name(i)), Some(i));
        }
        for other in ["", "p", "q7", "p007", "p-1", "p1x", "Default"] {
            assert_eq!(partition_number(other), None, "{other:?}");
        }
    }
}
