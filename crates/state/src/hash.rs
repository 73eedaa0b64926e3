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

/// Keys the state hands out in sequence: the partition-id index's pages, by
/// page number ([`crate::partition_ids`], [`PlaceHasher`]), and the state v5
/// encoding's map of partition ids.
pub type IdMap<V> = std::collections::HashMap<u64, V, std::hash::BuildHasherDefault<PlaceHasher>>;

/// A hash for ids the state assigns one after another: the id itself in
/// the low bits, which place an entry in the table, so ids created
/// together sit together and a run of creations (or an index rebuilt from
/// a snapshot, in id order) writes the table in sequence instead of one
/// cache miss per id (a fifth of a 10 M-partition restart's re-applied
/// log was that one store, docs/benchmarks.md, item 29). The top seven
/// bits, which the table compares first, are mixed, so neighbours still
/// tell apart. Clients do not choose these ids, so none can be aimed at
/// one bucket.
#[derive(Default, Clone, Copy)]
pub struct PlaceHasher(u64);

impl std::hash::Hasher for PlaceHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only ids are hashed here; anything else still hashes, byte by byte.
        for b in bytes {
            self.write_u64(self.0.rotate_left(8) ^ *b as u64);
        }
    }

    #[inline]
    fn write_u64(&mut self, id: u64) {
        const TOP_SEVEN: u64 = !0 << 57;
        self.0 = id ^ (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) & TOP_SEVEN);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

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
    /// Ids in sequence land in neighbouring buckets (their low bits are
    /// the id's), yet their tags differ; and the index answers for every
    /// id, beside each other, far apart, or past the 57 bits kept whole.
    #[test]
    fn the_id_index_places_ids_in_sequence_and_finds_them_all() {
        use std::hash::BuildHasher;
        let build = std::hash::BuildHasherDefault::<super::PlaceHasher>::default();
        let hashes: Vec<u64> = (1000..1064u64).map(|id| build.hash_one(id)).collect();
        let mask = (1u64 << 57) - 1;
        assert!(hashes.iter().zip(1000u64..).all(|(h, id)| h & mask == id));
        let tags: std::collections::HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert!(tags.len() > 32, "64 ids in sequence share {} tags", tags.len());
        let ids: Vec<u64> =
            (0..50_000u64).chain((1..2_000).map(|i| i << 40)).chain([u64::MAX, 1 << 57, 3 << 57]).collect();
        let mut index = super::IdMap::<u64>::default();
        for &id in &ids {
            index.insert(id, id ^ 7);
        }
        for &id in ids.iter().step_by(3) {
            index.remove(&id);
        }
        for (i, &id) in ids.iter().enumerate() {
            let expected = if i % 3 == 0 { None } else { Some(id ^ 7) };
            assert_eq!(index.get(&id).copied(), expected, "id {id}");
        }
    }

    #[test]
    fn differs_and_is_stable() {
        assert_ne!(super::txn_hash("a"), super::txn_hash("b"));
        assert_eq!(super::txn_hash(""), 0x6c62272e07bb014262b821756295c58d);
    }
}
