//! Decoding the large indexes of a snapshot in bulk. serde's own maps and
//! sets start small whatever length the encoding announces (a cautious cap
//! against lengths a damaged input invents) and grow by doubling, rehashing
//! every key at each step. A restart with 10,000,000 partitions spent about
//! a sixth of its time there. These take the announced length (a
//! snapshot's bytes are checksummed before they are decoded), up to a cap.
//! The encoding is unchanged. (The groups' ready sets, once sets read here,
//! are bits: [`crate::ready_set`].)

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};

/// The most elements reserved up front; a longer map or set grows from there.
const RESERVE_MAX: usize = 1 << 24;

fn reserve(hint: Option<usize>) -> usize {
    hint.unwrap_or(0).min(RESERVE_MAX)
}

/// A [`crate::hash::FastMap`] (or any hash map: the partition-id index's
/// [`crate::hash::IdMap`]) sized for its announced length before its first
/// entry, its entries inserted in the order of the buckets they land in
/// ([`in_bucket_order`]).
pub fn fast_map<'de, D, K, V, S>(d: D) -> Result<HashMap<K, V, S>, D::Error>
where
    D: Deserializer<'de>,
    K: Deserialize<'de> + Eq + Hash + Clone,
    V: Deserialize<'de> + Clone,
    S: BuildHasher + Default + Clone,
{
    struct Entries<K, V, S>(PhantomData<(K, V, S)>);
    impl<'de, K, V, S> Visitor<'de> for Entries<K, V, S>
    where
        K: Deserialize<'de> + Eq + Hash + Clone,
        V: Deserialize<'de> + Clone,
        S: BuildHasher + Default + Clone,
    {
        type Value = HashMap<K, V, S>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map")
        }
        fn visit_map<M: MapAccess<'de>>(self, mut entries: M) -> Result<Self::Value, M::Error> {
            let reserved = reserve(entries.size_hint());
            let mut map = HashMap::with_capacity_and_hasher(reserved, S::default());
            let mut read = Vec::with_capacity(reserved);
            while let Some(entry) = entries.next_entry::<K, V>()? {
                read.push(entry);
            }
            map.reserve(read.len());
            let hasher = map.hasher().clone();
            in_bucket_order(&mut read, buckets_of(map.capacity()), |(k, _)| hasher.hash_one(k));
            map.extend(read);
            Ok(map)
        }
    }
    d.deserialize_map(Entries(PhantomData))
}

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
    use serde::{Deserialize, Serialize};

    use crate::hash::FastMap;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Named {
        #[serde(deserialize_with = "super::fast_map")]
        map: FastMap<String, u32>,
    }

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

    #[test]
    fn a_map_past_the_bucket_order_size_decodes_whole() {
        let named = Ids { map: (0..100_000u64).map(|i| (i * 7919, (i as u32, 3))).collect() };
        let bytes = bincode::serialize(&named).unwrap();
        assert_eq!(bincode::deserialize::<Ids>(&bytes).unwrap(), named);
    }

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Ids {
        #[serde(deserialize_with = "super::fast_map")]
        map: FastMap<u64, (u32, u32)>,
    }

    #[test]
    fn bulk_decoding_reads_what_serde_wrote() {
        for n in [0u32, 1, 7, 5_000] {
            let named = Named { map: (0..n).map(|i| (format!("p{i}"), i * 3)).collect() };
            let bytes = bincode::serialize(&named).unwrap();
            assert_eq!(bincode::deserialize::<Named>(&bytes).unwrap(), named, "{n}");
            let text = serde_json::to_string(&named).unwrap();
            assert_eq!(serde_json::from_str::<Named>(&text).unwrap(), named, "{n}");
        }
        // A length the input does not hold fails instead of reserving it all.
        let mut bytes = bincode::serialize(&Named { map: FastMap::default() }).unwrap();
        bytes[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(bincode::deserialize::<Named>(&bytes).is_err());
    }
}
