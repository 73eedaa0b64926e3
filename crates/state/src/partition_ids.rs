//! Partition id to place (queue id, partition index), as pages of a dense
//! array.
//!
//! Partition ids are handed out in order from one counter per state
//! (`State::next_partition_id`), so the live ones are a few dense runs: a
//! hash map spent 16 bytes a slot and a control byte on them, at a load of
//! one half to seven eighths (28.5 bytes per partition at 10,000,000),
//! where a page of places spends 8 (docs/benchmarks.md, item 41). The
//! pages sit in a map by page number, and a page is freed when its last id
//! goes, so ids handed out and deleted cost nothing, however many. An id
//! left alone in its page pins the page: at most [`PAGE`] × 8 bytes (2 KiB),
//! a bound that a hash map, which never shrinks, does not have either.
//!
//! It decodes from, and its owner encodes it as, the map it replaces.

use std::fmt;
use std::ops::Index;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::hash::IdMap;

/// Ids per page: a power of two, so a place is a shift and a mask.
pub const PAGE: usize = 256;
const SHIFT: u32 = PAGE.trailing_zeros();
/// The queue id no place holds: a page's empty slot.
const EMPTY: u32 = u32::MAX;

/// A partition's place: its queue's id and its index in that queue.
pub type Place = (u32, u32);

#[derive(Clone)]
struct Page {
    places: Box<[Place; PAGE]>,
    /// Slots holding a place.
    live: u32,
}

#[derive(Default, Clone)]
pub struct PartitionIds {
    /// By page number (id / [`PAGE`]); none empty.
    pages: IdMap<Page>,
    len: usize,
}

impl PartitionIds {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn split(id: u64) -> (u64, usize) {
        (id >> SHIFT, id as usize & (PAGE - 1))
    }

    pub fn get(&self, id: &u64) -> Option<&Place> {
        let (page, slot) = Self::split(*id);
        let place = &self.pages.get(&page)?.places[slot];
        (place.0 != EMPTY).then_some(place)
    }

    /// Stores `id`'s place, returning the one it replaces.
    pub fn insert(&mut self, id: u64, place: Place) -> Option<Place> {
        assert!(place.0 != EMPTY, "queue id {EMPTY} is the empty slot's mark");
        let (page, slot) = Self::split(id);
        let p = self.pages.entry(page).or_insert_with(|| Page { places: Box::new([(EMPTY, 0); PAGE]), live: 0 });
        let old = std::mem::replace(&mut p.places[slot], place);
        if old.0 == EMPTY {
            p.live += 1;
            self.len += 1;
            None
        } else {
            Some(old)
        }
    }

    /// Forgets `id`, returning its place; frees its page if it was the
    /// page's last.
    pub fn remove(&mut self, id: &u64) -> Option<Place> {
        let (page, slot) = Self::split(*id);
        let p = self.pages.get_mut(&page)?;
        let old = std::mem::replace(&mut p.places[slot], (EMPTY, 0));
        if old.0 == EMPTY {
            return None;
        }
        p.live -= 1;
        self.len -= 1;
        if p.live == 0 {
            self.pages.remove(&page);
        }
        Some(old)
    }

    /// Every id and its place, in no particular order (pages in their
    /// map's order, ids in order within a page).
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Place)> + '_ {
        self.pages.iter().flat_map(|(&n, p)| {
            p.places
                .iter()
                .enumerate()
                .filter(|(_, place)| place.0 != EMPTY)
                .map(move |(slot, place)| (n << SHIFT | slot as u64, place))
        })
    }

    /// Whether every page's count and the total match the places held.
    pub fn check(&self) -> Result<(), String> {
        let mut total = 0;
        for (n, p) in &self.pages {
            let live = p.places.iter().filter(|place| place.0 != EMPTY).count();
            if live != p.live as usize || live == 0 {
                return Err(format!("partition-id page {n} counts {} places and holds {live}", p.live));
            }
            total += live;
        }
        if total != self.len {
            return Err(format!("partition-id pages hold {total} places against {} counted", self.len));
        }
        Ok(())
    }
}

impl PartialEq for PartitionIds {
    fn eq(&self, other: &PartitionIds) -> bool {
        self.len == other.len && self.iter().all(|(id, place)| other.get(&id) == Some(place))
    }
}

impl Eq for PartitionIds {}

impl fmt::Debug for PartitionIds {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let mut all: Vec<(u64, &Place)> = self.iter().collect();
        all.sort_unstable();
        f.debug_map().entries(all).finish()
    }
}

impl Index<&u64> for PartitionIds {
    type Output = Place;
    fn index(&self, id: &u64) -> &Place {
        self.get(id).unwrap_or_else(|| panic!("partition id {id} is not indexed"))
    }
}

impl FromIterator<(u64, Place)> for PartitionIds {
    fn from_iter<I: IntoIterator<Item = (u64, Place)>>(iter: I) -> Self {
        let mut ids = PartitionIds::default();
        for (id, place) in iter {
            ids.insert(id, place);
        }
        ids
    }
}

impl<'de> Deserialize<'de> for PartitionIds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = PartitionIds;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map of partition ids to places")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut entries: M) -> Result<PartitionIds, M::Error> {
                let mut ids = PartitionIds::default();
                while let Some((id, place)) = entries.next_entry::<u64, Place>()? {
                    if place.0 == EMPTY {
                        return Err(serde::de::Error::custom(format!("partition {id} names queue id {EMPTY}")));
                    }
                    if ids.insert(id, place).is_some() {
                        return Err(serde::de::Error::custom(format!("partition id {id} appears twice")));
                    }
                }
                Ok(ids)
            }
        }
        d.deserialize_map(Entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn holds_what_a_map_holds_and_frees_emptied_pages() {
        let mut ids = PartitionIds::default();
        let mut model = BTreeMap::new();
        // Dense runs, a far one, and removals that empty whole pages.
        let mut seed = 7u64;
        for step in 0..20_000u64 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let id = if step % 97 == 0 { 1 << 40 | (seed >> 60) } else { (seed >> 33) % 3_000 };
            if seed >> 63 == 0 {
                let place = ((seed >> 8) as u32 % 50, step as u32);
                assert_eq!(ids.insert(id, place), model.insert(id, place), "insert {id}");
            } else {
                assert_eq!(ids.remove(&id), model.remove(&id), "remove {id}");
            }
            assert_eq!(ids.get(&id), model.get(&id));
        }
        ids.check().unwrap();
        assert_eq!(ids.len(), model.len());
        let mut held: Vec<(u64, Place)> = ids.iter().map(|(id, p)| (id, *p)).collect();
        held.sort_unstable();
        assert!(held.into_iter().eq(model.iter().map(|(id, p)| (*id, *p))));
        assert_eq!(ids.clone(), ids);
        for id in model.keys() {
            ids.remove(id);
        }
        ids.check().unwrap();
        assert!(ids.is_empty() && ids.pages.is_empty(), "every page freed");
    }

    #[test]
    fn decodes_from_the_map_it_replaces_and_refuses_a_repeated_id() {
        let map: BTreeMap<u64, Place> = [(1, (0, 0)), (2, (0, 1)), (700, (3, 0))].into();
        let ids: PartitionIds = bincode::deserialize(&bincode::serialize(&map).unwrap()).unwrap();
        assert_eq!(ids, map.iter().map(|(id, p)| (*id, *p)).collect::<PartitionIds>());
        assert_eq!(ids[&700], (3, 0));
        let twice: Vec<(u64, Place)> = vec![(1, (0, 0)), (1, (0, 1))];
        let mut bytes = bincode::serialize(&(twice.len() as u64)).unwrap();
        for e in &twice {
            bytes.extend(bincode::serialize(e).unwrap());
        }
        assert!(bincode::deserialize::<PartitionIds>(&bytes).is_err());
    }
}
