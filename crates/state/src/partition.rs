//! A partition: an ordered lane of messages with gapless offsets from 0,
//! the dedup memory of its transaction ids, and one cursor per group.
//!
//! Most partitions of a many-entity workload hold a handful of messages, so
//! a partition stays small: its messages live in a deque sized to what it
//! holds, and the transaction-id index is built only once a partition holds
//! [`INDEX_FROM`] messages (below that, a lookup scans them).

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Serialize};

use crate::cursor::Cursor;

/// Messages a partition holds before its transaction ids get an index.
pub const INDEX_FROM: usize = 8;

/// What the state keeps of one message; the body is on disk at `pos`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MsgMeta {
    pub pos: u64,
    pub len: u32,
    pub created_ms: u64,
    /// Hash of the message's transaction id.
    txn: TxnKey,
}

impl MsgMeta {
    pub fn new(pos: u64, len: u32, created_ms: u64, txn: u128) -> Self {
        MsgMeta { pos, len, created_ms, txn: split(txn) }
    }

    /// Hash of the message's transaction id.
    pub fn txn(&self) -> u128 {
        join(self.txn)
    }
}

/// A transaction-id hash as two words: a `u128` would align `MsgMeta` to
/// 16 bytes and cost 8 more per message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnKey([u64; 2]);

impl std::hash::Hash for TxnKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Already a hash: one word is plenty for a table.
        state.write_u64(self.0[0]);
    }
}

fn split(h: u128) -> TxnKey {
    TxnKey([h as u64, (h >> 64) as u64])
}

fn join(k: TxnKey) -> u128 {
    (k.0[0] as u128) | ((k.0[1] as u128) << 64)
}

/// Hashes a [`TxnKey`], which is already a hash: SipHash over these keys
/// was a measurable share of push time.
#[derive(Default)]
pub struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not reached by `TxnKey`; correct for anything else all the same.
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Transaction-id hash to offset.
pub type TxnIndex = HashMap<TxnKey, u64, BuildHasherDefault<PreHashed>>;

#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    pub id: u64,
    pub name: String,
    /// Offset of `msgs[0]`; offsets below it were dropped by retention.
    pub base: u64,
    pub msgs: VecDeque<MsgMeta>,
    /// Transaction-id hash to its newest offset among the remembered ones
    /// (from `txn_forgotten`), for dedup and ack resolution; kept only
    /// once built (from [`INDEX_FROM`] messages on); boxed so that the many
    /// small partitions pay one word for it.
    txn_index: Option<Box<TxnIndex>>,
    /// Offsets below this have been forgotten by `txn_index`.
    pub txn_forgotten: u64,
    /// One cursor per group of the queue, indexed by group number.
    pub cursors: Vec<Option<Cursor>>,
    pub created_ms: u64,
    pub last_write_ms: u64,
}

/// A copy keeps the message deque's spare room. Partitions are shared with
/// a snapshot being encoded (`Arc`), and the next write to a shared one
/// copies it (`Arc::make_mut`) to push at once: a copy sized to its content
/// would be copied again by that push's growth.
impl Clone for Partition {
    fn clone(&self) -> Self {
        let mut msgs = VecDeque::with_capacity(self.msgs.capacity());
        msgs.extend(self.msgs.iter().copied());
        Partition {
            id: self.id,
            name: self.name.clone(),
            base: self.base,
            msgs,
            txn_index: self.txn_index.clone(),
            txn_forgotten: self.txn_forgotten,
            cursors: self.cursors.clone(),
            created_ms: self.created_ms,
            last_write_ms: self.last_write_ms,
        }
    }
}

impl Partition {
    pub fn new(id: u64, name: String, now_ms: u64) -> Self {
        Partition {
            id,
            name,
            base: 0,
            msgs: VecDeque::with_capacity(1),
            txn_index: None,
            txn_forgotten: 0,
            cursors: Vec::new(),
            created_ms: now_ms,
            last_write_ms: now_ms,
        }
    }

    /// The offset the next push gets.
    pub fn next_offset(&self) -> u64 {
        self.base + self.msgs.len() as u64
    }

    pub fn meta(&self, offset: u64) -> Option<&MsgMeta> {
        offset.checked_sub(self.base).and_then(|i| self.msgs.get(i as usize))
    }

    /// First kept offset created at or after `ms` (or the end).
    pub fn first_at_or_after(&self, ms: u64) -> u64 {
        let i = self.msgs.partition_point(|m| m.created_ms < ms);
        self.base + i as u64
    }

    pub fn cursor(&self, group: u32) -> Option<&Cursor> {
        self.cursors.get(group as usize).and_then(|c| c.as_ref())
    }

    pub fn cursor_mut(&mut self, group: u32) -> Option<&mut Cursor> {
        self.cursors.get_mut(group as usize).and_then(|c| c.as_mut())
    }

    /// Installs a cursor for a group that has none here yet.
    pub fn ensure_cursor(&mut self, group: u32, seed_next: u64) -> &mut Cursor {
        let g = group as usize;
        if self.cursors.len() <= g {
            self.cursors.resize(g + 1, None);
        }
        let base = self.base;
        let c = self.cursors[g].get_or_insert_with(|| super::cursor::Cursor::at(seed_next.max(base)));
        if c.next < base {
            c.next = base;
        }
        c
    }

    /// Forgets transaction ids of messages created before `cutoff_ms`.
    pub fn forget_txns_before(&mut self, cutoff_ms: u64) {
        while let Some(m) = self.meta(self.txn_forgotten.max(self.base)).copied() {
            if m.created_ms >= cutoff_ms {
                break;
            }
            let off = self.txn_forgotten.max(self.base);
            self.forget_txn(m.txn(), off);
            self.txn_forgotten = off + 1;
        }
    }

    fn forget_txn(&mut self, hash: u128, offset: u64) {
        if let Some(index) = self.txn_index.as_mut().filter(|i| i.get(&split(hash)) == Some(&offset)) {
            index.remove(&split(hash));
        }
    }

    /// Appends a message's metadata and remembers its transaction id.
    pub fn push_meta(&mut self, meta: MsgMeta) -> u64 {
        let offset = self.next_offset();
        self.msgs.push_back(meta);
        if let Some(index) = &mut self.txn_index {
            index.insert(meta.txn, offset);
        } else if self.msgs.len() >= INDEX_FROM {
            // Oldest first, so a repeated id ends on its newest offset.
            let mut index = TxnIndex::default();
            for off in self.txn_forgotten.max(self.base)..self.next_offset() {
                let m = self.meta(off).expect("kept offsets");
                index.insert(m.txn, off);
            }
            self.txn_index = Some(Box::new(index));
        }
        offset
    }

    /// The newest remembered offset with this transaction-id hash.
    pub fn remembered_txn(&self, hash: u128) -> Option<u64> {
        if let Some(index) = &self.txn_index {
            return index.get(&split(hash)).copied();
        }
        (self.txn_forgotten.max(self.base)..self.next_offset())
            .rev()
            .find(|off| self.meta(*off).is_some_and(|m| m.txn() == hash))
    }

    /// The offset of a message by transaction-id hash: remembered, or (for
    /// an id already forgotten) by scanning `range`.
    pub fn find_txn(&self, hash: u128, range: std::ops::Range<u64>) -> Option<u64> {
        if let Some(off) = self.remembered_txn(hash) {
            return Some(off);
        }
        range.into_iter().find(|off| self.meta(*off).is_some_and(|m| m.txn() == hash))
    }

    /// Drops messages below `offset` (retention); cursors below follow.
    pub fn drop_before(&mut self, offset: u64) {
        let offset = offset.min(self.next_offset());
        while self.base < offset {
            if let Some(m) = self.msgs.pop_front() {
                self.forget_txn(m.txn(), self.base);
            }
            self.base += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A partition that indexes from its first message: the reference the
    /// scanning small partition must agree with.
    fn always_indexed() -> Partition {
        let mut p = Partition::new(1, "p".into(), 0);
        p.txn_index = Some(Box::default());
        p
    }

    #[test]
    fn scanning_and_indexing_remember_the_same_ids() {
        for seed in 1..=40u64 {
            let (mut small, mut reference) = (Partition::new(1, "p".into(), 0), always_indexed());
            let mut x = seed;
            let mut rand = move |n: u64| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (x >> 33) % n
            };
            let mut now = 0;
            for _ in 0..300 {
                now += rand(3);
                match rand(10) {
                    0 => {
                        let cutoff = now.saturating_sub(rand(20));
                        small.forget_txns_before(cutoff);
                        reference.forget_txns_before(cutoff);
                    }
                    1 => {
                        let to = small.base + rand(4);
                        small.drop_before(to);
                        reference.drop_before(to);
                    }
                    _ => {
                        let meta = MsgMeta::new(now, 1, now, rand(12) as u128 * 0x1_0000_0001);
                        assert_eq!(small.push_meta(meta), reference.push_meta(meta));
                    }
                }
                for h in 0..12u128 {
                    let h = h * 0x1_0000_0001;
                    assert_eq!(small.remembered_txn(h), reference.remembered_txn(h), "seed {seed}, hash {h}");
                }
            }
            assert!(small.txn_index.is_some() || small.msgs.len() < INDEX_FROM);
        }
    }

    #[test]
    fn message_metadata_and_partitions_stay_small() {
        assert_eq!(std::mem::size_of::<MsgMeta>(), 40);
        assert!(std::mem::size_of::<Partition>() <= 144, "{}", std::mem::size_of::<Partition>());
    }
}
