//! A partition: an ordered lane of messages with gapless offsets from 0,
//! how far its transaction ids are remembered, and one cursor per group.
//!
//! Most partitions of a many-entity workload hold a handful of messages, so
//! a partition stays small: its messages live in a table sized to what it
//! holds. A partition shared with a snapshot copies little when next
//! written: the message table's full chunks stay shared ([`MsgTable`]),
//! and the index from transaction id to offset is not part of it but lives
//! beside the partitions ([`crate::txn_index::TxnIndexes`]); a snapshot
//! neither copies nor stores an index.

use serde::{Deserialize, Serialize};

use crate::cursor::{Cursor, Cursors};
use crate::msg_table::MsgTable;
use crate::txn_index::{RetiredIndex, TxnIndex, TxnKey};
use crate::txn_table::TxnTable;

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
    /// One byte of the padding given one valid value, so an enum holding
    /// a `MsgMeta` or a pointer is no larger than a `MsgMeta`
    /// ([`crate::msg_table::MsgTable`] keeps a single message inline).
    /// Not encoded.
    #[serde(skip)]
    niche: Niche,
}

/// A type with one value that fills one byte: the spare byte values are a
/// niche an enum around [`MsgMeta`] stores its variant in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(u8)]
enum Niche {
    #[default]
    Only = 0,
}

impl MsgMeta {
    pub fn new(pos: u64, len: u32, created_ms: u64, txn: u128) -> Self {
        MsgMeta { pos, len, created_ms, txn: TxnKey::from(txn), niche: Niche::Only }
    }

    /// Hash of the message's transaction id.
    pub fn txn(&self) -> u128 {
        self.txn.into()
    }
}

/// Partitions are shared with a snapshot being encoded (`Arc`), and the
/// next write to a shared one copies it (`Arc::make_mut`): that copy shares
/// the message table's sealed chunks and copies its open tail
/// ([`MsgTable`]), and carries no transaction-id index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    pub id: u64,
    /// Boxed, not a `String`: a word less in every partition.
    pub name: Box<str>,
    /// Offset of `msgs[0]`; offsets below it were dropped by retention.
    pub base: u64,
    /// In shared chunks, so a copy costs at most a chunk ([`MsgTable`]).
    pub msgs: MsgTable,
    /// Where format 6 stored the transaction-id index: now always written
    /// empty, and an index read from an older snapshot is dropped (the
    /// index is rebuilt from `msgs`).
    retired_txn_index: RetiredIndex,
    /// Transaction ids of offsets below this are forgotten: no longer a
    /// duplicate's original, and resolved only by scanning a lease.
    pub txn_forgotten: u64,
    /// One cursor per group of the queue, indexed by group number.
    pub cursors: Cursors,
    pub created_ms: u64,
    pub last_write_ms: u64,
}

impl Partition {
    pub fn new(id: u64, name: String, now_ms: u64) -> Self {
        Partition {
            id,
            name: name.into_boxed_str(),
            base: 0,
            msgs: MsgTable::with_capacity(1),
            retired_txn_index: RetiredIndex,
            txn_forgotten: 0,
            cursors: Cursors::default(),
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
        self.cursors.grow_to(g + 1);
        let base = self.base;
        let c = self.cursors[g].get_or_insert_with(|| super::cursor::Cursor::at(seed_next.max(base)));
        if c.next < base {
            c.next = base;
        }
        c
    }

    /// Forgets transaction ids of messages created before `cutoff_ms`,
    /// in `index` too where the partition has one. With an index whose
    /// oldest remembered message is known to be young enough, nothing is
    /// read from the message table (see [`TxnIndex::oldest`]).
    pub fn forget_txns_before(&mut self, mut index: Option<&mut TxnIndex>, cutoff_ms: u64) {
        let mut from = self.txn_forgotten.max(self.base);
        if let Some((off, ms)) = index.as_deref().and_then(|i| i.oldest) {
            if off == from && ms >= cutoff_ms {
                return;
            }
        }
        let mut oldest = None;
        while let Some(m) = self.meta(from).copied() {
            if m.created_ms >= cutoff_ms {
                oldest = Some((from, m.created_ms));
                break;
            }
            forget(index.as_deref_mut(), m.txn, from);
            self.txn_forgotten = from + 1;
            from += 1;
        }
        if let Some(index) = index {
            index.oldest = oldest;
        }
    }

    /// Appends a message's metadata; the caller notes its transaction id
    /// in the index ([`crate::txn_index::TxnIndexes::appended`]).
    pub fn push_meta(&mut self, meta: MsgMeta) -> u64 {
        let offset = self.next_offset();
        self.msgs.push_back(meta);
        offset
    }

    /// Whether this partition holds enough messages for its transaction
    /// ids to be worth an index ([`INDEX_FROM`]).
    pub fn wants_txn_index(&self) -> bool {
        self.msgs.len() >= INDEX_FROM
    }

    /// The index of the remembered transaction ids, built from the message
    /// table: oldest first, so a repeated id ends on its newest offset.
    /// `None` where the remembered offsets span more than the index stores
    /// (2^32): that partition's lookups scan.
    pub fn build_txn_index(&self) -> Option<TxnIndex> {
        let from = self.txn_forgotten.max(self.base);
        let mut ids = TxnTable::with_capacity((self.next_offset() - from) as usize, from);
        for off in from..self.next_offset() {
            let m = self.meta(off).expect("kept offsets");
            let hash = m.txn();
            ids.insert(hash, off, |o| self.holds_txn(o, hash)).ok()?;
        }
        Some(TxnIndex { ids, oldest: None })
    }

    /// Whether the message at `offset` has this transaction-id hash.
    pub fn holds_txn(&self, offset: u64, hash: u128) -> bool {
        self.meta(offset).is_some_and(|m| m.txn() == hash)
    }

    /// The newest remembered offset with this transaction-id hash: from
    /// `index` where the partition has one, else by scanning.
    pub fn remembered_txn(&self, index: Option<&TxnIndex>, hash: u128) -> Option<u64> {
        if let Some(index) = index {
            return index.ids.get(hash, |o| self.holds_txn(o, hash));
        }
        (self.txn_forgotten.max(self.base)..self.next_offset()).rev().find(|off| self.holds_txn(*off, hash))
    }

    /// The offset of a message by transaction-id hash: remembered, or (for
    /// an id already forgotten) by scanning `range`.
    pub fn find_txn(&self, index: Option<&TxnIndex>, hash: u128, range: std::ops::Range<u64>) -> Option<u64> {
        if let Some(off) = self.remembered_txn(index, hash) {
            return Some(off);
        }
        range.into_iter().find(|off| self.holds_txn(*off, hash))
    }

    /// Drops messages below `offset` (retention), from `index` too; cursors
    /// below follow. Returns the body bytes dropped.
    pub fn drop_before(&mut self, mut index: Option<&mut TxnIndex>, offset: u64) -> u64 {
        let offset = offset.min(self.next_offset());
        let mut bytes = 0;
        while self.base < offset {
            if let Some(m) = self.msgs.pop_front() {
                forget(index.as_deref_mut(), m.txn, self.base);
                bytes += u64::from(m.len);
            }
            self.base += 1;
        }
        bytes
    }

    /// Body bytes of the kept messages (a walk of every one).
    pub fn kept_bytes(&self) -> u64 {
        self.msgs.iter().map(|m| u64::from(m.len)).sum()
    }
}

/// Removes a forgotten offset's id from the index, unless a newer offset
/// with the same id holds its entry.
fn forget(index: Option<&mut TxnIndex>, key: TxnKey, offset: u64) {
    if let Some(index) = index {
        index.ids.remove(key.into(), offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_metadata_and_partitions_stay_small() {
        assert_eq!(std::mem::size_of::<MsgMeta>(), 40);
        // With its shared count (8 bytes, `partitions::PArc`) a partition
        // fills a 112-byte allocation; at 113 it would take 128.
        assert!(std::mem::size_of::<Partition>() <= 104, "{}", std::mem::size_of::<Partition>());
    }
}
