//! The job workload of `jobs_race` against a three-node cluster, its
//! workers spread over every node, while the leader is SIGKILLed and later
//! restarted. Afterwards the same lease and token rules hold, nothing
//! enqueued is lost, and every node holds the same state.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/job_workload.rs"]
mod job_workload;
mod support;

use std::time::Duration;

use cluster::{assert_states_identical, Cluster, CONVERGE};

const JOBS_PER_SCOPE: usize = 80;
const WORKERS: usize = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_rules_hold_across_a_leader_kill() {
    let mut cluster = Cluster::start(3);
    let bases: Vec<String> = cluster.nodes.iter().map(|n| n.base()).collect();
    let c = job_workload::client();
    job_workload::prepare(&c, &bases, JOBS_PER_SCOPE).await;

    let run = {
        let bases = bases.clone();
        tokio::spawn(async move { job_workload::run(&bases, WORKERS, 0xFA11, Duration::from_secs(120)).await })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    let victim = cluster.wait_for_leader(CONVERGE);
    cluster.node(victim).kill();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    cluster.node(victim).start();
    let ledger = run.await.expect("the workload panicked");

    cluster.wait_converged(CONVERGE);
    let sc = support::client();
    assert_states_identical(&sc, &cluster).await;
    for node in &cluster.nodes {
        let jobs = job_workload::final_jobs(&c, &node.base()).await;
        job_workload::audit(&ledger, &jobs, JOBS_PER_SCOPE);
    }
    println!("jobs failover: leader {victim} killed; {} leases, {} ops", ledger.leases.len(), ledger.ops);
}
