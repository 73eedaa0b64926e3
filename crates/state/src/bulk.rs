//! Filling a large hash table in bulk, as a decode rebuilds one: its items
//! ordered by the bucket each lands in, so the table is written front to
//! back (the name index, [`crate::name_index`]). The partition-id index,
//! once a hash map filled this way, is pages of places now
//! ([`crate::partition_ids`]); the groups' ready sets are bits
//! ([`crate::ready_set`]).

/// The bucket count of a hash table (hashbrown's, std's) that holds
/// `capacity` entries: seven eighths of its buckets, a power of two.
pub fn buckets_of(capacity: usize) -> usize {
    (capacity.saturating_add(capacity / 7)).max(1).next_power_of_two()
}

/// Items fewer than this are inserted as they come: their table fits in
/// cache.
const BUCKET_ORDER_MIN: usize = 1 << 16;

/// Orders `items` by the bucket each lands in (a table of `buckets`
/// buckets, a power of two, that places by the low bits of `hash`), so
/// inserting them writes the table front to back: inserted in their own
/// order, each of 10,000,000 landed at random, a cache miss or two apiece
/// (half of a 10 M partition snapshot's decode). Two passes of a radix sort
/// on the top 16 bits of the bucket number; within a run of buckets that
/// share them the order is left as it was (the run fits in cache). Only
/// the speed of the inserts depends on `buckets` being the table's.
pub fn in_bucket_order<T: Clone>(items: &mut Vec<T>, buckets: usize, hash: impl Fn(&T) -> u64) {
    if items.len() < BUCKET_ORDER_MIN || !buckets.is_power_of_two() {
        return;
    }
    let bits = buckets.trailing_zeros();
    let shift = bits.saturating_sub(16);
    let key = |t: &T| ((hash(t) as usize & (buckets - 1)) >> shift) as u32;
    let mut out = items.clone();
    for pass in [0u32, 8] {
        let digit = |t: &T| ((key(t) >> pass) & 0xff) as usize;
        let mut starts = [0usize; 256];
        for t in items.iter() {
            starts[digit(t)] += 1;
        }
        let mut at = 0;
        for s in starts.iter_mut() {
            let n = *s;
            *s = at;
            at += n;
        }
        for t in items.iter() {
            let d = digit(t);
            out[starts[d]] = t.clone();
            starts[d] += 1;
        }
        std::mem::swap(items, &mut out);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn bucket_order_sorts_by_the_top_bits_of_the_bucket_and_keeps_every_item() {
        let mix = |x: &u64| x.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (x >> 7);
        for buckets in [1usize << 17, 1 << 20, 1 << 25] {
            let items: Vec<u64> = (0..200_000u64).collect();
            let mut ordered = items.clone();
            super::in_bucket_order(&mut ordered, buckets, mix);
            let shift = buckets.trailing_zeros().saturating_sub(16);
            let key = |x: &u64| (mix(x) as usize & (buckets - 1)) >> shift;
            assert!(ordered.windows(2).all(|w| key(&w[0]) <= key(&w[1])), "{buckets}");
            let mut back = ordered.clone();
            back.sort_unstable();
            assert_eq!(back, items, "{buckets}: every item once");
        }
        // Few items, or a bucket count that is no power of two: untouched.
        let mut few: Vec<u64> = (0..100).rev().collect();
        super::in_bucket_order(&mut few, 1 << 20, mix);
        assert_eq!(few, (0..100).rev().collect::<Vec<_>>());
        assert_eq!(super::buckets_of(0), 1);
        assert_eq!(super::buckets_of(7), 8);
        assert_eq!(super::buckets_of(14_680_064), 1 << 24);
    }
}
