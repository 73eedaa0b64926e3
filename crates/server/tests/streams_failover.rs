//! Query state survives a leader failover: a stream runs a tumbling
//! count-and-sum against every node of a three-node cluster while the
//! leader is SIGKILLed and later restarted. Every window is emitted exactly
//! once with exact totals, and every node holds the same state, stream
//! queries included.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/streams.rs"]
mod streams;
mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cluster::{assert_states_identical, group_state, Cluster, CONVERGE};
use streams::Nodes;

const PARTITIONS: usize = 4;
const PER_PARTITION: u64 = 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_state_survives_a_leader_failover_with_exact_totals() {
    let mut cluster = Cluster::start(3);
    let bases: Vec<String> = cluster.nodes.iter().map(|n| n.base()).collect();
    let nodes = Arc::new(Nodes::new(bases));
    let query_id = streams::prepare(&nodes, "fo-src", "fo-sink", "count-sum").await;

    let stop = Arc::new(AtomicBool::new(false));
    let runner =
        tokio::spawn(streams::run(nodes.clone(), "fo-src".into(), "fo-sink".into(), query_id.clone(), stop.clone()));
    let feeder = {
        let nodes = nodes.clone();
        tokio::spawn(async move {
            streams::feed(&nodes, "fo-src", PARTITIONS, PER_PARTITION, Duration::from_millis(60)).await;
        })
    };
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let victim = cluster.wait_for_leader(CONVERGE);
    cluster.node(victim).kill();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    tokio::task::block_in_place(|| cluster.node(victim).start());
    feeder.await.expect("the feeder panicked");

    let want = streams::expected(PARTITIONS, PER_PARTITION);
    streams::assert_exact(&nodes, "fo-sink", &want, Duration::from_secs(120)).await;
    stop.store(true, Ordering::Relaxed);
    let stats = runner.await.expect("the runner panicked");

    cluster.wait_converged(CONVERGE);
    let c = support::client();
    assert_states_identical(&c, &cluster).await;
    let (_, state) = group_state(&c, &cluster.nodes[0], 0).await;
    let q = state.streams.query(&query_id).expect("every node knows the query");
    assert_eq!(q.row_count(), 0, "every window closed");
    println!("streams failover: leader {victim} killed; {stats:?}");
}
