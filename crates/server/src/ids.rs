//! Ids the leader mints (message, transaction and lease ids): UUID v7 whose
//! random part comes from a per-thread generator seeded once from the
//! operating system. Asking the kernel for randomness per id was a visible
//! share of push time, and these ids need uniqueness, not secrecy.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

use uuid::Uuid;

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

/// A new time-ordered id (UUID v7).
pub fn new_id() -> Uuid {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    let (a, b) = (next_u64().to_le_bytes(), next_u64().to_le_bytes());
    let mut random = [0u8; 10];
    random[..8].copy_from_slice(&a);
    random[8..].copy_from_slice(&b[..2]);
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
}
