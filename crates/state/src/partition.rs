//! A partition: an ordered lane of messages with gapless offsets from 0,
//! the dedup memory of its transaction ids, and one cursor per group.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::cursor::Cursor;

/// What the state keeps of one message; the body is on disk at `pos`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MsgMeta {
    pub pos: u64,
    pub len: u32,
    pub created_ms: u64,
    /// Hash of the message's transaction id.
    pub txn: u128,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    pub id: u64,
    pub name: String,
    /// Offset of `msgs[0]`; offsets below it were dropped by retention.
    pub base: u64,
    pub msgs: VecDeque<MsgMeta>,
    /// Transaction-id hash to offset, for dedup and ack resolution.
    pub txn_index: HashMap<u128, u64>,
    /// Offsets below this have been forgotten by `txn_index`.
    pub txn_forgotten: u64,
    /// One cursor per group of the queue, indexed by group number.
    pub cursors: Vec<Option<Cursor>>,
    pub created_ms: u64,
    pub last_write_ms: u64,
}

impl Partition {
    pub fn new(id: u64, name: String, now_ms: u64) -> Self {
        Partition {
            id,
            name,
            base: 0,
            msgs: VecDeque::new(),
            txn_index: HashMap::new(),
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
            self.forget_txn(m.txn, off);
            self.txn_forgotten = off + 1;
        }
    }

    fn forget_txn(&mut self, hash: u128, offset: u64) {
        if self.txn_index.get(&hash) == Some(&offset) {
            self.txn_index.remove(&hash);
        }
    }

    /// The offset of a message by transaction-id hash: from the index, or
    /// (for an id the index forgot) by scanning `range`.
    pub fn find_txn(&self, hash: u128, range: std::ops::Range<u64>) -> Option<u64> {
        if let Some(off) = self.txn_index.get(&hash) {
            return Some(*off);
        }
        range.into_iter().find(|off| self.meta(*off).is_some_and(|m| m.txn == hash))
    }

    /// Drops messages below `offset` (retention); cursors below follow.
    pub fn drop_before(&mut self, offset: u64) {
        let offset = offset.min(self.next_offset());
        while self.base < offset {
            if let Some(m) = self.msgs.pop_front() {
                self.forget_txn(m.txn, self.base);
            }
            self.base += 1;
        }
    }
}
