//! `regina-bench`: drives a Queen-compatible broker over HTTP and prints
//! what it measured. Scenarios:
//!
//! - `push`: closed-loop producers pushing batches to many partitions;
//!   prints messages per second and request latency percentiles.
//! - `consume`: preloads messages, then consumer groups pop and ack them;
//!   messages per second, pop/ack latency, and a loss/duplicate/order check.
//! - `e2e`: open-loop producers at `--rate` with long-polling consumers;
//!   latency from the intended send time to consumption, plus the same check.
//! - `kv`: a get/put mix (`--ratio` reads) with `expect` and `incr`.
//! - `partitions`: creates N partitions with one message each; creation rate
//!   and, with `--pid`, broker resident memory per partition.
//! - `scale`: grows one queue through the partition counts of `--steps`;
//!   at each step the creation rate, (with `--pid`) memory per partition,
//!   and the latency of `--pops` wildcard pops, of pop+ack, and of pops on
//!   named partitions.
//! - `fill`: pushes N messages across M partitions as fast as it can (used
//!   to prepare a restart measurement).
//! - `wait-ready`: polls until the broker answers a pop, and prints how long
//!   that took (time to serve again after a restart).
//! - `txn`: steps of one ack + one push + one KV put; steps per second.
//! - `timers`: lateness of fired timers.
//! - `jobs`: enqueues `--pending` jobs (batched), then `--workers` workers
//!   each claim and complete one job at a time; jobs per second, claim and
//!   complete latency, and broker resident memory per pending job.
//!
//! - `redis-push`, `redis-consume`: the same shapes against Redis streams
//!   (`--url redis://HOST:PORT`): pipelined `XADD`s; `XREADGROUP` + `XACK`
//!   (see `redis`).
//!
//! `chart` is not a scenario: it reads reports collected from earlier runs
//! (`--input`) and draws SVG charts of them into `--out`; the input format
//! is described in `chart::runs`.
//!
//! Progress goes to stderr once a second; the JSON report to stdout. Every
//! `--tag key=value` adds a string field to the report (how the broker was
//! run, e.g. `fsync=off`). A failed delivery check exits 1 after printing
//! the report.
//!
//! usage: see `args::USAGE`.

use regina_bench::{args, run};

#[tokio::main]
async fn main() {
    let parsed = match args::Args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("regina-bench: {e}\n\n{}", args::USAGE);
            std::process::exit(2);
        }
    };
    let report = run(&parsed).await;
    match report {
        Ok(json) => println!("{}", serde_json::to_string_pretty(&json).expect("reports encode")),
        Err(e) => {
            eprintln!("regina-bench: {e}");
            std::process::exit(1);
        }
    }
}
