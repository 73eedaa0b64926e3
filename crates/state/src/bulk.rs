//! Decoding the large indexes of a snapshot in bulk. serde's own maps and
//! sets start small whatever length the encoding announces (a cautious cap
//! against lengths a damaged input invents) and grow by doubling, rehashing
//! every key at each step; a set is built by one insert per element. A
//! restart with 10,000,000 partitions spent about a sixth of its time there.
//! These take the announced length (a snapshot's bytes are checksummed
//! before they are decoded), up to a cap, and build a sorted set from its
//! sorted elements at once. The encoding is unchanged.

use std::collections::BTreeSet;
use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::hash::FastMap;

/// The most elements reserved up front; a longer map or set grows from there.
const RESERVE_MAX: usize = 1 << 24;

fn reserve(hint: Option<usize>) -> usize {
    hint.unwrap_or(0).min(RESERVE_MAX)
}

/// A [`FastMap`] sized for its announced length before its first entry.
pub fn fast_map<'de, D, K, V>(d: D) -> Result<FastMap<K, V>, D::Error>
where
    D: Deserializer<'de>,
    K: Deserialize<'de> + Eq + Hash,
    V: Deserialize<'de>,
{
    struct Entries<K, V>(PhantomData<(K, V)>);
    impl<'de, K: Deserialize<'de> + Eq + Hash, V: Deserialize<'de>> Visitor<'de> for Entries<K, V> {
        type Value = FastMap<K, V>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map")
        }
        fn visit_map<M: MapAccess<'de>>(self, mut entries: M) -> Result<Self::Value, M::Error> {
            let mut map = FastMap::with_capacity_and_hasher(reserve(entries.size_hint()), Default::default());
            while let Some((k, v)) = entries.next_entry()? {
                map.insert(k, v);
            }
            Ok(map)
        }
    }
    d.deserialize_map(Entries(PhantomData))
}

/// A [`BTreeSet`] built from all its elements at once (sorted, as a set
/// encodes them, its nodes are filled in one pass).
pub fn btree_set<'de, D, T>(d: D) -> Result<BTreeSet<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Ord,
{
    struct Elements<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de> + Ord> Visitor<'de> for Elements<T> {
        type Value = BTreeSet<T>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a sequence")
        }
        fn visit_seq<S: SeqAccess<'de>>(self, mut elements: S) -> Result<Self::Value, S::Error> {
            let mut all = Vec::with_capacity(reserve(elements.size_hint()));
            while let Some(e) = elements.next_element()? {
                all.push(e);
            }
            Ok(BTreeSet::from_iter(all))
        }
    }
    d.deserialize_seq(Elements(PhantomData))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde::{Deserialize, Serialize};

    use crate::hash::FastMap;

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct Both {
        #[serde(deserialize_with = "super::fast_map")]
        map: FastMap<String, u32>,
        #[serde(deserialize_with = "super::btree_set")]
        set: BTreeSet<u32>,
    }

    #[test]
    fn bulk_decoding_reads_what_serde_wrote() {
        for n in [0u32, 1, 7, 5_000] {
            let both = Both {
                map: (0..n).map(|i| (format!("p{i}"), i * 3)).collect(),
                set: (0..n).map(|i| i.wrapping_mul(2_654_435_761) % 100_000).collect(),
            };
            let bytes = bincode::serialize(&both).unwrap();
            assert_eq!(bincode::deserialize::<Both>(&bytes).unwrap(), both, "{n}");
            let text = serde_json::to_string(&both).unwrap();
            assert_eq!(serde_json::from_str::<Both>(&text).unwrap(), both, "{n}");
        }
        // A set whose encoding is out of order or repeats still reads as the set.
        let set: Both = serde_json::from_str(r#"{"map":{},"set":[5,1,5,3]}"#).unwrap();
        assert_eq!(set.set, BTreeSet::from([1, 3, 5]));
        // A length the input does not hold fails instead of reserving it all.
        let mut bytes = bincode::serialize(&Both { map: FastMap::default(), set: BTreeSet::new() }).unwrap();
        bytes[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(bincode::deserialize::<Both>(&bytes).is_err());
    }
}
