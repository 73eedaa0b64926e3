//! An open-addressing table from transaction-id hash to offset, in 8-byte
//! slots: the body of a partition's transaction-id index
//! ([`crate::txn_index::TxnIndex`]).
//!
//! Why not a `HashMap`: a long push keeps every id of the last 15 minutes,
//! so the indexes outgrow the caches within seconds, and a pushed message
//! then paid a lookup that missed (the map's control bytes), an insert that
//! missed again (its 24-byte bucket, elsewhere), and the growth of a table
//! of 25 bytes a slot (docs/benchmarks.md, item 24). Here a slot is 8 bytes,
//! and a lookup and the insert after it touch the same cache line.
//!
//! A slot holds a 32-bit tag of the hash and the offset relative to the
//! table's `origin`, plus one (0 is an empty slot). The tag is not the whole
//! hash, so a tag that matches is confirmed by the caller against the
//! message itself (`is_txn`): only real repeats and about one lookup in
//! 2^(32 - log2(slots)) pay that read. A slot's home is the low bits of its
//! tag, so the table grows and deletes (by shifting back, no tombstones)
//! from the slots alone.

/// Most slots filled before the table doubles: linear probing stays short
/// (about 2.5 slots for a missing id, all in one or two cache lines).
const MAX_LOAD_NUM: usize = 3;
const MAX_LOAD_DEN: usize = 4;
const MIN_SLOTS: usize = 16;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TxnTable {
    slots: Vec<u64>,
    len: usize,
    /// Offsets are stored relative to this, in 32 bits.
    origin: u64,
}

/// An offset too far past the table's origin to be stored; the caller
/// rebuilds the table from a newer origin.
#[derive(Debug, PartialEq, Eq)]
pub struct OutOfRange;

/// The 32-bit tag of a transaction-id hash: both words mixed (the hash's
/// low word alone is weak), the product's high bits kept.
fn tag_of(hash: u128) -> u32 {
    let folded = (hash as u64) ^ ((hash >> 64) as u64).rotate_left(32);
    (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32
}

fn slot_tag(slot: u64) -> u32 {
    (slot >> 32) as u32
}

impl TxnTable {
    /// An empty table with room for `n` ids before it grows, storing
    /// offsets from `origin` on.
    pub fn with_capacity(n: usize, origin: u64) -> Self {
        let wanted = (n * MAX_LOAD_DEN).div_ceil(MAX_LOAD_NUM).max(MIN_SLOTS).next_power_of_two();
        TxnTable { slots: vec![0; wanted], len: 0, origin }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    fn slot_for(&self, tag: u32, offset: u64) -> Result<u64, OutOfRange> {
        let rel = offset.checked_sub(self.origin).and_then(|r| r.checked_add(1)).ok_or(OutOfRange)?;
        let rel = u32::try_from(rel).map_err(|_| OutOfRange)?;
        Ok((u64::from(tag) << 32) | u64::from(rel))
    }

    fn offset_of(&self, slot: u64) -> u64 {
        self.origin + (slot & 0xFFFF_FFFF) - 1
    }

    /// The offset stored for `hash`, confirmed by `is_txn(offset)` (whether
    /// the message there has this hash).
    pub fn get(&self, hash: u128, is_txn: impl Fn(u64) -> bool) -> Option<u64> {
        if self.slots.is_empty() {
            return None;
        }
        let tag = tag_of(hash);
        let mut i = tag as usize & self.mask();
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                return None;
            }
            if slot_tag(slot) == tag && is_txn(self.offset_of(slot)) {
                return Some(self.offset_of(slot));
            }
            i = (i + 1) & self.mask();
        }
    }

    /// Stores `offset` for `hash`, replacing the offset an earlier message
    /// with the same hash held (`is_txn` confirms a matching tag).
    pub fn insert(&mut self, hash: u128, offset: u64, is_txn: impl Fn(u64) -> bool) -> Result<(), OutOfRange> {
        let tag = tag_of(hash);
        let new = self.slot_for(tag, offset)?;
        if (self.len + 1) * MAX_LOAD_DEN > self.slots.len() * MAX_LOAD_NUM {
            self.grow();
        }
        let mut i = tag as usize & self.mask();
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                self.slots[i] = new;
                self.len += 1;
                return Ok(());
            }
            if slot_tag(slot) == tag && is_txn(self.offset_of(slot)) {
                self.slots[i] = new;
                return Ok(());
            }
            i = (i + 1) & self.mask();
        }
    }

    /// Removes `hash`'s entry if it holds exactly `offset` (a newer message
    /// with the same id keeps it). Whether one was removed.
    pub fn remove(&mut self, hash: u128, offset: u64) -> bool {
        if self.slots.is_empty() {
            return false;
        }
        let Ok(wanted) = self.slot_for(tag_of(hash), offset) else {
            return false;
        };
        let mask = self.mask();
        let mut i = slot_tag(wanted) as usize & mask;
        loop {
            match self.slots[i] {
                0 => return false,
                slot if slot == wanted => break,
                _ => i = (i + 1) & mask,
            }
        }
        // Shift back the run after the hole: a slot moves into it unless
        // its home lies cyclically in (hole, slot].
        let mut hole = i;
        let mut j = (i + 1) & mask;
        while self.slots[j] != 0 {
            let home = slot_tag(self.slots[j]) as usize & mask;
            let stays = if hole <= j { hole < home && home <= j } else { hole < home || home <= j };
            if !stays {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.slots[hole] = 0;
        self.len -= 1;
        true
    }

    fn grow(&mut self) {
        let doubled = vec![0; (self.slots.len() * 2).max(MIN_SLOTS)];
        let old = std::mem::replace(&mut self.slots, doubled);
        let mask = self.mask();
        for slot in old.into_iter().filter(|s| *s != 0) {
            let mut i = slot_tag(slot) as usize & mask;
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = slot;
        }
    }

    /// Every stored offset with its tag, in slot order.
    pub fn entries(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.slots.iter().filter(|s| **s != 0).map(|s| (slot_tag(*s), self.offset_of(*s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Hashes whose tags share their low bits, so they share a home in any
    /// table of up to 2^16 slots and probe through each other.
    fn crowded(n: u64) -> u128 {
        // Search for hashes with tag & 0xFFFF == 0x1234 (a few per 65,536).
        let mut found = 0;
        let mut h = 0u128;
        loop {
            h += 1;
            if tag_of(h) & 0xFFFF == 0x1234 {
                if found == n {
                    return h;
                }
                found += 1;
            }
        }
    }

    /// The table against a map, under random inserts, repeats and removals,
    /// with ids drawn from a few crowded hashes and many plain ones.
    #[test]
    fn the_table_agrees_with_a_map() {
        let crowd: Vec<u128> = (0..6).map(crowded).collect();
        for seed in 1..=30u64 {
            let mut x = seed;
            let mut rand = move |n: u64| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (x >> 33) % n
            };
            let mut table = TxnTable::with_capacity(0, 1000);
            let mut model: HashMap<u128, u64> = HashMap::new();
            // offset -> hash of the message stored there.
            let mut messages: HashMap<u64, u128> = HashMap::new();
            let mut next = 1000u64;
            for _ in 0..3000 {
                let hash = if rand(3) == 0 { crowd[rand(6) as usize] } else { u128::from(rand(400)) << 70 | 7 };
                if rand(4) == 0 && next > 1000 {
                    // As a partition forgets: a stored message's own hash
                    // and offset, which its id may or may not still hold.
                    let offset = 1000 + rand(next - 1000);
                    let hash = messages[&offset];
                    let removed = table.remove(hash, offset);
                    assert_eq!(removed, model.get(&hash) == Some(&offset), "seed {seed}");
                    if removed {
                        model.remove(&hash);
                    }
                } else {
                    messages.insert(next, hash);
                    table.insert(hash, next, |o| messages.get(&o) == Some(&hash)).unwrap();
                    model.insert(hash, next);
                    next += 1;
                }
                assert_eq!(table.len(), model.len(), "seed {seed}");
                for probe in crowd.iter().copied().chain((0..400u128).map(|h| h << 70 | 7)).step_by(7) {
                    let got = table.get(probe, |o| messages.get(&o) == Some(&probe));
                    assert_eq!(got, model.get(&probe).copied(), "seed {seed}");
                }
            }
            let mut stored: Vec<u64> = table.entries().map(|(_, o)| o).collect();
            let mut expected: Vec<u64> = model.values().copied().collect();
            stored.sort_unstable();
            expected.sort_unstable();
            assert_eq!(stored, expected, "seed {seed}");
        }
    }

    #[test]
    fn offsets_past_the_32_bit_range_are_refused_not_wrapped() {
        let mut table = TxnTable::with_capacity(4, 10);
        assert_eq!(table.insert(1, 9, |_| false), Err(OutOfRange));
        assert_eq!(table.insert(1, 10 + u64::from(u32::MAX), |_| false), Err(OutOfRange));
        table.insert(1, 10 + u64::from(u32::MAX) - 1, |_| false).unwrap();
        assert_eq!(table.get(1, |o| o == 10 + u64::from(u32::MAX) - 1), Some(10 + u64::from(u32::MAX) - 1));
        assert!(!table.remove(1, 9));
        assert!(table.remove(1, 10 + u64::from(u32::MAX) - 1));
        assert!(table.is_empty());
    }

    #[test]
    fn a_table_grows_from_empty_and_keeps_every_id() {
        let mut table = TxnTable::default();
        assert_eq!(table.get(5, |_| true), None);
        assert!(!table.remove(5, 0));
        for i in 0..10_000u64 {
            table.insert(u128::from(i) * 0x1_0000_0001, i, |o| o == i).unwrap();
        }
        for i in 0..10_000u64 {
            assert_eq!(table.get(u128::from(i) * 0x1_0000_0001, |o| o == i), Some(i));
        }
        assert_eq!(table.len(), 10_000);
        assert!(table.slots.len() * MAX_LOAD_NUM >= 10_000 * MAX_LOAD_DEN);
    }
}
