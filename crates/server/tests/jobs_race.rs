//! Many workers over HTTP claim, renew, complete, fail, release and let
//! leases run out, concurrently, on one broker. Afterwards no job had two
//! live leases at once, tokens rose strictly per scope, every job ended
//! completed exactly once (by its latest lease) or failed after its
//! attempts, and no stale lease ever completed a job.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

#[path = "support/job_workload.rs"]
mod job_workload;
mod support;

use std::time::Duration;

use support::paused;
use support::paused::PausedNode;

const JOBS_PER_SCOPE: usize = 120;
const WORKERS: usize = 12;

#[test]
fn concurrent_workers_keep_every_lease_and_token_rule() {
    paused::run(async {
        let broker = PausedNode::start().await;
        let bases = vec![broker.base()];
        let c = job_workload::client();
        job_workload::prepare(&c, &bases, JOBS_PER_SCOPE).await;
        let ledger = job_workload::run(&bases, WORKERS, 0x5EED, Duration::from_secs(90)).await;
        let jobs = job_workload::final_jobs(&c, &bases[0]).await;
        job_workload::audit(&ledger, &jobs, JOBS_PER_SCOPE);
        let completed = jobs.values().filter(|j| j["state"] == "completed").count();
        println!(
            "jobs race: {} leases, {} completed, {} failed, {} stale completes refused, {} ops",
            ledger.leases.len(),
            completed,
            jobs.len() - completed,
            ledger.stale_answers.len(),
            ledger.ops
        );
        assert!(completed > 0 && !ledger.stale_answers.is_empty(), "the workload exercised completes and stale leases");
    });
}
