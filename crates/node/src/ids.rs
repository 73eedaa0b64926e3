//! Ids the leader mints (message, transaction and lease ids): UUID v7 whose
//! random part comes from a per-thread generator seeded once from the
//! operating system. Asking the kernel for randomness per id was a visible
//! share of push time, and these ids need uniqueness, not secrecy.
//!
//! Ids rise strictly across the whole process: the millisecond and the
//! 12-bit `rand_a` field together are a counter that never goes back (the
//! monotonic method of RFC 9562 §6.2). Messages of one push share their
//! `createdAt`, and the clients' stream SDKs order a partition's messages by
//! (`createdAt`, id), so ids minted in order must sort in order.
//!
//! The millisecond comes from the node's [`Clock`], which the node installs
//! here when it opens ([`use_clock`]): one minter per process, because ids
//! must rise across all of its Raft groups.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use uuid::Uuid;

use crate::clock::{Clock, SystemClock};

/// The clock ids take their millisecond from; the wall clock until a node
/// installs its own.
static CLOCK: RwLock<Option<Arc<dyn Clock>>> = parking_lot::const_rwlock(None);

/// Makes ids take their time from `clock` from now on. Ids still never go
/// back: a clock behind the last id only slows the millisecond down.
pub fn use_clock(clock: Arc<dyn Clock>) {
    *CLOCK.write() = Some(clock);
}

fn now_ms() -> u64 {
    match &*CLOCK.read() {
        Some(clock) => clock.now_ms(),
        None => SystemClock.now_ms(),
    }
}

thread_local! {
    static STATE: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    let b = Uuid::new_v4().into_bytes();
    u64::from_le_bytes(b[..8].try_into().expect("8 bytes")) | 1
}

/// splitmix64: fast and well spread; seeded per thread from the OS.
fn next_u64() -> u64 {
    STATE.with(|s| {
        let x = s.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        s.set(x);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    })
}

/// The last (millisecond << 12 | sequence) handed out.
static LAST: AtomicU64 = AtomicU64::new(0);

/// The next (millisecond, sequence) pair, above every one handed out before.
fn next_stamp() -> u64 {
    let floor = now_ms() << 12;
    let mut prev = LAST.load(Ordering::Relaxed);
    loop {
        let next = floor.max(prev + 1);
        match LAST.compare_exchange_weak(prev, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => prev = seen,
        }
    }
}

/// A new time-ordered id (UUID v7), above every id minted before it here.
pub fn new_id() -> Uuid {
    let stamp = next_stamp();
    let (ms, seq) = (stamp >> 12, (stamp & 0xfff) as u16);
    let b = next_u64().to_le_bytes();
    let mut random = [0u8; 10];
    // rand_a (12 bits, after the version nibble) carries the sequence.
    random[0] = (seq >> 8) as u8 & 0x0f;
    random[1] = seq as u8;
    random[2..].copy_from_slice(&b);
    uuid::Builder::from_unix_timestamp_millis(ms, &random).into_uuid()
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_v7_and_distinct() {
        let ids: std::collections::HashSet<_> = (0..10_000).map(|_| super::new_id()).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(ids.iter().all(|u| u.get_version_num() == 7));
    }

    #[test]
    fn ids_minted_in_order_sort_in_order() {
        let ids: Vec<String> = (0..20_000).map(|_| super::new_id().to_string()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "an id sorted before the one minted ahead of it");
    }
}
