//! Applies push entries to a state in memory and prints the time spent in
//! `State::apply` per message, window by window as the state grows: the
//! cost of applying alone, without HTTP, the log or the disk, on one thread.
//!
//! ```sh
//! cargo run --release -p regina-state --example apply_push -- [messages] [window]
//! ```
//!
//! Entries of 100 messages of 256 bytes, into 1,000 partitions of one
//! queue, transaction ids as `regina-bench push` makes them, 3,300 entries
//! (330,000 messages) a second of state time, a sustained push's rate.
//! Defaults: 30,000,000 messages, a line per 5,000,000 (docs/benchmarks.md,
//! item 24).

// The state machine reads no clock (its time comes in the entry); this
// harness only times it from outside.
#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use regina_state::command::{Command, Entry, PushCmd, PushItem};
use regina_state::state::State;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BATCH: u64 = 100;
const PARTITIONS: u64 = 1_000;

fn entry(seq: u64, entry_no: u64, payload: &[u8]) -> Entry {
    let items = (seq..seq + BATCH)
        .map(|n| PushItem {
            queue: "bench".into(),
            partition: format!("p{}", (n * 7 + entry_no) % PARTITIONS),
            transaction_id: format!("b{}-{}", n % 16, n),
            trace_id: None,
            message_id: u128::from(n).to_le_bytes(),
            payload: payload.to_vec(),
        })
        .collect();
    Entry { now_ms: 1_700_000_000_000 + entry_no * 10 / 33, command: Command::Push(Arc::new(PushCmd { items })) }
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>().expect("a count"));
    let total = args.next().unwrap_or(30_000_000);
    let window = args.next().unwrap_or(5_000_000).max(BATCH);
    let payload = vec![b'x'; 256];
    let mut state = State::new();
    let (mut seq, mut entry_no, mut in_window) = (0, 0, 0);
    let (mut spent, mut all) = (Duration::ZERO, Duration::ZERO);
    while seq < total {
        let entry = entry(seq, entry_no, &payload);
        let started = Instant::now();
        let applied = state.apply(&entry);
        spent += started.elapsed();
        drop(std::hint::black_box(applied));
        seq += BATCH;
        entry_no += 1;
        in_window += BATCH;
        if in_window >= window || seq >= total {
            println!("{seq:>11} messages  {:7.1} ns per message applied", spent.as_nanos() as f64 / in_window as f64);
            all += spent;
            (spent, in_window) = (Duration::ZERO, 0);
        }
    }
    println!("applied {seq} messages in {:.2} s", all.as_secs_f64());
}
