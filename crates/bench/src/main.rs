//! `regina-bench`: drives a Queen-compatible broker over HTTP and prints
//! what it measured. Scenarios:
//!
//! - `push`: closed-loop producers pushing batches to many partitions;
//!   prints messages per second and request latency percentiles.
//! - `fill`: pushes N messages across M partitions as fast as it can (used
//!   to prepare a restart measurement).
//! - `wait-ready`: polls until the broker answers a pop, and prints how long
//!   that took (time to serve again after a restart).
//! - `txn`: steps of one ack + one push + one KV put; steps per second.
//! - `timers`: lateness of fired timers.
//!
//! usage: regina-bench <scenario> [--url U] [--seconds S] [--producers P]
//!        [--batch B] [--payload BYTES] [--partitions N] [--messages N]

mod args;
mod scenarios;
mod stats;
mod timers;
mod txn;

#[tokio::main]
async fn main() {
    let parsed = match args::Args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("regina-bench: {e}\n\n{}", args::USAGE);
            std::process::exit(2);
        }
    };
    let report = match parsed.scenario.as_str() {
        "push" => scenarios::push(&parsed).await,
        "fill" => scenarios::fill(&parsed).await,
        "wait-ready" => scenarios::wait_ready(&parsed).await,
        "txn" => txn::run(&parsed).await,
        "timers" => timers::run(&parsed).await,
        other => Err(format!("unknown scenario {other:?}")),
    };
    match report {
        Ok(json) => println!("{}", serde_json::to_string_pretty(&json).expect("reports encode")),
        Err(e) => {
            eprintln!("regina-bench: {e}");
            std::process::exit(1);
        }
    }
}
