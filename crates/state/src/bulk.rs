//! Decoding the large indexes of a snapshot in bulk. serde's own maps and
//! sets start small whatever length the encoding announces (a cautious cap
//! against lengths a damaged input invents) and grow by doubling, rehashing
//! every key at each step. A restart with 10,000,000 partitions spent about
//! a sixth of its time there. These take the announced length (a
//! snapshot's bytes are checksummed before they are decoded), up to a cap.
//! The encoding is unchanged. (The groups' ready sets, once sets read here,
//! are bits: [`crate::ready_set`].)

use std::fmt;
use std::hash::Hash;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};

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
