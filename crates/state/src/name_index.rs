//! A queue's partition-name index: each partition's place, found by its
//! name. A slot holds the place and 32 bits of the name's hash, not the
//! name: the name is read from the partition when the hash matches. A map
//! keyed by a copy of every name cost about 70 bytes per partition and, on
//! every restart, one string allocation and one insert into a table of
//! 33-byte slots per partition (at 10,000,000 partitions the decode's
//! largest cost). Slots of 8 bytes are rebuilt from the partitions after a
//! snapshot is decoded; the hash kept in the slot lets the table grow
//! without reading a single partition.

use std::fmt;
use std::hash::BuildHasher;

use hashbrown::HashTable;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};

use crate::partitions::Partitions;

/// A place and its name's 32-bit hash.
#[derive(Clone, Copy)]
struct Slot {
    place: u32,
    hash: u32,
}

#[derive(Clone, Default)]
pub struct NameIndex {
    slots: HashTable<Slot>,
    /// Seeded per process, as the other indexes ([`crate::hash::FastMap`]).
    hasher: foldhash::fast::RandomState,
}

/// The table's 64-bit hash from a slot's 32: the low bits pick the bucket
/// and the top seven the tag, so the multiply spreads the 32 over both.
fn spread(hash: u32) -> u64 {
    (hash as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl NameIndex {
    fn hash(&self, name: &str) -> u32 {
        let h = self.hasher.hash_one(name);
        (h ^ (h >> 32)) as u32
    }

    /// How many partitions are indexed.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The place of the partition named `name` among `partitions`.
    pub fn get(&self, name: &str, partitions: &Partitions) -> Option<u32> {
        let hash = self.hash(name);
        let named = |s: &Slot| s.hash == hash && partitions.get(s.place as usize).is_some_and(|p| *p.name == *name);
        self.slots.find(spread(hash), named).map(|s| s.place)
    }

    /// Indexes the partition at `place`, whose name is not yet indexed.
    pub fn insert(&mut self, place: u32, partitions: &Partitions) {
        let name = partitions.get(place as usize).expect("an indexed partition exists").name.as_ref();
        debug_assert!(self.get(name, partitions).is_none(), "partition {name} indexed twice");
        let hash = self.hash(name);
        self.slots.insert_unique(spread(hash), Slot { place, hash }, |s| spread(s.hash));
    }

    /// The index of every partition in `partitions`, built in one pass (a
    /// decoded snapshot's). Refuses two partitions of one name.
    pub fn of(partitions: &Partitions) -> Result<NameIndex, String> {
        let mut index = NameIndex { slots: HashTable::with_capacity(partitions.len()), ..NameIndex::default() };
        let mut slots: Vec<Slot> =
            partitions.iter().enumerate().map(|(i, p)| Slot { place: i as u32, hash: index.hash(&p.name) }).collect();
        // Inserted in bucket order, the table is written front to back.
        crate::bulk::in_bucket_order(&mut slots, crate::bulk::buckets_of(index.slots.capacity()), |s| spread(s.hash));
        let name = |s: &Slot| partitions.get(s.place as usize).map_or("", |p| &*p.name);
        for slot in slots {
            let same = |s: &Slot| s.hash == slot.hash && name(s) == name(&slot);
            match index.slots.entry(spread(slot.hash), same, |s| spread(s.hash)) {
                hashbrown::hash_table::Entry::Occupied(_) => {
                    return Err(format!("two partitions are named {:?}", name(&slot)));
                }
                hashbrown::hash_table::Entry::Vacant(v) => {
                    v.insert(slot);
                }
            }
        }
        Ok(index)
    }

    /// Every indexed place, in no order.
    pub fn places(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots.iter().map(|s| s.place)
    }
}

impl fmt::Debug for NameIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NameIndex({} partitions)", self.len())
    }
}

/// Two indexes are equal when they hold the same places (the names are
/// the partitions', compared with them).
impl PartialEq for NameIndex {
    fn eq(&self, other: &Self) -> bool {
        let sorted = |i: &NameIndex| {
            let mut places: Vec<u32> = i.places().collect();
            places.sort_unstable();
            places
        };
        self.len() == other.len() && sorted(self) == sorted(other)
    }
}

impl Eq for NameIndex {}

/// Reads the name index as the encoding holds it (a map of every
/// partition's name to its place, written from the partitions) without
/// keeping it: the index is rebuilt from the partitions ([`NameIndex::of`])
/// once the state is decoded. Names are borrowed from the input where the
/// decoder allows, so nothing is allocated per entry.
pub fn skip_encoded<'de, D: Deserializer<'de>>(d: D) -> Result<NameIndex, D::Error> {
    struct Entries;
    impl<'de> Visitor<'de> for Entries {
        type Value = NameIndex;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a map of partition names to places")
        }
        fn visit_map<M: MapAccess<'de>>(self, mut entries: M) -> Result<NameIndex, M::Error> {
            while entries.next_entry::<AnyName, u32>()?.is_some() {}
            Ok(NameIndex::default())
        }
    }
    d.deserialize_map(Entries)
}

/// A name read and dropped.
struct AnyName;

impl<'de> Deserialize<'de> for AnyName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<AnyName, D::Error> {
        struct Name;
        impl<'de> Visitor<'de> for Name {
            type Value = AnyName;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a partition name")
            }
            fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<AnyName, E> {
                Ok(AnyName)
            }
        }
        d.deserialize_str(Name)
    }
}

#[cfg(test)]
mod tests {
    use crate::partitions::PArc;

    use super::*;
    use crate::partition::Partition;

    fn partitions(names: &[String]) -> Partitions {
        let mut ps = Partitions::new();
        for (i, n) in names.iter().enumerate() {
            ps.push(PArc::new(Partition::new(i as u64 + 1, n.clone(), 0)));
        }
        ps
    }

    #[test]
    fn finds_every_partition_by_name_as_it_grows() {
        let names: Vec<String> = (0..5_000).map(|i| format!("p{i}")).collect();
        let ps = partitions(&names);
        let mut index = NameIndex::default();
        for i in 0..names.len() {
            index.insert(i as u32, &ps);
            // Growth rehashes from the slots: earlier names stay found.
            if i % 997 == 0 {
                for (j, n) in names[..=i].iter().enumerate() {
                    assert_eq!(index.get(n, &ps), Some(j as u32), "{n} after {i} inserts");
                }
            }
        }
        assert_eq!(index.len(), names.len());
        assert_eq!(index.get("p5000", &ps), None);
        assert_eq!(index.get("", &ps), None);
        let built = NameIndex::of(&ps).unwrap();
        assert_eq!(built, index);
        for (j, n) in names.iter().enumerate() {
            assert_eq!(built.get(n, &ps), Some(j as u32));
        }
    }

    #[test]
    fn a_name_is_found_only_where_the_partition_has_it() {
        // Equal 32-bit hashes are possible: the name itself decides.
        let ps = partitions(&["a".into(), "b".into()]);
        let index = NameIndex::of(&ps).unwrap();
        let mut other = ps.clone();
        PArc::make_mut(other.get_mut(1).unwrap()).name = "c".into();
        assert_eq!(index.get("b", &ps), Some(1));
        assert_eq!(index.get("b", &other), None, "a slot whose partition has another name is no match");
    }

    #[test]
    fn two_partitions_of_one_name_are_refused() {
        let ps = partitions(&["a".into(), "b".into(), "a".into()]);
        assert!(NameIndex::of(&ps).unwrap_err().contains("\"a\""));
        // Past the size inserted in bucket order, too.
        let mut names: Vec<String> = (0..70_000).map(|i| format!("p{i}")).collect();
        let many = NameIndex::of(&partitions(&names)).unwrap();
        assert_eq!(many.len(), names.len());
        assert_eq!(many.get("p69999", &partitions(&names)), Some(69_999));
        names.push("p123".into());
        assert!(NameIndex::of(&partitions(&names)).unwrap_err().contains("\"p123\""));
    }

    #[test]
    fn the_encoded_map_is_read_and_dropped() {
        #[derive(serde::Serialize)]
        struct Out {
            names: std::collections::BTreeMap<String, u32>,
            after: u64,
        }
        #[derive(serde::Deserialize)]
        struct In {
            #[serde(deserialize_with = "skip_encoded")]
            names: NameIndex,
            after: u64,
        }
        let out = Out { names: (0..100).map(|i| (format!("p{i}"), i)).collect(), after: 7 };
        let bytes = bincode::serialize(&out).unwrap();
        let back: In = bincode::deserialize(&bytes).unwrap();
        assert!(back.names.is_empty());
        assert_eq!(back.after, 7, "the map was consumed whole");
        let text = serde_json::to_string(&out).unwrap();
        assert_eq!(serde_json::from_str::<In>(&text).unwrap().after, 7);
        // A cut map fails.
        assert!(bincode::deserialize::<In>(&bytes[..bytes.len() - 12]).is_err());
    }
}
