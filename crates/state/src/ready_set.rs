//! A consumer group's ready set ([`crate::queue::Group::ready`]): partition
//! numbers, as bits.
//!
//! A snapshot copies the state under the apply lock and encodes the copy
//! outside it, and every group's ready set is copied whole. As a
//! `BTreeSet<u32>` a set of 10,000,000 partitions (a group that has not
//! yet read them) is about a million tree nodes, each allocated again by
//! the copy. As bits it is 1.25 MB, copied at memory speed, and 40 times
//! smaller besides. A second level (one bit per non-zero word) keeps
//! finding the next member cheap when few of many partitions are ready.
//!
//! It encodes as the sorted sequence a `BTreeSet<u32>` encoded to, so the
//! snapshot format is unchanged.

use std::fmt;

use serde::de::{SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Clone, Default)]
pub struct ReadySet {
    /// Bit `b` of word `w`: partition `64 * w + b` is in the set.
    words: Vec<u64>,
    /// Bit `b` of word `s`: `words[64 * s + b]` is not zero.
    summary: Vec<u64>,
    len: usize,
}

impl ReadySet {
    pub fn new() -> Self {
        ReadySet::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn contains(&self, p: u32) -> bool {
        let (w, bit) = place(p);
        self.words.get(w).is_some_and(|word| word & bit != 0)
    }

    /// Adds `p`; whether it was new.
    pub fn insert(&mut self, p: u32) -> bool {
        let (w, bit) = place(p);
        if w >= self.words.len() {
            self.words.resize(w + 1, 0);
            self.summary.resize(w / 64 + 1, 0);
        }
        if self.words[w] & bit != 0 {
            return false;
        }
        self.words[w] |= bit;
        self.summary[w / 64] |= 1 << (w % 64);
        self.len += 1;
        true
    }

    /// Takes `p` out; whether it was there.
    pub fn remove(&mut self, p: u32) -> bool {
        let (w, bit) = place(p);
        let Some(word) = self.words.get_mut(w) else { return false };
        if *word & bit == 0 {
            return false;
        }
        *word &= !bit;
        if *word == 0 {
            self.summary[w / 64] &= !(1 << (w % 64));
        }
        self.len -= 1;
        true
    }

    pub fn clear(&mut self) {
        self.words.clear();
        self.summary.clear();
        self.len = 0;
    }

    /// The smallest member at or after `at`.
    pub fn first_from(&self, at: u32) -> Option<u32> {
        let (w, _) = place(at);
        let here = self.words.get(w)? & (u64::MAX << (at % 64));
        if here != 0 {
            return Some(member(w, here));
        }
        // The next non-zero word after `w`, by the summary.
        let next = w + 1;
        let mut s = next / 64;
        let mut mask = if next % 64 == 0 { u64::MAX } else { u64::MAX << (next % 64) };
        while let Some(bits) = self.summary.get(s) {
            let bits = bits & mask;
            if bits != 0 {
                let w = s * 64 + bits.trailing_zeros() as usize;
                return Some(member(w, self.words[w]));
            }
            s += 1;
            mask = u64::MAX;
        }
        None
    }

    /// Members in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let mut at = Some(0u32);
        std::iter::from_fn(move || {
            let found = self.first_from(at?)?;
            at = found.checked_add(1);
            Some(found)
        })
    }
}

/// (word, bit) of partition `p`.
fn place(p: u32) -> (usize, u64) {
    (p as usize / 64, 1 << (p % 64))
}

/// The lowest member held in non-zero word `w`.
fn member(w: usize, bits: u64) -> u32 {
    // Words are indexed by u32 / 64, so this fits.
    (w * 64) as u32 + bits.trailing_zeros()
}

impl Extend<u32> for ReadySet {
    fn extend<I: IntoIterator<Item = u32>>(&mut self, members: I) {
        for p in members {
            self.insert(p);
        }
    }
}

impl FromIterator<u32> for ReadySet {
    fn from_iter<I: IntoIterator<Item = u32>>(members: I) -> Self {
        let mut set = ReadySet::new();
        set.extend(members);
        set
    }
}

/// Equal when the members are: trailing empty words do not count.
impl PartialEq for ReadySet {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for ReadySet {}

impl fmt::Debug for ReadySet {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl Serialize for ReadySet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len))?;
        for p in self.iter() {
            seq.serialize_element(&p)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for ReadySet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = ReadySet;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a sequence of partition numbers")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ReadySet, A::Error> {
                let mut set = ReadySet::new();
                while let Some(p) = seq.next_element::<u32>()? {
                    set.insert(p);
                }
                Ok(set)
            }
        }
        d.deserialize_seq(Members)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// A small deterministic generator: the tests need spread, not quality.
    fn next(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    #[test]
    fn agrees_with_a_sorted_set_under_inserts_removals_and_searches() {
        for (seed, span) in [(1u64, 100u32), (7, 5_000), (42, 300_000), (99, 3_000_000)] {
            let mut seed = seed;
            let (mut bits, mut model) = (ReadySet::new(), BTreeSet::new());
            for step in 0..20_000 {
                // Values cluster near 64-bit and 4,096-bit edges and the top.
                let raw = next(&mut seed);
                let p = match raw % 4 {
                    0 => (raw >> 8) as u32 % span,
                    1 => {
                        ((raw >> 8) as u32 % (span / 64 + 1)).saturating_mul(64).saturating_sub((raw >> 40) as u32 % 2)
                    }
                    2 => ((raw >> 8) as u32 % (span / 4096 + 1)).saturating_mul(4096),
                    _ => span - 1 - (raw >> 8) as u32 % 3,
                };
                match next(&mut seed) % 5 {
                    0 | 1 => assert_eq!(bits.insert(p), model.insert(p), "insert {p} at step {step}"),
                    2 => assert_eq!(bits.remove(p), model.remove(&p), "remove {p} at step {step}"),
                    3 => assert_eq!(bits.first_from(p), model.range(p..).next().copied(), "from {p} at {step}"),
                    _ => assert_eq!(bits.contains(p), model.contains(&p), "contains {p} at step {step}"),
                }
                assert_eq!(bits.len(), model.len());
            }
            assert!(bits.iter().eq(model.iter().copied()));
            assert_eq!(bits, model.iter().copied().collect::<ReadySet>());
            bits.clear();
            assert!(bits.is_empty() && bits.first_from(0).is_none() && bits.iter().next().is_none());
        }
    }

    #[test]
    fn encodes_as_a_sorted_set_did() {
        let model: BTreeSet<u32> = [0, 5, 63, 64, 4_095, 4_096, 1_000_000, 9_999_999].into();
        let bits: ReadySet = model.iter().copied().collect();
        let bytes = bincode::serialize(&bits).unwrap();
        assert_eq!(bytes, bincode::serialize(&model).unwrap());
        assert_eq!(bincode::deserialize::<ReadySet>(&bytes).unwrap(), bits);
        // Equality ignores empty words left behind by removals.
        let mut emptied = bits.clone();
        emptied.insert(2_000_000);
        emptied.remove(2_000_000);
        assert_eq!(emptied, bits);
        assert_eq!(format!("{bits:?}"), format!("{model:?}"));
    }
}
