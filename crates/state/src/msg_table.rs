//! A partition's message table: a deque of [`MsgMeta`] whose full chunks
//! are shared.
//!
//! A snapshot shares every partition with the state it copies (`Arc`), and
//! the next write to a shared partition copies it (`Arc::make_mut`). With
//! the messages in one deque that copy was the whole table, and with every
//! partition written within a second of a snapshot's start, applying
//! copied the whole message table then: the push rate fell to a third or
//! less for a second or two after every snapshot's start
//! (docs/benchmarks.md, "What limits the rest").
//! Here every [`CHUNK`] messages are sealed into a shared, immutable chunk,
//! so a copy shares the chunks and copies only the open tail (fewer than
//! [`CHUNK`] messages).
//!
//! Most partitions of a many-entity workload hold one message (or none):
//! such a table holds it inline, in the 40 bytes the table takes in the
//! partition, and allocates nothing. A second message moves the table to
//! an allocation of its own (the deque and the sealed chunks), and
//! retention that leaves one message or none moves it back.
//!
//! It encodes as the plain sequence a `VecDeque<MsgMeta>` encoded to, so
//! the snapshot format is unchanged.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

use serde::de::{SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::partition::MsgMeta;
use crate::snapshot_holes::{take_as_hole, Chunk};

/// Messages per sealed chunk: a copy of a partition copies at most this
/// many (40 KiB), and a lookup by position stays one division.
pub const CHUNK: usize = 1024;

#[derive(Debug, Default)]
pub struct MsgTable(Repr);

/// As large as a [`MsgMeta`]: the variant lives in the message's niche
/// byte (a test holds the size).
#[derive(Debug, Default)]
enum Repr {
    #[default]
    Empty,
    One(MsgMeta),
    Many(Box<Many>),
}

#[derive(Debug)]
struct Many {
    /// Full chunks, oldest first; `None` until the first is sealed.
    sealed: Option<Box<Sealed>>,
    /// The newest messages, fewer than [`CHUNK`] after every push.
    tail: VecDeque<MsgMeta>,
}

#[derive(Debug, Clone)]
struct Sealed {
    /// Each exactly [`CHUNK`] long.
    chunks: VecDeque<Arc<Chunk>>,
    /// Messages already popped from the first chunk.
    head: usize,
}

impl Sealed {
    fn len(&self) -> usize {
        self.chunks.len() * CHUNK - self.head
    }
}

impl Many {
    fn sealed_len(&self) -> usize {
        self.sealed.as_ref().map_or(0, |s| s.len())
    }

    fn len(&self) -> usize {
        self.sealed_len() + self.tail.len()
    }

    fn get(&self, i: usize) -> Option<&MsgMeta> {
        let sealed_len = self.sealed_len();
        if i >= sealed_len {
            return self.tail.get(i - sealed_len);
        }
        let s = self.sealed.as_ref()?;
        let at = s.head + i;
        s.chunks.get(at / CHUNK).and_then(|c| c.metas.get(at % CHUNK))
    }

    fn push_back(&mut self, meta: MsgMeta) {
        self.tail.push_back(meta);
        if self.tail.len() == CHUNK {
            // The next tail is a full chunk's size at once: grown from
            // nothing by doubling it would be copied ten times per chunk.
            let full = std::mem::replace(&mut self.tail, VecDeque::with_capacity(CHUNK));
            let chunk = Arc::new(Chunk::new(Vec::from(full)));
            match &mut self.sealed {
                Some(s) => s.chunks.push_back(chunk),
                None => self.sealed = Some(Box::new(Sealed { chunks: VecDeque::from([chunk]), head: 0 })),
            }
        }
        debug_assert!(self.tail.len() < CHUNK);
    }

    fn pop_front(&mut self) -> Option<MsgMeta> {
        let Some(s) = &mut self.sealed else {
            return self.tail.pop_front();
        };
        let meta = s.chunks.front().map(|c| c.metas[s.head])?;
        s.head += 1;
        if s.head == CHUNK {
            s.chunks.pop_front();
            s.head = 0;
            if s.chunks.is_empty() {
                self.sealed = None;
            }
        }
        Some(meta)
    }
}

/// Shares the sealed chunks and copies the tail, keeping its spare room: a
/// copy sized to its content would be copied again by the next push's
/// growth.
impl Clone for Many {
    fn clone(&self) -> Self {
        let mut tail = VecDeque::with_capacity(self.tail.capacity());
        tail.extend(self.tail.iter().copied());
        Many { sealed: self.sealed.clone(), tail }
    }
}

impl Clone for MsgTable {
    fn clone(&self) -> Self {
        MsgTable(match &self.0 {
            Repr::Empty => Repr::Empty,
            Repr::One(m) => Repr::One(*m),
            Repr::Many(many) => Repr::Many(Box::new(Many::clone(many))),
        })
    }
}

impl MsgTable {
    /// Room for `n` messages: none is allocated for one or none.
    pub fn with_capacity(n: usize) -> MsgTable {
        if n <= 1 {
            return MsgTable(Repr::Empty);
        }
        MsgTable(Repr::Many(Box::new(Many { sealed: None, tail: VecDeque::with_capacity(n.min(CHUNK)) })))
    }

    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Empty => 0,
            Repr::One(_) => 1,
            Repr::Many(many) => many.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Messages in sealed chunks (the rest are in the open tail).
    #[cfg(test)]
    fn sealed_len(&self) -> usize {
        self.sealed().map_or(0, Sealed::len)
    }

    /// The sealed chunks, where there are any.
    fn sealed(&self) -> Option<&Sealed> {
        match &self.0 {
            Repr::Many(many) => many.sealed.as_deref(),
            _ => None,
        }
    }

    /// The messages in no sealed chunk, oldest first, as at most two runs:
    /// the inline message, or the open tail's two halves.
    fn unsealed(&self) -> [&[MsgMeta]; 2] {
        match &self.0 {
            Repr::Empty => [&[], &[]],
            Repr::One(m) => [std::slice::from_ref(m), &[]],
            Repr::Many(many) => {
                let (front, back) = many.tail.as_slices();
                [front, back]
            }
        }
    }

    pub fn get(&self, i: usize) -> Option<&MsgMeta> {
        match &self.0 {
            Repr::Empty => None,
            Repr::One(m) => (i == 0).then_some(m),
            Repr::Many(many) => many.get(i),
        }
    }

    pub fn push_back(&mut self, meta: MsgMeta) {
        match &mut self.0 {
            Repr::Empty => self.0 = Repr::One(meta),
            Repr::One(first) => {
                let tail = VecDeque::from([*first, meta]);
                self.0 = Repr::Many(Box::new(Many { sealed: None, tail }));
            }
            Repr::Many(many) => many.push_back(meta),
        }
    }

    pub fn pop_front(&mut self) -> Option<MsgMeta> {
        match &mut self.0 {
            Repr::Empty => None,
            Repr::One(m) => {
                let m = *m;
                self.0 = Repr::Empty;
                Some(m)
            }
            Repr::Many(many) => {
                let popped = many.pop_front();
                // Back inline once retention leaves one message or none
                // (and no sealed chunk: one would hold 1,024).
                if many.sealed.is_none() && many.tail.len() <= 1 {
                    let rest = many.tail.pop_front();
                    self.0 = rest.map_or(Repr::Empty, Repr::One);
                }
                popped
            }
        }
    }

    /// The number of leading messages for which `pred` holds (which must
    /// hold for a prefix only), as `VecDeque::partition_point`.
    pub fn partition_point(&self, mut pred: impl FnMut(&MsgMeta) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.get(mid).expect("within the table")) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The messages as contiguous runs, oldest first: the one walk of the
    /// table, which [`MsgTable::iter`] flattens. The encoding loops over
    /// each run directly: through nested iterator adapters each message
    /// cost a few checks more, and a snapshot walks every message twice
    /// (its length counted, then written).
    pub fn runs(&self) -> impl Iterator<Item = &[MsgMeta]> + '_ {
        let sealed = self
            .sealed()
            .into_iter()
            .flat_map(|s| s.chunks.iter().enumerate().map(move |(i, c)| &c.metas[if i == 0 { s.head } else { 0 }..]));
        sealed.chain(self.unsealed())
    }

    pub fn iter(&self) -> impl Iterator<Item = &MsgMeta> + '_ {
        self.runs().flatten()
    }
}

/// The same messages in the same order, however they are chunked (a table
/// decoded from a snapshot starts its first chunk at 0).
impl PartialEq for MsgTable {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for MsgTable {}

impl Serialize for MsgTable {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.len()))?;
        if let Some(s) = self.sealed() {
            for (i, chunk) in s.chunks.iter().enumerate() {
                let from = if i == 0 { s.head } else { 0 };
                // Left out of a holed encoding (`snapshot_holes`), whose
                // writer stores the chunk once and fills its place.
                if !take_as_hole(chunk, from) {
                    for m in &chunk.metas[from..] {
                        seq.serialize_element(m)?;
                    }
                }
            }
        }
        for m in self.unsealed().into_iter().flatten() {
            seq.serialize_element(m)?;
        }
        seq.end()
    }
}

impl<'de> Deserialize<'de> for MsgTable {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Messages;
        impl<'de> Visitor<'de> for Messages {
            type Value = MsgTable;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sequence of message metadata")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<MsgTable, A::Error> {
                // Sized to what it holds, as the deque it replaces was:
                // most partitions hold a message or two.
                let mut table = MsgTable::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(m) = seq.next_element()? {
                    table.push_back(m);
                }
                Ok(table)
            }
        }
        deserializer.deserialize_seq(Messages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(i: u64) -> MsgMeta {
        MsgMeta::new(i, 1, i * 10, u128::from(i))
    }

    /// Against a plain deque, across chunk edges: pushes, pops, positions,
    /// searches, copies and the encoding.
    #[test]
    fn behaves_as_a_deque() {
        let mut table = MsgTable::with_capacity(1);
        let mut reference: VecDeque<MsgMeta> = VecDeque::new();
        let mut next = 0u64;
        let mut rng = 0x2545_F491_4F6C_DD1Du64;
        for round in 0..6000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let pushes = (rng % 700) as usize;
            for _ in 0..pushes {
                table.push_back(meta(next));
                reference.push_back(meta(next));
                next += 1;
            }
            let pops = ((rng >> 20) % 650) as usize;
            for _ in 0..pops {
                assert_eq!(table.pop_front(), reference.pop_front());
            }
            assert_eq!(table.len(), reference.len());
            for i in [0, 1, CHUNK - 1, CHUNK, reference.len().saturating_sub(1), reference.len()] {
                assert_eq!(table.get(i), reference.get(i), "round {round}, position {i}");
            }
            let cut = next * 10 / 2;
            assert_eq!(
                table.partition_point(|m| m.created_ms < cut),
                reference.partition_point(|m| m.created_ms < cut)
            );
            if round % 25 == 0 {
                assert!(table.runs().flatten().eq(reference.iter()), "the runs, joined, are the messages");
            }
            if round % 500 == 0 {
                assert!(table.iter().eq(reference.iter()));
                let copy = table.clone();
                assert_eq!(copy, table);
                let bytes = bincode::serialize(&table).expect("encodes");
                assert_eq!(bytes, bincode::serialize(&reference).expect("encodes"), "the deque's encoding");
                let back: MsgTable = bincode::deserialize(&bytes).expect("decodes");
                assert_eq!(back, table);
                let mut filled = crate::snapshot_holes::FilledHoles::default();
                crate::snapshot_holes::serialize_holed(&table, &mut filled).expect("encodes");
                assert_eq!(filled.bytes, bytes, "holes filled give the plain encoding");
                assert_eq!(filled.holes, table.sealed_len().div_ceil(CHUNK));
            }
        }
    }

    /// One message or none is held inline, in the table's own 40 bytes;
    /// a second moves it out, and retention down to one moves it back.
    #[test]
    fn one_message_is_held_inline() {
        assert_eq!(std::mem::size_of::<MsgTable>(), std::mem::size_of::<MsgMeta>());
        let inline = |t: &MsgTable| !matches!(t.0, Repr::Many(_));
        let mut table = MsgTable::with_capacity(1);
        assert!(inline(&table) && table.is_empty());
        table.push_back(meta(0));
        assert!(inline(&table));
        assert_eq!((table.len(), table.get(0), table.get(1)), (1, Some(&meta(0)), None));
        assert_eq!(table.iter().count(), 1);
        table.push_back(meta(1));
        table.push_back(meta(2));
        assert!(!inline(&table));
        assert_eq!(table.pop_front(), Some(meta(0)));
        assert!(!inline(&table), "two messages stay in the deque");
        assert_eq!(table.pop_front(), Some(meta(1)));
        assert!(inline(&table), "retention down to one message brings it inline");
        assert_eq!(table.get(0), Some(&meta(2)));
        assert_eq!(table.pop_front(), Some(meta(2)));
        assert_eq!(table.pop_front(), None);
        assert!(table.is_empty());
        let bytes = bincode::serialize(&{
            let mut t = MsgTable::default();
            t.push_back(meta(7));
            t
        })
        .expect("encodes");
        assert_eq!(bytes, bincode::serialize(&VecDeque::from([meta(7)])).expect("encodes"));
    }

    /// A copy shares every sealed chunk: writing to it copies at most the
    /// tail, and the original keeps what it held.
    #[test]
    fn a_copy_shares_its_sealed_chunks() {
        let mut table = MsgTable::with_capacity(1);
        for i in 0..(3 * CHUNK + 5) as u64 {
            table.push_back(meta(i));
        }
        let mut copy = table.clone();
        let sealed = |t: &MsgTable| t.sealed().cloned().expect("3,077 messages fill sealed chunks");
        let shared = |a: &MsgTable, b: &MsgTable| {
            let (a, b) = (sealed(a), sealed(b));
            a.chunks.iter().zip(&b.chunks).filter(|(x, y)| Arc::ptr_eq(x, y)).count()
        };
        assert_eq!(shared(&table, &copy), 3);
        copy.push_back(meta(99_999));
        copy.pop_front();
        assert_eq!(shared(&table, &copy), 3, "writes to a copy leave the sealed chunks shared");
        assert_eq!(table.len(), 3 * CHUNK + 5);
        assert_eq!(table.get(0), Some(&meta(0)));
        assert_eq!(copy.get(0), Some(&meta(1)));
    }
}
