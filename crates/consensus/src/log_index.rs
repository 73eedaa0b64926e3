//! Where each Raft log entry lives: an in-memory map from log index to the
//! WAL record holding it, plus a cache of recent entries so that applying an
//! entry just appended does not read it back from disk.

use std::collections::{BTreeMap, VecDeque};

use regina_storage::RecordPos;

use crate::types::{LogId, RaftEntry};

/// Entries kept decoded in memory after their append.
const CACHE_ENTRIES_MAX: usize = 8192;

#[derive(Default)]
pub struct LogIndex {
    /// Index of `locs[0]`.
    pub first: u64,
    /// For each index from `first`: its log id and, once written, its record.
    pub locs: VecDeque<(LogId, Option<RecordPos>)>,
    pub last_purged: Option<LogId>,
    cache: BTreeMap<u64, RaftEntry>,
}

impl LogIndex {
    pub fn last_log_id(&self) -> Option<LogId> {
        self.locs.back().map(|(id, _)| *id).or(self.last_purged)
    }

    /// Index one past the last entry.
    pub fn end(&self) -> u64 {
        self.first + self.locs.len() as u64
    }

    /// Adds an entry at the end, dropping any entries at or after its index
    /// (a leader overwriting a follower's uncommitted tail).
    pub fn push(&mut self, id: LogId, pos: Option<RecordPos>, entry: Option<RaftEntry>) {
        if self.locs.is_empty() {
            self.first = id.index;
        }
        if id.index < self.end() {
            self.truncate(id.index);
            if self.locs.is_empty() {
                self.first = id.index;
            }
        }
        assert_eq!(id.index, self.end(), "log indexes must be contiguous");
        self.locs.push_back((id, pos));
        if let Some(e) = entry {
            self.cache.insert(id.index, e);
            self.evict();
        }
    }

    /// Trims the cache to its bound, never dropping an entry that is not yet
    /// on disk (it could not be read back).
    fn evict(&mut self) {
        while self.cache.len() > CACHE_ENTRIES_MAX {
            let Some(&oldest) = self.cache.keys().next() else {
                return;
            };
            if self.get(oldest).is_some_and(|(_, pos)| pos.is_none()) {
                return;
            }
            self.cache.remove(&oldest);
        }
    }

    /// Records where an appended entry was written.
    pub fn set_pos(&mut self, index: u64, id: LogId, pos: RecordPos) {
        if let Some(slot) = index.checked_sub(self.first).and_then(|i| self.locs.get_mut(i as usize)) {
            if slot.0 == id {
                slot.1 = Some(pos);
            }
        }
        self.evict();
    }

    /// Drops entries at and after `since`.
    pub fn truncate(&mut self, since: u64) {
        while self.end() > since.max(self.first) && !self.locs.is_empty() {
            self.locs.pop_back();
        }
        self.cache.split_off(&since);
    }

    /// Drops entries at and before `upto`.
    pub fn purge(&mut self, upto: LogId) {
        while self.first <= upto.index && !self.locs.is_empty() {
            self.locs.pop_front();
            self.first += 1;
        }
        if self.locs.is_empty() {
            self.first = upto.index + 1;
        }
        self.cache = self.cache.split_off(&(upto.index + 1));
        if self.last_purged.is_none_or(|p| p.index < upto.index) {
            self.last_purged = Some(upto);
        }
    }

    pub fn get(&self, index: u64) -> Option<(LogId, Option<RecordPos>)> {
        index.checked_sub(self.first).and_then(|i| self.locs.get(i as usize)).copied()
    }

    pub fn cached(&self, index: u64) -> Option<&RaftEntry> {
        self.cache.get(&index)
    }
}
