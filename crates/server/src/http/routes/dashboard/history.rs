//! The dashboard's history: a sample of each Raft group's figures every
//! [`DASHBOARD_HISTORY_INTERVAL_MS`], the last [`DASHBOARD_HISTORY_POINTS_MAX`]
//! of them kept in memory (a ring), so the overview can chart the last hour.
//!
//! It lives here, beside the routes, and not in the state machine: the
//! samples are read from the applied state under its read lock, like any
//! admin view, and are neither logged nor replicated. Each node samples its
//! own replica; a restart starts an empty history. The figures are the
//! default tenant's.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::{Extension, Json};
use parking_lot::Mutex;
use serde_json::{json, Value};

use regina_node::Replica;
use regina_state::views;
use regina_types::limits::{DASHBOARD_HISTORY_GROUPS_MAX, DASHBOARD_HISTORY_INTERVAL_MS, DASHBOARD_HISTORY_POINTS_MAX};
use regina_types::time::format_iso;

/// Lag of one consumer group across every queue and partition it reads.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupLag {
    pub group: String,
    /// Messages the group has not settled.
    pub messages: u64,
    /// Age in seconds of the oldest message it has not settled.
    pub seconds: u64,
}

/// One sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub at_ms: u64,
    /// Messages ever appended to a kept partition (the sum of the
    /// partitions' end offsets): rises with every push.
    pub pushed: u64,
    /// Messages settled, summed over every group's position: rises with
    /// every ack (and with a seek forward).
    pub consumed: u64,
    /// Per second since the previous sample (0 for the first one, and
    /// when a counter went down, e.g. a queue was deleted).
    pub pushed_rate: f64,
    pub consumed_rate: f64,
    /// Queue-level depth (the slowest group of each partition).
    pub depth: u64,
    pub dead_letters: u64,
    /// Age in seconds of the oldest message some group has not settled.
    pub oldest_unconsumed_seconds: u64,
    pub groups: Vec<GroupLag>,
}

/// The ring of samples of one Raft group.
#[derive(Debug, Default)]
pub struct History {
    samples: Mutex<VecDeque<Sample>>,
}

impl History {
    /// Starts sampling `node` (now, then every interval) until it stops.
    pub fn start(node: Arc<Replica>) -> Arc<History> {
        let history = Arc::new(History::default());
        let h = history.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(DASHBOARD_HISTORY_INTERVAL_MS));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let stopped = node.stopped();
            tokio::pin!(stopped);
            loop {
                tokio::select! {
                    _ = &mut stopped => break,
                    _ = tick.tick() => {
                        if let Ok(sample) = measure(&node).await {
                            h.record(sample);
                        }
                    }
                }
            }
        });
        history
    }

    /// Adds a raw sample (rates still zero), working out its rates from
    /// the previous one and dropping the oldest when the ring is full.
    pub fn record(&self, mut s: Sample) {
        let mut ring = self.samples.lock();
        if let Some(prev) = ring.back() {
            let secs = s.at_ms.saturating_sub(prev.at_ms) as f64 / 1000.0;
            if secs > 0.0 {
                s.pushed_rate = s.pushed.saturating_sub(prev.pushed) as f64 / secs;
                s.consumed_rate = s.consumed.saturating_sub(prev.consumed) as f64 / secs;
            }
        }
        if ring.len() == DASHBOARD_HISTORY_POINTS_MAX {
            ring.pop_front();
        }
        ring.push_back(s);
    }

    pub fn samples(&self) -> Vec<Sample> {
        self.samples.lock().iter().cloned().collect()
    }
}

/// One sample of the applied state of the caller's tenant. The queues
/// are copied under the read lock (a count per 1,024 partitions) and
/// walked outside it, on a blocking thread: walked under it, at 10,000,000
/// partitions, every write waited over a second each time a sample was
/// taken, and the walk held an async worker as long.
async fn measure(node: &Replica) -> Result<Sample, tokio::task::JoinError> {
    let (copy, now) = {
        let m = node.tenant_state();
        (m.copy_of_queues(), node.read_time(m.now_ms))
    };
    tokio::task::spawn_blocking(move || sample_of(&copy, now)).await
}

/// The sample of a copy of the queues at `now`.
fn sample_of(s: &regina_state::State, now: u64) -> Sample {
    let summaries = views::queue_summaries(s, now);
    let pushed = s.queues.values().flat_map(|q| q.partitions.iter()).map(|p| p.next_offset()).sum();
    let totals = views::lane_totals(s, now);
    let mut groups: Vec<GroupLag> =
        totals.by_group.into_iter().map(|(group, (messages, seconds))| GroupLag { group, messages, seconds }).collect();
    groups.sort_by(|a, b| b.messages.cmp(&a.messages).then_with(|| a.group.cmp(&b.group)));
    groups.truncate(DASHBOARD_HISTORY_GROUPS_MAX);
    Sample {
        at_ms: now,
        pushed,
        consumed: totals.positions,
        pushed_rate: 0.0,
        consumed_rate: 0.0,
        depth: summaries.iter().map(|q| q.depth).sum(),
        dead_letters: summaries.iter().map(|q| q.dlq_rows).sum(),
        oldest_unconsumed_seconds: totals.oldest_seconds,
        groups,
    }
}

fn sample_json(s: &Sample) -> Value {
    json!({
        "at": format_iso(s.at_ms),
        "atMs": s.at_ms,
        "pushed": s.pushed,
        "consumed": s.consumed,
        "pushedPerSecond": s.pushed_rate,
        "consumedPerSecond": s.consumed_rate,
        "depth": s.depth,
        "deadLetters": s.dead_letters,
        "oldestUnconsumedSeconds": s.oldest_unconsumed_seconds,
        "groups": s.groups.iter().map(|g| json!({
            "group": g.group, "lagMessages": g.messages, "lagSeconds": g.seconds,
        })).collect::<Vec<_>>(),
    })
}

/// `GET /api/v1/dashboard/history`: the samples kept, oldest first, and
/// one taken now (`current`, not kept), so a chart can end at this moment.
pub async fn history(State(node): State<Arc<Replica>>, history: Option<Extension<Arc<History>>>) -> Json<Value> {
    let kept = history.map(|Extension(h)| h.samples()).unwrap_or_default();
    // A walk that panicked panics here, as it did when it ran here.
    let mut current = measure(&node).await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    if let Some(prev) = kept.last() {
        let one = History::default();
        one.record(prev.clone());
        one.record(current.clone());
        current = one.samples().pop().unwrap_or(current);
    }
    Json(json!({
        "intervalMs": DASHBOARD_HISTORY_INTERVAL_MS,
        "pointsMax": DASHBOARD_HISTORY_POINTS_MAX,
        "samples": kept.iter().map(sample_json).collect::<Vec<_>>(),
        "current": sample_json(&current),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64, pushed: u64, consumed: u64) -> Sample {
        Sample {
            at_ms: ms,
            pushed,
            consumed,
            pushed_rate: 0.0,
            consumed_rate: 0.0,
            depth: 0,
            dead_letters: 0,
            oldest_unconsumed_seconds: 0,
            groups: Vec::new(),
        }
    }

    #[test]
    fn the_ring_is_bounded_and_rates_come_from_deltas() {
        let h = History::default();
        for i in 0..(DASHBOARD_HISTORY_POINTS_MAX as u64 + 5) {
            h.record(at(i * 10_000, i * 100, i * 50));
        }
        let s = h.samples();
        assert_eq!(s.len(), DASHBOARD_HISTORY_POINTS_MAX);
        assert_eq!(s[0].at_ms, 5 * 10_000, "the oldest samples went first");
        let last = s.last().unwrap();
        assert!((last.pushed_rate - 10.0).abs() < 1e-9 && (last.consumed_rate - 5.0).abs() < 1e-9);
        // A counter that went down (a deleted queue) is a rate of 0, not a
        // negative one.
        h.record(at(last.at_ms + 10_000, 0, 0));
        let after = h.samples().pop().unwrap();
        assert_eq!((after.pushed_rate, after.consumed_rate), (0.0, 0.0));
    }
}
