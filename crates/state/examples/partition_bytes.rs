//! Creates partitions of one queue in memory, one 256-byte message each
//! (as `regina-bench scale` does, through `State::apply` alone), and
//! prints the resident bytes the state grew by per partition, step by
//! step: the state's share of the `partitions` target, without the log,
//! the bodies' ring or HTTP.
//!
//! ```sh
//! cargo run --release -p regina-state --example partition_bytes -- [partitions] [step]
//! ```

// The state machine reads no clock (its time comes in the entry).
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use regina_state::command::{Command, Entry, PushCmd, PushItem};
use regina_state::state::State;
use std::sync::Arc;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PER_ENTRY: u64 = 1_000;

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).expect("resident pages");
    pages * 4096
}

fn entry(first: u64, payload: &[u8]) -> Entry {
    let items = (first..first + PER_ENTRY)
        .map(|n| PushItem {
            queue: "scale".into(),
            partition: format!("p{n}"),
            transaction_id: format!("t{n}"),
            trace_id: None,
            message_id: u128::from(n).to_le_bytes(),
            payload: payload.to_vec(),
        })
        .collect();
    Entry { now_ms: 1_700_000_000_000 + first / 100, command: Command::Push(Arc::new(PushCmd { items })) }
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>().expect("a count"));
    let total = args.next().unwrap_or(10_000_000);
    let step = args.next().unwrap_or(1_000_000).max(PER_ENTRY);
    let payload = vec![b'x'; 256];
    let mut state = State::new();
    let before = rss_bytes();
    let mut made = 0;
    while made < total {
        drop(std::hint::black_box(state.apply(&entry(made, &payload))));
        made += PER_ENTRY;
        if made % step == 0 || made >= total {
            let grown = rss_bytes().saturating_sub(before);
            println!("{made:>11} partitions  {:6.1} bytes each", grown as f64 / made as f64);
        }
    }
}
