//! How old messages are when a pop delivers them (delivery time minus
//! creation time), per queue, over the last minute: Queen's
//! `queen_queue_pop_lag_milliseconds`. Node-local: each node counts the
//! pops it answers. Bounded: one window per queue name seen in the last
//! two minutes.

use std::collections::HashMap;
use std::sync::OnceLock;

use parking_lot::Mutex;

/// The window a figure covers.
const WINDOW_MS: u64 = 60_000;

#[derive(Clone, Copy, Default)]
struct Window {
    start_ms: u64,
    max_ms: u64,
    sum_ms: u64,
    count: u64,
    /// The previous full window, reported until the current one has data.
    last: Option<(u64, u64, u64)>,
}

fn windows() -> &'static Mutex<HashMap<String, Window>> {
    static W: OnceLock<Mutex<HashMap<String, Window>>> = OnceLock::new();
    W.get_or_init(Default::default)
}

/// Records the ages of one pop's messages of `queue` at `now_ms`.
pub fn record(queue: &str, now_ms: u64, created: impl Iterator<Item = u64>) {
    let (mut max, mut sum, mut count) = (0u64, 0u64, 0u64);
    for c in created {
        let age = now_ms.saturating_sub(c);
        max = max.max(age);
        sum = sum.saturating_add(age);
        count += 1;
    }
    if count == 0 {
        return;
    }
    let mut w = windows().lock();
    if !w.contains_key(queue) {
        w.retain(|_, v| now_ms.saturating_sub(v.start_ms) < 2 * WINDOW_MS);
    }
    let e = w.entry(queue.to_string()).or_default();
    if now_ms.saturating_sub(e.start_ms) >= WINDOW_MS {
        e.last = (e.count > 0).then_some((e.max_ms, e.sum_ms, e.count));
        *e = Window { start_ms: now_ms, last: e.last, ..Window::default() };
    }
    e.max_ms = e.max_ms.max(max);
    e.sum_ms = e.sum_ms.saturating_add(sum);
    e.count += count;
}

/// Per queue: (max, mean) age in milliseconds over the last minute.
pub fn figures(now_ms: u64) -> Vec<(String, u64, u64)> {
    let w = windows().lock();
    let mut out: Vec<(String, u64, u64)> = w
        .iter()
        .filter(|(_, v)| now_ms.saturating_sub(v.start_ms) < 2 * WINDOW_MS)
        .filter_map(|(q, v)| {
            let (max, sum, count) = if v.count > 0 { (v.max_ms, v.sum_ms, v.count) } else { v.last? };
            Some((q.clone(), max, sum / count.max(1)))
        })
        .collect();
    out.sort();
    out
}
