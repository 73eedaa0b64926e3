//! A stable 128-bit hash for transaction ids. Stable means the same on every
//! node and every build, which `std`'s randomly seeded hasher is not. At 128
//! bits an accidental collision inside one partition's dedup window is far
//! less likely than a disk error.

/// The maps and sets of the in-memory indexes (queues, partitions, leases,
/// names): foldhash, seeded per process like `std`'s SipHash (so keys a
/// client chooses cannot be aimed at one bucket), at a fraction of its cost.
/// Nothing may depend on their iteration order.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// See [`FastMap`].
pub type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// FNV-1a over 128 bits.
pub fn txn_hash(s: &str) -> u128 {
    bytes_hash(s.as_bytes())
}

/// FNV-1a over 128 bits of any bytes (a stream cycle's request, for one).
pub fn bytes_hash(bytes: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let mut h = OFFSET;
    for b in bytes {
        h ^= *b as u128;
        h = h.wrapping_mul(PRIME);
    }
    h
}

#[cfg(test)]
mod tests {
    #[test]
    fn differs_and_is_stable() {
        assert_ne!(super::txn_hash("a"), super::txn_hash("b"));
        assert_eq!(super::txn_hash(""), 0x6c62272e07bb014262b821756295c58d);
    }
}
