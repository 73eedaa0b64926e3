//! Where each Raft log entry lives: an in-memory map from log index to the
//! WAL record holding it, plus a cache of recent entries so that applying an
//! entry just appended does not read it back from disk. Each Raft group has
//! its own index, and so its own cache bounds: a busy group then never
//! evicts entries another group is about to apply, and no append has to lock
//! another group's index.

use std::collections::{BTreeMap, VecDeque};

use regina_storage::RecordPos;

use crate::types::{LogId, RaftEntry};

/// Entries kept decoded in memory after their append.
const CACHE_ENTRIES_MAX: usize = 8192;
/// Encoded bytes of the cached entries at most. A count alone let large
/// entries (pushes of thousands of messages, batches) pin gigabytes.
const CACHE_BYTES_MAX: usize = 64 << 20;

/// Where the oldest entry an index keeps was written, which is as far back
/// as the WAL must be kept for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Oldest {
    /// No entry is kept: the index needs nothing of the WAL.
    Nothing,
    /// Appended but not yet reported written; its position is unknown.
    Unwritten,
    At(RecordPos),
}

/// Entries a purge took out of the cache.
pub struct PurgedEntries(pub BTreeMap<u64, (RaftEntry, usize)>);

pub struct LogIndex {
    /// Index of `locs[0]`.
    pub first: u64,
    /// For each index from `first`: its log id and, once written, its record.
    pub locs: VecDeque<(LogId, Option<RecordPos>)>,
    pub last_purged: Option<LogId>,
    /// Recent entries with their encoded size.
    cache: BTreeMap<u64, (RaftEntry, usize)>,
    cache_bytes: usize,
    /// Bound on `cache_bytes`: the node's budget shared by its groups.
    cache_bytes_max: usize,
}

impl Default for LogIndex {
    fn default() -> Self {
        LogIndex::with_cache_share(1)
    }
}

/// Cache bytes one group keeps at least, however many groups share.
const CACHE_BYTES_MIN: usize = 4 << 20;

impl LogIndex {
    /// An empty index whose cache takes a `1/shares` part of the node's
    /// cache budget (one part per Raft group), and at least a few MiB.
    pub fn with_cache_share(shares: usize) -> Self {
        LogIndex {
            first: 0,
            locs: VecDeque::new(),
            last_purged: None,
            cache: BTreeMap::new(),
            cache_bytes: 0,
            cache_bytes_max: (CACHE_BYTES_MAX / shares.max(1)).max(CACHE_BYTES_MIN),
        }
    }

    pub fn last_log_id(&self) -> Option<LogId> {
        self.locs.back().map(|(id, _)| *id).or(self.last_purged)
    }

    /// Index one past the last entry.
    pub fn end(&self) -> u64 {
        self.first + self.locs.len() as u64
    }

    /// Adds an entry at the end, dropping any entries at or after its index
    /// (a leader overwriting a follower's uncommitted tail).
    /// `entry` comes with its encoded size, which bounds the cache.
    pub fn push(&mut self, id: LogId, pos: Option<RecordPos>, entry: Option<(RaftEntry, usize)>) {
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
        if let Some((e, bytes)) = entry {
            self.cache_bytes += bytes;
            if let Some((_, old)) = self.cache.insert(id.index, (e, bytes)) {
                self.cache_bytes -= old;
            }
            self.evict();
        }
    }

    /// Trims the cache to its bound, never dropping an entry that is not yet
    /// on disk (it could not be read back).
    fn evict(&mut self) {
        while self.cache.len() > CACHE_ENTRIES_MAX || self.cache_bytes > self.cache_bytes_max {
            let Some(&oldest) = self.cache.keys().next() else {
                return;
            };
            if self.get(oldest).is_some_and(|(_, pos)| pos.is_none()) {
                return;
            }
            if let Some((_, bytes)) = self.cache.remove(&oldest) {
                self.cache_bytes -= bytes;
            }
        }
    }

    /// Records where an appended entry was written.
    pub fn set_pos(&mut self, index: u64, id: LogId, pos: RecordPos) {
        if let Some(i) = index.checked_sub(self.first).map(|i| i as usize).filter(|i| *i < self.locs.len()) {
            if self.locs[i].0 == id {
                // Releasing WAL segments relies on the oldest kept entry
                // lying first in the WAL; the writer completes appends in
                // order, so an earlier entry was never placed after this one.
                let before = i.checked_sub(1).and_then(|b| self.locs[b].1);
                assert!(before.is_none_or(|b| b < pos), "entry {index} placed at {pos:?}, before its predecessor");
                self.locs[i].1 = Some(pos);
            }
        }
        self.evict();
    }

    /// Drops entries at and after `since`.
    pub fn truncate(&mut self, since: u64) {
        while self.end() > since.max(self.first) && !self.locs.is_empty() {
            self.locs.pop_back();
        }
        let dropped = self.cache.split_off(&since);
        self.cache_bytes -= dropped.values().map(|(_, b)| b).sum::<usize>();
    }

    /// Drops entries at and before `upto`. Returns the cached ones, for
    /// the caller to free where it costs nothing
    /// ([`crate::background_drop`]).
    pub fn purge(&mut self, upto: LogId) -> PurgedEntries {
        while self.first <= upto.index && !self.locs.is_empty() {
            self.locs.pop_front();
            self.first += 1;
        }
        if self.locs.is_empty() {
            self.first = upto.index + 1;
        }
        let kept = self.cache.split_off(&(upto.index + 1));
        self.cache_bytes -= self.cache.values().map(|(_, b)| b).sum::<usize>();
        let purged = std::mem::replace(&mut self.cache, kept);
        if self.last_purged.is_none_or(|p| p.index < upto.index) {
            self.last_purged = Some(upto);
        }
        PurgedEntries(purged)
    }

    /// Replays an entry found in the WAL at open. Entries at or before the
    /// purge point are skipped; anything else must continue the log.
    pub fn replay(&mut self, id: LogId, pos: RecordPos) -> Result<(), String> {
        if self.last_purged.is_some_and(|p| id.index <= p.index) {
            return Ok(());
        }
        if id.index > self.end() && !self.locs.is_empty() {
            return Err(format!("entry {} follows {}", id.index, self.end() - 1));
        }
        self.push(id, Some(pos), None);
        Ok(())
    }

    /// The oldest kept entry's record. Entries are written in the order they
    /// are pushed, so no kept entry lies before it.
    pub fn oldest(&self) -> Oldest {
        match self.locs.front() {
            None => Oldest::Nothing,
            Some((_, None)) => Oldest::Unwritten,
            Some((_, Some(pos))) => Oldest::At(*pos),
        }
    }

    pub fn get(&self, index: u64) -> Option<(LogId, Option<RecordPos>)> {
        index.checked_sub(self.first).and_then(|i| self.locs.get(i as usize)).copied()
    }

    pub fn cached(&self, index: u64) -> Option<&RaftEntry> {
        self.cache.get(&index).map(|(e, _)| e)
    }

    /// Encoded bytes the cache holds.
    pub fn cached_bytes(&self) -> usize {
        self.cache_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(index: u64) -> (LogId, RaftEntry) {
        let id = LogId::new(CommittedLeaderId::new(1, 1), index);
        (id, RaftEntry { log_id: id, payload: EntryPayload::Blank })
    }

    #[test]
    fn the_cache_is_bounded_by_bytes_but_keeps_what_is_not_on_disk() {
        let mut idx = LogIndex::default();
        let big = CACHE_BYTES_MAX / 4;
        for i in 1..=10 {
            let (id, e) = entry(i);
            idx.push(id, None, Some((e, big)));
        }
        // Nothing is on disk yet: nothing may be dropped.
        assert!(idx.cached(1).is_some() && idx.cached(10).is_some());
        for i in 1..=10 {
            let (id, _) = entry(i);
            idx.set_pos(i, id, RecordPos { segment: 1, offset: i * 100 });
        }
        assert!(idx.cached_bytes() <= CACHE_BYTES_MAX, "{} cached bytes", idx.cached_bytes());
        assert!(idx.cached(1).is_none(), "the oldest went first");
        assert!(idx.cached(10).is_some(), "the newest stays");
        let cached = (1..=10).filter(|i| idx.cached(*i).is_some()).count();
        assert_eq!(idx.purge(entry(10).0).0.len(), cached, "the purge hands back what it took out");
        assert_eq!(idx.cached_bytes(), 0);
    }

    #[test]
    fn oldest_is_the_first_kept_entry() {
        let pos = |offset| RecordPos { segment: 2, offset };
        let mut idx = LogIndex::default();
        assert_eq!(idx.oldest(), Oldest::Nothing);
        idx.replay(entry(1).0, pos(10)).unwrap();
        idx.replay(entry(2).0, pos(20)).unwrap();
        assert_eq!(idx.oldest(), Oldest::At(pos(10)));
        idx.purge(entry(1).0);
        assert_eq!(idx.oldest(), Oldest::At(pos(20)));
        idx.truncate(2);
        assert_eq!(idx.oldest(), Oldest::Nothing);
        let (id, e) = entry(2);
        idx.push(id, None, Some((e, 1)));
        assert_eq!(idx.oldest(), Oldest::Unwritten);
    }

    #[test]
    fn replay_skips_purged_entries_and_refuses_gaps() {
        let pos = |offset| RecordPos { segment: 0, offset };
        let mut idx = LogIndex::default();
        idx.purge(entry(3).0);
        for i in 1..=4 {
            idx.replay(entry(i).0, pos(i)).unwrap();
        }
        assert_eq!((idx.first, idx.end()), (4, 5));
        let err = idx.replay(entry(6).0, pos(6)).unwrap_err();
        assert_eq!(err, "entry 6 follows 4");
    }
}
