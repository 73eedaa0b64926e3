//! A queue's partitions, in shared chunks.
//!
//! A snapshot copies the state and encodes the copy outside the apply lock
//! (`regina_consensus`'s `build_snapshot`). Partitions are shared with the
//! copy (`Arc`), but a plain `Vec<Arc<Partition>>` still costs one
//! reference count per partition to copy, each in its own allocation: at
//! 10,000,000 partitions that is ten million cache misses under the lock,
//! which is why such states were encoded under it instead (2 s at 10 M,
//! docs/benchmarks.md). Here every [`CHUNK`] partitions sit in one shared
//! chunk, so a copy costs one count per chunk, and the first write to a
//! partition after a snapshot copies its chunk (at most [`CHUNK`] pointers)
//! before the partition itself (`Arc::make_mut` on both).
//!
//! Every chunk but the last is full, so a partition's place is one shift.
//! It encodes as the plain sequence a `Vec<Arc<Partition>>` encoded to, so
//! the snapshot format is unchanged.

use std::fmt;
use std::ops::Index;
use std::sync::Arc;

use serde::de::{SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::partition::Partition;

/// A partition shared with the copies a snapshot encodes: a count and no
/// weak count (`triomphe`), 8 bytes of each partition's allocation fewer
/// than `std::sync::Arc`'s two counts.
pub use triomphe::Arc as PArc;

/// Partitions per chunk: a power of two, so a place is a shift and a mask.
/// The first write after a snapshot copies at most this many pointers.
pub const CHUNK: usize = 1024;
const SHIFT: u32 = CHUNK.trailing_zeros();

/// The partitions in order, chunk after chunk.
pub type Iter<'a> = std::iter::FlatMap<
    std::slice::Iter<'a, Arc<Vec<PArc<Partition>>>>,
    std::slice::Iter<'a, PArc<Partition>>,
    fn(&'a Arc<Vec<PArc<Partition>>>) -> std::slice::Iter<'a, PArc<Partition>>,
>;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Partitions {
    /// Each exactly [`CHUNK`] long but the last, which is never empty.
    chunks: Vec<Arc<Vec<PArc<Partition>>>>,
    len: usize,
}

impl Partitions {
    pub fn new() -> Self {
        Partitions::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, i: usize) -> Option<&PArc<Partition>> {
        self.chunks.get(i >> SHIFT)?.get(i & (CHUNK - 1))
    }

    /// Partition `i`, its chunk unshared first (the caller then unshares
    /// the partition itself with `PArc::make_mut`).
    pub fn get_mut(&mut self, i: usize) -> Option<&mut PArc<Partition>> {
        if i >= self.len {
            return None;
        }
        Arc::make_mut(&mut self.chunks[i >> SHIFT]).get_mut(i & (CHUNK - 1))
    }

    pub fn push(&mut self, p: PArc<Partition>) {
        match self.chunks.last_mut() {
            Some(last) if last.len() < CHUNK => Arc::make_mut(last).push(p),
            _ => self.chunks.push(Arc::new(vec![p])),
        }
        self.len += 1;
    }

    pub fn iter(&self) -> Iter<'_> {
        Self::walk(&self.chunks)
    }

    /// The partitions from `start` on, without walking the chunks before
    /// its own.
    pub fn iter_from(&self, start: usize) -> std::iter::Skip<Iter<'_>> {
        let from = self.chunks.get(start >> SHIFT..).unwrap_or_default();
        Self::walk(from).skip(start & (CHUNK - 1))
    }

    fn walk(chunks: &[Arc<Vec<PArc<Partition>>>]) -> Iter<'_> {
        chunks.iter().flat_map(|c| c.iter())
    }

    /// Every partition, every chunk unshared.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut PArc<Partition>> + '_ {
        self.chunks.iter_mut().flat_map(|c| Arc::make_mut(c).iter_mut())
    }

    /// Whether the chunks hold what `len` says: full chunks, a non-empty
    /// last one.
    pub fn check(&self) -> Result<(), String> {
        let counted: usize = self.chunks.iter().map(|c| c.len()).sum();
        let full = self.chunks.iter().rev().skip(1).all(|c| c.len() == CHUNK);
        let last = self.chunks.last().is_none_or(|c| !c.is_empty() && c.len() <= CHUNK);
        if counted != self.len || !full || !last {
            return Err(format!("partition chunks hold {counted} against {} counted, or a chunk is short", self.len));
        }
        Ok(())
    }
}

impl Index<usize> for Partitions {
    type Output = PArc<Partition>;
    fn index(&self, i: usize) -> &PArc<Partition> {
        self.get(i).unwrap_or_else(|| panic!("partition {i} of {}", self.len))
    }
}

impl<'a> IntoIterator for &'a Partitions {
    type Item = &'a PArc<Partition>;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl FromIterator<PArc<Partition>> for Partitions {
    fn from_iter<I: IntoIterator<Item = PArc<Partition>>>(iter: I) -> Self {
        let mut all = Partitions::new();
        for p in iter {
            all.push(p);
        }
        all
    }
}

impl Serialize for Partitions {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len))?;
        for p in self.iter() {
            seq.serialize_element(&**p)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for Partitions {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Each;
        impl<'de> Visitor<'de> for Each {
            type Value = Partitions;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a sequence of partitions")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Partitions, A::Error> {
                let mut all = Partitions::new();
                while let Some(p) = seq.next_element::<Partition>()? {
                    all.push(PArc::new(p));
                }
                Ok(all)
            }
        }
        d.deserialize_seq(Each)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(n: usize) -> Partitions {
        (0..n).map(|i| PArc::new(Partition::new(i as u64 + 1, format!("p{i}"), 0))).collect()
    }

    #[test]
    fn places_and_iteration_agree_across_chunks() {
        for n in [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 7] {
            let all = named(n);
            all.check().unwrap();
            assert_eq!(all.len(), n);
            assert_eq!(all.iter().count(), n);
            for (i, p) in all.iter().enumerate() {
                assert_eq!(*all[i].name, format!("p{i}"));
                assert!(PArc::ptr_eq(p, &all[i]));
            }
            assert!(all.get(n).is_none());
            for start in [0, 1, CHUNK - 1, CHUNK, n.saturating_sub(1), n, n + 5] {
                let from: Vec<_> = all.iter_from(start).map(|p| p.name.clone()).collect();
                let want: Vec<_> = all.iter().skip(start).map(|p| p.name.clone()).collect();
                assert_eq!(from, want, "{n} from {start}");
            }
        }
    }

    #[test]
    fn a_copy_keeps_what_it_took_while_the_original_changes() {
        let mut live = named(2 * CHUNK + 3);
        let copy = live.clone();
        PArc::make_mut(live.get_mut(5).unwrap()).last_write_ms = 9;
        PArc::make_mut(live.get_mut(2 * CHUNK + 1).unwrap()).last_write_ms = 7;
        live.push(PArc::new(Partition::new(99, "new".into(), 0)));
        assert_eq!((live[5].last_write_ms, copy[5].last_write_ms), (9, 0));
        assert_eq!((live[2 * CHUNK + 1].last_write_ms, copy[2 * CHUNK + 1].last_write_ms), (7, 0));
        assert_eq!((live.len(), copy.len()), (2 * CHUNK + 4, 2 * CHUNK + 3));
        // Untouched partitions, and the untouched middle chunk, stay shared.
        assert!(PArc::ptr_eq(&live[6], &copy[6]));
        assert!(Arc::ptr_eq(&live.chunks[1], &copy.chunks[1]));
        assert!(!Arc::ptr_eq(&live.chunks[0], &copy.chunks[0]));
        live.check().unwrap();
        copy.check().unwrap();
    }

    #[test]
    fn encodes_as_a_plain_sequence() {
        let all = named(CHUNK + 2);
        let plain: Vec<Partition> = all.iter().map(|p| Partition::clone(p)).collect();
        let bytes = bincode::serialize(&all).unwrap();
        assert_eq!(bytes, bincode::serialize(&plain).unwrap());
        let back: Partitions = bincode::deserialize(&bytes).unwrap();
        assert_eq!(back, all);
        back.check().unwrap();
    }
}
