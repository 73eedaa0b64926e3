//! Query state survives a SIGKILL: a stream runs a tumbling count-and-sum
//! while the broker is killed mid-stream (twice) and restarted on the same
//! data directory; afterwards every window was emitted exactly once with
//! exact totals, so no open window lost what it had folded and no cycle
//! applied twice.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

#[path = "support/streams.rs"]
mod streams;
mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use streams::Nodes;
use support::{Broker, Workspace};

const PARTITIONS: usize = 4;
const PER_PARTITION: u64 = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_state_survives_sigkill_with_exact_totals() {
    let ws = Workspace::new();
    let mut broker = Broker::start(&ws);
    let nodes = Arc::new(Nodes::new(vec![broker.base()]));
    let query_id = streams::prepare(&nodes, "st-src", "st-sink", "count-sum").await;

    let stop = Arc::new(AtomicBool::new(false));
    let runner =
        tokio::spawn(streams::run(nodes.clone(), "st-src".into(), "st-sink".into(), query_id.clone(), stop.clone()));
    let feeder = {
        let nodes = nodes.clone();
        tokio::spawn(async move {
            streams::feed(&nodes, "st-src", PARTITIONS, PER_PARTITION, Duration::from_millis(40)).await;
        })
    };
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(900)).await;
        broker.kill();
        tokio::time::sleep(Duration::from_millis(300)).await;
        tokio::task::block_in_place(|| broker.restart());
    }
    feeder.await.expect("the feeder panicked");
    let want = streams::expected(PARTITIONS, PER_PARTITION);
    streams::assert_exact(&nodes, "st-sink", &want, Duration::from_secs(90)).await;
    stop.store(true, Ordering::Relaxed);
    let stats = runner.await.expect("the runner panicked");
    assert!(stats.cycles > 0, "{stats:?}");

    // The state left is exactly the marker's nothing: every window closed.
    let body = serde_json::json!({ "query_id": query_id, "untouched_for_ms": 0 }).to_string();
    let (status, v) =
        nodes.post("/streams/v1/state/partitions", body.as_bytes(), Duration::from_secs(10)).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(v["partitions"], serde_json::json!([]), "windows left open: {v}");
    println!("streams crash: {stats:?}");
}
